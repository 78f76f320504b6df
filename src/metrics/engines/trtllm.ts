// TensorRT-LLM (`trtllm-serve`, `trtllm_` prefix at /prometheus/metrics) and Triton (`nv_` prefix, port 8002).
import type { FamilyLike } from "../concepts.ts";
import { detectBySignature, type EngineCatalog, NCCL_PROTO_LL } from "./catalog.ts";

export const trtllm: EngineCatalog = {
  id: "trtllm",
  name: "TensorRT-LLM (trtllm-serve)",
  metricsPath: "/prometheus/metrics",
  detect: (families: FamilyLike[]) =>
    detectBySignature(
      families,
      ["trtllm_"],
      [
        "trtllm_time_to_first_token_seconds",
        "trtllm_e2e_request_latency_seconds",
        "trtllm_num_requests_running",
        "trtllm_iteration_latency_seconds",
        "trtllm_kv_cache_utilization",
      ],
    ),
  concepts: {
    ttft: [{ granularity: "request", source: { kind: "histogram", metric: "trtllm_time_to_first_token_seconds" } }],
    tpot: [{ granularity: "request", source: { kind: "histogram", metric: "trtllm_time_per_output_token_seconds" } }],
    e2e: [{ granularity: "request", source: { kind: "histogram", metric: "trtllm_e2e_request_latency_seconds" } }],
    queue: [{ granularity: "request", source: { kind: "histogram", metric: "trtllm_request_queue_time_seconds" } }],
    prefill: [{ granularity: "request", source: { kind: "histogram", metric: "trtllm_request_prefill_time_seconds" } }],
    decode: [{ granularity: "request", source: { kind: "histogram", metric: "trtllm_request_decode_time_seconds" } }],
    step_time: [
      {
        granularity: "step",
        source: { kind: "gauge", metric: "trtllm_iteration_latency_seconds" },
        note: "a gauge: only the latest iteration, sampled at each scrape",
      },
    ],
    step_tokens: [
      {
        granularity: "step",
        source: { kind: "gauge", metric: "trtllm_avg_decoded_tokens_per_iter" },
        note: "a gauge: decoded tokens per iteration, latest value",
      },
    ],
    running: [{ granularity: "step", source: { kind: "gauge", metric: "trtllm_num_requests_running" } }],
    waiting: [{ granularity: "step", source: { kind: "gauge", metric: "trtllm_num_requests_waiting" } }],
    kv_usage: [{ granularity: "step", source: { kind: "gauge", metric: "trtllm_kv_cache_utilization" } }],
    prefix_cache_hit_rate: [{ granularity: "step", source: { kind: "gauge", metric: "trtllm_kv_cache_hit_rate" } }],
    preemptions: [
      {
        granularity: "step",
        source: { kind: "gauge", metric: "trtllm_num_paused_requests" },
        note: "paused requests (a gauge), the closest concept",
      },
    ],
    spec_acceptance: [
      {
        granularity: "step",
        source: {
          kind: "ratio",
          numerator: "trtllm_spec_decode_num_accepted_tokens_total",
          denominator: "trtllm_spec_decode_num_draft_tokens_total",
        },
      },
      {
        granularity: "step",
        source: { kind: "gauge", metric: "trtllm_spec_decode_acceptance_length" },
        note: "acceptance length, not a rate",
      },
    ],
    prompt_tokens: [{ granularity: "request", source: { kind: "counter", metric: "trtllm_prompt_tokens_total" } }],
    generation_tokens: [
      { granularity: "request", source: { kind: "counter", metric: "trtllm_generation_tokens_total" } },
    ],
    requests: [{ granularity: "request", source: { kind: "counter", metric: "trtllm_request_success_total" } }],
  },
  replicaLabels: [],
  shardLabels: [],
  missing: {
    itl: "no per-token gap histogram; trtllm_time_per_output_token_seconds is per-request TPOT",
  },
  usesNccl: true,
  knobs: [NCCL_PROTO_LL],
  quirks: [
    {
      when: (n) => n.hasPrefix("trtllm_"),
      text: "trtllm-serve serves Prometheus text at /prometheus/metrics (plain /metrics is JSON iteration stats); iteration metrics need enable_iter_perf_stats",
    },
  ],
};

export const triton: EngineCatalog = {
  id: "triton",
  name: "Triton Inference Server",
  metricsPath: "/metrics",
  detect: (families: FamilyLike[]) =>
    detectBySignature(
      families,
      ["nv_inference_", "nv_trt_llm_"],
      [
        "nv_inference_request_success",
        "nv_inference_count",
        "nv_inference_exec_count",
        "nv_inference_request_duration_us",
        "nv_inference_queue_duration_us",
      ],
    ),
  concepts: {
    ttft: [
      {
        granularity: "request",
        source: { kind: "histogram", metric: "nv_inference_first_response_histogram_ms", scale: 1e-3 },
      },
    ],
    e2e: [
      {
        granularity: "aggregate",
        source: {
          kind: "counterMean",
          sum: "nv_inference_request_duration_us",
          count: "nv_inference_request_success",
          scale: 1e-6,
        },
        note: "cumulative µs counter: only a window mean",
      },
    ],
    queue: [
      {
        granularity: "aggregate",
        source: {
          kind: "counterMean",
          sum: "nv_inference_queue_duration_us",
          count: "nv_inference_request_success",
          scale: 1e-6,
        },
        note: "cumulative µs counter: only a window mean",
      },
    ],
    step_time: [
      {
        granularity: "aggregate",
        source: {
          kind: "counterMean",
          sum: "nv_inference_compute_infer_duration_us",
          count: "nv_inference_exec_count",
          scale: 1e-6,
        },
        note: "mean compute time per model execution (batch)",
      },
    ],
    running: [
      {
        granularity: "step",
        source: { kind: "gauge", metric: "nv_trt_llm_request_metrics", match: { request_type: "active" } },
      },
    ],
    waiting: [
      {
        granularity: "step",
        source: { kind: "gauge", metric: "nv_trt_llm_request_metrics", match: { request_type: "waiting" } },
      },
    ],
    kv_usage: [
      {
        granularity: "step",
        source: {
          kind: "gauge",
          metric: "nv_trt_llm_kv_cache_block_metrics",
          match: { kv_cache_block_type: "fraction" },
        },
      },
    ],
    requests: [{ granularity: "request", source: { kind: "counter", metric: "nv_inference_request_success" } }],
  },
  replicaLabels: [],
  shardLabels: ["model", "version"],
  usesNccl: true,
  knobs: [NCCL_PROTO_LL],
  quirks: [
    {
      when: (n) => n.has("nv_inference_request_duration_us"),
      text: "Triton's *_duration_us are cumulative microsecond counters without _total: only window means, no quantiles",
    },
    {
      when: (n) => n.hasPrefix("nv_trt_llm_"),
      text: "TensorRT-LLM backend gauges put the dimension in a label (request_type, kv_cache_block_type)",
    },
  ],
};
