// Runs a benchmark: resolves the model, warms up, sends the measured requests on a closed loop or an
// open-loop schedule (paced by a timer, then short futex sleeps), streams records to JSONL, and summarises.
import { accessSync, constants, existsSync, statSync, writeFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { dirname, resolve } from "node:path";
import { monitorEventLoopDelay, performance } from "node:perf_hooks";
import { InputError, TargetError, UsageError } from "../errors.ts";
import { redact } from "../secrets.ts";
import { openTelemetry, type RunTelemetry, type TelemetrySession } from "../telemetry/session.ts";
import { blankRecord, serverMessage as errorBodyMessage, keyHint, StreamClient, type StreamDone } from "./client.ts";
import { readAzure } from "./datasets/azure.ts";
import { isJsonlTrace, readJsonlTrace } from "./datasets/jsonl.ts";
import { readMooncake } from "./datasets/mooncake.ts";
import { type Calibration, PromptSynth } from "./datasets/synth.ts";
import { readText, type Trace } from "./datasets/trace.ts";
import { setReadHook } from "./h1.ts";
import { type InstrumentSpec, LoopInstrument, type LoopReport } from "./instrument.ts";
import { checkStreams, checkWorkers, MAX_REQUESTS, MAX_RUN_MS, RUN_BOUND_TEXT, spanText } from "./limits.ts";
import { burstEnd, pace } from "./pacer.ts";
import { JsonlWriter, NO_CHUNKS, RecordStore, recordToJson } from "./records.ts";
import {
  lengthChecks,
  planReplay,
  type ReplayLengths,
  type ReplayPlan,
  type ScheduleSummary,
  scheduleSummary,
  traceWorkload,
} from "./replay.ts";
import { arrivalTimesMs, requestsForDuration } from "./schedule.ts";
import { type ServerTimingSummary, summarizeServerTimings } from "./server-timings.ts";
import { type ServerView, serverDelta, type Totals, totalsFromText } from "./server-view.ts";
import {
  checkSessionSpan,
  notSentText,
  runSessions,
  type Session,
  type SessionsRun,
  sharegptSessions,
  syntheticSessions,
  type TurnRow,
  type TurnsNotSent,
  traceSessions,
  turnTable,
} from "./sessions.ts";
import {
  autoWorkersChoice,
  ELD_RESOLUTION_MS,
  mergeEld,
  ownedUtf8,
  replayWorkersChoice,
  type ShardEld,
  type ShardInit,
  startShards,
} from "./shard.ts";
import { type BenchSummary, computeMetrics, type MetricsResult } from "./summarize.ts";
import { calibrate, findTokenizer } from "./tokenizer.ts";
import type { BenchOptions, BenchProgress, ClientHealth, Endpoint, RequestRecord } from "./types.ts";
import { createWorkload, type Prompt, requestBody, type Workload } from "./workload.ts";

export interface BenchDeps {
  signal?: AbortSignal;
  onProgress?: (p: BenchProgress) => void;
  /** One line per telemetry decision or problem (which source and why, a gap). */
  onTelemetryNote?: (line: string) => void;
  /** Called as the measured window opens and closes (after warm-up; where telemetry stamps its edges). */
  onMeasureEdge?: (edge: "start" | "end") => void;
  /** How long to wait for in-flight requests after an interrupt (ms). Default 5000. */
  graceMs?: number;
  /**
   * bench:client's instruments, run in every loop that reads streams (this thread, or each worker
   * thread) over its window, the run's clock start to its last request's end; one report per loop.
   */
  instrument?: InstrumentSpec & { onLoop(r: LoopReport): void };
  /** The measured phase's origin on performance.now()'s clock (records' times are relative to it). */
  onOrigin?: (originPerf: number) => void;
}

export interface BenchSetup {
  date: string;
  endpoint_type: string;
  backend: string;
  label: string | null;
  model_id: string;
  tokenizer_id: string;
  num_prompts: number;
  request_rate: number | "inf";
  burstiness: number;
  max_concurrency: number | null;
  /** Ours: closed-loop users (--concurrency), or null for an open loop. */
  concurrency: number | null;
  base_url: string;
  endpoint: Endpoint;
  dataset_name: string;
  seed: number;
  warmup: number;
}

export interface BenchResult {
  setup: BenchSetup;
  summary: BenchSummary;
  perRequest: MetricsResult["perRequest"];
  requests: RequestRecord[];
  warnings: string[];
  client: ClientHealth;
  server: ServerView | null;
  /** The server's own per-request timings beside the client's (llama.cpp `timings`, TGI headers). */
  serverTimings: ServerTimingSummary | null;
  /** Hardware telemetry over the measured window; null when none was asked for. */
  telemetry: RunTelemetry | null;
  /** True when interrupted: only what finished is included. */
  partial: boolean;
  percentiles: number[];
  percentileMetrics: string[];
  /** Send lag against the schedule (open loop, trace replay, sessions); null for a closed loop. */
  schedule?: ScheduleSummary | null;
  /** Trace replay and sessions: the dataset, how prompts were sized, and the server's counts against them. */
  replay?: ReplayInfo | null;
  /** Sessions: TTFT, prompt and cached tokens by turn index. */
  turns?: TurnRow[] | null;
}

export interface ReplayInfo {
  dataset: string;
  path: string | null;
  /** Requests the trace window selected (or turns the sessions hold). */
  requests: number;
  /** Sessions the dataset held (null for a replay). */
  sessions: number | null;
  /** Of `requests`, those sent (finished, failed or cut). */
  sent: number;
  /** Sessions: turns never sent, by reason (null for a replay); sessionsEnded: sessions a failed turn ended. */
  notSent: TurnsNotSent | null;
  sessionsEnded: number | null;
  /** How synthesized prompts were sized (null when every prompt came with its text). */
  calibration: (Omit<Calibration, "words"> & { words: number }) | null;
  lengths: ReplayLengths;
  ignoreEos: boolean;
}

/** What a trace or session dataset resolved to, before anything is sent. */
interface TraceMode {
  trace: Trace | null;
  /** Replay on the trace's own times; null when a rate or users drive the schedule (lengths only), or sessions. */
  plan: ReplayPlan | null;
  /** Rows for a generated schedule (lengths from the trace). */
  rows: Trace["rows"] | null;
  /** Sessions built once the synthesizer exists. */
  sessions: ((synth: PromptSynth) => Session[]) | null;
  needsSynth: boolean;
}

function loadTraceMode(o: BenchOptions): TraceMode | null {
  const ds = o.dataset ?? "random";
  const sess = o.sessions;
  if (sess?.source === "synthetic") {
    checkSessionSpan({ thinkMs: sess.thinkMs, maxTurns: sess.turns });
    return {
      trace: null,
      plan: null,
      rows: null,
      sessions: (synth) => syntheticSessions(sess, synth),
      needsSynth: true,
    };
  }
  if (sess?.source === "sharegpt") {
    if (ds !== "sharegpt" || !o.datasetPath)
      throw new UsageError("ShareGPT sessions need --dataset-name sharegpt and --dataset-path");
    const list = sharegptSessions(o.datasetPath, readText(o.datasetPath), sess.maxSessions);
    checkSessionSpan({ thinkMs: sess.thinkMs, maxTurns: list.reduce((m, x) => Math.max(m, x.turns.length), 0) });
    return { trace: null, plan: null, rows: null, sessions: () => list, needsSynth: false };
  }
  let trace: Trace | null = null;
  if (ds === "mooncake" || ds === "azure") {
    if (!o.datasetPath) throw new UsageError(`--dataset-name ${ds} needs --dataset-path`);
    trace = ds === "mooncake" ? readMooncake(o.datasetPath) : readAzure(o.datasetPath);
  } else if (ds === "jsonl" && o.datasetPath) {
    const text = readText(o.datasetPath);
    if (isJsonlTrace(text)) trace = readJsonlTrace(o.datasetPath, o.randomOutputLen ?? 128, text);
  }
  const replayFlags = o.replaySpeed !== undefined || o.startOffsetMs !== undefined || o.maxRequests !== undefined;
  if (!trace) {
    if (replayFlags) throw new UsageError("--replay-speed, --start-offset and --max-requests need a trace dataset");
    if (sess) throw new UsageError("trace sessions need a jsonl dataset with session_id");
    return null;
  }
  const t = trace;
  const needsSynth = t.rows.some((r) => r.prompt === undefined && r.messages === undefined);
  const hasSessions = t.rows.some((r) => r.sessionId !== null);
  if (sess?.source === "trace" || hasSessions) {
    if (!t.rows.every((r) => r.sessionId !== null))
      throw new UsageError(`${t.path}: session_id is on some rows but not all: give it on every row or none`);
    checkSessionSpan({ trace: t, speed: o.replaySpeed });
    return {
      trace: t,
      plan: null,
      rows: null,
      sessions: (synth) => traceSessions(t, synth, o.replaySpeed ?? 1),
      needsSynth,
    };
  }
  const generated = o.requestRate !== undefined || o.concurrency !== undefined;
  if (t.timed && !generated) {
    if (o.numPrompts !== undefined)
      throw new UsageError("a trace replay sends the trace's own requests: use --max-requests, not --num-prompts");
    const plan = planReplay(t, {
      replaySpeed: o.replaySpeed,
      startOffsetMs: o.startOffsetMs,
      maxRequests: o.maxRequests,
      durationMs: o.durationMs,
    });
    return { trace: t, plan, rows: plan.rows, sessions: null, needsSynth };
  }
  if (o.replaySpeed !== undefined || o.startOffsetMs !== undefined)
    throw new UsageError(
      t.timed
        ? "--replay-speed and --start-offset replay the trace's own times; drop --request-rate/--concurrency for that"
        : `--replay-speed and --start-offset need timestamps, and ${t.path} has none`,
    );
  const rows = t.rows.slice(0, o.maxRequests ?? t.rows.length);
  return { trace: t, plan: null, rows, sessions: null, needsSynth };
}

/** Whether these options replay a trace on its own times (so --replay-speed, not a rate, sets the load). */
export function isTimedReplay(o: BenchOptions): boolean {
  return loadTraceMode(o)?.plan != null;
}

export interface Resolved {
  baseUrl: string;
  endpoint: Endpoint;
  numPrompts: number | null;
  durationMs: number | null;
  rate: number;
  burstiness: number;
  concurrency: number | null;
  maxConcurrency: number | null;
  seed: number;
  warmup: number;
  percentiles: number[];
  /** An explicit open-loop schedule (BenchOptions.arrivalsMs), or null for the rate's. */
  arrivals: Float64Array | null;
}

/** Checks option combinations; throws UsageError for contradictions. */
export function resolveOptions(o: BenchOptions): Resolved {
  const rate = o.requestRate ?? Number.POSITIVE_INFINITY;
  if (!(rate > 0)) throw new UsageError(`--request-rate must be > 0 (or inf), got ${rate}`);
  const burstiness = o.burstiness ?? 1;
  if (!(burstiness > 0)) throw new UsageError(`--burstiness must be > 0, got ${burstiness}`);
  if (o.burstiness !== undefined && o.burstiness !== 1 && rate === Number.POSITIVE_INFINITY)
    throw new UsageError("--burstiness needs a finite --request-rate");
  if (o.concurrency !== undefined && rate !== Number.POSITIVE_INFINITY)
    throw new UsageError("--concurrency (closed loop) and --request-rate (open loop) contradict each other", {
      hint: "use --request-rate with --max-concurrency for a capped open loop",
    });
  if (o.concurrency !== undefined && o.maxConcurrency !== undefined)
    throw new UsageError("give --concurrency (closed loop) or --max-concurrency (open-loop cap), not both");
  for (const [n, v] of [
    ["--concurrency", o.concurrency],
    ["--max-concurrency", o.maxConcurrency],
  ] as const)
    if (v !== undefined && !(Number.isInteger(v) && v >= 1 && v <= MAX_REQUESTS))
      throw new UsageError(`${n} expects an integer in [1, ${MAX_REQUESTS}], got ${v}`);
  if (o.numPrompts !== undefined && o.durationMs !== undefined)
    throw new UsageError("give --num-prompts or --duration, not both");
  if (
    o.numPrompts !== undefined &&
    !(Number.isInteger(o.numPrompts) && o.numPrompts >= 1 && o.numPrompts <= MAX_REQUESTS)
  )
    throw new UsageError(`--num-prompts expects an integer in [1, ${MAX_REQUESTS}], got ${o.numPrompts}`);
  if (o.durationMs !== undefined && !(o.durationMs > 0)) throw new UsageError("--duration must be > 0");
  if (o.durationMs !== undefined && o.concurrency === undefined && rate === Number.POSITIVE_INFINITY)
    throw new UsageError("--duration needs --concurrency (closed loop) or a finite --request-rate");
  const percentiles = o.percentiles ?? [99];
  for (const p of percentiles)
    if (!(p > 0 && p <= 100)) throw new UsageError(`percentiles must be in (0, 100], got ${p}`);
  const warmup = o.warmup ?? 0;
  if (!(Number.isInteger(warmup) && warmup >= 0 && warmup <= MAX_REQUESTS))
    throw new UsageError(`--warmup expects an integer in [0, ${MAX_REQUESTS}], got ${warmup}`);
  let numPrompts: number | null = o.numPrompts ?? null;
  let durationMs: number | null = o.durationMs ?? null;
  const arrivals = o.arrivalsMs ? checkArrivals(o) : null;
  if (arrivals) numPrompts = arrivals.length;
  if (numPrompts === null && durationMs === null) numPrompts = 100;
  if (durationMs !== null && rate !== Number.POSITIVE_INFINITY) {
    numPrompts = requestsForDuration(durationMs, rate);
    // Every arrival is drawn up front, so the product is a request count like --num-prompts.
    if (numPrompts > MAX_REQUESTS)
      throw new UsageError(
        `--duration × --request-rate is ${numPrompts} requests, more than the ${MAX_REQUESTS} one run keeps`,
        { hint: "shorten --duration or lower --request-rate" },
      );
    durationMs = null;
  }
  // The open loop's last arrival is at N / rate (vLLM's rescale): a schedule past the run's bound never ends.
  if (!arrivals && o.concurrency === undefined && rate !== Number.POSITIVE_INFINITY && numPrompts !== null) {
    const span = (numPrompts * 1000) / rate;
    if (!(span <= MAX_RUN_MS))
      throw new UsageError(
        `--request-rate ${rate} spreads ${numPrompts} request${numPrompts === 1 ? "" : "s"} over ${spanText(span)}, past ${RUN_BOUND_TEXT}`,
        { hint: "raise --request-rate, or send fewer requests (--num-prompts, --duration)" },
      );
  }
  const endpoint = o.endpoint ?? "/v1/completions";
  if (endpoint !== "/v1/completions" && endpoint !== "/v1/chat/completions")
    throw new UsageError(`--endpoint must be /v1/completions or /v1/chat/completions, got ${endpoint}`);
  let baseUrl: string;
  try {
    const u = new URL(o.baseUrl);
    if (u.protocol !== "http:" && u.protocol !== "https:") throw new Error("not http");
    baseUrl = o.baseUrl.replace(/\/+$/, "");
  } catch {
    throw new UsageError(`--base-url is not an http(s) URL: ${o.baseUrl}`);
  }
  return {
    baseUrl,
    endpoint,
    numPrompts,
    durationMs,
    // A given schedule's mean rate, for the result's setup.
    rate: arrivals
      ? arrivals[arrivals.length - 1]! > 0
        ? (arrivals.length * 1000) / arrivals[arrivals.length - 1]!
        : Number.POSITIVE_INFINITY
      : rate,
    burstiness,
    concurrency: o.concurrency ?? null,
    maxConcurrency: o.maxConcurrency ?? null,
    seed: o.seed ?? 0,
    warmup,
    percentiles,
    arrivals,
  };
}

/** An explicit schedule replaces --request-rate, --num-prompts and --duration: it must stand alone and be ascending. */
function checkArrivals(o: BenchOptions): Float64Array {
  const a = Float64Array.from(o.arrivalsMs!);
  if (
    o.concurrency !== undefined ||
    o.requestRate !== undefined ||
    o.numPrompts !== undefined ||
    o.durationMs !== undefined
  )
    throw new UsageError(
      "an explicit arrival schedule replaces --concurrency, --request-rate, --num-prompts and --duration",
    );
  if (a.length < 1 || a.length > MAX_REQUESTS)
    throw new UsageError(`an arrival schedule needs 1 to ${MAX_REQUESTS} times, got ${a.length}`);
  for (let i = 0; i < a.length; i++)
    if (!(Number.isFinite(a[i]!) && a[i]! >= 0 && (i === 0 || a[i]! >= a[i - 1]!)))
      throw new UsageError(`arrival schedule: time ${i} (${a[i]} ms) is not finite, ≥ 0 and ≥ the one before`);
  if (a[a.length - 1]! > MAX_RUN_MS)
    throw new UsageError(
      `arrival schedule: its last time (${spanText(a[a.length - 1]!)} after the start) is past ${RUN_BOUND_TEXT}`,
    );
  return a;
}

/**
 * Worker threads for a run: `--workers N` within the cores, auto from the streams; never more than there
 * are streams or requests to give them (a thread that sends nothing still costs its start-up), and at most
 * MAX_STREAMS_PER_WORKER streams on each.
 */
export function workerCount(r: Resolved, asked: number | "auto" | undefined, cores = availableParallelism()): number {
  return workerChoice(r, asked, cores).workers;
}

/** workerCount and, when auto chose, why (printed with the run's client health). */
export function workerChoice(
  r: Resolved,
  asked: number | "auto" | undefined,
  cores = availableParallelism(),
): { workers: number; note?: string } {
  const explicit = asked !== undefined && asked !== "auto";
  if (explicit) checkWorkers(asked, cores);
  // Streams open at once: the users, the cap, or every request when an infinite rate sends them together.
  const [streams, flag] =
    r.concurrency !== null
      ? [r.concurrency, "--concurrency"]
      : r.maxConcurrency !== null
        ? [r.maxConcurrency, "--max-concurrency"]
        : r.rate === Number.POSITIVE_INFINITY && r.numPrompts !== null
          ? [r.numPrompts, "--num-prompts"]
          : [1, ""];
  const auto = explicit ? null : autoWorkersChoice(streams, r.baseUrl, cores);
  const chosen = auto ? auto.workers : (asked as number);
  if (flag) checkStreams(streams, chosen, flag, cores);
  const work = Math.min(r.concurrency ?? Number.POSITIVE_INFINITY, r.numPrompts ?? Number.POSITIVE_INFINITY);
  return { workers: Math.max(1, Math.min(chosen, work)), note: auto?.why };
}

/** Finds the served model (first of /v1/models); unreachable → TargetError. */
export async function resolveModel(
  client: StreamClient,
  given: string | undefined,
  timeoutMs: number,
): Promise<string> {
  const res = await client.get("/v1/models", timeoutMs);
  if (given) return given;
  if (res.status !== 200) {
    const said = errorBodyMessage(res.body);
    // A refused key is not fixed by naming the model: the completions would be refused the same way.
    const auth = res.status === 401 || res.status === 403;
    throw new TargetError(
      `GET /v1/models answered HTTP ${res.status}${said ? `: ${said}` : ""}${auth ? "" : "; pass --model"}`,
      {
        status: res.status,
        hint: keyHint(res.status, client.sendsKey),
      },
    );
  }
  let list: unknown;
  try {
    list = JSON.parse(res.body);
  } catch {
    const t = res.body.trim();
    const seen = !t ? "an empty body" : /^<(!doctype|html)/i.test(t) ? "an HTML page" : "text that is not JSON";
    throw new TargetError(`GET /v1/models answered ${seen}, not a model list; pass --model`, {
      hint: "is --base-url an OpenAI-compatible server (vLLM, SGLang, TGI, llama.cpp)?",
    });
  }
  const id = (list as { data?: Array<{ id?: unknown }> })?.data?.[0]?.id;
  if (typeof id === "string") return id;
  throw new TargetError("GET /v1/models listed no model; pass --model");
}

async function scrape(client: StreamClient): Promise<Totals | null> {
  try {
    const r = await client.get("/metrics", 3000);
    if (r.status !== 200) return null;
    return totalsFromText(r.body);
  } catch {
    return null;
  }
}

/** Counting semaphore for --max-concurrency. */
class Slots {
  private free: number;
  private readonly waiters: Array<() => void> = [];
  constructor(n: number) {
    this.free = n;
  }
  acquire(): Promise<void> | null {
    if (this.free > 0) {
      this.free--;
      return null;
    }
    return new Promise((r) => this.waiters.push(r));
  }
  release(): void {
    const w = this.waiters.shift();
    if (w) w();
    else this.free++;
  }
  drain(): void {
    for (const w of this.waiters.splice(0)) w();
  }
}

/**
 * Throws InputError unless the file `path` can be created or overwritten (nothing is created); with
 * `dir`, unless files can be created in the directory `path`.
 */
export function checkWritable(path: string, what: string, dir = false): void {
  let reason: string | null = null;
  try {
    if (dir) {
      if (!existsSync(path)) reason = "no such directory";
      else if (!statSync(path).isDirectory()) reason = "not a directory";
      else accessSync(path, constants.W_OK);
    } else if (existsSync(path)) {
      if (statSync(path).isDirectory()) reason = "is a directory";
      else accessSync(path, constants.W_OK);
    } else {
      const parent = dirname(resolve(path));
      if (!existsSync(parent)) reason = `no such directory ${parent}`;
      else accessSync(parent, constants.W_OK);
    }
  } catch (e: any) {
    reason = e?.code === "EACCES" ? "permission denied" : (e?.message ?? String(e));
  }
  if (reason) throw new InputError(`${path}: cannot write ${what}: ${reason}`);
}

/**
 * The first wave's per-stream state (client.prepare), before the clock: chunk scratch sized for the
 * longest target output among the first `streams` requests (+ role, usage and finish chunks).
 */
export function prepareStreams(client: StreamClient, workload: Workload, streams: number): void {
  const n = Math.min(streams, PRECONNECT_MAX);
  const size = Number.isFinite(workload.size) ? workload.size : Number.POSITIVE_INFINITY;
  let longest = 0;
  for (let i = 0; i < n && size > 0; i++) longest = Math.max(longest, workload.get(i % size).outputLen);
  client.prepare(n, longest > 0 ? longest + 4 : 0);
}

/** Connections opened before a run's clock starts, at most. */
const PRECONNECT_MAX = 1024;
/** Closed-loop users started per event-loop turn. */
const START_BATCH = 32;

export interface Phase {
  records: RequestRecord[];
  durationMs: number;
  interrupted: boolean;
  /** A request's body size in bytes by its index (open loop: the bodies built before the clock). */
  bodyBytes?: (index: number) => number;
}

/** Runs one benchmark. Returns partial results on interrupt (result.partial); throws typed errors. */
export async function runBench(opts: BenchOptions, deps: BenchDeps = {}): Promise<BenchResult> {
  // Trace files are read and checked before anything is sent (bad rows are exit 2, not a half-run).
  const tm = loadTraceMode(opts);
  const r = resolveOptions(
    tm?.plan
      ? { ...opts, durationMs: undefined, numPrompts: tm.plan.rows.length, requestRate: replayRate(tm.plan) }
      : tm?.sessions
        ? { ...opts, durationMs: undefined, numPrompts: undefined, endpoint: "/v1/chat/completions" }
        : tm?.rows
          ? { ...opts, numPrompts: opts.numPrompts ?? (opts.durationMs === undefined ? tm.rows.length : undefined) }
          : opts,
  );
  if (tm?.sessions && (opts.warmup ?? 0) > 0)
    throw new UsageError("--warmup sends single requests; sessions have no warm-up (run a short session first)");
  if (tm && !tm.plan && opts.workers !== undefined && opts.workers !== "auto" && opts.workers > 1)
    throw new UsageError(
      tm.sessions
        ? "sessions run on one event loop (a session's turns go in order): drop --workers"
        : "a trace's rows on a generated schedule run on one event loop: drop --workers",
    );
  // Threads and streams are bounded before anything is sent; a replay's bursts may be sent by several loops.
  const { workers, note: workersNote } = tm?.plan
    ? replayWorkers(tm.plan, r, opts.workers)
    : tm
      ? { workers: 1, note: undefined }
      : workerChoice(r, opts.workers);
  let workload: Workload = tm
    ? { name: opts.dataset ?? "jsonl", size: 0, get: () => ({ inputLen: 0, outputLen: 0 }) }
    : createWorkload({ ...opts, seed: r.seed });
  const connections = r.concurrency ?? r.maxConcurrency ?? null;
  const client = new StreamClient(r.baseUrl, {
    connections,
    connectTimeoutMs: opts.connectTimeoutMs ?? 5000,
    transport: opts.transport,
    stallTimeoutMs: opts.stallTimeoutMs ?? 60_000,
    apiKey: opts.apiKey,
  });
  let writer: JsonlWriter | null = null;
  let tel: TelemetrySession | null = null;
  let telemetry: RunTelemetry | null = null;
  try {
    // Output paths are checked before anything is sent: a bad one must not cost a whole run's results.
    if (opts.saveResult) checkWritable(opts.saveResult, "result");
    if (opts.recordsPath) writer = new JsonlWriter(opts.recordsPath);
    const model = await resolveModel(client, opts.model, opts.connectTimeoutMs ?? 5000);
    // A telemetry source that cannot start fails here (exit 3), before anything is measured.
    tel = await openTelemetry(opts.telemetry, {
      baseUrl: r.baseUrl,
      embeddedSim: opts.embeddedSim,
      signal: deps.signal,
      onProgress: deps.onTelemetryNote,
    });
    // A trace's output lengths are the point: ignore_eos unless asked otherwise (servers that do not know it ignore it).
    const ignoreEos = opts.ignoreEos ?? (tm ? true : undefined);
    const bodyOpts = {
      model,
      endpoint: r.endpoint,
      ignoreEos,
      continuousUsage: opts.continuousUsage,
      extraBody: opts.extraBody,
      requestIdPrefix: opts.requestIdPrefix,
      requestIdFields: opts.requestIdFields,
    };
    const setup: BenchSetup = {
      date: stamp(new Date()),
      endpoint_type: r.endpoint === "/v1/chat/completions" ? "openai-chat" : "openai",
      backend: r.endpoint === "/v1/chat/completions" ? "openai-chat" : "openai",
      label: opts.label ?? null,
      model_id: model,
      tokenizer_id: model,
      num_prompts: r.numPrompts ?? 0,
      request_rate: r.rate === Number.POSITIVE_INFINITY ? "inf" : r.rate,
      burstiness: r.burstiness,
      max_concurrency: r.maxConcurrency ?? r.concurrency,
      concurrency: r.concurrency,
      base_url: r.baseUrl,
      endpoint: r.endpoint,
      dataset_name: workload.name,
      seed: r.seed,
      warmup: r.warmup,
    };
    let calibration: Calibration | null = null;
    let phaseBodyBytes: ((index: number) => number) | undefined;
    let sessions: Session[] | null = null;
    if (tm) {
      let synth: PromptSynth | null = null;
      if (tm.needsSynth) {
        // Prompts are sized once, before the measured window (a few /tokenize calls and probes).
        const counter = await findTokenizer(r.baseUrl, model, { apiKey: opts.apiKey, timeoutMs: 10_000 });
        const probe = async (text: string) => {
          const rec = blankRecord();
          const body = requestBody({ prompt: text, inputLen: 0, outputLen: 1 }, { ...bodyOpts, ignoreEos: false });
          await client.stream(r.endpoint, body, rec, performance.now());
          return rec.errorClass === null && rec.promptTokens >= 0 ? rec.promptTokens : null;
        };
        calibration = await calibrate(counter, probe);
        synth = new PromptSynth(calibration, r.seed);
      }
      const name = workload.name;
      if (tm.sessions) sessions = tm.sessions(synth!);
      else workload = traceWorkload(name, tm.rows!, synth);
    }
    writer?.header({ type: "header", ...setup });
    const w = writer;
    const onRecord = (rec: RequestRecord) => {
      if (w) w.write(recordToJson(rec));
    };
    const ctx: RunCtx = {
      client,
      workload,
      bodyOpts,
      endpoint: r.endpoint,
      signal: deps.signal,
      graceMs: deps.graceMs ?? 5000,
      onRecord,
      liveChunks: w !== null && w !== undefined,
      onProgress: deps.onProgress,
      stopOnStall: opts.stopOnStall,
      stopAfterFailures: opts.stopAfterFailures,
      instrumentSpec: deps.instrument
        ? { probePort: deps.instrument.probePort, heap: deps.instrument.heap, collect: deps.instrument.collect }
        : undefined,
      onOrigin: deps.onOrigin,
    };

    // Warmup: closed loop, excluded from every metric; a 4xx here aborts like on the first request.
    const warmRecs: RequestRecord[] = [];
    if (r.warmup > 0) {
      const ph = await closedLoop(ctx, {
        users: Math.min(r.warmup, r.concurrency ?? r.maxConcurrency ?? r.warmup),
        count: r.warmup,
        durationMs: null,
        warmup: true,
        indexBase: 1_000_000_000,
      });
      warmRecs.push(...ph.records);
      if (ph.interrupted) return finish(true, warmRecs, 0);
    }

    const before = opts.noServerMetrics ? null : await scrape(client);
    const edge = (e: "start" | "end") => {
      if (e === "start") tel?.start();
      else tel?.end();
      deps.onMeasureEdge?.(e);
    };
    const eld = monitorEventLoopDelay({ resolution: ELD_RESOLUTION_MS });
    eld.enable();
    let cpu0 = process.cpuUsage();
    let phase: Phase;
    let shardEld: ShardEld[] | null = null;
    let turnOf: Map<number, number> | null = null;
    let notSent: SessionsRun | null = null;
    if (workers === 1) prepareStreams(client, workload, connections ?? r.numPrompts ?? 1);
    const inst = deps.instrument && workers === 1 ? new LoopInstrument(0, deps.instrument) : null;
    if (inst) {
      await inst.ready();
      ctx.instrument = inst;
    }
    if (workers > 1) {
      // A replay's bodies are built here, once, and dealt to the shards with their times.
      let replay: { times: Float64Array; bodies: Array<{ p: Prompt; body: string | Buffer }> } | undefined;
      if (tm?.plan) {
        const n = tm.plan.timesMs.length;
        replay = { times: tm.plan.timesMs, bodies: prebuildBodies(ctx, n, (i) => i)! };
        ctx.workload.release?.();
      }
      const sh = await shardedPhase(ctx, r, opts, workers, replay, () => {
        // The threads are up: the measured window starts now.
        cpu0 = process.cpuUsage();
        eld.reset();
        edge("start");
      });
      phase = sh;
      shardEld = sh.eld;
      for (const l of sh.loops) deps.instrument?.onLoop(l);
    } else if (r.concurrency !== null) {
      edge("start");
      phase = await closedLoop(ctx, {
        users: r.concurrency,
        count: r.numPrompts,
        durationMs: r.durationMs,
        warmup: false,
        indexBase: 0,
        // Connecting, prepared stream state and request bodies are setup, as the floor's are (delay.ts).
        onClockStart: () => {
          cpu0 = process.cpuUsage();
          eld.reset();
        },
      });
    } else if (sessions) {
      edge("start");
      const sp = opts.sessions;
      const ph = await sessionPhase(ctx, sessions, {
        concurrency: sp?.concurrency ?? r.maxConcurrency ?? undefined,
        thinkMs: sp && "thinkMs" in sp ? sp.thinkMs : undefined,
        thinkDist: sp?.source === "synthetic" ? sp.thinkDist : undefined,
        seed: r.seed,
      });
      phase = ph;
      turnOf = ph.turnOf;
      notSent = ph;
    } else {
      edge("start");
      phase = await openLoop(ctx, {
        times: tm?.plan
          ? tm.plan.timesMs
          : (r.arrivals ?? arrivalTimesMs(r.numPrompts!, { rate: r.rate, burstiness: r.burstiness, seed: r.seed })),
        cap: r.maxConcurrency,
        // A replay's first burst goes out on connections opened before the clock; the pacer readies the
        // later ones' in the gaps before them (openLoop).
        preconnect: tm?.plan ? Math.min(burstEnd(tm.plan.timesMs, 0), r.maxConcurrency ?? PRECONNECT_MAX) : undefined,
        // Prompt synthesis and body building are not the client's load during the run.
        onClockStart: () => {
          cpu0 = process.cpuUsage();
          eld.reset();
        },
      });
    }
    edge("end");
    phaseBodyBytes = phase.bodyBytes;
    const cpu = process.cpuUsage(cpu0);
    if (inst) {
      ctx.instrument = undefined;
      deps.instrument!.onLoop(inst.report());
    }
    eld.disable();
    const after = before ? await scrape(client) : null;
    if (tel) {
      let tokens = 0;
      for (const x of phase.records) if (!x.warmup && x.errorClass === null) tokens += x.outputTokens;
      // The sim's exporter reports power per wall second: a sim s× faster draws s× the modelled watts.
      const scale = before && after ? serverDelta(before, after).time_scale : 1;
      telemetry = await tel.finish({ tokens, timeScale: scale });
      tel = null;
    }

    const cpuSeconds = (cpu.user + cpu.system) / 1e6;
    const wallS = phase.durationMs / 1000;
    const util = wallS > 0 ? cpuSeconds / wallS : 0;
    // The histogram holds whole timer intervals; the delay is what exceeds the resolution.
    const merged = shardEld ? mergeEld(shardEld) : null;
    const has = merged ? merged.totalCount > 0 : eld.count > 0;
    const d = (ns: number) => (has ? Math.max(0, ns / 1e6 - ELD_RESOLUTION_MS) : 0);
    const eldMs = merged
      ? {
          mean: d(merged.mean),
          p50: d(merged.getValueAtPercentile(50)),
          p99: d(merged.getValueAtPercentile(99)),
          max: d(merged.maxValue),
        }
      : { mean: d(eld.mean), p50: d(eld.percentile(50)), p99: d(eld.percentile(99)), max: d(eld.max) };
    const reasons: string[] = [];
    if (util >= 0.9) reasons.push(`client CPU at ${(util * 100).toFixed(0)} % of one core`);
    if (eldMs.p99 > 10) reasons.push(`event-loop delay p99 ${eldMs.p99.toFixed(1)} ms`);
    // Socket reads that carried stream data (messages of one read share its read id).
    let reads = 0;
    for (const rec of phase.records) {
      const rd = rec.chunks.read;
      for (let k = 0; k < rd.length; k++) if (k === 0 || rd[k] !== rd[k - 1]) reads++;
    }
    const health: ClientHealth = {
      eventLoopDelayMs: eldMs,
      cpuSeconds,
      reads,
      cpuPerReadUs: reads > 0 ? (cpuSeconds * 1e6) / reads : 0,
      cpuUtilization: util,
      // Nothing completed: no number here could be the client's ceiling.
      saturated: reasons.length > 0 && phase.records.some((x) => x.errorClass === null),
      reason: reasons.length ? reasons.join("; ") : undefined,
      workers,
      workersNote,
      transport: client.transport,
      nodeFlags: [...process.execArgv],
    };
    return finish(phase.interrupted, [...warmRecs, ...phase.records], phase.durationMs, health, before, after);

    function finish(
      partial: boolean,
      recs: RequestRecord[],
      durationMs: number,
      health?: ClientHealth,
      before?: Totals | null,
      after?: Totals | null,
    ): BenchResult {
      const m = computeMetrics(recs, { durationMs, percentiles: r.percentiles, goodput: opts.goodput });
      const warnings = [...m.warnings];
      const h: ClientHealth = health ?? {
        eventLoopDelayMs: { mean: 0, p50: 0, p99: 0, max: 0 },
        cpuSeconds: 0,
        reads: 0,
        cpuPerReadUs: 0,
        cpuUtilization: 0,
        saturated: false,
        workers: 1,
      };
      if (h.saturated)
        warnings.unshift(
          `the client was saturated (${h.reason}): these numbers may show its ceiling, not the server's`,
        );
      if (partial) warnings.unshift("interrupted: partial results (only requests that finished are included)");
      const unsent = notSent ? notSentText(notSent.notSent, notSent.sessionsEnded) : null;
      if (unsent) warnings.push(`${unsent}; the summary covers the turns sent`);
      setup.num_prompts = recs.filter((x) => !x.warmup).length;
      const result: BenchResult = {
        setup,
        summary: m.summary,
        perRequest: m.perRequest,
        requests: recs,
        warnings,
        client: h,
        server: before && after ? serverDelta(before, after) : null,
        serverTimings: summarizeServerTimings(recs),
        schedule: tm?.plan
          ? scheduleSummary(recs, tm.plan, "trace", phaseBodyBytes)
          : sessions
            ? scheduleSummary(recs, { speed: opts.replaySpeed ?? 1, startOffsetMs: 0, traceSpanMs: 0 }, "sessions")
            : r.concurrency === null
              ? scheduleSummary(recs, { speed: 1, startOffsetMs: 0, traceSpanMs: 0 }, "generated")
              : null,
        replay: tm
          ? {
              dataset: opts.dataset ?? "jsonl",
              path: opts.datasetPath ?? null,
              requests:
                tm.plan?.rows.length ?? tm.rows?.length ?? sessions?.reduce((a, x) => a + x.turns.length, 0) ?? 0,
              sessions: sessions?.length ?? null,
              sent: recs.filter((x) => !x.warmup).length,
              notSent: notSent?.notSent ?? null,
              sessionsEnded: notSent?.sessionsEnded ?? null,
              calibration: calibration ? { ...calibration, words: calibration.words.length } : null,
              lengths: sessions ? { ...lengthChecks(recs), prompt: null } : lengthChecks(recs),
              ignoreEos: ignoreEos ?? false,
            }
          : null,
        turns: turnOf ? turnTable(recs, turnOf) : null,
        telemetry,
        partial,
        percentiles: r.percentiles,
        percentileMetrics: opts.percentileMetrics ?? ["ttft", "tpot", "itl"],
      };
      if (opts.saveResult) {
        try {
          writeFileSync(
            opts.saveResult,
            `${JSON.stringify(toVllmJson(result, opts.saveDetailed ?? false), null, 2)}\n`,
          );
        } catch (e: any) {
          throw new InputError(`${opts.saveResult}: cannot write result: ${e?.message ?? e}`);
        }
      }
      return result;
    }
  } finally {
    // A run that failed or was interrupted before its window closed still stops the source.
    if (tel) await tel.abandon();
    if (writer) await writer.close();
    await client.close();
  }
}

/**
 * The measured phase spread over `w` worker threads (src/load/shard.ts). The main thread keeps the
 * accounting (progress, the rejected-first-request rule, records, JSONL) and the common clock.
 */
async function shardedPhase(
  ctx: RunCtx,
  r: Resolved,
  opts: BenchOptions,
  w: number,
  replay: { times: Float64Array; bodies: Array<{ p: Prompt; body: string | Buffer }> } | undefined,
  onReady: () => void,
): Promise<Phase & { eld: ShardEld[]; loops: LoopReport[] }> {
  const share = (total: number, k: number) => Math.floor(total / w) + (k < total % w ? 1 : 0);
  const base = {
    baseUrl: r.baseUrl,
    workload: { ...opts, seed: r.seed },
    bodyOpts: ctx.bodyOpts,
    endpoint: r.endpoint,
    graceMs: ctx.graceMs,
    instrument: ctx.instrumentSpec ?? null,
  };
  const client = (connections: number | null) => ({
    connections,
    connectTimeoutMs: opts.connectTimeoutMs ?? 5000,
    stallTimeoutMs: opts.stallTimeoutMs ?? 60_000,
    apiKey: opts.apiKey,
    transport: opts.transport,
  });
  const inits: ShardInit[] = [];
  if (r.concurrency !== null) {
    const shared = new Int32Array(new SharedArrayBuffer(4));
    for (let k = 0; k < w; k++) {
      const users = share(r.concurrency, k);
      if (users > 0)
        inits.push({
          ...base,
          shard: k,
          client: client(users),
          closed: { users, count: r.numPrompts, durationMs: r.durationMs, shared },
          open: null,
        });
    }
  } else {
    const times =
      replay?.times ??
      r.arrivals ??
      arrivalTimesMs(r.numPrompts!, { rate: r.rate, burstiness: r.burstiness, seed: r.seed });
    for (let k = 0; k < w; k++) {
      const m = share(times.length, k);
      const t = new Float64Array(m);
      const idx = new Int32Array(m);
      for (let j = 0; j < m; j++) {
        idx[j] = k + j * w;
        t[j] = times[k + j * w]!;
      }
      // A --max-concurrency cap is split evenly between shards (arrivals are dealt round-robin).
      const cap = r.maxConcurrency !== null ? Math.max(1, share(r.maxConcurrency, k)) : null;
      const open: NonNullable<ShardInit["open"]> = { times: t, indices: idx, cap };
      if (replay) {
        open.bodies = Array.from(idx, (i) => {
          const b = replay.bodies[i]!;
          return { inputLen: b.p.inputLen, outputLen: b.p.outputLen, body: b.body };
        });
        // Its first burst's connections before the clock; the pacer readies the later ones' in the gaps.
        open.preconnect = m ? Math.min(burstEnd(t, 0), cap ?? PRECONNECT_MAX) : 0;
      }
      inits.push({ ...base, shard: k, client: client(cap), closed: null, open });
    }
  }
  // Sizes before the bodies move to the shards (transferred, they are gone here).
  const sizes = replay?.bodies.map((b) => Buffer.byteLength(b.body));
  let fatal: Error | null = null;
  let st: RunState | null = null;
  const shards = await startShards(inits, {
    onRecord: (rec) => {
      rec.chunks = ctx.client.arena.putColumns(rec.chunks);
      st!.accept(rec);
    },
    onFatal: (e) => {
      fatal ??= e.name === "TargetError" ? new TargetError(e.message, { hint: (e as any).hint }) : e;
      st?.stop();
    },
  });
  st = new RunState(ctx, r.numPrompts);
  const state = st;
  ctx.onOrigin?.(state.originPerf);
  onReady();
  const originHrMs = Number(process.hrtime.bigint()) / 1e6 - (performance.now() - state.originPerf);
  void state.whenStopped().then(() => {
    if (state.fatal || fatal) shards.abort("aborted after a rejected request");
    else shards.stop();
  });
  const res = await shards.go(originHrMs);
  if (fatal && !state.fatal) state.fatal = fatal;
  state.close();
  return {
    records: state.records.materialize(),
    durationMs: res.durationMs,
    interrupted: state.interrupted || res.interrupted,
    eld: res.eld,
    loops: res.loops,
    bodyBytes: sizes ? (index) => sizes[index] ?? 0 : undefined,
  };
}

/** Worker threads for a timed replay: `--workers N` within the cores, or auto (replayWorkersChoice). */
function replayWorkers(
  plan: ReplayPlan,
  r: Resolved,
  asked: number | "auto" | undefined,
  cores = availableParallelism(),
): { workers: number; note?: string } {
  const n = plan.timesMs.length;
  if (asked !== undefined && asked !== "auto") return { workers: Math.min(checkWorkers(asked, cores), n) };
  let most = 0;
  for (let i = 0; i < n; ) {
    const j = burstEnd(plan.timesMs, i);
    most = Math.max(most, j - i);
    i = j;
  }
  const c = replayWorkersChoice(most, r.maxConcurrency ?? 1, r.baseUrl, cores);
  return { workers: Math.max(1, Math.min(c.workers, n)), note: c.why };
}

export interface RunCtx {
  client: StreamClient;
  workload: Workload;
  bodyOpts: Parameters<typeof requestBody>[1];
  endpoint: Endpoint;
  signal?: AbortSignal;
  graceMs: number;
  onRecord: (r: RequestRecord) => void;
  onProgress?: (p: BenchProgress) => void;
  /** False in a shard: its records go to the main thread, which keeps them. */
  keepRecords?: boolean;
  /** A stall before any success is fatal (BenchOptions.stopOnStall). */
  stopOnStall?: boolean;
  /** This many failures before any success end the run (BenchOptions.stopAfterFailures). */
  stopAfterFailures?: number;
  /** This loop's instruments: the run's clock start opens their window, its close ends it. */
  instrument?: LoopInstrument;
  /** What each worker thread measures in its own loop (sharded runs). */
  instrumentSpec?: InstrumentSpec;
  /** Hears the measured phase's origin (BenchDeps.onOrigin). */
  onOrigin?: (originPerf: number) => void;
  /**
   * False when nothing reads a record's chunks during the run (no records file, not a shard): they stay
   * where the stream left them in the arena, and the records kept say where (no views per request).
   */
  liveChunks?: boolean;
}

/** Shared bookkeeping for both loops: 4xx-on-first-request abort, progress, interrupt handling. */
class RunState {
  /** Finished requests, column-wise (see RecordStore): nothing per request survives into the old generation. */
  readonly records: RecordStore;
  stopped = false;
  interrupted = false;
  fatal: Error | null = null;
  done = 0;
  failed = 0;
  aborted = 0;
  ok = 0;
  outTokens = 0;
  inFlight = 0;
  private launched = 0;
  private idleWaiter: (() => void) | null = null;
  readonly originPerf: number;
  private timer: NodeJS.Timeout | null = null;
  private readonly stopWaiters: Array<() => void> = [];
  private onAbort = () => this.interrupt();

  constructor(
    readonly ctx: RunCtx,
    readonly total: number | null,
    originPerf?: number,
  ) {
    // Before the clock: an instrument that collects garbage as its window opens delays no send.
    ctx.instrument?.begin();
    this.originPerf = originPerf ?? performance.now();
    this.records = new RecordStore(ctx.client.arena, total ?? undefined);
    if (ctx.signal?.aborted) this.interrupt();
    ctx.signal?.addEventListener("abort", this.onAbort, { once: true });
    if (ctx.onProgress) {
      // ≤ 10 Hz and never from the token path.
      this.timer = setInterval(() => ctx.onProgress!(this.progress()), 100);
      this.timer.unref();
    }
  }

  nowMs(): number {
    return performance.now() - this.originPerf;
  }

  progress(): BenchProgress {
    return {
      done: this.done,
      failed: this.failed,
      aborted: this.aborted,
      inFlight: this.inFlight,
      total: this.total,
      outputTokens: this.outTokens,
      elapsedMs: this.nowMs(),
    };
  }

  /** Resolves when the run is stopped (interrupt or fatal error). */
  whenStopped(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    return new Promise((r) => this.stopWaiters.push(r));
  }

  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    for (const w of this.stopWaiters.splice(0)) w();
  }

  interrupt(): void {
    this.interrupted = true;
    this.stop();
    // Wait up to graceMs for in-flight streams, then cut them.
    const t = setTimeout(() => this.ctx.client.abortAll("interrupted"), this.ctx.graceMs);
    t.unref();
  }

  send(
    index: number,
    scheduledMs: number,
    createdMs: number,
    warmup: boolean,
    pre?: { p: Prompt; body: string | Buffer },
  ): Promise<RequestRecord> {
    return new Promise((resolve, reject) => {
      try {
        this.sendTo(index, scheduledMs, createdMs, warmup, pre, (r, block, at, n) => {
          if (r.chunks === NO_CHUNKS) r.chunks = this.ctx.client.arena.columns(block, at, n);
          resolve(r);
        });
      } catch (e) {
        reject(e);
      }
    });
  }

  /**
   * send() with a callback: `done` hears the record once it is counted and kept, possibly before sendTo
   * returns (a closed client fails at once). The closed and open loops use it: no promise per request.
   * Its chunks are NO_CHUNKS unless ctx.liveChunks (`done` gets their place in the arena).
   */
  sendTo(
    index: number,
    scheduledMs: number,
    createdMs: number,
    warmup: boolean,
    pre: { p: Prompt; body: string | Buffer } | undefined,
    done: StreamDone,
  ): void {
    const p =
      pre?.p ??
      this.ctx.workload.get(index % (Number.isFinite(this.ctx.workload.size) ? this.ctx.workload.size : Infinity));
    const rec = blankRecord();
    rec.index = index;
    rec.warmup = warmup;
    rec.scheduledMs = scheduledMs;
    rec.createdMs = createdMs;
    rec.targetInputLen = p.inputLen;
    rec.targetOutputLen = p.outputLen;
    this.inFlight++;
    try {
      this.ctx.client.streamTo(
        this.ctx.endpoint,
        pre?.body ?? requestBody(p, this.ctx.bodyOpts, index),
        rec,
        this.originPerf,
        (r, block, at, n) => {
          this.inFlight--;
          // Called from a socket's read: an error here must stop the run, not escape into the socket.
          try {
            if (this.ctx.liveChunks !== false) r.chunks = this.ctx.client.arena.columns(block, at, n);
            this.accept(r, block, at, n);
          } catch (e) {
            this.crash(e);
          }
          done(r, block, at, n);
        },
      );
    } catch (e) {
      this.inFlight--;
      throw e;
    }
  }

  /**
   * Fire-and-forget send for the open loop, which keeps no promise per request (a list of them would
   * keep every request's objects alive for the whole run, and each scavenge would copy them again).
   * `whenIdle()` resolves when all launched sends have finished; an error in one stops the run with it.
   */
  launch(run: Promise<unknown>): void {
    this.launched++;
    run.then(this.onLanded, this.onLaunchFailed);
  }

  /** launch(send(…)) without the promise. */
  launchSend(index: number, scheduledMs: number, createdMs: number, pre?: { p: Prompt; body: string | Buffer }): void {
    this.launched++;
    try {
      this.sendTo(index, scheduledMs, createdMs, false, pre, this.onLanded);
    } catch (e) {
      this.onLaunchFailed(e);
    }
  }

  private onLaunchFailed = (e: unknown) => {
    this.crash(e);
    this.onLanded();
  };

  /** Our own error mid-run: kept as the run's fatal error (close() throws it) and the run stopped. */
  crash(e: unknown): void {
    if (!this.fatal) this.fatal = e instanceof Error ? e : new Error(String(e));
    this.stop();
  }

  private onLanded = () => {
    this.launched--;
    if (this.launched === 0 && this.idleWaiter) this.idleWaiter();
  };

  whenIdle(): Promise<void> {
    if (this.launched === 0) return Promise.resolve();
    return new Promise((r) => {
      this.idleWaiter = () => {
        this.idleWaiter = null;
        r();
      };
    });
  }

  /** Counts a finished request, stops the run on a rejected first request, keeps and reports it. */
  /** `block`, `at`, `n`: where rec's chunks are in the client's arena, when rec.chunks may be NO_CHUNKS. */
  accept(rec: RequestRecord, block = -1, at = 0, n = 0): void {
    this.done++;
    if (rec.errorClass === null) {
      this.ok++;
      this.outTokens += rec.outputTokens;
    } else if (rec.errorClass === "aborted") {
      // Cut by us (interrupt, or the stop after a rejected first request): not a failure of the server.
      this.aborted++;
    } else {
      this.failed++;
      // A 4xx before any success means the request itself is wrong (model name, endpoint): stop now.
      // So does a refused connection before any success: the server is gone.
      if (this.ok === 0 && !this.fatal) {
        if (rec.status >= 400 && rec.status < 500 && rec.status !== 429 && rec.status !== 408)
          this.fatal = new TargetError(`the server rejected the request: ${rec.errorMessage}`, {
            status: rec.status,
            hint: keyHint(rec.status, this.ctx.client.sendsKey) ?? "check --model and --endpoint",
          });
        else if (rec.errorClass === "connect")
          this.fatal = new TargetError(`cannot connect to the server: ${rec.errorMessage}`, {
            hint: "is the server running? check its URL (--base-url)",
          });
        else if (rec.errorClass === "stall" && this.ctx.stopOnStall)
          this.fatal = new TargetError(`the server streamed no tokens: ${rec.errorMessage}`, {
            hint: "it accepts requests but sends no data; see its log (--stall-timeout sets the limit)",
          });
        if (this.fatal) {
          this.stop();
          this.ctx.client.abortAll("aborted after a rejected request");
        } else if (this.failed >= (this.ctx.stopAfterFailures ?? Number.POSITIVE_INFINITY) && !this.stopped) {
          this.stop();
          this.ctx.client.abortAll(`aborted: the first ${this.failed} requests all failed`);
        }
      }
    }
    if (this.ctx.keepRecords !== false) {
      if (block >= 0) this.records.addAt(rec, block, at, n);
      else this.records.add(rec);
    }
    this.ctx.onRecord(rec);
  }

  close(): void {
    // The reading is over: what follows (records materialized, the summary) is not the window's.
    this.ctx.instrument?.end();
    if (this.timer) clearInterval(this.timer);
    this.ctx.signal?.removeEventListener("abort", this.onAbort);
    if (this.ctx.onProgress) this.ctx.onProgress(this.progress());
    if (this.fatal) throw this.fatal;
  }
}

