// A small HTTP/1.1 client for the load generator's hot path over plain TCP. Every socket reads into one
// shared buffer (net's `onread`), so no Buffer is allocated per read; chunked, Content-Length and
// close-delimited bodies are decoded in place and handed on as byte ranges of that buffer, which the
// receiver must consume (or copy) before returning. Keep-alive connections are reused. bench:client
// measures it against undici in the same run; https and the plain GETs stay on undici.
import net from "node:net";
import { perfNow } from "./clock.ts";

/** One response's receiver. Ranges passed to onBody are only valid during the call. */
export interface H1Handler {
  /** `tPerf`: performance.now()'s clock (perfNow) when the socket read that completed the head returned. */
  onHead(status: number, statusText: string, headers: H1Headers, tPerf: number): void;
  /** `tPerf`: performance.now()'s clock (perfNow) when the socket read that carried these bytes returned; `read`: its sequence number. */
  onBody(buf: Buffer, start: number, end: number, tPerf: number, read: number): void;
  onEnd(): void;
  onFail(err: H1Error): void;
}

export interface H1Headers {
  contentType: string;
  contentLength: number;
  chunked: boolean;
  keepAlive: boolean;
  /** All header fields, names lower-cased (repeated fields joined with ", "). */
  fields: Record<string, string>;
}

export interface H1Error extends Error {
  code: string;
}

function h1Error(code: string, message: string, cause?: unknown): H1Error {
  const e = new Error(message, cause ? { cause } : undefined) as H1Error;
  e.code = code;
  return e;
}

// One buffer for every socket on this thread: reads are delivered one at a time and consumed synchronously.
const READ_BUF_SIZE = 256 * 1024;
let sharedReadBuf: Buffer | null = null;
// The buffer itself goes to net, not a function returning it: net calls such a function after every
// read and hands its result back to C++ as the next read's buffer (per-read work the floor does not do).
const readBuffer = () => {
  if (!sharedReadBuf) sharedReadBuf = Buffer.allocUnsafe(READ_BUF_SIZE);
  return sharedReadBuf;
};

const MAX_HEAD = 64 * 1024;
const LF = 0x0a;
const CR = 0x0d;
const HTTP_1 = Buffer.from("HTTP/1.", "latin1");
const isDigit = (c: number): boolean => c >= 0x30 && c <= 0x39;
/** What String.prototype.trim strips, in latin1: SP, HT, LF, VT, FF, CR, NBSP. */
const isSpace = (c: number): boolean => c === 0x20 || (c >= 0x09 && c <= 0x0d) || c === 0xa0;
// Header names servers send on every response, lower-cased: matched in place, no string made.
const KNOWN_NAMES = [
  "date",
  "vary",
  "server",
  "connection",
  "keep-alive",
  "content-type",
  "cache-control",
  "x-request-id",
  "content-length",
  "content-encoding",
  "transfer-encoding",
  "x-accel-buffering",
].map((n) => ({ n, bytes: Buffer.from(n, "latin1") }));
/** No CR in b[s, e) (a reason phrase cannot hold one). */
function noCR(b: Buffer, s: number, e: number): boolean {
  for (let i = s; i < e; i++) if (b[i] === CR) return false;
  return true;
}
/** b[s, e) as one of KNOWN_NAMES, compared without case; null when it is not one. */
function knownName(b: Buffer, s: number, e: number): string | null {
  const len = e - s;
  for (let k = 0; k < KNOWN_NAMES.length; k++) {
    const { n, bytes } = KNOWN_NAMES[k]!;
    if (bytes.length !== len) continue;
    let i = 0;
    for (; i < len; i++) {
      const c = b[s + i]!;
      if ((c >= 0x41 && c <= 0x5a ? c | 0x20 : c) !== bytes[i]) break;
    }
    if (i === len) return n;
  }
  return null;
}

// Parser states.
const S_IDLE = 0;
const S_HEAD = 1;
const S_CHUNK_SIZE = 2;
const S_CHUNK_EXT = 3;
const S_CHUNK_DATA = 4;
const S_CHUNK_DATA_END = 5;
const S_TRAILER = 6;
const S_LENGTH = 7;
const S_UNTIL_CLOSE = 8;

