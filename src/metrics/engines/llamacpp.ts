// llama.cpp server (`llamacpp:` prefix, hand-written 0.0.4 text, no histograms).
import type { FamilyLike } from "../concepts.ts";
import { detectBySignature, type EngineCatalog } from "./catalog.ts";

export const llamacpp: EngineCatalog = {
  id: "llamacpp",
  name: "llama.cpp server",
  metricsPath: "/metrics",
  detect: (families: FamilyLike[]) =>
    detectBySignature(
      families,
      ["llamacpp:"],
      [
        "llamacpp:prompt_tokens_total",
        "llamacpp:tokens_predicted_total",
        "llamacpp:n_decode_total",
        "llamacpp:requests_processing",
        "llamacpp:tokens_predicted_seconds_total",
      ],
    ),
  concepts: {
    prefill: [
      {
        granularity: "aggregate",
        source: {
          kind: "counterMean",
          sum: "llamacpp:prompt_seconds_total",
          count: "llamacpp:prompt_tokens_total",
        },
        note: "mean prefill seconds per prompt token (cumulative counters; no distribution)",
      },
    ],
    decode: [
      {
        granularity: "aggregate",
        source: {
          kind: "counterMean",
          sum: "llamacpp:tokens_predicted_seconds_total",
          count: "llamacpp:tokens_predicted_total",
        },
        note: "mean decode seconds per generated token (≈ ITL at batch 1); no distribution",
      },
    ],
    step_tokens: [
      {
        granularity: "aggregate",
        source: { kind: "ratio", numerator: "llamacpp:tokens_predicted_total", denominator: "llamacpp:n_decode_total" },
        note: "derived: Δ generated tokens / Δ llama_decode calls",
      },
    ],
    running: [{ granularity: "step", source: { kind: "gauge", metric: "llamacpp:requests_processing" } }],
    waiting: [{ granularity: "step", source: { kind: "gauge", metric: "llamacpp:requests_deferred" } }],
    spec_acceptance: [
      {
        granularity: "step",
        source: {
          kind: "ratio",
          numerator: "llamacpp:spec_decode_num_accepted_tokens_total",
          denominator: "llamacpp:spec_decode_num_draft_tokens_total",
        },
      },
    ],
    prompt_tokens: [{ granularity: "aggregate", source: { kind: "counter", metric: "llamacpp:prompt_tokens_total" } }],
    generation_tokens: [
      { granularity: "aggregate", source: { kind: "counter", metric: "llamacpp:tokens_predicted_total" } },
    ],
  },
  replicaLabels: [],
  shardLabels: [],
  missing: {
    ttft: "only per request in the response's timings.prompt_ms",
    itl: "only per request in timings.predicted_per_token_ms; the window mean is under decode",
    kv_usage: "kv_cache_usage_ratio was removed (llama.cpp#13660)",
  },
  usesNccl: false,
  knobs: [
    {
      id: "threads",
      change: "--threads {cores}",
      mechanism:
        "CPU decode streams the weights through the cores: more threads draw more memory bandwidth, until spin-waits contend with other work",
      needs: ["cpu", "threads-below-cores"],
      affects: "decode",
    },
    {
      id: "flash-attn",
      change: "--flash-attn",
      mechanism: "the fused flash-attention kernel against separate QK, softmax and V operations",
      needs: [],
      affects: "decode",
    },
    {
      id: "ubatch-size",
      change: "--ubatch-size 128",
      mechanism:
        "the physical batch of prompt processing (default 512): smaller batches need less scratch memory but more passes",
      needs: [],
      affects: "prefill",
    },
  ],
  hints: [
    {
      what: "server-side time per request (prefill, decode per token)",
      why: "/metrics has only cumulative counters",
      method: "the timings object llama.cpp puts in each response's last chunk, summarised beside the client's timing",
      command: "inferscope bench --base-url {url} --concurrency 1 --num-prompts 20",
    },
    {
      what: "per-slot state (context in use, tokens decoded, processing or idle)",
      why: "the metrics aggregate all slots",
      method: "GET /slots (start the server with --slots; recent builds enable it by default)",
      command: "curl -s {url}/slots",
    },
  ],
  info: [{ path: "/props", gives: "build_info (version), model_path, total_slots, n_ctx" }],
  batchCeiling: { path: "/props", field: "total_slots" },
  serverTimings: {
    kind: "llamacpp-timings",
    note: "timings.prompt_ms, predicted_ms, predicted_n, predicted_per_token_ms in the last stream chunk",
  },
  quirks: [
    {
      when: (n) => n.has("llamacpp:prompt_tokens_seconds") || n.has("llamacpp:predicted_tokens_seconds"),
      text: "llamacpp:prompt_tokens_seconds / predicted_tokens_seconds are rates since the previous /metrics call: every scrape (ours included) resets them, so rates here come from the _total counters",
    },
    {
      when: (n) => n.hasPrefix("llamacpp:"),
      text: "llama.cpp prints 6 significant digits: a large counter can look flat between scrapes",
    },
    {
      when: (n) => n.has("llamacpp:n_tokens_max"),
      text: "llamacpp:n_tokens_max is declared a counter but is a high-water mark",
    },
  ],
};
