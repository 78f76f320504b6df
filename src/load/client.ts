// The streaming HTTP client: undici's low-level dispatch (no web streams, no per-chunk promises), one
// clock stamp per socket read (perfNow: performance.now()'s clock with no allocation), SSE cut on
// bytes, facts written into reusable typed arrays.

import type { Dispatcher, Pool } from "undici";
import { TargetError, UsageError } from "../errors.ts";
import { undici } from "../lazy.ts";
import { perfNow } from "./clock.ts";
import { ChunkShape, type FastFacts, fastInterpret, newFastFacts } from "./fastchunk.ts";
import { type H1Error, type H1Handler, type H1Headers, H1Pool } from "./h1.ts";
import { ChunkArena, ChunkRows, NO_CHUNKS } from "./records.ts";
import { interpretChunk, type RawSink, type SseMessage, SseParser, tgiTimings } from "./sse.ts";
import type { ErrorClass, RequestRecord } from "./types.ts";
import { CHUNK_CHOICES, CHUNK_FINISH, CHUNK_USAGE } from "./types.ts";

export interface ClientOptions {
  /** Parallel connections; null = as many as requests need. */
  connections?: number | null;
  connectTimeoutMs?: number;
  /** No SSE data message for this long aborts the stream as a stall (keepalive comments do not count). */
  stallTimeoutMs?: number;
  /** No response headers for this long aborts the request. */
  headersTimeoutMs?: number;
  apiKey?: string;
  /**
   * "h1": our HTTP/1.1 reader (one shared read buffer, no allocation per read); "undici": undici's
   * dispatcher; "auto" (default): h1 for http:, undici for https:.
   */
  transport?: Transport;
}

export type Transport = "auto" | "h1" | "undici";

const MAX_ERROR_BODY = 64 * 1024;

/** The fast path's output, shared by every stream on this thread: filled and read within one call. */
const FF: FastFacts = newFastFacts();

// A stream handler's times, slots of one Float64Array (StreamHandler.tm). As object fields each double
// lives in a box of its own (V8 stores double fields as heap numbers): up to seven more cache lines,
// out of cache by the stream's next read, for every read.
/** The run's origin (performance.now()'s clock). */
const T_ORIGIN = 0;
/** When the request was sent (performance.now()'s clock). */
const T_SEND = 1;
/** Last time headers or an SSE data message arrived (performance.now()'s clock): the stall watchdog reads it. */
const T_LAST = 2;
/** The current read's time since the send (ms). */
const T_NOW = 3;
// The record's chunk times, kept here while the stream runs and written to it once at the end.
const T_FIRST_CHUNK = 4;
const T_LAST_CHUNK = 5;
const T_FIRST_OUTPUT = 6;
const T_FIRST_CONTENT = 7;

/** Fills a record's response-side fields; the runner fills index, schedule and targets. */
export function blankRecord(): RequestRecord {
  return {
    index: -1,
    warmup: false,
    scheduledMs: Number.NaN,
    createdMs: Number.NaN,
    sendMs: Number.NaN,
    headersMs: Number.NaN,
    firstChunkMs: Number.NaN,
    firstOutputMs: Number.NaN,
    firstContentMs: Number.NaN,
    lastChunkMs: Number.NaN,
    endMs: Number.NaN,
    status: 0,
    errorClass: null,
    errorMessage: null,
    promptTokens: -1,
    completionTokens: -1,
    outputTokens: 0,
    outputTokensFromUsage: false,
    targetInputLen: 0,
    targetOutputLen: 0,
    finishReason: null,
    ttftMs: Number.NaN,
    e2elMs: Number.NaN,
    chunks: undefined as any,
    server: null,
  };
}

/** A finished stream: its record, and where its chunk columns are in the client's arena. */
export type StreamDone = (rec: RequestRecord, block: number, at: number, n: number) => void;

