// Sweeps: one benchmark per concurrency or rate, or `auto` (GuideLLM's shape: synchronous, then
// maximum throughput, then rates between them), stopping once the server (or client) saturates.
import { UsageError } from "../errors.ts";
import { diagnoseSweep, type LevelDiagnosis, type LevelEvidence, type SweepDiagnosis } from "./diagnose.ts";
import { type FrontierPoint, frontierPoints } from "./frontier.ts";
import { type BenchDeps, type BenchResult, runBench } from "./runner.ts";
import { sweepRates } from "./schedule.ts";
import { clipToWindow, type SampledServer, startServerSampler } from "./server-sampler.ts";
import type { SliceResult } from "./slices.ts";
import type { BenchOptions } from "./types.ts";

export interface SweepSpec {
  concurrency?: number[];
  rates?: number[];
  auto?: boolean;
  /** Rates tried between synchronous and max throughput in auto mode. Default 5. */
  autoSteps?: number;
}

export interface SweepPoint {
  kind: "concurrency" | "rate" | "synchronous" | "throughput";
  value: number;
  result: BenchResult;
  /** Achieved ÷ scheduled request rate, each over its own span (open loop only; see achievedRate). */
  achievedRatio: number | null;
  /** Requests completed per second over the span they completed in (open loop only). */
  achievedRate: number | null;
  /** The server's gauges scraped through the point's measured window (null or absent with no /metrics sampling). */
  server?: SampledServer | null;
  /** Which limit binds at this point, from those gauges (diagnose.ts); set once the sweep ends. */
  diagnosis?: LevelDiagnosis;
}

/**
 * How fast requests completed against how fast they were scheduled, each over its own span: (k − 1)
 * completions over first-to-last completion, and the same for their scheduled times. vLLM's request
 * throughput divides by a duration that includes the drain of the last requests, so a short run at a
 * rate the server sustains reads 10–20 % below the target; spans do not, and a server that falls
 * behind spreads its completions over a longer span than the arrivals.
 */
export function achievedRate(result: BenchResult): { rate: number; ratio: number } | null {
  let k = 0;
  let s0 = Number.POSITIVE_INFINITY;
  let s1 = Number.NEGATIVE_INFINITY;
  let e0 = Number.POSITIVE_INFINITY;
  let e1 = Number.NEGATIVE_INFINITY;
  for (const r of result.requests) {
    if (r.warmup || r.errorClass !== null || !Number.isFinite(r.endMs) || !Number.isFinite(r.scheduledMs)) continue;
    k++;
    // endMs is relative to sendMs (types.ts); completions are compared on the schedule's clock.
    const end = r.sendMs + r.endMs;
    s0 = Math.min(s0, r.scheduledMs);
    s1 = Math.max(s1, r.scheduledMs);
    e0 = Math.min(e0, end);
    e1 = Math.max(e1, end);
  }
  const arrivals = s1 - s0;
  const completions = e1 - e0;
  if (k < 3 || !(arrivals > 0) || !(completions > 0)) return null;
  return { rate: ((k - 1) * 1000) / completions, ratio: arrivals / completions };
}

/** A rate as a person writes it: 18.62, 5, 0.125. */
export function fmtRate(r: number): string {
  if (r === Number.POSITIVE_INFINITY) return "inf";
  return String(Number(r.toPrecision(r >= 1 ? Math.max(3, Math.ceil(Math.log10(r + 1)) + 2) : 3)));
}

export interface SweepResult {
  points: SweepPoint[];
  stoppedEarly: string | null;
  partial: boolean;
  /** The knee: the lowest point where a server-side limit binds (null when none does or nothing was sampled). */
  knee: SweepDiagnosis["knee"];
  /** Output tok/s (per GPU: bench knows one server, so per server) against 1000 ÷ TPOT p50, Pareto set marked. */
  frontier: FrontierPoint[];
}

/** One run as a frontier point: its output throughput against its requests' TPOT median, labelled with its limit. */
export function frontierOf(level: number, result: BenchResult, d: LevelDiagnosis | undefined) {
  return {
    level,
    outputThroughput: result.summary.output_throughput,
    tpotP50Ms: tpotMedian(result) ?? Number.NaN,
    limit: d?.binding.map((b) => b.limit).join("+") || null,
  };
}

/** How often the server's /metrics is scraped through each point (ms); 0 turns it off. */
export const SWEEP_SERVER_SAMPLE_MS = 200;

