// vLLM bench serve's end-of-run console layout (50-column banners, 40-char labels, 10-char values),
// followed by inferscope's own rows. Pure: returns text.

import { formatSummary } from "../telemetry/render.ts";
import { percentileKey } from "./npstats.ts";
import type { BenchResult } from "./runner.ts";
import type { Stats } from "./types.ts";

export const center = (s: string, fill: string, n = 50) => {
  const pad = Math.max(0, n - s.length);
  const left = Math.floor(pad / 2);
  return fill.repeat(left) + s + fill.repeat(pad - left);
};
const row = (label: string, value: string) => `${label.padEnd(40)} ${value.padEnd(10)}`.trimEnd();
const f2 = (x: number | null | undefined) => (x === null || x === undefined || Number.isNaN(x) ? "n/a" : x.toFixed(2));
/** A latency from a sample: "n/a" when nothing was measured (vLLM's JSON keeps 0 there; a 0.00 ms would read as a fact). */
const fs = (s: Stats, x: number | null | undefined) => (s.count === 0 ? "n/a" : f2(x));

const HEADERS: Record<string, [string, string]> = {
  ttft: ["TTFT", "Time to First Token"],
  tpot: ["TPOT", "Time per Output Token (excl. 1st token)"],
  itl: ["ITL", "Inter-token Latency"],
  e2el: ["E2EL", "End-to-end Latency"],
};

function block(lines: string[], header: string, name: string, s: Stats, percentiles: number[]) {
  lines.push(center(header, "-"));
  lines.push(row(`Mean ${name} (ms):`, fs(s, s.mean)));
  lines.push(row(`Median ${name} (ms):`, fs(s, s.median)));
  for (const p of percentiles)
    lines.push(row(`P${percentileKey(p)} ${name} (ms):`, fs(s, s.percentiles[`p${percentileKey(p)}`])));
}

