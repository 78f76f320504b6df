// Plain data shared by the load generator's modules: options, raw per-request facts, results.
import type { TelemetrySpec } from "../telemetry/types.ts";

export type Endpoint = "/v1/completions" | "/v1/chat/completions";

/** Why a request failed. `null` on success. */
export type ErrorClass =
  | "connect" // could not connect / connection refused before any response
  | "http" // non-200 status; message is the server's own
  | "stream-error" // 200, then an `{"error": …}` event inside the stream
  | "disconnect" // the connection closed before the stream finished
  | "stall" // no bytes for longer than the stall timeout
  | "timeout" // no response headers in time, or the whole request ran past its limit
  | "malformed" // a data event that is not JSON, or a body that is not SSE
  | "no-output" // 200 and a finished stream, but no chunk with choices (vLLM: "never received a valid chunk")
  | "aborted"; // stopped by the user (Ctrl-C) or the run's deadline

/** Per-chunk facts, column-wise (one entry per SSE data message, `[DONE]` excluded). */
export interface ChunkColumns {
  /** Receive time of the bytes that completed this message, ms after the request's send time. */
  tMs: Float64Array;
  /** Bytes of the SSE message (framing included). */
  bytes: Uint32Array;
  /** Which socket read (0-based, per request) delivered it: messages of one read share a timestamp. */
  read: Uint32Array;
  /** Output tokens in this chunk from continuous usage deltas; -1 when the server did not say. */
  tokens: Int32Array;
  /** UTF-16 lengths of content / reasoning / tool-call argument text in the chunk. */
  content: Uint32Array;
  reasoning: Uint32Array;
  tool: Uint32Array;
  /** Bit flags: 1 non-empty `choices`, 2 carries usage, 4 carries finish_reason, 8 role-only/empty output. */
  flags: Uint8Array;
}

export const CHUNK_CHOICES = 1;
export const CHUNK_USAGE = 2;
export const CHUNK_FINISH = 4;

/** The raw facts of one request. Times are ms; run-relative ones count from the run's origin. */
/**
 * What the server itself reported about one request: llama.cpp's `timings` object (last stream chunk)
 * or TGI's `x-*` timing headers. Fields a server does not send are absent. Times in ms.
 */
export interface ServerTimings {
  source: "llamacpp-timings" | "tgi-headers" | "vllm-usage";
  promptTokens?: number;
  promptMs?: number;
  cachedTokens?: number;
  decodeTokens?: number;
  /** llama.cpp predicted_ms: from the first generated token to the last (n − 1 decode steps). */
  decodeMs?: number;
  /** The server's own per-token figure as it reports it (llama.cpp predicted_per_token_ms = predicted_ms ÷ n). */
  decodePerTokenMs?: number;
  queueMs?: number;
  inferenceMs?: number;
  totalMs?: number;
}

export interface RequestRecord {
  /** Index into the workload (stable across runs with the same seed). */
  index: number;
  warmup: boolean;
  /** When the arrival schedule wanted it sent (run-relative). Closed loop: when its user became free. */
  scheduledMs: number;
  /** When its task was created, before waiting for a `--max-concurrency` slot (run-relative). */
  createdMs: number;
  /** Just before the request was handed to the socket (run-relative). */
  sendMs: number;
  /** The following are relative to sendMs; NaN when it never happened. */
  headersMs: number;
  /** First chunk with non-empty `choices` — vLLM's TTFT anchor. */
  firstChunkMs: number;
  /** First chunk with non-empty content or reasoning text (tokens, not framing). */
  firstOutputMs: number;
  /** First chunk with non-empty non-reasoning content (TTFO). */
  firstContentMs: number;
  /** Last chunk with non-empty `choices` — vLLM's E2EL anchor (the usage-only trailer is ignored). */
  lastChunkMs: number;
  /** When the stream ended (`[DONE]`, close or error). */
  endMs: number;
  status: number;
  errorClass: ErrorClass | null;
  errorMessage: string | null;
  /** Prompt tokens from the server's usage; -1 when not reported. */
  promptTokens: number;
  /** Completion tokens from the server's usage; -1 when not reported. */
  completionTokens: number;
  /** Output tokens used for metrics: usage if present, else the count of chunks with output (flagged below). */
  outputTokens: number;
  outputTokensFromUsage: boolean;
  /** What the client asked for. */
  targetInputLen: number;
  targetOutputLen: number;
  finishReason: string | null;
  /** Convenience copies of the vLLM definitions (ms): TTFT = firstChunkMs, E2EL = lastChunkMs. */
  ttftMs: number;
  e2elMs: number;
  chunks: ChunkColumns;
  /** The server's own timings for this request, when it reports them. */
  server?: ServerTimings | null;
}