/** One bench run's evidence for the binding-limit diagnosis: its sampled gauges, rate and client self-check. */
export function runEvidence(
  level: number,
  mode: "rate" | "concurrency",
  result: BenchResult,
  server: SampledServer | null | undefined,
  achieved: { rate: number; ratio: number } | null,
): LevelEvidence {
  return {
    level,
    mode,
    engine: server?.engine ?? null,
    samples: server?.samples ?? [],
    requestThroughput: achieved?.rate ?? result.summary.request_throughput,
    achievedRatio: achieved?.ratio ?? null,
    client: {
      saturated: result.client.saturated,
      eldP99Ms: result.client.eventLoopDelayMs.p99,
      ...(result.client.reason ? { reason: result.client.reason } : {}),
    },
    powerCappedShare: null,
    // One decode step of the running batch: the requests' TPOT median; the GPU's busy share where telemetry ran.
    stepMs: tpotMedian(result),
    gpuBusy: result.telemetry?.summary?.utilization?.gpuBusy ?? null,
  };
}

/** The run's own TPOT median (summarize.ts, over its measured successful requests), null when none had one. */
function tpotMedian(result: BenchResult): number | null {
  const t = result.summary.inferscope.tpot_ms;
  return t.count > 0 ? t.median : null;
}

/**
 * The diagnosis of runs in the order given (diagnoseSweep sorts by level), with the knee; the batch ceiling is the
 * one a server states (llama.cpp /props) where any run read it, else the highest running count seen.
 */
export function diagnoseRuns(
  runs: ReadonlyArray<{ evidence: LevelEvidence; server: SampledServer | null | undefined }>,
): { levels: LevelDiagnosis[]; knee: SweepDiagnosis["knee"] } {
  const stated = runs.find((r) => r.server?.ceiling)?.server?.ceiling ?? null;
  const d = diagnoseSweep(
    runs.map((r) => r.evidence),
    { serverMaxNumSeqs: stated },
  );
  const levels: LevelDiagnosis[] = new Array(runs.length);
  const order = runs.map((r, i) => ({ l: r.evidence.level, i })).sort((a, b) => a.l - b.l);
  order.forEach(({ i }, k) => {
    levels[i] = d.levels[k]!;
  });
  return { levels, knee: d.knee };
}

/** Names the binding limit per point from its samples, as `inferscope sweep` does per level. */
export function diagnosePoints(points: SweepPoint[], mode: "rate" | "concurrency"): { knee: SweepDiagnosis["knee"] } {
  const d = diagnoseRuns(
    points.map((p) => ({
      server: p.server,
      evidence: runEvidence(
        p.kind === "throughput" ? Number.POSITIVE_INFINITY : p.value,
        mode,
        p.result,
        p.server,
        p.achievedRate !== null && p.achievedRatio !== null ? { rate: p.achievedRate, ratio: p.achievedRatio } : null,
      ),
    })),
  );
  points.forEach((p, i) => {
    p.diagnosis = d.levels[i]!;
  });
  return { knee: d.knee };
}

/**
 * One bench run with the server's gauges scraped through it, cut to its measured window (warm-up and the drain left
 * out); no sampling when `sampleMs` is 0 or the run is told not to touch /metrics.
 */
export async function runSampled(
  o: BenchOptions,
  deps: BenchDeps,
  sampleMs: number,
  run: (o: BenchOptions, d: BenchDeps) => Promise<BenchResult> = runBench,
): Promise<{ result: BenchResult; server: SampledServer | null }> {
  const sampler =
    sampleMs > 0 && !o.noServerMetrics
      ? startServerSampler(o.baseUrl, {
          intervalMs: sampleMs,
          headers: o.apiKey ? { authorization: `Bearer ${o.apiKey}` } : undefined,
          signal: deps.signal,
        })
      : null;
  const now = () => performance.timeOrigin + performance.now();
  let startMs: number | null = null;
  let endMs: number | null = null;
  let server: SampledServer | null = null;
  const result = await run(o, {
    ...deps,
    onMeasureEdge: (e) => {
      if (e === "start") startMs = now();
      else endMs = now();
      deps.onMeasureEdge?.(e);
    },
  }).finally(async () => {
    server = sampler ? await sampler.stop() : null;
  });
  const sampled = server as SampledServer | null;
  if (sampled && startMs !== null) sampled.samples = clipToWindow(sampled.samples, { startMs, endMs: endMs ?? now() });
  return { result, server: sampled };
}

/** A point is saturated when the achieved rate falls below 90 % of the target, failures exceed 10 %, or the client saturated. */
export function saturationReason(p: SweepPoint): string | null {
  const s = p.result.summary;
  const n = s.completed + s.failed;
  if (p.result.client.saturated) return `client saturated at ${p.kind} ${p.value}`;
  if (n > 0 && s.failed / n > 0.1) return `${s.failed} of ${n} requests failed at ${p.kind} ${p.value}`;
  if (p.achievedRatio !== null && p.achievedRatio < 0.9)
    return `requests completed at ${fmtRate(p.achievedRate ?? s.request_throughput)} req/s against ${fmtRate(p.value)} req/s scheduled`;
  return null;
}