export function formatConsole(res: BenchResult): string {
  const s = res.summary;
  const ins = s.inferscope;
  const L: string[] = [];
  L.push(center(" Serving Benchmark Result ", "="));
  L.push(row("Successful requests:", String(s.completed)));
  L.push(row("Failed requests:", String(s.failed)));
  // Cut by the interrupt, not failed by the server; shown only when there were any.
  if (s.aborted) L.push(row("Aborted requests (interrupted):", String(s.aborted)));
  if (res.setup.max_concurrency !== null)
    L.push(row("Maximum request concurrency:", String(res.setup.max_concurrency)));
  if (res.setup.request_rate !== "inf") L.push(row("Request rate configured (RPS):", f2(res.setup.request_rate)));
  L.push(row("Benchmark duration (s):", f2(s.duration)));
  L.push(row("Total input tokens:", String(s.total_input_tokens)));
  L.push(row("Total generated tokens:", String(s.total_output_tokens)));
  L.push(row("Request throughput (req/s):", f2(s.request_throughput)));
  if (s.request_goodput !== null) L.push(row("Request goodput (req/s):", f2(s.request_goodput)));
  L.push(row("Output token throughput (tok/s):", f2(s.output_throughput)));
  L.push(row("Peak output token throughput (tok/s):", f2(s.max_output_tokens_per_s)));
  L.push(row("Peak concurrent requests:", f2(s.max_concurrent_requests)));
  L.push(row("Total Token throughput (tok/s):", f2(s.total_token_throughput)));
  const stat: Record<string, Stats> = { ttft: ins.ttft_ms, tpot: ins.tpot_ms, itl: ins.itl_ms, e2el: ins.e2el_ms };
  for (const m of ["ttft", "tpot", "itl", "e2el"])
    if (res.percentileMetrics.includes(m)) block(L, HEADERS[m]![1], HEADERS[m]![0], stat[m]!, res.percentiles);
  const queued = ins.client_queue_ms.max > 0.5;
  if (queued && res.setup.max_concurrency !== null) {
    block(L, "Client-side Queueing", "Queue Time", ins.client_queue_ms, res.percentiles);
    if (res.setup.request_rate !== "inf")
      block(L, "Queue-inclusive End-to-end Latency", "E2EL incl. Queue", ins.e2el_from_schedule_ms, res.percentiles);
  }
  // inferscope's additions, each with the definition it follows.
  L.push(center(" inferscope ", "-"));
  const pLast = res.percentiles[res.percentiles.length - 1] ?? 99;
  L.push(
    row(
      `Per-token ITL mean / P${percentileKey(pLast)} (ms):`,
      `${fs(ins.itl_token_ms, ins.itl_token_ms.mean)} / ${fs(ins.itl_token_ms, pct(ins.itl_token_ms, pLast))}`,
    ),
  );
  L.push(row("Normalized TPOT E2EL/n mean (ms):", fs(ins.tpot_normalized_ms, ins.tpot_normalized_ms.mean)));
  L.push(row("TTFT to first text mean (ms):", fs(ins.ttft_output_ms, ins.ttft_output_ms.mean)));
  if (ins.ttfo_ms.count && Math.abs(ins.ttfo_ms.mean - ins.ttft_output_ms.mean) > 0.01)
    L.push(row("TTFO (first non-reasoning) mean (ms):", f2(ins.ttfo_ms.mean)));
  L.push(row("Decode tok/s per request (median):", fs(ins.decode_tok_s, ins.decode_tok_s.median)));
  L.push(row("Tokens per chunk (mean):", fs(ins.tokens_per_chunk, ins.tokens_per_chunk.mean)));
  if (res.setup.request_rate !== "inf")
    L.push(
      row(
        // With a cap, a send waits for a slot: the lag then holds the queue time above.
        `Schedule lag${res.setup.max_concurrency !== null ? " incl. queue" : ""} median / P${percentileKey(pLast)} (ms):`,
        `${fs(ins.schedule_lag_ms, ins.schedule_lag_ms.median)} / ${fs(ins.schedule_lag_ms, pct(ins.schedule_lag_ms, pLast))}`,
      ),
    );
  L.push(
    row(
      "Client CPU / loop delay P99:",
      `${(res.client.cpuUtilization * 100).toFixed(0)} % / ${res.client.eventLoopDelayMs.p99.toFixed(2)} ms${res.client.saturated ? " SATURATED" : ""}`,
    ),
  );
  L.push(row("Client threads / HTTP client:", `${res.client.workers} / ${res.client.transport ?? "undici"}`));
  if (res.client.workersNote) L.push(`  (${res.client.workersNote})`);
  if (res.client.reads > 0) L.push(row("Client CPU per socket read (µs):", res.client.cpuPerReadUs.toFixed(1)));
  if (res.telemetry) {
    const t = res.telemetry;
    L.push(center(" Hardware telemetry ", "-"));
    L.push(`source: ${t.source.detail} (${t.source.why})`);
    if (t.summary) L.push(formatSummary(t.summary));
    for (const n of t.notes) L.push(`note: ${n}`);
  }
  if (res.server) {
    const v = res.server;
    L.push(center(" Server view (/metrics deltas) ", "-"));
    // A time-scaled sim exports simulated seconds; the rows below are in the client's wall clock.
    if (v.time_scale !== 1) {
      L.push(row("Server time scale (sim):", `${v.time_scale}x (times below in wall clock)`));
      if (v.server_clock?.itl_mean_ms != null)
        L.push(row("Server mean ITL, simulated (ms):", f2(v.server_clock.itl_mean_ms)));
    }
    if (v.ttft_mean_ms !== null) L.push(row("Server mean TTFT (ms):", f2(v.ttft_mean_ms)));
    if (v.itl_mean_ms !== null) L.push(row("Server mean ITL (ms):", f2(v.itl_mean_ms)));
    if (v.e2e_mean_ms !== null) L.push(row("Server mean E2E (ms):", f2(v.e2e_mean_ms)));
    if (v.queue_mean_ms !== null) L.push(row("Server mean queue time (ms):", f2(v.queue_mean_ms)));
    if (v.iteration_tokens_mean !== null)
      L.push(row("Server tokens per iteration (mean):", f2(v.iteration_tokens_mean)));
    if (v.spec_decode?.acceptance_length != null)
      L.push(row("Spec decode acceptance length:", f2(v.spec_decode.acceptance_length)));
  }
  if (res.serverTimings) {
    const s = res.serverTimings;
    L.push(center(` Server's own timing (${s.source}) `, "-"));
    if (s.server_step_ms !== null) L.push(row("Server decode per step (ms):", f2(s.server_step_ms)));
    L.push(row("Server per-token field (ms):", f2(s.server_per_token_ms)));
    L.push(row("Client TPOT, same requests (ms):", f2(s.client_tpot_ms)));
    const d = s.step_diff_pct ?? s.diff_pct;
    L.push(row("Client − server per token (%):", `${d >= 0 ? "+" : ""}${d.toFixed(2)}`));
    if (s.client_overhead_ms_per_token !== null)
      L.push(row("Client-side time per token (ms):", f2(s.client_overhead_ms_per_token)));
    if (s.server_prompt_ms !== null) L.push(row("Server prompt time (ms):", f2(s.server_prompt_ms)));
    if (s.ttft_minus_prompt_ms !== null) L.push(row("TTFT − server prompt (ms):", f2(s.ttft_minus_prompt_ms)));
  }
  L.push("=".repeat(50));
  if (ins.error_samples.length) {
    L.push("Errors (first 10):");
    for (const e of ins.error_samples) L.push(`  ${e}`);
  }
  for (const w of res.warnings) L.push(`warning: ${w}`);
  return L.join("\n");
}

function pct(s: Stats, p: number): number | undefined {
  return s.percentiles[`p${percentileKey(p)}`];
}
