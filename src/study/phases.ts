// One function per study phase. Each calls one module's library function and converts its output
// into plain measurements (times in the server's simulated time: client ms × time-scale; the sim's own
// /metrics and trace already export simulated time and are used as they are).
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { hasCollectives, type ModelInputs } from "../discover/index.ts";
import { runAB } from "../experiment/ab.ts";
import { theilSenBootstrap } from "../experiment/stats.ts";
import { parseVariant, shellQuote, type VariantSpec } from "../experiment/variants.ts";
import { runBench } from "../load/runner.ts";
import type { ServerTimingSummary } from "../load/server-timings.ts";
import { computeSlices, type SliceResult } from "../load/slices.ts";
import { requestTpot, tokenItls } from "../load/summarize.ts";
import type { RequestRecord } from "../load/types.ts";
import { type AuditContext, type AuditReport, auditMetrics } from "../metrics/audit.ts";
import { allReduceTxBytesPerGpu } from "../model/collectives.ts";
import {
  ceilings,
  type FitResult,
  fit,
  inputFromOptions,
  type Measurement,
  type ModelInput,
  type Variant as ModelVariant,
  type Prediction,
  predict,
  whatif,
} from "../model/index.ts";
import { benchWithSpans } from "../otlp/bench.ts";
import { type SpanEvidence, spanEvidence } from "../otlp/evidence.ts";
import type { OtlpReceiver } from "../otlp/receiver.ts";
import { requestSplitSection } from "../otlp/render.ts";
import { fmt } from "../report/format.ts";
import type {
  AuditSection,
  Ceiling,
  ModelSection,
  Quantity,
  RequestSplitSection,
  ServerTimingSection,
  TraceLayers,
  TraceRoofline,
  WhatIf,
} from "../report/types.ts";
import { openStore, type Store } from "../store/index.ts";
import type { RunTelemetry } from "../telemetry/session.ts";
import { runQueueShare, serverSchedstatFor } from "../telemetry/sources/proc.ts";
import type { TelemetrySpec } from "../telemetry/types.ts";
import { captureTrace } from "../trace/capture.ts";
import { layersSection, rooflineSection } from "../trace/section.ts";
import type { Measurements } from "./assemble.ts";
import { estimateFromTrace, pooledMeanCI } from "./estimate.ts";
import type { StudyPlan } from "./plan.ts";

/** A phase that cannot run for this target (not a failure: the report says why). */
export class Unavailable extends Error {}

interface Common {
  apiKey?: string;
  signal?: AbortSignal;
  /** A stream with no data for this long fails as a stall (study --stall-timeout; default 60 s). */
  stallTimeoutMs?: number;
  onProgress?: (message: string) => void;
}

// ---------------------------------------------------------------- audit

export async function phaseAudit(
  url: string,
  o: Common & { until: Promise<void>; timeScale?: number; context?: AuditContext },
): Promise<AuditSection> {
  const rep = await auditMetrics(`${url}/metrics`, {
    windowMs: 0,
    sleep: () => o.until,
    context: o.context,
    headers: o.apiKey ? { authorization: `Bearer ${o.apiKey}` } : undefined,
  });
  return auditSection(rep, o.timeScale ?? 1);
}

/**
 * `x`: the sim's time scale. Its histograms already hold simulated seconds; only the scrape window
 * (wall clock) and the per-second rates over it are converted, so the section reads as one time base.
 */
function conceptValue(c: AuditReport["concepts"][number], x: number): string {
  const v = c.value;
  if (!v) return c.note ?? "";
  const parts: string[] = [];
  const time = c.unit === "seconds";
  const f = (x: number) => (time ? `${fmt(x * 1000)} ms` : fmt(x));
  if (v.count !== undefined) parts.push(`n ${fmt(v.count)}`);
  if (v.mean !== undefined) parts.push(`mean ${f(v.mean)}`);
  if (v.p50 !== undefined) parts.push(`p50 ${f(v.p50)}`);
  if (v.p99 !== undefined) parts.push(`p99 ${f(v.p99)}`);
  if (v.rate !== undefined) parts.push(`${fmt(v.rate / x)}/s`);
  if (v.after !== undefined && v.count === undefined) parts.push(`now ${fmt(v.after)}`);
  if (c.resolution?.text) parts.push(c.resolution.text);
  return parts.join(", ");
}

export function auditSection(rep: AuditReport, x = 1): AuditSection {
  const notes = [rep.verdict, ...rep.quirks, ...rep.warnings].filter(Boolean);
  return {
    engine: rep.engine ? rep.engine.name : "not detected",
    engineVersion: rep.engine?.version,
    windowMs: rep.windowSeconds * 1000 * x,
    families: rep.concepts.map((c) => ({
      name: c.metric ?? "(not exposed)",
      type: c.kind ?? "",
      granularity: c.observable ? (c.granularity ?? "") : "not exposed",
      concept: c.title,
      value: conceptValue(c, x),
    })),
    gaps: rep.gaps.map((g) => ({ what: g.what, method: `${g.method} (${g.why})`, command: g.command })),
    notes,
  };
}

// ---------------------------------------------------------------- bench (batch 1)

export interface BenchMeasure {
  requests: number;
  outputLen: number;
  promptTokens?: number;
  ttftMs: number[];
  /** Per request, its per-token gaps (ms). */
  itlGroups: number[][];
  tpotMs: number[];
  e2eMs: number[];
  /** The server's /metrics window means as it exports them (the sim: simulated time, no scaling needed). */
  server?: { ttftMeanMs?: number; itlMeanMs?: number; steps?: number };
  warnings: string[];
  clientSaturated: boolean;
  /**
   * Client-side wall time per request that the sim's clock does not cover (HTTP, parsing), in real ms:
   * mean client TTFT − the server's own TTFT over the same window. With a time-scaled sim it must not be
   * multiplied by the scale; 0 when the sim runs in real time or the server view is missing.
   */
  clientOverheadMs: number;
  /** The server's own per-request timings beside the client's, when the engine reports them. */
  serverTimings?: ServerTimingSection;
  requestSplit?: RequestSplitSection;
  /** The joined spans as a `server-split` measurement for the model, or why not (time-scale 1 with spans only). */
  spanEvidence?: SpanEvidence;
  /** The hardware's counters over the bench's measured window (null: none asked for or none available). */
  telemetry?: RunTelemetry | null;
  /** The bench in time slices (client wall clock; about 20 over the window). */
  slices?: SliceResult;
  /** Output tokens/s over the window, binned (seconds from the window's start, wall clock). */
  tokenRate?: Array<{ t: number; tokensPerS: number }>;
}

