// Multi-turn sessions: each turn sends the whole conversation so far (chat messages) plus a new user
// message; a session's turns run one after another, sessions run concurrently. The assistant turns
// resent as history are the dataset's (ShareGPT's gpt turns) or synthesized text of the reply's
// length, not the server's own reply: the server's prefix cache can then reuse the history up to the
// previous turn's prompt, which is what the per-turn table's cached tokens show.
import { InputError, UsageError } from "../errors.ts";
import { abortableSleep } from "../sleep.ts";
import type { PromptSynth } from "./datasets/synth.ts";
import type { Trace } from "./datasets/trace.ts";
import { MAX_RUN_MS, RUN_BOUND_TEXT, spanText } from "./limits.ts";
import { npPercentile } from "./npstats.ts";
import { Rng } from "./schedule.ts";
import type { RequestRecord } from "./types.ts";
import { estimateTokens, type Prompt } from "./workload.ts";

export interface SessionTurn {
  user: string;
  /** What is resent as this turn's reply in later turns. */
  assistant: string;
  /** max_tokens of this turn's reply. */
  outputLen: number;
  /** Earliest send, ms from the run's start (trace sessions: the row's time ÷ speed); null: after think time. */
  atMs: number | null;
}

export interface Session {
  id: string;
  turns: SessionTurn[];
}

/** ShareGPT conversations as sessions: human turns are sent, gpt turns resent. Pairs only (human → gpt). */
export function sharegptSessions(path: string, text: string, maxSessions = Number.POSITIVE_INFINITY): Session[] {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (e) {
    throw new InputError(`${path}: not valid JSON: ${(e as Error).message}`);
  }
  if (!Array.isArray(data)) throw new InputError(`${path}: expected a JSON array of conversations`);
  const out: Session[] = [];
  for (let c = 0; c < data.length && out.length < maxSessions; c++) {
    const entry = data[c] as { id?: unknown; conversations?: unknown; conversation?: unknown };
    const conv = entry?.conversations ?? entry?.conversation;
    if (!Array.isArray(conv)) continue;
    const turns: SessionTurn[] = [];
    for (let k = 0; k + 1 < conv.length; k += 2) {
      const u = conv[k] as { from?: unknown; value?: unknown; content?: unknown };
      const a = conv[k + 1] as { from?: unknown; value?: unknown; content?: unknown };
      const ut = u?.value ?? u?.content;
      const at = a?.value ?? a?.content;
      // A conversation that does not alternate human → gpt ends where it stops alternating.
      if (u?.from === "gpt" || a?.from === "human" || typeof ut !== "string" || typeof at !== "string") break;
      turns.push({ user: ut, assistant: at, outputLen: Math.max(1, estimateTokens(at)), atMs: null });
    }
    if (turns.length) out.push({ id: typeof entry.id === "string" ? entry.id : `conversation-${c}`, turns });
  }
  if (out.length === 0) throw new InputError(`${path}: no conversation with a human → gpt turn`);
  return out;
}

/**
 * Refuses sessions whose own schedule outlasts one run, before anything is sent: a trace turn due past the
 * bound (named by its line), or think time between the turns of the longest session past it.
 */
export function checkSessionSpan(o: { trace?: Trace; speed?: number; thinkMs?: number; maxTurns?: number }): void {
  const speed = o.speed ?? 1;
  for (const r of o.trace?.rows ?? []) {
    const at = r.timestampMs === null ? 0 : r.timestampMs / speed;
    if (!(at <= MAX_RUN_MS))
      throw new InputError(
        `this turn is due ${spanText(at)} after the run starts (at ${speed}× speed), past ${RUN_BOUND_TEXT}`,
        {
          position: { file: o.trace!.path, line: r.line, column: 1 },
          hint: "raise --replay-speed, or drop the late rows",
        },
      );
  }
  const think = (o.thinkMs ?? 0) * Math.max(0, (o.maxTurns ?? 1) - 1);
  if (!(think <= MAX_RUN_MS))
    throw new UsageError(
      `--think-time ${spanText(o.thinkMs!)} between ${o.maxTurns} turns is ${spanText(think)} of thinking alone, past ${RUN_BOUND_TEXT}`,
      { hint: "shorten --think-time or use fewer turns" },
    );
}

