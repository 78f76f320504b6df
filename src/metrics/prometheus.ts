// Fleet mode: the audit and the live view through the Prometheus HTTP API (instant and range queries)
// instead of scraping one server. Also Prometheus' own rate() extrapolation, for exact cross-checks.
import type { Agent, Dispatcher } from "undici";
import { InputError, TargetError } from "../errors.ts";
import { undici } from "../lazy.ts";
import { type AuditReport, analyzeWindow, type HistogramWindow, type WindowReader } from "./audit.ts";
import { type Concept, conceptInfo, type FamilyLike, type Source, sourceMetrics } from "./concepts.ts";
import { detectEngines, type EngineCatalog } from "./engines/index.ts";
import { DEFAULT_TIMEOUT_MS, serverMessage } from "./scrape.ts";
import type { Labels, MetricType } from "./types.ts";
import { frameFromReport, type WatchFrame } from "./watch.ts";

export interface PromSample {
  /** Milliseconds since the epoch (Prometheus returns float seconds; ms is its resolution). */
  t: number;
  v: number;
}
export interface PromSeries<V> {
  metric: Labels;
  value: V;
}

/** Parses a Prometheus sample value ("+Inf", "NaN", "1e-3"). */
function val(s: string): number {
  if (s === "+Inf") return Number.POSITIVE_INFINITY;
  if (s === "-Inf") return Number.NEGATIVE_INFINITY;
  return Number(s);
}

export class PrometheusClient {
  readonly base: string;
  private readonly agent: Dispatcher;
  private readonly own: boolean;
  private readonly timeoutMs: number;
  constructor(url: string, opts: { timeoutMs?: number; dispatcher?: Dispatcher } = {}) {
    let u: URL;
    try {
      u = new URL(url);
    } catch {
      throw new InputError(`--prometheus: not a URL: "${url}" (example: http://127.0.0.1:9090)`);
    }
    this.base = u.href.replace(/\/+$/, "");
    this.timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.own = !opts.dispatcher;
    this.agent =
      opts.dispatcher ??
      new (undici().Agent)({
        connect: { timeout: this.timeoutMs },
        headersTimeout: this.timeoutMs,
        bodyTimeout: this.timeoutMs,
      });
  }

  async close(): Promise<void> {
    if (this.own) await (this.agent as Agent).close().catch(() => {});
  }