/**
 * How many connections a loop opens before its clock starts: one per user (closed loop), or enough for
 * the first ~100 ms of arrivals (open loop; at 1,000 req/s the handshakes of the first requests would
 * otherwise delay the sends scheduled right after them). More are opened on demand as before.
 */
export function preconnectCount(o: {
  closed?: { users: number; count: number | null };
  open?: { times: Float64Array; cap: number | null };
}): number {
  if (o.closed) return Math.min(o.closed.users, o.closed.count ?? o.closed.users, PRECONNECT_MAX);
  const t = o.open!.times;
  const n = t.length;
  const span = n > 1 ? t[n - 1]! - t[0]! : 0;
  const early = span > 0 ? Math.ceil((100 * n) / span) : n;
  return Math.min(n, early, o.open!.cap ?? n, PRECONNECT_MAX);
}

/** A connection readied for a burst must outlive its keep-alive limit by this much past the burst's time. */
const FRESH_MARGIN_MS = 1000;

/** Prebuilt request bodies stop here: beyond it, the closed loop builds each as it sends. */
const PREBUILD_MAX_BYTES = 64 * 1024 * 1024;

/** Bodies at least this long are kept UTF-8 encoded: sent without encoding, and outside the JS heap. */
const ENCODE_BODY_CHARS = 16 * 1024;