/** Maps a transport error to our classes. */
export function classifyError(err: any, gotHeaders: boolean): { cls: ErrorClass; message: string } {
  const code: string = err?.code ?? "";
  const msg: string = err?.message ?? String(err);
  if (code === "UND_ERR_BODY_TIMEOUT") return { cls: "stall", message: "no bytes for longer than the stall timeout" };
  if (code === "UND_ERR_HEADERS_TIMEOUT") return { cls: "timeout", message: "no response headers in time" };
  if (code === "UND_ERR_CONNECT_TIMEOUT" || code === "H1_CONNECT_TIMEOUT")
    return { cls: "connect", message: `connect timeout: ${msg}` };
  if (code === "H1_PROTOCOL") return { cls: "malformed", message: msg };
  if (code === "UND_ERR_ABORTED" || code === "UND_ERR_ABORT" || code === "H1_ABORTED" || err?.name === "AbortError")
    return { cls: "aborted", message: msg };
  if (code === "ECONNREFUSED" || code === "ENOTFOUND" || code === "EHOSTUNREACH" || code === "ENETUNREACH")
    return { cls: "connect", message: `${code}: ${msg}` };
  if (
    code === "UND_ERR_SOCKET" ||
    code === "ECONNRESET" ||
    code === "EPIPE" ||
    code === "UND_ERR_CLOSED" ||
    code === "H1_CLOSED"
  )
    return {
      cls: "disconnect",
      message: gotHeaders ? `connection closed mid-stream (${msg})` : `connection closed (${msg})`,
    };
  return { cls: gotHeaders ? "disconnect" : "connect", message: `${code ? `${code}: ` : ""}${msg}` };
}

/** The server's own words from an error body: OpenAI `{error:{message}}`, flat `{message}`, FastAPI `{detail}`. */
export function serverMessage(body: string): string {
  try {
    const o = JSON.parse(body);
    const m = o?.error?.message ?? (typeof o?.error === "string" ? o.error : undefined) ?? o?.message ?? o?.detail;
    if (typeof m === "string") return m;
    if (m !== undefined) return JSON.stringify(m);
  } catch {}
  const t = body.trim();
  return t.length > 300 ? `${t.slice(0, 300)}…` : t;
}

/**
 * One streaming response: undici's dispatch handler and our H1 handler in one (same facts either way).
 * Pooled by the client: a settled handler is reset for the next request, so its parser, facts and
 * closures are not garbage per request.
 */
class StreamHandler implements Dispatcher.DispatchHandler, H1Handler, RawSink {
  // What every socket read touches comes first: V8 lays fields out in the order they are defined, and
  // each stream's state is out of cache by its next read, so every further cache line is a miss a read.
  private errorBody: Buffer[] | null = null;
  private failed = false;
  private done = false;
  // perfNow(): performance.now()'s clock, with nothing allocated per read.
  private readonly tm = new Float64Array(8);
  private lastRead = -1;
  private readId = -1;
  private readonly parser = new SseParser();
  scratch: ChunkRows;
  /** The stream's last chunk shape: most chunks are then read from their text alone. */
  private readonly shape = new ChunkShape();
  private usageContinuous: boolean | null = null;
  private outputChunks = 0;
  private lastCum = 0;
  // The record's chunk facts, kept here while the stream runs and written to it once at the end: a
  // read then touches this handler's memory and its rows only.
  private completionTokens = -1;
  private promptTokens = -1;
  private finishReason: string | null = null;
  /** Hot path: one SSE data payload as a byte range (the parser's RawSink). */
  rawMessage(b: Buffer, s: number, e: number, bytes: number, event: string): void {
    if (this.failed || this.done) return;
    // Progress is a data message, not any byte: a stream of `: keepalive` comments is a stall.
    const tm = this.tm;
    tm[T_LAST] = tm[T_SEND]! + tm[T_NOW]!;
    if (e - s === 6 && b[s] === 0x5b && b.toString("latin1", s, e) === "[DONE]") {
      this.done = true;
      return;
    }
    if (event !== "error" && fastInterpret(b, s, e, FF, this.shape)) this.apply(FF, bytes);
    else this.onMessage({ data: b.toString("utf8", s, e), event, bytes });
  }

  controller: Dispatcher.DispatchController | null = null;
  /** Set by the h1 transport: aborts the request in flight. */
  h1Abort: ((reason: string) => void) | null = null;
  rec: RequestRecord;
  /** streamTo()'s callback, called once the response is settled. */
  resolve: StreamDone | null = null;
  /** Where finish() put the chunks in the arena: block, offset, count. */
  chunkBlock = -1;
  chunkAt = 0;
  chunkN = 0;
  private errorBytes = 0;
  private settled = false;

