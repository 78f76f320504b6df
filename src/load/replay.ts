// Trace replay (pure): which rows run and when (the trace's own times ÷ --replay-speed, from
// --start-offset, bounded by --max-requests and --duration in trace time), their prompts, and the
// checks after the run (server-counted lengths against the trace's, lag against the trace's times).
import { InputError, UsageError } from "../errors.ts";
import type { PromptSynth } from "./datasets/synth.ts";
import type { Trace, TraceRow } from "./datasets/trace.ts";
import { MAX_REPLAY_TOKENS, MAX_REQUESTS, MAX_RUN_MS, RUN_BOUND_TEXT, spanText } from "./limits.ts";
import { npPercentile } from "./npstats.ts";
import { notSentText } from "./sessions.ts";
import type { RequestRecord } from "./types.ts";
import type { Prompt, Workload } from "./workload.ts";

export interface ReplayOptions {
  /** N× the trace's pace (2 = twice as fast). Default 1. The capacity search's load knob. */
  replaySpeed?: number;
  /** Skip the trace's first part: replay from this trace time (ms). Default 0. */
  startOffsetMs?: number;
  /** At most this many rows. */
  maxRequests?: number;
  /** Only rows within this much trace time after the start offset (ms). */
  durationMs?: number;
}

export interface ReplayPlan {
  rows: TraceRow[];
  /** Send times, ms from the run's start (trace time − offset, ÷ speed). */
  timesMs: Float64Array;
  speed: number;
  startOffsetMs: number;
  /** Trace time the selected rows span (first to last arrival), ms. */
  traceSpanMs: number;
}

export function planReplay(trace: Trace, o: ReplayOptions): ReplayPlan {
  const speed = o.replaySpeed ?? 1;
  if (!(speed > 0 && Number.isFinite(speed))) throw new UsageError(`--replay-speed must be a number > 0, got ${speed}`);
  const off = o.startOffsetMs ?? 0;
  if (!(off >= 0)) throw new UsageError(`--start-offset must be ≥ 0, got ${off}`);
  if (o.maxRequests !== undefined && !(Number.isInteger(o.maxRequests) && o.maxRequests >= 1))
    throw new UsageError(`--max-requests expects an integer ≥ 1, got ${o.maxRequests}`);
  if (o.durationMs !== undefined && !(o.durationMs > 0)) throw new UsageError("--duration must be > 0");
  const timed = trace.timed;
  if (!timed && (off > 0 || o.durationMs !== undefined))
    throw new UsageError(`--start-offset and --duration need a trace with timestamps; ${trace.path} has none`);
  const end = o.durationMs !== undefined ? off + o.durationMs : Number.POSITIVE_INFINITY;
  const max = Math.min(o.maxRequests ?? MAX_REQUESTS, MAX_REQUESTS);
  const rows: TraceRow[] = [];
  for (const r of trace.rows) {
    if (rows.length >= max) break;
    if (timed) {
      const t = r.timestampMs!;
      if (t < off) continue;
      // The window is half-open, [offset, offset + duration): "the first 10 minutes" ends before 10:00.
      if (t >= end) break;
    }
    rows.push(r);
  }
  let tokens = 0;
  for (const r of rows) tokens += r.prompt === undefined && r.messages === undefined ? r.inputLen : 0;
  if (tokens > MAX_REPLAY_TOKENS)
    throw new UsageError(
      `the replay window holds ${tokens} prompt tokens, more than the ${MAX_REPLAY_TOKENS} one replay builds before it starts`,
      { hint: "replay a part: --max-requests, --duration or --start-offset" },
    );
  if (rows.length === 0)
    throw new UsageError(
      `no request of ${trace.path} falls in the window asked for (--start-offset ${off} ms${o.durationMs !== undefined ? `, --duration ${o.durationMs} ms` : ""})`,
    );
  const timesMs = new Float64Array(rows.length);
  if (timed) for (let i = 0; i < rows.length; i++) timesMs[i] = (rows[i]!.timestampMs! - off) / speed;
  // Rows are in time order: the first past the run's bound is named (its line), before anything is sent.
  const late = timed ? timesMs.findIndex((t) => !(t <= MAX_RUN_MS)) : -1;
  if (late >= 0) {
    const r = rows[late]!;
    throw new InputError(
      `this row is due ${spanText(timesMs[late]!)} after the replay starts (trace time ${spanText(r.timestampMs!)}${off ? ` − --start-offset ${spanText(off)}` : ""}, at ${speed}× speed), past ${RUN_BOUND_TEXT}`,
      {
        position: { file: trace.path, line: r.line, column: 1 },
        hint: "replay a part (--max-requests, --duration, --start-offset) or raise --replay-speed",
      },
    );
  }
  const traceSpanMs = timed ? rows[rows.length - 1]!.timestampMs! - rows[0]!.timestampMs! : 0;
  return { rows, timesMs, speed, startOffsetMs: off, traceSpanMs };
}

