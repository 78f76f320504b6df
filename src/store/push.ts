// `runs push`: a run's summary sent where teams keep metrics. Prometheus remote-write 1.0 (protobuf
// encoded by protobufjs from prompb's message definitions, snappy block-compressed by snappyjs) and
// OTLP/HTTP metrics (the OpenTelemetry SDK's histograms, serialized by @opentelemetry/otlp-transformer).
// Series names and labels: docs/export.md.
// Each library loads on first use (together ~1 s of start-up on a loaded host), not with the CLI.
import type { Attributes } from "@opentelemetry/api";
import type { ResourceMetrics } from "@opentelemetry/sdk-metrics";
import type protobuf from "protobufjs";
import { TargetError, UsageError } from "../errors.ts";
import { type ExportRow, type ExportTables, SUMMARY_STATS } from "./export.ts";

export interface PromSample {
  /** Every label, __name__ included. */
  labels: Record<string, string>;
  value: number;
}

const LABELS = ["run_id", "kind", "status", "model", "engine", "scope", "block", "variant"] as const;

/** Each remote-write series: its name, help text, and the summary column it carries. */
export const PROM_SERIES: ReadonlyArray<{ name: string; stat?: string; column: string; help: string; scale?: number }> =
  [
    { name: "inferscope_run_requests", column: "requests", help: "requests stored" },
    { name: "inferscope_run_requests_ok", column: "ok", help: "requests that completed" },
    { name: "inferscope_run_requests_failed", column: "failed", help: "requests that failed" },
    ...(["ttft", "tpot", "e2el"] as const).flatMap((m) =>
      SUMMARY_STATS.map(([s]) => ({
        name: `inferscope_run_${m}_seconds`,
        stat: s,
        column: `${m}_ms_${s}`,
        help: `${m} over ok requests, by stat (mean, p50, p90, p99)`,
        scale: 1e-3,
      })),
    ),
    { name: "inferscope_run_output_tokens", column: "output_tokens", help: "tokens generated, all requests" },
    { name: "inferscope_run_prompt_tokens", column: "prompt_tokens", help: "prompt tokens, all requests" },
  ];

/** The summary rows as Prometheus samples (a null statistic sends no sample). */
export function promSamples(t: ExportTables): PromSample[] {
  const out: PromSample[] = [];
  for (const row of t.summary) {
    const labels: Record<string, string> = {};
    for (const l of LABELS) if (row[l] != null && row[l] !== "") labels[l] = String(row[l]);
    for (const s of PROM_SERIES) {
      const v = row[s.column];
      if (typeof v !== "number") continue;
      out.push({
        labels: { __name__: s.name, ...labels, ...(s.stat ? { stat: s.stat } : {}) },
        value: s.scale ? v * s.scale : v,
      });
    }
    const when = (at: ExportRow[string]) => (typeof at === "string" ? Date.parse(at) / 1000 : null);
    for (const [name, at] of [
      ["inferscope_run_start_timestamp_seconds", when(row.created_at)],
      ["inferscope_run_end_timestamp_seconds", when(row.finished_at)],
    ] as const)
      if (at !== null && Number.isFinite(at)) out.push({ labels: { __name__: name, ...labels }, value: at });
  }
  return out;
}

// prompb's WriteRequest (remote-write 1.0), the fields a sender sets.
const PROMPB = `syntax = "proto3";
message WriteRequest { repeated TimeSeries timeseries = 1; }
message TimeSeries { repeated Label labels = 1; repeated Sample samples = 2; }
message Label { string name = 1; string value = 2; }
message Sample { double value = 1; int64 timestamp = 2; }`;
let writeRequest: protobuf.Type | null = null;

/** The snappy-compressed WriteRequest body for these samples, each at `timestampMs`. */
export async function encodeRemoteWrite(samples: readonly PromSample[], timestampMs: number): Promise<Uint8Array> {
  const [{ default: protobuf }, { default: snappy }] = await Promise.all([import("protobufjs"), import("snappyjs")]);
  writeRequest ??= protobuf.parse(PROMPB).root.lookupType("WriteRequest");
  const msg = writeRequest.fromObject({
    timeseries: samples.map((s) => ({
      // Remote write wants labels sorted by name.
      labels: Object.keys(s.labels)
        .sort()
        .map((name) => ({ name, value: s.labels[name] })),
      samples: [{ value: s.value, timestamp: timestampMs }],
    })),
  });
  return snappy.compress(writeRequest.encode(msg).finish());
}

function checkUrl(url: string, flag: string): URL {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new UsageError(`${flag}: "${url}" is not a URL`, { hint: "give http://HOST:PORT/PATH" });
  }
  if (u.protocol !== "http:" && u.protocol !== "https:")
    throw new UsageError(`${flag}: "${url}" is not an http(s) URL`);
  return u;
}

async function post(url: string, flag: string, body: Uint8Array, headers: Record<string, string>, timeoutMs: number) {
  let res: Response;
  try {
    res = await fetch(url, { method: "POST", body, headers, signal: AbortSignal.timeout(timeoutMs) });
  } catch (e) {
    const cause = (e as { cause?: { code?: string; message?: string } }).cause;
    const why =
      (e as Error).name === "TimeoutError"
        ? `no answer in ${timeoutMs} ms`
        : (cause?.code ?? cause?.message ?? (e as Error).message);
    throw new TargetError(`${flag} ${url}: ${why}`, { url, cause: e });
  }
  const text = (await res.text()).slice(0, 500).trim();
  if (!res.ok)
    throw new TargetError(`${flag} ${url}: HTTP ${res.status}${text ? `: ${text}` : ""}`, { url, status: res.status });
}

