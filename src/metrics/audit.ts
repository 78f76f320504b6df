// The metrics audit: which canonical concepts an endpoint exposes, at which granularity, what their
// values were over a window, how coarse their buckets are, and how to recover what is missing.
// analyzeWindow/analyzeAudit are pure; auditMetrics does the I/O (two scrapes and the info endpoints).

import Table from "cli-table3";
import pc from "picocolors";
import { shellQuote } from "../shell.ts";
import {
  CONCEPTS,
  type Concept,
  type ConceptBinding,
  conceptInfo,
  type FamilyLike,
  type Granularity,
  type Source,
  sourceMetrics,
} from "./concepts.ts";
import { detectEngines, type EngineCatalog, NameIndex } from "./engines/index.ts";
import { histogramQuantile, histogramSeries } from "./histogram.ts";
import { type FetchOptions, fetchRaw, fetchServerInfo, isUrl, parseRaw, type ServerInfo, scrape } from "./scrape.ts";
import type { Labels, MetricFamily, Sample, Snapshot } from "./types.ts";

// ---------------------------------------------------------------------------------------------
// Window readers: the same questions answered from two snapshots or from Prometheus.

/** A histogram over the window: cumulative bucket deltas summed across series (like `sum by (le)`). */
export interface HistogramWindow {
  buckets: Array<{ le: number; count: number }>;
  count: number;
  sum: number;
  /** Series that went into the sum. */
  series: number;
  /** Series whose counts went down (restart): their after-values were used whole. */
  resets: number;
}

export interface WindowReader {
  windowSeconds: number;
  families: FamilyLike[];
  has(metric: string): boolean;
  histogram(metric: string, match?: Labels): HistogramWindow | undefined;
  counter(metric: string, match?: Labels): { delta: number; after: number; resets: number } | undefined;
  /** Summed over series (requests), or averaged (fractions such as KV usage, per data-parallel engine). */
  gauge(metric: string, match?: Labels, how?: "sum" | "avg"): { before?: number; after: number } | undefined;
  /** Values of a label across all samples (engine, model_name, tp_rank, …). */
  labelValues(label: string): string[];
}

function matches(labels: Labels, match?: Labels): boolean {
  if (!match) return true;
  for (const k in match) if (labels[k] !== match[k]) return false;
  return true;
}

function labelKey(labels: Labels, drop?: string): string {
  return Object.keys(labels)
    .filter((k) => k !== drop)
    .sort()
    .map((k) => `${k}=${JSON.stringify(labels[k])}`)
    .join(",");
}

/** Keeps only the lowest value of each replica label (tp_rank …): the other ranks repeat the same numbers. */
function replicaFilter<T extends { labels: Labels }>(items: T[], replicaLabels: string[]): T[] {
  let out = items;
  for (const l of replicaLabels) {
    const values = [...new Set(out.map((s) => s.labels[l]).filter((v): v is string => v !== undefined))];
    if (values.length < 2) continue;
    values.sort((a, b) => Number(a) - Number(b) || a.localeCompare(b));
    out = out.filter((s) => s.labels[l] === undefined || s.labels[l] === values[0]);
  }
  return out;
}

function findFamily(families: Map<string, MetricFamily>, name: string): MetricFamily | undefined {
  return (
    families.get(name) ?? (name.endsWith("_total") ? families.get(name.slice(0, -6)) : families.get(`${name}_total`))
  );
}

/** Samples that carry the family's own value (not `_created`, `_bucket`, …). */
function valueSamples(f: MetricFamily): Sample[] {
  return f.samples.filter((s) => !s.name.endsWith("_created"));
}

/** Sums cumulative buckets of several series by upper bound (equal bounds spelled differently merge). */
function addBuckets(into: Map<number, number>, buckets: Array<{ le: number; count: number }>, sign = 1): void {
  for (const b of buckets) into.set(b.le, (into.get(b.le) ?? 0) + sign * b.count);
}

function sortedBuckets(m: Map<number, number>): Array<{ le: number; count: number }> {
  return [...m.entries()].sort((a, b) => a[0] - b[0]).map(([le, count]) => ({ le, count }));
}

