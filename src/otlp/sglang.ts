// SGLang's request traces → one engine request each (pure). SGLang sends no per-request latency
// attributes a split could use (newer releases' root gen_ai.latency.* are the tokenizer's view,
// whose "prefill" includes the queue): the parts come from the slices' own start and end times.
import { SGLANG_ROOT_NAME, SGLANG_SLICE, SGLANG_SPAN } from "./attributes.ts";
import type { EngineRequest } from "./join.ts";
import type { OtlpSpan } from "./spans.ts";

/** TP ranks step together: a rank that times the same request's queue or first token this much apart is a finding. */
export const RANK_BOUND_MS = 5;

const SLICE_NAMES = new Set<string>(Object.values(SGLANG_SLICE));

export interface SglangTraces {
  requests: EngineRequest[];
  /** Trace ids of SGLang traces whose root span never came (its rid is only on the root). */
  orphans: string[];
  /** Requests whose TP ranks disagree past RANK_BOUND_MS, with the worst gap (ms). */
  rankDisagreements: number;
  worstRankGapMs: number;
  /** The most scheduler ranks seen in one request (1 without TP). */
  maxRanks: number;
}

export const isSglangRoot = (s: OtlpSpan): boolean =>
  typeof s.attributes[SGLANG_SPAN.rid] === "string" && SGLANG_ROOT_NAME.test(s.name);
const isThread = (s: OtlpSpan): boolean => typeof s.attributes[SGLANG_SPAN.threadLabel] === "string";
/** Whether a span belongs to SGLang's request layout (its root, a thread span or a named slice). */
export const isSglangSpan = (s: OtlpSpan): boolean => isSglangRoot(s) || isThread(s) || SLICE_NAMES.has(s.name);

const dur = (s: OtlpSpan) => s.endUnixMs - s.startUnixMs;
/** A root's rid; multi-tokenizer mode prefixes "<worker>_", which SGLang's root name drops and some releases' attribute not. */
const ridOf = (root: OtlpSpan) => String(root.attributes[SGLANG_SPAN.rid]).split("_").pop()!;

interface Thread {
  span: OtlpSpan;
  rank: number | null;
  slices: OtlpSpan[];
}

/** The first-starting slice of that name. */
function first(slices: readonly OtlpSpan[], name: string): OtlpSpan | undefined {
  let out: OtlpSpan | undefined;
  for (const s of slices) if (s.name === name && (!out || s.startUnixMs < out.startUnixMs)) out = s;
  return out;
}

/** One scheduler thread's reading of the request: queue, prefill, first token (epoch ms), last decode end. */
function schedulerView(slices: readonly OtlpSpan[]) {
  const waiting = first(slices, SGLANG_SLICE.prefillWaiting);
  const forward = first(slices, SGLANG_SLICE.prefillForward);
  // Older releases close each chunk but the last as a sibling before prefill_forward; newer nest them in it.
  let prefillStart = forward?.startUnixMs ?? Number.NaN;
  for (const s of slices)
    if (s.name === SGLANG_SLICE.chunkedPrefill && !(s.startUnixMs >= prefillStart)) prefillStart = s.startUnixMs;
  let lastDecodeEnd = Number.NaN;
  for (const s of slices)
    if (
      (s.name === SGLANG_SLICE.decodeLoop || s.name === SGLANG_SLICE.decodeForward) &&
      !(s.endUnixMs <= lastDecodeEnd)
    )
      lastDecodeEnd = s.endUnixMs;
  return {
    queueMs: waiting ? dur(waiting) : null,
    scheduledUnixMs: waiting?.endUnixMs ?? null,
    prefillMs: forward ? forward.endUnixMs - prefillStart : null,
    firstTokenUnixMs: forward?.endUnixMs ?? null,
    lastDecodeEndUnixMs: Number.isFinite(lastDecodeEnd) ? lastDecodeEnd : null,
  };
}

/**
 * The request traces among `spans` (grouped by trace id; the root found by its `rid` attribute and name), each read
 * from the lowest TP rank's scheduler thread. Spans of other layouts are left alone.
 */