let readSeq = 0;

/**
 * Called at every socket read with its timestamp, before the bytes are handled. The open-loop
 * dispatcher uses it to send requests that fell due while a burst of reads holds the event loop,
 * instead of waiting for the burst to end (timers and immediates only run between poll phases).
 */
let readHook: ((tPerf: number) => void) | null = null;

export function setReadHook(fn: ((tPerf: number) => void) | null): void {
  readHook = fn;
}

/** Called at every connection a pool opens on this thread (tests and bench:replay: no handshake in a burst). */
let connectHook: ((tPerf: number) => void) | null = null;

export function setConnectHook(fn: ((tPerf: number) => void) | null): void {
  connectHook = fn;
}

/** A response head: status line and fields (names lower-cased, repeated ones joined with ", "). */
export type ParsedHead =
  | { status: number; minor: number; reason: string; fields: Record<string, string> }
  | { error: string };

/**
 * Parses b[0, len), a whole response head (status line, fields, blank line), from the bytes: a string
 * per field value and none per line or name (common names are constants), so a head costs a few hundred
 * bytes of garbage, not kilobytes (bench:client's per-read allocation). Lines end in CRLF or bare LF;
 * names and values are trimmed as String.prototype.trim would.
 */
export function parseResponseHead(b: Buffer, len: number): ParsedHead {
  let le = b.indexOf(LF, 0);
  if (le < 0 || le > len) le = len;
  const sl = le > 0 && b[le - 1] === CR ? le - 1 : le;
  // HTTP/1.x SP 3DIGIT [SP reason]
  const ok =
    sl >= 12 &&
    HTTP_1.compare(b, 0, 7) === 0 &&
    (b[7] === 0x30 || b[7] === 0x31) &&
    b[8] === 0x20 &&
    isDigit(b[9]!) &&
    isDigit(b[10]!) &&
    isDigit(b[11]!) &&
    (sl === 12 || b[12] === 0x20) &&
    noCR(b, 13, sl);
  if (!ok) {
    return { error: `not an HTTP/1.x response: ${JSON.stringify(b.toString("latin1", 0, sl).slice(0, 80))}` };
  }
  const status = (b[9]! - 0x30) * 100 + (b[10]! - 0x30) * 10 + (b[11]! - 0x30);
  // Informational (100 Continue, 103 Early Hints): the caller waits for the real head.
  if (status >= 100 && status < 200) return { status, minor: b[7]! - 0x30, reason: "", fields: {} };
  const reason = sl <= 13 ? "" : sl === 15 && b[13] === 0x4f && b[14] === 0x4b ? "OK" : b.toString("latin1", 13, sl);
  const fields: Record<string, string> = {};
  for (let ls = le + 1; ls < len; ) {
    let e = b.indexOf(LF, ls);
    if (e < 0 || e > len) e = len;
    const next = e + 1;
    if (e > ls && b[e - 1] === CR) e--;
    if (e > ls) {
      let c = ls;
      while (c < e && b[c] !== 0x3a) c++;
      if (c === e || c === ls) {
        return { error: `bad header line ${JSON.stringify(b.toString("latin1", ls, e).slice(0, 80))}` };
      }
      let ns = ls;
      let ne = c;
      while (ns < ne && isSpace(b[ns]!)) ns++;
      while (ne > ns && isSpace(b[ne - 1]!)) ne--;
      let vs = c + 1;
      let ve = e;
      while (vs < ve && isSpace(b[vs]!)) vs++;
      while (ve > vs && isSpace(b[ve - 1]!)) ve--;
      const name = knownName(b, ns, ne) ?? b.toString("latin1", ns, ne).toLowerCase();
      const value = vs === ve ? "" : b.toString("latin1", vs, ve);
      const had = fields[name];
      fields[name] = had === undefined ? value : `${had}, ${value}`;
    }
    ls = next;
  }
  return { status, minor: b[7]! - 0x30, reason, fields };
}