/** Reads a window from two snapshots of the same target. */
export function snapshotWindow(a: Snapshot, b: Snapshot, replicaLabels: string[] = []): WindowReader {
  const famA = new Map(a.exposition.families.map((f) => [f.name, f]));
  const famB = new Map(b.exposition.families.map((f) => [f.name, f]));
  const idx = new NameIndex(b.exposition.families);
  return {
    windowSeconds: (b.atMs - a.atMs) / 1000,
    families: b.exposition.families,
    has: (m) => {
      const f = findFamily(famB, m);
      return f !== undefined && f.samples.length > 0;
    },
    histogram(metric, match) {
      const fb = findFamily(famB, metric);
      if (!fb || (fb.type !== "histogram" && fb.type !== "gaugehistogram")) return undefined;
      const fa = findFamily(famA, metric);
      const pick = (f: MetricFamily) =>
        replicaFilter(
          histogramSeries(f).filter((s) => matches(s.labels, match)),
          replicaLabels,
        );
      const before = new Map((fa ? pick(fa) : []).map((s) => [labelKey(s.labels), s]));
      const total = new Map<number, number>();
      let count = 0;
      let sum = 0;
      let series = 0;
      let resets = 0;
      for (const s of pick(fb)) {
        series++;
        const p = before.get(labelKey(s.labels));
        const sameLayout =
          p !== undefined &&
          p.buckets.length === s.buckets.length &&
          p.buckets.every((x, i) => x.le === s.buckets[i]!.le && x.count <= s.buckets[i]!.count);
        if (p && sameLayout && p.count <= s.count) {
          addBuckets(total, s.buckets);
          addBuckets(total, p.buckets, -1);
          count += s.count - p.count;
          sum += s.sum - p.sum;
        } else {
          if (p) resets++;
          addBuckets(total, s.buckets);
          count += s.count;
          sum += s.sum;
        }
      }
      if (series === 0) return undefined;
      return { buckets: sortedBuckets(total), count, sum, series, resets };
    },
    counter(metric, match) {
      const fb = findFamily(famB, metric);
      if (!fb) return undefined;
      const fa = findFamily(famA, metric);
      const sb = replicaFilter(
        valueSamples(fb).filter((s) => matches(s.labels, match)),
        replicaLabels,
      );
      if (sb.length === 0) return undefined;
      const before = new Map(
        (fa ? valueSamples(fa) : []).filter((s) => matches(s.labels, match)).map((s) => [labelKey(s.labels), s.value]),
      );
      let delta = 0;
      let after = 0;
      let resets = 0;
      for (const s of sb) {
        after += s.value;
        const p = before.get(labelKey(s.labels));
        if (p === undefined) delta += s.value;
        else if (s.value < p) {
          resets++;
          delta += s.value;
        } else delta += s.value - p;
      }
      return { delta, after, resets };
    },
    gauge(metric, match, how = "sum") {
      const fb = findFamily(famB, metric);
      if (!fb) return undefined;
      const sum = (f: MetricFamily | undefined) => {
        if (!f) return undefined;
        const ss = replicaFilter(
          valueSamples(f).filter((s) => matches(s.labels, match)),
          replicaLabels,
        );
        if (!ss.length) return undefined;
        const total = ss.reduce((t, s) => t + s.value, 0);
        return how === "avg" ? total / ss.length : total;
      };
      const after = sum(fb);
      if (after === undefined) return undefined;
      return { before: sum(findFamily(famA, metric)), after };
    },
    labelValues(label) {
      const seen = new Set<string>();
      for (const f of b.exposition.families)
        for (const s of f.samples) if (s.labels[label] !== undefined) seen.add(s.labels[label]!);
      void idx;
      return [...seen].sort();
    },
  };
}

// ---------------------------------------------------------------------------------------------
// The report.

export interface ConceptValue {
  /** Observations in the window (histograms), or the counter delta. */
  count?: number;
  /** Concept units (seconds for timing). */
  mean?: number;
  p50?: number;
  p90?: number;
  p99?: number;
  /** Per second over the window. */
  rate?: number;
  before?: number;
  after?: number;
  ratio?: number;
}

export interface BucketResolution {
  /** Bounds (concept units) of the bucket holding the mean. */
  meanBucket?: { lower: number; upper: number };
  /** The most populated bucket and its share of the window's observations. */
  modalBucket: { lower: number; upper: number; share: number };
  /** Observations above the largest finite bound (quantiles there are capped). */
  aboveLargestBound: number;
  largestBound: number;
  /** True when the quantiles are interpolation inside one bucket rather than measurement. */
  interpolated: boolean;
  text: string;
}

export interface ConceptReport {
  concept: Concept;
  title: string;
  unit: string;
  observable: boolean;
  granularity?: Granularity;
  /** The metric(s) read, with label matchers. */
  metric?: string;
  kind?: Source["kind"];
  value?: ConceptValue;
  resolution?: BucketResolution;
  note?: string;
}

export interface Gap {
  what: string;
  why: string;
  method: string;
  command: string;
}

/** What the caller knows about the deployment, so recovery hints fit it (the study passes its discovery). */
export interface AuditContext {
  /** TP > 1 on an engine with NCCL/RCCL collectives; null when unknown. */
  collectives?: boolean | null;
  deviceKind?: "gpu" | "cpu" | null;
  /** The model argument for `model` commands (a catalog name, config.json or .gguf path). */
  model?: string | null;
  /** The hardware flags for `model` commands (e.g. "--cpu-bandwidth 12GB/s --cpu-cores 2"). */
  hardwareFlags?: string | null;
  /** The user's server command, for `ab` hints. */
  serverCmd?: string | null;
}

