// Difference of two scrapes over a window: counter deltas with resets, histogram bucket deltas, gauges.

import type { Bucket } from "./histogram.ts";
import { histogramSeries, summarySeries } from "./histogram.ts";
import { labelKey } from "./parse.ts";
import type { Labels, MetricFamily, MetricType, Snapshot } from "./types.ts";

export interface CounterDelta {
  family: string;
  /** Sample name, e.g. `vllm:prompt_tokens_total`. */
  name: string;
  labels: Labels;
  before: number;
  after: number;
  /** after − before; after a reset (after < before, or `_created` changed) it is `after`. */
  delta: number;
  /** delta per second of the window (NaN when the window is not positive). */
  rate: number;
  reset: boolean;
  /** The series did not exist in `before`: delta is `after` (it started from 0 in the window). */
  added: boolean;
}

export interface GaugeChange {
  family: string;
  name: string;
  labels: Labels;
  type: MetricType;
  /** NaN when the series is new. */
  before: number;
  after: number;
  change: number;
}

export interface HistogramDelta {
  family: string;
  labels: Labels;
  type: "histogram" | "gaugehistogram";
  /** Cumulative bucket counts observed in the window, bucket by bucket (bounds of `after`). */
  buckets: Bucket[];
  count: number;
  sum: number;
  /** Observations per second. */
  rate: number;
  /** sum / count of the window's observations. */
  mean: number;
  reset: boolean;
  added: boolean;
  /** Bounds present in only one of the two scrapes (re-bucketed between scrapes); those buckets use `after`. */
  boundsChanged: boolean;
}

export interface SummaryDelta {
  family: string;
  labels: Labels;
  count: number;
  sum: number;
  rate: number;
  mean: number;
  reset: boolean;
  /** The quantiles as exposed in `after` (a summary's quantiles cannot be differenced). */
  quantiles: Array<{ quantile: number; value: number }>;
}

export interface SeriesRef {
  family: string;
  name: string;
  labels: Labels;
}

/**
 * What changed between two snapshots of the same target. Counters: `delta` and per-second `rate`
 * with reset detection. Histograms: bucket-by-bucket deltas (reset if `_count` or any bucket
 * decreased, or `_created` changed; then the window is `after` alone). Gauges (and untyped, info,
 * stateset): before/after. Series present only in `before` are listed in `removed`.
 */
export interface SnapshotDiff {
  beforeAtMs: number;
  afterAtMs: number;
  /** (after.atMs − before.atMs) / 1000; NaN when unknown (see windowUnknown). */
  windowSeconds: number;
  /** Why the window is unknown (two files written at the same moment, or `after` older than `before`); null when known. */
  windowUnknown: string | null;
  counters: CounterDelta[];
  gauges: GaugeChange[];
  histograms: HistogramDelta[];
  summaries: SummaryDelta[];
  removed: SeriesRef[];
  /** Families whose type differs between the scrapes (compared by `after`'s type). */
  typeChanged: string[];
}

function famMap(fams: MetricFamily[]): Map<string, MetricFamily> {
  const m = new Map<string, MetricFamily>();
  for (const f of fams) {
    const prev = m.get(f.name);
    if (prev) m.set(f.name, { ...prev, samples: [...prev.samples, ...f.samples] });
    else m.set(f.name, f);
  }
  return m;
}

function sampleMap(f: MetricFamily | undefined): Map<string, number> {
  const m = new Map<string, number>();
  if (!f) return m;
  for (const s of f.samples) m.set(s.name + labelKey(s.labels), s.value);
  return m;
}