/** Output tokens per second in bins over the measured phase (run-relative send + chunk times). */
export function tokenRateSeries(
  records: readonly RequestRecord[],
  bins = 40,
): Array<{ t: number; tokensPerS: number }> {
  const pts: Array<[number, number]> = [];
  let end = 0;
  for (const r of records) {
    if (r.warmup || r.errorClass !== null) continue;
    const c = r.chunks;
    for (let i = 0; i < c.tMs.length; i++) {
      if (!(c.flags[i]! & 1)) continue;
      const n = c.tokens[i]! >= 0 ? c.tokens[i]! : c.content[i]! + c.reasoning[i]! > 0 ? 1 : 0;
      if (n <= 0) continue;
      const t = (r.sendMs + c.tMs[i]!) / 1000;
      pts.push([t, n]);
      if (t > end) end = t;
    }
  }
  if (!pts.length || end <= 0) return [];
  const w = end / bins;
  const counts = new Array<number>(bins).fill(0);
  for (const [t, n] of pts) counts[Math.min(bins - 1, Math.floor(t / w))]! += n;
  return counts.map((n, i) => ({ t: (i + 0.5) * w, tokensPerS: n / w }));
}

/** The bench's server-timing summary as a report section (medians over the same requests). */
export function serverTimingSection(s: ServerTimingSummary): ServerTimingSection {
  const step = s.server_step_ms;
  const q = (value: number, how: string, method: Quantity["method"] = "measured"): Quantity => ({
    value,
    unit: "ms",
    method,
    how,
  });
  const notes = [`Definition: ${s.definition}.`];
  if (step !== null)
    notes.push(
      `The server's own per-token field is ${fmt(s.server_per_token_ms)} ms (${fmt(s.diff_pct)} % from the client): it divides n − 1 steps by n, so it reads low by 1/n; the step figure above uses TPOT's n − 1.`,
    );
  if (s.client_overhead_ms_per_token !== null)
    notes.push(
      `Per token, the client sees ${fmt(s.client_overhead_ms_per_token)} ms more than the server's decode step: streaming, loopback and the client's own work, separated from the engine's time.`,
    );
  return {
    source: s.source,
    requests: s.requests,
    serverDecodeMsPerToken: q(
      step ?? s.server_per_token_ms,
      step !== null
        ? "median over requests of the server's predicted_ms ÷ (n − 1)"
        : "median over requests of the server's own per-token figure",
    ),
    clientTpotMs: q(s.client_tpot_ms, "median over the same requests of (E2EL − TTFT)/(n − 1)"),
    diffPct: s.step_diff_pct ?? s.diff_pct,
    absDiffPct: s.step_abs_diff_pct ?? s.abs_diff_pct,
    serverPromptMs: s.server_prompt_ms !== null ? q(s.server_prompt_ms, "median of the server's prompt_ms") : undefined,
    clientTtftMs: s.client_ttft_ms !== null ? q(s.client_ttft_ms, "median client TTFT, same requests") : undefined,
    ttftOverheadMs: s.ttft_minus_prompt_ms ?? undefined,
    notes,
  };
}

/** Client time → simulated time: the sim's part is scaled back; the client's own wall overhead is not. */
export function unscale(wallMs: number, x: number, overheadMs: number): number {
  return x === 1 ? wallMs : (wallMs - overheadMs) * x + overheadMs;
}

const measured = (rs: RequestRecord[]) => rs.filter((r) => !r.warmup && r.errorClass === null);

/** The first failed request in words ("stall: no stream data for …"): what a "nothing succeeded" error shows. */
function firstFailure(rs: RequestRecord[]): string | undefined {
  const f = rs.find((r) => r.errorClass !== null);
  return f ? `${f.errorClass}${f.errorMessage ? `: ${f.errorMessage}` : ""}` : undefined;
}

/** How long the bench waits after its last request for spans still on their way (the sim batches every 200 ms). */
const SPAN_WAIT_MS = 5000;