export interface AuditInfo {
  /** The metrics URL (or file) audited. */
  target: string;
  context?: AuditContext;
  server?: ServerInfo;
  via?: "scrape" | "prometheus";
  /** Fleet mode: the selector the Prometheus data was filtered by. */
  selector?: string;
  /** What each Accept header got (the audit asks for both formats). */
  formats?: FormatProbe[];
}

export interface FormatProbe {
  accept: string;
  contentType?: string;
  format?: string;
  families?: number;
  /** Why this format could not be read, if it could not. */
  error?: string;
}

/** A number derived from several concepts, with the formula that produced it. */
export interface Derived {
  name: string;
  value: number;
  unit: string;
  formula: string;
}

export interface AuditReport {
  target: string;
  via: "scrape" | "prometheus";
  selector?: string;
  windowSeconds: number;
  format?: string;
  families: number;
  samples?: number;
  engine: {
    id: string;
    name: string;
    confidence: number;
    variant?: string;
    version?: string;
    others: Array<{ id: string; confidence: number }>;
  } | null;
  models: string[];
  /** Label dimensions worth knowing: engine (DP index), model_name, tp_rank, … */
  dimensions: Record<string, string[]>;
  /** Coarsest-first summary of what timing the endpoint exposes. */
  timingGranularity: Granularity | "none";
  verdict: string;
  concepts: ConceptReport[];
  gaps: Gap[];
  quirks: string[];
  warnings: string[];
  /** True when no counter or histogram moved over the window. */
  idle: boolean;
  formats?: FormatProbe[];
  derived: Derived[];
}

const DIMENSION_LABELS = ["engine", "model_name", "model", "tp_rank", "pp_rank", "dp_rank", "engine_type"];

function pickBinding(reader: WindowReader, bindings: ConceptBinding[] | undefined): ConceptBinding | undefined {
  return bindings?.find((b) => sourceMetrics(b.source).every((m) => reader.has(m)));
}

function describeSource(s: Source): string {
  const sel = (m?: Labels) =>
    m
      ? `{${Object.entries(m)
          .map(([k, v]) => `${k}="${v}"`)
          .join(",")}}`
      : "";
  switch (s.kind) {
    case "histogram":
    case "counter":
    case "gauge":
      return `${s.metric}${sel(s.match)}`;
    case "ratio":
      return `${s.numerator} / ${s.denominator}`;
    case "counterMean":
      return `${s.sum} / ${s.count}`;
  }
}

/** Human time: µs below 1 ms, ms below 1 s, then s; three significant digits. */
export function fmtSeconds(s: number): string {
  if (!Number.isFinite(s)) return String(s);
  const a = Math.abs(s);
  if (a === 0) return "0 ms";
  if (a < 1e-3) return `${sig(s * 1e6)} µs`;
  if (a < 1) return `${sig(s * 1e3)} ms`;
  return `${sig(s)} s`;
}

function sig(x: number): string {
  const a = Math.abs(x);
  const d = a >= 100 ? 0 : a >= 10 ? 1 : 2;
  return String(Number(x.toFixed(d)));
}

/** Observation counts: integers as they are; Prometheus' extrapolated increases as "≈N". */
function count(n: number): string {
  return Number.isInteger(n) ? String(n) : `≈${Math.round(n)}`;
}

/** "10–25 ms": both bounds in the unit of the upper one. */
export function fmtRange(lower: number, upper: number, unit: string): string {
  if (unit !== "seconds") return `${sig(lower)}–${sig(upper)}`;
  if (!Number.isFinite(upper)) return `above ${fmtSeconds(lower)}`;
  const [f, u] = upper < 1e-3 ? [1e6, "µs"] : upper < 1 ? [1e3, "ms"] : [1, "s"];
  return `${sig(lower * f)}–${sig(upper * f)} ${u}`;
}

function fmtUnit(x: number, unit: string): string {
  return unit === "seconds" ? fmtSeconds(x) : sig(x);
}

