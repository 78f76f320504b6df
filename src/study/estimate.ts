// Pure estimators that turn the study's measurements into the report's numbers with intervals:
// per-token time, the trace's per-call all-reduce cost and share, the decomposition, ceilings.
// Every interval is a seeded percentile bootstrap (95 %) over the natural unit of independence
// (requests for client timing, steps for the trace), so the numbers are reproducible per seed.
import { makeRng, quantileSorted, studentTQuantile } from "../experiment/stats.ts";
import type { Ceiling, DecompositionPart, Quantity } from "../report/types.ts";

export interface Interval {
  estimate: number;
  lo: number;
  hi: number;
}

const LEVEL = 0.95;
/** Relative resolution of per-step trace quantities (see estimateFromTrace). */
const RESOLUTION = 0.001;
const B = 2000;

function ci(draws: number[], estimate: number): Interval {
  const s = Float64Array.from(draws.filter(Number.isFinite)).sort();
  if (s.length === 0) return { estimate, lo: Number.NaN, hi: Number.NaN };
  return { estimate, lo: quantileSorted(s, (1 - LEVEL) / 2), hi: quantileSorted(s, 1 - (1 - LEVEL) / 2) };
}

const pooledMean = (gs: number[][]) => {
  let s = 0;
  let n = 0;
  for (const g of gs) {
    for (const x of g) s += x;
    n += g.length;
  }
  return n ? s / n : Number.NaN;
};

/**
 * Pooled mean of per-request samples. Tokens of one request are not independent, so the standard
 * error is the cluster (ratio-estimator) one over requests, and the interval uses Student's t with
 * k − 1 degrees of freedom: a percentile bootstrap over 8 requests covers only ~84 % at "95 %".
 * The returned draws are estimate + se·T(k−1), for combining with other quantities.
 * With fewer than 4 requests it falls back to treating single samples as independent.
 */
export function pooledMeanDraws(
  groups: number[][],
  seed: number,
): { estimate: number; draws: number[]; se: number; df: number } {
  const nonEmpty = groups.filter((g) => g.length > 0);
  const estimate = pooledMean(nonEmpty);
  let se = Number.NaN;
  let df = 0;
  if (nonEmpty.length >= 4) {
    const k = nonEmpty.length;
    const nBar = nonEmpty.reduce((s, g) => s + g.length, 0) / k;
    let ss = 0;
    for (const g of nonEmpty) {
      let sum = 0;
      for (const x of g) sum += x;
      ss += (sum - g.length * estimate) ** 2;
    }
    se = Math.sqrt(ss / (k * (k - 1))) / nBar;
    df = k - 1;
  } else {
    const flat = nonEmpty.flat();
    if (flat.length > 1) {
      let ss = 0;
      for (const x of flat) ss += (x - estimate) ** 2;
      se = Math.sqrt(ss / (flat.length - 1) / flat.length);
      df = flat.length - 1;
    }
  }
  if (!Number.isFinite(se)) return { estimate, draws: [], se, df };
  const u = makeRng(seed);
  const draws: number[] = [];
  for (let b = 0; b < B; b++) draws.push(estimate + se * studentT(u, df));
  return { estimate, draws, se, df };
}

function stdNormal(u: () => number): number {
  return Math.sqrt(-2 * Math.log(1 - u())) * Math.cos(2 * Math.PI * u());
}

/** A Student-t draw: Z / sqrt(χ²(df)/df); normal beyond 200 degrees of freedom. */
function studentT(u: () => number, df: number): number {
  const z = stdNormal(u);
  if (df > 200) return z;
  let chi = 0;
  for (let i = 0; i < df; i++) chi += stdNormal(u) ** 2;
  return z / Math.sqrt(chi / df);
}

export function pooledMeanCI(groups: number[][], seed: number): Interval {
  const { estimate, draws } = pooledMeanDraws(groups, seed);
  return ci(draws, estimate);
}

/** One decode step as the trace analyzer measured it (ms, simulated/GPU time). */
export interface TraceStep {
  /** Start-to-next-start period of the step (GPU busy + idle). */
  periodMs: number;
  allReduceMs: number;
  allReduceCalls: number;
  /** Other communication kernels (all-gather, …). */
  otherCommMs: number;
  /** GPU busy time in non-communication kernels. */
  computeMs: number;
}

