// Pure statistics for comparing two samples: seeded bootstrap CIs, Welch's t, Mann–Whitney U, and
// the minimum detectable effect. No clock, no I/O; every random draw comes from a seeded PRNG.
import { makeRng, type Uniform } from "../rng.ts";

export { makeRng, type Uniform } from "../rng.ts";

export function mean(xs: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < xs.length; i++) s += xs[i];
  return xs.length ? s / xs.length : Number.NaN;
}

/** Sample variance (n − 1 in the denominator). */
export function variance(xs: ArrayLike<number>): number {
  const n = xs.length;
  if (n < 2) return Number.NaN;
  const m = mean(xs);
  let s = 0;
  for (let i = 0; i < n; i++) s += (xs[i] - m) ** 2;
  return s / (n - 1);
}

export function sd(xs: ArrayLike<number>): number {
  return Math.sqrt(variance(xs));
}

/** Quantile with linear interpolation between order statistics (numpy's default, R type 7). */
export function quantileSorted(sorted: ArrayLike<number>, q: number): number {
  const n = sorted.length;
  if (n === 0) return Number.NaN;
  const h = (n - 1) * q;
  const lo = Math.floor(h);
  const hi = Math.min(lo + 1, n - 1);
  return sorted[lo] + (h - lo) * (sorted[hi] - sorted[lo]);
}

export function quantile(xs: ArrayLike<number>, q: number): number {
  return quantileSorted(Float64Array.from(xs).sort(), q);
}

export function median(xs: ArrayLike<number>): number {
  return quantile(xs, 0.5);
}

// ---------------------------------------------------------------- special functions

const LANCZOS = [
  0.9999999999998099, 676.5203681218851, -1259.1392167224028, 771.3234287776531, -176.6150291621406, 12.507343278686905,
  -0.13857109526572012, 0.000009984369578019572, 1.5056327351493116e-7,
];

/** ln Γ(x) for x > 0 (Lanczos, g = 7; ~15 significant digits). */
export function lnGamma(x: number): number {
  if (x < 0.5) return Math.log(Math.PI / Math.abs(Math.sin(Math.PI * x))) - lnGamma(1 - x);
  x -= 1;
  let a = LANCZOS[0];
  const t = x + 7.5;
  for (let i = 1; i < 9; i++) a += LANCZOS[i] / (x + i);
  return 0.5 * Math.log(2 * Math.PI) + (x + 0.5) * Math.log(t) - t + Math.log(a);
}

/** Continued fraction for the incomplete beta function (modified Lentz). */
function betaContinuedFraction(a: number, b: number, x: number): number {
  const TINY = 1e-300;
  const qab = a + b;
  const qap = a + 1;
  const qam = a - 1;
  let c = 1;
  let d = 1 - (qab * x) / qap;
  if (Math.abs(d) < TINY) d = TINY;
  d = 1 / d;
  let h = d;
  for (let m = 1; m <= 10000; m++) {
    const m2 = 2 * m;
    let aa = (m * (b - m) * x) / ((qam + m2) * (a + m2));
    d = 1 + aa * d;
    if (Math.abs(d) < TINY) d = TINY;
    c = 1 + aa / c;
    if (Math.abs(c) < TINY) c = TINY;
    d = 1 / d;
    h *= d * c;
    aa = (-(a + m) * (qab + m) * x) / ((a + m2) * (qap + m2));
    d = 1 + aa * d;
    if (Math.abs(d) < TINY) d = TINY;
    c = 1 + aa / c;
    if (Math.abs(c) < TINY) c = TINY;
    d = 1 / d;
    const del = d * c;
    h *= del;
    if (Math.abs(del - 1) < 1e-15) break;
  }
  return h;
}

/** Regularized incomplete beta I_x(a, b). */
export function incompleteBeta(x: number, a: number, b: number): number {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const lnFront = lnGamma(a + b) - lnGamma(a) - lnGamma(b) + a * Math.log(x) + b * Math.log1p(-x);
  // The continued fraction converges fast for x < (a+1)/(a+b+2); use the symmetry otherwise.
  if (x < (a + 1) / (a + b + 2)) return (Math.exp(lnFront) * betaContinuedFraction(a, b, x)) / a;
  return 1 - (Math.exp(lnFront) * betaContinuedFraction(b, a, 1 - x)) / b;
}

