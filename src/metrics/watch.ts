// Live view of one server (or a fleet through Prometheus): token rates, running/waiting, KV usage and
// windowed ITL/TTFT quantiles. Frames are computed by the pure audit over a sliding window of scrapes.
import { undici } from "../lazy.ts";
import { abortableSleep } from "../sleep.ts";
import { type AuditReport, analyzeAudit, fmtSeconds } from "./audit.ts";
import type { Concept } from "./concepts.ts";
import { DEFAULT_TIMEOUT_MS, type FetchOptions, scrape } from "./scrape.ts";
import type { Snapshot } from "./types.ts";

export interface LatencyStats {
  count: number;
  mean?: number;
  p50?: number;
  p90?: number;
  p99?: number;
}

export interface WatchFrame {
  /** Wall-clock ms of the newest scrape. */
  atMs: number;
  windowSeconds: number;
  engine?: string;
  promptTokensPerSecond?: number;
  generationTokensPerSecond?: number;
  requestsPerSecond?: number;
  running?: number;
  waiting?: number;
  kvUsage?: number;
  itl?: LatencyStats;
  ttft?: LatencyStats;
}

function concept(r: AuditReport, c: Concept) {
  const x = r.concepts.find((k) => k.concept === c);
  return x?.observable ? x.value : undefined;
}

function latency(r: AuditReport, c: Concept): LatencyStats | undefined {
  const v = concept(r, c);
  if (!v || v.count === undefined) return undefined;
  return { count: v.count, mean: v.mean, p50: v.p50, p90: v.p90, p99: v.p99 };
}

/** Pure: one frame from an audit of the window. */
export function frameFromReport(r: AuditReport, atMs: number): WatchFrame {
  return {
    atMs,
    windowSeconds: r.windowSeconds,
    engine: r.engine?.name,
    promptTokensPerSecond: concept(r, "prompt_tokens")?.rate,
    generationTokensPerSecond: concept(r, "generation_tokens")?.rate,
    requestsPerSecond: concept(r, "requests")?.rate,
    running: concept(r, "running")?.after,
    waiting: concept(r, "waiting")?.after,
    kvUsage: concept(r, "kv_usage")?.after,
    itl: latency(r, "itl"),
    ttft: latency(r, "ttft"),
  };
}

/** Pure: a frame from two snapshots of one target. */
export function watchFrame(before: Snapshot, after: Snapshot): WatchFrame {
  return frameFromReport(analyzeAudit(before, after, { target: after.source }), after.atMs);
}

const num = (x: number | undefined, d = 1) => (x === undefined || !Number.isFinite(x) ? "–" : x.toFixed(d));
const ms = (x: number | undefined) => (x === undefined ? "–" : fmtSeconds(x));

/** One line (for pipes and logs). */
export function formatWatchLine(f: WatchFrame): string {
  const t = new Date(f.atMs).toISOString().slice(11, 19);
  const lat = (name: string, l?: LatencyStats) =>
    l && l.count > 0 ? `${name} p50 ${ms(l.p50)} p99 ${ms(l.p99)} mean ${ms(l.mean)}` : `${name} –`;
  return [
    t,
    `gen ${num(f.generationTokensPerSecond)} tok/s`,
    `prompt ${num(f.promptTokensPerSecond)} tok/s`,
    `req ${num(f.requestsPerSecond, 2)}/s`,
    `running ${num(f.running, 0)}`,
    `waiting ${num(f.waiting, 0)}`,
    `kv ${f.kvUsage === undefined ? "–" : `${(f.kvUsage * 100).toFixed(1)}%`}`,
    lat("itl", f.itl),
    lat("ttft", f.ttft),
  ].join("  ");
}

/** A small panel (for a TTY, redrawn in place). */
export function formatWatchPanel(f: WatchFrame, target: string): string {
  const lat = (l?: LatencyStats) =>
    l && l.count > 0
      ? `p50 ${ms(l.p50).padEnd(9)} p90 ${ms(l.p90).padEnd(9)} p99 ${ms(l.p99).padEnd(9)} mean ${ms(l.mean).padEnd(9)} n=${l.count}`
      : "no observations in the window";
  return [
    `${target}  ${f.engine ?? "unknown engine"}  window ${f.windowSeconds.toFixed(1)} s  ${new Date(f.atMs).toISOString().slice(11, 19)}`,
    `  tokens/s   generation ${num(f.generationTokensPerSecond)}   prompt ${num(f.promptTokensPerSecond)}   requests/s ${num(f.requestsPerSecond, 2)}`,
    `  requests   running ${num(f.running, 0)}   waiting ${num(f.waiting, 0)}   KV cache ${f.kvUsage === undefined ? "–" : `${(f.kvUsage * 100).toFixed(1)} %`}`,
    `  ITL        ${lat(f.itl)}`,
    `  TTFT       ${lat(f.ttft)}`,
    "  (Ctrl-C to stop)",
  ].join("\n");
}

export interface WatchOptions extends FetchOptions {
  /** Between scrapes (ms); at least 100 (≤ 10 redraws a second). */
  intervalMs?: number;
  /** Quantiles and rates over this trailing window (ms). */
  windowMs?: number;
  /** Stop after this many frames (tests, scripts); default: until aborted. */
  iterations?: number;
  signal?: AbortSignal;
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  onFrame: (frame: WatchFrame) => void;
}

/** Scrapes every interval and emits a frame over the trailing window; returns the number of frames. */
export async function watchMetrics(target: string, opts: WatchOptions): Promise<number> {
  const intervalMs = Math.max(100, opts.intervalMs ?? 1000);
  const windowMs = Math.max(intervalMs, opts.windowMs ?? 10_000);
  const sleep = opts.sleep ?? abortableSleep;
  const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const agent =
    opts.dispatcher ??
    new (undici().Agent)({
      connect: { timeout: timeoutMs },
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      connections: 1,
    });
  const history: Snapshot[] = [];
  let frames = 0;
  try {
    history.push(await scrape(target, { ...opts, dispatcher: agent }));
    while (!opts.signal?.aborted && (opts.iterations === undefined || frames < opts.iterations)) {
      await sleep(intervalMs, opts.signal);
      if (opts.signal?.aborted) break;
      const cur = await scrape(target, { ...opts, dispatcher: agent });
      history.push(cur);
      // Keep the newest snapshot at least `windowMs` old as the window's start.
      while (history.length > 2 && cur.atMs - history[1]!.atMs >= windowMs) history.shift();
      opts.onFrame(watchFrame(history[0]!, cur));
      frames++;
    }
  } finally {
    if (!opts.dispatcher) await agent.close().catch(() => {});
  }
  return frames;
}