/** Where the window's observations sit in the bucket layout, and what that means for the quantiles. */
export function bucketResolution(
  title: string,
  buckets: Array<{ le: number; count: number }>,
  mean: number | undefined,
  scale: number,
  unit: string,
): BucketResolution | undefined {
  const n = buckets.at(-1)?.count ?? 0;
  if (n <= 0 || buckets.length < 2) return undefined;
  const finite = buckets.filter((b) => Number.isFinite(b.le));
  const largestBound = (finite.at(-1)?.le ?? 0) * scale;
  let modal = { lower: 0, upper: 0, share: -1 };
  let prevLe = Math.min(0, buckets[0]!.le);
  let prevCount = 0;
  let meanBucket: { lower: number; upper: number } | undefined;
  for (const b of buckets) {
    const inBucket = b.count - prevCount;
    const share = inBucket / n;
    if (share > modal.share) modal = { lower: prevLe * scale, upper: b.le * scale, share };
    if (mean !== undefined && !meanBucket && mean <= b.le * scale)
      meanBucket = { lower: prevLe * scale, upper: b.le * scale };
    prevLe = b.le;
    prevCount = b.count;
  }
  const above = n - (finite.at(-1)?.count ?? 0);
  const parts: string[] = [];
  let interpolated = false;
  const range = (r: { lower: number; upper: number }) => fmtRange(r.lower, r.upper, unit);
  if (meanBucket && mean !== undefined && Number.isFinite(meanBucket.upper)) {
    const width = meanBucket.upper - meanBucket.lower;
    const rel = mean > 0 ? width / mean : Number.POSITIVE_INFINITY;
    if (rel > 0.2) {
      interpolated = true;
      parts.push(
        `${title} buckets are ${fmtUnit(width, unit)} wide around the ${fmtUnit(mean, unit)} mean: p50 is interpolated, not measured`,
      );
    } else parts.push(`${title} buckets are ${fmtUnit(width, unit)} wide around the mean: fine enough`);
  }
  if (modal.share >= 0.999) {
    interpolated = true;
    parts.push(
      Number.isFinite(modal.upper)
        ? `all ${count(n)} observations fall in one bucket (${range(modal)}): every quantile is a straight-line guess inside it; use the mean (sum/count)`
        : `all ${count(n)} observations are above the largest bound (${fmtUnit(largestBound, unit)}): quantiles are capped there`,
    );
  } else if (modal.share >= 0.8 && Number.isFinite(modal.upper)) {
    interpolated = true;
    parts.push(`${Math.round(modal.share * 100)} % of observations fall in one bucket (${range(modal)})`);
  }
  if (above > 0 && modal.share < 0.999)
    parts.push(`${count(above)} observations above ${fmtUnit(largestBound, unit)}: p99 is capped at that bound`);
  return {
    meanBucket,
    modalBucket: modal,
    aboveLargestBound: above,
    largestBound,
    interpolated,
    text: parts.join("; "),
  };
}

function evaluate(reader: WindowReader, c: Concept, b: ConceptBinding): Pick<ConceptReport, "value" | "resolution"> {
  const s = b.source;
  const w = reader.windowSeconds;
  const info = conceptInfo[c];
  switch (s.kind) {
    case "histogram": {
      const h = reader.histogram(s.metric, s.match);
      if (!h) return {};
      const scale = s.scale ?? 1;
      const value: ConceptValue = { count: h.count, rate: w > 0 ? h.count / w : undefined };
      if (h.count > 0) {
        value.mean = (h.sum / h.count) * scale;
        const q = (p: number) => {
          const v = histogramQuantile(p, h.buckets);
          return Number.isNaN(v) ? undefined : v * scale;
        };
        value.p50 = q(0.5);
        value.p90 = q(0.9);
        value.p99 = q(0.99);
      }
      const resolution =
        h.count > 0 && info.timing ? bucketResolution(info.title, h.buckets, value.mean, scale, info.unit) : undefined;
      return { value, resolution };
    }
    case "counter": {
      const k = reader.counter(s.metric, s.match);
      if (!k) return {};
      return { value: { count: k.delta, after: k.after, rate: w > 0 ? k.delta / w : undefined } };
    }
    case "gauge": {
      const g = reader.gauge(s.metric, s.match, info.unit === "ratio" ? "avg" : "sum");
      if (!g) return {};
      const scale = s.scale ?? 1;
      return {
        value: { before: g.before === undefined ? undefined : g.before * scale, after: g.after * scale },
      };
    }
    case "ratio": {
      const num = reader.counter(s.numerator, s.match);
      const den = reader.counter(s.denominator, s.match);
      if (!num || !den) return {};
      return {
        value: { count: den.delta, ratio: den.delta > 0 ? num.delta / den.delta : undefined },
      };
    }
    case "counterMean": {
      const sum = reader.counter(s.sum, s.match);
      const cnt = reader.counter(s.count, s.match);
      if (!sum || !cnt) return {};
      const scale = s.scale ?? 1;
      return {
        value: {
          count: cnt.delta,
          mean: cnt.delta > 0 ? (sum.delta / cnt.delta) * scale : undefined,
          rate: w > 0 ? cnt.delta / w : undefined,
        },
      };
    }
  }
}

const GRANULARITY_ORDER: Granularity[] = ["aggregate", "request", "step", "operation"];