export async function phaseBench(
  url: string,
  plan: StudyPlan,
  m: Measurements,
  o: Common & { telemetry?: string | TelemetrySpec; spans?: OtlpReceiver; spanIdField?: "request_id" | "rid" },
): Promise<BenchMeasure> {
  const x = m.timeScale;
  const opts: Parameters<typeof runBench>[0] = {
    // The embedded sim's exporter collects every 100 ms; auto reads it every 50 ms (session.ts).
    telemetry: o.telemetry ?? "auto",
    embeddedSim: m.kind === "embedded-sim",
    baseUrl: url,
    model: m.servedModel,
    numPrompts: plan.bench.requests,
    warmup: plan.bench.warmup,
    randomInputLen: plan.inputLen,
    randomOutputLen: plan.bench.outputLen,
    ignoreEos: true,
    concurrency: 1,
    seed: m.seed,
    apiKey: o.apiKey,
    // A server that streams nothing fails the bench at its first stall, not after every request's.
    stallTimeoutMs: o.stallTimeoutMs,
    stopOnStall: true,
    // The engine is known here: only the field it reads (vLLM logs a field it does not know).
    ...(o.spanIdField ? { requestIdFields: [o.spanIdField] } : {}),
  };
  // With the engine's request spans coming to a receiver, each request is sent with an id its span names.
  const withSpans = o.spans
    ? await benchWithSpans(opts, { signal: o.signal }, { receiver: o.spans, waitMs: SPAN_WAIT_MS, onlyLater: true })
    : null;
  const res = withSpans ? withSpans.result : await runBench(opts, { signal: o.signal });
  const rs = measured(res.requests);
  if (rs.length === 0)
    throw new Error(
      `no request succeeded (${res.requests.length} failed; the first: ${firstFailure(res.requests) ?? "see the server log"})`,
    );
  const sv = res.server;
  const clientTtft = rs.reduce((a, r) => a + r.ttftMs, 0) / rs.length;
  // Both in wall ms: server-view converts the sim's simulated seconds back by its time-scale gauge.
  const overhead = x !== 1 && sv && sv.ttft_mean_ms !== null ? Math.max(0, clientTtft - sv.ttft_mean_ms) : 0;
  // The server's own means, in its clock: the sim exports simulated time (inferscope_sim_time_scale).
  const own = sv ? (sv.server_clock ?? sv) : null;
  const warnings = [...res.warnings];
  if (sv && sv.time_scale !== x)
    warnings.push(
      `the server reports time scale ${sv.time_scale} (inferscope_sim_time_scale) but the study ran at ${x}: its /metrics means are shown as exported`,
    );
  return {
    clientOverheadMs: overhead,
    requests: rs.length,
    outputLen: plan.bench.outputLen,
    promptTokens: rs[0]!.promptTokens > 0 ? rs[0]!.promptTokens : undefined,
    ttftMs: rs.map((r) => unscale(r.ttftMs, x, overhead)),
    itlGroups: rs.map((r) => tokenItls(r).map((v) => v * x)),
    tpotMs: rs
      .map((r) => requestTpot(r))
      .filter((v): v is number => v !== null)
      .map((v) => v * x),
    e2eMs: rs.map((r) => unscale(r.e2elMs, x, overhead)),
    server: own
      ? {
          ttftMeanMs: own.ttft_mean_ms === null ? undefined : own.ttft_mean_ms,
          itlMeanMs: own.itl_mean_ms === null ? undefined : own.itl_mean_ms,
          steps: undefined,
        }
      : undefined,
    warnings,
    clientSaturated: res.client.saturated,
    serverTimings: res.serverTimings ? serverTimingSection(res.serverTimings) : undefined,
    requestSplit: withSpans
      ? requestSplitSection(
          withSpans.spans,
          `the engine's OTLP request spans (${o.spans!.endpoint}), joined to the client's records by request id`,
        )
      : undefined,
    spanEvidence: withSpans
      ? spanEvidence(withSpans.spans.join, {
          concurrency: 1,
          inputLen: plan.inputLen,
          outputLen: plan.bench.outputLen,
          source: "inferscope study (engine spans)",
        })
      : undefined,
    telemetry: res.telemetry,
    tokenRate: res.telemetry?.summary ? tokenRateSeries(res.requests) : undefined,
    // About 20 slices over the window, whatever its length: warm-up and drift show without a flag.
    slices:
      res.summary.duration > 0
        ? computeSlices(res.requests, { widthMs: (res.summary.duration * 1000) / 20, percentiles: [50] })
        : undefined,
  };
}

// ---------------------------------------------------------------- length sweep

export interface SweepMeasure {
  points: Array<{ outputTokens: number; e2eMs: number }>;
  slope: { estimate: number; lo: number; hi: number };
  intercept: { estimate: number; lo: number; hi: number };
  r2: number;
  /** The server's threads over the sweep (a server on this host): s waited for a CPU, share of runnable time, output tokens. */
  serverRunQueue?: { waitS: number; share: number; tokens: number };
}

export async function phaseSweep(url: string, plan: StudyPlan, m: Measurements, c: Common): Promise<SweepMeasure> {
  const x = m.timeScale;
  const o = m.bench?.clientOverheadMs ?? 0;
  const points: SweepMeasure["points"] = [];
  let firstFail: string | undefined;
  // A server on this host: its threads' run-queue wait over the sweep (host contention), read from /proc.
  const sched = serverSchedstatFor(url);
  const before = sched?.read() ?? null;
  for (const n of plan.sweep.lengths) {
    c.onProgress?.(`N = ${n}`);
    const res = await runBench(
      {
        baseUrl: url,
        model: m.servedModel,
        numPrompts: plan.sweep.repeats,
        warmup: 0,
        randomInputLen: plan.inputLen,
        randomOutputLen: n,
        ignoreEos: true,
        concurrency: 1,
        seed: m.seed + n,
        apiKey: c.apiKey,
        noServerMetrics: true,
        stallTimeoutMs: c.stallTimeoutMs,
        stopOnStall: true,
      },
      { signal: c.signal },
    );
    for (const r of measured(res.requests))
      points.push({ outputTokens: r.outputTokens, e2eMs: unscale(r.e2elMs, x, o) });
    firstFail ??= firstFailure(res.requests);
  }
  if (points.length < 3)
    throw new Error(
      `only ${points.length} sweep requests succeeded; need 3 for a fit${firstFail ? ` (the first failure: ${firstFail})` : ""}`,
    );
  const xs = points.map((p) => p.outputTokens - 1);
  const ys = points.map((p) => p.e2eMs);
  const fit = theilSenBootstrap(xs, ys, { seed: m.seed, resamples: 1000 });
  const meanY = ys.reduce((s, v) => s + v, 0) / ys.length;
  let ssr = 0;
  let sst = 0;
  for (let i = 0; i < xs.length; i++) {
    ssr += (ys[i]! - (fit.fit.intercept + fit.fit.slope * xs[i]!)) ** 2;
    sst += (ys[i]! - meanY) ** 2;
  }
  const after = sched?.read() ?? null;
  const share = runQueueShare(before, after);
  return {
    ...(share !== null && before && after
      ? {
          serverRunQueue: {
            waitS: after.waitS - before.waitS,
            share,
            tokens: points.reduce((s, p) => s + p.outputTokens, 0),
          },
        }
      : {}),
    points,
    slope: { estimate: fit.fit.slope, lo: fit.slope.lo, hi: fit.slope.hi },
    intercept: { estimate: fit.fit.intercept, lo: fit.intercept.lo, hi: fit.intercept.hi },
    r2: sst > 0 ? 1 - ssr / sst : 1,
  };
}

// ---------------------------------------------------------------- trace, A/B, model (wired as the modules land)

export interface TraceMeasure {
  steps: import("./estimate.ts").TraceStep[];
  totalSteps: number;
  perClass: Array<{ cls: string; msPerStep: number; kernelsPerStep?: number }>;
  idleMsPerStep: number;
  kernelNames: string[];
  files: string[];
  notes: string[];
  stepMode?: string;
  layers?: TraceLayers;
  roofline?: TraceRoofline;
}