/** A trace's rows grouped by session_id (file order within a session), each row one turn. */
export function traceSessions(trace: Trace, synth: PromptSynth, speed = 1): Session[] {
  const by = new Map<string, Session>();
  for (const r of trace.rows) {
    if (r.sessionId === null)
      throw new InputError(`every row of a session trace needs a session_id`, {
        position: { file: trace.path, line: r.line, column: 1 },
      });
    let s = by.get(r.sessionId);
    if (!s) by.set(r.sessionId, (s = { id: r.sessionId, turns: [] }));
    const user = r.prompt ?? r.messages?.map((m) => m.content).join("\n") ?? synth.text(r.inputLen, r.line * 2);
    s.turns.push({
      user,
      assistant: synth.text(r.outputLen, r.line * 2 + 1),
      outputLen: r.outputLen,
      atMs: r.timestampMs === null ? null : r.timestampMs / speed,
    });
  }
  return [...by.values()];
}

export function syntheticSessions(
  o: { sessions: number; turns: number; inputLen: number; outputLen: number },
  synth: PromptSynth,
): Session[] {
  for (const [flag, v, max] of [
    ["--sessions", o.sessions, 100_000],
    ["--session-turns", o.turns, 1000],
    ["--session-input-len", o.inputLen, 1 << 20],
    ["--session-output-len", o.outputLen, 1 << 20],
  ] as const)
    if (!(Number.isInteger(v) && v >= 1 && v <= max))
      throw new UsageError(`${flag} expects an integer in [1, ${max}], got ${v}`);
  const out: Session[] = [];
  for (let s = 0; s < o.sessions; s++) {
    const turns: SessionTurn[] = [];
    for (let k = 0; k < o.turns; k++)
      turns.push({
        user: synth.text(o.inputLen, (s * 1000 + k) * 2),
        assistant: synth.text(o.outputLen, (s * 1000 + k) * 2 + 1),
        outputLen: o.outputLen,
        atMs: null,
      });
    out.push({ id: `session-${s}`, turns });
  }
  return out;
}

/** The chat prompt of turn k: every earlier turn with its reply, then turn k's user message. */
export function turnPrompt(s: Session, k: number): Prompt {
  const messages: Array<{ role: string; content: string }> = [];
  let chars = 0;
  for (let j = 0; j <= k; j++) {
    const t = s.turns[j]!;
    messages.push({ role: "user", content: t.user });
    chars += t.user.length;
    if (j < k) {
      messages.push({ role: "assistant", content: t.assistant });
      chars += t.assistant.length;
    }
  }
  return { messages, inputLen: Math.max(1, Math.round(chars / 4)), outputLen: s.turns[k]!.outputLen };
}

export interface SessionRunOptions {
  /** Sessions in flight at once (default: all). */
  concurrency?: number;
  /** Think time between a reply and the next turn: mean (ms) and distribution. */
  thinkMs?: number;
  thinkDist?: "constant" | "exponential";
  seed?: number;
  signal?: AbortSignal;
  now(): number;
  stopped(): boolean;
  /** Sends one turn; resolves with its record. */
  send(index: number, scheduledMs: number, p: Prompt): Promise<RequestRecord>;
}

/** Turns of the dataset never sent, by why: every turn is sent or counted here. */
export interface TurnsNotSent {
  /** After a failed turn ended its session (the next turn's history would hold a reply that never came). */
  afterFailedTurn: number;
  /** The run stopped first (an interrupt, a rejected request, or a stop after failures). */
  runStopped: number;
}

export interface SessionsRun {
  /** The turn index of every request index sent. */
  turnOf: Map<number, number>;
  notSent: TurnsNotSent;
  /** Sessions that a failed turn ended early. */
  sessionsEnded: number;
}