  constructor(
    private readonly arena: ChunkArena,
    private readonly onDone: (h: StreamHandler) => void,
  ) {
    this.rec = blankRecord();
    this.scratch = new ChunkRows(1);
  }

  /** Takes the next request: every per-response field back to its start. */
  reset(rec: RequestRecord, scratch: ChunkRows, originPerf: number, resolve: StreamDone): void {
    this.rec = rec;
    this.scratch = scratch;
    const tm = this.tm;
    tm[T_ORIGIN] = originPerf;
    this.resolve = resolve;
    this.controller = null;
    this.h1Abort = null;
    this.parser.clear();
    tm[T_SEND] = 0;
    tm[T_LAST] = 0;
    tm[T_NOW] = 0;
    this.readId = -1;
    this.lastRead = -1;
    this.errorBody = null;
    this.errorBytes = 0;
    this.done = false;
    this.failed = false;
    this.settled = false;
    this.lastCum = 0;
    this.usageContinuous = null;
    this.outputChunks = 0;
    tm[T_FIRST_CHUNK] = Number.NaN;
    tm[T_LAST_CHUNK] = Number.NaN;
    tm[T_FIRST_OUTPUT] = Number.NaN;
    tm[T_FIRST_CONTENT] = Number.NaN;
    this.completionTokens = -1;
    this.promptTokens = -1;
    this.finishReason = null;
  }

  start(): void {
    const tm = this.tm;
    tm[T_SEND] = perfNow();
    tm[T_LAST] = tm[T_SEND]!;
    this.rec.sendMs = tm[T_SEND]! - tm[T_ORIGIN]!;
  }

  /** Last time headers or an SSE data message arrived (performance.now()'s clock): the stall watchdog reads it. */
  get lastPerf(): number {
    return this.tm[T_LAST]!;
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
  }

  onResponseStart(
    _c: Dispatcher.DispatchController,
    statusCode: number,
    headers: Record<string, string | string[] | undefined>,
    statusMessage?: string,
  ): void {
    this.head(statusCode, statusMessage ?? "", String(headers["content-type"] ?? ""));
    if (headers["x-time-per-token"] !== undefined || headers["x-inference-time"] !== undefined)
      this.rec.server = tgiTimings(headers);
  }

  onHead(status: number, statusText: string, headers: H1Headers, tPerf: number): void {
    this.head(status, statusText, headers.contentType, tPerf);
    const h = headers.fields;
    if (h["x-time-per-token"] !== undefined || h["x-inference-time"] !== undefined) this.rec.server = tgiTimings(h);
  }

  /** `t`: the read that carried the head (h1), else now (undici: before that read's data is handed on). */
  private head(statusCode: number, statusMessage: string, contentType: string, t = perfNow()): void {
    this.tm[T_LAST] = t;
    this.rec.headersMs = t - this.tm[T_SEND]!;
    this.rec.status = statusCode;
    if (statusCode !== 200) {
      this.errorBody = [];
      this.fail("http", `HTTP ${statusCode}${statusMessage ? ` ${statusMessage}` : ""}`);
      return;
    }
    if (contentType && !contentType.includes("text/event-stream")) {
      this.errorBody = [];
      this.fail("malformed", `server did not stream: content-type ${contentType}`);
    }
  }

  private keepErrorBody(b: Buffer, s: number, e: number): void {
    if (this.errorBytes < MAX_ERROR_BODY) {
      this.errorBody!.push(Buffer.from(b.subarray(s, e)));
      this.errorBytes += e - s;
    }
  }