/** Request `index(i)` for i < count with its body, or null past `maxBytes` of bodies. */
function prebuildBodies(
  ctx: RunCtx,
  count: number,
  index: (i: number) => number,
  maxBytes = Number.POSITIVE_INFINITY,
): Array<{ p: Prompt; body: string | Buffer }> | null {
  const size = Number.isFinite(ctx.workload.size) ? ctx.workload.size : Number.POSITIVE_INFINITY;
  const out: Array<{ p: Prompt; body: string | Buffer }> = new Array(count);
  let bytes = 0;
  for (let i = 0; i < count; i++) {
    const p = ctx.workload.get(index(i) % size);
    const text = requestBody(p, ctx.bodyOpts, index(i));
    bytes += text.length * 2 + 200;
    if (bytes > maxBytes) return null;
    // A long prompt's text is in its body: only the lengths are kept beside it.
    out[i] =
      text.length >= ENCODE_BODY_CHARS
        ? { p: { inputLen: p.inputLen, outputLen: p.outputLen }, body: ownedUtf8(text) }
        : { p, body: text };
  }
  return out;
}

/** Closed loop: `users` workers, each sending back to back, until `count` requests or `durationMs`. */
export async function closedLoop(
  ctx: RunCtx,
  o: {
    users: number;
    count: number | null;
    durationMs: number | null;
    warmup: boolean;
    indexBase: number;
    shared?: Int32Array;
    originPerf?: number;
    /** Called as the clock starts, after connecting, building the bodies and opening the instruments' window. */
    onClockStart?: () => void;
  },
): Promise<Phase> {
  // (A shard's clock is the main thread's: it connects before it reports ready.)
  if (o.originPerf === undefined) await ctx.client.preconnect(preconnectCount({ closed: o }));
  // Bodies built before the clock, as the open loop's are (a shard's indices come from a shared counter).
  const pre =
    o.count !== null && !o.shared ? prebuildBodies(ctx, o.count, (i) => o.indexBase + i, PREBUILD_MAX_BYTES) : null;
  const st = new RunState(ctx, o.count, o.originPerf);
  if (!o.warmup) ctx.onOrigin?.(st.originPerf);
  // After RunState: its instrument's window (and a collection it may start with) opens before the clock.
  o.onClockStart?.();
  let next = 0;
  // Shards share one counter, so the run sends exactly `count` requests in all.
  const take = o.shared ? () => Atomics.add(o.shared!, 0, 1) : () => next++;
  const deadline = o.durationMs;
  // Each user sends its next request from the last one's callback: no promise or async frame per
  // request (they were most of the closed loop's garbage per request, inside the measured window).
  let live = 0;
  let failure: unknown = null;
  let allDone: () => void = () => {};
  const finished = new Promise<void>((r) => {
    allDone = r;
  });
  const quit = () => {
    if (--live === 0) allDone();
  };
  const user = () => {
    let inCall = false;
    let again = false;
    const next = (): void => {
      // A request that ends inside sendTo (a closed client) loops here instead of recursing.
      if (inCall) {
        again = true;
        return;
      }
      do {
        again = false;
        const now = st.nowMs();
        const i = st.stopped || failure !== null || (deadline !== null && now >= deadline) ? -1 : take();
        if (i < 0 || (o.count !== null && i >= o.count)) {
          quit();
          return;
        }
        inCall = true;
        try {
          st.sendTo(o.indexBase + i, now, now, o.warmup, pre?.[i], next);
        } catch (e) {
          // As before with a promise per user: the run fails at once, whatever is still in flight.
          failure ??= e;
          allDone();
          return;
        } finally {
          inCall = false;
        }
      } while (again);
    };
    live++;
    next();
  };
  live++;
  for (let u = 0; u < o.users; u++) {
    // Starting 1,000 streams in one turn blocks the loop for tens of ms; yield to I/O between batches.
    if (u > 0 && u % START_BATCH === 0) await new Promise<void>((r) => setImmediate(r));
    user();
  }
  quit();
  await finished;
  if (failure !== null) throw failure;
  const durationMs = st.nowMs();
  st.close();
  return { records: st.records.materialize(), durationMs, interrupted: st.interrupted };
}