export async function runSweep(
  base: BenchOptions,
  spec: SweepSpec,
  deps: BenchDeps = {},
  o: { serverSampleMs?: number } = {},
): Promise<SweepResult> {
  const r = await sweepPoints(base, spec, deps, o.serverSampleMs ?? SWEEP_SERVER_SAMPLE_MS);
  const d = diagnosePoints(r.points, spec.concurrency ? "concurrency" : "rate");
  const frontier = frontierPoints(
    r.points.map((p) =>
      frontierOf(p.kind === "throughput" ? Number.POSITIVE_INFINITY : p.value, p.result, p.diagnosis),
    ),
    1,
  );
  return { ...r, knee: d.knee, frontier };
}

async function sweepPoints(
  base: BenchOptions,
  spec: SweepSpec,
  deps: BenchDeps,
  sampleMs: number,
): Promise<Omit<SweepResult, "knee" | "frontier">> {
  const points: SweepPoint[] = [];
  const one = async (kind: SweepPoint["kind"], value: number, o: BenchOptions): Promise<SweepPoint> => {
    const { result, server } = await runSampled(
      { ...o, saveResult: undefined, recordsPath: undefined },
      deps,
      sampleMs,
    );
    const a = kind === "rate" ? achievedRate(result) : null;
    const p: SweepPoint = {
      kind,
      value,
      result,
      achievedRatio: a?.ratio ?? null,
      achievedRate: a?.rate ?? null,
      server,
    };
    points.push(p);
    return p;
  };
  const stripLoad = (o: BenchOptions): BenchOptions => ({
    ...o,
    concurrency: undefined,
    requestRate: undefined,
    maxConcurrency: undefined,
  });
  const given = [spec.concurrency, spec.rates, spec.auto ? [1] : undefined].filter((x) => x !== undefined);
  if (given.length !== 1)
    throw new UsageError("a sweep needs exactly one of --concurrency LIST, --request-rate LIST, --sweep auto");
  if (spec.concurrency) {
    for (const c of spec.concurrency) {
      const p = await one("concurrency", c, { ...stripLoad(base), concurrency: c });
      if (p.result.partial) return { points, stoppedEarly: "interrupted", partial: true };
    }
    return { points, stoppedEarly: null, partial: false };
  }
  if (spec.rates) {
    for (const r of spec.rates) {
      const p = await one("rate", r, { ...stripLoad(base), requestRate: r, maxConcurrency: base.maxConcurrency });
      if (p.result.partial) return { points, stoppedEarly: "interrupted", partial: true };
      const why = saturationReason(p);
      if (why) return { points, stoppedEarly: why, partial: false };
    }
    return { points, stoppedEarly: null, partial: false };
  }
  // auto
  const sync = await one("synchronous", 1, { ...stripLoad(base), concurrency: 1 });
  if (sync.result.partial) return { points, stoppedEarly: "interrupted", partial: true };
  const max = await one("throughput", Number.POSITIVE_INFINITY, {
    ...stripLoad(base),
    maxConcurrency: base.maxConcurrency,
  });
  if (max.result.partial) return { points, stoppedEarly: "interrupted", partial: true };
  const rates = sweepRates(
    sync.result.summary.request_throughput,
    max.result.summary.request_throughput,
    spec.autoSteps ?? 5,
  );
  for (const r of rates) {
    const p = await one("rate", r, { ...stripLoad(base), requestRate: r, maxConcurrency: base.maxConcurrency });
    if (p.result.partial) return { points, stoppedEarly: "interrupted", partial: true };
    const why = saturationReason(p);
    if (why) return { points, stoppedEarly: why, partial: false };
  }
  return { points, stoppedEarly: null, partial: false };
}

/**
 * A replay's (or any run's) time slices diagnosed as a rate sweep's levels: each slice's offered rate, its
 * completions against its arrivals, its TPOT median and the server's gauges scraped inside it. Rows in slice order;
 * `originUnixMs` is the records' origin on the sampler's clock (performance.timeOrigin + the run's origin).
 */
export function diagnoseSlices(
  sl: SliceResult,
  result: BenchResult,
  server: SampledServer,
  originUnixMs: number,
): { levels: LevelDiagnosis[]; knee: SweepDiagnosis["knee"] } {
  const t0 = originUnixMs + (sl.start_ms ?? 0);
  return diagnoseRuns(
    sl.slices.map((x) => ({
      server,
      evidence: {
        ...runEvidence(x.arrival_rate, "rate", result, null, null),
        engine: server.engine,
        samples: clipToWindow(server.samples, { startMs: t0 + x.start_s * 1000, endMs: t0 + x.end_s * 1000 }),
        requestThroughput: x.request_throughput,
        achievedRatio: x.arrivals >= 3 ? x.completed / x.arrivals : null,
        stepMs: x.tpot_ms.count > 0 ? x.tpot_ms.median : null,
      },
    })),
  );
}
