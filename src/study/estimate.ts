// Pure estimators that turn the study's measurements into the report's numbers with intervals:
// per-token time, the trace's per-call all-reduce cost and share, the decomposition, ceilings.
// Every interval is a seeded percentile bootstrap (95 %) over the natural unit of independence
// (requests for client timing, steps for the trace), so the numbers are reproducible per seed.
import { makeRng, quantileSorted } from "../experiment/stats.ts";
import type { Ceiling, DecompositionPart, Quantity } from "../report/types.ts";

export interface Interval {
  estimate: number;
  lo: number;
  hi: number;
}

const LEVEL = 0.95;
const B = 2000;

function ci(draws: number[], estimate: number): Interval {
  const s = Float64Array.from(draws.filter(Number.isFinite)).sort();
  if (s.length === 0) return { estimate, lo: Number.NaN, hi: Number.NaN };
  return { estimate, lo: quantileSorted(s, (1 - LEVEL) / 2), hi: quantileSorted(s, 1 - (1 - LEVEL) / 2) };
}

/** Bootstrap over groups: resample whole groups, return the draws of stat(resampled groups). */
function groupDraws<T>(groups: readonly T[], stat: (gs: T[]) => number, seed: number, resamples = B): number[] {
  const u = makeRng(seed);
  const out: number[] = [];
  const buf: T[] = new Array(groups.length);
  for (let b = 0; b < resamples; b++) {
    for (let i = 0; i < groups.length; i++) buf[i] = groups[Math.floor(u() * groups.length)]!;
    out.push(stat(buf));
  }
  return out;
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
  periodMs: Interval;
  allReduceMsPerStep: Interval;
  commMsPerStep: Interval;
  computeMsPerStep: Interval;
  callsPerStep: number;
  perCallUs: Interval;
  /** Σ all-reduce ÷ Σ period over the same steps. */
  share: Interval;
  draws: { allReduceMs: number[]; commMs: number[]; computeMs: number[]; periodMs: number[] };
}

function sumBy(steps: TraceStep[], f: (s: TraceStep) => number): number {
  let s = 0;
  for (const x of steps) s += f(x);
  return s;
}

export function estimateFromTrace(steps: TraceStep[], seed: number): TraceEstimates {
  if (steps.length === 0) throw new Error("no decode steps in the trace");
  const n = steps.length;
  const meanOf = (f: (s: TraceStep) => number) => (ss: TraceStep[]) => sumBy(ss, f) / ss.length;
  const fPeriod = meanOf((s) => s.periodMs);
  const fAr = meanOf((s) => s.allReduceMs);
  const fComm = meanOf((s) => s.allReduceMs + s.otherCommMs);
  const fCompute = meanOf((s) => s.computeMs);
  const fPerCall = (ss: TraceStep[]) => (1000 * sumBy(ss, (s) => s.allReduceMs)) / sumBy(ss, (s) => s.allReduceCalls);
  const fShare = (ss: TraceStep[]) => sumBy(ss, (s) => s.allReduceMs) / sumBy(ss, (s) => s.periodMs);
  // One resampling of steps drives every statistic, so their draws stay jointly consistent.
  const u = makeRng(seed);
  const d = {
    periodMs: [] as number[],
    allReduceMs: [] as number[],
    commMs: [] as number[],
    computeMs: [] as number[],
  };
  const perCall: number[] = [];
  const share: number[] = [];
  const buf: TraceStep[] = new Array(n);
  for (let b = 0; b < B; b++) {
    for (let i = 0; i < n; i++) buf[i] = steps[Math.floor(u() * n)]!;
    d.periodMs.push(fPeriod(buf));
    d.allReduceMs.push(fAr(buf));
    d.commMs.push(fComm(buf));
    d.computeMs.push(fCompute(buf));
    perCall.push(fPerCall(buf));
    share.push(fShare(buf));
  }
  return {
    steps: n,
    periodMs: ci(d.periodMs, fPeriod(steps)),
    allReduceMsPerStep: ci(d.allReduceMs, fAr(steps)),
    commMsPerStep: ci(d.commMs, fComm(steps)),
    computeMsPerStep: ci(d.computeMs, fCompute(steps)),
    callsPerStep: sumBy(steps, (s) => s.allReduceCalls) / n,
    perCallUs: ci(perCall, fPerCall(steps)),
    share: ci(share, fShare(steps)),
    draws: d,
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
 * Splits the measured per-token time into communication (trace collectives), compute (trace
 * non-communication kernels) and overhead (the rest: GPU idle, host, scheduler, sampling gaps).
 * tokenDraws: bootstrap draws of the per-token time; trace draws come from estimateFromTrace.
 */
export function decompose(
  token: { estimate: number; draws: number[] },
  tr: TraceEstimates,
): { parts: DecompositionPart[]; arShareOfToken: Interval; ceilingNoAllReduce: Interval; ceilingNoComm: Interval } {
  const { draws } = tr;
  const comm = tr.commMsPerStep;
  const compute = tr.computeMsPerStep;
  const overheadEst = token.estimate - comm.estimate - compute.estimate;
  const n = Math.min(token.draws.length, draws.commMs.length);
  const over: number[] = [];
  for (let i = 0; i < n; i++) over.push(token.draws[i]! - draws.commMs[i]! - draws.computeMs[i]!);
  const overhead = ci(over, overheadEst);
  const arShareOfToken = combineDraws(
    draws.allReduceMs,
    token.draws,
    (a, t) => a / t,
    tr.allReduceMsPerStep.estimate / token.estimate,
  );
  const ceilingNoAllReduce = combineDraws(
    token.draws,
    draws.allReduceMs,
    (t, a) => 1000 / (t - a),
    1000 / (token.estimate - tr.allReduceMsPerStep.estimate),
  );
  const ceilingNoComm = combineDraws(
    token.draws,
    draws.commMs,
    (t, c) => 1000 / (t - c),
    1000 / (token.estimate - comm.estimate),
  );
  const parts: DecompositionPart[] = [
    {
      component: "communication",
      ms: q(
        comm,
        "ms",
        "measured",
        `trace: Σ communication-kernel time per decode step, mean of ${tr.steps} steps, bootstrap 95 % CI`,
      ),
      detail: `${fmtCount(tr.callsPerStep)} all-reduces per step (${tr.allReduceMsPerStep.estimate.toFixed(2)} ms) plus other collectives`,
    },
    {
      component: "compute",
      ms: q(
        compute,
        "ms",
        "measured",
        `trace: Σ non-communication kernel time per decode step, mean of ${tr.steps} steps`,
      ),
      detail: "GEMM, dequantization, attention, MoE routing, norms, sampling kernels",
    },
    {
      component: "overhead",
      ms: q(overhead, "ms", "derived", "measured per-token time − communication − compute; bootstrap of both"),
      detail: "GPU idle between kernels and steps: launch gaps, scheduler, host-side work",
    },
  ];
  return { parts, arShareOfToken, ceilingNoAllReduce, ceilingNoComm };
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