  /** GET an API path; returns `data`, or throws with Prometheus' own error text. */
  async api<T>(path: string, params: Record<string, string | string[]>): Promise<T> {
    const qs = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) for (const x of Array.isArray(v) ? v : [v]) qs.append(k, x);
    const url = `${this.base}${path}?${qs}`;
    let res: Dispatcher.ResponseData;
    try {
      res = await undici().request(url, {
        dispatcher: this.agent,
        headersTimeout: this.timeoutMs,
        bodyTimeout: this.timeoutMs,
      });
    } catch (err) {
      const code = (err as { code?: string }).code;
      throw new TargetError(
        `cannot reach Prometheus at ${this.base}: ${code === "ECONNREFUSED" ? "connection refused" : ((err as Error).message ?? code)}`,
        { url: this.base, cause: err },
      );
    }
    const body = Buffer.from(await res.body.arrayBuffer());
    let json: { status?: string; data?: T; error?: string; errorType?: string };
    try {
      json = JSON.parse(body.toString("utf8"));
    } catch {
      throw new TargetError(
        `${this.base}${path}: HTTP ${res.statusCode}, not a Prometheus API answer${serverMessage(body) ? `: ${serverMessage(body)}` : ""}`,
        { url, status: res.statusCode },
      );
    }
    if (json.status !== "success") {
      const what = `${json.errorType ?? "error"}: ${json.error ?? `HTTP ${res.statusCode}`}`;
      // A bad query is the user's input; a server failure is the target's.
      if (json.errorType === "bad_data") throw new InputError(`Prometheus rejected the query: ${what}`);
      throw new TargetError(`Prometheus ${path} failed: ${what}`, { url, status: res.statusCode });
    }
    return json.data as T;
  }

  /** Instant query; `time` in ms. */
  async instant(query: string, timeMs: number): Promise<Array<PromSeries<PromSample>>> {
    const d = await this.api<{ resultType: string; result: Array<{ metric: Labels; value: [number, string] }> }>(
      "/api/v1/query",
      { query, time: promTime(timeMs) },
    );
    if (d.resultType === "scalar") {
      const s = d.result as unknown as [number, string];
      return [{ metric: {}, value: { t: Math.round(s[0] * 1000), v: val(s[1]) } }];
    }
    if (d.resultType !== "vector")
      throw new InputError(`expected an instant vector from "${query}", got ${d.resultType}`);
    return d.result.map((r) => ({ metric: r.metric, value: { t: Math.round(r.value[0] * 1000), v: val(r.value[1]) } }));
  }

  /** The raw samples of a range selector (`x[5s]`) at `time` (ms): exactly what rate() sees. */
  async rawRange(selector: string, timeMs: number): Promise<Array<PromSeries<PromSample[]>>> {
    const d = await this.api<{
      resultType: string;
      result: Array<{ metric: Labels; values: Array<[number, string]> }>;
    }>("/api/v1/query", { query: selector, time: promTime(timeMs) });
    if (d.resultType !== "matrix")
      throw new InputError(`expected a range vector from "${selector}", got ${d.resultType}`);
    return d.result.map((r) => ({
      metric: r.metric,
      value: r.values.map(([t, v]) => ({ t: Math.round(t * 1000), v: val(v) })),
    }));
  }

  /** Range query (`query_range`): evaluated every `stepMs` from start to end. */
  async range(query: string, startMs: number, endMs: number, stepMs: number): Promise<Array<PromSeries<PromSample[]>>> {
    const d = await this.api<{
      resultType: string;
      result: Array<{ metric: Labels; values: Array<[number, string]> }>;
    }>("/api/v1/query_range", { query, start: promTime(startMs), end: promTime(endMs), step: `${stepMs / 1000}` });
    return d.result.map((r) => ({
      metric: r.metric,
      value: r.values.map(([t, v]) => ({ t: Math.round(t * 1000), v: val(v) })),
    }));
  }

  /** Every series matching the selector over [start, end] (ms). */
  async series(selector: string, startMs: number, endMs: number): Promise<Labels[]> {
    return this.api<Labels[]>("/api/v1/series", {
      "match[]": selector,
      start: promTime(startMs),
      end: promTime(endMs),
    });
  }

  async metadata(): Promise<Record<string, Array<{ type: string }>>> {
    return this.api("/api/v1/metadata", {});
  }
}

/** Milliseconds → the decimal seconds Prometheus parses without rounding surprises. */
export function promTime(ms: number): string {
  const s = Math.floor(ms / 1000);
  const rest = Math.round(ms - s * 1000);
  return rest === 0 ? String(s) : `${s}.${String(rest).padStart(3, "0")}`;
}

/** A PromQL duration in whole milliseconds. */
export function promDuration(ms: number): string {
  return `${Math.round(ms)}ms`;
}

/**
 * Prometheus 2.x `extrapolatedRate` (promql/functions.go) for float samples: counter-reset
 * correction, extrapolation to the range boundaries (at most half an average interval beyond the
 * samples, never below zero for counters), divided by the range for rate(). Samples are those with
 * start ≤ t ≤ end (2.x ranges are closed on both ends). Undefined with fewer than two samples.
 */