function originOf(target: string): string {
  try {
    return new URL(target).origin;
  } catch {
    return "URL";
  }
}

function gapsFor(
  engine: EngineCatalog | undefined,
  concepts: ConceptReport[],
  info: AuditInfo,
  models: string[],
): Gap[] {
  const url = info.via === "prometheus" ? "<server URL>" : originOf(info.target);
  const ctx = info.context ?? {};
  const model = ctx.model ? shellQuote(ctx.model) : models[0] ? shellQuote(models[0]) : "<model>";
  // Device flags that fit the deployment: never a GPU for a CPU host.
  const device =
    ctx.hardwareFlags ??
    (ctx.deviceKind === "cpu"
      ? "--cpu-bandwidth <GB/s> --cpu-cores <n>"
      : ctx.deviceKind === "gpu"
        ? "--gpu <gpu> --gpus <n> --tp <n>"
        : engine?.id === "llamacpp"
          ? "--hardware <file.yaml>"
          : "--gpu <gpu> --gpus <n> --tp <n>");
  const cmd = ctx.serverCmd ? shellQuote(ctx.serverCmd) : "'<your server command>'";
  const byId = new Map(concepts.map((c) => [c.concept, c]));
  const gaps: Gap[] = [];
  const hasOp = concepts.some((c) => c.observable && c.granularity === "operation");
  // Collectives exist only with TP > 1 on an engine that uses NCCL/RCCL (llama.cpp's layer split does not).
  const collectives = engine?.usesNccl === false ? false : (ctx.collectives ?? null);
  if (!hasOp) {
    gaps.push(
      engine?.profiler
        ? {
            what: "per-operation timing (GEMM, attention, all-reduce kernels)",
            why: "no metric times individual operations",
            method: `profiler trace through /start_profile and /stop_profile (${engine.profiler.enable})`,
            command: `inferscope trace capture ${url} --steps 20`,
          }
        : {
            what: "per-operation timing (matmuls, attention)",
            why: "no metric times individual operations, and this engine has no profiler endpoint",
            method: "analytical decode-step model, explained term by term",
            command: `inferscope model explain --model ${model} ${device}`,
          },
    );
    if (collectives !== false)
      gaps.push({
        what: "all-reduce (collective) time per token",
        why: `communication is inside the step; no metric separates it${collectives === null ? " (applies with TP > 1)" : ""}`,
        method: "A/B experiment that changes only the NCCL protocol, with server restarts and confidence intervals",
        command: `inferscope ab --server-cmd ${cmd} --variant base: --variant ll:NCCL_PROTO=LL`,
      });
  }
  const step = byId.get("step_time");
  if (!step?.observable || step.granularity !== "step") {
    gaps.push({
      what: "per-step forward time",
      why: step?.observable
        ? `only ${step.granularity}-level (${step.metric})`
        : (engine?.missing?.step_time ?? "no per-step timing metric"),
      method: "length sweep: the slope of end-to-end time against output length is the per-token decode cost",
      command: `inferscope sweep lengths --url ${url} --out 16,32,64,128,256,512`,
    });
  }
  gaps.push({
    what: "step breakdown (compute / communication / overhead)",
    why: "metrics give totals, never the parts of a step",
    method: "analytical model from the architecture, hardware and parallelism, calibrated on the measurements",
    command: `inferscope model predict --model ${model} ${device}`,
  });
  const itl = byId.get("itl");
  if (itl?.resolution?.interpolated || (!itl?.observable && byId.get("tpot")?.observable)) {
    gaps.push({
      what: "inter-token latency finer than the buckets",
      why: itl?.observable ? `${itl.metric} buckets are too coarse for the signal` : "no per-token gap histogram",
      method:
        "client-side per-chunk timing" +
        (engine?.id === "vllm" ? " (or restart vLLM with --custom-histogram-buckets for finer ITL bounds)" : ""),
      command: `inferscope bench --base-url ${url} --concurrency 1 --num-prompts 20`,
    });
  }
  // The engine's own ways (llama.cpp's per-response timings and /slots, …).
  for (const h of engine?.hints ?? [])
    gaps.push({
      what: h.what,
      why: h.why,
      method: h.method,
      command: h.command
        .replace(/\{url\}/g, url)
        .replace(/\{model\}/g, model)
        .replace(/\{device\}/g, device),
    });
  return gaps;
}