class H1Conn {
  // What every socket read touches comes first (V8 lays fields out in the order they are defined): one
  // or two cache lines of this connection's, which is out of cache by its next read.
  req: H1Request | null = null;
  /** The request's handler, kept here too: a read then need not fetch the request object's line. */
  private handler: H1Handler | null = null;
  state = S_IDLE;
  /** Bytes of the current response received so far (0: a stale keep-alive connection may be retried). */
  gotBytes = 0;
  private remaining = 0;
  private chunkSize = 0;
  private sizeDigits = 0;
  readonly socket: net.Socket;
  connected = false;
  /** Opened ahead of use (preconnect): idle before its first request, so it may be stale like a reused one. */
  preopened = false;
  /** Hears whether the connection was made (preconnect). */
  onConnected: ((ok: boolean) => void) | null = null;
  dead = false;
  /** Requests sent on this connection (a reused one may have been closed by the server meanwhile). */
  uses = 0;
  idleSincePerf = 0;
  keepAliveMs: number;
  private head: Buffer | null = null;
  private headLen = 0;
  /** Head scanner: 0 inside a line, 1 just after LF, 2 after LF CR. */
  private headEol = 0;
  private trailerLineLen = 0;
  private keepAlive = true;
  private connectTimer: NodeJS.Timeout | null = null;
  private lastError: Error | null = null;

  constructor(
    private readonly pool: H1Pool,
    host: string,
    port: number,
    connectTimeoutMs: number,
    defaultKeepAliveMs: number,
  ) {
    this.keepAliveMs = defaultKeepAliveMs;
    if (connectHook !== null) connectHook(perfNow());
    this.socket = net.connect({
      host,
      port,
      noDelay: true,
      onread: {
        buffer: readBuffer(),
        callback: (n: number, buf: Uint8Array) => {
          this.onBytes(buf as Buffer, n);
          return true;
        },
      },
    });
    this.connectTimer = setTimeout(() => {
      this.connectTimer = null;
      if (!this.connected)
        this.fail(h1Error("H1_CONNECT_TIMEOUT", `connect timeout after ${connectTimeoutMs} ms (${host}:${port})`));
    }, connectTimeoutMs);
    this.socket.once("connect", () => {
      this.connected = true;
      this.onConnected?.(true);
      this.onConnected = null;
      if (this.connectTimer) clearTimeout(this.connectTimer);
      this.connectTimer = null;
    });
    this.socket.on("error", (err) => {
      this.lastError = err;
    });
    this.socket.on("close", () => this.onClose());
  }

  send(req: H1Request): void {
    this.req = req;
    this.handler = req.handler;
    req.conn = this;
    this.state = S_HEAD;
    this.headLen = 0;
    this.headEol = 0;
    this.gotBytes = 0;
    this.uses++;
    if (typeof req.body === "string") this.socket.write(req.head + req.body);
    else {
      // A pre-encoded body (a long prompt) goes out as is: no UTF-8 encoding at send time.
      this.socket.cork();
      this.socket.write(req.head);
      this.socket.write(req.body);
      this.socket.uncork();
    }
  }

  /** Detaches the request in flight, marks it settled and returns its handler. */
  private settle(): H1Handler | null {
    const r = this.req;
    if (!r) return null;
    this.req = null;
    r.conn = null;
    this.state = S_IDLE;
    if (r.settled) return null;
    r.settled = true;
    return r.handler;
  }

