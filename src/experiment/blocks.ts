// One experiment block = one workload run against one server. The workload itself is the bench
// engine's runBench (src/load); this file adapts its records to the per-request samples the
// statistics use, and runs a block while watching that its server stays up.
import { InterruptedError, TargetError } from "../errors.ts";
import { chunkItls, type RequestRecord, requestTpot, runBench } from "../load/index.ts";
import { achievedRate } from "../load/sweep.ts";
import type { ServerTimings } from "../load/types.ts";
import { benchWithSpans, type SpanJoinReport } from "../otlp/bench.ts";
import type { OtlpReceiver } from "../otlp/receiver.ts";
import type { Store, StoredRequest } from "../store/index.ts";
import type { RunTelemetry } from "../telemetry/session.ts";
import type { TelemetrySpec } from "../telemetry/types.ts";
import { processAlive, type ServerExit, type ServerHandle } from "./variants.ts";

/** The workload run inside each block (flag names follow `inferscope bench` / `vllm bench serve`). */
export interface Workload {
  /** Measured requests per block. */
  numPrompts: number;
  randomInputLen: number;
  randomOutputLen: number;
  /** Closed-loop users; 1 = the seed scenario's single-request decode. */
  concurrency?: number;
  /** Open loop instead of closed (requests/s); excludes concurrency. */
  requestRate?: number;
  /** Warm-up requests per block, excluded from every number. */
  warmup: number;
  seed: number;
  model?: string;
  apiKey?: string;
  endpoint?: "/v1/completions" | "/v1/chat/completions";
  /** A stream with no data (tokens) for this long fails as a stall (ms). Default 60 s. */
  stallTimeoutMs?: number;
  /** Hardware telemetry recorded over each block's measured window (`--telemetry`); absent = none. */
  telemetry?: TelemetrySpec;
}

export const DEFAULT_WORKLOAD: Workload = {
  numPrompts: 20,
  randomInputLen: 32,
  randomOutputLen: 128,
  concurrency: 1,
  warmup: 2,
  seed: 0,
};

/** One request as the experiment sees it. Times in ms. */
export interface BlockSample {
  index: number;
  ok: boolean;
  ttftMs: number;
  e2elMs: number;
  /** vLLM TPOT: (E2EL − TTFT)/(n − 1); NaN when n ≤ 1. */
  tpotMs: number;
  outputTokens: number;
  promptTokens: number;
  error: string | null;
  /** Gaps between chunks (vLLM ITL list), ms. */
  itlMs?: number[];
  /** The server's own timings (llama.cpp `timings`, TGI headers), when it reports them. */
  server?: ServerTimings | null;
}

export interface BlockResult {
  requests: BlockSample[];
  /** Wall time of the measured phase (ms). */
  durationMs: number;
  /** Output tokens per second over the measured phase. */
  outputThroughput: number;
  requestThroughput: number;
  /** The workload engine's own summary (vLLM field names), kept for the record. */
  summary?: Record<string, unknown>;
  warnings?: string[];
  partial?: boolean;
  /** The hardware's counters over the block's measured window, when telemetry was asked for. */
  telemetry?: RunTelemetry | null;
  /** The client's self-check over the window (the binding-limit diagnosis reads it). */
  client?: { saturated: boolean; eldP99Ms: number | null; reason?: string } | null;
  /** Achieved ÷ scheduled request rate over their own spans (open loop; load/sweep.ts achievedRate). */
  achieved?: { rate: number; ratio: number } | null;
  /** The measured phase's edges, epoch ms (performance.timeOrigin + now), for clipping samples taken beside it. */
  window?: { startMs: number; endMs: number } | null;
  /** The engine's request spans joined to the block's requests (when the context gave a receiver). */
  spans?: SpanJoinReport | null;
}

/** A receiver kept open across blocks: each block joins only the spans that arrive from its start. */
export interface BlockSpans {
  receiver: OtlpReceiver;
  /** After the block, how long to wait for spans still unsent (ms). */
  waitMs: number;
}

export interface BlockContext {
  signal: AbortSignal;
  variant: string;
  blockIndex: number;
  spans?: BlockSpans;
}

/** Runs a workload against a base URL. The default is runBench; tests may pass another real runner. */
export type BlockRunner = (baseUrl: string, workload: Workload, ctx: BlockContext) => Promise<BlockResult>;

export function sampleFromRecord(r: RequestRecord): BlockSample {
  const ok = r.errorClass === null;
  return {
    index: r.index,
    ok,
    ttftMs: r.ttftMs,
    e2elMs: r.e2elMs,
    tpotMs: requestTpot(r) ?? Number.NaN,
    outputTokens: r.outputTokens,
    promptTokens: r.promptTokens,
    error: ok ? null : `${r.errorClass}${r.errorMessage ? `: ${r.errorMessage}` : ""}`,
    itlMs: ok ? chunkItls(r) : undefined,
    server: r.server ?? null,
  };
}

