// Capacity search (pure: the runs, the clock and the abort signal are passed in): the highest load at which
// the share of requests meeting the SLO stays ≥ a target, with an interval from the run-to-run spread.
// The load is an abstract multiplier: a request rate, a replay speed, anything a trial can scale.
//
// Statistics (docs/metrics.md, "Capacity search"):
// 1. bracket on a log scale: from the start load, × growth until a run fails the target (÷ until one passes);
// 2. replicate both ends of the bracket and re-decide on the mean of the runs' good shares (a lucky pass
//    near the boundary moves the bracket instead of fixing it);
// 3. bisect at the geometric midpoint, each level run `replicates` times, until hi/lo ≤ 1 + tolerance;
// 4. estimate: the isotonic (PAVA, non-increasing) fit of the levels' mean share against load, and the
//    load where it crosses the target, linear in log load between the two levels around it;
// 5. interval: 95 % percentile bootstrap of that crossing, resampling runs within each level (the spread
//    between runs at one load), widened to cover the final bracket (the search's resolution).
import { Rng } from "./schedule.ts";

export interface TrialOutcome<T = unknown> {
  /** Requests that met every SLO, and requests that finished (successes and failures; aborted ones not). */
  good: number;
  total: number;
  /** Of `total`, requests that ended in an error (the server's, or the connection's). Default 0. */
  failed?: number;
  /** The first failed request's error as the server gave it (shown when every request failed). */
  error?: string;
  /** An interrupted trial: the search stops and does not count it. */
  partial?: boolean;
  /** The trial was cut at `timeLeftMs`: the search stops on its time bound and does not count it. */
  cut?: boolean;
  detail?: T;
}

/**
 * Runs the workload at `load` (the multiplier), once; `replicate` counts runs at that load from 0. The run
 * must end within `limit.timeLeftMs` (what is left of the search's time bound), cut if need be.
 */
export type LoadTrial<T = unknown> = (
  load: number,
  replicate: number,
  limit: { timeLeftMs: number },
) => Promise<TrialOutcome<T>>;

/** The search's time bound unless one is given: a hostile server cannot stretch it (see maxTimeMs). */
export const DEFAULT_CAPACITY_MAX_TIME_MS = 30 * 60_000;

/**
 * Finished requests, all failed, that tell a failing server: one that serves even half its requests gives
 * 10 failures in a row 0.1 % of the time. benchTrial stops a run there (BenchOptions.stopAfterFailures).
 */
export const ALL_FAILED_MIN = 10;

/** z for a two-sided 95 % interval. */
const Z95 = 1.959963984540054;

/**
 * The fewest finished requests a run needs to be judged against a target share p: its share's 95 %
 * binomial interval at the target, p ± z·√(p(1 − p)/n), must fit inside [0, 1], i.e.
 * n ≥ z²·max(p, 1 − p) / min(p, 1 − p) (381 for 0.99, 35 for 0.9, 4 for 0.5). A smaller run cannot tell
 * the target from a share one interval away (a run of one request is all or nothing). Infinite at p = 1.
 */
export function minRunRequests(target: number): number {
  const lo = Math.min(target, 1 - target);
  return lo > 0 ? Math.ceil((Z95 * Z95 * Math.max(target, 1 - target)) / lo - 1e-9) : Number.POSITIVE_INFINITY;
}

export interface CapacityOptions {
  /** Target share of requests meeting the SLO, in (0, 1): a share of 1 cannot be judged (minRunRequests). */
  target: number;
  /** First load to try (> 0). */
  start: number;
  /** Loads outside [minLoad, maxLoad] are not tried. Default [start / 1024, start × 1024]. */
  minLoad?: number;
  maxLoad?: number;
  /** Bracketing factor. Default 2. */
  growth?: number;
  /** Stop bisecting when hi/lo ≤ 1 + tolerance. Default 0.05. */
  tolerance?: number;
  /** Runs per level at the bracket's ends and in the bisection. Default 3. */
  replicates?: number;
  /**
   * Bounds on the whole search. Defaults 30 runs and DEFAULT_CAPACITY_MAX_TIME_MS; each run is given what
   * is left of the time (a run cut at it stops the search, uncounted).
   */
  maxRuns?: number;
  maxTimeMs?: number;
  /** Fewest finished requests a run must have to be judged. Default minRunRequests(target). */
  minRunRequests?: number;
  /** Bootstrap draws and seed. Defaults 2000, 0. */
  bootstrap?: number;
  seed?: number;
}

