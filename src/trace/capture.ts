// `trace capture`: POST /start_profile, run a short workload, POST /stop_profile, then analyse the
// trace file(s) the server wrote into its profiler directory.
import { readdir, stat } from "node:fs/promises";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { InputError, InterruptedError, TargetError, UsageError } from "../errors.ts";
import { undici } from "../lazy.ts";
import { type AnalyzeOptions, analyzeTrace, type TraceAnalysis } from "./analyze.ts";

export interface CaptureOptions extends AnalyzeOptions {
  /** The server's profiler directory (VLLM_TORCH_PROFILER_DIR / torch_profiler_dir), readable here. */
  dir: string;
  /** Decode steps to capture: one request generating this many tokens per concurrent request. */
  steps?: number;
  /** Concurrent requests (the decode batch size). */
  concurrency?: number;
  model?: string;
  prompt?: string;
  /** Overall time limit (ms) for the workload and for the trace file to appear. */
  timeoutMs?: number;
  /** How long /stop_profile may take (vLLM flushes traces before answering). */
  stopTimeoutMs?: number;
  /** Sent as `Authorization: Bearer …` on every call, /start_profile and /stop_profile included. */
  apiKey?: string;
  /** An interrupt: the workload stops, the profiler is still stopped, and the error says what was kept. */
  signal?: AbortSignal;
}

export interface CaptureResult {
  url: string;
  files: string[];
  requests: number;
  tokens: number;
  analysis: TraceAnalysis;
}

const TRACE_FILE = /\.pt\.trace\.json(\.gz)?$/;

async function listTraces(dir: string): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return out;
    throw e;
  }
  for (const n of names) {
    if (!TRACE_FILE.test(n)) continue;
    const p = join(dir, n);
    try {
      out.set(p, (await stat(p)).mtimeMs);
    } catch {
      // removed meanwhile
    }
  }
  return out;
}

async function call(
  url: string,
  path: string,
  method: "GET" | "POST",
  body: unknown,
  timeoutMs: number,
  apiKey?: string,
  interrupt?: AbortSignal,
): Promise<{ status: number; text: string }> {
  const headers: Record<string, string> = body === undefined ? {} : { "content-type": "application/json" };
  if (apiKey) headers.authorization = `Bearer ${apiKey}`;
  // One controller for the time limit and the interrupt. (Node 20's AbortSignal.any holds its sources
  // weakly: a collected AbortSignal.timeout never fired, and a trickling server held us past the limit.)
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(new DOMException("timed out", "TimeoutError")), timeoutMs);
  const onInterrupt = () => ac.abort(interrupt?.reason);
  if (interrupt?.aborted) onInterrupt();
  else interrupt?.addEventListener("abort", onInterrupt, { once: true });
  try {
    const r = await undici().request(new URL(path, url), {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      // The whole answer within the limit: a server trickling bytes resets per-read timers forever.
      signal: ac.signal,
    });
    return { status: r.statusCode, text: await r.body.text() };
  } catch (e) {
    if (interrupt?.aborted) throw interrupt.reason instanceof Error ? interrupt.reason : new InterruptedError();
    const err = e as { name?: string; code?: string; cause?: { code?: string }; message?: string };
    const code = err.code ?? err.cause?.code;
    const what =
      code === "ECONNREFUSED"
        ? "connection refused (is the server running, and on this port?)"
        : ac.signal.aborted ||
            err.name === "TimeoutError" ||
            code === "UND_ERR_HEADERS_TIMEOUT" ||
            code === "UND_ERR_BODY_TIMEOUT"
          ? `no complete answer within ${timeoutMs / 1000} s (--timeout)`
          : (err.message ?? String(e));
    throw new TargetError(`${method} ${new URL(path, url).href}: ${what}`, { url, cause: e });
  } finally {
    clearTimeout(timer);
    interrupt?.removeEventListener("abort", onInterrupt);
  }
}

function interruptWords(signal: AbortSignal): string {
  return signal.reason instanceof Error ? signal.reason.message : "interrupted";
}

/** A JSON answer, or a TargetError that says what came instead (an HTML page, an empty body). */
function parseJson(text: string, what: string, url: string): any {
  try {
    return JSON.parse(text);
  } catch {
    const t = text.trim();
    const seen = !t ? "an empty body" : /^<(!doctype|html)/i.test(t) ? "an HTML page" : JSON.stringify(t.slice(0, 60));
    throw new TargetError(`${what}: expected JSON, got ${seen} (is ${url} an OpenAI-compatible server?)`, { url });
  }
}

/** A 401/403 says what to send; other statuses carry no hint. */
function authHint(status: number, apiKey: string | undefined): string | undefined {
  if (status !== 401 && status !== 403) return undefined;
  return apiKey
    ? "the server refused the key given (--api-key or $OPENAI_API_KEY)"
    : "the server wants a key: pass --api-key KEY (or set $OPENAI_API_KEY)";
}

function serverMessage(text: string): string {
  try {
    const j = JSON.parse(text);
    return j?.error?.message ?? j?.message ?? j?.detail ?? text;
  } catch {
    return text.slice(0, 300);
  }
}