export function sglangRequests(spans: readonly OtlpSpan[]): SglangTraces {
  const byTrace = new Map<string, OtlpSpan[]>();
  for (const s of spans) {
    if (!isSglangSpan(s)) continue;
    let list = byTrace.get(s.traceId);
    if (!list) byTrace.set(s.traceId, (list = []));
    list.push(s);
  }
  const out: SglangTraces = { requests: [], orphans: [], rankDisagreements: 0, worstRankGapMs: 0, maxRanks: 0 };
  for (const [traceId, list] of byTrace) {
    const roots = list.filter(isSglangRoot);
    if (roots.length === 0) {
      out.orphans.push(traceId);
      continue;
    }
    const byId = new Map(list.map((s) => [s.spanId, s]));
    const threads = new Map<string, Thread>();
    for (const s of list)
      if (isThread(s)) {
        const r = s.attributes[SGLANG_SPAN.tpRank];
        threads.set(s.spanId, { span: s, rank: typeof r === "number" ? r : null, slices: [] });
      }
    const loose: OtlpSpan[] = [];
    for (const s of list) {
      if (!SLICE_NAMES.has(s.name) || isThread(s)) continue;
      // A slice's thread is its nearest thread-span ancestor (slices nest in slices).
      let p = byId.get(s.parentSpanId);
      for (let hops = 0; p && !threads.has(p.spanId) && hops < 64; hops++) p = byId.get(p.parentSpanId);
      const t = p ? threads.get(p.spanId) : undefined;
      if (t) t.slices.push(s);
      else loose.push(s);
    }
    // The scheduler threads are those with a rank (the tokenizer's has none); the lowest rank is read.
    const ranked = [...threads.values()].filter((t) => t.rank !== null).sort((a, b) => a.rank! - b.rank!);
    const views = ranked.map((t) => schedulerView(t.slices));
    // Without rank attributes (or with the thread spans lost) the slices are read wherever they hang.
    const view = views[0] ?? schedulerView([...loose, ...[...threads.values()].flatMap((t) => t.slices)]);
    out.maxRanks = Math.max(out.maxRanks, Math.max(1, ranked.length));
    if (views.length > 1) {
      let gap = 0;
      for (const v of views.slice(1)) {
        if (v.queueMs !== null && view.queueMs !== null) gap = Math.max(gap, Math.abs(v.queueMs - view.queueMs));
        if (v.firstTokenUnixMs !== null && view.firstTokenUnixMs !== null)
          gap = Math.max(gap, Math.abs(v.firstTokenUnixMs - view.firstTokenUnixMs));
      }
      if (gap > RANK_BOUND_MS) out.rankDisagreements++;
      out.worstRankGapMs = Math.max(out.worstRankGapMs, gap);
    }
    for (const root of roots) {
      const missing: string[] = [];
      if (view.queueMs === null) missing.push(SGLANG_SLICE.prefillWaiting);
      if (view.prefillMs === null) missing.push(SGLANG_SLICE.prefillForward);
      const tokens = root.attributes["gen_ai.usage.completion_tokens"];
      const ft = view.firstTokenUnixMs;
      out.requests.push({
        engineId: ridOf(root),
        startUnixMs: root.startUnixMs,
        endUnixMs: root.endUnixMs,
        queueMs: view.queueMs,
        prefillMs: view.prefillMs,
        ttftMs: ft !== null ? ft - root.startUnixMs : null,
        // First token → last token, as vLLM's time_in_model_decode: decode_waiting and every decode slice.
        decodeMs: ft !== null && view.lastDecodeEndUnixMs !== null ? view.lastDecodeEndUnixMs - ft : null,
        inferenceMs:
          view.scheduledUnixMs !== null && ft !== null ? (view.lastDecodeEndUnixMs ?? ft) - view.scheduledUnixMs : null,
        completionTokens: typeof tokens === "number" ? tokens : null,
        schedulerMs: null,
        forwardMs: null,
        executeMs: null,
        missing,
      });
    }
  }
  return out;
}

/**
 * Which SGLang requests are complete as spans arrive: the root (sent when the tokenizer finishes it) and the
 * rank-0 scheduler's thread span (ended after its last slice, so its slices came before or with it).
 */
export class SglangProgress {
  private readonly traces = new Map<string, { rid: string | null; rank0: boolean; done: boolean }>();
  /** Feeds arrived spans; returns the rids that became complete. */
  feed(spans: readonly OtlpSpan[]): string[] {
    const done: string[] = [];
    for (const s of spans) {
      const root = isSglangRoot(s);
      const rank0 = isThread(s) && s.attributes[SGLANG_SPAN.tpRank] === 0;
      if (!root && !rank0) continue;
      let t = this.traces.get(s.traceId);
      if (!t) this.traces.set(s.traceId, (t = { rid: null, rank0: false, done: false }));
      if (root) t.rid = ridOf(s);
      if (rank0) t.rank0 = true;
      if (!t.done && t.rid !== null && t.rank0) {
        t.done = true;
        done.push(t.rid);
      }
    }
    return done;
  }
}