export function extrapolatedRate(
  samples: PromSample[],
  rangeStartMs: number,
  rangeEndMs: number,
  isCounter: boolean,
  isRate: boolean,
): number | undefined {
  if (samples.length < 2) return undefined;
  const first = samples[0]!;
  const last = samples[samples.length - 1]!;
  let resultValue = last.v - first.v;
  if (isCounter) {
    let prev = first.v;
    for (const s of samples.slice(1)) {
      if (s.v < prev) resultValue += prev;
      prev = s.v;
    }
  }
  let durationToStart = (first.t - rangeStartMs) / 1000;
  const durationToEnd = (rangeEndMs - last.t) / 1000;
  const sampledInterval = (last.t - first.t) / 1000;
  const averageDurationBetweenSamples = sampledInterval / (samples.length - 1);
  if (isCounter && resultValue > 0 && first.v >= 0) {
    const durationToZero = sampledInterval * (first.v / resultValue);
    if (durationToZero < durationToStart) durationToStart = durationToZero;
  }
  const extrapolationThreshold = averageDurationBetweenSamples * 1.1;
  let extrapolateToInterval = sampledInterval;
  extrapolateToInterval +=
    durationToStart < extrapolationThreshold ? durationToStart : averageDurationBetweenSamples / 2;
  extrapolateToInterval += durationToEnd < extrapolationThreshold ? durationToEnd : averageDurationBetweenSamples / 2;
  let factor = extrapolateToInterval / sampledInterval;
  if (isRate) factor /= (rangeEndMs - rangeStartMs) / 1000;
  return resultValue * factor;
}

// ---------------------------------------------------------------------------------------------
// A window read from Prometheus.

/** `{job="vllm"}` or `job="vllm"` → the matcher list inside the braces. */
export function selectorInner(selector: string | undefined): string {
  const s = (selector ?? "").trim();
  if (!s) return "";
  const inner = s.startsWith("{") ? s.slice(1, s.endsWith("}") ? -1 : undefined) : s;
  if (s.startsWith("{") && !s.endsWith("}")) throw new InputError(`--selector: missing "}" in ${selector}`);
  return inner.trim().replace(/,\s*$/, "");
}

function vectorSelector(metric: string, inner: string, match?: Labels, extra: string[] = []): string {
  const parts = [inner, ...Object.entries(match ?? {}).map(([k, v]) => `${k}=${JSON.stringify(v)}`), ...extra].filter(
    (x) => x,
  );
  return `${metric}{${parts.join(",")}}`;
}

const TYPES = new Set(["counter", "gauge", "histogram", "summary", "gaugehistogram", "info", "stateset", "untyped"]);

/** Families (name + type) from the series names Prometheus holds; histograms grouped by their suffixes. */
export function familiesFromNames(
  names: string[],
  metadata: Record<string, Array<{ type: string }>> = {},
): FamilyLike[] {
  const set = new Set(names);
  const out = new Map<string, FamilyLike>();
  for (const n of names) {
    const m = /^(.*)_(bucket|count|sum)$/.exec(n);
    if (m && set.has(`${m[1]}_bucket`) && set.has(`${m[1]}_count`)) {
      out.set(m[1]!, { name: m[1]!, type: "histogram" });
      continue;
    }
    const t = metadata[n]?.[0]?.type ?? (n.endsWith("_total") ? metadata[n.slice(0, -6)]?.[0]?.type : undefined);
    const type = (t && TYPES.has(t) ? t : n.endsWith("_total") ? "counter" : "untyped") as MetricType;
    out.set(n, { name: n, type });
  }
  return [...out.values()];
}

export interface PrometheusWindowOptions {
  /** The trailing window (ms). */
  windowMs: number;
  /** Evaluation time (ms); default now. */
  timeMs?: number;
  /** Queries in flight at once. */
  concurrency?: number;
}

