// The sim's request spans, as vLLM sends them (vllm/tracing.py SpanAttributes; one "llm_request"
// SERVER span per finished request, started at arrival) or as SGLang does (a trace per request: root,
// thread spans, stage slices; see src/otlp/sglang.ts), exported through the OpenTelemetry JS SDK and
// its OTLP/HTTP protobuf exporter. The values are the engine's own truth.
import { type Context, ROOT_CONTEXT, SpanKind, type Tracer, trace } from "@opentelemetry/api";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BasicTracerProvider, BatchSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { SGLANG_SLICE, SGLANG_SPAN, VLLM_SPAN } from "../otlp/attributes.ts";

/** One finished request on the engine's clock (epoch ms), with durations in the engine's seconds. */
export interface SpanTruth {
  requestId: string;
  arrivalUnixMs: number;
  endUnixMs: number;
  promptTokens: number;
  completionTokens: number;
  maxTokens: number | null;
  n: number;
  /** Seconds, as vLLM computes them: queue = scheduled − queued, prefill = first token − scheduled, … */
  queue: number;
  ttft: number;
  e2e: number;
  prefill: number;
  decode: number;
  inference: number;
  /** With --collect-detailed-traces (seconds): the scheduler's part, the forward pass ("model"), forward + sampling ("worker"). */
  scheduler?: number;
  forward?: number;
  execute?: number;
  /** SGLang's layout needs these (epoch ms): queued (after the frontend), first scheduled, first token, each step's end. */
  sglang?: {
    queuedUnixMs: number;
    scheduledUnixMs: number;
    firstTokenUnixMs: number;
    stepEndsUnixMs: readonly number[];
  };
}

export type SpanLayout = "vllm" | "sglang";

export interface SpanEmitter {
  emit(t: SpanTruth): void;
  /** Exports what is buffered and stops. */
  shutdown(): Promise<void>;
}

const hr = (unixMs: number): [number, number] => {
  const s = Math.floor(unixMs / 1000);
  return [s, Math.round((unixMs - s * 1000) * 1e6)];
};

export function createSpanEmitter(
  endpoint: string,
  o: { scheduledDelayMillis?: number; layout?: SpanLayout; tpRanks?: number } = {},
): SpanEmitter {
  // vLLM's exporter posts to the endpoint as given; a bare origin gets the OTLP/HTTP path.
  const url = /^https?:\/\/[^/]+\/?$/.test(endpoint) ? `${endpoint.replace(/\/$/, "")}/v1/traces` : endpoint;
  const sglang = o.layout === "sglang";
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ "service.name": sglang ? "sglang" : "inferscope-sim" }),
    spanProcessors: [
      new BatchSpanProcessor(new OTLPTraceExporter({ url }), {
        scheduledDelayMillis: o.scheduledDelayMillis ?? 200,
        maxQueueSize: 65536,
        maxExportBatchSize: 512,
      }),
    ],
  });
  if (sglang) {
    const tracer = provider.getTracer("sglang server");
    return { emit: (t) => emitSglang(tracer, t, o.tpRanks ?? 1), shutdown: () => provider.shutdown() };
  }
  const tracer = provider.getTracer("vllm.entrypoints.openai.api_server");
  return {
    emit(t) {
      const span = tracer.startSpan("llm_request", {
        kind: SpanKind.SERVER,
        startTime: hr(t.arrivalUnixMs),
        attributes: {
          [VLLM_SPAN.requestId]: t.requestId,
          [VLLM_SPAN.promptTokens]: t.promptTokens,
          [VLLM_SPAN.completionTokens]: t.completionTokens,
          [VLLM_SPAN.n]: t.n,
          ...(t.maxTokens !== null ? { [VLLM_SPAN.maxTokens]: t.maxTokens } : {}),
          [VLLM_SPAN.timeInQueue]: t.queue,
          [VLLM_SPAN.timeToFirstToken]: t.ttft,
          [VLLM_SPAN.e2e]: t.e2e,
          [VLLM_SPAN.timeInModelPrefill]: t.prefill,
          [VLLM_SPAN.timeInModelDecode]: t.decode,
          [VLLM_SPAN.timeInModelInference]: t.inference,
          ...(t.scheduler !== undefined ? { [VLLM_SPAN.timeInScheduler]: t.scheduler } : {}),
          ...(t.forward !== undefined ? { [VLLM_SPAN.timeInModelForward]: t.forward } : {}),
          ...(t.execute !== undefined ? { [VLLM_SPAN.timeInModelExecute]: t.execute } : {}),
        },
      });
      span.end(hr(t.endUnixMs));
    },
    shutdown: () => provider.shutdown(),
  };
}

