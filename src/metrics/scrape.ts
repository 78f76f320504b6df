// Fetching an exposition: HTTP(S) with undici (own Agent, explicit timeouts, gzip, size cap), a file, or stdin.
import { readFile, stat } from "node:fs/promises";
import { createGunzip, gunzipSync } from "node:zlib";
import type { Dispatcher } from "undici";
import { InputError, ParseError, TargetError } from "../errors.ts";
import { undici } from "../lazy.ts";
import { parseExposition } from "./parse.ts";
import type { Exposition, ExpositionFormat, MetricFamily, Snapshot } from "./types.ts";

// What Prometheus 3 asks for: UTF-8 names unescaped (`escaping=allow-utf-8`, quoted in the body, which
// the parser reads) from servers that know the parameter; older servers ignore it.
export const ACCEPT =
  "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6," +
  "application/openmetrics-text;version=0.0.1;q=0.5," +
  "text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4," +
  "text/plain;version=0.0.4;q=0.3,*/*;q=0.2";
export const DEFAULT_MAX_BYTES = 64 * 1024 * 1024;
export const DEFAULT_TIMEOUT_MS = 10_000;

export interface FetchOptions {
  /** Limit for connecting, for the response headers, and between body chunks (ms). */
  timeoutMs?: number;
  /** Largest body accepted, after decompression. */
  maxBytes?: number;
  /** Reuse an Agent across scrapes (watch); otherwise one is made and closed per call. */
  dispatcher?: Dispatcher;
  /** Wall clock for the snapshot's `atMs`. */
  now?: () => number;
  /** Where `-` reads from. */
  stdin?: NodeJS.ReadableStream;
  /** Extra headers (e.g. a bearer token for a gateway). */
  headers?: Record<string, string>;
}

export interface ScrapeOptions extends FetchOptions {
  /** OpenMetrics rules; a violation throws a ParseError with line:column. */
  strict?: boolean;
}

export interface RawBody {
  source: string;
  body: Buffer;
  contentType?: string;
  atMs: number;
  /** How long the fetch took, for the user's information. */
  elapsedMs: number;
}

export function isUrl(target: string): boolean {
  return /^https?:\/\//i.test(target);
}