/** Pure: the audit of one window, whatever it was read from. */
export function analyzeWindow(
  reader: WindowReader,
  info: AuditInfo,
  extra: { format?: string; samples?: number; warnings?: string[] } = {},
): AuditReport {
  const detections = detectEngines(reader.families);
  const top = detections[0];
  const engine = top?.engine;
  const names = new NameIndex(reader.families);
  const concepts: ConceptReport[] = CONCEPTS.map((c) => {
    const ci = conceptInfo[c];
    const binding = engine ? pickBinding(reader, engine.concepts[c]) : undefined;
    if (!binding)
      return {
        concept: c,
        title: ci.title,
        unit: ci.unit,
        observable: false,
        note:
          engine?.missing?.[c] ??
          (engine?.concepts[c] ? "not in this exposition (feature off, or a different version)" : undefined),
      };
    return {
      concept: c,
      title: ci.title,
      unit: ci.unit,
      observable: true,
      granularity: binding.granularity,
      metric: describeSource(binding.source),
      kind: binding.source.kind,
      note: binding.note,
      ...evaluate(reader, c, binding),
    };
  });

  const dimensions: Record<string, string[]> = {};
  for (const l of DIMENSION_LABELS) {
    const v = reader.labelValues(l);
    if (v.length) dimensions[l] = v;
  }
  const models = info.server?.models.length ? info.server.models : (dimensions.model_name ?? dimensions.model ?? []);

  const timing = concepts.filter((c) => c.observable && conceptInfo[c.concept].timing);
  const finest = timing.reduce<Granularity | "none">(
    (g, c) =>
      g === "none" || GRANULARITY_ORDER.indexOf(c.granularity!) > GRANULARITY_ORDER.indexOf(g) ? c.granularity! : g,
    "none",
  );
  const moved = concepts.some((c) => c.observable && c.kind !== "gauge" && (c.value?.count ?? 0) > 0);
  const verdictParts: string[] = [];
  if (!engine) verdictParts.push("no known inference engine detected");
  if (finest === "none") verdictParts.push("no timing metrics");
  else if (finest === "request") verdictParts.push("request-level only");
  else if (finest === "aggregate") verdictParts.push("cumulative totals only");
  else if (finest === "step") {
    const st =
      timing.find((c) => c.concept === "step_time" && c.granularity === "step") ??
      timing.find((c) => c.granularity === "step");
    verdictParts.push(`step-level timing (${st?.metric}); no per-operation timing`);
  } else verdictParts.push("operation-level timing");
  const itl = concepts.find((c) => c.concept === "itl");
  const itlBucket = itl?.resolution?.modalBucket;
  if (itl?.resolution && itlBucket && itlBucket.share >= 0.8 && Number.isFinite(itlBucket.upper))
    verdictParts.push(`ITL bucket ${fmtRange(itlBucket.lower, itlBucket.upper, "seconds")} spans the signal`);
  if (!moved && reader.windowSeconds > 0)
    verdictParts.push("no traffic during the window (send requests while auditing)");

  const quirks: string[] = [];
  if (engine) for (const q of engine.quirks) if (q.when(names)) quirks.push(q.text);
  const warnings = [...(extra.warnings ?? [])];
  if (top && top.confidence < 0.6)
    warnings.push(`engine detection is weak (${top.engine.name}, confidence ${top.confidence.toFixed(2)})`);

  return {
    target: info.target,
    via: info.via ?? "scrape",
    selector: info.selector,
    windowSeconds: reader.windowSeconds,
    format: extra.format,
    families: reader.families.length,
    samples: extra.samples,
    engine: engine
      ? {
          id: engine.id,
          name: engine.name,
          confidence: top!.confidence,
          variant: engine.variant?.(reader.families),
          version: info.server?.version,
          others: detections.slice(1).map((d) => ({ id: d.engine.id, confidence: d.confidence })),
        }
      : null,
    models,
    dimensions,
    timingGranularity: finest,
    verdict: verdictParts.join("; "),
    concepts,
    gaps: gapsFor(engine, concepts, info, models),
    quirks,
    warnings,
    idle: !moved,
    formats: info.formats,
    derived: deriveNumbers(concepts, engine?.id),
  };
}

/** Cross-concept numbers that say how to read the others (per-token vs per-event ITL, steps/s). */
export function deriveNumbers(concepts: ConceptReport[], engineId?: string): Derived[] {
  const v = (c: Concept) => {
    const k = concepts.find((x) => x.concept === c);
    return k?.observable ? k.value : undefined;
  };
  const out: Derived[] = [];
  const itl = v("itl");
  if (itl?.mean && itl.mean > 0)
    out.push({
      name: "per-request decode rate",
      value: 1 / itl.mean,
      unit: "tok/s",
      formula: "1 / ITL mean (one token per output event)",
    });
  const steps = v("step_tokens");
  const stepKind = concepts.find((x) => x.concept === "step_tokens")?.kind;
  if (stepKind === "histogram" && steps?.count && steps.count > 0) {
    out.push({
      name: "engine steps",
      value: steps.rate ?? 0,
      unit: "steps/s",
      formula: "Δ step-tokens _count / window",
    });
    if (steps.mean !== undefined)
      out.push({ name: "tokens per step", value: steps.mean, unit: "tokens", formula: "Δ_sum / Δ_count" });
  }
  // vLLM observes ITL once per output batch: generated − finished requests = ITL observations when
  // each batch carries one token. More tokens per observation means multi-token chunks (speculative
  // decoding), and ITL is then not a per-token latency. (SGLang's ITL counts tokens already.)
  const gen = v("generation_tokens");
  const req = v("requests");
  if (engineId === "vllm" && itl?.count && gen?.count !== undefined && req?.count !== undefined)
    out.push({
      name: "tokens per ITL observation",
      value: (gen.count - req.count) / itl.count,
      unit: "tokens",
      formula: "(Δ generated − Δ finished requests) / Δ ITL _count (≈1: ITL is per token; in-flight requests skew it)",
    });
  return out;
}