export interface GoodputSlo {
  ttft?: number;
  tpot?: number;
  e2el?: number;
  itl?: number;
}

export type PercentileMetric = "ttft" | "tpot" | "itl" | "e2el";

export type DatasetName = "random" | "sharegpt" | "jsonl" | "shared-prefix" | "mooncake" | "azure";

export interface BenchOptions {
  baseUrl: string;
  /**
   * Hardware telemetry beside the run (`auto|none|nvidia-smi|dcgm:URL|prometheus:URL|amd-smi|cpu`, or a parsed
   * spec). Cut to the measured window (warm-up excluded). Default none in the library; the CLI defaults to auto.
   */
  telemetry?: string | TelemetrySpec;
  /** The target is known to be the embedded sim (study, tune): `auto` reads its exporter without asking. */
  embeddedSim?: boolean;
  /** Default: the first model of GET /v1/models. */
  model?: string;
  endpoint?: Endpoint;
  apiKey?: string;
  /** Requests to measure (after warmup). Default 100 unless durationMs is set. */
  numPrompts?: number;
  /** Stop sending after this long (ms); in-flight requests finish. */
  durationMs?: number;
  dataset?: DatasetName;
  datasetPath?: string;
  randomInputLen?: number;
  randomOutputLen?: number;
  /** Relative spread of random lengths, as vLLM's --random-range-ratio: uniform in [L(1-r), L(1+r)]. */
  randomRangeRatio?: number;
  /** shared-prefix: groups and prefix length (tokens). */
  prefixGroups?: number;
  prefixLen?: number;
  ignoreEos?: boolean;
  /** Closed loop: this many users, each sending back to back. */
  concurrency?: number;
  /** Open loop cap (vLLM --max-concurrency): requests wait for a slot; the wait is client queue time. */
  maxConcurrency?: number;
  /** Requests per second; Infinity = all at once (vLLM's default). */
  requestRate?: number;
  /**
   * An explicit open-loop schedule: send times (ms from the measured start, ascending). Replaces requestRate,
   * numPrompts and durationMs (a phased load, a replay's times divided by its speed).
   */
  arrivalsMs?: ArrayLike<number>;
  /** Gamma shape; 1 = Poisson, Infinity = constant gaps. */
  burstiness?: number;
  seed?: number;
  /** Requests run before measuring, excluded from every metric. */
  warmup?: number;
  /** Default [99] (vLLM --metric-percentiles). */
  percentiles?: number[];
  /** Default ttft,tpot,itl (vLLM --percentile-metrics); only affects printing. */
  percentileMetrics?: PercentileMetric[];
  goodput?: GoodputSlo;
  /** Write vLLM-compatible result JSON here. */
  saveResult?: string;
  /** Also write vLLM's per-request lists (input_lens, ttfts, itls, …), like --save-detailed. */
  saveDetailed?: boolean;
  /** Stream per-request records (JSONL) here as they complete. */
  recordsPath?: string;
  /** Ask for continuous usage stats (per-chunk token counts). Default true. */
  continuousUsage?: boolean;
  /** Extra JSON merged into every request body (vLLM --extra-body). */
  extraBody?: Record<string, unknown>;
  /** Send prefix + index as each body's request id (vLLM's request_id, SGLang's rid): what joins engine spans to records. */
  requestIdPrefix?: string;
  /** Which body fields carry it (default both: each engine ignores the other's). */
  requestIdFields?: readonly ("request_id" | "rid")[];
  /** Abort a request when no bytes arrive for this long. Default 60 s. */
  stallTimeoutMs?: number;
  /**
   * A stall before any success stops the run (the study: a server that accepts requests but streams no
   * tokens would make every one of them wait out the stall limit).
   */
  stopOnStall?: boolean;
  /**
   * Stop the run once this many requests failed before any succeeded (not an interrupt: what finished is
   * the result). The capacity search: a server that fails every request is told in a few requests, not a
   * whole run's schedule.
   */
  stopAfterFailures?: number;
  /** Connect timeout. Default 5 s. */
  connectTimeoutMs?: number;
  /** Label stored in the result (vLLM --label). */
  label?: string;
  /** Skip /metrics scraping. */
  noServerMetrics?: boolean;
  /** Worker threads to spread streams over; "auto" (default): one per 256 streams, within the cores. */
  workers?: number | "auto";
  /** HTTP client: "h1" (ours, default for http:), "undici" (default for https:), or "auto". */
  transport?: "auto" | "h1" | "undici";
  /** Keep generated text in records (off by default: it costs memory). */
  keepText?: boolean;
  /**
   * Trace replay (mooncake, azure, a timestamped jsonl): N× the trace's pace; default 1. A plain number, so a
   * capacity search can drive it as the load knob. `durationMs` is then the window of trace time replayed.
   */
  replaySpeed?: number;
  /** Trace replay: start this far into the trace (ms of trace time). */
  startOffsetMs?: number;
  /** Trace replay: at most this many of the trace's requests. */
  maxRequests?: number;
  /** Multi-turn sessions (chat; each turn resends the history). See src/load/sessions.ts. */
  sessions?: SessionSpec;
}