const HOST_ID = "5131a7e0";

/**
 * One request as SGLang traces it: the root, the tokenizer's thread (tokenize: arrival → queued) and one scheduler
 * thread per TP rank with prefill_waiting (queued → scheduled), prefill_forward (scheduled → first token) holding a
 * chunked_prefill per earlier chunk, and a decode_loop per later step. Ended children first, as SGLang ends them.
 */
function emitSglang(tracer: Tracer, truth: SpanTruth, tpRanks: number): void {
  const t = { ...truth, ...truth.sglang! };
  const root = tracer.startSpan(
    `Req ${t.requestId.slice(0, 8)}`,
    {
      startTime: hr(t.arrivalUnixMs),
      attributes: {
        [SGLANG_SPAN.rid]: t.requestId,
        module: "sglang::request",
        "gen_ai.usage.prompt_tokens": t.promptTokens,
        "gen_ai.usage.completion_tokens": t.completionTokens,
      },
    },
    ROOT_CONTEXT,
  );
  const rootCtx = trace.setSpan(ROOT_CONTEXT, root);
  const slice = (ctx: Context, name: string, from: number, to: number, attrs?: Record<string, number>) => {
    const s = tracer.startSpan(name, { startTime: hr(from), attributes: attrs }, ctx);
    return { s, ctx: trace.setSpan(ctx, s), end: () => s.end(hr(to)) };
  };
  const thread = (label: string, rank: number | null, from: number, to: number) =>
    slice(
      rootCtx,
      `${label}${rank !== null ? ` [TP ${rank}] ` : " "}(host:${HOST_ID} | pid:${process.pid})`,
      from,
      to,
      {
        ...(rank !== null ? { [SGLANG_SPAN.tpRank]: rank } : {}),
        [SGLANG_SPAN.pid]: process.pid,
      },
    );
  const tok = thread("Tokenizer", null, t.arrivalUnixMs, t.queuedUnixMs);
  tok.s.setAttributes({ [SGLANG_SPAN.threadLabel]: "Tokenizer", host_id: HOST_ID });
  slice(tok.ctx, SGLANG_SLICE.tokenize, t.arrivalUnixMs, t.queuedUnixMs).end();
  tok.end();
  for (let rank = 0; rank < tpRanks; rank++) {
    const th = thread("Scheduler", rank, t.queuedUnixMs, t.endUnixMs);
    th.s.setAttributes({ [SGLANG_SPAN.threadLabel]: "Scheduler", host_id: HOST_ID });
    slice(th.ctx, SGLANG_SLICE.prefillWaiting, t.queuedUnixMs, t.scheduledUnixMs).end();
    const fwd = slice(th.ctx, SGLANG_SLICE.prefillForward, t.scheduledUnixMs, t.firstTokenUnixMs);
    let from = t.scheduledUnixMs;
    let decodeCt = 0;
    let prefillOpen = true;
    for (const end of t.stepEndsUnixMs) {
      if (end < t.firstTokenUnixMs) slice(fwd.ctx, SGLANG_SLICE.chunkedPrefill, from, end).end();
      else if (end > t.firstTokenUnixMs)
        slice(th.ctx, SGLANG_SLICE.decodeLoop, from, end, { decode_ct: decodeCt++ }).end();
      // The step that produced the first token ends prefill_forward (ended before its decode slices are).
      else if (prefillOpen) {
        fwd.end();
        prefillOpen = false;
      }
      from = end;
    }
    if (prefillOpen) fwd.end();
    th.end();
  }
  root.end(hr(t.endUnixMs));
}
