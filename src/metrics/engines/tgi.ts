// Hugging Face TGI (`tgi_` prefix, Rust metrics exporter: counters have no `_total`).
import type { FamilyLike } from "../concepts.ts";
import { detectBySignature, type EngineCatalog, NCCL_PROTO_LL } from "./catalog.ts";

export const tgi: EngineCatalog = {
  id: "tgi",
  name: "Hugging Face TGI",
  metricsPath: "/metrics",
  detect: (families: FamilyLike[]) =>
    detectBySignature(
      families,
      ["tgi_"],
      [
        "tgi_request_count",
        "tgi_queue_size",
        "tgi_batch_current_size",
        "tgi_request_duration",
        "tgi_batch_forward_duration",
      ],
    ),
  concepts: {
    tpot: [
      { granularity: "request", source: { kind: "histogram", metric: "tgi_request_mean_time_per_token_duration" } },
    ],
    e2e: [{ granularity: "request", source: { kind: "histogram", metric: "tgi_request_duration" } }],
    queue: [{ granularity: "request", source: { kind: "histogram", metric: "tgi_request_queue_duration" } }],
    prefill: [
      {
        granularity: "step",
        source: { kind: "histogram", metric: "tgi_batch_forward_duration", match: { method: "prefill" } },
        note: "one observation per prefill batch forward",
      },
    ],
    decode: [
      {
        granularity: "step",
        source: { kind: "histogram", metric: "tgi_batch_forward_duration", match: { method: "decode" } },
        note: "one observation per decode batch forward",
      },
    ],
    step_time: [
      {
        granularity: "step",
        source: { kind: "histogram", metric: "tgi_batch_forward_duration" },
        note: "prefill and decode forwards together",
      },
    ],
    running: [
      {
        granularity: "step",
        source: { kind: "gauge", metric: "tgi_batch_current_size" },
        note: "requests in the current batch",
      },
    ],
    waiting: [{ granularity: "step", source: { kind: "gauge", metric: "tgi_queue_size" } }],
    requests: [{ granularity: "request", source: { kind: "counter", metric: "tgi_request_success" } }],
  },
  replicaLabels: [],
  shardLabels: [],
  missing: {
    ttft: "no TTFT histogram (TGI issue #2887): approximate as validation + queue + prefill forward",
    itl: "no per-token gaps; tgi_request_mean_time_per_token_duration is per-request mean",
    step_tokens: "tgi_batch_current_size counts requests, not tokens",
  },
  usesNccl: true,
  knobs: [
    NCCL_PROTO_LL,
    {
      id: "cuda-graphs-off",
      change: "--cuda-graphs 0",
      mechanism:
        "TGI's CUDA graphs (captured per batch size); 0 turns them off, so the difference is the launch overhead",
      needs: ["gpu"],
      affects: "decode",
    },
  ],
  info: [{ path: "/info", gives: "model_id, model_dtype, version, sha, max_total_tokens, max_input_tokens" }],
  serverTimings: {
    kind: "tgi-headers",
    note: "x-queue-time, x-inference-time, x-time-per-token (ms) on non-streaming responses",
  },
  quirks: [
    {
      when: (n) => n.has("tgi_request_count") || n.has("tgi_request_success"),
      text: "TGI counters have no _total suffix (tgi_request_count, tgi_request_success)",
    },
    {
      when: (n) => n.has("tgi_batch_forward_duration"),
      text: "tgi_batch_forward_duration{method} is per-batch (step-level) timing — the only per-step timing among the engines",
    },
  ],
};