  private onBytes(buf: Buffer, n: number): void {
    const r = this.req;
    if (!r) {
      // Bytes with no request outstanding: the server broke the protocol; drop the connection.
      this.destroy();
      return;
    }
    const h = this.handler!;
    this.gotBytes += n;
    const t = perfNow();
    const seq = ++readSeq;
    if (readHook !== null) readHook(t);
    let pos = 0;
    while (pos < n && this.req === r) {
      switch (this.state) {
        case S_HEAD:
          pos = this.readHead(buf, pos, n, t);
          break;
        case S_CHUNK_SIZE: {
          const c = buf[pos++]!;
          const v =
            c >= 0x30 && c <= 0x39 ? c - 0x30 : c >= 0x61 && c <= 0x66 ? c - 87 : c >= 0x41 && c <= 0x46 ? c - 55 : -1;
          if (v >= 0) {
            if (++this.sizeDigits > 12) {
              this.protocolError("chunk size too large");
              return;
            }
            this.chunkSize = this.chunkSize * 16 + v;
          } else if (c === LF) {
            if (this.sizeDigits === 0) {
              this.protocolError("empty chunk size line");
              return;
            }
            this.startChunk();
          } else if (c === CR || c === 0x3b || c === 0x20 || c === 0x09) {
            if (this.sizeDigits === 0) {
              this.protocolError("chunk size line does not start with a hex number");
              return;
            }
            // The usual CRLF right after the size: no search for the line's end (a native call per chunk).
            if (c === CR && pos < n && buf[pos] === LF) {
              pos++;
              this.startChunk();
            } else this.state = S_CHUNK_EXT;
          } else {
            this.protocolError(`bad byte 0x${c.toString(16)} in a chunk size line`);
            return;
          }
          break;
        }
        case S_CHUNK_EXT: {
          const nl = buf.indexOf(LF, pos);
          if (nl < 0 || nl >= n) pos = n;
          else {
            pos = nl + 1;
            this.startChunk();
          }
          break;
        }
        case S_CHUNK_DATA: {
          const take = Math.min(this.remaining, n - pos);
          this.remaining -= take;
          const s = pos;
          pos += take;
          if (this.remaining === 0) this.state = S_CHUNK_DATA_END;
          h.onBody(buf, s, pos, t, seq);
          break;
        }
        case S_CHUNK_DATA_END: {
          const c = buf[pos++]!;
          if (c === LF) {
            this.state = S_CHUNK_SIZE;
            this.chunkSize = 0;
            this.sizeDigits = 0;
          } else if (c !== CR) {
            this.protocolError("chunk data not followed by CRLF");
            return;
          }
          break;
        }
        case S_TRAILER: {
          const c = buf[pos++]!;
          if (c === LF) {
            if (this.trailerLineLen === 0) {
              this.complete(pos < n);
              return;
            }
            this.trailerLineLen = 0;
          } else if (c !== CR) this.trailerLineLen++;
          break;
        }
        case S_LENGTH: {
          const take = Math.min(this.remaining, n - pos);
          this.remaining -= take;
          const s = pos;
          pos += take;
          h.onBody(buf, s, pos, t, seq);
          if (this.remaining === 0 && this.req === r) {
            this.complete(pos < n);
            return;
          }
          break;
        }
        case S_UNTIL_CLOSE:
          h.onBody(buf, pos, n, t, seq);
          pos = n;
          break;
        default: {
          this.protocolError("unexpected bytes");
          return;
        }
      }
    }
  }

  private startChunk(): void {
    if (this.chunkSize === 0) {
      this.state = S_TRAILER;
      this.trailerLineLen = 0;
    } else {
      this.state = S_CHUNK_DATA;
      this.remaining = this.chunkSize;
    }
  }

  /** Accumulates the status line and headers; returns the position after what it consumed. */
  private readHead(buf: Buffer, pos: number, n: number, tPerf: number): number {
    // Find the blank line that ends the head (CRLF CRLF, or bare LFs), possibly split across reads.
    let st = this.headEol;
    let end = -1;
    for (let i = pos; i < n; i++) {
      const c = buf[i]!;
      if (c === LF) {
        if (st !== 0) {
          end = i + 1;
          break;
        }
        st = 1;
      } else if (c === CR) st = st === 1 ? 2 : 0;
      else st = 0;
    }
    this.headEol = st;
    const stop = end < 0 ? n : end;
    const need = this.headLen + (stop - pos);
    if (need > MAX_HEAD) {
      this.protocolError(`response head larger than ${MAX_HEAD} bytes`);
      return n;
    }
    if (!this.head || this.head.length < need) {
      const g = Buffer.allocUnsafe(Math.min(MAX_HEAD, Math.max(1024, need * 2)));
      if (this.head) this.head.copy(g, 0, 0, this.headLen);
      this.head = g;
    }
    buf.copy(this.head, this.headLen, pos, stop);
    this.headLen = need;
    if (end < 0) return n;
    const headLen = this.headLen;
    this.headLen = 0;
    this.headEol = 0;
    const r = this.req;
    this.parseHead(this.head, headLen, tPerf);
    // A response with no body ends at its head; bytes after it in the same read break the protocol.
    if (this.req === r && r && this.state === S_LENGTH && this.remaining === 0) {
      this.complete(end < n);
      return n;
    }
    return end;
  }