export interface CapacityDeps {
  /** Monotonic ms. */
  now: () => number;
  signal?: AbortSignal;
  onRun?: (run: CapacityRun) => void;
}

export interface CapacityRun<T = unknown> {
  index: number;
  load: number;
  replicate: number;
  phase: "bracket" | "confirm" | "bisect";
  good: number;
  total: number;
  /** Of total, requests that ended in an error. */
  failed: number;
  /** good / total; 0 when nothing finished. */
  share: number;
  pass: boolean;
  wallMs: number;
  detail?: T;
}

export interface CapacityLevel {
  load: number;
  runs: number;
  meanShare: number;
  minShare: number;
  maxShare: number;
  /** The isotonic fit's value at this level. */
  fitted: number;
}

/**
 * Why the search ended. `all-failed`: a run in which every request failed, not explained by overload (see
 * findCapacity); `too-small`: a run too small to judge (minRunRequests). Neither gives a capacity.
 */
export type CapacityStop =
  | "converged"
  | "max-runs"
  | "max-time"
  | "interrupted"
  | "below-min"
  | "above-max"
  | "all-failed"
  | "too-small";

export interface CapacityResult<T = unknown> {
  target: number;
  /** The load where the fitted share crosses the target; null when no load passed (or none failed: see lowerBound). */
  capacity: number | null;
  /** 95 % interval (bootstrap over runs, widened to the final bracket); null with capacity. */
  interval: { lo: number; hi: number } | null;
  /** The highest load whose runs met the target on average, and the lowest that did not. */
  bracket: { pass: number | null; fail: number | null };
  /** When every load tried passed: capacity is at least this. */
  lowerBound: number | null;
  levels: CapacityLevel[];
  runs: CapacityRun<T>[];
  stopped: CapacityStop;
  /** The fewest finished requests a run needed to be judged. */
  minRunRequests: number;
  /** The run that ended the search on `all-failed` and its first error, as the server said it. */
  failure: { run: number; load: number; error: string | null } | null;
  method: string;
  notes: string[];
}

export const CAPACITY_METHOD =
  "log-scale bracket, replicated ends, geometric bisection; capacity = crossing of the isotonic fit of mean good share vs log load; 95 % interval = percentile bootstrap over runs within each level, widened to the final bracket";

/** Pool-adjacent-violators for a non-increasing fit (weights = runs per level). */
export function isotonicDecreasing(values: number[], weights: number[]): number[] {
  const blocks: Array<{ v: number; w: number; n: number }> = [];
  for (let i = 0; i < values.length; i++) {
    blocks.push({ v: values[i]!, w: weights[i]!, n: 1 });
    while (blocks.length > 1 && blocks[blocks.length - 2]!.v < blocks[blocks.length - 1]!.v) {
      const b = blocks.pop()!;
      const a = blocks.pop()!;
      blocks.push({ v: (a.v * a.w + b.v * b.w) / (a.w + b.w), w: a.w + b.w, n: a.n + b.n });
    }
  }
  const out: number[] = [];
  for (const b of blocks) for (let i = 0; i < b.n; i++) out.push(b.v);
  return out;
}

/**
 * Where a non-increasing fit over ascending loads crosses the target: linear in log load between the last
 * level at or above it and the next one. "above" when every level passes, "below" when none does.
 */
export function crossing(loads: number[], fitted: number[], target: number): number | "above" | "below" {
  if (fitted.length === 0 || !(fitted[0]! >= target)) return "below";
  let i = 0;
  while (i + 1 < fitted.length && fitted[i + 1]! >= target) i++;
  if (i === fitted.length - 1) return "above";
  const f0 = fitted[i]!;
  const f1 = fitted[i + 1]!;
  const x0 = Math.log(loads[i]!);
  const x1 = Math.log(loads[i + 1]!);
  const u = f0 > f1 ? (f0 - target) / (f0 - f1) : 0;
  return Math.exp(x0 + u * (x1 - x0));
}