/**
 * Profiler trace: /start_profile, one batch-1 request of plan.trace.steps tokens, /stop_profile,
 * then the trace module's per-step breakdown of the file the server wrote into `dir`.
 * Trace times are the server's own clock (the sim writes simulated time), so no scaling here.
 */
export async function phaseTrace(
  url: string,
  plan: StudyPlan,
  m: Measurements,
  o: Common & { dir: string | undefined },
): Promise<TraceMeasure> {
  if (!o.dir)
    throw new Unavailable(
      "no profiler directory: the server was given by --url and $VLLM_TORCH_PROFILER_DIR is not set here (it must be the server's trace directory, readable from this machine)",
    );
  const cap = await captureTrace(url, {
    dir: o.dir,
    steps: plan.trace.steps,
    model: m.servedModel,
    timeoutMs: 120_000,
    // /start_profile and /stop_profile sit behind the same key as the API (vLLM --api-key).
    apiKey: o.apiKey,
  });
  const a = cap.analysis;
  const isComm = (c: string) => c === "communication";
  // Batch-1 decode steps, not cut by the profiling window; the first decode step after the
  // prefill is kept (its window starts at the prefill's last kernel).
  const decode = a.steps.filter(
    (s) => s.kind === "decode" && !s.clipped && (s.tokens?.generationRequests ?? 1) <= 1 && s.durUs > 0,
  );
  // Keep regular windows: the modal all-reduce count and a period within 25 % of the median. A window
  // spanning two steps (segmentation merged them, or the host left the GPU idle) is not a step.
  const modal = mode(decode.map((s) => s.allReduceCalls));
  const medDur = medianOf(decode.map((s) => s.durUs));
  const regular = decode.filter((s) => s.allReduceCalls === modal && Math.abs(s.durUs - medDur) <= 0.25 * medDur);
  const dropped = decode.length - regular.length;
  if (regular.length < 8)
    throw new Error(`the trace has only ${regular.length} regular batch-1 decode steps (of ${a.steps.length}); need 8`);
  const steps = regular.map((s) => {
    const comm = s.kernelUsByClass.communication ?? 0;
    let compute = 0;
    for (const [c, us] of Object.entries(s.kernelUsByClass)) if (!isComm(c)) compute += us ?? 0;
    return {
      periodMs: s.durUs / 1000,
      allReduceMs: s.allReduceUs / 1000,
      allReduceCalls: s.allReduceCalls,
      otherCommMs: Math.max(0, comm - s.allReduceUs) / 1000,
      computeMs: compute / 1000,
    };
  });
  const n = regular.length;
  const classes = new Map<string, { us: number; k: number }>();
  let idle = 0;
  for (const s of regular) {
    idle += s.idleUs;
    for (const [c, us] of Object.entries(s.kernelUsByClass)) {
      const e = classes.get(c) ?? { us: 0, k: 0 };
      e.us += us ?? 0;
      e.k += s.kernelsByClass[c as keyof typeof s.kernelsByClass] ?? 0;
      classes.set(c, e);
    }
  }
  const commKernels = Object.entries(a.kernelClasses)
    .filter(([, v]) => v.class === "communication")
    .map(([k]) => k);
  // Per weight GEMM against the model's weight shapes, where the model and the GPU are known.
  const roofNotes: string[] = [];
  let roofline: TraceRoofline | undefined;
  const mi = m.modelInputs ?? optionsFromDeployment(m.deployment);
  if (mi.options?.model && mi.options.gpu && a.ranks[0]) {
    try {
      const { rooflineFor } = await import("../trace/analyze.ts");
      const { loadModelArg } = await import("../model/io.ts");
      const { parseBandwidthGBs } = await import("../model/hardware.ts");
      roofline = rooflineSection(
        await rooflineFor(a.ranks[0], {
          model: loadModelArg(mi.options.model),
          gpu: mi.options.gpu,
          ...(mi.options.measuredBandwidth
            ? { measuredBandwidthGBs: parseBandwidthGBs(mi.options.measuredBandwidth) }
            : {}),
          batch: 1,
          contextLen: plan.inputLen + Math.round(plan.trace.outputLen / 2),
        }),
      );
    } catch (err) {
      roofNotes.push(`per-GEMM roofline unavailable: ${(err as Error).message}`);
    }
  } else roofNotes.push(`per-GEMM roofline unavailable: it needs ${mi.missing.join("; ") || "the model and the GPU"}`);
  return {
    stepMode: a.stepMode,
    ...(a.layers ? { layers: layersSection(a.layers) } : {}),
    ...(roofline ? { roofline } : {}),
    steps,
    totalSteps: a.steps.length,
    perClass: [...classes.entries()]
      .map(([cls, e]) => ({ cls, msPerStep: e.us / n / 1000, kernelsPerStep: e.k / n }))
      .sort((x, y) => y.msPerStep - x.msPerStep),
    idleMsPerStep: idle / n / 1000,
    kernelNames: commKernels,
    files: cap.files.map((f) => f.split("/").pop() ?? f),
    notes: [
      ...(dropped
        ? [
            `${dropped} of ${decode.length} decode windows were left out: they spanned more than one step (merged by segmentation or stretched by host-side idle).`,
          ]
        : []),
      ...a.notes,
      ...a.warnings,
      ...roofNotes,
    ],
  };
}

function medianOf(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  return n % 2 ? s[(n - 1) / 2]! : (s[n / 2 - 1]! + s[n / 2]!) / 2;
}

function mode(xs: number[]): number {
  const c = new Map<number, number>();
  for (const x of xs) c.set(x, (c.get(x) ?? 0) + 1);
  let best = xs[0]!;
  for (const [k, v] of c) if (v > (c.get(best) ?? 0)) best = k;
  return best;
}

export interface AbMeasure {
  arms: Array<{ name: string; change: string; perTokenMs: number[]; ttftMs: number[]; e2eMs: number[] }>;
  order: string[];
  notes: string[];
  runId: string;
}

/**
 * A/B on the chosen knob (m.experiment: the --variant arms, or the engine registry's first fit — on the
 * seed, NCCL's own protocol choice against NCCL_PROTO=LL): the server restarted per block, blocks in a
 * seeded ABBA order (experiment/runAB). Raw per-request samples are read back from the run store so
 * the study can scale them to simulated time.
 */