/** Reads everything the detected engine's concepts need, then answers as a WindowReader. */
export async function prometheusWindow(
  client: PrometheusClient,
  selector: string | undefined,
  opts: PrometheusWindowOptions,
): Promise<{ reader: WindowReader; engine?: EngineCatalog; seriesCount: number }> {
  const inner = selectorInner(selector);
  const time = opts.timeMs ?? Date.now();
  const w = promDuration(opts.windowMs);
  const series = await client.series(`{${inner || '__name__!=""'}}`, time - opts.windowMs, time);
  if (series.length === 0)
    throw new TargetError(
      `Prometheus at ${client.base} has no series matching ${selector ?? "{}"} in the last ${opts.windowMs / 1000} s`,
      { hint: "check the selector (e.g. --selector '{job=\"vllm\"}') and that Prometheus is scraping the servers" },
    );
  const names = [...new Set(series.map((s) => s.__name__!).filter(Boolean))];
  const metadata = await client.metadata().catch(() => ({}));
  const families = familiesFromNames(names, metadata);
  const nameSet = new Set(names);
  const resolve = (metric: string): string | undefined =>
    nameSet.has(metric)
      ? metric
      : metric.endsWith("_total") && nameSet.has(metric.slice(0, -6))
        ? metric.slice(0, -6)
        : nameSet.has(`${metric}_total`)
          ? `${metric}_total`
          : undefined;
  const histNames = new Set(families.filter((f) => f.type === "histogram").map((f) => f.name));
  const has = (m: string) => histNames.has(m) || resolve(m) !== undefined;
  const engine = detectEngines(families)[0]?.engine;

  // Replica labels (tensor-parallel ranks repeat the same numbers): keep rank 0 or unlabelled.
  const replicaExtra = (engine?.replicaLabels ?? [])
    .filter((l) => series.some((s) => s[l] !== undefined))
    .map((l) => `${l}=~"0|"`);
  const sel = (metric: string, match?: Labels) => vectorSelector(metric, inner, match, replicaExtra);

  const histograms = new Map<string, HistogramWindow>();
  const counters = new Map<string, { delta: number; after: number; resets: number }>();
  const gauges = new Map<string, { before?: number; after: number }>();
  const ratioGauges = new Set<string>();
  const key = (m: string, match?: Labels) => `${m}|${JSON.stringify(match ?? {})}`;
  const scalar = async (q: string, at = time): Promise<number | undefined> => {
    const r = await client.instant(q, at);
    return r.length ? r[0]!.value.v : undefined;
  };

  const jobs: Array<() => Promise<void>> = [];
  const want = (s: Source) => {
    const match = "match" in s ? s.match : undefined;
    if (s.kind === "histogram") {
      if (!histNames.has(s.metric)) return;
      jobs.push(async () => {
        const [buckets, count, sum, n] = await Promise.all([
          client.instant(`sum by (le) (increase(${sel(`${s.metric}_bucket`, match)}[${w}]))`, time),
          scalar(`sum(increase(${sel(`${s.metric}_count`, match)}[${w}]))`),
          scalar(`sum(increase(${sel(`${s.metric}_sum`, match)}[${w}]))`),
          scalar(`count(${sel(`${s.metric}_count`, match)})`),
        ]);
        if (n === undefined) return;
        const b = buckets
          .map((x) => ({
            le: Number(x.metric.le === "+Inf" ? Number.POSITIVE_INFINITY : x.metric.le),
            count: x.value.v,
          }))
          .filter((x) => !Number.isNaN(x.le))
          .sort((a, z) => a.le - z.le);
        histograms.set(key(s.metric, match), { buckets: b, count: count ?? 0, sum: sum ?? 0, series: n, resets: 0 });
      });
      return;
    }
    const counterJob = (metric: string) => {
      const real = resolve(metric);
      if (!real) return;
      jobs.push(async () => {
        const [delta, after] = await Promise.all([
          scalar(`sum(increase(${sel(real, match)}[${w}]))`),
          scalar(`sum(${sel(real, match)})`),
        ]);
        if (after === undefined) return;
        counters.set(key(metric, match), { delta: delta ?? 0, after, resets: 0 });
      });
    };
    if (s.kind === "counter") counterJob(s.metric);
    else if (s.kind === "ratio") {
      counterJob(s.numerator);
      counterJob(s.denominator);
    } else if (s.kind === "counterMean") {
      counterJob(s.sum);
      counterJob(s.count);
    } else if (s.kind === "gauge") {
      const real = resolve(s.metric);
      if (!real) return;
      const agg = ratioGauges.has(s.metric) ? "avg" : "sum";
      jobs.push(async () => {
        const [after, before] = await Promise.all([
          scalar(`${agg}(${sel(real, match)})`),
          scalar(`${agg}(${sel(real, match)})`, time - opts.windowMs),
        ]);
        if (after !== undefined) gauges.set(key(s.metric, match), { before, after });
      });
    }
  };
  if (engine)
    for (const [c, bindings] of Object.entries(engine.concepts))
      for (const b of bindings ?? []) {
        if (b.source.kind === "gauge" && conceptInfo[c as Concept].unit === "ratio") ratioGauges.add(b.source.metric);
        if (sourceMetrics(b.source).every(has)) want(b.source);
      }

  // Bounded concurrency: a fleet Prometheus should not see 60 queries at once from one audit.
  const limit = Math.max(1, opts.concurrency ?? 6);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, jobs.length) }, async () => {
      while (next < jobs.length) await jobs[next++]!();
    }),
  );

  const labelValues = new Map<string, Set<string>>();
  for (const s of series)
    for (const [k, v] of Object.entries(s)) {
      if (k === "__name__") continue;
      let set = labelValues.get(k);
      if (!set) labelValues.set(k, (set = new Set()));
      set.add(v);
    }
  const reader: WindowReader = {
    windowSeconds: opts.windowMs / 1000,
    families,
    has,
    histogram: (m, match) => histograms.get(key(m, match)),
    counter: (m, match) => counters.get(key(m, match)),
    gauge: (m, match) => gauges.get(key(m, match)),
    labelValues: (l) => [...(labelValues.get(l) ?? [])].sort(),
  };
  return { reader, engine, seriesCount: series.length };
}