  onResponseData(_c: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.errorBody) {
      this.keepErrorBody(chunk, 0, chunk.length);
      return;
    }
    if (this.failed || this.done) return;
    const t = perfNow();
    this.tm[T_NOW] = t - this.tm[T_SEND]!;
    this.readId++;
    this.parser.feedRaw(chunk, this);
  }

  /** h1: b[s, e) is only valid during this call (a shared read buffer). */
  onBody(b: Buffer, s: number, e: number, tPerf: number, read: number): void {
    if (this.errorBody) {
      this.keepErrorBody(b, s, e);
      return;
    }
    if (this.failed || this.done) return;
    this.tm[T_NOW] = tPerf - this.tm[T_SEND]!;
    if (read !== this.lastRead) {
      this.lastRead = read;
      this.readId++;
    }
    this.parser.feedRangeTo(b, s, e, this);
  }

  onEnd(): void {
    this.onResponseEnd();
  }

  onFail(err: H1Error): void {
    this.onResponseError(null as any, err);
  }

  /** Slow path (JSON.parse): errors, tool calls, logprobs, malformed data. */
  private readonly onMessage = (m: SseMessage): void => {
    if (this.failed || this.done) return;
    const f = interpretChunk(m.data);
    if (f.kind === "done") {
      this.done = true;
      return;
    }
    if (f.kind === "malformed") {
      this.fail("malformed", `malformed SSE data: ${f.errorMessage}`);
      return;
    }
    if (f.kind === "error" || m.event === "error") {
      this.fail("stream-error", f.errorMessage ?? m.data.slice(0, 300));
      return;
    }
    if (f.timings) this.rec.server = f.timings;
    this.apply(f, m.bytes);
  };

  private apply(f: FastFacts, bytes: number): void {
    const tm = this.tm;
    const t = tm[T_NOW]!;
    let flags = 0;
    if (f.hasChoices) {
      flags |= CHUNK_CHOICES;
      if (Number.isNaN(tm[T_FIRST_CHUNK]!)) {
        tm[T_FIRST_CHUNK] = t;
        if (this.usageContinuous === null) this.usageContinuous = f.completionTokens >= 0;
      }
      tm[T_LAST_CHUNK] = t;
    }
    const out = f.content + f.reasoning + f.tool;
    if (out > 0) {
      this.outputChunks++;
      if (Number.isNaN(tm[T_FIRST_OUTPUT]!)) tm[T_FIRST_OUTPUT] = t;
      if (f.content > 0 && Number.isNaN(tm[T_FIRST_CONTENT]!)) tm[T_FIRST_CONTENT] = t;
    }
    let tokens = -1;
    if (f.completionTokens >= 0) {
      flags |= CHUNK_USAGE;
      if (this.usageContinuous) {
        tokens = f.completionTokens - this.lastCum;
        this.lastCum = f.completionTokens;
      }
      this.completionTokens = f.completionTokens;
    }
    if (f.promptTokens >= 0) this.promptTokens = f.promptTokens;
    if (f.finishReason !== null) {
      flags |= CHUNK_FINISH;
      this.finishReason = f.finishReason;
    }
    this.scratch.push(t, bytes, this.readId, tokens, f.content, f.reasoning, f.tool, flags);
  }

  onResponseEnd(): void {
    if (this.errorBody) {
      const body = Buffer.concat(this.errorBody).toString("utf8");
      const said = serverMessage(body);
      if (said) this.rec.errorMessage = `${this.rec.errorMessage}: ${said}`;
    } else if (!this.failed) {
      const last = this.parser.finish();
      if (last) {
        // vLLM accepts a trailing unterminated message if it is [DONE] or valid JSON.
        this.tm[T_NOW] = perfNow() - this.tm[T_SEND]!;
        this.onMessage(last);
      }
      if (!this.failed) {
        if (Number.isNaN(this.tm[T_FIRST_CHUNK]!))
          this.fail("no-output", "the stream ended without a chunk with choices (never received a valid chunk)");
        else if (!this.done && this.finishReason === null)
          this.fail("disconnect", "the stream ended without [DONE] or a finish_reason");
      }
    }
    this.finish();
  }

  onResponseError(_c: Dispatcher.DispatchController, err: Error): void {
    if (!this.failed) {
      const { cls, message } = classifyError(err, this.rec.status !== 0);
      this.fail(cls, message);
    } else if (this.errorBody && this.errorBytes > 0) {
      const said = serverMessage(Buffer.concat(this.errorBody).toString("utf8"));
      if (said) this.rec.errorMessage = `${this.rec.errorMessage}: ${said}`;
    }
    this.finish();
  }

  private fail(cls: ErrorClass, message: string): void {
    if (this.failed) return;
    this.failed = true;
    this.rec.errorClass = cls;
    this.rec.errorMessage = message;
  }

  abort(reason: string, cls: ErrorClass = "aborted"): void {
    if (this.settled) return;
    this.fail(cls, reason);
    if (this.h1Abort) this.h1Abort(reason);
    else if (this.controller && !this.controller.aborted) {
      const e = new Error(reason);
      e.name = "AbortError";
      this.controller.abort(e);
    }
  }

  private finish(): void {
    if (this.settled) return;
    this.settled = true;
    const rec = this.rec;
    const tm = this.tm;
    rec.endMs = perfNow() - tm[T_SEND]!;
    rec.firstChunkMs = tm[T_FIRST_CHUNK]!;
    rec.lastChunkMs = tm[T_LAST_CHUNK]!;
    rec.firstOutputMs = tm[T_FIRST_OUTPUT]!;
    rec.firstContentMs = tm[T_FIRST_CONTENT]!;
    if (this.completionTokens >= 0) rec.completionTokens = this.completionTokens;
    if (this.promptTokens >= 0) rec.promptTokens = this.promptTokens;
    if (this.finishReason !== null) rec.finishReason = this.finishReason;
    // Only the location: the caller makes the views if it reads the chunks before the run ends.
    this.chunkN = this.scratch.moveToArena(this.arena);
    this.chunkBlock = this.arena.lastBlock;
    this.chunkAt = this.arena.lastAt;
    rec.chunks = NO_CHUNKS;
    if (rec.completionTokens > 0) {
      rec.outputTokens = rec.completionTokens;
      rec.outputTokensFromUsage = true;
    } else {
      rec.outputTokens = this.outputChunks;
      rec.outputTokensFromUsage = false;
    }
    rec.ttftMs = rec.firstChunkMs;
    rec.e2elMs = rec.lastChunkMs;
    this.onDone(this);
  }
}