export async function phaseAb(
  serverCmd: string,
  plan: StudyPlan,
  m: Measurements,
  o: Common & { embedded: boolean; store: Store | null },
): Promise<AbMeasure> {
  const x = m.timeScale;
  const overhead = m.bench?.clientOverheadMs ?? 0;
  const arms = m.experiment?.arms;
  if (!arms) throw new Unavailable("no experiment chosen");
  const specs = arms.map((a) => parseVariant(a));
  const ownStore = o.store ? null : openStore(join(mkdtempSync(join(tmpdir(), "inferscope-study-")), "ab.db"));
  const store = (o.store ?? ownStore)!;
  try {
    const res = await runAB({
      serverCmd,
      variants: [...arms],
      repeats: plan.ab.repeats,
      workload: {
        numPrompts: plan.ab.requestsPerBlock,
        randomInputLen: plan.inputLen,
        randomOutputLen: plan.ab.outputLen,
        warmup: plan.ab.warmup,
        concurrency: 1,
        seed: m.seed,
        model: m.servedModel,
        stallTimeoutMs: o.stallTimeoutMs,
      },
      seed: m.seed,
      db: store,
      readyTimeoutMs: o.embedded ? 60_000 : 600_000,
      graceMs: o.embedded ? 3000 : 10_000,
      logDir: join(tmpdir(), "inferscope-logs"),
      apiKey: o.apiKey,
      signal: o.signal,
      onProgress: (e) => o.onProgress?.(e.message),
    });
    const detail = store.getRun(res.runId);
    const variantOf = new Map(detail.blocks.filter((b) => b.status === "complete").map((b) => [b.id, b.variant]));
    const reqs = store.getRequests(res.runId).filter((r) => r.ok && r.blockId !== null && variantOf.has(r.blockId));
    const armsOut = specs
      .map((v) => ({ name: v.name, change: changeOf(v) }))
      .map((a) => {
        const mine = reqs.filter((r) => variantOf.get(r.blockId!) === a.name);
        return {
          ...a,
          perTokenMs: mine
            .map((r) => r.tpotMs)
            .filter((v): v is number => v !== null && Number.isFinite(v))
            .map((v) => v * x),
          ttftMs: mine
            .map((r) => r.ttftMs)
            .filter((v): v is number => v !== null)
            .map((v) => unscale(v, x, overhead)),
          e2eMs: mine
            .map((r) => r.e2elMs)
            .filter((v): v is number => v !== null)
            .map((v) => unscale(v, x, overhead)),
        };
      });
    const notes = [
      `Each block restarted the server; ${plan.ab.warmup} warm-up request(s) per block excluded. Stored as A/B run ${res.runId}.`,
      ...res.errors.map((e) => `block ${e.block} (${e.variant}): ${e.message}`),
    ];
    return { arms: armsOut, order: res.config.design.map((b) => b.variant), notes, runId: res.runId };
  } finally {
    ownStore?.close();
  }
}

/** An arm as the model's Variant, or null when it changes something the model does not represent. */
export function modelVariant(v: VariantSpec): ModelVariant | null {
  const out: ModelVariant = {};
  for (const [k, x] of Object.entries(v.env)) {
    if (k === "NCCL_PROTO") out.ncclProto = x;
    else if (k === "NCCL_ALGO") out.ncclAlgo = x;
    else return null;
  }
  for (const a of v.args) {
    if (a === "--disable-custom-all-reduce") out.customAllReduce = false;
    else if (a === "--enforce-eager" || a === "--disable-cuda-graph") out.cudaGraphs = false;
    else return null;
  }
  return out;
}

/** What an arm changes, in words ("NCCL_PROTO=LL", "--threads 2", "the server command as given"). */
function changeOf(v: VariantSpec): string {
  const parts = [...Object.entries(v.env).map(([k, x]) => `${k}=${x}`), ...v.args.map(shellQuote)];
  if (parts.length) return parts.join(" ");
  return "the server as given (no change)";
}

export interface ModelMeasure {
  section: ModelSection;
  /** Calibrated decode-step terms with their ranges (ms), for the decomposition when there is no trace. */
  terms: Array<{ name: string; low: number; mid: number; high: number }>;
  whatIfs: WhatIf[];
  ceilings: Ceiling[];
  callsPerToken?: number;
  /** The fit's per-call all-reduce cost came from the profiler trace (a `trace` measurement was fitted). */
  arFromTrace: boolean;
  /** What the counters are compared with: the model's bytes per step and collective bytes per token. */
  hardware?: ModelHardware;
  /** The streaming bandwidth the fit took from telemetry (DRAM active × peak ÷ memory busy), GB/s. */
  telemetryBandwidthGBs?: number;
}

/** The model's side of the telemetry comparisons. */
export interface ModelHardware {
  /** Interconnect TX bytes over all GPUs per token through the model (prompt or generated): all-reduces, the embedding one included. */
  allReduceTxBytesPerToken: number | null;
  /** Interconnect TX bytes over all GPUs per sampled token: the logits gather. */
  gatherTxBytesPerToken: number;
  /** DRAM bytes one GPU reads per decode step (weights + routed experts + KV). */
  bytesPerStepGB: number | null;
  /** The device's spec bandwidth, GB/s. */
  specBandwidthGBs: number | null;
  tp: number;
}

/**
 * The model's collective bytes per output token for requests of P prompt and O output tokens: all-reduces run for
 * every token through the model (P + O − 1 per request), the logits gather once per sampled token (O).
 */
export function modelTxBytesPerOutputToken(
  hw: ModelHardware,
  promptTokens: number,
  outputTokens: number,
): number | null {
  if (hw.allReduceTxBytesPerToken === null || outputTokens <= 0) return null;
  return (hw.allReduceTxBytesPerToken * (promptTokens + outputTokens - 1)) / outputTokens + hw.gatherTxBytesPerToken;
}

