// The simulator's HTTP front end: vLLM's OpenAI-compatible routes on node:http, SSE written from
// pre-serialised chunk parts (only the token text is serialised per chunk).
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { MAX_TIMER_MS } from "../sleep.ts";
import { type Engine, type RequestSink, SimRequest } from "./engine.ts";
import type { FinishReason, SimMetrics } from "./exposition.ts";
import { type FaultInjector, type FaultKind, NO_FAULTS, type RequestFaults } from "./faults.ts";
import { mix32 } from "./rng.ts";
import { type ChatMessage, detokenize, idsFromList, tokenize, tokenizeChat, tokenPiece } from "./text.ts";

export interface ServerDeps {
  engine: Engine;
  metrics: SimMetrics;
  faults: FaultInjector;
  modelName: string;
  maxModelLen: number;
  vllmVersion: string;
  seed: number;
  reasoning: boolean;
  reasoningFraction: number;
  /** vLLM's --enable-prompt-tokens-details: usage.prompt_tokens_details.cached_tokens. */
  promptTokensDetails?: boolean;
  /** Name requests as SGLang does (the body's rid, bare) instead of vLLM's way. */
  sglangNaming?: boolean;
  /** Wall ms a stall fault holds the stream, and a slow-headers fault delays headers. */
  stallMs: number;
  slowHeadersMs: number;
  profiler: { start(): Promise<void>; stop(): Promise<void> } | null;
  /** Extra GET routes (debug: the sim's own truth). They answer loopback clients only (isLoopbackAddress). */
  extraGet?: Record<string, () => unknown>;
  /** Extra GET routes answering Prometheus text 0.0.4 (the dcgm-exporter endpoint). */
  extraText?: Record<string, () => string>;
}

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly type: string,
    readonly param: string | null = null,
  ) {
    super(message);
  }
}

const bad = (msg: string, param: string | null = null) => new HttpError(400, msg, "BadRequestError", param);

/**
 * The largest request body the sim reads: 64 bytes per token of max_model_len (a prompt of that many tokens,
 * JSON-escaped, in chat messages, fits several times over), within [1 MiB, 64 MiB]. A longer prompt could
 * never be served, and one 60 MB /tokenize body once made a 283 MB answer and blocked the loop 17 s.
 * vLLM (uvicorn) sets no such limit; the sim answers 413 as a proxy in front of it would.
 */
export function maxBodyBytes(maxModelLen: number): number {
  return Math.min(64 * 1024 * 1024, Math.max(1024 * 1024, maxModelLen * 64));
}

/** A socket peer on this host (the /debug routes' audience): 127.0.0.0/8, ::1, or IPv4-mapped 127.x. */
export function isLoopbackAddress(a: string | undefined): boolean {
  return a !== undefined && (a === "::1" || /^127\./.test(a) || /^::ffff:127\./i.test(a));
}

/** A /debug route for this peer: the sim's truth is for the tests beside it; another host (--allow-remote) sees a 404. */
export function debugRoute<T>(
  routes: Record<string, T> | undefined,
  path: string,
  peer: string | undefined,
): T | undefined {
  return isLoopbackAddress(peer) ? routes?.[path] : undefined;
}

/** An optional boolean field, as vLLM's pydantic model checks it (null is "not given"). */
function optBool(b: Record<string, unknown>, key: string): boolean | undefined {
  const v = b[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "boolean") throw bad(`${key}: Input should be a valid boolean`, key);
  return v;
}

/** Chat messages as vLLM's request model takes them: objects with a string role, string/parts/null content. */
function checkedMessages(v: unknown, field = "messages"): ChatMessage[] {
  if (!Array.isArray(v)) throw bad(`${field}: Input should be a valid list`, field);
  for (let i = 0; i < v.length; i++) {
    const m = v[i] as Record<string, unknown> | null;
    const at = `${field}.${i}`;
    if (typeof m !== "object" || m === null || Array.isArray(m))
      throw bad(`${at}: Input should be a valid dictionary`, field);
    if (typeof m.role !== "string") throw bad(`${at}.role: Input should be a valid string`, field);
    const c = m.content;
    if (c === undefined || c === null || typeof c === "string") continue;
    if (!Array.isArray(c)) throw bad(`${at}.content: Input should be a valid string or a list of content parts`, field);
    for (let k = 0; k < c.length; k++) {
      const part = c[k] as Record<string, unknown> | null;
      if (typeof part !== "object" || part === null || typeof part.type !== "string")
        throw bad(`${at}.content.${k}: Input should be a content part with a string type`, field);
      if (part.type === "text" && typeof part.text !== "string")
        throw bad(`${at}.content.${k}.text: Input should be a valid string`, field);
    }
  }
  return v as ChatMessage[];
}

