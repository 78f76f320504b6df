// The client's per-request records joined with the engine's request spans (pure). Each request
// carries an id the engine names its request by (vLLM: gen_ai.request.id of its llm_request span;
// SGLang: the root span's rid, see sglang.ts); the clocks are aligned from the pairs, and each TTFT
// is split into what happened on the way up, in the server, and on the way back.
import { npMean, npPercentile } from "../load/npstats.ts";
import { VLLM_REQUEST_SPAN, VLLM_SPAN } from "./attributes.ts";
import { RANK_BOUND_MS, sglangRequests } from "./sglang.ts";
import type { OtlpSpan } from "./spans.ts";

/** One client request, on the client's clock (epoch ms), with times relative to its send. */
export interface JoinRecord {
  /** The id the client sent (body request_id / X-Request-Id). */
  id: string;
  index: number;
  ok: boolean;
  sendUnixMs: number;
  /** First chunk with choices (TTFT) and last such chunk, ms after send; NaN when never seen. */
  ttftMs: number;
  lastChunkMs: number;
  outputTokens: number;
}

/** Per joined request, ms; the TTFT parts add up to the client's TTFT. */
export interface RequestSplit {
  id: string;
  index: number;
  clientTtftMs: number;
  /** Client send → server arrival (aligned clocks): the network, HTTP and the server's accept. */
  networkMs: number;
  /** Server arrival → queued: tokenisation and hand-off to the engine (server TTFT − queue − prefill). */
  intakeMs: number;
  queueMs: number;
  prefillMs: number;
  /** Server first token → the client reading it: detokenise, stream, network. */
  deliveryMs: number;
  serverTtftMs: number;
  /** Output tokens (the span's completion tokens, else the client's count). */
  outputTokens: number;
  /** Server decode ÷ (tokens − 1) and the client's TPOT over the same request (null with < 2 tokens). */
  serverTpotMs: number | null;
  clientTpotMs: number | null;
  /** With detailed traces (vLLM --collect-detailed-traces), seconds → ms; null when absent. */
  schedulerMs: number | null;
  forwardMs: number | null;
  executeMs: number | null;
  /** First scheduled → last token (time_in_model_inference), ms. */
  inferenceMs: number | null;
  /**
   * Of the inference time, what the model did not spend: inference − execute (or − forward without execute) — the
   * scheduler, output processing and waiting between steps; null without detailed traces.
   */
  outsideModelMs: number | null;
}

export interface Distribution {
  n: number;
  mean: number;
  p50: number;
  p90: number;
  p99: number;
}

export interface JoinFinding {
  kind:
    | "unmatched-request"
    | "unmatched-span"
    | "duplicate-span"
    | "missing-attribute"
    | "clock"
    | "no-spans"
    | "rank-disagreement";
  detail: string;
}

/** One request as the engine timed it, whatever its span layout: epoch ms; durations in ms, null when not sent. */
export interface EngineRequest {
  /** The engine's id for it (vLLM's gen_ai.request.id, SGLang's rid). */
  engineId: string;
  /** Arrival and finish on the server's clock. */
  startUnixMs: number;
  endUnixMs: number;
  queueMs: number | null;
  prefillMs: number | null;
  /** Arrival → first token. */
  ttftMs: number | null;
  /** First token → last token. */
  decodeMs: number | null;
  /** First scheduled → last token. */
  inferenceMs: number | null;
  completionTokens: number | null;
  schedulerMs: number | null;
  forwardMs: number | null;
  executeMs: number | null;
  /** What the split needs and this request's spans lack. */
  missing: string[];
}

/** The span layouts the join reads. */
export type SpanLayout = "vllm" | "sglang";

export interface JoinResult {
  /** Which id joined them (per layout seen). */
  key: string;
  /** The layouts the request spans came in. */
  layouts: SpanLayout[];
  /** Parts the engine's layout has no equivalent for, in words (not invented). */
  notSent: string[];
  /** How the layout was read (e.g. which TP rank), in words. */
  notes: string[];
  requests: number;
  spans: number;
  joined: number;
  /** joined ÷ requests (0 with no requests). */
  joinRate: number;
  unmatchedRequests: string[];
  unmatchedSpans: string[];
  duplicateSpans: string[];
  /** Server clock − client clock at refUnixMs (client clock), ms, and its drift (ppm); null with no pairs. */
  clock: { offsetMs: number; skewPpm: number; refUnixMs: number; pairs: number } | null;
  perRequest: RequestSplit[];
  /** Distributions of each RequestSplit part over the joined, successful requests. */
  split: Record<
    | "clientTtftMs"
    | "networkMs"
    | "intakeMs"
    | "queueMs"
    | "prefillMs"
    | "deliveryMs"
    | "serverTtftMs"
    | "serverTpotMs"
    | "clientTpotMs"
    | "forwardMs"
    | "executeMs"
    | "schedulerMs"
    | "outsideModelMs",
    Distribution | null
  >;
  findings: JoinFinding[];
}

