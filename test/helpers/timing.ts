// Timing bounds from noise a run measured itself, so a loaded host widens them by what it did and no more.

/** The sim's catch-up window (src/sim/engine.ts CATCH_UP_MS): a step later than this restarts the chain. */
export const SIM_CATCH_UP_MS = 100;

/**
 * How far one request's token gaps can sum from its steps' through noise alone, as its gaps show it. The sim chains
 * steps on deadlines, so a token made late (a timer, a stall, a slow delivery) is caught up within the catch-up
 * window: only lateness at the first token (short gaps after it) or the last (long gaps before it) moves the sum,
 * and a stall longer than the window (one gap that long). Returns ms: the largest deficit of a prefix and the
 * largest excess of a suffix, each within the window, plus every gap's excess beyond the window. A regression that
 * lengthens every gap by x is absorbed only over the window (≈ 100 ms of gaps), so it still fails the bound.
 * `ref(i)` is gap i's step time from the profile, on the same clock as the gaps.
 */
export function endSlackMs(gaps: ArrayLike<number>, ref: (i: number) => number, windowMs = SIM_CATCH_UP_MS): number {
  const n = gaps.length;
  let deficit = 0;
  let cum = 0;
  let span = 0;
  for (let i = 0; i < n && span <= windowMs; i++) {
    span += ref(i);
    cum += ref(i) - gaps[i]!;
    deficit = Math.max(deficit, cum);
  }
  let excess = 0;
  cum = 0;
  span = 0;
  for (let i = n - 1; i >= 0 && span <= windowMs; i--) {
    span += ref(i);
    cum += gaps[i]! - ref(i);
    excess = Math.max(excess, cum);
  }
  let restarts = 0;
  for (let i = 0; i < n; i++) if (gaps[i]! > windowMs) restarts += gaps[i]! - ref(i);
  return deficit + excess + restarts;
}
