// The tune surrogate: a Gaussian linear model of every candidate's objective (log scale, lower is
// better) that starts from the analytical model's predictions and is refitted on each measured block.
//   y_b  = μ_c(b) + e_b,             e_b ~ N(0, τ² + w_b)   (restart-to-restart + within-block noise)
//   μ_c  = m_c + β + Σ_k δ_{k,v_k(c)} + ε_c
// m_c: the model's prediction (log), β: its common bias, δ: one correction per non-baseline knob value
// (what the model gets wrong about that knob), ε_c: what it gets wrong about this combination.
// All priors are normal, so the posterior is exact (one Cholesky); τ² has a scaled-inverse-χ² prior
// pooled over every candidate with repeated blocks.
import { normalQuantile, studentTQuantile } from "../experiment/stats.ts";
import { Rng } from "../sim/rng.ts";

export interface SurrogateCandidate {
  /** Model prediction of the objective, log scale (lower is better); 0 when the model has none. */
  m: number;
  /** Index of each knob's value (0 = the baseline's). */
  levels: number[];
}

export interface SurrogatePriors {
  /** Prior sd of the model's common bias β (log). */
  bias: number;
  /** Prior sd of each knob's per-value correction δ (log), by knob. */
  knob: number[];
  /** Prior sd of a combination's own deviation ε (log). */
  interaction: number;
  /** Prior guess of the restart-to-restart sd τ (log) and its weight in blocks (ν₀). */
  tau0: number;
  nu0: number;
}

export interface Observation {
  candidate: number;
  /** log objective of the block (lower is better). */
  y: number;
  /** Variance of y from the block's own requests. */
  w: number;
}

export interface Posterior {
  /** Posterior mean and sd of μ_c for every candidate. */
  mean: number[];
  sd: number[];
  /** Posterior covariance of μ (K × K). */
  cov: Float64Array;
  /** The restart-to-restart sd used: the pooled estimate widened by t(df)/z. */
  tau: number;
  /** Degrees of freedom behind τ (replicated blocks), prior included. */
  tauDf: number;
}

function cholesky(a: Float64Array, n: number): Float64Array {
  const l = new Float64Array(n * n);
  for (let i = 0; i < n; i++)
    for (let j = 0; j <= i; j++) {
      let s = a[i * n + j]!;
      for (let k = 0; k < j; k++) s -= l[i * n + k]! * l[j * n + k]!;
      if (i === j) l[i * n + i] = Math.sqrt(Math.max(s, 1e-300));
      else l[i * n + j] = s / l[j * n + j]!;
    }
  return l;
}

/** Solves L Lᵀ x = b in place. */
function cholSolve(l: Float64Array, n: number, b: Float64Array): Float64Array {
  const x = Float64Array.from(b);
  for (let i = 0; i < n; i++) {
    let s = x[i]!;
    for (let k = 0; k < i; k++) s -= l[i * n + k]! * x[k]!;
    x[i] = s / l[i * n + i]!;
  }
  for (let i = n - 1; i >= 0; i--) {
    let s = x[i]!;
    for (let k = i + 1; k < n; k++) s -= l[k * n + i]! * x[k]!;
    x[i] = s / l[i * n + i]!;
  }
  return x;
}

/** Restart-to-restart variance: pooled within-candidate spread of block values, minus their own noise. */
export function estimateTau(obs: Observation[], priors: SurrogatePriors): { tau: number; df: number } {
  const by = new Map<number, Observation[]>();
  for (const o of obs) {
    let l = by.get(o.candidate);
    if (!l) by.set(o.candidate, (l = []));
    l.push(o);
  }
  let ss = 0;
  let df = 0;
  for (const l of by.values()) {
    if (l.length < 2) continue;
    const m = l.reduce((s, o) => s + o.y, 0) / l.length;
    const wMean = l.reduce((s, o) => s + o.w, 0) / l.length;
    ss += Math.max(0, l.reduce((s, o) => s + (o.y - m) ** 2, 0) - (l.length - 1) * wMean);
    df += l.length - 1;
  }
  const tau2 = (priors.nu0 * priors.tau0 ** 2 + ss) / (priors.nu0 + df);
  return { tau: Math.sqrt(tau2), df: priors.nu0 + df };
}

