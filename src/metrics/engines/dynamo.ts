// NVIDIA Dynamo frontend (`dynamo_frontend_*`); workers add `dynamo_component_*` next to the engine's own names.
import type { FamilyLike } from "../concepts.ts";
import { detectBySignature, type EngineCatalog, NameIndex, NCCL_PROTO_LL } from "./catalog.ts";

export const dynamo: EngineCatalog = {
  id: "dynamo",
  name: "NVIDIA Dynamo",
  metricsPath: "/metrics",
  detect(families: FamilyLike[]) {
    const frontend = detectBySignature(
      families,
      ["dynamo_frontend_"],
      [
        "dynamo_frontend_time_to_first_token_seconds",
        "dynamo_frontend_inter_token_latency_seconds",
        "dynamo_frontend_request_duration_seconds",
        "dynamo_frontend_requests_total",
      ],
    );
    // A worker endpoint: the engine's own catalog should win, Dynamo is the wrapper.
    const worker = new NameIndex(families).hasPrefix("dynamo_component_") ? 0.5 : 0;
    return Math.max(frontend, worker);
  },
  variant: (families) => (new NameIndex(families).hasPrefix("dynamo_frontend_") ? "frontend" : "worker"),
  concepts: {
    ttft: [
      { granularity: "request", source: { kind: "histogram", metric: "dynamo_frontend_time_to_first_token_seconds" } },
    ],
    itl: [
      { granularity: "request", source: { kind: "histogram", metric: "dynamo_frontend_inter_token_latency_seconds" } },
    ],
    e2e: [
      { granularity: "request", source: { kind: "histogram", metric: "dynamo_frontend_request_duration_seconds" } },
    ],
    running: [{ granularity: "request", source: { kind: "gauge", metric: "dynamo_frontend_active_requests" } }],
    waiting: [{ granularity: "request", source: { kind: "gauge", metric: "dynamo_frontend_queued_requests" } }],
    generation_tokens: [
      { granularity: "request", source: { kind: "counter", metric: "dynamo_frontend_output_tokens_total" } },
    ],
    requests: [{ granularity: "request", source: { kind: "counter", metric: "dynamo_frontend_requests_total" } }],
  },
  replicaLabels: [],
  shardLabels: ["model"],
  missing: {
    step_time: "the frontend sees requests only; scrape a worker for the engine's own metrics",
  },
  usesNccl: true,
  knobs: [NCCL_PROTO_LL],
  quirks: [
    {
      when: (n) => n.hasPrefix("dynamo_"),
      text: "Dynamo creates labelled families on first use: an idle frontend lists HELP/TYPE lines with no samples",
    },
  ],
};
