// The server's own view of the same window: scrape /metrics before and after a run and report the
// deltas of vLLM's (and SGLang's) request histograms and counters beside the client's numbers.
//
// inferscope's sim under --time-scale X exports simulated seconds (what the profiled deployment would
// export) and says so with the gauge inferscope_sim_time_scale. The client measures wall time, so the
// *_mean_ms fields here are converted to the client's wall clock (÷ X) to stay comparable side by side;
// the server's own figures are kept under `server_clock`.
import { parseExposition } from "../metrics/parse.ts";

/** Sample name → value summed over every label set (one replica or many). */
export type Totals = Map<string, number>;

export function totalsFromText(text: string, contentType?: string): Totals {
  const exp = parseExposition(text, { contentType });
  const out: Totals = new Map();
  for (const f of exp.families)
    for (const s of f.samples) {
      if (s.name.endsWith("_bucket") || s.name.endsWith("_created")) continue;
      out.set(s.name, (out.get(s.name) ?? 0) + s.value);
    }
  return out;
}

/** The gauge inferscope's sim exports: simulated seconds per wall second (absent on a real server). */
export const TIME_SCALE_GAUGE = "inferscope_sim_time_scale";

type Means = Pick<
  ServerView,
  "ttft_mean_ms" | "itl_mean_ms" | "e2e_mean_ms" | "queue_mean_ms" | "prefill_mean_ms" | "decode_mean_ms"
>;

export interface ServerView {
  /**
   * Mean of the window (ms) from `_sum/_count` deltas, in the client's (wall) clock: the server's
   * figure ÷ time_scale. Null when the server does not export it.
   */
  ttft_mean_ms: number | null;
  itl_mean_ms: number | null;
  e2e_mean_ms: number | null;
  queue_mean_ms: number | null;
  prefill_mean_ms: number | null;
  decode_mean_ms: number | null;
  requests: number | null;
  prompt_tokens: number | null;
  generation_tokens: number | null;
  /** Tokens per engine step (vllm:iteration_tokens_total sum/count). */
  iteration_tokens_mean: number | null;
  spec_decode: {
    drafts: number;
    draft_tokens: number;
    accepted_tokens: number;
    acceptance_rate: number | null;
    acceptance_length: number | null;
  } | null;
  /**
   * Simulated seconds per wall second from the server's `inferscope_sim_time_scale` gauge (the sim
   * under --time-scale); 1 for a server without it (a real server runs in real time).
   */
  time_scale: number;
  /**
   * The same means as the server exported them (its own clock: simulated time for a time-scaled sim),
   * present only when time_scale ≠ 1; otherwise they equal the fields above.
   */
  server_clock: Means | null;
  /**
   * Prefix cache over the window: prompt tokens looked up and found (vLLM V1's
   * vllm:prefix_cache_queries/hits counters); null when the server does not export them.
   */
  prefix_cache: { queries: number; hits: number; hit_rate: number | null } | null;
  /** Which metric names were found, for transparency. */
  sources: string[];
}

/** The sim's time scale from a scrape (1 when the gauge is absent or not a positive finite number). */
export function timeScaleOf(t: Totals): number {
  const v = t.get(TIME_SCALE_GAUGE);
  return v !== undefined && v > 0 && Number.isFinite(v) ? v : 1;
}

function pick(b: Totals, a: Totals, names: string[]): { delta: number; name: string } | null {
  for (const n of names) {
    const vb = b.get(n);
    if (vb === undefined) continue;
    return { delta: vb - (a.get(n) ?? 0), name: n };
  }
  return null;
}

function meanMs(before: Totals, after: Totals, bases: string[], sources: string[]): number | null {
  for (const base of bases) {
    const s = pick(after, before, [`${base}_sum`]);
    const c = pick(after, before, [`${base}_count`]);
    if (!s || !c) continue;
    sources.push(base);
    return c.delta > 0 ? (s.delta / c.delta) * 1000 : null;
  }
  return null;
}

