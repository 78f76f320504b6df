// The client's per-request records joined with the engine's request spans (pure). Each request
// carries an id the engine puts in gen_ai.request.id; the clocks are aligned from the pairs, and
// each TTFT is split into what happened on the way up, in the server, and on the way back.
import { npMean, npPercentile } from "../load/npstats.ts";
import { VLLM_REQUEST_SPAN, VLLM_SPAN } from "./attributes.ts";
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
  kind: "unmatched-request" | "unmatched-span" | "duplicate-span" | "missing-attribute" | "clock" | "no-spans";
  detail: string;
}

export interface JoinResult {
  /** Which id joined them. */
  key: string;
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
const REQUIRED = [VLLM_SPAN.timeInQueue, VLLM_SPAN.timeToFirstToken, VLLM_SPAN.timeInModelPrefill] as const;

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

export function joinSpans(records: readonly JoinRecord[], spans: readonly OtlpSpan[]): JoinResult {
  const byId = new Map<string, JoinRecord>();
  for (const r of records) byId.set(r.id, r);
  const findings: JoinFinding[] = [];
  const matched = new Map<string, OtlpSpan>();
  const unmatchedSpans: string[] = [];
  const duplicateSpans: string[] = [];
  let unmatchedSpanCount = 0;
  let duplicateCount = 0;
  let requestSpans = 0;
  for (const s of spans) {
    const sid = s.attributes[VLLM_SPAN.requestId];
    // Other spans an engine sends (HTTP server spans, scheduler spans) are not requests.
    if (typeof sid !== "string" || (s.name !== VLLM_REQUEST_SPAN && !(VLLM_SPAN.timeInQueue in s.attributes))) continue;
    requestSpans++;
    const cid = clientIdOf(sid, byId);
    if (cid === null) {
      if (unmatchedSpanCount++ < MAX_LISTED) unmatchedSpans.push(sid);
      continue;
    }
    if (matched.has(cid)) {
      if (duplicateCount++ < MAX_LISTED) duplicateSpans.push(sid);
      continue;
    }
    matched.set(cid, s);
  }
  if (requestSpans === 0)
    findings.push({
      kind: "no-spans",
      detail:
        spans.length === 0
          ? "the engine sent no spans: is it started with the receiver's endpoint (vLLM: --otlp-traces-endpoint, OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf)?"
          : `${spans.length} spans arrived, none of them a request span (no ${VLLM_SPAN.requestId})`,
    });
  if (unmatchedSpanCount > 0)
    findings.push({
      kind: "unmatched-span",
      detail: `${unmatchedSpanCount} request spans name no request this run sent (another client, or ids the engine rewrote)`,
    });
  if (duplicateCount > 0)
    findings.push({
      kind: "duplicate-span",
      detail: `${duplicateCount} spans repeat a request already joined (kept the first)`,
    });

  const unmatchedRequests: string[] = [];
  let unmatchedRequestCount = 0;
  const pairs: Array<{ r: JoinRecord; s: OtlpSpan }> = [];
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
  let missing = 0;
  let early = 0;
  for (const { r, s } of pairs) {
    if (!r.ok || !Number.isFinite(r.ttftMs)) continue;
    const a = s.attributes;
    const queue = sec(a, VLLM_SPAN.timeInQueue);
    const ttft = sec(a, VLLM_SPAN.timeToFirstToken);
    const prefill = sec(a, VLLM_SPAN.timeInModelPrefill);
    if (queue === null || ttft === null || prefill === null) {
      missing++;
      continue;
    }
    const network = toClient(s.startUnixMs) - r.sendUnixMs;
    // Allow the estimate's own spread before calling an arrival impossible.
    if (network < -1) early++;
    const decode = sec(a, VLLM_SPAN.timeInModelDecode);
    const spanTokens = a[VLLM_SPAN.completionTokens];
    const n = typeof spanTokens === "number" && spanTokens > 0 ? spanTokens : r.outputTokens;
    const forward = sec(a, VLLM_SPAN.timeInModelForward);
    const execute = sec(a, VLLM_SPAN.timeInModelExecute);
    const inference = sec(a, VLLM_SPAN.timeInModelInference);
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
      schedulerMs: sec(a, VLLM_SPAN.timeInScheduler),
      forwardMs: forward,
      executeMs: execute,
      inferenceMs: inference,
      outsideModelMs: inference !== null && model !== null ? inference - model : null,
    });
  }
  if (missing > 0)
    findings.push({
      kind: "missing-attribute",
      detail: `${missing} joined spans lack ${REQUIRED.join(", ")}: their split is left out`,
    });
  if (early > 0)
    findings.push({
      kind: "clock",
      detail: `${early} requests arrive at the server before the client sent them on the aligned clocks: a clock jumped during the run, or the ids do not belong together`,
    });

  const col = (k: keyof RequestSplit) =>
    perRequest.map((x) => x[k] as number | null).filter((v) => v !== null) as number[];
  return {
    key: VLLM_SPAN.requestId,
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