/** The selected rows as a workload: synthesized text unless the row gave its own. */
export function traceWorkload(name: Workload["name"], rows: readonly TraceRow[], synth: PromptSynth | null): Workload {
  return {
    name,
    size: rows.length,
    get(i): Prompt {
      const r = rows[i % rows.length]!;
      if (r.prompt !== undefined) return { prompt: r.prompt, inputLen: r.inputLen, outputLen: r.outputLen };
      if (r.messages !== undefined) return { messages: r.messages, inputLen: r.inputLen, outputLen: r.outputLen };
      if (!synth) throw new Error("a row without text needs the prompt synthesizer");
      // Index by the row's line: its unique blocks are then the same text whichever rows were selected.
      return { prompt: synth.compose(r, r.line), inputLen: r.inputLen, outputLen: r.outputLen };
    },
    release: () => synth?.release(),
  };
}

export interface LengthCheck {
  /** Successful requests whose server reported the count. */
  checked: number;
  /** Of those, how many differ from the length asked for, and the largest |difference| (tokens). */
  mismatched: number;
  maxAbsDiff: number;
  /** Mean of (server − asked), tokens. */
  meanDiff: number;
}

export interface ReplayLengths {
  /** usage.prompt_tokens against the trace's input length (null for sessions: their history has no target). */
  prompt: LengthCheck | null;
  /** usage.completion_tokens against max_tokens (short when the server stopped at EOS). */
  output: LengthCheck;
}

function check(recs: readonly RequestRecord[], got: (r: RequestRecord) => number, want: (r: RequestRecord) => number) {
  let checked = 0;
  let mismatched = 0;
  let maxAbsDiff = 0;
  let sum = 0;
  for (const r of recs) {
    if (r.warmup || r.errorClass !== null) continue;
    const g = got(r);
    if (g < 0) continue;
    const d = g - want(r);
    checked++;
    sum += d;
    if (d !== 0) mismatched++;
    maxAbsDiff = Math.max(maxAbsDiff, Math.abs(d));
  }
  return { checked, mismatched, maxAbsDiff, meanDiff: checked ? sum / checked : 0 };
}

export function lengthChecks(recs: readonly RequestRecord[]): ReplayLengths {
  return {
    prompt: check(
      recs,
      (r) => r.promptTokens,
      (r) => r.targetInputLen,
    ),
    output: check(
      recs,
      (r) => (r.outputTokensFromUsage ? r.completionTokens : -1),
      (r) => r.targetOutputLen,
    ),
  };
}

export interface ScheduleSummary {
  /** "trace" (the file's own times), or "sessions". */
  source: string;
  speed: number;
  startOffsetMs: number;
  requests: number;
  traceSpanMs: number;
  /** Send − scheduled send over every measured request, ms (the open loop's definition). */
  lagP50Ms: number | null;
  lagP99Ms: number | null;
  lagMaxMs: number | null;
  /** Distinct send times the requests were due at (requests due at the same ms-exact time form one instant). */
  instants: number;
  /** The most requests due at one instant: one loop sends them one after another. */
  maxDueAtOnce: number;
  /** Bytes of request bodies due at that instant (null when the run did not say). */
  maxDueBodyBytes: number | null;
  /** Lag of the first send of each instant (the pacer's own lateness): p99 and max over instants, ms. */
  firstLagP99Ms: number | null;
  firstLagMaxMs: number | null;
  /**
   * Of the summed lag, the share spent waiting behind earlier sends of the same instant (send − the
   * instant's first send); the rest (1 − it) is the first send's lateness. Null without lag.
   */
  behindShare: number | null;
}