export interface TraceEstimates {
  steps: number;
  /** Median step period: robust to the occasional step stretched by host-side delays. */
  periodMs: Interval;
  allReduceMsPerStep: Interval;
  commMsPerStep: Interval;
  computeMsPerStep: Interval;
  /** Step time without all-reduce: mean all-reduce time × (1 − share) / share. */
  nonAllReduceMs: Interval;
  nonCommMs: Interval;
  callsPerStep: number;
  /** Mean all-reduce kernel time per call (kernel durations are not stretched by host delays). */
  perCallUs: Interval;
  /** Median over steps of all-reduce time ÷ step period. */
  share: Interval;
  draws: { allReduceMs: number[]; commMs: number[]; computeMs: number[]; periodMs: number[] };
}

function median(xs: number[]): number {
  const s = Float64Array.from(xs).sort();
  const n = s.length;
  return n % 2 ? s[(n - 1) / 2]! : (s[n / 2 - 1]! + s[n / 2]!) / 2;
}

/**
 * Per-step statistics of a batch-1 decode trace with a bootstrap over steps. Step-level times use
 * medians (a step stretched by a late host is an outlier, not the deployment's step); per-call
 * kernel cost uses the mean (kernel durations are not stretched).
 */
export function estimateFromTrace(steps: TraceStep[], seed: number): TraceEstimates {
  if (steps.length === 0) throw new Error("no decode steps in the trace");
  const n = steps.length;
  const col = (f: (s: TraceStep) => number) => steps.map(f);
  const period = col((s) => s.periodMs);
  const ar = col((s) => s.allReduceMs);
  const comm = col((s) => s.allReduceMs + s.otherCommMs);
  const compute = col((s) => s.computeMs);
  const nonComm = col((s) => s.periodMs - s.allReduceMs - s.otherCommMs);
  const perCallStep = col((s) => (s.allReduceCalls > 0 ? (1000 * s.allReduceMs) / s.allReduceCalls : Number.NaN));
  const share = col((s) => s.allReduceMs / s.periodMs);
  const meanOf = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const u = makeRng(seed);
  const d = {
    periodMs: [] as number[],
    allReduceMs: [] as number[],
    commMs: [] as number[],
    computeMs: [] as number[],
  };
  const dNonComm: number[] = [];
  const dMeanAr: number[] = [];
  const dShare: number[] = [];
  const idx: number[] = new Array(n);
  const pick = (xs: number[]) => idx.map((i) => xs[i]!);
  // One resampling of steps drives every statistic, so their draws stay jointly consistent.
  for (let b = 0; b < B; b++) {
    for (let i = 0; i < n; i++) idx[i] = Math.floor(u() * n);
    d.periodMs.push(median(pick(period)));
    d.allReduceMs.push(median(pick(ar)));
    d.commMs.push(median(pick(comm)));
    d.computeMs.push(median(pick(compute)));
    dNonComm.push(median(pick(nonComm)));
    dMeanAr.push(meanOf(pick(ar)));
    dShare.push(median(pick(share)));
  }
  // Step periods carry boundary noise (where one step's window ends and the next begins) and the
  // odd host-side stretch; all-reduce kernel time does not. So the time without all-reduce is
  // derived from the robust share and the mean all-reduce time: AR · (1 − s) / s.
  const nonArOf = (arMs: number, s: number) => (arMs * (1 - s)) / s;
  const shareEst = median(share);
  const meanAr = meanOf(ar);
  const dNonArShare = dMeanAr.map((a, i) => nonArOf(a, dShare[i]!));
  // Per-call kernel cost: Student-t interval of the mean over steps (the percentile bootstrap of a
  // mean undercovers at these sample sizes).
  const pc = perCallStep.filter(Number.isFinite);
  const pcMean = meanOf(pc);
  const pcSe = Math.sqrt(pc.reduce((a, v) => a + (v - pcMean) ** 2, 0) / Math.max(1, pc.length - 1) / pc.length);
  const tq = studentTQuantile(0.975, Math.max(1, pc.length - 1));
  // Floor on interval width: ±0.1 % of the estimate. Step-window boundaries are resolved to the
  // trace's timestamps and the true step drifts slightly with context over the captured steps, so a
  // narrower interval would claim more than the trace can show.
  const floor = (i: Interval): Interval => ({
    estimate: i.estimate,
    lo: Math.min(i.lo, i.estimate * (1 - RESOLUTION)),
    hi: Math.max(i.hi, i.estimate * (1 + RESOLUTION)),
  });
  return {
    steps: n,
    periodMs: ci(d.periodMs, median(period)),
    allReduceMsPerStep: ci(d.allReduceMs, median(ar)),
    commMsPerStep: ci(d.commMs, median(comm)),
    computeMsPerStep: ci(d.computeMs, median(compute)),
    nonAllReduceMs: floor(ci(dNonArShare, nonArOf(meanAr, shareEst))),
    nonCommMs: floor(ci(dNonComm, median(nonComm))),
    callsPerStep: steps.reduce((a, s) => a + s.allReduceCalls, 0) / n,
    perCallUs: { estimate: pcMean, lo: pcMean - tq * pcSe, hi: pcMean + tq * pcSe },
    share: floor(ci(dShare, median(share))),
    draws: { ...d },
  };
}