  /** `tPerf`: the read that completed the head (its stamp, like the body's). */
  private parseHead(b: Buffer, len: number, tPerf: number): void {
    const head = parseResponseHead(b, len);
    if ("error" in head) {
      this.protocolError(head.error);
      return;
    }
    const { status, reason, fields } = head;
    if (status >= 100 && status < 200) {
      // Informational (100 Continue, 103 Early Hints): the real head follows.
      this.state = S_HEAD;
      return;
    }
    const te = (fields["transfer-encoding"] ?? "").toLowerCase();
    const chunked = /(^|,)\s*chunked\s*$/.test(te);
    const cl = fields["content-length"];
    const contentLength = cl !== undefined && /^\d+$/.test(cl) ? Number(cl) : -1;
    if (cl !== undefined && contentLength < 0 && !chunked) {
      this.protocolError(`bad Content-Length ${JSON.stringify(cl)}`);
      return;
    }
    const conn = (fields.connection ?? "").toLowerCase();
    this.keepAlive = head.minor === 1 ? !/\bclose\b/.test(conn) : /\bkeep-alive\b/.test(conn);
    const ka = /timeout=(\d+)/i.exec(fields["keep-alive"] ?? "");
    // The server's hint only lowers our limit (a second early, to beat its own close).
    if (ka) this.keepAliveMs = Math.min(this.keepAliveMs, Math.max(0, Number(ka[1]) * 1000 - 1000));
    const headers: H1Headers = {
      contentType: fields["content-type"] ?? "",
      contentLength,
      chunked,
      keepAlive: this.keepAlive,
      fields,
    };
    const r = this.req!;
    if (status === 204 || status === 304) {
      // Never a body, whatever the headers say (RFC 9112 §6.3).
      this.state = S_LENGTH;
      this.remaining = 0;
    } else if (chunked) {
      this.state = S_CHUNK_SIZE;
      this.chunkSize = 0;
      this.sizeDigits = 0;
    } else if (contentLength >= 0) {
      this.state = S_LENGTH;
      this.remaining = contentLength;
    } else {
      this.state = S_UNTIL_CLOSE;
      this.keepAlive = false;
    }
    r.handler.onHead(status, reason, headers, tPerf);
  }

  /** The response ended: hand the connection back (or close it if it cannot be reused). */
  private complete(extraBytes: boolean): void {
    const h = this.settle();
    if (extraBytes || !this.keepAlive) this.destroy();
    else this.pool.release(this);
    h?.onEnd();
  }

  private protocolError(msg: string): void {
    this.fail(h1Error("H1_PROTOCOL", `malformed HTTP response: ${msg}`));
  }

  private fail(err: H1Error): void {
    const h = this.settle();
    this.destroy();
    h?.onFail(err);
  }

  /** Aborts the response in flight (the connection is closed). */
  abort(reason: string): void {
    this.fail(h1Error("H1_ABORTED", reason));
  }

  destroy(): void {
    if (this.dead) return;
    this.dead = true;
    if (this.connectTimer) clearTimeout(this.connectTimer);
    this.connectTimer = null;
    this.pool.forget(this);
    this.socket.destroy();
  }