/**
 * Open loop: send at the precomputed absolute times; with a cap, wait for a slot (client queue time).
 * Prompts and request bodies are built before the clock starts, so a dispatch is a stamp and a write.
 * The pacer (pacer.ts) sends every request that is due in a single pass, and between socket reads.
 */
export async function openLoop(
  ctx: RunCtx,
  o: {
    times: Float64Array;
    cap: number | null;
    /** A shard's requests: their indices in the whole run (times[k] belongs to indices[k]). */
    indices?: Int32Array;
    originPerf?: number;
    /** Connections to open before the clock (default: enough for the first ~100 ms of arrivals). */
    preconnect?: number;
    /** Called once the bodies are built and connections open, as the clock starts. */
    onClockStart?: () => void;
    /** Bodies built elsewhere (a replay's shard: the main thread's), times[k]'s at pre[k]. */
    pre?: Array<{ p: Prompt; body: string | Buffer }>;
  },
): Promise<Phase> {
  const n = o.times.length;
  const idx = o.indices;
  const pre = o.pre ?? prebuildBodies(ctx, n, idx ? (i) => idx[i]! : (i) => i)!;
  const sizes = new Map<number, number>();
  for (let i = 0; i < n; i++) sizes.set(idx ? idx[i]! : i, Buffer.byteLength(pre[i]!.body));
  ctx.workload.release?.();
  if (o.originPerf === undefined) await ctx.client.preconnect(o.preconnect ?? preconnectCount({ open: o }));
  o.onClockStart?.();
  const st = new RunState(ctx, n, o.originPerf);
  ctx.onOrigin?.(st.originPerf);
  const slots = o.cap !== null ? new Slots(o.cap) : null;
  const stopped = st.whenStopped().then(() => slots?.drain());
  const times = o.times;
  const origin = st.originPerf;
  const order = shortestFirst(times, pre);
  const dispatch = (at: number, created: number) => {
    const i = order ? order[at]! : at;
    const index = idx ? idx[i]! : i;
    if (!slots) {
      st.launchSend(index, times[i]!, created, pre[i]);
      return;
    }
    st.launch(
      (async () => {
        const w = slots.acquire();
        if (w) await w;
        if (st.stopped) return;
        try {
          await st.send(index, times[i]!, created, false, pre[i]);
        } finally {
          slots.release();
        }
      })(),
    );
  };
  const pacer = pace(
    times,
    origin,
    (i, now) => {
      if (!st.stopped) dispatch(i, now);
    },
    {
      // In the gap before each burst: enough fresh idle connections for it, none opened while it is sent.
      ahead: (_first, count, lastMs) => {
        if (!st.stopped) ctx.client.warm(Math.min(count, PRECONNECT_MAX), origin + lastMs + FRESH_MARGIN_MS);
      },
    },
  );
  // An interrupt must not wait for the next arrival (gaps can be long at low rates).
  stopped.then(pacer.stop);
  // Between socket reads too (h1): a request due during a burst of reads goes out at the next read,
  // not after the burst (timers and immediates only run between poll phases).
  if (ctx.client.transport === "h1") setReadHook((tPerf) => pacer.poll(tPerf - origin));
  await pacer.done;
  setReadHook(null);
  await st.whenIdle();
  const durationMs = st.nowMs();
  st.close();
  return {
    records: st.records.materialize(),
    durationMs,
    interrupted: st.interrupted,
    bodyBytes: (index) => sizes.get(index) ?? 0,
  };
}