/** Fetches or reads the raw bytes of a target: URL, file path, or `-` for stdin. */
export async function fetchRaw(target: string, opts: FetchOptions = {}): Promise<RawBody> {
  const now = opts.now ?? Date.now;
  const t0 = now();
  const maxBytes = opts.maxBytes ?? DEFAULT_MAX_BYTES;
  if (target === "-") {
    const stdin = opts.stdin ?? process.stdin;
    const body = maybeGunzip(await readCapped(stdin, maxBytes, "stdin"), maxBytes, "stdin");
    return { source: "stdin", body, atMs: now(), elapsedMs: now() - t0 };
  }
  if (!isUrl(target)) {
    if (/^[a-z][a-z0-9+.-]*:\/\//i.test(target))
      throw new InputError(`${target}: unsupported URL scheme (use http:// or https://, a file path, or -)`);
    const st = await stat(target).catch((err: NodeJS.ErrnoException) => {
      throw new InputError(`${target}: ${err.code === "ENOENT" ? "no such file or directory" : err.message}`);
    });
    if (st.isDirectory()) throw new InputError(`${target}: is a directory, not a metrics file`);
    if (st.size > maxBytes)
      throw new InputError(`${target}: ${byteSize(st.size)} is larger than the ${byteSize(maxBytes)} limit`);
    const body = maybeGunzip(await readFile(target), maxBytes, target);
    // A saved exposition was taken when it was written: diffs of two files use the files' times.
    return { source: target, body, atMs: st.mtimeMs, elapsedMs: now() - t0 };
  }
  return fetchUrl(metricsPath(target), opts, t0);
}

/** A server root (`http://host:8000` or `…/`) means its `/metrics`, where every engine we know serves it. */
export function metricsPath(url: string): string {
  try {
    const u = new URL(url);
    if (u.pathname === "/" && !u.search) {
      u.pathname = "/metrics";
      return u.toString();
    }
  } catch {}
  return url;
}

async function fetchUrl(url: string, opts: FetchOptions, t0: number): Promise<RawBody> {
  // A URL that does not parse is the user's typo (exit 2), not a server that cannot be reached.
  if (!URL.canParse(url))
    throw new InputError(`${url}: not a valid URL (expected http://host:port/metrics, a file path, or -)`);
  const now = opts.now ?? Date.now;
  const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const maxBytes = opts.maxBytes ?? DEFAULT_MAX_BYTES;
  const own = opts.dispatcher
    ? undefined
    : new (undici().Agent)({ connect: { timeout: timeoutMs }, headersTimeout: timeoutMs, bodyTimeout: timeoutMs });
  const dispatcher = opts.dispatcher ?? own!;
  // One deadline for the whole scrape, as Prometheus' scrape_timeout: a server that sends a byte a
  // second resets every per-read timer, so only a limit on the complete response ends it.
  const deadline = new AbortController();
  const progress = { bytes: 0 };
  const timer = setTimeout(() => deadline.abort(), timeoutMs);
  const overdue = () =>
    new TargetError(
      `cannot scrape ${url}: no complete response within ${secs(timeoutMs)} (--timeout); ` +
        `${progress.bytes ? `${progress.bytes} bytes of body received` : "no body received"}`,
      { url, code: "E_TIMEOUT" },
    );
  try {
    let res: Dispatcher.ResponseData;
    try {
      res = await undici().request(url, {
        dispatcher,
        method: "GET",
        headers: { accept: ACCEPT, "accept-encoding": "gzip", ...opts.headers },
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
        signal: deadline.signal,
      });
    } catch (err) {
      if (deadline.signal.aborted) throw overdue();
      throw targetError(url, err, timeoutMs);
    }
    const contentType = header(res.headers["content-type"]);
    const encoding = header(res.headers["content-encoding"])?.toLowerCase();
    let body: Buffer;
    try {
      body = await readBody(res.body, encoding === "gzip" || encoding === "x-gzip", maxBytes, url, progress);
    } catch (err) {
      if (deadline.signal.aborted) throw overdue();
      if (err instanceof InputError || err instanceof TargetError) throw err;
      throw targetError(url, err, timeoutMs);
    }
    if (res.statusCode >= 300 && res.statusCode < 400) {
      const to = header(res.headers.location);
      throw new TargetError(
        `${url}: HTTP ${res.statusCode} redirect${to ? ` to ${to}` : ""}; scrapes do not follow redirects`,
        { url, status: res.statusCode, hint: to ? `scrape the target itself: ${to}` : undefined },
      );
    }
    if (res.statusCode >= 400) {
      const msg = serverMessage(body, contentType);
      throw new TargetError(`${url}: HTTP ${res.statusCode}${msg ? `: ${msg}` : ""}`, {
        url,
        status: res.statusCode,
        hint:
          res.statusCode === 404
            ? "check the metrics path (trtllm-serve uses /prometheus/metrics)"
            : res.statusCode === 401 || res.statusCode === 403
              ? "send credentials with --header 'Authorization: Bearer …'"
              : undefined,
      });
    }
    return { source: url, body, contentType, atMs: now(), elapsedMs: now() - t0 };
  } finally {
    clearTimeout(timer);
    if (own) await own.close().catch(() => {});
  }
}

function secs(ms: number): string {
  return `${Number((ms / 1000).toPrecision(3))} s`;
}

function header(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

function targetError(url: string, err: unknown, timeoutMs: number): TargetError {
  const e = err as { code?: string; message?: string; cause?: { code?: string } };
  const code = e?.code ?? e?.cause?.code;
  const limit = `${secs(timeoutMs)} (--timeout)`;
  const words: Record<string, string> = {
    ECONNREFUSED: "connection refused (is the server running, and on this port?)",
    ENOTFOUND: "host not found",
    EAI_AGAIN: "host name lookup failed",
    ECONNRESET: "connection reset by the server",
    EHOSTUNREACH: "host unreachable",
    UND_ERR_CONNECT_TIMEOUT: `no connection within ${limit}`,
    UND_ERR_HEADERS_TIMEOUT: `timed out after ${limit} waiting for the response headers`,
    UND_ERR_BODY_TIMEOUT: `timed out after ${limit} waiting for the body`,
    UND_ERR_SOCKET: "the server closed the connection",
    UND_ERR_INVALID_ARG: "invalid URL",
    ERR_INVALID_URL: "invalid URL",
  };
  const what = (code && words[code]) ?? e?.message ?? String(err);
  return new TargetError(`cannot scrape ${url}: ${what}`, { url, cause: err });
}

async function readBody(
  stream: AsyncIterable<Buffer> & { destroy?: (e?: Error) => void },
  gzip: boolean,
  maxBytes: number,
  source: string,
  progress?: { bytes: number },
): Promise<Buffer> {
  if (!gzip) return readCapped(stream, maxBytes, source, progress);
  const gunzip = createGunzip();
  const pump = (async () => {
    try {
      for await (const chunk of stream) {
        if (progress) progress.bytes += chunk.length;
        if (!gunzip.write(chunk)) await onceDrain(gunzip);
      }
      gunzip.end();
    } catch (err) {
      gunzip.destroy(err as Error);
    }
  })();
  try {
    return await readCapped(gunzip, maxBytes, source);
  } catch (err) {
    stream.destroy?.();
    if (err instanceof InputError) throw err;
    throw new InputError(`${source}: the gzip body is corrupt (${(err as Error).message})`);
  } finally {
    await pump;
  }
}

function onceDrain(s: NodeJS.WritableStream): Promise<void> {
  return new Promise((resolve) => s.once("drain", resolve));
}

/** Reads a stream to its end, refusing (and stopping the stream) past `maxBytes`. */
async function readCapped(
  stream: AsyncIterable<Buffer | string> & { destroy?: (e?: Error) => void },
  maxBytes: number,
  source: string,
  progress?: { bytes: number },
): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const c of stream) {
    const b = typeof c === "string" ? Buffer.from(c) : c;
    total += b.length;
    if (progress) progress.bytes = total;
    if (total > maxBytes) {
      stream.destroy?.();
      throw new InputError(
        `${source}: the body is larger than the ${byteSize(maxBytes)} limit (stopped reading at ${byteSize(total)}); ` +
          "a metrics endpoint this large is probably not one",
      );
    }
    chunks.push(b);
  }
  return Buffer.concat(chunks, total);
}

