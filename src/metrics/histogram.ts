// Histogram and summary series from parsed families, and Prometheus' classic-bucket quantile.

import { labelKey, parseFloatText } from "./parse.ts";
import type { HistogramSeries, Labels, MetricFamily } from "./types.ts";

export interface Bucket {
  /** Upper bound (inclusive); +Inf for the last bucket. */
  le: number;
  /** Cumulative count of observations ≤ le (may be fractional after rates). */
  count: number;
}

/** One summary series (one label set, `quantile` removed). */
export interface SummarySeries {
  family: string;
  labels: Labels;
  /** Sorted by quantile. */
  quantiles: Array<{ quantile: number; value: number }>;
  sum: number;
  count: number;
  created?: number;
}

function withoutLabel(labels: Labels, name: string): Labels {
  const out: Labels = {};
  for (const k in labels) if (k !== name && Object.hasOwn(labels, k)) out[k] = labels[k];
  return out;
}

/**
 * Groups a histogram (or gauge histogram) family per label set, `le` removed. Sample order does not
 * matter (`_sum` before the buckets, `le` anywhere among the labels); bounds are compared as numbers
 * (`le="1.0"` and `le="1e0"` are the same bucket: the later sample wins). A missing `_count` is
 * taken from the +Inf bucket; a missing `_sum` is NaN. Series are in order of first appearance.
 */
export function histogramSeries(family: MetricFamily): HistogramSeries[] {
  const base = family.name;
  const bySet = new Map<string, HistogramSeries & { hasCount: boolean }>();
  const order: Array<HistogramSeries & { hasCount: boolean }> = [];
  for (const s of family.samples) {
    if (!s.name.startsWith(base)) continue;
    const suffix = s.name.slice(base.length);
    const isBucket = suffix === "_bucket";
    if (
      !isBucket &&
      suffix !== "_sum" &&
      suffix !== "_count" &&
      suffix !== "_gsum" &&
      suffix !== "_gcount" &&
      suffix !== "_created"
    ) {
      continue;
    }
    const key = labelKey(s.labels, isBucket ? "le" : undefined);
    let h = bySet.get(key);
    if (!h) {
      h = {
        family: base,
        labels: isBucket ? withoutLabel(s.labels, "le") : { ...s.labels },
        buckets: [],
        sum: Number.NaN,
        count: Number.NaN,
        hasCount: false,
      };
      bySet.set(key, h);
      order.push(h);
    }
    if (isBucket) {
      const le = Object.hasOwn(s.labels, "le") ? parseFloatText(s.labels.le) : undefined;
      if (le === undefined || Number.isNaN(le)) continue;
      const same = h.buckets.find((b) => b.le === le);
      if (same) same.count = s.value;
      else h.buckets.push({ le, count: s.value });
    } else if (suffix === "_sum" || suffix === "_gsum") h.sum = s.value;
    else if (suffix === "_count" || suffix === "_gcount") {
      h.count = s.value;
      h.hasCount = true;
    } else h.created = s.value;
  }
  const out: HistogramSeries[] = [];
  for (const h of order) {
    h.buckets.sort((a, b) => a.le - b.le);
    if (!h.hasCount) {
      const last = h.buckets[h.buckets.length - 1];
      h.count = last && last.le === Infinity ? last.count : Number.NaN;
    }
    const { hasCount: _unused, ...series } = h;
    out.push(series);
  }
  return out;
}

/** Groups a summary family per label set, `quantile` removed. */
export function summarySeries(family: MetricFamily): SummarySeries[] {
  const base = family.name;
  const bySet = new Map<string, SummarySeries>();
  const order: SummarySeries[] = [];
  for (const s of family.samples) {
    if (!s.name.startsWith(base)) continue;
    const suffix = s.name.slice(base.length);
    const isQ = suffix === "";
    if (!isQ && suffix !== "_sum" && suffix !== "_count" && suffix !== "_created") continue;
    const key = labelKey(s.labels, isQ ? "quantile" : undefined);
    let q = bySet.get(key);
    if (!q) {
      q = {
        family: base,
        labels: isQ ? withoutLabel(s.labels, "quantile") : { ...s.labels },
        quantiles: [],
        sum: Number.NaN,
        count: Number.NaN,
      };
      bySet.set(key, q);
      order.push(q);
    }
    if (isQ) {
      const qv = Object.hasOwn(s.labels, "quantile") ? parseFloatText(s.labels.quantile) : undefined;
      if (qv === undefined || Number.isNaN(qv)) continue;
      q.quantiles.push({ quantile: qv, value: s.value });
    } else if (suffix === "_sum") q.sum = s.value;
    else if (suffix === "_count") q.count = s.value;
    else q.created = s.value;
  }
  for (const q of order) q.quantiles.sort((a, b) => a.quantile - b.quantile);
  return order;
}

/** Prometheus' tolerance for counts that differ only by floating-point noise (promql smallDeltaTolerance). */
const SMALL_DELTA_TOLERANCE = 1e-12;
const MIN_NORMAL = 2.2250738585072014e-308;

/** Prometheus util/almost.Equal. */
function almostEqual(a: number, b: number, epsilon: number): boolean {
  if (Number.isNaN(a) && Number.isNaN(b)) return true;
  if (a === b) return true;
  const absSum = Math.abs(a) + Math.abs(b);
  const diff = Math.abs(a - b);
  if (a === 0 || b === 0 || absSum < MIN_NORMAL) return diff < epsilon * MIN_NORMAL;
  return diff / Math.min(absSum, Number.MAX_VALUE) < epsilon;
}