/** The model's bytes, from a prediction's terms and collectives (the same counts the step time uses). */
export function modelHardware(pred: Prediction, tp: number): ModelHardware {
  const terms = pred.decode.terms;
  const inp = (name: string) => terms.find((t) => t.name === name)?.inputs as Record<string, any> | undefined;
  const w = inp("weights");
  const experts = inp("moe-experts");
  const kv = inp("kv");
  const bytesPerStepGB =
    typeof w?.bytesPerGpuGB === "number"
      ? w.bytesPerGpuGB +
        (typeof experts?.GB === "number" ? experts.GB : 0) +
        (typeof kv?.bytesPerGpuMB === "number" ? kv.bytesPerGpuMB / 1000 : 0)
      : null;
  const c = pred.collectives;
  let allReduceTxBytesPerToken: number | null = null;
  let gatherTxBytesPerToken = 0;
  if (tp > 1 && c) {
    const path = c.implementation === "custom" ? "one-shot" : c.algorithm === "Tree" ? "tree" : "ring";
    const emb = c.extra.find((e) => e.name === "embedding all-reduce")?.count ?? 0;
    const gather = c.extra.find((e) => e.name === "logits gather");
    allReduceTxBytesPerToken = (c.countPerToken + emb) * allReduceTxBytesPerGpu(c.bytesEach, tp, path) * tp;
    gatherTxBytesPerToken = gather && gather.count > 0 ? (tp - 1) * gather.bytes : 0;
  } else if (tp === 1) allReduceTxBytesPerToken = 0;
  return {
    allReduceTxBytesPerToken,
    gatherTxBytesPerToken,
    bytesPerStepGB,
    specBandwidthGBs: typeof w?.bandwidthGBs === "number" && w.bandwidthIs === "spec" ? w.bandwidthGBs : null,
    tp,
  };
}

const WHATIFS_COMM = ["proto=LL", "zero-comm", "custom-ar", "nvlink", "nvlink+custom-ar", "kv=fp8", "tp=4"];
const WHATIFS_SINGLE = ["kv=fp8"];

/** Model options from a Deployment record whose fields are all known (older callers, tests). */
export function optionsFromDeployment(d: Measurements["deployment"]): ModelInputs {
  const missing: string[] = [];
  if (!d.model) missing.push("the model (--model)");
  if (!d.gpu) missing.push("the hardware (--gpu, --cpu or --hardware)");
  if (missing.length) return { options: null, missing, assumptions: [] };
  return {
    options: {
      model: d.model!,
      quant: d.quant ?? undefined,
      gpu: d.gpu!,
      gpus: d.gpus !== null ? String(d.gpus) : undefined,
      tp: d.tp !== null ? String(d.tp) : undefined,
      interconnect: d.interconnect ?? undefined,
      engine: d.engine ?? undefined,
    },
    missing: [],
    assumptions: [],
  };
}

/**
 * Time per token a CPU server lost waiting for a CPU: the token time × the threads' run-queue share, but
 * never more than the waited seconds ÷ tokens (several threads wait at once; a sleeping thread loses
 * nothing). Null when not measured or under 1 %.
 */
export function contentionMsPerToken(
  perTokenMs: number,
  server: { runQueueShare: number; runQueueS: number } | null | undefined,
  tokens: number | null | undefined,
): { ms: number; share: number } | null {
  if (!server || !(server.runQueueShare >= 0.01)) return null;
  const byShare = perTokenMs * server.runQueueShare;
  const byWait = tokens ? (1000 * server.runQueueS) / tokens : byShare;
  return { ms: Math.min(byShare, byWait), share: server.runQueueShare };
}

/**
 * The analytical model: predicted from catalog inputs alone, then fitted (model/fit) to this run's
 * measurements — per-step time, TTFT, the A/B delta, the sweep slope, the trace's all-reduce share —
 * so its what-ifs rest on this deployment's numbers. Residuals show what the model could not match.
 */