/** Token ids as given; an id outside the vocabulary is a 400, as vLLM refuses it. */
function tokenIds(list: readonly number[], param: string): Uint32Array {
  try {
    return idsFromList(list);
  } catch (err) {
    throw bad((err as Error).message, param);
  }
}

function errorBody(status: number, message: string, type: string, param: string | null): string {
  return JSON.stringify({ error: { message, type, param, code: status } });
}

/** How much of a refused (413) request body is read and dropped, and for how long, before the connection is cut. */
const DRAIN_MAX_BYTES = 256 * 1024 * 1024;
const DRAIN_MAX_MS = 30_000;

function sendJson(res: ServerResponse, status: number, body: string, headers: Record<string, string> = {}): void {
  if (res.destroyed) return;
  res.writeHead(status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(body),
    ...headers,
  });
  res.end(body);
}

function uuidHex(a: number, b: number): string {
  let s = "";
  for (let i = 0; i < 4; i++)
    s += mix32(a * 4 + i + mix32(b))
      .toString(16)
      .padStart(8, "0");
  return s;
}

interface Usage {
  prompt_tokens: number;
  total_tokens: number;
  completion_tokens: number;
  prompt_tokens_details?: { cached_tokens: number } | null;
}

/** One HTTP completion request: n choices, each a SimRequest, streaming or not. */
class Exchange implements RequestSink {
  readonly choices: SimRequest[] = [];
  private remaining = 0;
  private completionTokens = 0;
  private readonly pre: string[] = [];
  private readonly sufNull: string;
  private stalledUntil = 0;
  private queued: string[] | null = null;
  closed = false;

  constructor(
    private readonly srv: SimServer,
    private readonly res: ServerResponse,
    readonly chat: boolean,
    readonly stream: boolean,
    readonly includeUsage: boolean,
    readonly continuousUsage: boolean,
    readonly id: string,
    readonly created: number,
    readonly promptTokens: number,
    readonly faults: RequestFaults,
    private readonly reasoningTokens: number,
  ) {
    const model = JSON.stringify(srv.deps.modelName);
    this.sufNull = chat
      ? '},"logprobs":null,"finish_reason":null}]'
      : ',"logprobs":null,"finish_reason":null,"stop_reason":null}]';
    this.headPrefix = chat
      ? `data: {"id":${JSON.stringify(id)},"object":"chat.completion.chunk","created":${created},"model":${model},"choices":[`
      : `data: {"id":${JSON.stringify(id)},"object":"text_completion","created":${created},"model":${model},"choices":[`;
  }
  private readonly headPrefix: string;

  add(req: SimRequest): void {
    const i = this.choices.length;
    this.choices.push(req);
    // vLLM's request id: the response id, and with n > 1 each choice's child id.
    req.name = req.n > 1 ? `${i}_${this.id}` : this.id;
    this.remaining++;
    this.pre[i] = this.chat
      ? `${this.headPrefix}{"index":${i},"delta":{"content":`
      : `${this.headPrefix}{"index":${i},"text":`;
  }

  begin(): void {
    if (!this.stream) return;
    this.res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" });
    this.res.flushHeaders();
  }

  /** vLLM (--enable-prompt-tokens-details) reports cached prompt tokens only when there are some. */
  private cachedDetails(): { cached_tokens: number } | null {
    const cached = this.choices[0]?.cachedTokens ?? 0;
    return this.srv.deps.promptTokensDetails && cached > 0 ? { cached_tokens: cached } : null;
  }

  private usageJson(): string {
    const u: Usage = {
      prompt_tokens: this.promptTokens,
      total_tokens: this.promptTokens + this.completionTokens,
      completion_tokens: this.completionTokens,
    };
    // The streamed usage chunk leaves out unset fields (exclude_none).
    const details = this.cachedDetails();
    if (details) u.prompt_tokens_details = details;
    return JSON.stringify(u);
  }