/** CDF of Student's t with df degrees of freedom (df may be fractional, as Welch's is). */
export function studentTCdf(t: number, df: number): number {
  if (Number.isNaN(t) || !(df > 0)) return Number.NaN;
  if (!Number.isFinite(t)) return t > 0 ? 1 : 0;
  if (!Number.isFinite(df)) return normalCdf(t);
  const tail = 0.5 * incompleteBeta(df / (df + t * t), df / 2, 0.5);
  return t > 0 ? 1 - tail : tail;
}

/** Two-sided p-value of a t statistic. */
export function studentTTwoSided(t: number, df: number): number {
  if (Number.isNaN(t) || !(df > 0)) return Number.NaN;
  if (!Number.isFinite(t)) return 0;
  if (!Number.isFinite(df)) return 2 * normalCdf(-Math.abs(t));
  return incompleteBeta(df / (df + t * t), df / 2, 0.5);
}

/** Quantile of Student's t (bisection on the CDF; used for CIs, not hot). */
export function studentTQuantile(p: number, df: number): number {
  if (!(p > 0 && p < 1)) return p === 0 ? -Infinity : p === 1 ? Infinity : Number.NaN;
  if (!Number.isFinite(df)) return normalQuantile(p);
  let lo = -1e3;
  let hi = 1e3;
  for (let i = 0; i < 200; i++) {
    const mid = (lo + hi) / 2;
    if (studentTCdf(mid, df) < p) lo = mid;
    else hi = mid;
    if (hi - lo < 1e-12) break;
  }
  return (lo + hi) / 2;
}

/** Standard normal CDF via erfc (Cody's rational approximations; ~1e-15 relative). */
export function normalCdf(x: number): number {
  if (Number.isNaN(x)) return Number.NaN;
  if (x === Infinity) return 1;
  if (x === -Infinity) return 0;
  return 0.5 * erfc(-x / Math.SQRT2);
}

/** Complementary error function (Cody 1969 rational approximations; double precision). */
export function erfc(x: number): number {
  const ax = Math.abs(x);
  let r: number;
  if (ax < 0.5) {
    // erf via series-type rational function, then 1 - erf.
    const t = x * x;
    const num =
      (((0.18577770618460315 * t + 3.1611237438705655) * t + 113.86415415105016) * t + 377.485237685302) * t +
      3209.3775891384694;
    const den = (((t + 23.601290952344122) * t + 244.02463793444417) * t + 1282.6165260773723) * t + 2844.236833439171;
    return 1 - (x * num) / den;
  }
  if (ax < 4) {
    const num =
      (((((((2.1531153547440383e-8 * ax + 0.5641884969886701) * ax + 8.883149794388377) * ax + 66.11919063714163) * ax +
        298.6351381974001) *
        ax +
        881.952221241769) *
        ax +
        1712.0476126340707) *
        ax +
        2051.0783778260716) *
        ax +
      1230.3393547979972;
    const den =
      (((((((ax + 15.744926110709835) * ax + 117.6939508913125) * ax + 537.1811018620099) * ax + 1621.3895745666903) *
        ax +
        3290.7992357334597) *
        ax +
        4362.619090143247) *
        ax +
        3439.3676741437216) *
        ax +
      1230.3393548037495;
    r = Math.exp(-ax * ax) * (num / den);
  } else {
    if (ax > 27) r = 0;
    else {
      const z = 1 / (ax * ax);
      const num =
        ((((0.016315387137302097 * z + 0.30532663496123236) * z + 0.36034489994980445) * z + 0.12578172611122926) * z +
          0.016083785148742275) *
          z +
        0.0006587491615298378;
      const den =
        ((((z + 2.568520192289822) * z + 1.8729528499234673) * z + 0.5279051029514285) * z + 0.06051834131244132) * z +
        0.0023352049762686918;
      r = (Math.exp(-ax * ax) / ax) * (1 / Math.sqrt(Math.PI) - (z * num) / den);
    }
  }
  return x < 0 ? 2 - r : r;
}

