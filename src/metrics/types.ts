// The family model every metrics module shares: what a parsed exposition is.

export type MetricType =
  | "counter"
  | "gauge"
  | "histogram"
  | "gaugehistogram"
  | "summary"
  | "untyped"
  | "info"
  | "stateset";

export type Labels = Record<string, string>;

export interface Exemplar {
  labels: Labels;
  value: number;
  /** Seconds since the epoch, as written. */
  timestamp?: number;
}

export interface Sample {
  /** Full sample name, e.g. `vllm:time_to_first_token_seconds_bucket`. */
  name: string;
  labels: Labels;
  value: number;
  /** Prometheus text: milliseconds; OpenMetrics: seconds. Normalised to milliseconds since the epoch. */
  timestampMs?: number;
  exemplar?: Exemplar;
  /** 1-based line of the sample in its source, for messages. */
  line?: number;
}

export interface MetricFamily {
  /** Family name without type suffixes (`_total`, `_bucket`, ...). */
  name: string;
  type: MetricType;
  help?: string;
  unit?: string;
  samples: Sample[];
}

export type ExpositionFormat = "prometheus-0.0.4" | "openmetrics-1.0";

export interface ParseWarning {
  line: number;
  column: number;
  message: string;
}

export interface Exposition {
  format: ExpositionFormat;
  families: MetricFamily[];
  /** Lenient-mode deviations from the strict rules (empty in strict mode). */
  warnings: ParseWarning[];
}

/** A histogram series (one label set, `le` removed) assembled from its samples. */
export interface HistogramSeries {
  family: string;
  labels: Labels;
  /** Cumulative buckets sorted by upper bound, the +Inf bucket last. */
  buckets: Array<{ le: number; count: number }>;
  sum: number;
  count: number;
  /** OpenMetrics gauge histograms carry gsum/gcount; same shape here. */
  created?: number;
}

/** A timestamped scrape: the input of diffs and audits. */
export interface Snapshot {
  /** Where it came from: URL or file path. */
  source: string;
  /** Wall-clock milliseconds when the body was received. */
  atMs: number;
  exposition: Exposition;
}