export async function phaseModel(m: Measurements): Promise<ModelMeasure> {
  const outLen = m.plan.bench.outputLen;
  // The same resolver as `model predict`: catalog, config.json, .gguf, catalog CPUs and described devices.
  const mi = m.modelInputs ?? optionsFromDeployment(m.deployment);
  if (!mi.options) throw new Unavailable(`the model needs ${mi.missing.join("; ")}`);
  let input: ModelInput;
  let pred: Prediction;
  try {
    input = {
      ...inputFromOptions(mi.options),
      batch: 1,
      inputLen: m.plan.inputLen,
      outputLen: outLen,
      contextLen: m.plan.inputLen + Math.round(outLen / 2),
    };
    pred = predict(input);
  } catch (err) {
    throw new Unavailable(`the model cannot describe this deployment: ${(err as Error).message}`);
  }
  const meas: Measurement[] = [];
  const src = "inferscope study";
  const cpuHost = Boolean(mi.options.cpu || mi.options.cpuBandwidth);
  let contention: { ms: number; share: number; itlMs: number } | undefined;
  const hw = modelHardware(pred, input.tp ?? 1);
  // The hardware's own counters, where they say it: DRAM active (achieved ÷ peak) over memory busy time is
  // the bandwidth while streaming, which replaces the spec × efficiency prior.
  const tu = m.bench?.telemetry?.summary?.utilization;
  let telemetryBandwidthGBs: number | undefined;
  if (tu?.dramActive != null && tu.memBusy != null && tu.memBusy >= 0.05 && hw.specBandwidthGBs) {
    telemetryBandwidthGBs = (tu.dramActive * hw.specBandwidthGBs) / tu.memBusy;
    meas.push({ kind: "bandwidth", gbs: telemetryBandwidthGBs, label: "streaming bandwidth (telemetry)", source: src });
  }
  const tr = m.trace?.steps.length ? estimateFromTrace(m.trace.steps, m.seed + 7) : undefined;
  const tok = m.bench ? pooledMeanCI(m.bench.itlGroups, m.seed) : undefined;
  // The engine's spans (time-scale 1, join ≥ 90 % of ≥ 10 requests): its decode step, host part and queue.
  const split = m.bench?.spanEvidence?.measurement ?? undefined;
  let splitStep = false;
  // With a trace: the server's own step period (immune to time-scaled client delay) and the measured
  // per-call all-reduce time, which pins the collective cost the what-ifs remove.
  if (tr)
    meas.push({
      kind: "trace",
      allReduceUsPerCall: { value: tr.perCallUs.estimate, ci: [tr.perCallUs.lo, tr.perCallUs.hi] },
      allReduceCallsPerToken: tr.callsPerStep,
      stepMs: { value: tr.periodMs.estimate, ci: [tr.periodMs.lo, tr.periodMs.hi] },
      batch: 1,
      label: "decode step (trace median)",
      source: src,
    });
  else if (tok) {
    // A CPU server's token time is work plus the time its threads waited for a CPU: the fit takes the work.
    const lost = contentionMsPerToken(
      tok.estimate,
      m.bench?.telemetry?.summary?.cpu?.server,
      m.bench?.telemetry?.summary?.tokens,
    );
    if (cpuHost && lost) contention = { ...lost, itlMs: tok.estimate };
    const d = cpuHost && lost ? lost.ms : 0;
    // The server's own decode step (spans) stands for the client's ITL: it has no delivery in it.
    if (split?.stepMs && !d) splitStep = true;
    else
      meas.push({
        kind: "itl",
        ms: tok.estimate - d,
        batch: 1,
        ci: [tok.lo - d, tok.hi - d],
        label: d ? "ITL batch 1 (client), less the server's run-queue wait" : "ITL batch 1 (client)",
        source: src,
      });
  }
  // A trace's step (or a contention-corrected ITL) already stands for the step: the spans add the host part and queue.
  if (split) meas.push(splitStep ? split : { ...split, stepMs: undefined });
  if (m.bench?.ttftMs.length) {
    const t = m.bench.ttftMs;
    meas.push({
      kind: "ttft",
      ms: t.reduce((a, b) => a + b, 0) / t.length,
      inputLen: m.plan.inputLen,
      label: "TTFT",
      source: src,
    });
  }
  // Only an A/B whose arms the model can represent (NCCL protocol/algorithm, custom all-reduce, graphs).
  const armsModel = m.experiment?.arms?.map((t) => modelVariant(parseVariant(t))) ?? [{}, { ncclProto: "LL" }];
  if (m.ab && m.ab.arms.length >= 2 && armsModel.length >= 2 && armsModel[0] && armsModel[1]) {
    const [a, b] = m.ab.arms as [AbMeasure["arms"][number], AbMeasure["arms"][number]];
    const mean = (xs: number[]) => xs.reduce((s, v) => s + v, 0) / xs.length;
    if (a.perTokenMs.length && b.perTokenMs.length)
      meas.push({
        kind: "ab",
        variantA: armsModel[0],
        variantB: armsModel[1],
        deltaMsPerToken: mean(b.perTokenMs) - mean(a.perTokenMs),
        label: `A/B ${b.change} − ${a.name}, per token`,
        source: src,
      });
  }
  if (m.sweep) {
    const q = m.sweep.serverRunQueue;
    const lost =
      cpuHost && q
        ? contentionMsPerToken(m.sweep.slope.estimate, { runQueueShare: q.share, runQueueS: q.waitS }, q.tokens)
        : null;
    // The share applies to the whole request (prefill too): slope and intercept scale alike.
    const k = lost ? 1 - lost.ms / m.sweep.slope.estimate : 1;
    meas.push({
      kind: "length-sweep",
      slopeMsPerToken: m.sweep.slope.estimate * k,
      interceptMs: m.sweep.intercept.estimate * k,
      ci: [m.sweep.slope.lo * k, m.sweep.slope.hi * k],
      label: lost ? "length-sweep slope, less the server's run-queue wait" : "length-sweep slope",
      source: src,
    });
  }
  if (tr)
    meas.push({
      kind: "estimate",
      name: "allreduce-share",
      low: tr.share.lo,
      high: tr.share.hi,
      label: "trace all-reduce share",
      source: src,
    });
  const rangeQ = (
    r: { low: number; mid: number; high: number },
    unit: string,
    method: Quantity["method"],
    how: string,
  ): Quantity => ({
    value: r.mid,
    low: Math.min(r.low, r.high),
    high: Math.max(r.low, r.high),
    unit,
    method,
    how,
  });
  const notes: string[] = [...mi.assumptions];
  if (contention)
    notes.push(
      `Host contention: the server's threads waited for a CPU ${(100 * contention.share).toFixed(0)} % of their runnable time, ${contention.ms.toFixed(2)} ms of each ${contention.itlMs.toFixed(2)} ms token; the model was fitted to the rest (the server's own work). A quiet host would give about ${(contention.itlMs - contention.ms).toFixed(2)} ms.`,
    );
  if (!mi.options.quant && !/\.gguf$/i.test(mi.options.model ?? ""))
    notes.push(
      `Quantization neither given nor detected: the model used ${pred.quantization.recipe} (the checkpoint's declared format, else BF16); give --quant to change it.`,
    );
  let fitted: FitResult | undefined;
  if (meas.length) {
    try {
      fitted = fit(input, meas);
      notes.push(...fitted.consistency, ...fitted.notPinned.map((p) => `Not pinned by these measurements: ${p}`));
    } catch (err) {
      notes.push(`calibration failed: ${(err as Error).message}; what-ifs use the uncalibrated model`);
    }
  } else notes.push("no measurements to calibrate on: the model is uncalibrated");
  const ev = m.bench?.spanEvidence;
  const hostP = fitted?.parameters.find((p) => p.name === "hostMs");
  let hostFromSpansMs: Quantity | undefined;
  if (ev && !ev.measurement) notes.push(`The engine's spans were not used for calibration: ${ev.why}.`);
  else if (ev) notes.push(`Calibrated on the engine's spans (${ev.why}).`);
  if (split?.hostMs && hostP) {
    const h = split.hostMs;
    const ci = h.ci ?? [h.value, h.value];
    const prior = `prior ${fmt(hostP.prior.mean)} ± ${fmt(hostP.prior.sd)} ms: ${hostP.priorFrom}`;
    notes.push(
      `Host term measured from the engine's spans: ${fmt(h.value)} ms/step [${fmt(ci[0])}, ${fmt(ci[1])}] (${prior}); fitted ${fmt(hostP.posterior.mean)} ± ${fmt(hostP.posterior.sd)} ms.`,
    );
    hostFromSpansMs = {
      value: h.value,
      low: ci[0],
      high: ci[1],
      unit: "ms",
      method: "measured",
      how: `engine spans, ${split.requests} requests, detailed traces: (inference − execute) ÷ steps, mean with 95 % CI; ${prior}; fitted ${fmt(hostP.posterior.mean)} ± ${fmt(hostP.posterior.sd)} ms`,
    };
  }
  const calibrated: ModelInput = fitted ? { ...input, calibration: fitted.calibration } : input;
  const cp = fitted?.prediction ?? pred;
  const c = pred.collectives;
  const section: ModelSection = {
    description: `${pred.architecture.name} (${pred.quantization.recipe}) on ${pred.input.gpus}× ${pred.hardware.gpu.name}, TP ${pred.input.tp}, ${pred.hardware.interconnect.label}, ${pred.input.engine}`,
    predictedStepMs: rangeQ(
      pred.decode.stepMs,
      "ms",
      "modelled",
      "analytical model from catalog inputs, efficiency ranges",
    ),
    calibratedStepMs: fitted
      ? rangeQ(
          cp.decode.stepMs,
          "ms",
          "fitted",
          `model fitted to ${fitted.measurementsUsed} measurements of this run${contention ? " (the server's CPU work: its run-queue wait taken out)" : ""}`,
        )
      : undefined,
    hostContentionMs: contention
      ? {
          value: contention.ms,
          unit: "ms",
          method: "measured",
          how: `the server's threads waited for a CPU ${(100 * contention.share).toFixed(0)} % of their runnable time during the bench (/proc schedstat): ${contention.ms.toFixed(2)} of the ${contention.itlMs.toFixed(2)} ms per token`,
        }
      : undefined,
    hostFromSpansMs,
    terms: cp.decode.terms.map((t) => ({ name: t.label, ms: t.ms.mid, share: t.share, detail: t.formula })),
    collectives: {
      countPerToken: c.countPerToken,
      bytesEach: c.bytesEach,
      algorithm: c.algorithm,
      protocol: c.protocol ?? undefined,
      latencyUs: c.latencyUsEach.mid,
      note: [c.customAllReduce.reason, ...c.extra.map((e) => `+${e.count} ${e.name} (${e.note})`)]
        .filter(Boolean)
        .join("; "),
    },
    residuals: (fitted?.residuals ?? []).map((r) => ({
      what: r.label,
      measured: r.measured,
      modelled: r.fitted,
      unit: r.unit,
      residualPct: r.measured !== 0 ? (100 * (r.fitted - r.measured)) / Math.abs(r.measured) : 0,
    })),
    fittedParams: (fitted?.parameters ?? [])
      .filter((p) => p.pinned)
      .map((p) => ({
        name: p.label,
        value: {
          value: p.posterior.mean,
          low: p.posterior.mean - 2 * p.posterior.sd,
          high: p.posterior.mean + 2 * p.posterior.sd,
          unit: p.unit,
          method: "fitted" as const,
          how: `posterior mean ± 2 sd (prior ${p.prior.mean.toPrecision(3)} ± ${p.prior.sd.toPrecision(2)})`,
        },
      })),
    notes: [...notes, ...pred.assumptions.slice(0, 4)],
  };
  const base = cp.decode.tokensPerSecond.mid;
  const whatIfs: WhatIf[] = [];
  const comm = c.countPerToken > 0;
  for (const w of whatif(calibrated, comm ? WHATIFS_COMM : WHATIFS_SINGLE)) {
    if (w.scenario === "baseline") continue;
    whatIfs.push({
      scenario: w.scenario,
      assumption: w.description,
      msPerToken: rangeQ(w.stepMs, "ms", "modelled", fitted ? "calibrated model" : "uncalibrated model"),
      tokensPerSecond: rangeQ(
        w.tokensPerSecond,
        "tok/s",
        "modelled",
        fitted ? "calibrated model" : "uncalibrated model",
      ),
      speedup: w.tokensPerSecond.mid / base,
    });
  }
  const ceil: Ceiling[] = ceilings(input, fitted)
    .filter((r) => r.basis !== "measurement")
    .map((r) => {
      const ms = { value: (r.stepMs.low + r.stepMs.high) / 2, low: r.stepMs.low, high: r.stepMs.high };
      return {
        scenario: r.name,
        assumption: r.assumption,
        msPerToken: { ...ms, unit: "ms", method: "modelled", how: r.basis },
        tokensPerSecond: {
          value: 1000 / ms.value,
          low: r.tokensPerSecond.low,
          high: r.tokensPerSecond.high,
          unit: "tok/s",
          method: "modelled",
          how: r.basis,
        },
      };
    });
  return {
    section,
    terms: cp.decode.terms.map((t) => ({ name: t.label, low: t.ms.low, mid: t.ms.mid, high: t.ms.high })),
    whatIfs,
    ceilings: ceil,
    callsPerToken: c.countPerToken,
    hardware: hw,
    telemetryBandwidthGBs,
    arFromTrace: Boolean(
      fitted && tr && fitted.residuals.some((r) => r.label.startsWith("all-reduce per call (trace)")),
    ),
  };
}

