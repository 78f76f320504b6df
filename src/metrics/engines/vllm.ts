// vLLM: V1 names (`vllm:` prefix, `model_name` + `engine` labels) and the V0 legacy names.
import type { FamilyLike } from "../concepts.ts";
import { detectBySignature, type EngineCatalog, NameIndex, NCCL_PROTO_LL } from "./catalog.ts";

const V0_ONLY = [
  "vllm:time_in_queue_requests",
  "vllm:model_forward_time_milliseconds",
  "vllm:model_execute_time_milliseconds",
  "vllm:num_requests_swapped",
  "vllm:cpu_cache_usage_perc",
  "vllm:avg_generation_throughput_toks_per_s",
];

export const vllm: EngineCatalog = {
  id: "vllm",
  name: "vLLM",
  metricsPath: "/metrics",
  detect: (families: FamilyLike[]) =>
    detectBySignature(
      families,
      ["vllm:", "vllm_"],
      [
        "vllm:num_requests_running",
        "vllm:time_to_first_token_seconds",
        "vllm:inter_token_latency_seconds",
        "vllm:time_per_output_token_seconds",
        "vllm:generation_tokens_total",
        "vllm:iteration_tokens_total",
        "vllm:e2e_request_latency_seconds",
      ],
    ),
  variant(families) {
    const idx = new NameIndex(families);
    return V0_ONLY.some((n) => idx.has(n)) ? "V0 (legacy engine)" : "V1";
  },
  concepts: {
    ttft: [
      {
        granularity: "request",
        source: { kind: "histogram", metric: "vllm:time_to_first_token_seconds" },
        note: "from frontend arrival: includes tokenization, queue and prefill",
      },
    ],
    itl: [
      {
        granularity: "request",
        source: { kind: "histogram", metric: "vllm:inter_token_latency_seconds" },
        note: "one observation per output batch of a request, not per engine step",
      },
      {
        granularity: "request",
        source: { kind: "histogram", metric: "vllm:time_per_output_token_seconds" },
        note: "old name of the per-event ITL histogram",
      },
    ],
    tpot: [
      {
        granularity: "request",
        source: { kind: "histogram", metric: "vllm:request_time_per_output_token_seconds" },
        note: "decode time / (generated − 1), one observation per request",
      },
    ],
    e2e: [{ granularity: "request", source: { kind: "histogram", metric: "vllm:e2e_request_latency_seconds" } }],
    queue: [
      { granularity: "request", source: { kind: "histogram", metric: "vllm:request_queue_time_seconds" } },
      { granularity: "request", source: { kind: "histogram", metric: "vllm:time_in_queue_requests" } },
    ],
    prefill: [{ granularity: "request", source: { kind: "histogram", metric: "vllm:request_prefill_time_seconds" } }],
    decode: [{ granularity: "request", source: { kind: "histogram", metric: "vllm:request_decode_time_seconds" } }],
    step_time: [
      {
        granularity: "step",
        source: { kind: "histogram", metric: "vllm:model_forward_time_milliseconds", scale: 1e-3 },
        note: "V0 only, with --collect-detailed-traces",
      },
      {
        granularity: "step",
        source: { kind: "histogram", metric: "vllm:model_execute_time_milliseconds", scale: 1e-3 },
        note: "V0 only, with --collect-detailed-traces",
      },
    ],
    step_tokens: [
      {
        granularity: "step",
        source: { kind: "histogram", metric: "vllm:iteration_tokens_total" },
        note: "a histogram despite the _total name: _count = engine steps, _sum = tokens",
      },
    ],
    running: [{ granularity: "step", source: { kind: "gauge", metric: "vllm:num_requests_running" } }],
    waiting: [{ granularity: "step", source: { kind: "gauge", metric: "vllm:num_requests_waiting" } }],
    kv_usage: [
      { granularity: "step", source: { kind: "gauge", metric: "vllm:kv_cache_usage_perc" }, note: "fraction 0–1" },
      { granularity: "step", source: { kind: "gauge", metric: "vllm:gpu_cache_usage_perc" }, note: "deprecated name" },
    ],
    prefix_cache_hit_rate: [
      {
        granularity: "step",
        source: {
          kind: "ratio",
          numerator: "vllm:prefix_cache_hits_total",
          denominator: "vllm:prefix_cache_queries_total",
        },
      },
      {
        granularity: "step",
        source: {
          kind: "ratio",
          numerator: "vllm:gpu_prefix_cache_hits_total",
          denominator: "vllm:gpu_prefix_cache_queries_total",
        },
        note: "deprecated names",
      },
    ],
    preemptions: [{ granularity: "step", source: { kind: "counter", metric: "vllm:num_preemptions_total" } }],
    spec_acceptance: [
      {
        granularity: "step",
        source: {
          kind: "ratio",
          numerator: "vllm:spec_decode_num_accepted_tokens_total",
          denominator: "vllm:spec_decode_num_draft_tokens_total",
        },
      },
    ],
    prompt_tokens: [{ granularity: "step", source: { kind: "counter", metric: "vllm:prompt_tokens_total" } }],
    generation_tokens: [{ granularity: "step", source: { kind: "counter", metric: "vllm:generation_tokens_total" } }],
    requests: [{ granularity: "request", source: { kind: "counter", metric: "vllm:request_success_total" } }],
  },
  replicaLabels: [],
  shardLabels: ["engine"],
  profiler: { enable: "start the server with --profiler-config (≥ v0.13) or VLLM_TORCH_PROFILER_DIR (older)" },
  // vllm/tracing.py: one llm_request span per request; its exporter speaks gRPC unless told otherwise, and over
  // HTTP posts to the endpoint exactly as given (so the path is ours to add).
  requestSpans: {
    args: (endpoint) => ["--otlp-traces-endpoint", `${endpoint}/v1/traces`],
    env: { OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "http/protobuf" },
    // The body's request_id (or X-Request-Id) names the request: chatcmpl-/cmpl-<id>.
    idField: "request_id",
    note: "--otlp-traces-endpoint with OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf (vLLM ≥ 0.6; the opentelemetry packages must be installed in its environment)",
  },
  missing: {
    step_time:
      "V1 has no per-step timing in Prometheus (newest main streams forward-pass times over ZMQ, not /metrics)",
  },
  usesNccl: true,
  knobs: [
    NCCL_PROTO_LL,
    {
      id: "disable-custom-all-reduce",
      change: "--disable-custom-all-reduce",
      mechanism:
        "vLLM's own one-shot/two-shot all-reduce kernel against NCCL (it needs NVLink or PCIe P2P; without them vLLM already uses NCCL)",
      needs: ["collectives", "gpu"],
      collective: true,
      affects: "decode",
    },
    {
      id: "enforce-eager",
      change: "--enforce-eager",
      mechanism:
        "CUDA graphs: eager mode launches every kernel from the host, so the difference is the launch overhead graphs remove",
      needs: ["gpu"],
      affects: "decode",
    },
  ],
  quirks: [
    {
      when: (n) => n.has("vllm:iteration_tokens_total"),
      text: "vllm:iteration_tokens_total is a histogram whose name ends in _total (step tokens, not a counter)",
    },
    {
      when: (n) => n.names().some((x) => x.endsWith("_created") && x.startsWith("vllm:")),
      text: "single-process mode: every counter and histogram has a separate _created gauge family (ignored)",
    },
    {
      when: (n) => n.names().some((x) => x.startsWith("vllm_")) && !n.names().some((x) => x.startsWith("vllm:")),
      text: "names use vllm_ instead of vllm: (Ray Serve sanitizes the colon)",
    },
  ],
};