function groupLevels(runs: CapacityRun[]): Array<{ load: number; shares: number[] }> {
  const m = new Map<number, number[]>();
  for (const r of runs) {
    const a = m.get(r.load);
    if (a) a.push(r.share);
    else m.set(r.load, [r.share]);
  }
  return [...m.entries()].sort((a, b) => a[0] - b[0]).map(([load, shares]) => ({ load, shares }));
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

/** The estimate and its interval from the runs so far (pure; exported for tests). */
export function estimateCapacity(
  runs: CapacityRun[],
  target: number,
  opts: { bootstrap?: number; seed?: number } = {},
): Pick<CapacityResult, "capacity" | "interval" | "bracket" | "lowerBound" | "levels"> {
  const lv = groupLevels(runs);
  const loads = lv.map((l) => l.load);
  const means = lv.map((l) => mean(l.shares));
  const weights = lv.map((l) => l.shares.length);
  const fitted = isotonicDecreasing(means, weights);
  const levels: CapacityLevel[] = lv.map((l, i) => ({
    load: l.load,
    runs: l.shares.length,
    meanShare: means[i]!,
    minShare: Math.min(...l.shares),
    maxShare: Math.max(...l.shares),
    fitted: fitted[i]!,
  }));
  let pass: number | null = null;
  let fail: number | null = null;
  for (let i = 0; i < loads.length; i++) {
    if (fitted[i]! >= target) pass = loads[i]!;
    else if (fail === null) fail = loads[i]!;
  }
  const c = crossing(loads, fitted, target);
  if (c === "below") return { capacity: null, interval: null, bracket: { pass, fail }, lowerBound: null, levels };
  if (c === "above") return { capacity: null, interval: null, bracket: { pass, fail }, lowerBound: pass, levels };
  // Bootstrap: resample the runs of each level (the run-to-run spread), refit, find the crossing again.
  // A draw where every level passes (or none does) is censored at the highest (lowest) load tried.
  const rng = new Rng(opts.seed ?? 0);
  const B = opts.bootstrap ?? 2000;
  const draws: number[] = [];
  for (let b = 0; b < B; b++) {
    const m = lv.map((l) => {
      let s = 0;
      for (let k = 0; k < l.shares.length; k++) s += l.shares[Math.floor(rng.next() * l.shares.length)]!;
      return s / l.shares.length;
    });
    const x = crossing(loads, isotonicDecreasing(m, weights), target);
    draws.push(x === "above" ? loads[loads.length - 1]! : x === "below" ? loads[0]! : x);
  }
  draws.sort((a, b) => a - b);
  const q = (p: number) => draws[Math.min(draws.length - 1, Math.max(0, Math.round(p * (draws.length - 1))))]!;
  let lo = q(0.025);
  let hi = q(0.975);
  // The true crossing lies between the last passing and the first failing level under monotonicity.
  if (pass !== null) lo = Math.min(lo, pass);
  if (fail !== null) hi = Math.max(hi, fail);
  return { capacity: c, interval: { lo, hi }, bracket: { pass, fail }, lowerBound: null, levels };
}

export async function findCapacity<T>(
  trial: LoadTrial<T>,
  opts: CapacityOptions,
  deps: CapacityDeps,
): Promise<CapacityResult<T>> {
  const target = opts.target;
  if (!(target > 0 && target <= 1)) throw new RangeError(`target share must be in (0, 1], got ${target}`);
  if (!(opts.start > 0 && Number.isFinite(opts.start)))
    throw new RangeError(`start load must be finite and > 0, got ${opts.start}`);
  const growth = opts.growth ?? 2;
  if (!(growth > 1)) throw new RangeError(`growth must be > 1, got ${growth}`);
  const tol = opts.tolerance ?? 0.05;
  if (!(tol > 0)) throw new RangeError(`tolerance must be > 0, got ${tol}`);
  const reps = opts.replicates ?? 3;
  if (!(Number.isInteger(reps) && reps >= 1)) throw new RangeError(`replicates must be an integer ≥ 1, got ${reps}`);
  const maxRuns = opts.maxRuns ?? 30;
  const maxTime = opts.maxTimeMs ?? DEFAULT_CAPACITY_MAX_TIME_MS;
  if (!(maxTime > 0 && Number.isFinite(maxTime)))
    throw new RangeError(`maxTimeMs must be finite and > 0, got ${maxTime}`);
  const minN = opts.minRunRequests ?? minRunRequests(target);
  if (!Number.isFinite(minN))
    throw new RangeError(
      `a target share of ${target} cannot be judged from a run of any size (a share of 1 has no binomial interval to fit); give a share below 1, e.g. 0.999 (${minRunRequests(0.999)} requests a run)`,
    );
  const minLoad = opts.minLoad ?? opts.start / 1024;
  const maxLoad = opts.maxLoad ?? opts.start * 1024;
  const t0 = deps.now();
  const runs: CapacityRun<T>[] = [];
  const notes: string[] = [];
  let stopped: CapacityStop | null = null;
  let failure: CapacityResult["failure"] = null;
  /** The run that ended the search as too small to judge, and the load of a run cut at the time bound. */
  let small: CapacityRun<T> | null = null;
  let cut: number | null = null;
  let smallError: string | null = null;

  const out = (why: CapacityStop): boolean => {
    if (stopped === null) stopped = why;
    return false;
  };
  const budget = (): boolean => {
    if (deps.signal?.aborted) return out("interrupted");
    if (runs.length >= maxRuns) return out("max-runs");
    if (deps.now() - t0 >= maxTime) return out("max-time");
    return stopped === null;
  };
  const at = (load: number) => runs.filter((r) => r.load === load);
  const meanAt = (load: number) => mean(at(load).map((r) => r.share));
  /** One more run at load; false when the budget or an interrupt stopped it. */
  const one = async (load: number, phase: CapacityRun["phase"]): Promise<boolean> => {
    if (!budget()) return false;
    const rep = at(load).length;
    const s = deps.now();
    const o = await trial(load, rep, { timeLeftMs: Math.max(0, maxTime - (s - t0)) });
    if (deps.signal?.aborted) return out("interrupted");
    if (o.cut) {
      cut = load;
      // Cut, yet every request it finished failed, on a server that never served one: that is the answer.
      if (o.total >= ALL_FAILED_MIN && (o.failed ?? 0) >= o.total && !runs.some((r) => r.total > r.failed)) {
        failure = { run: runs.length, load, error: o.error ?? null };
        return out("all-failed");
      }
      return out("max-time");
    }
    if (o.partial) return out("interrupted");
    const share = o.total > 0 ? o.good / o.total : 0;
    const failed = Math.min(o.total, o.failed ?? 0);
    const run: CapacityRun<T> = {
      index: runs.length,
      load,
      replicate: rep,
      phase,
      good: o.good,
      total: o.total,
      failed,
      share,
      pass: share >= target,
      wallMs: deps.now() - s,
      detail: o.detail,
    };
    runs.push(run);
    deps.onRun?.(run as CapacityRun);
    // Every request failed (ALL_FAILED_MIN at least: fewer say little): overload only when a lower load served
    // requests and none at or above this one did (a server shedding load with 503s). Otherwise (nothing ever
    // served, or a load that served before now fails) the server is broken, and more runs only halve the
    // rate and double the wait.
    if (o.total >= ALL_FAILED_MIN && failed === o.total) {
      const served = (r: CapacityRun<T>) => r.total > r.failed;
      const below = runs.some((r) => r.load < load && served(r));
      const atOrAbove = runs.some((r) => r.load >= load && served(r));
      if (!below || atOrAbove) {
        failure = { run: run.index, load, error: o.error ?? null };
        return out("all-failed");
      }
    }
    if (o.total < minN) {
      small = run;
      smallError = o.error ?? null;
      return out("too-small");
    }
    return true;
  };
  /** Tops a level up to `reps` runs; its mean decides. null when stopped. */
  const replicate = async (load: number, phase: CapacityRun["phase"]): Promise<boolean | null> => {
    while (at(load).length < reps) if (!(await one(load, phase))) return null;
    return meanAt(load) >= target;
  };

  let pass: number | null = null;
  let fail: number | null = null;
  const search = async (): Promise<void> => {
    // 1. Bracket, one run per load.
    let x = Math.min(maxLoad, Math.max(minLoad, opts.start));
    if (!(await one(x, "bracket"))) return;
    if (meanAt(x) >= target) pass = x;
    else fail = x;
    for (;;) {
      // 2. Replicate the ends once both exist; a flipped end extends the bracket.
      while (pass === null || fail === null) {
        if (pass === null) {
          x = fail! / growth;
          if (x < minLoad) return void out("below-min");
          if (!(await one(x, "bracket"))) return;
          if (meanAt(x) >= target) pass = x;
          else fail = x;
        } else {
          x = pass * growth;
          if (x > maxLoad) return void out("above-max");
          if (!(await one(x, "bracket"))) return;
          if (meanAt(x) >= target) pass = x;
          else fail = x;
        }
      }
      const p = await replicate(pass, "confirm");
      if (p === null) return;
      if (!p) {
        fail = pass;
        pass = null;
        continue;
      }
      const f = await replicate(fail, "confirm");
      if (f === null) return;
      if (f) {
        pass = fail;
        fail = null;
        continue;
      }
      break;
    }
    // 3. Geometric bisection with replicates.
    while (fail! / pass! > 1 + tol) {
      const mid = Math.sqrt(pass! * fail!);
      const ok = await replicate(mid, "bisect");
      if (ok === null) return;
      if (ok) pass = mid;
      else fail = mid;
    }
    out("converged");
  };
  await search();
  const est = estimateCapacity(runs as CapacityRun[], target, { bootstrap: opts.bootstrap, seed: opts.seed });
  // Set inside the closures above; the casts undo TS's narrowing to the initial null.
  const why: CapacityStop = (stopped as CapacityStop | null) ?? "converged";
  const tooSmall = small as CapacityRun<T> | null;
  const failedRun = failure as CapacityResult["failure"];
  const cutAt = cut as number | null;
  if (why === "too-small" || why === "all-failed") {
    // Runs too small to judge, or a server that only fails, give no capacity, however tight the fit looks.
    est.capacity = null;
    est.interval = null;
    est.lowerBound = null;
  }
  if (why === "too-small" && tooSmall)
    notes.push(
      `inconclusive: run ${tooSmall.index + 1} at load ${fmtLoad(tooSmall.load)} finished ${tooSmall.total} request${tooSmall.total === 1 ? "" : "s"}${tooSmall.failed ? ` (${tooSmall.failed} failed${smallError ? `: ${smallError}` : ""})` : ""}; judging a share of ${target} needs at least ${minN} a run (its 95 % binomial interval, ${target} ± 1.96·√(${target}·${+(1 - target).toFixed(6)}/n), must fit inside [0, 1]); make the runs longer`,
    );
  if (why === "all-failed" && failedRun)
    notes.push(
      `every request of run ${failedRun.run + 1} at load ${fmtLoad(failedRun.load)} failed${failedRun.error ? ` (${failedRun.error})` : ""}: the server is failing, not overloaded (no lower load served requests while this one served none, or a load that served before now fails)`,
    );
  if (cutAt !== null)
    notes.push(
      `the run at load ${fmtLoad(cutAt)} was cut at the search's time bound (${fmtLoad(maxTime / 1000)} s) and is not counted`,
    );
  if (why === "above-max")
    notes.push(`every load up to ${est.lowerBound} met the target; the next (× ${growth}) is past the maximum load`);
  if (why === "below-min") notes.push(`no load down to ${minLoad} met the target`);
  if (why === "max-runs" || why === "max-time")
    notes.push(
      `stopped by the ${why === "max-runs" ? `run limit (${maxRuns})` : `time limit (${fmtLoad(maxTime / 1000)} s)`} before the bracket narrowed to ${(100 * tol).toFixed(0)} %`,
    );
  const few = est.levels.filter((l) => (l.load === est.bracket.pass || l.load === est.bracket.fail) && l.runs < 2);
  if (est.capacity !== null && few.length > 0)
    notes.push("a level next to the crossing has a single run: the interval holds no run-to-run spread there");
  return {
    target,
    ...est,
    runs,
    stopped: why,
    minRunRequests: minN,
    failure: failedRun,
    method: CAPACITY_METHOD,
    notes,
  };
}

/** A load or a time in notes: 4 significant digits. */
const fmtLoad = (x: number) => String(+x.toPrecision(4));