function maybeGunzip(buf: Buffer, maxBytes: number, source: string): Buffer {
  if (buf.length < 2 || buf[0] !== 0x1f || buf[1] !== 0x8b) return buf;
  try {
    return gunzipSync(buf, { maxOutputLength: maxBytes });
  } catch (err) {
    const e = err as { code?: string };
    if (e.code === "ERR_BUFFER_TOO_LARGE")
      throw new InputError(`${source}: the decompressed body is larger than the ${byteSize(maxBytes)} limit`);
    throw new InputError(`${source}: looks gzipped but does not decompress (${(err as Error).message})`);
  }
}

/** The server's own words from an error body: JSON `error.message`/`detail`/`message`, or the first text line. */
export function serverMessage(body: Buffer, contentType?: string): string | undefined {
  const text = body.subarray(0, 4096).toString("utf8").trim();
  if (!text) return undefined;
  if (contentType?.includes("json") || text.startsWith("{")) {
    try {
      const j = JSON.parse(text) as Record<string, unknown>;
      const err = j.error;
      const pick =
        (typeof err === "object" && err && (err as Record<string, unknown>).message) ||
        (typeof err === "string" && err) ||
        j.detail ||
        j.message;
      if (typeof pick === "string") return pick;
    } catch {
      // not JSON after all: fall through to the text
    }
  }
  if (/^\s*<(!doctype|html)/i.test(text)) {
    const title = /<title>([^<]*)<\/title>/i.exec(text)?.[1];
    return title ? title.trim() : "an HTML error page";
  }
  return text.split("\n")[0]!.slice(0, 300);
}

/** A size in the unit it reads in: "100 bytes", "31.6 KiB", "64 MiB" (was always MiB: "the 0.00 MiB limit"). */
export function byteSize(n: number): string {
  if (n < 1024) return `${n} byte${n === 1 ? "" : "s"}`;
  if (n < 1048576) return `${+(n / 1024).toFixed(1)} KiB`;
  return `${+(n / 1048576).toFixed(n < 10 * 1048576 ? 2 : 0)} MiB`;
}