  /**
   * Events not yet sent: the engine flushes them at the end of each step; otherwise (--speed zero
   * bursts, faults) they go as one chunk when this macrotask ends.
   */
  private pending: string | null = null;
  private readonly flushLater = (): void => this.send(false);
  /** Sends the pending events now (the engine calls it when a step's outputs are written). */
  flush(): void {
    this.send(true);
  }
  private send(now: boolean): void {
    const p = this.pending;
    if (p === null) return;
    this.pending = null;
    const res = this.res;
    if (res.destroyed) return;
    // node corks a chunked write until its next tick; corking around it here sends the chunk (size
    // line, data, CRLF) at once, in one send. (Not on the end-of-macrotask path: there it only costs.)
    const sock = now ? res.socket : null;
    sock?.cork();
    res.write(p);
    if (this.endAfterFlush) res.end();
    sock?.uncork();
  }
  private endAfterFlush = false;

  private write(s: string): void {
    if (this.closed || this.res.destroyed) return;
    if (this.queued) {
      this.queued.push(s);
      return;
    }
    if (this.pending === null) {
      this.pending = s;
      process.nextTick(this.flushLater);
    } else this.pending += s;
  }

  /** Ends the response after any pending events are flushed. */
  private end(): void {
    if (this.pending !== null) this.endAfterFlush = true;
    else this.res.end();
  }

  onTokens(req: SimRequest, from: number, count: number, finish: FinishReason | null): void {
    const idx = this.choices.indexOf(req);
    this.completionTokens += count;
    if (finish) this.remaining--;
    if (this.closed) return;
    const f = this.faults;
    if (this.stream) {
      const srv = this.srv;
      if (this.chat && from === 0 && count > 0) {
        // vLLM's role chunk rides with each choice's first output.
        const usage = this.continuousUsage
          ? `,"usage":{"prompt_tokens":${this.promptTokens},"total_tokens":${this.promptTokens},"completion_tokens":0}`
          : "";
        this.write(
          `${this.headPrefix}{"index":${idx},"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]${usage}}\n\n`,
        );
      }
      if (count > 0) {
        const end = from + count;
        // Reasoning tokens first (chat with --reasoning), then content.
        if (this.chat && from < this.reasoningTokens) {
          const cut = Math.min(end, this.reasoningTokens);
          this.writeTokens(idx, req, from, cut, cut === end ? finish : null, "reasoning_content");
          if (cut < end) this.writeTokens(idx, req, cut, end, finish, "content");
        } else this.writeTokens(idx, req, from, end, finish, "content");
        if (f.malformedAt >= 0 && from <= f.malformedAt && f.malformedAt < end) {
          srv.fault("malformed");
          this.write(`${this.headPrefix}{"index":${idx},"text":"\u0000broken\n\n`);
        }
        if (f.disconnectAt >= 0 && from <= f.disconnectAt && f.disconnectAt < end && !finish) {
          srv.fault("disconnect");
          this.closed = true;
          this.res.socket?.destroy();
          for (const c of this.choices) srv.deps.engine.abort(c);
          srv.release(this);
          return;
        }
        if (f.stallAt >= 0 && from <= f.stallAt && f.stallAt < end && !finish && this.stalledUntil === 0) {
          srv.fault("stall");
          this.stalledUntil = 1;
          this.queued = [];
          setTimeout(
            () => {
              const q = this.queued ?? [];
              this.queued = null;
              for (const s of q) this.write(s);
              if (this.remaining === 0) this.finishStream();
            },
            Math.min(MAX_TIMER_MS, srv.deps.stallMs),
          ).unref();
        }
      }
      if (this.remaining === 0 && !this.queued) this.finishStream();
    } else if (this.remaining === 0) this.finishJson();
  }

  private writeTokens(
    idx: number,
    req: SimRequest,
    from: number,
    to: number,
    finish: FinishReason | null,
    field: "content" | "reasoning_content",
  ): void {
    let text = "";
    for (let i = from; i < to; i++) text += req.text(i);
    const usage = this.continuousUsage
      ? `,"usage":{"prompt_tokens":${this.promptTokens},"total_tokens":${this.promptTokens + to},"completion_tokens":${to}}`
      : this.chat
        ? ""
        : ',"usage":null';
    let pre = this.pre[idx]!;
    if (field === "reasoning_content") pre = pre.replace('"delta":{"content":', '"delta":{"reasoning_content":');
    if (finish && finish !== "abort") {
      const stopReason = req.stopReason === null ? "null" : JSON.stringify(req.stopReason);
      const tail = this.chat
        ? `},"logprobs":null,"finish_reason":"${finish}","stop_reason":${stopReason}}]`
        : `,"logprobs":null,"finish_reason":"${finish}","stop_reason":${stopReason}}]`;
      let chunk = `${pre}${JSON.stringify(text)}${tail}${usage}}\n\n`;
      if (this.faults.truncated && this.remaining === 0) {
        this.srv.fault("truncated");
        chunk = chunk.slice(0, Math.max(8, chunk.length >> 1));
      }
      this.write(chunk);
    } else this.write(`${pre}${JSON.stringify(text)}${this.sufNull}${usage}}\n\n`);
  }