/** Runs the sessions: which turn each request was, and the turns never sent, by reason. */
export async function runSessions(sessions: readonly Session[], o: SessionRunOptions): Promise<SessionsRun> {
  const turnOf = new Map<number, number>();
  const notSent: TurnsNotSent = { afterFailedTurn: 0, runStopped: 0 };
  let sessionsEnded = 0;
  let nextIndex = 0;
  let nextSession = 0;
  const think = o.thinkMs ?? 0;
  const one = async (s: Session, si: number) => {
    const rng = new Rng(((o.seed ?? 0) * 7919 + si) | 0);
    let ready = o.now();
    for (let k = 0; k < s.turns.length; k++) {
      const left = s.turns.length - k;
      if (o.stopped()) return void (notSent.runStopped += left);
      const t = s.turns[k]!;
      if (k > 0 && think > 0) ready += o.thinkDist === "exponential" ? rng.exponential(think) : think;
      const at = Math.max(ready, t.atMs ?? 0);
      // Timers can fire up to a millisecond early against the high-resolution clock (libuv's loop time is cached
      // and whole-ms): sleep again until the turn is due, so no turn goes before its think time has passed.
      for (let wait = at - o.now(); wait > 0 && !o.stopped(); wait = at - o.now()) await abortableSleep(wait, o.signal);
      if (o.stopped()) return void (notSent.runStopped += left);
      const index = nextIndex++;
      turnOf.set(index, k);
      const rec = await o.send(index, at, turnPrompt(s, k));
      if (rec.errorClass !== null) {
        // A turn the run cut (aborted) is the run's stop, not a failure of the session.
        if (rec.errorClass === "aborted") notSent.runStopped += left - 1;
        else if (left > 1) {
          notSent.afterFailedTurn += left - 1;
          sessionsEnded++;
        }
        return;
      }
      ready = rec.sendMs + rec.endMs;
    }
  };
  const lanes = Math.max(1, Math.min(o.concurrency ?? sessions.length, sessions.length));
  const lane = async () => {
    for (let si = nextSession++; si < sessions.length; si = nextSession++) await one(sessions[si]!, si);
  };
  await Promise.all(Array.from({ length: lanes }, lane));
  return { turnOf, notSent, sessionsEnded };
}

/** "191 turns not sent: 191 after a failed turn ended its session (1 session)"; null when every turn was sent. */
export function notSentText(n: TurnsNotSent, sessionsEnded: number): string | null {
  const total = n.afterFailedTurn + n.runStopped;
  if (total === 0) return null;
  const parts: string[] = [];
  if (n.afterFailedTurn)
    parts.push(
      `${n.afterFailedTurn} after a failed turn ended its session (${sessionsEnded} session${sessionsEnded === 1 ? "" : "s"})`,
    );
  if (n.runStopped) parts.push(`${n.runStopped} because the run stopped first`);
  return `${total} turn${total === 1 ? "" : "s"} not sent: ${parts.join(", ")}`;
}

export interface TurnRow {
  /** 0-based turn index. */
  turn: number;
  requests: number;
  failed: number;
  ttftP50Ms: number | null;
  ttftP99Ms: number | null;
  promptTokensMean: number | null;
  /** Mean cached prompt tokens as the server reported them (llama.cpp timings.cache_n); null when it did not. */
  cachedTokensMean: number | null;
  cachedSource: string | null;
}

/**
 * Prompt tokens the server did not compute because its cache held them: llama.cpp `timings.cache_n`, or,
 * on builds without it (b4748), usage.prompt_tokens − timings.prompt_n (prompt_n counts only the tokens
 * it evaluated); vLLM usage.prompt_tokens_details.cached_tokens. Null when the server said neither.
 */
export function cachedTokens(r: RequestRecord): number | null {
  const s = r.server;
  if (!s) return null;
  if (s.cachedTokens !== undefined) return s.cachedTokens;
  if (s.source === "llamacpp-timings" && s.promptTokens !== undefined && r.promptTokens >= 0)
    return Math.max(0, r.promptTokens - s.promptTokens);
  return null;
}

export function turnTable(recs: readonly RequestRecord[], turnOf: ReadonlyMap<number, number>): TurnRow[] {
  const rows: TurnRow[] = [];
  const groups = new Map<number, RequestRecord[]>();
  for (const r of recs) {
    if (r.warmup) continue;
    const k = turnOf.get(r.index);
    if (k === undefined) continue;
    let g = groups.get(k);
    if (!g) groups.set(k, (g = []));
    g.push(r);
  }
  for (const k of [...groups.keys()].sort((a, b) => a - b)) {
    const g = groups.get(k)!;
    const ok = g.filter((r) => r.errorClass === null);
    const ttft = ok.map((r) => r.ttftMs).filter(Number.isFinite);
    const pt = ok.map((r) => r.promptTokens).filter((x) => x >= 0);
    const cached = ok.map(cachedTokens).filter((x): x is number => x !== null);
    const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : null);
    rows.push({
      turn: k,
      requests: g.length,
      failed: g.length - ok.length,
      ttftP50Ms: ttft.length ? npPercentile(ttft, 50) : null,
      ttftP99Ms: ttft.length ? npPercentile(ttft, 99) : null,
      promptTokensMean: mean(pt),
      cachedTokensMean: mean(cached),
      cachedSource: cached.length ? (ok.find((r) => cachedTokens(r) !== null)?.server?.source ?? null) : null,
    });
  }
  return rows;
}