/**
 * What the lag is made of: requests due at the same time are sent one after another, so a request's
 * lag is its instant's first send's lateness plus the sends before it in that instant.
 */
export function lagBreakdown(
  recs: readonly RequestRecord[],
  bodyBytes?: (index: number) => number,
): Pick<
  ScheduleSummary,
  "instants" | "maxDueAtOnce" | "maxDueBodyBytes" | "firstLagP99Ms" | "firstLagMaxMs" | "behindShare"
> {
  const at = new Map<number, RequestRecord[]>();
  for (const r of recs) {
    if (r.warmup || !Number.isFinite(r.sendMs)) continue;
    const g = at.get(r.scheduledMs);
    if (g) g.push(r);
    else at.set(r.scheduledMs, [r]);
  }
  const first: number[] = [];
  let behind = 0;
  let total = 0;
  let most: RequestRecord[] = [];
  for (const [t, g] of at) {
    let s0 = Number.POSITIVE_INFINITY;
    for (const r of g) s0 = Math.min(s0, r.sendMs);
    first.push(s0 - t);
    for (const r of g) {
      behind += r.sendMs - s0;
      total += r.sendMs - t;
    }
    if (g.length > most.length) most = g;
  }
  let bytes: number | null = null;
  if (bodyBytes && most.length) {
    bytes = 0;
    for (const r of most) bytes += bodyBytes(r.index);
  }
  return {
    instants: at.size,
    maxDueAtOnce: most.length,
    maxDueBodyBytes: bytes,
    firstLagP99Ms: first.length ? npPercentile(first, 99) : null,
    firstLagMaxMs: first.length ? first.reduce((a, b) => Math.max(a, b)) : null,
    // A zero total (every send exactly on time) has no parts to share.
    behindShare: total > 0 ? Math.min(1, Math.max(0, behind / total)) : null,
  };
}

export function scheduleSummary(
  recs: readonly RequestRecord[],
  plan: Pick<ReplayPlan, "speed" | "startOffsetMs" | "traceSpanMs">,
  source = "trace",
  bodyBytes?: (index: number) => number,
): ScheduleSummary {
  const lag: number[] = [];
  for (const r of recs) if (!r.warmup && Number.isFinite(r.sendMs)) lag.push(r.sendMs - r.scheduledMs);
  const q = (p: number) => (lag.length ? npPercentile(lag, p) : null);
  return {
    source,
    speed: plan.speed,
    startOffsetMs: plan.startOffsetMs,
    requests: lag.length,
    traceSpanMs: plan.traceSpanMs,
    lagP50Ms: q(50),
    lagP99Ms: q(99),
    lagMaxMs: lag.length ? lag.reduce((a, b) => Math.max(a, b)) : null,
    ...lagBreakdown(recs, bodyBytes),
  };
}

/** One line on what the lag is made of, e.g. "lag p99 2.7 ms: 16 requests due at one instant (1.4 MB of bodies); …". */
export function explainLag(sc: ScheduleSummary): string {
  const ms = (x: number | null) => (x === null ? "n/a" : x < 0.1 ? x.toFixed(3) : x.toFixed(2));
  const mb = sc.maxDueBodyBytes === null ? "" : ` (${(sc.maxDueBodyBytes / 1e6).toFixed(2)} MB of bodies)`;
  const share =
    sc.behindShare === null
      ? ""
      : `; ${(sc.behindShare * 100).toFixed(0)} % of the summed lag is waiting behind earlier sends of the same instant`;
  return `lag p99 ${ms(sc.lagP99Ms)} ms: ${sc.maxDueAtOnce} request${sc.maxDueAtOnce === 1 ? "" : "s"} due at one instant${mb}, ${sc.instants} instants; the first of each instant p99 ${ms(sc.firstLagP99Ms)} ms, max ${ms(sc.firstLagMaxMs)} ms${share}`;
}

