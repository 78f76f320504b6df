// vLLM's request-span attribute names (vllm/tracing.py, SpanAttributes). Latencies are seconds.
export const VLLM_SPAN = {
  requestId: "gen_ai.request.id",
  promptTokens: "gen_ai.usage.prompt_tokens",
  completionTokens: "gen_ai.usage.completion_tokens",
  maxTokens: "gen_ai.request.max_tokens",
  n: "gen_ai.request.n",
  /** Queued → first scheduled. */
  timeInQueue: "gen_ai.latency.time_in_queue",
  /** Arrival → first token (the engine's TTFT). */
  timeToFirstToken: "gen_ai.latency.time_to_first_token",
  /** Arrival → finished. */
  e2e: "gen_ai.latency.e2e",
  /** First scheduled → first token. */
  timeInModelPrefill: "gen_ai.latency.time_in_model_prefill",
  /** First token → last token. */
  timeInModelDecode: "gen_ai.latency.time_in_model_decode",
  /** First scheduled → last token. */
  timeInModelInference: "gen_ai.latency.time_in_model_inference",
  /** With --collect-detailed-traces: */
  timeInScheduler: "gen_ai.latency.time_in_scheduler",
  timeInModelForward: "gen_ai.latency.time_in_model_forward",
  timeInModelExecute: "gen_ai.latency.time_in_model_execute",
} as const;

/** The span name vLLM gives each request. */
export const VLLM_REQUEST_SPAN = "llm_request";

/** The X-Request-Id of the probe completion a started server gets (experiment/variants.ts): not a measured request. */
export const PROBE_REQUEST_ID_PREFIX = "inferscope-probe-";

/** Whether a span's gen_ai.request.id names a server-start probe (vLLM prefixes `cmpl-`). */
export function isProbeSpanId(spanId: string): boolean {
  return spanId.replace(/^(chatcmpl|cmpl)-/, "").startsWith(PROBE_REQUEST_ID_PREFIX);
}