/**
 * The send order of a schedule with ties: requests due at the same time go out shortest body first. One
 * loop sends them one after another and a send costs about its body's copy, so each then waits only for
 * the shorter ones before it — the least wait any order gives every rank (the trace cannot tell their
 * order: its stamps are quantized). Null when no two entries are due at once (schedule order).
 */
export function shortestFirst(times: Float64Array, pre: ReadonlyArray<{ body: string | Buffer }>): Int32Array | null {
  let ties = false;
  for (let i = 1; i < times.length && !ties; i++) ties = times[i] === times[i - 1];
  if (!ties) return null;
  const order = Int32Array.from({ length: times.length }, (_, i) => i);
  const size = (i: number) => {
    const b = pre[i]!.body;
    return typeof b === "string" ? b.length : b.byteLength;
  };
  for (let a = 0; a < times.length; ) {
    let z = a + 1;
    while (z < times.length && times[z] === times[a]) z++;
    // A stable sort: equal sizes keep the schedule's order.
    if (z - a > 1) order.subarray(a, z).sort((x, y) => size(x) - size(y) || x - y);
    a = z;
  }
  return order;
}

/** Sessions: each turn resends the history; a session's turns in order, sessions side by side. */
async function sessionPhase(
  ctx: RunCtx,
  sessions: Session[],
  o: { concurrency?: number; thinkMs?: number; thinkDist?: "constant" | "exponential"; seed: number },
): Promise<Phase & SessionsRun> {
  await ctx.client.preconnect(Math.min(sessions.length, o.concurrency ?? sessions.length, PRECONNECT_MAX));
  let total = 0;
  for (const s of sessions) total += s.turns.length;
  const st = new RunState(ctx, total);
  ctx.onOrigin?.(st.originPerf);
  const run = await runSessions(sessions, {
    ...o,
    signal: ctx.signal,
    now: () => st.nowMs(),
    stopped: () => st.stopped,
    send: (index, scheduledMs, p) =>
      st.send(index, scheduledMs, scheduledMs, false, { p, body: requestBody(p, ctx.bodyOpts, index) }),
  });
  const durationMs = st.nowMs();
  st.close();
  return { records: st.records.materialize(), durationMs, interrupted: st.interrupted, ...run };
}