export interface FleetOptions {
  prometheusUrl: string;
  selector?: string;
  windowMs?: number;
  timeMs?: number;
  timeoutMs?: number;
}

/** The audit over a fleet: the same report, read from Prometheus over the trailing window. */
export async function fleetAudit(opts: FleetOptions): Promise<AuditReport> {
  const client = new PrometheusClient(opts.prometheusUrl, { timeoutMs: opts.timeoutMs });
  try {
    const { reader, seriesCount } = await prometheusWindow(client, opts.selector, {
      windowMs: opts.windowMs ?? 60_000,
      timeMs: opts.timeMs,
    });
    return analyzeWindow(
      reader,
      { target: client.base, via: "prometheus", selector: opts.selector },
      { samples: seriesCount },
    );
  } finally {
    await client.close();
  }
}

export interface FleetWatchOptions extends FleetOptions {
  intervalMs?: number;
  iterations?: number;
  signal?: AbortSignal;
  now?: () => number;
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  onFrame: (frame: WatchFrame) => void;
}

/** The live view over a fleet: one Prometheus read per interval. */
export async function fleetWatch(opts: FleetWatchOptions): Promise<number> {
  const client = new PrometheusClient(opts.prometheusUrl, { timeoutMs: opts.timeoutMs });
  const now = opts.now ?? Date.now;
  const intervalMs = Math.max(100, opts.intervalMs ?? 2000);
  const sleep =
    opts.sleep ??
    ((ms: number, signal?: AbortSignal) =>
      new Promise<void>((resolve) => {
        const t = setTimeout(resolve, ms);
        signal?.addEventListener(
          "abort",
          () => {
            clearTimeout(t);
            resolve();
          },
          { once: true },
        );
      }));
  let frames = 0;
  try {
    while (!opts.signal?.aborted && (opts.iterations === undefined || frames < opts.iterations)) {
      const t = now();
      const { reader } = await prometheusWindow(client, opts.selector, {
        windowMs: opts.windowMs ?? 60_000,
        timeMs: t,
      });
      const report = analyzeWindow(reader, { target: client.base, via: "prometheus", selector: opts.selector });
      opts.onFrame(frameFromReport(report, t));
      frames++;
      if (opts.iterations !== undefined && frames >= opts.iterations) break;
      await sleep(intervalMs, opts.signal);
    }
  } finally {
    await client.close();
  }
  return frames;
}
