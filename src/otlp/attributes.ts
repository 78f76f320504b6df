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

/**
 * SGLang's request trace (python/sglang/srt/tracing|observability/trace.py, req_time_stats.py RequestStage): a root
 * span "[role ]Req <rid[:8]>" carrying `rid`, under it one thread span per process (tokenizer; each scheduler with
 * its tp_rank), and under each thread the slices named by stage. Times are the spans' own (epoch ns).
 */
export const SGLANG_SPAN = {
  /** Root span attribute: the request's rid (the part after the last "_", which multi-tokenizer mode prepends). */
  rid: "rid",
  /** Thread span attributes. */
  tpRank: "tp_rank",
  threadLabel: "thread_label",
  pid: "pid",
} as const;

export const SGLANG_SLICE = {
  tokenize: "tokenize",
  dispatch: "dispatch",
  requestProcess: "request_process",
  /** Waiting queue entry → first scheduled (SGLang's queue time). */
  prefillWaiting: "prefill_waiting",
  /** First scheduled → the prefill's output (first token) processed; holds the chunks in newer releases. */
  prefillForward: "prefill_forward",
  /** One per prefill chunk but the last: under prefill_forward (newer) or its siblings before it (older). */
  chunkedPrefill: "chunked_prefill",
  /** First token → first decode scheduled (newer releases). */
  decodeWaiting: "decode_waiting",
  /** All decode steps (newer releases; level 1) and one slice per decode step (level 2 or 3). */
  decodeForward: "decode_forward",
  decodeLoop: "decode_loop",
} as const;

/** A root span's name: "Req 3f2a…", "prefill Req …", "decode Req …". */
export const SGLANG_ROOT_NAME = /(^|\s)Req \S/;

/** The X-Request-Id of the probe completion a started server gets (experiment/variants.ts): not a measured request. */
export const PROBE_REQUEST_ID_PREFIX = "inferscope-probe-";

/** Whether a span's gen_ai.request.id names a server-start probe (vLLM prefixes `cmpl-`). */
export function isProbeSpanId(spanId: string): boolean {
  return spanId.replace(/^(chatcmpl|cmpl)-/, "").startsWith(PROBE_REQUEST_ID_PREFIX);
}