  private finishStream(): void {
    if (this.closed) return;
    if (!this.faults.truncated) {
      // (With a truncated fault the final chunk was cut and [DONE] never comes.)
      if (this.includeUsage) {
        if (this.faults.missingUsage) this.srv.fault("missing-usage");
        else this.write(`${this.headPrefix}],"usage":${this.usageJson()}}\n\n`);
      }
      this.write("data: [DONE]\n\n");
    }
    this.closed = true;
    this.end();
    this.srv.release(this);
  }

  private finishJson(): void {
    if (this.closed) return;
    this.closed = true;
    const model = this.srv.deps.modelName;
    const choices = this.choices.map((req, index) => {
      let text = "";
      const reasoningEnd = this.chat ? Math.min(this.reasoningTokens, req.generated) : 0;
      let reasoning = "";
      for (let i = 0; i < req.generated; i++) {
        if (i < reasoningEnd) reasoning += req.text(i);
        else text += req.text(i);
      }
      const finish = req.finished === "abort" ? null : req.finished;
      if (this.chat)
        return {
          index,
          message: {
            role: "assistant",
            content: text,
            refusal: null,
            annotations: null,
            audio: null,
            function_call: null,
            tool_calls: [],
            reasoning_content: this.reasoningTokens > 0 ? reasoning : null,
          },
          logprobs: null,
          finish_reason: finish,
          stop_reason: req.stopReason,
        };
      return {
        index,
        text,
        logprobs: null,
        finish_reason: finish,
        stop_reason: req.stopReason,
        prompt_logprobs: null,
      };
    });
    let usage: unknown = {
      prompt_tokens: this.promptTokens,
      total_tokens: this.promptTokens + this.completionTokens,
      completion_tokens: this.completionTokens,
      prompt_tokens_details: this.cachedDetails(),
    };
    if (this.faults.missingUsage) {
      this.srv.fault("missing-usage");
      usage = null;
    }
    const body = this.chat
      ? {
          id: this.id,
          object: "chat.completion",
          created: this.created,
          model,
          choices,
          service_tier: null,
          system_fingerprint: null,
          usage,
          prompt_logprobs: null,
          kv_transfer_params: null,
        }
      : {
          id: this.id,
          object: "text_completion",
          created: this.created,
          model,
          choices,
          service_tier: null,
          system_fingerprint: null,
          usage,
          kv_transfer_params: null,
        };
    let text = JSON.stringify(body);
    if (this.faults.truncated) {
      this.srv.fault("truncated");
      text = text.slice(0, text.length >> 1);
      this.res.writeHead(200, { "content-type": "application/json" });
      this.res.end(text);
    } else sendJson(this.res, 200, text);
    this.srv.release(this);
  }

  /** The client went away: abort every choice still running. */
  clientGone(): void {
    if (this.closed) return;
    this.closed = true;
    for (const c of this.choices) this.srv.deps.engine.abort(c);
    this.srv.release(this);
  }
}

/** Pending-connection queue depth (the kernel caps it at net.core.somaxconn). */
export const LISTEN_BACKLOG = 4096;

export class SimServer {
  readonly deps: ServerDeps;
  readonly http: Server;
  private reqCounter = 0;
  private readonly open = new Set<Exchange>();
  private draining = false;
  private readonly sockets = new Set<Socket>();

  constructor(deps: ServerDeps) {
    this.deps = deps;
    this.http = createServer({ noDelay: true, keepAliveTimeout: 5000 }, (req, res) => this.handle(req, res));
    // `Expect: 100-continue` (curl, for bodies over 1 MB): a body past the limit is refused before it is sent.
    this.http.on("checkContinue", (req, res) => {
      if (!(Number(req.headers["content-length"] ?? 0) > maxBodyBytes(this.deps.maxModelLen))) res.writeContinue();
      this.handle(req, res);
    });
    this.http.on("connection", (s: Socket) => {
      this.sockets.add(s);
      s.on("close", () => this.sockets.delete(s));
    });
    // Node's default listen backlog (511) resets a burst of 1,000 simultaneous connects; callers pass
    // (port, host, cb), so give every listen call a deeper backlog unless it names one.
    const listen = this.http.listen.bind(this.http) as (...a: unknown[]) => Server;
    (this.http as { listen: unknown }).listen = (...a: unknown[]): Server => {
      if (typeof a[0] === "number" && (a.length < 3 || typeof a[2] === "function")) {
        const cb = typeof a[a.length - 1] === "function" ? a[a.length - 1] : undefined;
        const host = typeof a[1] === "string" ? a[1] : undefined;
        return listen({ port: a[0], host, backlog: LISTEN_BACKLOG }, cb);
      }
      return listen(...a);
    };
  }

