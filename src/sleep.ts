// The one abortable sleep the polling loops share (live views, telemetry sources, session think time).

/**
 * The longest delay Node's timers take (2^31 − 1 ms, 24.86 days). A longer one is set to 1 ms with a
 * TimeoutOverflowWarning: a loop that re-arms it spins and floods stderr. Longer waits are chunked.
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** Resolves after `ms`, or at once when the signal aborts (never rejects: the caller checks the signal). */
export function abortableSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise<void>((resolve) => {
    if (signal?.aborted) return resolve();
    let left = ms;
    let t = arm();
    function arm(): NodeJS.Timeout {
      const d = Math.min(left, MAX_TIMER_MS);
      left -= d;
      return setTimeout(left > 0 ? () => (t = arm()) : done, d);
    }
    function done() {
      clearTimeout(t);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}