/** Decodes UTF-8 strictly; an invalid byte is a ParseError at its line:column. */
export function decodeUtf8(buf: Buffer, source: string): string {
  try {
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(buf);
  } catch {
    const bad = firstInvalidUtf8(buf);
    let line = 1;
    let lineStart = 0;
    for (let i = 0; i < bad; i++)
      if (buf[i] === 0x0a) {
        line++;
        lineStart = i + 1;
      }
    const column = buf.subarray(lineStart, bad).toString("utf8").length + 1;
    throw new ParseError(`invalid UTF-8 (byte 0x${buf[bad]?.toString(16).padStart(2, "0")}); expositions are UTF-8`, {
      file: source,
      line,
      column,
    });
  }
}

function firstInvalidUtf8(b: Buffer): number {
  let i = 0;
  while (i < b.length) {
    const c = b[i]!;
    const n = c < 0x80 ? 0 : c >= 0xc2 && c <= 0xdf ? 1 : c >= 0xe0 && c <= 0xef ? 2 : c >= 0xf0 && c <= 0xf4 ? 3 : -1;
    if (n < 0) return i;
    for (let k = 1; k <= n; k++) if (i + k >= b.length || (b[i + k]! & 0xc0) !== 0x80) return i;
    i += n + 1;
  }
  return b.length - 1;
}