  fault(kind: FaultKind): void {
    this.deps.metrics.countFault(kind);
  }

  release(x: Exchange): void {
    this.open.delete(x);
  }

  get openStreams(): number {
    return this.open.size;
  }

  /** Stops accepting, lets open requests finish (up to maxMs), then closes every socket. */
  async shutdown(maxMs: number): Promise<void> {
    this.draining = true;
    const closed = new Promise<void>((r) => this.http.close(() => r()));
    this.http.closeIdleConnections();
    const deadline = Date.now() + maxMs;
    while (this.open.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
    for (const s of this.sockets) s.destroy();
    await closed;
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    // Arrival: the request line and headers were just parsed, in the socket read that brought them.
    const receivedAt = this.deps.engine.opts.clock();
    const url = req.url ?? "/";
    const q = url.indexOf("?");
    const path = q >= 0 ? url.slice(0, q) : url;
    const method = req.method ?? "GET";
    if (this.draining) {
      res.setHeader("connection", "close");
      sendJson(res, 503, errorBody(503, "Server is shutting down", "ServiceUnavailableError", null));
      return;
    }
    try {
      if (method === "GET" || method === "HEAD") {
        switch (path) {
          case "/health":
            res.writeHead(200, { "content-length": 0 });
            return void res.end();
          case "/ping":
            res.writeHead(200, { "content-length": 0 });
            return void res.end();
          case "/version":
            sendJson(res, 200, JSON.stringify({ version: this.deps.vllmVersion }));
            return;
          case "/v1/models":
            sendJson(res, 200, this.modelsJson());
            return;
          case "/metrics":
            this.sendMetrics(req, res);
            return;
        }
        const text = this.deps.extraText?.[path];
        if (text) {
          const body = text();
          res.writeHead(200, {
            "content-type": "text/plain; version=0.0.4; charset=utf-8",
            "content-length": Buffer.byteLength(body),
          });
          res.end(method === "HEAD" ? undefined : body);
          return;
        }
        const extra = debugRoute(this.deps.extraGet, path, req.socket.remoteAddress);
        if (extra) {
          sendJson(res, 200, JSON.stringify(extra()));
          return;
        }
      }
      if (method === "POST") {
        switch (path) {
          case "/v1/completions":
            this.withBody(req, res, (b) => this.completion(res, b, false, receivedAt, req.headers["x-request-id"]));
            return;
          case "/v1/chat/completions":
            this.withBody(req, res, (b) => this.completion(res, b, true, receivedAt, req.headers["x-request-id"]));
            return;
          case "/tokenize":
            this.withBody(req, res, (b) => this.tokenizeRoute(res, b));
            return;
          case "/detokenize":
            this.withBody(req, res, (b) => this.detokenizeRoute(res, b));
            return;
          case "/start_profile":
          case "/stop_profile": {
            const p = this.deps.profiler;
            if (!p) break;
            req.resume();
            const op = path === "/start_profile" ? p.start() : p.stop();
            op.then(
              () => {
                res.writeHead(200, { "content-length": 0 });
                res.end();
              },
              (err: Error) => sendJson(res, 500, errorBody(500, err.message, "InternalServerError", null)),
            );
            return;
          }
        }
      }
      const known = [
        "/health",
        "/ping",
        "/version",
        "/v1/models",
        "/metrics",
        "/v1/completions",
        "/v1/chat/completions",
        "/tokenize",
        "/detokenize",
      ];
      if (known.includes(path)) sendJson(res, 405, JSON.stringify({ detail: "Method Not Allowed" }));
      else sendJson(res, 404, JSON.stringify({ detail: "Not Found" }));
    } catch (err) {
      this.sendError(res, err);
    }
  }

  private sendError(res: ServerResponse, err: unknown): void {
    if (err instanceof HttpError) sendJson(res, err.status, errorBody(err.status, err.message, err.type, err.param));
    else sendJson(res, 500, errorBody(500, String((err as Error)?.message ?? err), "InternalServerError", null));
  }

  private modelsJson(): string {
    const created = Math.floor(Date.now() / 1000);
    const name = this.deps.modelName;
    return JSON.stringify({
      object: "list",
      data: [
        {
          id: name,
          object: "model",
          created,
          owned_by: "vllm",
          root: name,
          parent: null,
          max_model_len: this.deps.maxModelLen,
          permission: [
            {
              id: `modelperm-${uuidHex(0x7fffffff, this.deps.seed)}`,
              object: "model_permission",
              created,
              allow_create_engine: false,
              allow_sampling: true,
              allow_logprobs: true,
              allow_search_indices: false,
              allow_view: true,
              allow_fine_tuning: false,
              organization: "*",
              group: null,
              is_blocking: false,
            },
          ],
        },
      ],
    });
  }

  private sendMetrics(req: IncomingMessage, res: ServerResponse): void {
    const accept = String(req.headers.accept ?? "");
    const om = accept.includes("application/openmetrics-text");
    const body = this.deps.metrics.render(om);
    res.writeHead(200, {
      "content-type": om
        ? "application/openmetrics-text; version=1.0.0; charset=utf-8"
        : "text/plain; version=0.0.4; charset=utf-8",
      "content-length": Buffer.byteLength(body),
    });
    res.end(req.method === "HEAD" ? undefined : body);
  }

  private withBody(req: IncomingMessage, res: ServerResponse, fn: (body: unknown) => void): void {
    const limit = maxBodyBytes(this.deps.maxModelLen);
    const tooLarge = () => {
      // Answered at once (status, headers and the whole error body); the rest of the request is read and dropped,
      // not kept. The response ends only once the request has been read: ending it first lets Node close the
      // connection of a client that asked for close, which then fails its write with EPIPE before it reads the
      // answer. A request that keeps sending past DRAIN_MAX_BYTES or DRAIN_MAX_MS is cut off.
      if (res.destroyed) return;
      const text = errorBody(
        413,
        `Request body is larger than ${limit} bytes (64 bytes per token of max_model_len ${this.deps.maxModelLen})`,
        "BadRequestError",
        null,
      );
      res.writeHead(413, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
      res.write(text);
      req.removeAllListeners("data");
      req.removeAllListeners("end");
      let drained = 0;
      const finish = () => {
        clearTimeout(timer);
        if (!res.writableEnded) res.end();
      };
      const timer = setTimeout(() => {
        finish();
        req.socket.destroy();
      }, DRAIN_MAX_MS);
      req.on("data", (c: Buffer) => {
        drained += c.length;
        if (drained > DRAIN_MAX_BYTES) {
          finish();
          req.socket.destroy();
        }
      });
      req.on("end", finish);
      req.on("close", finish);
    };
    if (Number(req.headers["content-length"] ?? 0) > limit) {
      tooLarge();
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (c: Buffer) => {
      size += c.length;
      if (size > limit) {
        chunks.length = 0;
        tooLarge();
        return;
      }
      chunks.push(c);
    });
    req.on("end", () => {
      let body: unknown;
      try {
        const text = chunks.length === 1 ? chunks[0]!.toString("utf8") : Buffer.concat(chunks).toString("utf8");
        body = JSON.parse(text);
      } catch (err) {
        return this.sendError(res, bad(`JSON decode error: ${(err as Error).message}`));
      }
      try {
        fn(body);
      } catch (err) {
        this.sendError(res, err);
      }
    });
  }

  /** The request body as an object whose `model` (if any) is the served one. */
  private checkedBody(body: unknown): Record<string, unknown> {
    if (typeof body !== "object" || body === null || Array.isArray(body))
      throw bad("Input should be a valid dictionary");
    const b = body as Record<string, unknown>;
    if (b.model !== undefined && b.model !== null && b.model !== this.deps.modelName)
      throw new HttpError(404, `The model \`${String(b.model)}\` does not exist.`, "NotFoundError", "model");
    return b;
  }

  /** vLLM's POST /tokenize: {prompt} or {messages} → {count, max_model_len, tokens, token_strs}. */
  private tokenizeRoute(res: ServerResponse, body: unknown): void {
    const b = this.checkedBody(body);
    let ids: Uint32Array;
    // Wrong types are vLLM's 400 (pydantic), never a 500 from deeper in.
    optBool(b, "add_special_tokens");
    const wantStrs = optBool(b, "return_token_strs") === true;
    if (b.messages !== undefined) {
      const messages = checkedMessages(b.messages);
      const agp = optBool(b, "add_generation_prompt");
      const cont = optBool(b, "continue_final_message");
      if (cont === true && agp === true)
        throw bad("Cannot set both `continue_final_message` and `add_generation_prompt` to True.");
      // vLLM's default adds the generation prompt; continuing the last message leaves it off.
      ids = tokenizeChat(messages, agp ?? cont !== true);
    } else if (typeof b.prompt === "string") ids = tokenize(b.prompt);
    else if (b.prompt === undefined) throw bad("Field required: prompt", "prompt");
    else throw bad("prompt: Input should be a valid string", "prompt");
    const strs = wantStrs ? Array.from(ids, (id) => tokenPiece(id)!) : null;
    sendJson(
      res,
      200,
      JSON.stringify({
        count: ids.length,
        max_model_len: this.deps.maxModelLen,
        tokens: Array.from(ids),
        token_strs: strs,
      }),
    );
  }

  /** vLLM's POST /detokenize: {tokens} → {prompt}. */
  private detokenizeRoute(res: ServerResponse, body: unknown): void {
    const b = this.checkedBody(body);
    if (b.tokens === undefined) throw bad("Field required: tokens", "tokens");
    if (!Array.isArray(b.tokens) || !b.tokens.every((x) => Number.isInteger(x)))
      throw bad("tokens: Input should be a valid list of integers", "tokens");
    sendJson(res, 200, JSON.stringify({ prompt: detokenize(tokenIds(b.tokens as number[], "tokens")) }));
  }

  private completion(
    res: ServerResponse,
    body: unknown,
    chat: boolean,
    receivedAt: number,
    headerId: string | string[] | undefined,
  ): void {
    const b = this.checkedBody(body);
    const d = this.deps;
    let promptIds: Uint32Array;
    if (chat) {
      if (b.messages === undefined) throw bad("Field required: messages", "messages");
      const messages = checkedMessages(b.messages);
      // As vLLM: the generation prompt is added unless asked not to or continuing the last message.
      const agp = optBool(b, "add_generation_prompt") !== false;
      promptIds = tokenizeChat(messages, agp && optBool(b, "continue_final_message") !== true);
    } else {
      const p = b.prompt;
      if (typeof p === "string") promptIds = tokenize(p);
      else if (Array.isArray(p) && p.length > 0 && p.every((x) => Number.isInteger(x)))
        promptIds = tokenIds(p as number[], "prompt");
      else if (Array.isArray(p) && p.length === 1 && typeof p[0] === "string") promptIds = tokenize(p[0]);
      else if (Array.isArray(p) && p.length > 1) throw bad("inferscope sim serves one prompt per request", "prompt");
      else throw bad("Field required: prompt", "prompt");
    }
    const stream = b.stream === true;
    const so = b.stream_options as Record<string, unknown> | null | undefined;
    if (so !== undefined && so !== null && !stream)
      throw bad("Stream options can only be defined when `stream=True`.", "stream_options");
    const includeUsage = !!so && so.include_usage !== false;
    const continuousUsage = !!so && so.continuous_usage_stats === true && includeUsage;
    const n = b.n === undefined || b.n === null ? 1 : Number(b.n);
    if (!Number.isInteger(n) || n < 1) throw bad(`n must be at least 1, got ${String(b.n)}.`, "n");
    if (n > 128) throw bad(`n must be at most 128, got ${n}.`, "n");
    const temperature = b.temperature;
    if (temperature !== undefined && temperature !== null && (typeof temperature !== "number" || temperature < 0))
      throw bad(`temperature must be non-negative, got ${String(temperature)}.`, "temperature");
    const mt = chat ? (b.max_completion_tokens ?? b.max_tokens) : b.max_tokens;
    let paramsMaxTokens: number | null = null;
    if (mt !== undefined && mt !== null) {
      if (!Number.isInteger(mt) || (mt as number) < 1)
        throw bad(`max_tokens must be at least 1, got ${String(mt)}.`, "max_tokens");
      paramsMaxTokens = mt as number;
    }
    const promptLen = promptIds.length;
    if (promptLen === 0) throw bad("The prompt cannot be empty.", "prompt");
    const maxLen = d.maxModelLen;
    if (promptLen >= maxLen || (paramsMaxTokens !== null && promptLen + paramsMaxTokens > maxLen)) {
      const want = paramsMaxTokens ?? 0;
      throw bad(
        `This model's maximum context length is ${maxLen} tokens. However, you requested ${promptLen + want} tokens (${promptLen} in the messages, ${want} in the completion). Please reduce the length of the messages or completion.`,
        "input_tokens",
      );
    }
    const maxTokens = paramsMaxTokens ?? maxLen - promptLen;
    const minTokens = b.min_tokens === undefined || b.min_tokens === null ? 0 : Number(b.min_tokens);
    if (!Number.isInteger(minTokens) || minTokens < 0)
      throw bad(`min_tokens must be greater than or equal to 0, got ${String(b.min_tokens)}.`, "min_tokens");
    if (minTokens > maxTokens)
      throw bad(`min_tokens must be less than or equal to max_tokens=${maxTokens}, got ${minTokens}.`, "min_tokens");
    let stop: string[] | null = null;
    if (typeof b.stop === "string") stop = b.stop ? [b.stop] : null;
    else if (Array.isArray(b.stop))
      stop = (b.stop as unknown[]).filter((s): s is string => typeof s === "string" && s.length > 0);
    const ignoreEos = b.ignore_eos === true;
    const seedParam = b.seed;
    if (seedParam !== undefined && seedParam !== null && !Number.isInteger(seedParam))
      throw bad("seed must be an integer", "seed");

    const faults = d.faults.enabled ? d.faults.draw(maxTokens) : NO_FAULTS;
    const reqNo = ++this.reqCounter;
    if (faults.status) {
      const kind = faults.status === 500 ? "http500" : faults.status === 429 ? "http429" : "http503";
      this.fault(kind);
      const headers: Record<string, string> = faults.status === 500 ? {} : { "retry-after": "1" };
      const type =
        faults.status === 500
          ? "InternalServerError"
          : faults.status === 429
            ? "RateLimitError"
            : "ServiceUnavailableError";
      const msg =
        faults.status === 500
          ? "Internal server error (injected fault)"
          : faults.status === 429
            ? "Too many requests (injected fault)"
            : "Service unavailable (injected fault)";
      sendJson(res, faults.status, errorBody(faults.status, msg, type, null), headers);
      return;
    }
    // As vLLM names it: X-Request-Id, else the body's request_id, else a random id, behind the endpoint's prefix.
    // As SGLang does: the body's rid as it is, else a random hex id (the OpenAI routes pass rid on unchanged).
    const given = d.sglangNaming
      ? typeof b.rid === "string" && b.rid
        ? b.rid
        : null
      : typeof headerId === "string" && headerId
        ? headerId
        : typeof b.request_id === "string" && b.request_id
          ? b.request_id
          : null;
    const id = d.sglangNaming
      ? (given ?? uuidHex(reqNo, d.seed))
      : `${chat ? "chatcmpl" : "cmpl"}-${given ?? uuidHex(reqNo, d.seed)}`;
    const created = Math.floor(Date.now() / 1000);
    const reasoningTokens = chat && d.reasoning ? Math.floor(maxTokens * d.reasoningFraction) : 0;
    const ex = new Exchange(
      this,
      res,
      chat,
      stream,
      includeUsage,
      continuousUsage,
      id,
      created,
      promptLen,
      faults,
      reasoningTokens,
    );
    const baseSeed =
      seedParam !== undefined && seedParam !== null ? Number(seedParam) : mix32(d.seed ^ Math.imul(reqNo, 0x2545f491));
    for (let i = 0; i < n; i++) {
      ex.add(
        new SimRequest({
          id: reqNo,
          promptIds,
          maxTokens,
          minTokens,
          ignoreEos,
          stop,
          seed: mix32(baseSeed + i * 0x9e37),
          sink: ex,
          paramsMaxTokens,
          n,
        }),
      );
    }
    this.open.add(ex);
    res.on("close", () => {
      if (!res.writableFinished) ex.clientGone();
    });
    // Submitted before the headers are written, so no socket write sits between arrival and the engine.
    const go = (arrival: number | undefined) => {
      if (ex.closed) return;
      for (const c of ex.choices) d.engine.submit(c, arrival);
      ex.begin();
    };
    if (faults.slowHeaders) {
      // The fault holds the request in front of the server: arrival is stamped when it lets go.
      this.fault("slow-headers");
      setTimeout(go, Math.min(MAX_TIMER_MS, d.slowHeadersMs), undefined);
    } else go(receivedAt);
  }
}
