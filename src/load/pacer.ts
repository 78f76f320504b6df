// The open loop's pacer: calls `due(i, now)` for each entry of an absolute schedule (ms from `origin`,
// on performance.now's clock) as soon as its time has come. Node timers round to whole ms and fire late
// under load, so it sleeps on a timer until SPIN_WINDOW_MS before the next entry, then on a futex in
// short slices (no CPU burnt; on Node 20 each slice still costs an Immediate and a clock array),
// yielding to I/O between slices. Everything due in one
// pass goes out in that pass, never one entry per event-loop turn.
import { MAX_TIMER_MS } from "../sleep.ts";

/** Sleep on a timer until this far before the target, then in short slices. */
const SPIN_WINDOW_MS = 1.5;
/** Inside that window: sleep this long at a time (it blocks I/O, so it stays short), then yield. */
const SPIN_SLICE_MS = 0.1;
const SLEEPER = new Int32Array(new SharedArrayBuffer(4));

export interface Pacer {
  /** Sends everything due at run time `now` (ms); also called between socket reads. */
  poll(now: number): void;
  /** Stops pacing (the rest of the schedule is not sent). */
  stop(): void;
  /** Resolves when the whole schedule was dispatched, or on stop(). */
  done: Promise<void>;
}

/** Entries this close to the one before are one burst (the pacer sleeps on no timer between them). */
const BURST_GAP_MS = SPIN_WINDOW_MS + 1;
/** A burst looked ahead at spans at most this much schedule time (at high rates connections cycle). */
const AHEAD_SPAN_MS = 20;

/** The end (exclusive) of the burst that starts at entry `i`: what the pacer announces to `ahead` at once. */
export function burstEnd(times: Float64Array, i: number): number {
  let j = i + 1;
  while (j < times.length && times[j]! - times[j - 1]! < BURST_GAP_MS && times[j]! - times[i]! <= AHEAD_SPAN_MS) j++;
  return j;
}

export interface PaceOptions {
  /**
   * Called while the pacer waits for entry `first` (it is ≥ BURST_GAP_MS away), once per burst: entries
   * first … first+count−1 are due together, the last at `lastMs`. The open loop readies connections here,
   * so none is opened while the burst is sent.
   */
  ahead?: (first: number, count: number, lastMs: number) => void;
}

export function pace(
  times: Float64Array,
  origin: number,
  due: (i: number, now: number) => void,
  opts: PaceOptions = {},
): Pacer {
  const n = times.length;
  let i = 0;
  /** Entries below this were already announced to `ahead`. */
  let announced = 0;
  const ahead = opts.ahead;
  const announce = () => {
    const j = burstEnd(times, i);
    announced = j;
    ahead!(i, j - i, times[j - 1]!);
  };
  let timer: NodeJS.Timeout | null = null;
  let finished = false;
  let resolveDone!: () => void;
  const done = new Promise<void>((r) => {
    resolveDone = r;
  });
  const stop = () => {
    if (finished) return;
    finished = true;
    if (timer) clearTimeout(timer);
    resolveDone();
  };
  /** Dispatches everything due at `now`; true when the schedule is done. */
  const sendDue = (now: number): boolean => {
    while (i < n && times[i]! <= now) {
      due(i, now);
      i++;
      now = performance.now() - origin;
    }
    if (i >= n) stop();
    return finished;
  };
  const tick = () => {
    timer = null;
    if (finished) return;
    let now = performance.now() - origin;
    let d = times[i]! - now;
    if (d > 0 && d <= SPIN_WINDOW_MS) {
      // Spinning on setImmediate instead cost one Immediate per loop turn, and a busy-wait one clock
      // array per performance.now(): at 1,000 req/s that garbage made the scavenges set the lag.
      Atomics.wait(SLEEPER, 0, 0, Math.min(d, SPIN_SLICE_MS));
      now = performance.now() - origin;
      d = times[i]! - now;
    }
    if (d <= 0) {
      if (sendDue(now)) return;
      d = times[i]! - (performance.now() - origin);
    }
    if (d > SPIN_WINDOW_MS + 1) {
      // In the gap before a burst: what it needs is readied now, not while it is sent.
      if (ahead && i >= announced) {
        announce();
        d = times[i]! - (performance.now() - origin);
      }
      if (d > SPIN_WINDOW_MS + 1) {
        // A wait past Node's timer limit is chunked: a longer delay fires at once (and warns), in a loop.
        timer = setTimeout(tick, Math.min(MAX_TIMER_MS, Math.floor(d - SPIN_WINDOW_MS)));
        return;
      }
    }
    setImmediate(tick);
  };
  if (n === 0) stop();
  else tick();
  return {
    poll(now) {
      if (!finished && i < n && times[i]! <= now) sendDue(now);
    },
    stop,
    done,
  };
}