/** The default block runner: inferscope's bench engine (src/load). */
export const benchBlockRunner: BlockRunner = async (baseUrl, w, ctx) => {
  const now = () => performance.timeOrigin + performance.now();
  let startMs: number | null = null;
  let endMs: number | null = null;
  const opts: Parameters<typeof runBench>[0] = {
    baseUrl,
    model: w.model,
    apiKey: w.apiKey,
    endpoint: w.endpoint,
    numPrompts: w.numPrompts,
    randomInputLen: w.randomInputLen,
    randomOutputLen: w.randomOutputLen,
    ignoreEos: true,
    concurrency: w.requestRate === undefined ? (w.concurrency ?? 1) : undefined,
    requestRate: w.requestRate,
    warmup: w.warmup,
    seed: w.seed,
    noServerMetrics: true,
    stallTimeoutMs: w.stallTimeoutMs,
    label: `${ctx.variant}#${ctx.blockIndex}`,
    telemetry: w.telemetry,
  };
  const deps: Parameters<typeof runBench>[1] = {
    signal: ctx.signal,
    graceMs: 2000,
    onMeasureEdge: (e) => {
      if (e === "start") startMs = now();
      else endMs = now();
    },
  };
  // With a receiver, each request carries an id its span names; the block's own spans are joined.
  const joined = ctx.spans
    ? await benchWithSpans(opts, deps, { receiver: ctx.spans.receiver, waitMs: ctx.spans.waitMs, onlyLater: true })
    : null;
  const res = joined ? joined.result : await runBench(opts, deps);
  const s = res.summary;
  return {
    requests: res.requests.filter((r) => !r.warmup).map(sampleFromRecord),
    durationMs: (s.duration as number) * 1000,
    outputThroughput: s.output_throughput as number,
    requestThroughput: s.request_throughput as number,
    summary: Object.fromEntries(Object.entries(s).filter(([k]) => k !== "inferscope")),
    warnings: res.warnings,
    partial: res.partial,
    telemetry: res.telemetry,
    client: {
      saturated: res.client.saturated,
      eldP99Ms: res.client.eventLoopDelayMs.p99,
      ...(res.client.reason ? { reason: res.client.reason } : {}),
    },
    achieved: w.requestRate === undefined ? null : achievedRate(res),
    window: startMs === null ? null : { startMs, endMs: endMs ?? now() },
    ...(joined ? { spans: joined.spans } : {}),
  };
};

/** Keeps a block's telemetry in the run store beside its requests. */
export function storeBlockTelemetry(store: Store, runId: string, blockId: number, t: RunTelemetry | null | undefined) {
  if (!t?.summary) return;
  store.addTelemetry(runId, blockId, {
    source: `${t.source.kind} ${t.source.detail}`,
    summary: { ...t.summary, why: t.source.why, notes: t.notes },
    samples: t.samples as unknown as Record<string, unknown>[],
  });
}

/** Per variant: energy per token and the share of its blocks' windows spent power-capped. */
export interface VariantTelemetry {
  variant: string;
  blocks: number;
  joulesPerToken: number | null;
  avgPowerW: number | null;
  /** Mean over blocks of the share of the window with a clock-limiting reason. */
  limitedShare: number;
  powerCappedBlocks: number;
  smClockMedianMHz: number | null;
  smClockMaxMHz: number | null;
  /** Mean over blocks of the GPU busy share (utilization.gpuBusy, 0–1); null where no block has it. */
  gpuBusy: number | null;
}

/** Summarises stored block telemetry per variant (blocks with no summary are left out). */
export function variantTelemetry(
  store: Store,
  runId: string,
  blocks: ReadonlyArray<{ id: number; variant: string; status: string }>,
): VariantTelemetry[] {
  const rows = store.getTelemetry(runId);
  if (!rows.length) return [];
  const byBlock = new Map(rows.filter((r) => r.blockId !== null).map((r) => [r.blockId!, r.summary as any]));
  const out: VariantTelemetry[] = [];
  for (const v of [...new Set(blocks.map((b) => b.variant))]) {
    const ss = blocks
      .filter((b) => b.variant === v && b.status === "complete")
      .flatMap((b) => {
        const s = byBlock.get(b.id);
        return s ? [s] : [];
      });
    if (!ss.length) continue;
    const mean = (xs: Array<number | null | undefined>) => {
      const ok = xs.filter((x): x is number => typeof x === "number" && Number.isFinite(x));
      return ok.length ? ok.reduce((a, b) => a + b, 0) / ok.length : null;
    };
    out.push({
      variant: v,
      blocks: ss.length,
      joulesPerToken: mean(ss.map((s) => s.joulesPerToken)),
      avgPowerW: mean(ss.map((s) => s.avgPowerW)),
      limitedShare: mean(ss.map((s) => s.throttle?.shareOfWindow)) ?? 0,
      powerCappedBlocks: ss.filter((s) => s.throttle?.powerCapped).length,
      smClockMedianMHz: mean(ss.map((s) => s.smClockMHz?.median)),
      smClockMaxMHz: mean(ss.map((s) => s.smClockMHz?.max)),
      gpuBusy: mean(ss.map((s) => s.utilization?.gpuBusy)),
    });
  }
  return out;
}