/** Pure: the audit of the window between two snapshots of one target. */
export function analyzeAudit(a: Snapshot, b: Snapshot, info: AuditInfo): AuditReport {
  const engine = detectEngines(b.exposition.families)[0]?.engine;
  const reader = snapshotWindow(a, b, engine?.replicaLabels ?? []);
  const samples = b.exposition.families.reduce((t, f) => t + f.samples.length, 0);
  const warnings = b.exposition.warnings.slice(0, 5).map((w) => `${b.source}:${w.line}:${w.column}: ${w.message}`);
  if (b.exposition.warnings.length > 5) warnings.push(`… and ${b.exposition.warnings.length - 5} more parse warnings`);
  return analyzeWindow(reader, { via: "scrape", ...info }, { format: b.exposition.format, samples, warnings });
}

export interface AuditOptions extends FetchOptions {
  /** Time between the two scrapes (ms). */
  windowMs?: number;
  /** Waits between the scrapes; tests pass a fake. */
  sleep?: (ms: number) => Promise<void>;
  /** Called between the phases, for progress output. */
  onProgress?: (message: string) => void;
  /** Skip /v1/models and /version. */
  noInfo?: boolean;
  /** What is known about the deployment, so the recovery hints fit it. */
  context?: AuditContext;
}

const defaultSleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Scrapes a target twice across the window (and reads its info endpoints), then audits the window. */
export async function auditMetrics(target: string, opts: AuditOptions = {}): Promise<AuditReport> {
  const windowMs = opts.windowMs ?? 10_000;
  const sleep = opts.sleep ?? defaultSleep;
  opts.onProgress?.(`scraping ${target}`);
  const a = await scrape(target, opts);
  const infoP =
    isUrl(target) && !opts.noInfo ? fetchServerInfo(target, opts) : Promise.resolve<ServerInfo>({ models: [] });
  opts.onProgress?.(`waiting ${windowMs / 1000} s for the second scrape`);
  await sleep(windowMs);
  const b = await scrape(target, opts);
  const server = await infoP;
  const formats = isUrl(target) ? await probeFormats(target, a, opts) : undefined;
  const report = analyzeAudit(a, b, { target, server, via: "scrape", formats, context: opts.context });
  const counts = formats?.filter((f) => f.families !== undefined).map((f) => f.families);
  if (counts && counts.length === 2 && counts[0] !== counts[1])
    report.warnings.push(
      `the two formats list different families (${counts[0]} vs ${counts[1]}, _created aside): dashboards built on one may miss metrics in the other`,
    );
  for (const f of formats ?? []) if (f.error) report.warnings.push(`with Accept: ${f.accept}: ${f.error}`);
  return report;
}

const TEXT_ACCEPT = "text/plain;version=0.0.4";
const OM_ACCEPT = "application/openmetrics-text;version=1.0.0";

/**
 * Servers answer the OpenMetrics-first Accept with either format (prometheus_client's choice depends
 * on its version): ask once more for the other one and record what each gives.
 */
async function probeFormats(target: string, first: Snapshot, opts: AuditOptions): Promise<FormatProbe[]> {
  const families = (s: Snapshot) => s.exposition.families.filter((f) => !f.name.endsWith("_created")).length;
  const firstIsOm = first.exposition.format === "openmetrics-1.0";
  const probes: FormatProbe[] = [
    { accept: firstIsOm ? OM_ACCEPT : TEXT_ACCEPT, format: first.exposition.format, families: families(first) },
  ];
  const accept = firstIsOm ? TEXT_ACCEPT : OM_ACCEPT;
  try {
    const raw = await fetchRaw(target, { ...opts, headers: { ...opts.headers, accept } });
    const snap = parseRaw(raw);
    probes.push({ accept, contentType: raw.contentType, format: snap.exposition.format, families: families(snap) });
  } catch (err) {
    probes.push({ accept, error: (err as Error).message });
  }
  return probes;
}

