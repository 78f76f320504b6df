// The server's own per-request timings beside the client's (pure). llama.cpp reports, in the last
// stream chunk, predicted_ms (first generated token → last, so n − 1 decode steps) and
// predicted_per_token_ms = predicted_ms ÷ n; the client's TPOT is (E2EL − TTFT)/(n − 1). The
// per-step figure predicted_ms ÷ (n − 1) is the one with the client's definition; both are reported.
import { requestTpot } from "./summarize.ts";
import type { RequestRecord } from "./types.ts";

export interface ServerTimingSummary {
  source: string;
  /** Successful, measured requests that carried server timings. */
  requests: number;
  /** Median of the server's own per-token figure, as it reports it. */
  server_per_token_ms: number;
  /** Median of the server's decode time ÷ (n − 1): TPOT's definition on the server's clock (null when not derivable). */
  server_step_ms: number | null;
  client_tpot_ms: number;
  /** Median over requests of (client TPOT − server per-token) ÷ server per-token, %. */
  diff_pct: number;
  /** Median over requests of |client TPOT − server per-token| ÷ server per-token, %. */
  abs_diff_pct: number;
  /** The same two against server_step_ms (same definition as TPOT), when derivable. */
  step_diff_pct: number | null;
  step_abs_diff_pct: number | null;
  /** Median client TPOT − server step time: what the client, the network and the server's streaming add per token. */
  client_overhead_ms_per_token: number | null;
  server_prompt_ms: number | null;
  client_ttft_ms: number | null;
  /** Median client TTFT − server prompt time: transit, queueing, tokenisation and the client before the first token. */
  ttft_minus_prompt_ms: number | null;
  /** What the server's per-token field means. */
  definition: string;
}

function median(xs: number[]): number {
  const s = Float64Array.from(xs).sort();
  const n = s.length;
  return n % 2 ? s[(n - 1) / 2]! : (s[n / 2 - 1]! + s[n / 2]!) / 2;
}

const DEFINITIONS: Record<string, string> = {
  "llamacpp-timings":
    "llama.cpp timings.predicted_per_token_ms = predicted_ms ÷ predicted_n, where predicted_ms runs from the first generated token to the last (n − 1 steps); step = predicted_ms ÷ (n − 1)",
  "tgi-headers": "TGI x-time-per-token = inference time ÷ generated tokens (its router's clock)",
};

export function summarizeServerTimings(records: readonly RequestRecord[]): ServerTimingSummary | null {
  const rows: Array<{ client: number; server: number; step: number | null; prompt?: number; ttft: number }> = [];
  let source = "";
  for (const r of records) {
    const s = r.server;
    if (r.warmup || r.errorClass !== null || !s || s.decodePerTokenMs === undefined || !(s.decodePerTokenMs > 0))
      continue;
    const tpot = requestTpot(r);
    if (tpot === null || !Number.isFinite(tpot)) continue;
    source ||= s.source;
    const n = s.decodeTokens;
    const step = s.decodeMs !== undefined && n !== undefined && n > 1 ? s.decodeMs / (n - 1) : null;
    rows.push({ client: tpot, server: s.decodePerTokenMs, step, prompt: s.promptMs, ttft: r.ttftMs });
  }
  if (rows.length === 0) return null;
  const steps = rows.filter((x) => x.step !== null) as Array<(typeof rows)[number] & { step: number }>;
  const prompts = rows.filter((x) => x.prompt !== undefined && Number.isFinite(x.ttft));
  return {
    source,
    requests: rows.length,
    server_per_token_ms: median(rows.map((x) => x.server)),
    server_step_ms: steps.length ? median(steps.map((x) => x.step)) : null,
    client_tpot_ms: median(rows.map((x) => x.client)),
    diff_pct: median(rows.map((x) => (100 * (x.client - x.server)) / x.server)),
    abs_diff_pct: median(rows.map((x) => (100 * Math.abs(x.client - x.server)) / x.server)),
    step_diff_pct: steps.length ? median(steps.map((x) => (100 * (x.client - x.step)) / x.step)) : null,
    step_abs_diff_pct: steps.length ? median(steps.map((x) => (100 * Math.abs(x.client - x.step)) / x.step)) : null,
    client_overhead_ms_per_token: steps.length ? median(steps.map((x) => x.client - x.step)) : null,
    server_prompt_ms: prompts.length ? median(prompts.map((x) => x.prompt!)) : null,
    client_ttft_ms: prompts.length ? median(prompts.map((x) => x.ttft)) : null,
    ttft_minus_prompt_ms: prompts.length ? median(prompts.map((x) => x.ttft - x.prompt!)) : null,
    definition: DEFINITIONS[source] ?? source,
  };
}

/** One line: "server decode 2.31 ms/token vs client TPOT 2.33 ms (+0.9 %)". */
export function serverTimingLine(s: ServerTimingSummary): string {
  const f = (x: number) => (Math.abs(x) >= 100 ? x.toFixed(0) : Math.abs(x) >= 10 ? x.toFixed(1) : x.toFixed(2));
  const pct = (x: number) => `${x >= 0 ? "+" : ""}${x.toFixed(1)} %`;
  const step = s.server_step_ms !== null && s.step_diff_pct !== null ? s.server_step_ms : null;
  const main =
    step !== null
      ? `server decode ${f(step)} ms/token vs client TPOT ${f(s.client_tpot_ms)} ms (${pct(s.step_diff_pct!)})`
      : `server decode ${f(s.server_per_token_ms)} ms/token vs client TPOT ${f(s.client_tpot_ms)} ms (${pct(s.diff_pct)})`;
  const extra: string[] = [];
  if (step !== null)
    extra.push(`server's own per-token field ${f(s.server_per_token_ms)} ms (${pct(s.diff_pct)}, ÷ n, not n − 1)`);
  if (s.client_overhead_ms_per_token !== null)
    extra.push(`client side adds ${f(s.client_overhead_ms_per_token)} ms/token`);
  if (s.ttft_minus_prompt_ms !== null && s.server_prompt_ms !== null)
    extra.push(`TTFT − server prompt ${f(s.ttft_minus_prompt_ms)} ms`);
  return `${main}, median of ${s.requests} requests${extra.length ? `; ${extra.join("; ")}` : ""}`;
}