/** Only http(s) servers: anything else is bad input (exit 2), not an unreachable target. */
function checkServerUrl(url: string): void {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new UsageError(`"${url}" is not a URL (the server's base URL, e.g. http://127.0.0.1:8000)`);
  }
  if (u.protocol !== "http:" && u.protocol !== "https:")
    throw new UsageError(`${url} is not an http(s) URL (the server's base URL, e.g. http://127.0.0.1:8000)`);
}

export async function captureTrace(url: string, opts: CaptureOptions): Promise<CaptureResult> {
  const steps = opts.steps ?? 32;
  const concurrency = opts.concurrency ?? 1;
  const timeoutMs = opts.timeoutMs ?? 120_000;
  if (!Number.isInteger(steps) || steps < 1) throw new InputError(`--steps must be a positive integer (got ${steps})`);
  checkServerUrl(url);
  const key = opts.apiKey;
  let model = opts.model;
  if (!model) {
    const r = await call(url, "/v1/models", "GET", undefined, timeoutMs, key, opts.signal);
    if (r.status !== 200)
      throw new TargetError(`GET /v1/models: HTTP ${r.status}: ${serverMessage(r.text)}`, {
        url,
        status: r.status,
        hint: authHint(r.status, key),
      });
    model = parseJson(r.text, "GET /v1/models", url)?.data?.[0]?.id;
    if (!model) throw new TargetError("GET /v1/models listed no model; pass --model", { url });
  }
  const before = await listTraces(opts.dir);
  const started = Date.now();
  if (opts.signal?.aborted) throw new InterruptedError(`${interruptWords(opts.signal)}: nothing was captured`);
  const s = await call(url, "/start_profile", "POST", undefined, timeoutMs, key);
  if (s.status === 404)
    throw new TargetError("POST /start_profile: 404: the server's profiler is not enabled", {
      url,
      status: 404,
      hint: "start vLLM with --profiler-config (≥ v0.13) or VLLM_TORCH_PROFILER_DIR=<dir> (older), or the simulator with --profiler-dir",
    });
  if (s.status >= 300)
    throw new TargetError(`POST /start_profile: HTTP ${s.status}: ${serverMessage(s.text)}`, {
      url,
      status: s.status,
      hint: authHint(s.status, key),
    });
  let tokens = 0;
  let workloadError: unknown;
  try {
    const one = async () => {
      const r = await call(
        url,
        "/v1/completions",
        "POST",
        {
          model,
          prompt: opts.prompt ?? "Explain where the time of one decode step goes.",
          max_tokens: steps,
          min_tokens: steps,
          ignore_eos: true,
          temperature: 0,
          stream: false,
        },
        timeoutMs,
        key,
        opts.signal,
      );
      if (r.status !== 200)
        throw new TargetError(`POST /v1/completions: HTTP ${r.status}: ${serverMessage(r.text)}`, {
          url,
          status: r.status,
          hint: authHint(r.status, key),
        });
      tokens += Number(parseJson(r.text, "POST /v1/completions", url)?.usage?.completion_tokens ?? 0);
    };
    await Promise.all(Array.from({ length: concurrency }, one));
  } catch (e) {
    workloadError = e;
  }
  // Always stop the profiler, even when the workload failed or was interrupted.
  const t = await call(url, "/stop_profile", "POST", undefined, opts.stopTimeoutMs ?? 15 * 60_000, key);
  if (opts.signal?.aborted) {
    // Say what was kept: the server flushed what it traced so far into its directory.
    const now = await listTraces(opts.dir).catch(() => new Map<string, number>());
    const kept = [...now.entries()].filter(([p, m]) => !before.has(p) || before.get(p)! < m).map(([p]) => p);
    throw new InterruptedError(
      `${interruptWords(opts.signal)} during the workload (${tokens} tokens finished); the profiler was stopped${t.status < 300 ? "" : ` (HTTP ${t.status})`}; ${
        kept.length
          ? `its partial trace is kept: ${kept.join(", ")} (analyse it with: inferscope trace ${kept.join(" ")})`
          : `no trace file appeared in ${opts.dir}`
      }`,
    );
  }
  if (workloadError) throw workloadError;
  if (t.status >= 300)
    throw new TargetError(`POST /stop_profile: HTTP ${t.status}: ${serverMessage(t.text)}`, {
      url,
      status: t.status,
      hint: authHint(t.status, key),
    });
  // vLLM answers /stop_profile once flushed; poll briefly for servers that write afterwards.
  let fresh: string[] = [];
  const deadline = started + timeoutMs;
  for (;;) {
    const now = await listTraces(opts.dir);
    fresh = [...now.entries()]
      .filter(([p, m]) => !before.has(p) || before.get(p)! < m)
      .sort((a, b) => b[1] - a[1])
      .map(([p]) => p);
    if (fresh.length || Date.now() > deadline) break;
    await sleep(100);
  }
  if (!fresh.length)
    throw new InputError(`no new trace file (*.pt.trace.json[.gz]) appeared in ${opts.dir}`, {
      hint: "--dir must be the server's profiler directory as seen from this machine",
    });
  // One file per worker; the frontend's CPU-only trace (if any) is dropped when worker traces exist.
  const files = fresh.filter((f) => !/frontend|api_server/i.test(f));
  const analysis = await analyzeTrace(files.length ? files : fresh, opts);
  return { url, files: files.length ? files : fresh, requests: concurrency, tokens, analysis };
}