/**
 * The finding for capped arms: a comparison of capped arms measures the cap as much as the change. `what` names
 * the compared things (A/B arms, sweep levels, tune candidates).
 */
export function cappedFinding(
  vt: readonly VariantTelemetry[],
  what: { plural: string; allCapped: string } = { plural: "arms", allCapped: "the A/B compares capped arms" },
): string | null {
  const capped = vt.filter((v) => v.powerCappedBlocks > 0);
  if (!capped.length) return null;
  const one = (v: VariantTelemetry) =>
    `${v.variant}: clock-limited for ${(v.limitedShare * 100).toFixed(0)} % of its windows, ${v.powerCappedBlocks} of ${v.blocks} blocks power-capped${
      v.smClockMedianMHz !== null
        ? `, SM clock median ${v.smClockMedianMHz.toFixed(0)}${v.smClockMaxMHz !== null ? ` of ${v.smClockMaxMHz.toFixed(0)}` : ""} MHz`
        : ""
    }`;
  return `power-capped ${what.plural} (${capped.map(one).join("; ")}): ${capped.length === vt.length ? what.allCapped : `the ${what.plural} ran under different power conditions`}, so the difference includes the cap`;
}

export function toStored(s: BlockSample): StoredRequest {
  return {
    index: s.index,
    ok: s.ok,
    ttftMs: s.ttftMs,
    e2elMs: s.e2elMs,
    tpotMs: s.tpotMs,
    outputTokens: s.outputTokens,
    promptTokens: s.promptTokens,
    error: s.error,
    data:
      s.itlMs || s.server
        ? {
            ...(s.itlMs ? { itlMs: s.itlMs.map((x) => Math.round(x * 1000) / 1000) } : {}),
            ...(s.server ? { server: s.server } : {}),
          }
        : undefined,
  };
}

export function fromStored(r: StoredRequest): BlockSample {
  return {
    index: r.index,
    ok: r.ok,
    ttftMs: r.ttftMs ?? Number.NaN,
    e2elMs: r.e2elMs ?? Number.NaN,
    tpotMs: r.tpotMs ?? Number.NaN,
    outputTokens: r.outputTokens ?? 0,
    promptTokens: r.promptTokens ?? 0,
    error: r.error ?? null,
    itlMs: Array.isArray(r.data?.itlMs) ? (r.data.itlMs as number[]) : undefined,
    server: r.data?.server && typeof r.data.server === "object" ? (r.data.server as ServerTimings) : null,
  };
}

/**
 * Runs one block, racing the workload against the server's death and the user's interrupt.
 * A server that exits mid-block fails the block with its name, exit status and last log lines.
 */
export async function runWatchedBlock(
  runner: BlockRunner,
  baseUrl: string,
  workload: Workload,
  ctx: { variant: string; blockIndex: number; signal?: AbortSignal; server?: ServerHandle | null; spans?: BlockSpans },
): Promise<BlockResult> {
  const ac = new AbortController();
  const onAbort = () => ac.abort(ctx.signal?.reason);
  ctx.signal?.addEventListener("abort", onAbort, { once: true });
  let died: Error | null = null;
  const server = ctx.server;
  const deathError = (e: ServerExit, srv: ServerHandle) =>
    new TargetError(
      `variant "${ctx.variant}": server died during block ${ctx.blockIndex} (${e.signal ? `signal ${e.signal}` : `exit code ${e.code}`})\n  last log lines:\n${srv
        .logTail(20)
        .map((l) => `    | ${l}`)
        .join("\n")}\n  full log: ${srv.logFile}`,
      { url: srv.url },
    );
  if (server)
    void server.exited.then((e) => {
      if (server.stopping) return;
      died = deathError(e, server);
      ac.abort(died);
    });
  // Connection errors can reach the runner before Node has reaped the server: when the runner is
  // done, a server process that is gone (or a zombie) is dead, whatever the exit event says yet.
  const checkDeath = async () => {
    if (!died && server && !server.stopping && !processAlive(server.pid))
      died = deathError(await server.exited, server);
  };
  try {
    const res = await runner(baseUrl, workload, {
      signal: ac.signal,
      variant: ctx.variant,
      blockIndex: ctx.blockIndex,
      spans: ctx.spans,
    });
    await checkDeath();
    if (died) throw died;
    if (ctx.signal?.aborted) throw ctx.signal.reason instanceof Error ? ctx.signal.reason : new InterruptedError();
    return res;
  } catch (err) {
    await checkDeath();
    if (died) throw died;
    throw err;
  } finally {
    ctx.signal?.removeEventListener("abort", onAbort);
  }
}