/** One connection pool to one server; `stream()` sends a prepared body and resolves with the record. */
/**
 * What to do about a 401/403: send a key, or (one was sent) send the right one. Undefined for other
 * statuses. A wrong key told "the server wants a key" sends the user looking for a flag they already gave.
 */
export function keyHint(status: number, keySent: boolean): string | undefined {
  if (status !== 401 && status !== 403) return undefined;
  return keySent
    ? "the server rejected the key given (--api-key or $OPENAI_API_KEY): check it"
    : "the server wants a key (--api-key, or OPENAI_API_KEY)";
}

export class StreamClient {
  readonly origin: string;
  readonly basePath: string;
  private readonly pool: Pool | null;
  private readonly h1: H1Pool | null;
  readonly transport: "h1" | "undici";
  private readonly headers: Record<string, string>;
  private readonly scratchPool: ChunkRows[] = [];
  private readonly handlerPool: StreamHandler[] = [];
  private readonly onDone = (h: StreamHandler): void => {
    this.inFlight.delete(h);
    this.scratchPool.push(h.scratch);
    const resolve = h.resolve!;
    const rec = h.rec;
    const { chunkBlock, chunkAt, chunkN } = h;
    h.resolve = null;
    this.handlerPool.push(h);
    resolve(rec, chunkBlock, chunkAt, chunkN);
  };
  /** Where finished requests' chunk columns live (RecordStore keeps their locations). */
  readonly arena = new ChunkArena();
  private readonly inFlight = new Set<StreamHandler>();
  private readonly stallTimeoutMs: number;
  private readonly headersTimeoutMs: number;
  private watchdog: NodeJS.Timeout | null = null;

  /** True when requests carry an Authorization header (for the 401 hint). */
  get sendsKey(): boolean {
    return Boolean(this.opts.apiKey);
  }