export function diffSnapshots(before: Snapshot, after: Snapshot): SnapshotDiff {
  // Files carry no scrape time, only when they were written: two written together span no known window.
  const span = (after.atMs - before.atMs) / 1000;
  const windowUnknown =
    span > 0
      ? null
      : span === 0
        ? "both expositions carry the same time (a file's time is when it was written), so per-second rates are not given"
        : "the second exposition is older than the first, so per-second rates are not given";
  const windowSeconds = windowUnknown ? Number.NaN : span;
  const perSec = (x: number): number => (windowSeconds > 0 ? x / windowSeconds : Number.NaN);
  const out: SnapshotDiff = {
    beforeAtMs: before.atMs,
    afterAtMs: after.atMs,
    windowSeconds,
    windowUnknown,
    counters: [],
    gauges: [],
    histograms: [],
    summaries: [],
    removed: [],
    typeChanged: [],
  };
  const bFams = famMap(before.exposition.families);
  const aFams = famMap(after.exposition.families);
  const seen = new Set<string>();
  for (const [name, af] of aFams) {
    const bf0 = bFams.get(name);
    if (bf0 && bf0.type !== af.type) out.typeChanged.push(name);
    const bf = bf0 && bf0.type === af.type ? bf0 : undefined;
    const bVals = sampleMap(bf);
    for (const s of af.samples) seen.add(name + s.name + labelKey(s.labels));
    if (af.type === "counter") {
      const created = new Map<string, number>();
      for (const s of af.samples) if (s.name === `${name}_created`) created.set(labelKey(s.labels), s.value);
      const bCreated = new Map<string, number>();
      if (bf) for (const s of bf.samples) if (s.name === `${name}_created`) bCreated.set(labelKey(s.labels), s.value);
      for (const s of af.samples) {
        if (s.name === `${name}_created`) continue;
        const lk = labelKey(s.labels);
        const key = s.name + lk;
        const b = bVals.get(key);
        const added = b === undefined;
        const createdChanged = created.has(lk) && bCreated.has(lk) && created.get(lk) !== bCreated.get(lk);
        const reset = !added && (s.value < (b as number) || createdChanged);
        const delta = added || reset ? s.value : s.value - (b as number);
        out.counters.push({
          family: name,
          name: s.name,
          labels: s.labels,
          before: added ? Number.NaN : (b as number),
          after: s.value,
          delta,
          rate: perSec(delta),
          reset,
          added,
        });
      }
    } else if (af.type === "histogram" || af.type === "gaugehistogram") {
      const bSeries = new Map<string, ReturnType<typeof histogramSeries>[number]>();
      if (bf) for (const h of histogramSeries(bf)) bSeries.set(labelKey(h.labels), h);
      for (const h of histogramSeries(af)) {
        const lk = labelKey(h.labels);
        const bh = bSeries.get(lk);
        const added = bh === undefined;
        let reset = false;
        let boundsChanged = false;
        if (bh && af.type === "histogram") {
          if (h.count < bh.count) reset = true;
          if (h.created !== undefined && bh.created !== undefined && h.created !== bh.created) reset = true;
          for (const b of h.buckets) {
            const pb = bh.buckets.find((x) => x.le === b.le);
            if (pb === undefined) boundsChanged = true;
            else if (b.count < pb.count) reset = true;
          }
          if (bh.buckets.length !== h.buckets.length) boundsChanged = true;
        }
        // A gauge histogram is a current distribution, not a running total: its window is `after`.
        const asIs = added || reset || af.type === "gaugehistogram";
        const buckets = h.buckets.map((b) => {
          if (asIs || !bh) return { le: b.le, count: b.count };
          const pb = bh.buckets.find((x) => x.le === b.le);
          return { le: b.le, count: pb === undefined ? b.count : b.count - pb.count };
        });
        const count = asIs || !bh ? h.count : h.count - bh.count;
        const sum = asIs || !bh ? h.sum : h.sum - bh.sum;
        out.histograms.push({
          family: name,
          labels: h.labels,
          type: af.type,
          buckets,
          count,
          sum,
          rate: perSec(count),
          mean: count > 0 ? sum / count : Number.NaN,
          reset,
          added,
          boundsChanged,
        });
      }
    } else if (af.type === "summary") {
      const bSeries = new Map<string, ReturnType<typeof summarySeries>[number]>();
      if (bf) for (const q of summarySeries(bf)) bSeries.set(labelKey(q.labels), q);
      for (const q of summarySeries(af)) {
        const bq = bSeries.get(labelKey(q.labels));
        const reset =
          bq !== undefined &&
          (q.count < bq.count || (q.created !== undefined && bq.created !== undefined && q.created !== bq.created));
        const asIs = bq === undefined || reset;
        const count = asIs ? q.count : q.count - bq.count;
        const sum = asIs ? q.sum : q.sum - bq.sum;
        out.summaries.push({
          family: name,
          labels: q.labels,
          count,
          sum,
          rate: perSec(count),
          mean: count > 0 ? sum / count : Number.NaN,
          reset,
          quantiles: q.quantiles,
        });
      }
    } else {
      for (const s of af.samples) {
        const key = s.name + labelKey(s.labels);
        const b = bVals.get(key);
        const bv = b === undefined ? Number.NaN : b;
        out.gauges.push({
          family: name,
          name: s.name,
          labels: s.labels,
          type: af.type,
          before: bv,
          after: s.value,
          change: s.value - bv,
        });
      }
    }
  }
  for (const [name, bf] of bFams) {
    for (const s of bf.samples) {
      if (!seen.has(name + s.name + labelKey(s.labels)))
        out.removed.push({ family: name, name: s.name, labels: s.labels });
    }
  }
  return out;
}