// ---------------------------------------------------------------------------------------------
// Text rendering.

function fmtValue(c: ConceptReport): string {
  const v = c.value;
  if (!c.observable) return "";
  if (!v) return "no samples";
  const u = (x: number | undefined) =>
    x === undefined ? "–" : c.unit === "seconds" ? fmtSeconds(x) : c.unit === "ratio" ? sig(x) : sig(x);
  switch (c.kind) {
    case "histogram":
      return v.count
        ? `n=${sig(v.count)}  mean ${u(v.mean)}  p50 ${u(v.p50)}  p90 ${u(v.p90)}  p99 ${u(v.p99)}`
        : "n=0 in the window";
    case "counter":
      return `+${sig(v.count ?? 0)} (${sig(v.rate ?? 0)}/s)`;
    case "gauge":
      return v.before === undefined || v.before === v.after ? u(v.after) : `${u(v.before)} → ${u(v.after)}`;
    case "ratio":
      return v.ratio === undefined
        ? "no activity in the window"
        : `${(v.ratio * 100).toFixed(1)} % (over ${sig(v.count ?? 0)})`;
    case "counterMean":
      return v.mean === undefined ? "no activity in the window" : `mean ${u(v.mean)} (n=${sig(v.count ?? 0)})`;
    default:
      return "";
  }
}

/** The audit as terminal text: header, verdict, concept table, resolution notes, gaps with commands. */
export function formatAudit(r: AuditReport, opts: { color?: boolean } = {}): string {
  const c = opts.color ? pc : pc.createColors(false);
  const lines: string[] = [];
  const eng = r.engine
    ? `${r.engine.name}${r.engine.variant ? ` ${r.engine.variant}` : ""}${r.engine.version ? ` ${r.engine.version}` : ""} (confidence ${r.engine.confidence.toFixed(2)})`
    : "unknown engine";
  const dims = Object.entries(r.dimensions)
    .filter(([k]) => k !== "model_name" && k !== "model")
    .map(([k, v]) => `${k} ${v.join(",")}`);
  lines.push(
    `${c.bold(eng)} · ${r.via === "prometheus" ? `Prometheus ${r.target}${r.selector ? ` ${r.selector}` : ""}` : r.target}`,
  );
  lines.push(
    [
      r.models.length ? `model ${r.models.join(", ")}` : undefined,
      ...dims,
      `window ${r.windowSeconds.toFixed(1)} s`,
      r.formats?.length
        ? `formats: ${[...new Set(r.formats.map((f) => f.format ?? "unreadable"))].join(" and ")}`
        : r.format,
      `${r.families} families`,
    ]
      .filter(Boolean)
      .join(" · "),
  );
  lines.push("", `${c.bold("Verdict:")} ${r.verdict}`, "");
  const table = new Table({
    head: ["concept", "exposed", "granularity", "metric", "over the window"],
    style: { head: opts.color ? ["cyan"] : [], border: opts.color ? ["grey"] : [] },
    wordWrap: true,
    colWidths: [null, null, null, 46, null] as unknown as number[],
  });
  for (const k of r.concepts)
    table.push([
      k.title,
      k.observable ? c.green("yes") : c.yellow("no"),
      k.granularity ?? "",
      k.metric ?? (k.note ? c.dim(k.note) : ""),
      fmtValue(k),
    ]);
  lines.push(table.toString());
  const res = r.concepts.filter((k) => k.resolution?.text);
  if (res.length) {
    lines.push("", c.bold("Bucket resolution:"));
    for (const k of res) lines.push(`  ${k.title}: ${k.resolution!.text}`);
  }
  const notes = r.concepts.filter((k) => k.observable && k.note);
  if (notes.length) {
    lines.push("", c.bold("What the metrics measure:"));
    for (const k of notes) lines.push(`  ${k.title} (${k.metric}): ${k.note}`);
  }
  if (r.derived.length) {
    lines.push("", c.bold("Derived:"));
    for (const d of r.derived) lines.push(`  ${d.name}: ${sig(d.value)} ${d.unit}  (${d.formula})`);
  }
  if (r.gaps.length) {
    lines.push("", c.bold("Not exposed, and how to recover it:"));
    for (const g of r.gaps) {
      lines.push(`  - ${g.what}: ${g.why}.`, `    ${g.method}:`, `      ${c.cyan(g.command)}`);
    }
  }
  if (r.quirks.length) {
    lines.push("", c.bold("Quirks handled:"));
    for (const q of r.quirks) lines.push(`  - ${q}`);
  }
  if (r.warnings.length) {
    lines.push("", c.bold("Warnings:"));
    for (const w of r.warnings) lines.push(`  - ${w}`);
  }
  return lines.join("\n");
}