/** Inverse standard normal CDF (Acklam, with one Halley refinement step: ~1e-15). */
export function normalQuantile(p: number): number {
  if (p <= 0) return -Infinity;
  if (p >= 1) return Infinity;
  const a = [
    -39.69683028665376, 220.9460984245205, -275.9285104469687, 138.357751867269, -30.66479806614716, 2.506628277459239,
  ];
  const b = [-54.47609879822406, 161.5858368580409, -155.6989798598866, 66.80131188771972, -13.28068155288572];
  const c = [
    -0.007784894002430293, -0.3223964580411365, -2.400758277161838, -2.549732539343734, 4.374664141464968,
    2.938163982698783,
  ];
  const d = [0.007784695709041462, 0.3224671290700398, 2.445134137142996, 3.754408661907416];
  const pl = 0.02425;
  let x: number;
  if (p < pl) {
    const q = Math.sqrt(-2 * Math.log(p));
    x =
      (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
      ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else if (p <= 1 - pl) {
    const q = p - 0.5;
    const r = q * q;
    x =
      ((((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q) /
      (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  } else {
    const q = Math.sqrt(-2 * Math.log(1 - p));
    x =
      -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
      ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  const e = normalCdf(x) - p;
  const u = e * Math.sqrt(2 * Math.PI) * Math.exp((x * x) / 2);
  return x - u / (1 + (x * u) / 2);
}

// ---------------------------------------------------------------- bootstrap

export interface Interval {
  estimate: number;
  lo: number;
  hi: number;
  level: number;
}

export interface BootstrapOptions {
  seed?: number;
  /** Resamples; 2000 by default. */
  resamples?: number;
  /** Confidence level; 0.95 by default. */
  level?: number;
  /** The statistic; the mean by default. */
  stat?: (xs: Float64Array) => number;
}

const meanStat = (xs: Float64Array) => mean(xs);

function resampleInto(src: ArrayLike<number>, dst: Float64Array, u: Uniform): Float64Array {
  const n = src.length;
  for (let i = 0; i < n; i++) dst[i] = src[Math.floor(u() * n)];
  return dst;
}

/** Percentile bootstrap CI of a statistic of one sample. */
export function bootstrapCI(xs: ArrayLike<number>, opts: BootstrapOptions = {}): Interval {
  const level = opts.level ?? 0.95;
  const stat = opts.stat ?? meanStat;
  const src = Float64Array.from(xs);
  const estimate = stat(src);
  if (src.length < 2) return { estimate, lo: Number.NaN, hi: Number.NaN, level };
  const B = opts.resamples ?? 2000;
  const u = makeRng(opts.seed ?? 1);
  const buf = new Float64Array(src.length);
  const stats = new Float64Array(B);
  for (let i = 0; i < B; i++) stats[i] = stat(resampleInto(src, buf, u));
  stats.sort();
  return {
    estimate,
    lo: quantileSorted(stats, (1 - level) / 2),
    hi: quantileSorted(stats, 1 - (1 - level) / 2),
    level,
  };
}

/** Percentile bootstrap CI of stat(a) − stat(b), resampling each sample independently. */
export function bootstrapDiffCI(a: ArrayLike<number>, b: ArrayLike<number>, opts: BootstrapOptions = {}): Interval {
  const level = opts.level ?? 0.95;
  const stat = opts.stat ?? meanStat;
  const sa = Float64Array.from(a);
  const sb = Float64Array.from(b);
  const estimate = stat(sa) - stat(sb);
  if (sa.length < 2 || sb.length < 2) return { estimate, lo: Number.NaN, hi: Number.NaN, level };
  const B = opts.resamples ?? 2000;
  const u = makeRng(opts.seed ?? 1);
  const ba = new Float64Array(sa.length);
  const bb = new Float64Array(sb.length);
  const stats = new Float64Array(B);
  for (let i = 0; i < B; i++) stats[i] = stat(resampleInto(sa, ba, u)) - stat(resampleInto(sb, bb, u));
  stats.sort();
  return {
    estimate,
    lo: quantileSorted(stats, (1 - level) / 2),
    hi: quantileSorted(stats, 1 - (1 - level) / 2),
    level,
  };
}

// ---------------------------------------------------------------- tests

export interface WelchResult {
  /** (mean(a) − mean(b)) / se, as scipy.stats.ttest_ind(a, b, equal_var=False). */
  t: number;
  /** Welch–Satterthwaite degrees of freedom. */
  df: number;
  /** Two-sided p-value. */
  p: number;
  /** Standard error of the difference of means. */
  se: number;
  meanDiff: number;
}

export function welchT(a: ArrayLike<number>, b: ArrayLike<number>): WelchResult {
  const na = a.length;
  const nb = b.length;
  const va = variance(a) / na;
  const vb = variance(b) / nb;
  const se = Math.sqrt(va + vb);
  const meanDiff = mean(a) - mean(b);
  const df = (va + vb) ** 2 / (va ** 2 / (na - 1) + vb ** 2 / (nb - 1));
  if (!(se > 0)) {
    // Both samples constant: the difference is either exactly zero or certain.
    return {
      t: meanDiff === 0 ? Number.NaN : Math.sign(meanDiff) * Infinity,
      df: na + nb - 2,
      p: meanDiff === 0 ? 1 : 0,
      se,
      meanDiff,
    };
  }
  const t = meanDiff / se;
  return { t, df, p: studentTTwoSided(t, df), se, meanDiff };
}

export interface MannWhitneyResult {
  /** U statistic of sample a (scipy's U1: number of pairs with a > b, ties counting ½). */
  u: number;
  /** Normal approximation z with tie correction and continuity correction. */
  z: number;
  /** Two-sided p-value (normal approximation; scipy method="asymptotic", use_continuity=True). */
  p: number;
  /** Probability that a random draw from a exceeds one from b (ties ½) = U / (na·nb). */
  commonLanguage: number;
}

export function mannWhitneyU(a: ArrayLike<number>, b: ArrayLike<number>): MannWhitneyResult {
  const na = a.length;
  const nb = b.length;
  const n = na + nb;
  const all: Array<{ v: number; g: 0 | 1 }> = [];
  for (let i = 0; i < na; i++) all.push({ v: a[i], g: 0 });
  for (let i = 0; i < nb; i++) all.push({ v: b[i], g: 1 });
  all.sort((x, y) => x.v - y.v);
  let rankSumA = 0;
  let tieTerm = 0;
  for (let i = 0; i < n; ) {
    let j = i;
    while (j + 1 < n && all[j + 1].v === all[i].v) j++;
    const avgRank = (i + j) / 2 + 1;
    const t = j - i + 1;
    if (t > 1) tieTerm += t ** 3 - t;
    for (let k = i; k <= j; k++) if (all[k].g === 0) rankSumA += avgRank;
    i = j + 1;
  }
  const u = rankSumA - (na * (na + 1)) / 2;
  const mu = (na * nb) / 2;
  const sigma = Math.sqrt(((na * nb) / 12) * (n + 1 - tieTerm / (n * (n - 1))));
  if (!(sigma > 0)) return { u, z: 0, p: 1, commonLanguage: u / (na * nb) };
  // Continuity correction toward the mean, as scipy does for the two-sided test.
  const z = (u - mu - 0.5 * Math.sign(u - mu)) / sigma;
  const zAbs = Math.abs(u - mu) - 0.5 > 0 ? (Math.abs(u - mu) - 0.5) / sigma : 0;
  return { u, z, p: Math.min(1, 2 * normalCdf(-zAbs)), commonLanguage: u / (na * nb) };
}

/**
 * Smallest true difference of means a two-sided test at `alpha` would detect with probability
 * `power`, given the samples' spread and sizes: (z₁₋α/₂ + z_power) · √(sa²/na + sb²/nb).
 */
export function minimumDetectableEffect(
  a: ArrayLike<number>,
  b: ArrayLike<number>,
  opts: { alpha?: number; power?: number } = {},
): number {
  const alpha = opts.alpha ?? 0.05;
  const power = opts.power ?? 0.8;
  const se = Math.sqrt(variance(a) / a.length + variance(b) / b.length);
  return (normalQuantile(1 - alpha / 2) + normalQuantile(power)) * se;
}

// ---------------------------------------------------------------- comparison

export interface SampleSummary {
  n: number;
  mean: number;
  sd: number;
  median: number;
  /** Bootstrap CI of the mean. */
  ci: Interval;
}

export interface Comparison {
  a: SampleSummary;
  b: SampleSummary;
  /** mean(a) − mean(b) with its bootstrap CI. */
  diff: Interval;
  /** (mean(a) − mean(b)) / mean(a). */
  relDiff: number;
  welch: WelchResult;
  mannWhitney: MannWhitneyResult;
  /** Minimum detectable effect at α = 0.05, power 0.8, in the samples' unit. */
  mde: number;
  /** The CI of the difference excludes zero. */
  detected: boolean;
}

export function summarizeSample(xs: ArrayLike<number>, opts: BootstrapOptions = {}): SampleSummary {
  return { n: xs.length, mean: mean(xs), sd: sd(xs), median: median(xs), ci: bootstrapCI(xs, opts) };
}

/** Everything one needs to say whether a and b differ, and by how much. Deterministic per seed. */
export function compareSamples(a: ArrayLike<number>, b: ArrayLike<number>, opts: BootstrapOptions = {}): Comparison {
  const seed = opts.seed ?? 1;
  const diff = bootstrapDiffCI(a, b, { ...opts, seed });
  const sa = summarizeSample(a, { ...opts, seed: seed + 1 });
  const sb = summarizeSample(b, { ...opts, seed: seed + 2 });
  return {
    a: sa,
    b: sb,
    diff,
    relDiff: (sa.mean - sb.mean) / sa.mean,
    welch: welchT(a, b),
    mannWhitney: mannWhitneyU(a, b),
    mde: minimumDetectableEffect(a, b),
    detected: Number.isFinite(diff.lo) && (diff.lo > 0 || diff.hi < 0),
  };
}

// ---------------------------------------------------------------- robust line fit

export interface LineFit {
  slope: number;
  intercept: number;
}

/** Theil–Sen: median of pairwise slopes; intercept = median(y − slope·x). */
export function theilSen(xs: ArrayLike<number>, ys: ArrayLike<number>): LineFit {
  const n = xs.length;
  const slopes: number[] = [];
  for (let i = 0; i < n; i++)
    for (let j = i + 1; j < n; j++) {
      const dx = xs[j] - xs[i];
      if (dx !== 0) slopes.push((ys[j] - ys[i]) / dx);
    }
  if (slopes.length === 0) return { slope: Number.NaN, intercept: Number.NaN };
  const slope = median(slopes);
  const r = new Float64Array(n);
  for (let i = 0; i < n; i++) r[i] = ys[i] - slope * xs[i];
  return { slope, intercept: median(r) };
}

/** Theil–Sen fit with percentile-bootstrap CIs of slope and intercept (resampling points). */
export function theilSenBootstrap(
  xs: ArrayLike<number>,
  ys: ArrayLike<number>,
  opts: { seed?: number; resamples?: number; level?: number } = {},
): { fit: LineFit; slope: Interval; intercept: Interval } {
  const level = opts.level ?? 0.95;
  const fit = theilSen(xs, ys);
  const n = xs.length;
  const B = opts.resamples ?? 1000;
  const u = makeRng(opts.seed ?? 1);
  const slopes: number[] = [];
  const intercepts: number[] = [];
  const bx = new Float64Array(n);
  const by = new Float64Array(n);
  for (let k = 0; k < B && n >= 3; k++) {
    for (let i = 0; i < n; i++) {
      const j = Math.floor(u() * n);
      bx[i] = xs[j];
      by[i] = ys[j];
    }
    const f = theilSen(bx, by);
    if (Number.isFinite(f.slope)) {
      slopes.push(f.slope);
      intercepts.push(f.intercept);
    }
  }
  const ci = (vals: number[], estimate: number): Interval => {
    const s = Float64Array.from(vals).sort();
    return { estimate, lo: quantileSorted(s, (1 - level) / 2), hi: quantileSorted(s, 1 - (1 - level) / 2), level };
  };
  return { fit, slope: ci(slopes, fit.slope), intercept: ci(intercepts, fit.intercept) };
}
