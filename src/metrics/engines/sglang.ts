// SGLang (`sglang:` prefix; labels model_name, engine_type, tp_rank, pp_rank, dp_rank, …).
import type { FamilyLike } from "../concepts.ts";
import { detectBySignature, type EngineCatalog, NCCL_PROTO_LL } from "./catalog.ts";

export const sglang: EngineCatalog = {
  id: "sglang",
  name: "SGLang",
  metricsPath: "/metrics",
  detect: (families: FamilyLike[]) =>
    detectBySignature(
      families,
      ["sglang:", "sglang_"],
      [
        "sglang:num_running_reqs",
        "sglang:num_queue_reqs",
        "sglang:token_usage",
        "sglang:time_to_first_token_seconds",
        "sglang:inter_token_latency_seconds",
        "sglang:gen_throughput",
      ],
    ),
  concepts: {
    ttft: [{ granularity: "request", source: { kind: "histogram", metric: "sglang:time_to_first_token_seconds" } }],
    itl: [
      {
        granularity: "request",
        source: { kind: "histogram", metric: "sglang:inter_token_latency_seconds" },
        note: "one batched observation per output chunk: _count = tokens, bucket = the chunk's per-token average",
      },
    ],
    tpot: [
      {
        granularity: "request",
        source: { kind: "histogram", metric: "sglang:time_per_output_token_seconds" },
        note: "older releases only",
      },
    ],
    e2e: [{ granularity: "request", source: { kind: "histogram", metric: "sglang:e2e_request_latency_seconds" } }],
    queue: [{ granularity: "request", source: { kind: "histogram", metric: "sglang:queue_time_seconds" } }],
    prefill: [
      {
        granularity: "request",
        source: {
          kind: "histogram",
          metric: "sglang:per_stage_req_latency_seconds",
          match: { stage: "prefill_forward" },
        },
      },
    ],
    decode: [
      {
        granularity: "request",
        source: {
          kind: "histogram",
          metric: "sglang:per_stage_req_latency_seconds",
          match: { stage: "decode_forward" },
        },
      },
    ],
    running: [{ granularity: "step", source: { kind: "gauge", metric: "sglang:num_running_reqs" } }],
    waiting: [{ granularity: "step", source: { kind: "gauge", metric: "sglang:num_queue_reqs" } }],
    kv_usage: [
      {
        granularity: "step",
        source: { kind: "gauge", metric: "sglang:token_usage" },
        note: "KV pool ratio, updated once per log interval",
      },
    ],
    prefix_cache_hit_rate: [
      {
        granularity: "step",
        source: { kind: "gauge", metric: "sglang:cache_hit_rate" },
        note: "server-computed, per log interval",
      },
    ],
    preemptions: [{ granularity: "step", source: { kind: "counter", metric: "sglang:num_retracted_requests_total" } }],
    spec_acceptance: [
      { granularity: "step", source: { kind: "gauge", metric: "sglang:spec_accept_rate" } },
      {
        granularity: "step",
        source: { kind: "gauge", metric: "sglang:spec_accept_length" },
        note: "tokens accepted per verify step, not a rate",
      },
    ],
    prompt_tokens: [{ granularity: "request", source: { kind: "counter", metric: "sglang:prompt_tokens_total" } }],
    generation_tokens: [
      {
        granularity: "request",
        source: { kind: "counter", metric: "sglang:generation_tokens_total" },
        note: "credited when requests finish",
      },
    ],
    requests: [{ granularity: "request", source: { kind: "counter", metric: "sglang:num_requests_total" } }],
  },
  replicaLabels: ["tp_rank", "pp_rank", "moe_ep_rank"],
  shardLabels: ["dp_rank", "engine_type"],
  profiler: { enable: "start the server with SGLANG_TORCH_PROFILER_DIR set" },
  // python/sglang/srt/tracing (newer: observability)/trace.py: one trace per request (root "Req <rid[:8]>" with its
  // rid, a thread span per process, a slice per stage). --enable-trace turns it on; the exporter speaks gRPC unless
  // OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf, and then posts to the endpoint as given. The OpenAI routes
  // pass the body's rid on as the request's rid (and echo it as the response id).
  requestSpans: {
    args: (endpoint) => ["--enable-trace", "--otlp-traces-endpoint", `${endpoint}/v1/traces`],
    env: { OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "http/protobuf" },
    idField: "rid",
    note: "--enable-trace --otlp-traces-endpoint with OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf (the opentelemetry packages must be installed: pip install 'sglang[tracing]'); queue and prefill come from its level-1 slices, per-step decode slices from higher trace levels",
  },
  missing: {
    step_time: "only cumulative GPU busy time: sglang:gpu_execution_seconds_total{category}",
    step_tokens: "only cumulative sglang:realtime_tokens_total{mode}",
  },
  usesNccl: true,
  knobs: [
    NCCL_PROTO_LL,
    {
      id: "disable-cuda-graph",
      change: "--disable-cuda-graph",
      mechanism:
        "CUDA graphs: without them every decode kernel is launched from the host; the difference is the launch overhead",
      needs: ["gpu"],
      affects: "decode",
    },
    {
      id: "disable-custom-all-reduce",
      change: "--disable-custom-all-reduce",
      mechanism: "SGLang's custom all-reduce kernel against NCCL",
      needs: ["collectives", "gpu"],
      collective: true,
      affects: "decode",
    },
  ],
  info: [
    { path: "/get_server_info", gives: "version, model_path, tp_size, max_total_num_tokens (older builds)" },
    { path: "/server_info", gives: "the same, newer builds" },
  ],
  quirks: [
    {
      when: (n) => n.names().some((x) => /^sglang[:_]routing_key_/.test(x)),
      text: "sglang routing_key_* are gauges with gt/le labels holding non-cumulative per-bucket counts, not histograms (not used for quantiles)",
    },
    {
      when: (n) => n.has("sglang:inter_token_latency_seconds"),
      text: "sglang ITL _count counts tokens (one batched observation per chunk), so _sum/_count is per token",
    },
  ],
};
