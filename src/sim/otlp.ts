// The sim's request spans, as vLLM sends them (vllm/tracing.py SpanAttributes; one "llm_request"
// SERVER span per finished request, started at arrival), exported through the OpenTelemetry JS SDK
// and its OTLP/HTTP protobuf exporter. The attribute values are the engine's own truth.
import { SpanKind } from "@opentelemetry/api";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BasicTracerProvider, BatchSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { VLLM_SPAN } from "../otlp/attributes.ts";

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
}

export interface SpanEmitter {
  emit(t: SpanTruth): void;
  /** Exports what is buffered and stops. */
  shutdown(): Promise<void>;
}

const hr = (unixMs: number): [number, number] => {
  const s = Math.floor(unixMs / 1000);
  return [s, Math.round((unixMs - s * 1000) * 1e6)];
};

export function createSpanEmitter(endpoint: string, o: { scheduledDelayMillis?: number } = {}): SpanEmitter {
  // vLLM's exporter posts to the endpoint as given; a bare origin gets the OTLP/HTTP path.
  const url = /^https?:\/\/[^/]+\/?$/.test(endpoint) ? `${endpoint.replace(/\/$/, "")}/v1/traces` : endpoint;
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ "service.name": "inferscope-sim" }),
    spanProcessors: [
      new BatchSpanProcessor(new OTLPTraceExporter({ url }), {
        scheduledDelayMillis: o.scheduledDelayMillis ?? 200,
        maxQueueSize: 65536,
        maxExportBatchSize: 512,
      }),
    ],
  });
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