export interface QuantileDetail {
  value: number;
  /** Some bucket count was lower than a lower bucket's and was raised (Prometheus' "forced monotonicity"). */
  forcedMonotonic: boolean;
  /** Counts differing only by float noise (relative 1e-12) were made equal. */
  fixedPrecision: boolean;
  /** The rank fell in the +Inf bucket: the value is the largest finite bound, not an estimate. */
  capped: boolean;
  /** Index (in the sorted, merged buckets) of the bucket the value was interpolated in; -1 if none. */
  bucketIndex: number;
  /** Bounds of that bucket (lower is 0 for the first bucket when its bound is positive). */
  lower: number;
  upper: number;
}

/**
 * Prometheus' `bucketQuantile` (promql/quantile.go) with the flags it computes. Does not modify `buckets`.
 * Steps: NaN q → NaN; q<0 → -Inf; q>1 → +Inf; sort by bound; highest bound not +Inf → NaN; merge equal
 * bounds by adding; absorb relative differences < 1e-12; force monotonicity; < 2 buckets or 0
 * observations → NaN; find the first bucket with count ≥ q·N; in the +Inf bucket return the
 * second-highest bound; in a first bucket with bound ≤ 0 return that bound; else interpolate linearly.
 */
export function bucketQuantileDetail(q: number, buckets: ReadonlyArray<Bucket>): QuantileDetail {
  const res: QuantileDetail = {
    value: Number.NaN,
    forcedMonotonic: false,
    fixedPrecision: false,
    capped: false,
    bucketIndex: -1,
    lower: Number.NaN,
    upper: Number.NaN,
  };
  if (Number.isNaN(q)) return res;
  if (q < 0) {
    res.value = -Infinity;
    return res;
  }
  if (q > 1) {
    res.value = Infinity;
    return res;
  }
  if (buckets.length === 0) return res;
  const sorted = buckets.map((b) => ({ le: b.le, count: b.count }));
  sorted.sort((a, b) => (a.le < b.le ? -1 : a.le > b.le ? 1 : 0));
  if (sorted[sorted.length - 1].le !== Infinity) return res;
  // coalesceBuckets
  const bs: Bucket[] = [];
  let last = sorted[0];
  for (let i = 1; i < sorted.length; i++) {
    const b = sorted[i];
    if (b.le === last.le) last = { le: last.le, count: last.count + b.count };
    else {
      bs.push(last);
      last = b;
    }
  }
  bs.push(last);
  // ensureMonotonicAndIgnoreSmallDeltas
  let prev = bs[0].count;
  for (let i = 1; i < bs.length; i++) {
    const curr = bs[i].count;
    if (curr === prev) continue;
    if (almostEqual(prev, curr, SMALL_DELTA_TOLERANCE)) {
      bs[i].count = prev;
      res.fixedPrecision = true;
      continue;
    }
    if (curr < prev) {
      bs[i].count = prev;
      res.forcedMonotonic = true;
      continue;
    }
    prev = curr;
  }
  if (bs.length < 2) {
    res.forcedMonotonic = false;
    res.fixedPrecision = false;
    return res;
  }
  const observations = bs[bs.length - 1].count;
  if (observations === 0) {
    res.forcedMonotonic = false;
    res.fixedPrecision = false;
    return res;
  }
  let rank = q * observations;
  // sort.Search(len-1, count >= rank): smallest index in [0, n-1) satisfying it, else n-1.
  let lo = 0;
  let hi = bs.length - 1;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (!(bs[mid].count >= rank)) lo = mid + 1;
    else hi = mid;
  }
  const b = lo;
  if (b === bs.length - 1) {
    res.value = bs[bs.length - 2].le;
    res.capped = true;
    res.bucketIndex = b;
    res.lower = bs[bs.length - 2].le;
    res.upper = Infinity;
    return res;
  }
  res.bucketIndex = b;
  if (b === 0 && bs[0].le <= 0) {
    res.value = bs[0].le;
    res.lower = -Infinity;
    res.upper = bs[0].le;
    return res;
  }
  let bucketStart = 0;
  const bucketEnd = bs[b].le;
  let count = bs[b].count;
  if (b > 0) {
    bucketStart = bs[b - 1].le;
    count -= bs[b - 1].count;
    rank -= bs[b - 1].count;
  }
  res.lower = bucketStart;
  res.upper = bucketEnd;
  res.value = bucketStart + (bucketEnd - bucketStart) * (rank / count);
  return res;
}

/** Identical to Prometheus' classic `histogram_quantile` on one series of (cumulative) buckets. */
export function histogramQuantile(q: number, buckets: ReadonlyArray<Bucket>): number {
  return bucketQuantileDetail(q, buckets).value;
}

/** sum / count; NaN when there are no observations. */
export function histogramMean(series: { sum: number; count: number }): number {
  if (!(series.count > 0)) return Number.NaN;
  return series.sum / series.count;
}

export interface BucketRange {
  index: number;
  /** Exclusive lower bound: the previous bound, 0 for a first bucket with a positive bound, else -Inf. */
  lower: number;
  /** Inclusive upper bound. */
  upper: number;
  width: number;
  /** Observations in this bucket alone (not cumulative). */
  count: number;
}

/** The bucket whose (lower, upper] range holds `value`, with its width; undefined for NaN or no buckets. */
export function bucketContaining(buckets: ReadonlyArray<Bucket>, value: number): BucketRange | undefined {
  if (Number.isNaN(value) || buckets.length === 0) return undefined;
  const bs = [...buckets].sort((a, b) => a.le - b.le);
  for (let i = 0; i < bs.length; i++) {
    if (value <= bs[i].le) {
      const lower = i > 0 ? bs[i - 1].le : bs[0].le > 0 && value >= 0 ? 0 : -Infinity;
      const count = i > 0 ? bs[i].count - bs[i - 1].count : bs[i].count;
      return { index: i, lower, upper: bs[i].le, width: bs[i].le - lower, count };
    }
  }
  return undefined;
}