/** Mean arrival rate of a replay (requests ÷ its wall span), for the setup's request_rate; inf for one instant. */
function replayRate(plan: ReplayPlan): number {
  const n = plan.timesMs.length;
  const span = n > 1 ? plan.timesMs[n - 1]! - plan.timesMs[0]! : 0;
  return span > 0 ? (n / span) * 1000 : Number.POSITIVE_INFINITY;
}

function stamp(d: Date): string {
  const p = (n: number) => String(n).padStart(2, "0");
  return `${d.getUTCFullYear()}${p(d.getUTCMonth() + 1)}${p(d.getUTCDate())}-${p(d.getUTCHours())}${p(d.getUTCMinutes())}${p(d.getUTCSeconds())}`;
}

/**
 * The `--save-result` JSON: vLLM bench serve's field names, ours under `inferscope`. Redacted: the setup
 * holds the URL, which may carry a password or a key, and every file and stdout this goes to must not.
 */
export function toVllmJson(res: BenchResult, detailed: boolean): Record<string, unknown> {
  const { inferscope, ...flat } = res.summary;
  const out: Record<string, unknown> = { ...res.setup, ...flat };
  const pr = res.perRequest;
  out.latencies = pr.latencies;
  out.queue_times = pr.queue_times;
  if (detailed) {
    out.input_lens = pr.input_lens;
    out.output_lens = pr.output_lens;
    out.ttfts = pr.ttfts;
    out.itls = pr.itls;
    out.start_times = pr.start_times;
    out.errors = pr.errors;
  }
  // Send lag against the schedule (generated, the trace's times or the sessions'): `schedule.lagP99Ms`.
  out.schedule = res.schedule ?? null;
  // The server's prefix-cache hit rate over the run, from its /metrics deltas (null when it exports none).
  const pc = res.server?.prefix_cache ?? null;
  out.prefixCache = pc ? { hitRate: pc.hit_rate, queries: pc.queries, hits: pc.hits, source: "/metrics delta" } : null;
  out.inferscope = {
    ...inferscope,
    warnings: res.warnings,
    client: res.client,
    server: res.server,
    server_timings: res.serverTimings,
    replay: res.replay ?? null,
    turns: res.turns ?? null,
    telemetry: res.telemetry,
    partial: res.partial,
  };
  return redact(out);
}