/** Where multi-turn sessions come from. */
export type SessionSpec =
  /** ShareGPT conversations (--dataset-name sharegpt): human turns are sent, gpt turns resent as history. */
  | { source: "sharegpt"; maxSessions?: number; concurrency?: number; thinkMs?: number }
  /** A jsonl trace's session_id rows (turn order = file order; input_length = the turn's new user tokens). */
  | { source: "trace"; concurrency?: number }
  | {
      source: "synthetic";
      sessions: number;
      turns: number;
      /** Tokens of each new user message, and max_tokens of each reply. */
      inputLen: number;
      outputLen: number;
      /** Think time between a reply and the next turn (ms): its mean, and its distribution. */
      thinkMs: number;
      thinkDist?: "constant" | "exponential";
      concurrency?: number;
    };

export interface Stats {
  mean: number;
  median: number;
  std: number;
  min: number;
  max: number;
  count: number;
  /** Keyed like vLLM: "p99", "p99.9". */
  percentiles: Record<string, number>;
}

export interface ClientHealth {
  /** Event-loop delay over the run (ms). */
  eventLoopDelayMs: { mean: number; p50: number; p99: number; max: number };
  /** Client CPU seconds (user + system) and fraction of one core over the run. */
  cpuSeconds: number;
  cpuUtilization: number;
  /**
   * Socket reads that carried stream data, and client CPU per read (µs). A server that emits one chunk
   * to N streams at once makes the last of them wait ≈ N × this in one event loop (see --workers).
   */
  reads: number;
  cpuPerReadUs: number;
  /** True when the client, not the server, was probably the limit. */
  saturated: boolean;
  reason?: string;
  /** Event loops that read the streams (worker threads when > 1). */
  workers: number;
  /** Why `--workers auto` chose that many (absent when --workers was given). */
  workersNote?: string;
  /** "h1" (our HTTP/1.1 reader) or "undici". */
  transport?: "h1" | "undici";
  /**
   * The Node and V8 flags this process started with (process.execArgv). The CLI starts its load loops with
   * --no-memory-reducer (src/cli/launch.mjs); without it, V8 may run a mark-compact inside the window.
   */
  nodeFlags?: string[];
}

export interface BenchProgress {
  done: number;
  failed: number;
  /** Cut by us (an interrupt), not failed by the server. */
  aborted: number;
  inFlight: number;
  total: number | null;
  outputTokens: number;
  elapsedMs: number;
}