/** Says what a body that is not an exposition looks like, before the parser gives a less helpful error. */
export function checkLooksLikeMetrics(text: string, source: string, contentType?: string): void {
  const head = text.slice(0, 512).trimStart();
  if (head.length === 0)
    throw new InputError(`${source}: empty body (expected Prometheus text or OpenMetrics)`, {
      hint: "is metrics collection enabled on the server (e.g. SGLang --enable-metrics, llama.cpp --metrics)?",
    });
  if (contentType?.includes("text/html") || /^<(!doctype|html|head|body)/i.test(head))
    throw new InputError(
      `${source}: returned HTML, not metrics${contentType ? ` (Content-Type: ${contentType})` : ""}`,
      {
        hint: "point at the metrics path itself, e.g. http://host:8000/metrics",
      },
    );
  if (contentType?.includes("application/json") || (/^[[{]/.test(head) && isJson(text)))
    throw new InputError(`${source}: returned JSON, not Prometheus text`, {
      hint: "trtllm-serve's /metrics is JSON; its Prometheus text is at /prometheus/metrics",
    });
}

/** Fetches and parses one exposition into a timestamped snapshot. */
export async function scrape(target: string, opts: ScrapeOptions = {}): Promise<Snapshot> {
  const raw = await fetchRaw(target, opts);
  return parseRaw(raw, opts.strict);
}

function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/** Parses fetched bytes. Strict means OpenMetrics rules, so the format is forced to OpenMetrics. */
export function parseRaw(raw: RawBody, strict?: boolean): Snapshot {
  let text = decodeUtf8(raw.body, raw.source);
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  checkLooksLikeMetrics(text, raw.source, raw.contentType);
  const format: ExpositionFormat | undefined = strict ? "openmetrics-1.0" : undefined;
  const exposition = mergeDuplicateFamilies(
    parseExposition(text, { format, contentType: raw.contentType, strict, file: raw.source }),
    raw.source,
    strict,
  );
  return { source: raw.source, atMs: raw.atMs, exposition };
}

/**
 * A family declared twice (HELP/TYPE repeated further down) would shadow its second half in every
 * lookup. Same type: merge with a warning (strict: an error). Different types: always an error.
 */
export function mergeDuplicateFamilies(exp: Exposition, source: string, strict?: boolean): Exposition {
  const byName = new Map<string, MetricFamily>();
  let dup = false;
  for (const f of exp.families) {
    if (byName.has(f.name)) dup = true;
    else byName.set(f.name, f);
  }
  if (!dup) return exp;
  const families: MetricFamily[] = [];
  const warnings = [...exp.warnings];
  const seen = new Map<string, MetricFamily>();
  for (const f of exp.families) {
    const first = seen.get(f.name);
    if (!first) {
      const copy = { ...f, samples: [...f.samples] };
      seen.set(f.name, copy);
      families.push(copy);
      continue;
    }
    const line = f.samples[0]?.line ?? 0;
    const firstLine = first.samples[0]?.line ?? 0;
    const where = { file: source, line: Math.max(line, 1), column: 1 };
    if (first.type !== f.type)
      throw new ParseError(
        `family "${f.name}" is declared twice with different types (${first.type} at line ${firstLine}, ${f.type} here)`,
        where,
      );
    if (strict)
      throw new ParseError(
        `family "${f.name}" appears twice (first at line ${firstLine}); expected each family's lines together`,
        where,
      );
    warnings.push({
      line: where.line,
      column: 1,
      message: `family "${f.name}" appears twice (first at line ${firstLine}); merged`,
    });
    first.samples.push(...f.samples);
  }
  return { ...exp, families, warnings };
}

export interface ServerInfo {
  /** Served model ids from `/v1/models`. */
  models: string[];
  /** From `/version` (`{"version": "0.11.0"}`). */
  version?: string;
  /** The response's `Server` header, when it names something. */
  server?: string;
}

/** Reads `/v1/models` and `/version` beside a metrics URL; absent endpoints are simply left out. */
export async function fetchServerInfo(metricsUrl: string, opts: FetchOptions = {}): Promise<ServerInfo> {
  const info: ServerInfo = { models: [] };
  let origin: string;
  try {
    origin = new URL(metricsUrl).origin;
  } catch {
    return info;
  }
  const timeoutMs = Math.min(opts.timeoutMs ?? DEFAULT_TIMEOUT_MS, 5000);
  const own = opts.dispatcher
    ? undefined
    : new (undici().Agent)({ connect: { timeout: timeoutMs }, headersTimeout: timeoutMs, bodyTimeout: timeoutMs });
  const dispatcher = opts.dispatcher ?? own!;
  const getJson = async (path: string): Promise<{ json?: unknown; server?: string }> => {
    try {
      const res = await undici().request(`${origin}${path}`, {
        dispatcher,
        headers: { accept: "application/json", ...opts.headers },
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
        // The whole answer within the limit: a trickling server must not hold the audit.
        signal: AbortSignal.timeout(timeoutMs),
      });
      const body = await readCapped(res.body, 1 << 20, path);
      if (res.statusCode >= 400) return {};
      return { json: JSON.parse(body.toString("utf8")), server: header(res.headers.server) };
    } catch {
      return {};
    }
  };
  try {
    const [models, version] = await Promise.all([getJson("/v1/models"), getJson("/version")]);
    const data = (models.json as { data?: Array<{ id?: unknown }> } | undefined)?.data;
    if (Array.isArray(data)) info.models = data.map((d) => d?.id).filter((x): x is string => typeof x === "string");
    const v = (version.json as { version?: unknown } | undefined)?.version;
    if (typeof v === "string") info.version = v;
    const server = models.server ?? version.server;
    if (server && !/^(uvicorn|hypercorn)$/i.test(server)) info.server = server;
  } finally {
    if (own) await own.close().catch(() => {});
  }
  return info;
}

export interface FamilySummary {
  name: string;
  type: string;
  help?: string;
  unit?: string;
  /** Label sets (histograms: one per set, `le` aside). */
  series: number;
  samples: number;
}

/** Pure: one row per family, for the scrape table. */
export function summarizeExposition(s: Snapshot): {
  source: string;
  format: ExpositionFormat;
  samples: number;
  families: FamilySummary[];
  warnings: string[];
} {
  const families = s.exposition.families.map((f) => {
    const sets = new Set<string>();
    for (const x of f.samples) {
      const { le: _le, quantile: _q, ...rest } = x.labels;
      sets.add(JSON.stringify(Object.entries(rest).sort()));
    }
    return { name: f.name, type: f.type, help: f.help, unit: f.unit, series: sets.size, samples: f.samples.length };
  });
  return {
    source: s.source,
    format: s.exposition.format,
    samples: families.reduce((t, f) => t + f.samples, 0),
    families,
    warnings: s.exposition.warnings.map((w) => `${s.source}:${w.line}:${w.column}: ${w.message}`),
  };
}