  constructor(
    baseUrl: string,
    private readonly opts: ClientOptions = {},
  ) {
    const u = new URL(baseUrl);
    this.origin = u.origin;
    this.basePath = u.pathname.replace(/\/+$/, "");
    this.stallTimeoutMs = opts.stallTimeoutMs ?? 60_000;
    this.headersTimeoutMs = opts.headersTimeoutMs ?? 300_000;
    const want = opts.transport ?? "auto";
    if (want === "h1" && u.protocol !== "http:")
      throw new UsageError(`the h1 transport speaks plain http only; ${baseUrl} needs --http-client undici`);
    this.transport = want === "undici" || (want === "auto" && u.protocol !== "http:") ? "undici" : "h1";
    this.h1 =
      this.transport === "h1"
        ? new H1Pool(this.origin, { connections: opts.connections ?? null, connectTimeoutMs: opts.connectTimeoutMs })
        : null;
    this.pool =
      this.transport === "undici"
        ? new (undici().Pool)(this.origin, {
            connections: opts.connections ?? null,
            pipelining: 1,
            keepAliveTimeout: 60_000,
            connect: { timeout: opts.connectTimeoutMs ?? 5000 },
            headersTimeout: this.headersTimeoutMs,
            bodyTimeout: this.stallTimeoutMs * 2 + 1000,
          })
        : null;
    this.headers = { "content-type": "application/json", accept: "text/event-stream" };
    if (opts.apiKey) this.headers.authorization = `Bearer ${opts.apiKey}`;
  }

  /**
   * Per-stream state for `n` streams, made before a run's clock: handlers, and chunk scratch sized for
   * `chunks` messages. Made inside the window, the first wave's state was promoted by its collections
   * (~1.5 kB of heap objects a stream for the scratch alone) and set off a mark-compact.
   */
  prepare(n: number, chunks: number): void {
    const m = Math.min(n, 1 << 16);
    while (this.handlerPool.length < m) this.handlerPool.push(new StreamHandler(this.arena, this.onDone));
    if (chunks > 0) {
      let fit = 0;
      for (const s of this.scratchPool) if (s.capacity >= chunks) fit++;
      for (; fit < m; fit++) this.scratchPool.push(new ChunkRows(chunks));
      // The first wave's finished columns land in blocks made now, not in the window.
      this.arena.reserve(m * chunks);
    }
  }

  /** Opens up to n connections before a run's clock starts (h1; undici opens them on demand), and makes n stream handlers. */
  preconnect(n: number): Promise<void> {
    // The streams' handlers too: made before the clock, not in the window's first burst of sends.
    while (this.handlerPool.length < Math.min(n, 1 << 16))
      this.handlerPool.push(new StreamHandler(this.arena, this.onDone));
    return this.h1 && n > 0 ? this.h1.preconnect(n) : Promise.resolve();
  }

  /** Before a burst (h1): `n` idle connections still fresh at `untilPerf` (H1Pool.warm); undici connects on demand. */
  warm(n: number, untilPerf: number): number {
    return this.h1 ? this.h1.warm(n, untilPerf) : 0;
  }

  get inFlightCount(): number {
    return this.inFlight.size;
  }

  /** Sends one streaming request. `rec` gets every response-side fact; never rejects. */
  /** `originPerf`: the run's origin on the performance.now() clock (record times are relative to it). */
  stream(path: string, body: string | Buffer, rec: RequestRecord, originPerf: number): Promise<RequestRecord> {
    return new Promise((resolve) =>
      this.streamTo(path, body, rec, originPerf, (r, block, at, n) => {
        r.chunks = this.arena.columns(block, at, n);
        resolve(r);
      }),
    );
  }

  /**
   * stream() with a callback instead of a promise: `done` is called once with the filled record, which
   * can be before streamTo returns (a closed client fails the request at once). The load loops use it:
   * a promise and its reactions per request were a kilobyte of garbage each, inside the measured window.
   * The record's chunks are then NO_CHUNKS: `done` gets their place in `arena` (columns() makes them).
   */
  streamTo(path: string, body: string | Buffer, rec: RequestRecord, originPerf: number, done: StreamDone): void {
    // Sized for max_tokens (+ role, usage and finish chunks), so it does not grow mid-stream.
    const want = rec.targetOutputLen > 0 ? rec.targetOutputLen + 4 : 256;
    let scratch = this.scratchPool.pop();
    if (!scratch || scratch.capacity < want) scratch = new ChunkRows(want);
    const h = this.handlerPool.pop() ?? new StreamHandler(this.arena, this.onDone);
    h.reset(rec, scratch, originPerf, done);
    this.inFlight.add(h);
    h.start();
    this.armWatchdog();
    if (this.h1) {
      const handle = this.h1.request("POST", this.basePath + path, this.headers, body, h);
      h.h1Abort = handle.abort;
      return;
    }
    this.pool!.dispatch(
      {
        path: this.basePath + path,
        method: "POST",
        headers: this.headers,
        body,
        headersTimeout: this.headersTimeoutMs,
        bodyTimeout: this.stallTimeoutMs * 2 + 1000,
      },
      h,
    );
  }