/** The exact posterior of every μ_c given the blocks so far. */
export function posterior(
  cands: SurrogateCandidate[],
  knobLevels: number[],
  priors: SurrogatePriors,
  obs: Observation[],
): Posterior {
  const K = cands.length;
  // Parameter layout: [β, δ (per knob, levels 1..L−1), ε (per candidate)].
  const offsets: number[] = [];
  let p = 1;
  for (const L of knobLevels) {
    offsets.push(p);
    p += L - 1;
  }
  const epsAt = p;
  p += K;
  const row = (c: number): Array<[number, number]> => {
    const r: Array<[number, number]> = [[0, 1]];
    cands[c]!.levels.forEach((lv, k) => {
      if (lv > 0) r.push([offsets[k]! + lv - 1, 1]);
    });
    r.push([epsAt + c, 1]);
    return r;
  };
  const prec = new Float64Array(p * p);
  prec[0] = 1 / priors.bias ** 2;
  knobLevels.forEach((L, k) => {
    for (let j = 0; j < L - 1; j++) prec[(offsets[k]! + j) * (p + 1)] = 1 / priors.knob[k]! ** 2;
  });
  for (let c = 0; c < K; c++) prec[(epsAt + c) * (p + 1)] = 1 / priors.interaction ** 2;
  const rhs = new Float64Array(p);
  const { tau, df } = estimateTau(obs, priors);
  // τ is estimated from few replicates: widen it by t(df)/z at 97.5 %, so that decisions made
  // before the restart-to-restart spread is known are as cautious as its uncertainty demands.
  const tauEff = tau * (studentTQuantile(0.975, df) / normalQuantile(0.975));
  for (const o of obs) {
    const r = row(o.candidate);
    const wt = 1 / (tauEff ** 2 + o.w);
    const resid = o.y - cands[o.candidate]!.m;
    for (const [i] of r) {
      rhs[i] = rhs[i]! + wt * resid;
      for (const [j] of r) prec[i * p + j] = prec[i * p + j]! + wt;
    }
  }
  const l = cholesky(prec, p);
  const theta = cholSolve(l, p, rhs);
  // Covariance of μ: X Σ Xᵀ with Σ = prec⁻¹, column by column.
  const rows = cands.map((_, c) => row(c));
  const used = new Set<number>();
  for (const r of rows) for (const [i] of r) used.add(i);
  const colOf = new Map<number, Float64Array>();
  for (const i of used) {
    const e = new Float64Array(p);
    e[i] = 1;
    colOf.set(i, cholSolve(l, p, e));
  }
  const cov = new Float64Array(K * K);
  for (let a = 0; a < K; a++)
    for (let b = a; b < K; b++) {
      let s = 0;
      for (const [i] of rows[a]!) {
        const col = colOf.get(i)!;
        for (const [j] of rows[b]!) s += col[j]!;
      }
      cov[a * K + b] = s;
      cov[b * K + a] = s;
    }
  const mean = rows.map((r, c) => cands[c]!.m + r.reduce((s, [i]) => s + theta[i]!, 0));
  const sd = mean.map((_, c) => Math.sqrt(Math.max(0, cov[c * K + c]!)));
  return { mean, sd, cov, tau: tauEff, tauDf: df };
}

/** Posterior mean and sd of μ_a − μ_b. */
export function difference(post: Posterior, a: number, b: number): { mean: number; sd: number } {
  const K = post.mean.length;
  const v = post.cov[a * K + a]! + post.cov[b * K + b]! - 2 * post.cov[a * K + b]!;
  return { mean: post.mean[a]! - post.mean[b]!, sd: Math.sqrt(Math.max(v, 0)) };
}

/** P(candidate is the best) for the listed candidates, by sampling the joint posterior. */
export function probabilityBest(post: Posterior, alive: number[], draws = 4000, seed = 1): Map<number, number> {
  const K = post.mean.length;
  const n = alive.length;
  const sub = new Float64Array(n * n);
  for (let i = 0; i < n; i++)
    for (let j = 0; j < n; j++) sub[i * n + j] = post.cov[alive[i]! * K + alive[j]!]! + (i === j ? 1e-12 : 0);
  const l = cholesky(sub, n);
  const rng = new Rng(seed);
  const wins = new Float64Array(n);
  const z = new Float64Array(n);
  for (let d = 0; d < draws; d++) {
    for (let i = 0; i < n; i++) z[i] = rng.normal();
    let best = 0;
    let bestV = Number.POSITIVE_INFINITY;
    for (let i = 0; i < n; i++) {
      let v = post.mean[alive[i]!]!;
      for (let k = 0; k <= i; k++) v += l[i * n + k]! * z[k]!;
      if (v < bestV) {
        bestV = v;
        best = i;
      }
    }
    wins[best] = wins[best]! + 1;
  }
  return new Map(alive.map((c, i) => [c, wins[i]! / draws]));
}
