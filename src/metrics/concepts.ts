// The canonical concepts every engine catalog maps onto, and the shapes of those mappings.
import type { Labels, MetricType } from "./types.ts";

export const CONCEPTS = [
  "ttft",
  "itl",
  "tpot",
  "e2e",
  "queue",
  "prefill",
  "decode",
  "step_time",
  "step_tokens",
  "running",
  "waiting",
  "kv_usage",
  "prefix_cache_hit_rate",
  "preemptions",
  "spec_acceptance",
  "prompt_tokens",
  "generation_tokens",
  "requests",
] as const;
export type Concept = (typeof CONCEPTS)[number];

/**
 * How fine-grained a metric is: one observation per request (or per output event of a request),
 * per engine step, per operation (kernel, collective), or only a cumulative total over all work.
 */
export type Granularity = "request" | "step" | "operation" | "aggregate";

export type ConceptUnit = "seconds" | "tokens" | "requests" | "ratio" | "count";

export interface ConceptInfo {
  title: string;
  unit: ConceptUnit;
  /** Timing concepts decide the audit's verdict on granularity. */
  timing: boolean;
  description: string;
}

export const conceptInfo: Record<Concept, ConceptInfo> = {
  ttft: { title: "TTFT", unit: "seconds", timing: true, description: "arrival → first output token" },
  itl: {
    title: "ITL",
    unit: "seconds",
    timing: true,
    description: "gap between successive output events of one request",
  },
  tpot: { title: "TPOT", unit: "seconds", timing: true, description: "per-request mean time per output token" },
  e2e: { title: "E2E latency", unit: "seconds", timing: true, description: "arrival → last token" },
  queue: { title: "queue time", unit: "seconds", timing: true, description: "waiting before first scheduled" },
  prefill: { title: "prefill time", unit: "seconds", timing: true, description: "scheduled → first token" },
  decode: { title: "decode time", unit: "seconds", timing: true, description: "first → last token" },
  step_time: {
    title: "step forward time",
    unit: "seconds",
    timing: true,
    description: "duration of one engine step (forward pass)",
  },
  step_tokens: { title: "step tokens", unit: "tokens", timing: false, description: "tokens processed per engine step" },
  running: { title: "running", unit: "requests", timing: false, description: "requests in the running batch" },
  waiting: { title: "waiting", unit: "requests", timing: false, description: "requests queued" },
  kv_usage: { title: "KV cache usage", unit: "ratio", timing: false, description: "fraction of the KV cache in use" },
  prefix_cache_hit_rate: {
    title: "prefix cache hit rate",
    unit: "ratio",
    timing: false,
    description: "prefix-cache hits / queries",
  },
  preemptions: { title: "preemptions", unit: "count", timing: false, description: "requests preempted or retracted" },
  spec_acceptance: {
    title: "spec-decode acceptance",
    unit: "ratio",
    timing: false,
    description: "accepted / drafted speculative tokens",
  },
  prompt_tokens: { title: "prompt tokens", unit: "tokens", timing: false, description: "prefill tokens processed" },
  generation_tokens: { title: "generated tokens", unit: "tokens", timing: false, description: "output tokens" },
  requests: { title: "finished requests", unit: "requests", timing: false, description: "requests completed" },
};

/** Where a concept's value comes from in an engine's exposition. */
export type Source =
  /** A classic histogram; `scale` converts its unit to the concept's (ms → s: 1e-3). */
  | { kind: "histogram"; metric: string; match?: Labels; scale?: number }
  /** A counter: delta and rate over the window. */
  | { kind: "counter"; metric: string; match?: Labels }
  /** A gauge: value before and after the window. */
  | { kind: "gauge"; metric: string; match?: Labels; scale?: number }
  /** Two counters whose deltas divide: hits/queries, accepted/drafted. */
  | { kind: "ratio"; numerator: string; denominator: string; match?: Labels }
  /** A cumulative-time counter divided by a count counter: only a window mean. */
  | { kind: "counterMean"; sum: string; count: string; scale?: number; match?: Labels };

export interface ConceptBinding {
  granularity: Granularity;
  source: Source;
  /** What this metric really measures, when it differs from the concept's plain meaning. */
  note?: string;
}

/** The names and types an engine detector sees; parsed families and Prometheus name lists both fit. */
export interface FamilyLike {
  name: string;
  type: MetricType;
}

/** Every metric name a source reads (for fleet mode's queries and for "is it present"). */
export function sourceMetrics(s: Source): string[] {
  switch (s.kind) {
    case "histogram":
    case "counter":
    case "gauge":
      return [s.metric];
    case "ratio":
      return [s.numerator, s.denominator];
    case "counterMean":
      return [s.sum, s.count];
  }
}