  /**
   * One timer for all streams: a stream with no bytes for stallTimeoutMs fails as a stall (undici's own
   * body timeout runs on a coarse timer wheel and is only a backstop here).
   */
  private armWatchdog(): void {
    if (this.watchdog) return;
    const every = Math.min(1000, Math.max(5, Math.min(this.stallTimeoutMs, this.headersTimeoutMs) / 5));
    const limit = this.stallTimeoutMs;
    this.watchdog = setInterval(() => {
      if (this.inFlight.size === 0) {
        clearInterval(this.watchdog!);
        this.watchdog = null;
        return;
      }
      const now = perfNow();
      // forEach, not for-of: an iterator result per stream per tick was most of the timer's garbage.
      this.inFlight.forEach((h) => {
        if (h.rec.status !== 0) {
          if (now - h.lastPerf > limit)
            h.abort(
              `no stream data for ${this.stallTimeoutMs} ms (--stall-timeout; keepalive comments do not count)`,
              "stall",
            );
        } else if (now - h.lastPerf > this.headersTimeoutMs)
          h.abort(`no response headers within ${this.headersTimeoutMs} ms`, "timeout");
      });
    }, every);
    this.watchdog.unref();
  }

  /** Aborts every in-flight stream (they resolve as "aborted"). */
  abortAll(reason = "aborted by the user"): void {
    for (const h of [...this.inFlight]) h.abort(reason);
  }

  async close(): Promise<void> {
    if (this.watchdog) clearInterval(this.watchdog);
    this.watchdog = null;
    this.h1?.close();
    await this.pool?.destroy().catch(() => {});
  }

  /** GET a path on the same server (JSON or text), with a clear error when unreachable. */
  async get(path: string, timeoutMs = this.opts.connectTimeoutMs ?? 5000): Promise<{ status: number; body: string }> {
    const url = this.origin + this.basePath + path;
    return httpGet(url, timeoutMs, this.opts.apiKey);
  }
}

/** A plain GET with a timeout; unreachable → TargetError (exit 3). */
export async function httpGet(
  url: string,
  timeoutMs = 5000,
  apiKey?: string,
): Promise<{ status: number; body: string }> {
  const headers: Record<string, string> = {};
  if (apiKey) headers.authorization = `Bearer ${apiKey}`;
  const get = async () => {
    const res = await undici().request(url, {
      method: "GET",
      headers,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      signal: AbortSignal.timeout(timeoutMs),
    });
    const body = await res.body.text();
    return { status: res.statusCode, body };
  };
  try {
    try {
      return await get();
    } catch (err: any) {
      // A pooled keep-alive socket the server closed while idle (its keep-alive timeout passed between
      // two of our requests): a GET is idempotent, so it is sent once more on a fresh connection.
      if ((err?.code ?? err?.cause?.code) !== "UND_ERR_SOCKET") throw err;
      return await get();
    }
  } catch (err: any) {
    const code = err?.code ?? err?.cause?.code ?? "";
    const what =
      code === "ECONNREFUSED"
        ? "connection refused"
        : err?.name === "TimeoutError" || code === "UND_ERR_CONNECT_TIMEOUT" || code === "UND_ERR_HEADERS_TIMEOUT"
          ? `no complete answer within ${timeoutMs} ms (--connect-timeout)`
          : `${code ? `${code}: ` : ""}${err?.message ?? String(err)}`;
    throw new TargetError(`cannot reach ${url}: ${what}`, {
      url,
      hint: "is the server running? check its URL (--base-url)",
      cause: err,
    });
  }
}