/** Sends the run's summary by Prometheus remote-write 1.0; the samples are stamped with the push time. */
export async function pushRemoteWrite(
  url: string,
  t: ExportTables,
  opts: { timeoutMs?: number; nowMs?: number } = {},
): Promise<{ url: string; series: number; timestampMs: number }> {
  checkUrl(url, "--prometheus-remote-write");
  const samples = promSamples(t);
  const timestampMs = opts.nowMs ?? Date.now();
  await post(
    url,
    "--prometheus-remote-write",
    await encodeRemoteWrite(samples, timestampMs),
    {
      "content-type": "application/x-protobuf",
      "content-encoding": "snappy",
      "x-prometheus-remote-write-version": "0.1.0",
      "user-agent": "inferscope",
    },
    opts.timeoutMs ?? 10_000,
  );
  return { url, series: samples.length, timestampMs };
}

// The GenAI semantic conventions' metrics, with their recommended bucket boundaries.
export const OTLP_METRICS = {
  ttft: {
    name: "gen_ai.server.time_to_first_token",
    unit: "s",
    buckets: [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10],
  },
  tpot: {
    name: "gen_ai.server.time_per_output_token",
    unit: "s",
    buckets: [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5],
  },
  e2el: {
    name: "gen_ai.client.operation.duration",
    unit: "s",
    buckets: [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92],
  },
  tokens: {
    name: "gen_ai.client.token.usage",
    unit: "{token}",
    buckets: [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864],
  },
} as const;

/** The run as OTLP ResourceMetrics: one histogram point set per block (or the run), recorded per request. */
export async function otlpMetrics(t: ExportTables): Promise<ResourceMetrics> {
  const [{ resourceFromAttributes }, { AggregationType, MeterProvider, MetricReader }] = await Promise.all([
    import("@opentelemetry/resources"),
    import("@opentelemetry/sdk-metrics"),
  ]);
  // Hands the SDK's collected metrics to whoever asks: one collection, then a push.
  class OnceReader extends MetricReader {
    protected async onShutdown(): Promise<void> {}
    protected async onForceFlush(): Promise<void> {}
  }
  const run = t.summary[0]!;
  const reader = new OnceReader();
  const provider = new MeterProvider({
    resource: resourceFromAttributes({ "service.name": "inferscope", "inferscope.run.id": t.runId }),
    readers: [reader],
    views: Object.values(OTLP_METRICS).map((m) => ({
      instrumentName: m.name,
      aggregation: { type: AggregationType.EXPLICIT_BUCKET_HISTOGRAM, options: { boundaries: [...m.buckets] } },
    })),
  });
  const meter = provider.getMeter("inferscope");
  const h = Object.fromEntries(
    Object.entries(OTLP_METRICS).map(([k, m]) => [k, meter.createHistogram(m.name, { unit: m.unit })]),
  ) as Record<keyof typeof OTLP_METRICS, ReturnType<typeof meter.createHistogram>>;
  for (const r of t.requests) {
    const attrs: Attributes = {
      "inferscope.run.id": t.runId,
      "inferscope.run.kind": String(run.kind),
      ...(run.model ? { "gen_ai.request.model": String(run.model) } : {}),
      ...(run.engine ? { "inferscope.engine": String(run.engine) } : {}),
      ...(r.block != null ? { "inferscope.block": Number(r.block), "inferscope.variant": String(r.variant) } : {}),
    };
    if (r.ok) {
      if (typeof r.ttft_ms === "number") h.ttft.record(r.ttft_ms / 1000, attrs);
      if (typeof r.tpot_ms === "number") h.tpot.record(r.tpot_ms / 1000, attrs);
      if (typeof r.e2el_ms === "number") h.e2el.record(r.e2el_ms / 1000, attrs);
    } else if (typeof r.e2el_ms === "number")
      h.e2el.record(r.e2el_ms / 1000, { ...attrs, "error.type": String(r.error ?? "error").split(":")[0]! });
    if (typeof r.prompt_tokens === "number")
      h.tokens.record(r.prompt_tokens, { ...attrs, "gen_ai.token.type": "input" });
    if (typeof r.output_tokens === "number")
      h.tokens.record(r.output_tokens, { ...attrs, "gen_ai.token.type": "output" });
  }
  const { resourceMetrics, errors } = await reader.collect();
  await provider.shutdown();
  if (errors.length) throw new Error(`collecting the run's metrics: ${errors.map(String).join("; ")}`);
  return resourceMetrics;
}

/** Sends the run's metrics as OTLP/HTTP protobuf; a bare origin gets /v1/metrics. */
export async function pushOtlpMetrics(
  url: string,
  t: ExportTables,
  opts: { timeoutMs?: number } = {},
): Promise<{ url: string; points: number }> {
  checkUrl(url, "--otlp-metrics");
  const target = /^https?:\/\/[^/]+\/?$/.test(url) ? `${url.replace(/\/$/, "")}/v1/metrics` : url;
  const rm = await otlpMetrics(t);
  const { ProtobufMetricsSerializer } = await import("@opentelemetry/otlp-transformer");
  const body = ProtobufMetricsSerializer.serializeRequest(rm);
  if (!body) throw new Error("the OTLP serializer gave no body");
  await post(
    target,
    "--otlp-metrics",
    body,
    { "content-type": "application/x-protobuf", "user-agent": "inferscope" },
    opts.timeoutMs ?? 10_000,
  );
  const points = rm.scopeMetrics.reduce((a, s) => a + s.metrics.reduce((b, m) => b + m.dataPoints.length, 0), 0);
  return { url: target, points };
}