/** Listed in full up to this many; the counts stay exact. */
const MAX_LISTED = 50;

/** SGLang's traces have no per-request split of the engine's time into forward, execute and scheduler. */
const SGLANG_NOT_SENT = [
  "model forward / execute / scheduler per request (vLLM's --collect-detailed-traces): not sent by SGLang",
];

/**
 * The client id a span's gen_ai.request.id stands for. vLLM names a request `chatcmpl-<id>` or
 * `cmpl-<id>` from the body's request_id (or X-Request-Id), and older releases append `-<8 hex>`.
 */
export function clientIdOf(spanId: string, known: { has(id: string): boolean }): string | null {
  if (known.has(spanId)) return spanId;
  const bare = spanId.replace(/^(chatcmpl|cmpl)-/, "");
  if (known.has(bare)) return bare;
  const cut = bare.replace(/-[0-9a-f]{8}$/, "");
  return known.has(cut) ? cut : null;
}

export function distribution(xs: readonly number[]): Distribution | null {
  const v = xs.filter(Number.isFinite);
  if (v.length === 0) return null;
  const s = Float64Array.from(v).sort();
  return {
    n: s.length,
    mean: npMean(s),
    p50: npPercentile(s, 50, true),
    p90: npPercentile(s, 90, true),
    p99: npPercentile(s, 99, true),
  };
}

const sec = (a: OtlpSpan["attributes"], k: string): number | null => {
  const v = a[k];
  return typeof v === "number" && Number.isFinite(v) ? v * 1000 : null;
};

/**
 * Offset θ (server − client) from the lower envelopes of the two one-way gaps, NTP-style: the
 * smallest (arrival − send) is θ + the fastest trip up, the smallest (client last chunk − span end)
 * is the fastest trip down − θ; with equal fastest trips θ is half their difference. Skew comes
 * from the same estimate on each half of the run.
 */
function estimateClock(pairs: Array<{ send: number; up: number; down: number }>): JoinResult["clock"] {
  const usable = pairs.filter((p) => Number.isFinite(p.up) && Number.isFinite(p.down));
  if (usable.length === 0) return null;
  usable.sort((a, b) => a.send - b.send);
  const theta = (xs: typeof usable) => {
    let up = Number.POSITIVE_INFINITY;
    let down = Number.POSITIVE_INFINITY;
    for (const p of xs) {
      up = Math.min(up, p.up);
      down = Math.min(down, p.down);
    }
    return (up - down) / 2;
  };
  const all = theta(usable);
  let skewPpm = 0;
  if (usable.length >= 8) {
    const h = usable.length >> 1;
    const a = usable.slice(0, h);
    const b = usable.slice(h);
    const dt = npMean(b.map((p) => p.send)) - npMean(a.map((p) => p.send));
    if (dt > 0) skewPpm = ((theta(b) - theta(a)) / dt) * 1e6;
  }
  return { offsetMs: all, skewPpm, refUnixMs: npMean(usable.map((p) => p.send)), pairs: usable.length };
}

/** vLLM's llm_request span → the engine's request (its latencies are attributes, in seconds). */
function vllmRequest(s: OtlpSpan, sid: string): EngineRequest {
  const a = s.attributes;
  const missing = [VLLM_SPAN.timeInQueue, VLLM_SPAN.timeToFirstToken, VLLM_SPAN.timeInModelPrefill].filter(
    (k) => sec(a, k) === null,
  );
  const tokens = a[VLLM_SPAN.completionTokens];
  return {
    engineId: sid,
    startUnixMs: s.startUnixMs,
    endUnixMs: s.endUnixMs,
    queueMs: sec(a, VLLM_SPAN.timeInQueue),
    prefillMs: sec(a, VLLM_SPAN.timeInModelPrefill),
    ttftMs: sec(a, VLLM_SPAN.timeToFirstToken),
    decodeMs: sec(a, VLLM_SPAN.timeInModelDecode),
    inferenceMs: sec(a, VLLM_SPAN.timeInModelInference),
    completionTokens: typeof tokens === "number" ? tokens : null,
    schedulerMs: sec(a, VLLM_SPAN.timeInScheduler),
    forwardMs: sec(a, VLLM_SPAN.timeInModelForward),
    executeMs: sec(a, VLLM_SPAN.timeInModelExecute),
    missing,
  };
}

