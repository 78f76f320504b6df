// Public API of the metrics module. Append new exports; keep existing ones stable.

export type { CounterDelta, GaugeChange, HistogramDelta, SeriesRef, SnapshotDiff, SummaryDelta } from "./diff.ts";
export { diffSnapshots } from "./diff.ts";
export type { Bucket, BucketRange, QuantileDetail, SummarySeries } from "./histogram.ts";
export {
  bucketContaining,
  bucketQuantileDetail,
  histogramMean,
  histogramQuantile,
  histogramSeries,
  summarySeries,
} from "./histogram.ts";
export type { ParseOptions } from "./parse.ts";
export {
  findFamily,
  firstInvalidUtf8,
  formatFromContentType,
  labelKey,
  parseBytes,
  parseExposition,
  parseFloatText,
  sniffFormat,
} from "./parse.ts";
export * from "./types.ts";
export {
  escapeHelp,
  escapeLabelValue,
  formatExposition,
  formatLabelName,
  formatLabels,
  formatMetricName,
  formatSeries,
  formatValue,
} from "./write.ts";