  private onClose(): void {
    this.onConnected?.(false);
    this.onConnected = null;
    const wasDead = this.dead;
    this.dead = true;
    if (this.connectTimer) clearTimeout(this.connectTimer);
    this.connectTimer = null;
    this.pool.forget(this);
    const r = this.req;
    if (!r || wasDead) return;
    const untilClose = this.state === S_UNTIL_CLOSE;
    // A reused keep-alive connection the server closed before answering: safe to send again.
    if (!untilClose && this.connected && (this.uses > 1 || this.preopened) && this.gotBytes === 0 && !r.retried) {
      this.req = null;
      r.conn = null;
      this.state = S_IDLE;
      if (this.pool.retry(r)) return;
      this.req = r;
    }
    const h = this.settle();
    if (!h) return;
    if (untilClose) {
      h.onEnd();
      return;
    }
    const e = this.lastError as (Error & { code?: string }) | null;
    if (!this.connected) {
      h.onFail(h1Error(e?.code ?? "ECONNREFUSED", e?.message ?? "connection failed", e));
      return;
    }
    h.onFail(h1Error(e?.code ?? "H1_CLOSED", e ? `${e.message}` : "the server closed the connection", e ?? undefined));
  }
}

/** One request: queued, on a connection, or settled. */
class H1Request {
  conn: H1Conn | null = null;
  retried = false;
  settled = false;
  constructor(
    readonly head: string,
    readonly body: string | Buffer,
    readonly handler: H1Handler,
  ) {}
}

export interface H1PoolOptions {
  /** At most this many connections; null = one per concurrent request. */
  connections?: number | null;
  connectTimeoutMs?: number;
  /** Idle keep-alive connections older than this are not reused (a server's Keep-Alive hint lowers it). */
  keepAliveMs?: number;
}

/** Connections to one origin (http: only). */
export class H1Pool {
  private readonly host: string;
  private readonly port: number;
  private readonly hostHeader: string;
  private readonly idle: H1Conn[] = [];
  private readonly all = new Set<H1Conn>();
  private readonly queue: H1Request[] = [];
  private readonly limit: number;
  private readonly connectTimeoutMs: number;
  private readonly keepAliveMs: number;
  private closed = false;
  private lastMethod = "";
  private lastPath = "";
  private lastHeaders: Record<string, string> | null = null;
  private headPrefix = "";

  constructor(origin: string, opts: H1PoolOptions = {}) {
    const u = new URL(origin);
    if (u.protocol !== "http:") throw new Error(`H1Pool speaks plain http only, not ${u.protocol}`);
    this.host = u.hostname.replace(/^\[|\]$/g, "");
    this.port = Number(u.port || 80);
    this.hostHeader = u.host;
    this.limit = opts.connections ?? Number.POSITIVE_INFINITY;
    this.connectTimeoutMs = opts.connectTimeoutMs ?? 5000;
    this.keepAliveMs = opts.keepAliveMs ?? 4000;
  }

  /** Sends a request; the handler hears its headers, data ranges, then its end or an error. */
  request(
    method: string,
    path: string,
    headers: Record<string, string>,
    body: string | Buffer,
    handler: H1Handler,
  ): { abort(reason: string): void } {
    // The head up to content-length is the same for every request of a run: built once, not per request.
    if (method !== this.lastMethod || path !== this.lastPath || headers !== this.lastHeaders) {
      let head = `${method} ${path} HTTP/1.1\r\nhost: ${this.hostHeader}\r\n`;
      for (const k in headers) head += `${k}: ${headers[k]}\r\n`;
      this.lastMethod = method;
      this.lastPath = path;
      this.lastHeaders = headers;
      this.headPrefix = `${head}content-length: `;
    }
    const req = new H1Request(`${this.headPrefix}${Buffer.byteLength(body)}\r\n\r\n`, body, handler);
    this.dispatch(req);
    return {
      abort: (reason: string) => {
        if (req.settled) return;
        if (req.conn) req.conn.abort(reason);
        else {
          const i = this.queue.indexOf(req);
          if (i >= 0) this.queue.splice(i, 1);
          req.settled = true;
          handler.onFail(h1Error("H1_ABORTED", reason));
        }
      },
    };
  }