/** The audit's hint context from what discovery found: commands that fit this engine and deployment. */
export function auditContext(m: Measurements, serverCmd?: string): AuditContext {
  const o = m.modelInputs?.options;
  const d = m.discovery;
  let hardwareFlags: string | null = null;
  if (o?.hardware) hardwareFlags = `--hardware ${shellQuote(o.hardware)}`;
  else if (o?.cpuBandwidth)
    hardwareFlags = `--cpu-bandwidth ${o.cpuBandwidth}${o.cpuCores ? ` --cpu-cores ${o.cpuCores}` : ""}`;
  else if (o?.cpu) hardwareFlags = `--cpu ${shellQuote(o.cpu)}`;
  else if (o?.gpu)
    hardwareFlags = `--gpu ${shellQuote(o.gpu)}${o.gpus ? ` --gpus ${o.gpus}` : ""}${o.tp ? ` --tp ${o.tp}` : ""}`;
  if (hardwareFlags && o?.engine) hardwareFlags += ` --engine ${o.engine}`;
  const tp = d?.tp.value ?? m.deployment.tp;
  return {
    collectives: d ? hasCollectives(d) : tp === null ? null : tp > 1,
    deviceKind: d?.deviceKind.value ?? m.deployment.deviceKind ?? null,
    model: o?.model ?? null,
    hardwareFlags,
    serverCmd: serverCmd ?? null,
  };
}