/** Pairs two independent draw lists (same length) through f and returns the percentile interval. */
export function combineDraws(
  a: number[],
  b: number[],
  f: (x: number, y: number) => number,
  estimate: number,
): Interval {
  const n = Math.min(a.length, b.length);
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push(f(a[i]!, b[i]!));
  return ci(out, estimate);
}

export function q(i: Interval, unit: string, method: Quantity["method"], how: string, scale = 1): Quantity {
  const out: Quantity = { value: i.estimate * scale, unit, method, how };
  if (Number.isFinite(i.lo) && Number.isFinite(i.hi)) {
    out.low = Math.min(i.lo, i.hi) * scale;
    out.high = Math.max(i.lo, i.hi) * scale;
  }
  return out;
}

/** Widens a to also cover b: used when two measurements of one quantity disagree beyond their CIs. */
export function union(a: Interval, b: Interval): Interval {
  return { estimate: a.estimate, lo: Math.min(a.lo, b.lo, a.estimate), hi: Math.max(a.hi, b.hi, a.estimate) };
}

export function overlaps(a: Interval, b: Interval): boolean {
  return a.lo <= b.hi && b.lo <= a.hi;
}

/**
 * Splits the step period into communication (trace collectives), compute (trace non-communication
 * kernels) and overhead (the rest: GPU idle between kernels and steps — launch gaps, scheduler,
 * host). Ceilings remove the all-reduce (or all communication) time from the step.
 */
export function decompose(tr: TraceEstimates): {
  parts: DecompositionPart[];
  ceilingNoAllReduce: Interval;
  ceilingNoComm: Interval;
} {
  const { draws } = tr;
  const over: number[] = [];
  for (let i = 0; i < draws.periodMs.length; i++)
    over.push(draws.periodMs[i]! - draws.commMs[i]! - draws.computeMs[i]!);
  const overhead = ci(over, tr.periodMs.estimate - tr.commMsPerStep.estimate - tr.computeMsPerStep.estimate);
  const parts: DecompositionPart[] = [
    {
      component: "communication",
      ms: q(
        tr.commMsPerStep,
        "ms",
        "measured",
        `trace: communication-kernel time per decode step, median of ${tr.steps} steps, bootstrap 95 % CI`,
      ),
      detail: `${fmtCount(tr.callsPerStep)} all-reduces per step (${tr.allReduceMsPerStep.estimate.toFixed(2)} ms) plus other collectives`,
    },
    {
      component: "compute",
      ms: q(
        tr.computeMsPerStep,
        "ms",
        "measured",
        `trace: non-communication kernel time per decode step, median of ${tr.steps} steps`,
      ),
      detail: "GEMM, dequantization, attention, MoE routing, norms, sampling kernels",
    },
    {
      component: "overhead",
      ms: q(overhead, "ms", "derived", "step period − communication − compute (bootstrap over steps)"),
      detail: "GPU idle between kernels and steps: launch gaps, scheduler, host-side work",
    },
  ];
  return {
    parts,
    ceilingNoAllReduce: rateFromMs(tr.nonAllReduceMs),
    ceilingNoComm: rateFromMs(tr.nonCommMs),
  };
}

function fmtCount(x: number): string {
  return Number.isInteger(x) ? String(x) : x.toFixed(1);
}

/** Ceiling rows: measured, zero all-reduce, zero communication, all-reduce at a modelled per-call cost. */
export function ceilingRow(
  scenario: string,
  assumption: string,
  msPerToken: Interval,
  method: Quantity["method"],
  how: string,
): Ceiling {
  const rate: Interval = {
    estimate: 1000 / msPerToken.estimate,
    lo: 1000 / msPerToken.hi,
    hi: 1000 / msPerToken.lo,
  };
  return {
    scenario,
    assumption,
    msPerToken: q(msPerToken, "ms", method, how),
    tokensPerSecond: q(rate, "tok/s", method, `1000 ÷ ms per token (${how})`),
  };
}

/** Robust length-sweep fit with bootstrap CIs lives in experiment/stats; this adapts it for a report. */
export function rateFromMs(ms: Interval): Interval {
  return { estimate: 1000 / ms.estimate, lo: 1000 / ms.hi, hi: 1000 / ms.lo };
}