/** vLLM's request span's id, or null for any other span (HTTP server spans; SGLang's roots, which newer releases give the id too). */
export function vllmRequestId(s: OtlpSpan): string | null {
  const sid = s.attributes[VLLM_SPAN.requestId];
  return typeof sid === "string" && (s.name === VLLM_REQUEST_SPAN || VLLM_SPAN.timeInQueue in s.attributes)
    ? sid
    : null;
}

/** The requests among the spans, in every layout the join reads. */
function engineRequests(spans: readonly OtlpSpan[]): {
  requests: Array<EngineRequest & { layout: SpanLayout }>;
  sglang: ReturnType<typeof sglangRequests>;
} {
  const requests: Array<EngineRequest & { layout: SpanLayout }> = [];
  for (const s of spans) {
    const sid = vllmRequestId(s);
    if (sid === null) continue;
    requests.push({ ...vllmRequest(s, sid), layout: "vllm" });
  }
  const sglang = sglangRequests(spans);
  for (const r of sglang.requests) requests.push({ ...r, layout: "sglang" });
  return { requests, sglang };
}

/** `ignore`: client ids whose spans are this run's but not measured (warm-up): neither joined nor strangers. */
export function joinSpans(
  records: readonly JoinRecord[],
  spans: readonly OtlpSpan[],
  ignore: { has(id: string): boolean } = new Set<string>(),
): JoinResult {
  const byId = new Map<string, JoinRecord>();
  for (const r of records) byId.set(r.id, r);
  const findings: JoinFinding[] = [];
  const matched = new Map<string, EngineRequest & { layout: SpanLayout }>();
  const unmatchedSpans: string[] = [];
  const duplicateSpans: string[] = [];
  let unmatchedSpanCount = 0;
  let duplicateCount = 0;
  let requestSpans = 0;
  const { requests, sglang } = engineRequests(spans);
  const layouts = new Set<SpanLayout>();
  for (const q of requests) {
    if (clientIdOf(q.engineId, ignore) !== null) continue;
    requestSpans++;
    layouts.add(q.layout);
    const cid = clientIdOf(q.engineId, byId);
    if (cid === null) {
      if (unmatchedSpanCount++ < MAX_LISTED) unmatchedSpans.push(q.engineId);
      continue;
    }
    if (matched.has(cid)) {
      if (duplicateCount++ < MAX_LISTED) duplicateSpans.push(q.engineId);
      continue;
    }
    matched.set(cid, q);
  }
  // An SGLang trace whose root never came cannot be named (the rid is only on the root): listed by trace id.
  for (const t of sglang.orphans)
    if (unmatchedSpanCount++ < MAX_LISTED) unmatchedSpans.push(`trace ${t} (no root span)`);
  if (requestSpans === 0)
    findings.push({
      kind: "no-spans",
      detail:
        spans.length === 0
          ? "the engine sent no spans: is it started with the receiver's endpoint (vLLM: --otlp-traces-endpoint, OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf; SGLang: also --enable-trace)?"
          : `${spans.length} spans arrived, none of them a request span (no ${VLLM_SPAN.requestId} llm_request span, no SGLang "Req …" root with rid)`,
    });
  if (unmatchedSpanCount > 0)
    findings.push({
      kind: "unmatched-span",
      detail: `${unmatchedSpanCount} request spans name no request this run sent (another client, ids the engine rewrote, or SGLang traces without their root)`,
    });
  if (duplicateCount > 0)
    findings.push({
      kind: "duplicate-span",
      detail: `${duplicateCount} spans repeat a request already joined (kept the first)`,
    });
  const notes: string[] = [];
  if (layouts.has("sglang") && sglang.maxRanks > 1)
    notes.push(`SGLang: queue, prefill and decode read from the tp_rank 0 scheduler (of ${sglang.maxRanks} TP ranks)`);
  if (sglang.rankDisagreements > 0)
    findings.push({
      kind: "rank-disagreement",
      detail: `${sglang.rankDisagreements} SGLang requests' TP ranks time their queue or first token more than ${RANK_BOUND_MS} ms apart (worst ${sglang.worstRankGapMs.toFixed(1)} ms): the ranks' clocks or schedules differ; the split uses tp_rank 0`,
    });

  const unmatchedRequests: string[] = [];
  let unmatchedRequestCount = 0;
  const pairs: Array<{ r: JoinRecord; s: EngineRequest }> = [];
  for (const r of records) {
    const s = matched.get(r.id);
    if (s) pairs.push({ r, s });
    else if (unmatchedRequestCount++ < MAX_LISTED) unmatchedRequests.push(r.id);
  }
  if (unmatchedRequestCount > 0 && requestSpans > 0)
    findings.push({
      kind: "unmatched-request",
      detail: `${unmatchedRequestCount} of ${records.length} requests got no span (spans lost, sampled out, or still unsent when the run ended)`,
    });

  const clock = estimateClock(
    pairs
      .filter((p) => p.r.ok)
      .map(({ r, s }) => ({
        send: r.sendUnixMs,
        up: s.startUnixMs - r.sendUnixMs,
        down: r.sendUnixMs + r.lastChunkMs - s.endUnixMs,
      })),
  );
  const toClient = (serverMs: number) =>
    clock
      ? serverMs - (clock.offsetMs + clock.skewPpm * 1e-6 * (serverMs - clock.offsetMs - clock.refUnixMs))
      : serverMs;

  const perRequest: RequestSplit[] = [];
  const lacking = new Map<string, number>();
  let early = 0;
  for (const { r, s } of pairs) {
    if (!r.ok || !Number.isFinite(r.ttftMs)) continue;
    const { queueMs: queue, ttftMs: ttft, prefillMs: prefill } = s;
    if (queue === null || ttft === null || prefill === null) {
      for (const k of s.missing) lacking.set(k, (lacking.get(k) ?? 0) + 1);
      continue;
    }
    const network = toClient(s.startUnixMs) - r.sendUnixMs;
    // Allow the estimate's own spread before calling an arrival impossible.
    if (network < -1) early++;
    const decode = s.decodeMs;
    const n = s.completionTokens !== null && s.completionTokens > 0 ? s.completionTokens : r.outputTokens;
    const forward = s.forwardMs;
    const execute = s.executeMs;
    const inference = s.inferenceMs;
    const model = execute ?? forward;
    perRequest.push({
      id: r.id,
      index: r.index,
      clientTtftMs: r.ttftMs,
      networkMs: network,
      intakeMs: ttft - queue - prefill,
      queueMs: queue,
      prefillMs: prefill,
      deliveryMs: r.ttftMs - network - ttft,
      serverTtftMs: ttft,
      outputTokens: n,
      serverTpotMs: decode !== null && n > 1 ? decode / (n - 1) : null,
      clientTpotMs:
        r.outputTokens > 1 && Number.isFinite(r.lastChunkMs) ? (r.lastChunkMs - r.ttftMs) / (r.outputTokens - 1) : null,
      schedulerMs: s.schedulerMs,
      forwardMs: forward,
      executeMs: execute,
      inferenceMs: inference,
      outsideModelMs: inference !== null && model !== null ? inference - model : null,
    });
  }
  if (lacking.size > 0)
    findings.push({
      kind: "missing-attribute",
      detail: `joined requests lack what the split needs (${[...lacking].map(([k, n]) => `${k}: ${n}`).join(", ")}): their split is left out`,
    });
  if (early > 0)
    findings.push({
      kind: "clock",
      detail: `${early} requests arrive at the server before the client sent them on the aligned clocks: a clock jumped during the run, or the ids do not belong together`,
    });

  const col = (k: keyof RequestSplit) =>
    perRequest.map((x) => x[k] as number | null).filter((v) => v !== null) as number[];
  const keys: Record<SpanLayout, string> = { vllm: VLLM_SPAN.requestId, sglang: "rid (SGLang root span)" };
  return {
    key: layouts.size ? [...layouts].map((l) => keys[l]).join(", ") : VLLM_SPAN.requestId,
    layouts: [...layouts],
    notSent: layouts.has("sglang") && !layouts.has("vllm") ? SGLANG_NOT_SENT : [],
    notes,
    requests: records.length,
    spans: requestSpans,
    joined: pairs.length,
    joinRate: records.length ? pairs.length / records.length : 0,
    unmatchedRequests,
    unmatchedSpans,
    duplicateSpans,
    clock,
    perRequest,
    split: {
      clientTtftMs: distribution(col("clientTtftMs")),
      networkMs: distribution(col("networkMs")),
      intakeMs: distribution(col("intakeMs")),
      queueMs: distribution(col("queueMs")),
      prefillMs: distribution(col("prefillMs")),
      deliveryMs: distribution(col("deliveryMs")),
      serverTtftMs: distribution(col("serverTtftMs")),
      serverTpotMs: distribution(col("serverTpotMs")),
      clientTpotMs: distribution(col("clientTpotMs")),
      forwardMs: distribution(col("forwardMs")),
      executeMs: distribution(col("executeMs")),
      schedulerMs: distribution(col("schedulerMs")),
      outsideModelMs: distribution(col("outsideModelMs")),
    },
    findings,
  };
}