/** Deltas between two scrapes (pure). */
export function serverDelta(before: Totals, after: Totals): ServerView {
  const src: string[] = [];
  const count = (names: string[]) => {
    const p = pick(after, before, names);
    if (p) src.push(p.name);
    return p ? p.delta : null;
  };
  const itSum = pick(after, before, ["vllm:iteration_tokens_total_sum"]);
  const itCnt = pick(after, before, ["vllm:iteration_tokens_total_count"]);
  const drafts = pick(after, before, ["vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_drafts"]);
  const draftTok = pick(after, before, [
    "vllm:spec_decode_num_draft_tokens_total",
    "vllm:spec_decode_num_draft_tokens",
  ]);
  const acc = pick(after, before, [
    "vllm:spec_decode_num_accepted_tokens_total",
    "vllm:spec_decode_num_accepted_tokens",
  ]);
  let spec: ServerView["spec_decode"] = null;
  if (drafts && draftTok && acc) {
    src.push(drafts.name, draftTok.name, acc.name);
    spec = {
      drafts: drafts.delta,
      draft_tokens: draftTok.delta,
      accepted_tokens: acc.delta,
      acceptance_rate: draftTok.delta > 0 ? acc.delta / draftTok.delta : null,
      acceptance_length: drafts.delta > 0 ? 1 + acc.delta / drafts.delta : null,
    };
  }
  const pq = pick(after, before, ["vllm:prefix_cache_queries_total", "vllm:prefix_cache_queries"]);
  const ph = pick(after, before, ["vllm:prefix_cache_hits_total", "vllm:prefix_cache_hits"]);
  if (pq && ph) src.push(pq.name, ph.name);
  const server: Means = {
    ttft_mean_ms: meanMs(
      before,
      after,
      ["vllm:time_to_first_token_seconds", "sglang:time_to_first_token_seconds"],
      src,
    ),
    itl_mean_ms: meanMs(
      before,
      after,
      ["vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds", "sglang:inter_token_latency_seconds"],
      src,
    ),
    e2e_mean_ms: meanMs(before, after, ["vllm:e2e_request_latency_seconds", "sglang:e2e_request_latency_seconds"], src),
    queue_mean_ms: meanMs(before, after, ["vllm:request_queue_time_seconds", "sglang:queue_time_seconds"], src),
    prefill_mean_ms: meanMs(before, after, ["vllm:request_prefill_time_seconds"], src),
    decode_mean_ms: meanMs(before, after, ["vllm:request_decode_time_seconds"], src),
  };
  const x = timeScaleOf(after);
  if (after.has(TIME_SCALE_GAUGE)) src.push(TIME_SCALE_GAUGE);
  const wall = (v: number | null) => (v === null || x === 1 ? v : v / x);
  const view: ServerView = {
    ttft_mean_ms: wall(server.ttft_mean_ms),
    itl_mean_ms: wall(server.itl_mean_ms),
    e2e_mean_ms: wall(server.e2e_mean_ms),
    queue_mean_ms: wall(server.queue_mean_ms),
    prefill_mean_ms: wall(server.prefill_mean_ms),
    decode_mean_ms: wall(server.decode_mean_ms),
    requests: count([
      "vllm:e2e_request_latency_seconds_count",
      "vllm:request_success_total",
      "sglang:num_requests_total",
    ]),
    prompt_tokens: count(["vllm:prompt_tokens_total", "sglang:prompt_tokens_total"]),
    generation_tokens: count(["vllm:generation_tokens_total", "sglang:generation_tokens_total"]),
    iteration_tokens_mean: itSum && itCnt && itCnt.delta > 0 ? itSum.delta / itCnt.delta : null,
    spec_decode: spec,
    prefix_cache:
      pq && ph ? { queries: pq.delta, hits: ph.delta, hit_rate: pq.delta > 0 ? ph.delta / pq.delta : null } : null,
    time_scale: x,
    server_clock: x === 1 ? null : server,
    sources: [...new Set(src)],
  };
  if (itSum) view.sources.push("vllm:iteration_tokens_total");
  return view;
}