  private dispatch(req: H1Request): void {
    if (this.closed) {
      req.settled = true;
      req.handler.onFail(h1Error("H1_ABORTED", "the client was closed"));
      return;
    }
    const now = perfNow();
    let conn: H1Conn | undefined;
    while ((conn = this.idle.pop())) {
      if (!conn.dead && now - conn.idleSincePerf < conn.keepAliveMs) break;
      conn.destroy();
    }
    if (!conn) {
      if (this.all.size >= this.limit) {
        this.queue.push(req);
        return;
      }
      conn = new H1Conn(this, this.host, this.port, this.connectTimeoutMs, this.keepAliveMs);
      this.all.add(conn);
    }
    conn.send(req);
  }

  /**
   * Opens connections ahead of use, up to `n` in all and the pool's limit, so a run's first requests
   * do not pay for (or wait behind) TCP handshakes on its clock. Resolves when each is connected or has
   * failed; a failure is not an error here (the first request reports it).
   */
  preconnect(n: number): Promise<void> {
    const want = Math.min(n, this.limit) - this.all.size;
    const waits: Promise<void>[] = [];
    for (let k = 0; k < want && !this.closed; k++) waits.push(this.openAhead());
    return Promise.all(waits).then(() => undefined);
  }

  /**
   * Before a burst: makes sure `n` idle connections will still be fresh at `untilPerf` (performance.now()'s
   * clock), so none is connected, or dropped as stale, while the burst is sent. Idle ones that would be past
   * their keep-alive by then are closed now; connections still connecting count; never past the pool's
   * limit. Returns how many it opened (they join the idle set as they connect).
   */
  warm(n: number, untilPerf: number): number {
    if (this.closed || n <= 0) return 0;
    // From the top of the idle stack (what the burst pops first) down to the n-th fresh one: stale ones
    // on the way are closed now; below that the burst does not reach. No array is made per call.
    let fresh = 0;
    for (let k = this.idle.length - 1; k >= 0 && fresh < n; k--) {
      const c = this.idle[k]!;
      if (!c.dead && untilPerf - c.idleSincePerf < c.keepAliveMs) fresh++;
      else c.destroy(); // forget() removes idle[k]: the entries below k keep their places
    }
    const want = Math.min(n - fresh - this.connecting, this.limit - this.all.size);
    for (let k = 0; k < want; k++) void this.openAhead();
    return Math.max(0, want);
  }

  /** Connections opened ahead of use that are not connected yet. */
  private connecting = 0;

  private openAhead(): Promise<void> {
    const conn = new H1Conn(this, this.host, this.port, this.connectTimeoutMs, this.keepAliveMs);
    conn.preopened = true;
    this.all.add(conn);
    this.connecting++;
    return new Promise<void>((resolve) => {
      conn.onConnected = (ok) => {
        this.connecting--;
        if (ok && !conn.dead) {
          conn.idleSincePerf = perfNow();
          this.idle.push(conn);
        }
        resolve();
      };
    });
  }

  /** A stale keep-alive connection closed before answering: send once more on a fresh one. */
  retry(req: H1Request): boolean {
    if (req.retried || this.closed) return false;
    req.retried = true;
    this.dispatch(req);
    return true;
  }

  release(conn: H1Conn): void {
    if (conn.dead) return;
    const next = this.queue.shift();
    if (next) {
      conn.send(next);
      return;
    }
    conn.idleSincePerf = perfNow();
    this.idle.push(conn);
  }

  forget(conn: H1Conn): void {
    if (!this.all.delete(conn)) return;
    const i = this.idle.indexOf(conn);
    if (i >= 0) this.idle.splice(i, 1);
    // A slot opened: start a queued request on a new connection.
    if (this.queue.length && this.all.size < this.limit && !this.closed) this.dispatch(this.queue.shift()!);
  }

  get size(): number {
    return this.all.size;
  }

  close(): void {
    this.closed = true;
    for (const r of this.queue.splice(0)) {
      r.settled = true;
      r.handler.onFail(h1Error("H1_ABORTED", "the client was closed"));
    }
    for (const c of [...this.all]) {
      if (c.req) c.abort("the client was closed");
      else c.destroy();
    }
  }
}