/** The replay, length-check and per-turn lines printed after the summary (pure text). */
export function formatReplay(res: {
  schedule?: ScheduleSummary | null;
  replay?: import("./runner.ts").ReplayInfo | null;
  turns?: import("./sessions.ts").TurnRow[] | null;
}): string {
  const L: string[] = [];
  const f = (x: number | null, d = 2) => (x === null ? "n/a" : x.toFixed(d));
  const rp = res.replay;
  const sc = res.schedule;
  if (!rp) return "";
  L.push(`${"-".repeat(17)} Trace / sessions ${"-".repeat(15)}`);
  const unsent = rp.notSent ? notSentText(rp.notSent, rp.sessionsEnded ?? 0) : null;
  L.push(
    rp.sessions !== null && rp.sessions !== undefined
      ? `dataset: ${rp.dataset}${rp.path ? ` (${rp.path})` : ""}, ${rp.requests} turns in ${rp.sessions} session${rp.sessions === 1 ? "" : "s"}: ${rp.sent} sent${unsent ? `, ${unsent}` : ""}`
      : `dataset: ${rp.dataset}${rp.path ? ` (${rp.path})` : ""}, ${rp.requests} requests`,
  );
  if (sc && sc.source !== "generated")
    L.push(
      `schedule: ${sc.source}${sc.source === "trace" ? ` at ${sc.speed}× from ${(sc.startOffsetMs / 1000).toFixed(3)} s, span ${(sc.traceSpanMs / 1000).toFixed(3)} s of trace time` : ""}; send lag p50 / p99 / max ${f(sc.lagP50Ms, 3)} / ${f(sc.lagP99Ms, 3)} / ${f(sc.lagMaxMs, 3)} ms`,
    );
  if (sc && sc.source !== "generated" && sc.lagP99Ms !== null) L.push(`  ${explainLag(sc)}`);
  const c = rp.calibration;
  if (c)
    L.push(
      `prompt sizing: ${c.method === "tokenize" ? `the server's tokenizer (${c.tokenizer})` : c.method === "probe" ? "calibrated estimate (two probe requests; no /tokenize)" : "assumed, not measured"}; ${c.words} words, ${c.tokensPerWord === 1 ? "1 token each" : `${c.tokensPerWord.toFixed(4)} tokens/word`}, request form adds ${c.offset}`,
    );
  for (const n of c?.notes ?? []) L.push(`  note: ${n}`);
  const p = rp.lengths.prompt;
  const o = rp.lengths.output;
  if (p)
    L.push(
      p.checked
        ? `prompt tokens (usage) vs trace: ${p.mismatched} of ${p.checked} differ, max |diff| ${p.maxAbsDiff}, mean diff ${p.meanDiff.toFixed(2)}`
        : "prompt tokens vs trace: unknown (the server reported no usage.prompt_tokens)",
    );
  L.push(
    o.checked
      ? `output tokens (usage) vs max_tokens: ${o.mismatched} of ${o.checked} differ, max |diff| ${o.maxAbsDiff}${rp.ignoreEos ? " (ignore_eos sent)" : ""}`
      : "output tokens vs max_tokens: unknown (no usage.completion_tokens)",
  );
  if (res.turns?.length) {
    L.push("turn  requests  failed  TTFT p50 (ms)  TTFT p99 (ms)  prompt tok  cached tok");
    for (const t of res.turns)
      L.push(
        `${String(t.turn + 1).padStart(4)}  ${String(t.requests).padStart(8)}  ${String(t.failed).padStart(6)}  ${f(t.ttftP50Ms).padStart(13)}  ${f(t.ttftP99Ms).padStart(13)}  ${f(t.promptTokensMean, 1).padStart(10)}  ${t.cachedTokensMean === null ? "unreported".padStart(10) : f(t.cachedTokensMean, 1).padStart(10)}`,
      );
    if (!res.turns.some((t) => t.cachedTokensMean !== null))
      L.push(
        "  cached tokens: the server reported none (read: llama.cpp timings.cache_n, or usage.prompt_tokens − timings.prompt_n; vLLM usage.prompt_tokens_details.cached_tokens)",
      );
  }
  return L.join("\n");
}
