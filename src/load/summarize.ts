// Pure metrics over request records. Default definitions follow `vllm bench serve` (calculate_metrics);
// the other tools' definitions are reported beside them under `inferscope`, each with its name.
import { npMean, npMedian, npPercentile, npStd, percentileKey } from "./npstats.ts";
import type { ErrorClass, GoodputSlo, RequestRecord, Stats } from "./types.ts";
import { CHUNK_CHOICES } from "./types.ts";

export interface MetricsOptions {
  /** Benchmark duration (ms). Default: first scheduled/created time to the last stream end. */
  durationMs?: number;
  /** Default [99]. */
  percentiles?: number[];
  goodput?: GoodputSlo;
}

/** Our own distributions, namespaced in the result; every key is defined in docs/metrics.md. */
export interface InferscopeMetrics {
  /** Definition names of the vLLM-compatible fields, for readers of the JSON. */
  definitions: Record<string, string>;
  ttft_ms: Stats;
  /** First chunk with content or reasoning text (the content-anchored TTFT most other tools use). */
  ttft_output_ms: Stats;
  /** First non-reasoning content (TTFO). */
  ttfo_ms: Stats;
  tpot_ms: Stats;
  tpot_normalized_ms: Stats;
  itl_ms: Stats;
  itl_token_ms: Stats;
  /** Per request: mean chunk gap (GuideLLM/HF-style per-request ITL: (last − first)/(n − 1) is tpot). */
  e2el_ms: Stats;
  /** Stream end ([DONE]/close) − send. */
  e2el_stream_ms: Stats;
  /** Response headers − send. */
  tt_ack_ms: Stats;
  /** Actual send − scheduled send. */
  schedule_lag_ms: Stats;
  /** Wait for a --max-concurrency slot (vLLM client queue time). */
  client_queue_ms: Stats;
  /** E2EL + client queue time (vLLM e2el_including_client_queue). */
  e2el_from_schedule_ms: Stats;
  /** Per request (n − 1) / (E2EL − TTFT), tokens per second. */
  decode_tok_s: Stats;
  /** Output tokens per timed chunk, per request. */
  tokens_per_chunk: Stats;
  errors: Partial<Record<ErrorClass, number>>;
  error_samples: string[];
  output_tokens_from_usage: number;
  output_tokens_fallback: number;
  multi_token_chunks: number;
  token_chunks: number;
  /** ITL samples under 100 µs: several messages in one socket read. */
  itl_under_100us: number;
  osl_mismatch_requests: number;
  osl_mismatch_mean_pct: number;
  warmup_excluded: number;
}

export interface BenchSummary {
  duration: number;
  completed: number;
  /** Requests that ended in an error of the server or the connection (not counting `aborted`). */
  failed: number;
  /** Requests we cut ourselves (an interrupt, or the stop after a rejected first request): not the server's failures. */
  aborted: number;
  total_input_tokens: number;
  total_output_tokens: number;
  request_throughput: number;
  request_goodput: number | null;
  output_throughput: number;
  total_token_throughput: number;
  max_output_tokens_per_s: number;
  max_concurrent_requests: number;
  /** mean_/median_/std_/pXX_ fields for ttft, tpot, itl, e2el (ms), vLLM's names. */
  [stat: string]: number | null | InferscopeMetrics;
  inferscope: InferscopeMetrics;
}

export interface MetricsResult {
  summary: BenchSummary;
  warnings: string[];
  /** Per request vLLM-style lists (seconds, as vLLM's JSON stores them), successful and failed alike. */
  perRequest: {
    input_lens: number[];
    output_lens: number[];
    ttfts: number[];
    itls: number[][];
    latencies: number[];
    start_times: number[];
    queue_times: number[];
    errors: string[];
  };
}

export const DEFINITIONS: Record<string, string> = {
  ttft: "ttft.first_choices_chunk (vLLM): first chunk with non-empty choices − send",
  tpot: "tpot.request (vLLM): (E2EL − TTFT)/(n − 1), n > 1",
  itl: "itl.chunk.pooled (vLLM): every gap between consecutive chunks with choices, pooled",
  e2el: "e2el.last_choices_chunk (vLLM): last chunk with choices − send",
  ttft_output: "ttft.first_output: first chunk with content or reasoning text − send",
  ttfo: "ttfo: first chunk with non-reasoning content − send",
  tpot_normalized: "tpot.normalized: E2EL / n",
  itl_token: "itl.token.pooled (SGLang): chunk gap / tokens in chunk, once per token",
  schedule_lag: "schedule_lag: send − scheduled send (raw, not relative to the least-late request)",
  client_queue: "client_queue: send − task created (waiting for a --max-concurrency slot)",
  decode_tok_s: "decode_tok_s: (n − 1) / (E2EL − TTFT) per request",
};

export function isSuccess(r: RequestRecord): boolean {
  return r.errorClass === null;
}

/** vLLM's per-request ITL list (ms): gaps between consecutive chunks with non-empty choices. */
export function chunkItls(r: RequestRecord): number[] {
  const out: number[] = [];
  const { tMs, flags } = r.chunks;
  let prev = Number.NaN;
  for (let j = 0; j < tMs.length; j++) {
    if (!(flags[j]! & CHUNK_CHOICES)) continue;
    if (!Number.isNaN(prev)) out.push(tMs[j]! - prev);
    prev = tMs[j]!;
  }
  return out;
}

/** Tokens a chunk carries: the continuous-usage delta when known, else 1 when it carries output text. */
export function chunkTokens(r: RequestRecord, j: number): number {
  const k = r.chunks.tokens[j]!;
  if (k >= 0) return k;
  return r.chunks.content[j]! + r.chunks.reasoning[j]! + r.chunks.tool[j]! > 0 ? 1 : 0;
}

/** Per-token ITL (ms): each gap between token-carrying chunks divided by the tokens of the later one, repeated. */
export function tokenItls(r: RequestRecord): number[] {
  const out: number[] = [];
  const tMs = r.chunks.tMs;
  let prev = Number.NaN;
  for (let j = 0; j < tMs.length; j++) {
    const k = chunkTokens(r, j);
    if (k <= 0) continue;
    if (!Number.isNaN(prev)) {
      const v = (tMs[j]! - prev) / k;
      for (let i = 0; i < k; i++) out.push(v);
    }
    prev = tMs[j]!;
  }
  return out;
}

/** vLLM TPOT for one request (ms); null when n ≤ 1. */
export function requestTpot(r: RequestRecord): number | null {
  if (r.outputTokens <= 1) return null;
  return (r.e2elMs - r.ttftMs) / (r.outputTokens - 1);
}

/**
 * Whether a successful request meets every SLO given (vLLM's goodput rule: each value ≤ its limit; TPOT is 0
 * for n ≤ 1; our `itl` limit applies to the request's largest chunk gap).
 */
export function meetsSlo(r: RequestRecord, slo: GoodputSlo): boolean {
  if (slo.ttft !== undefined && !(slo.ttft >= r.ttftMs)) return false;
  if (slo.tpot !== undefined && !(slo.tpot >= (requestTpot(r) ?? 0))) return false;
  if (slo.e2el !== undefined && !(slo.e2el >= r.e2elMs)) return false;
  if (slo.itl !== undefined) {
    const g = chunkItls(r);
    if (g.length && !(slo.itl >= Math.max(...g))) return false;
  }
  return true;
}

export function stats(values: ArrayLike<number>, percentiles: number[]): Stats {
  const s = Float64Array.from(values as ArrayLike<number>);
  s.sort();
  const pct: Record<string, number> = {};
  for (const p of percentiles) pct[`p${percentileKey(p)}`] = npPercentile(s, p, true);
  return {
    mean: npMean(values),
    median: npMedian(s, true),
    std: npStd(values),
    min: s.length ? s[0]! : 0,
    max: s.length ? s[s.length - 1]! : 0,
    count: s.length,
    percentiles: pct,
  };
}

/** Peak concurrency: exact sweep over [start, end), departures before arrivals on ties. */
export function peakConcurrency(intervals: Array<[number, number]>): number {
  const ev: Array<[number, number]> = [];
  for (const [a, b] of intervals) {
    ev.push([a, 1]);
    ev.push([b, -1]);
  }
  ev.sort((x, y) => x[0] - y[0] || x[1] - y[1]);
  let cur = 0;
  let peak = 0;
  for (const [, d] of ev) {
    cur += d;
    if (cur > peak) peak = cur;
  }
  return peak;
}

/**
 * vLLM's peak output throughput: token times rebuilt as start + TTFT + cumulative chunk ITL (one token
 * per chunk, as vLLM does), counted in 1-s bins from the earliest start.
 */
export function peakOutputTokensPerS(ok: RequestRecord[]): number {
  if (ok.length === 0) return 0;
  let minStart = Number.POSITIVE_INFINITY;
  let maxEnd = Number.NEGATIVE_INFINITY;
  for (const r of ok) {
    const st = r.sendMs / 1000;
    if (st < minStart) minStart = st;
    const e = st + r.e2elMs / 1000;
    if (e > maxEnd) maxEnd = e;
  }
  const nb = Math.ceil(maxEnd - minStart) + 1;
  const bins = new Float64Array(nb);
  for (const r of ok) {
    let t = r.sendMs / 1000 + r.ttftMs / 1000;
    const add = (x: number) => {
      const b = Math.trunc(x - minStart);
      if (b >= 0 && b < nb) bins[b]!++;
    };
    add(t);
    for (const g of chunkItls(r)) {
      t += g / 1000;
      add(t);
    }
  }
  let m = 0;
  for (const v of bins) if (v > m) m = v;
  return m;
}

function defaultDurationMs(recs: RequestRecord[]): number {
  let start = Number.POSITIVE_INFINITY;
  let end = Number.NEGATIVE_INFINITY;
  for (const r of recs) {
    start = Math.min(start, r.scheduledMs, r.createdMs, r.sendMs);
    const e = r.sendMs + (Number.isNaN(r.endMs) ? 0 : r.endMs);
    if (e > end) end = e;
  }
  return recs.length ? end - start : 0;
}

/** All metrics of a run from its records (warmup records are skipped). */
export function computeMetrics(records: readonly RequestRecord[], opts: MetricsOptions = {}): MetricsResult {
  const percentiles = opts.percentiles ?? [99];
  const measured = records.filter((r) => !r.warmup);
  const warmupExcluded = records.length - measured.length;
  const ok = measured.filter(isSuccess);
  const aborted = measured.filter((r) => r.errorClass === "aborted").length;
  const failed = measured.length - ok.length - aborted;
  const durationMs = opts.durationMs ?? defaultDurationMs(measured);
  const durS = durationMs / 1000;

  const ttfts: number[] = [];
  const ttftOut: number[] = [];
  const ttfos: number[] = [];
  const tpots: number[] = [];
  const tpotNorm: number[] = [];
  const itls: number[] = [];
  const tokItls: number[] = [];
  const e2els: number[] = [];
  const e2elStream: number[] = [];
  const ttAck: number[] = [];
  const decode: number[] = [];
  const tpc: number[] = [];
  let totalIn = 0;
  let totalOut = 0;
  let fromUsage = 0;
  let fallback = 0;
  let multi = 0;
  let tokenChunks = 0;
  let under100us = 0;
  let oslMismatch = 0;
  let oslPctSum = 0;
  let oslN = 0;
  let missingPrompt = 0;

  for (const r of ok) {
    const n = r.outputTokens;
    totalOut += n;
    totalIn += r.promptTokens >= 0 ? r.promptTokens : r.targetInputLen;
    if (r.promptTokens < 0) missingPrompt++;
    if (r.outputTokensFromUsage) fromUsage++;
    else fallback++;
    ttfts.push(r.ttftMs);
    if (!Number.isNaN(r.firstOutputMs)) ttftOut.push(r.firstOutputMs);
    if (!Number.isNaN(r.firstContentMs)) ttfos.push(r.firstContentMs);
    const tp = requestTpot(r);
    if (tp !== null) {
      tpots.push(tp);
      decode.push(tp > 0 ? 1000 / tp : 0);
    }
    if (n > 0) tpotNorm.push(r.e2elMs / n);
    const gi = chunkItls(r);
    for (const g of gi) {
      itls.push(g);
      if (g < 0.1) under100us++;
    }
    for (const g of tokenItls(r)) tokItls.push(g);
    e2els.push(r.e2elMs);
    e2elStream.push(r.endMs);
    if (!Number.isNaN(r.headersMs)) ttAck.push(r.headersMs);
    let chunksWithTokens = 0;
    for (let j = 0; j < r.chunks.tMs.length; j++) {
      const k = r.chunks.tokens[j]!;
      if (k > 0) {
        tokenChunks++;
        chunksWithTokens++;
        if (k > 1) multi++;
      }
    }
    let timed = 0;
    for (let j = 0; j < r.chunks.flags.length; j++) if (r.chunks.flags[j]! & CHUNK_CHOICES) timed++;
    if (timed > 0) tpc.push(n / timed);
    // Without continuous usage we still see multi-token chunks when usage n exceeds chunks with output.
    if (chunksWithTokens === 0 && r.outputTokensFromUsage) {
      let outChunks = 0;
      for (let j = 0; j < r.chunks.tMs.length; j++)
        if (r.chunks.content[j]! + r.chunks.reasoning[j]! + r.chunks.tool[j]! > 0) outChunks++;
      if (outChunks > 0 && n > outChunks) multi += n - outChunks;
    }
    if (r.targetOutputLen > 0) {
      const diff = Math.abs(n - r.targetOutputLen);
      oslPctSum += (100 * diff) / r.targetOutputLen;
      oslN++;
      if (diff > Math.min(0.05 * r.targetOutputLen, 50)) oslMismatch++;
    }
  }

  const lag: number[] = [];
  const queue: number[] = [];
  const fromSched: number[] = [];
  for (const r of measured) {
    lag.push(r.sendMs - r.scheduledMs);
    queue.push(r.sendMs - r.createdMs);
  }
  for (const r of ok) fromSched.push(r.e2elMs + (r.sendMs - r.createdMs));

  let good: number | null = null;
  const slo = opts.goodput;
  if (slo && (slo.ttft !== undefined || slo.tpot !== undefined || slo.e2el !== undefined || slo.itl !== undefined)) {
    good = 0;
    for (const r of ok) if (meetsSlo(r, slo)) good++;
  }

  const errors: Partial<Record<ErrorClass, number>> = {};
  const samples: string[] = [];
  for (const r of measured) {
    if (r.errorClass === null) continue;
    errors[r.errorClass] = (errors[r.errorClass] ?? 0) + 1;
    if (samples.length < 10) samples.push(`${r.errorClass}: ${r.errorMessage ?? ""}`);
  }

  const st = (v: ArrayLike<number>) => stats(v, percentiles);
  const ins: InferscopeMetrics = {
    definitions: DEFINITIONS,
    ttft_ms: st(ttfts),
    ttft_output_ms: st(ttftOut),
    ttfo_ms: st(ttfos),
    tpot_ms: st(tpots),
    tpot_normalized_ms: st(tpotNorm),
    itl_ms: st(itls),
    itl_token_ms: st(tokItls),
    e2el_ms: st(e2els),
    e2el_stream_ms: st(e2elStream),
    tt_ack_ms: st(ttAck),
    schedule_lag_ms: st(lag),
    client_queue_ms: st(queue),
    e2el_from_schedule_ms: st(fromSched),
    decode_tok_s: st(decode),
    tokens_per_chunk: st(tpc),
    errors,
    error_samples: samples,
    output_tokens_from_usage: fromUsage,
    output_tokens_fallback: fallback,
    multi_token_chunks: multi,
    token_chunks: tokenChunks,
    itl_under_100us: under100us,
    osl_mismatch_requests: oslMismatch,
    osl_mismatch_mean_pct: oslN ? oslPctSum / oslN : 0,
    warmup_excluded: warmupExcluded,
  };

  const summary: BenchSummary = {
    duration: durS,
    completed: ok.length,
    failed,
    aborted,
    total_input_tokens: totalIn,
    total_output_tokens: totalOut,
    request_throughput: durS > 0 ? ok.length / durS : 0,
    request_goodput: good === null ? null : durS > 0 ? good / durS : 0,
    output_throughput: durS > 0 ? totalOut / durS : 0,
    total_token_throughput: durS > 0 ? (totalIn + totalOut) / durS : 0,
    max_output_tokens_per_s: peakOutputTokensPerS(ok),
    max_concurrent_requests: peakConcurrency(ok.map((r) => [r.sendMs, r.sendMs + r.e2elMs])),
    inferscope: ins,
  };
  const flat = (name: string, s: Stats) => {
    summary[`mean_${name}_ms`] = s.mean;
    summary[`median_${name}_ms`] = s.median;
    summary[`std_${name}_ms`] = s.std;
    for (const [k, v] of Object.entries(s.percentiles)) summary[`${k}_${name}_ms`] = v;
  };
  flat("ttft", ins.ttft_ms);
  flat("tpot", ins.tpot_ms);
  flat("itl", ins.itl_ms);
  flat("e2el", ins.e2el_ms);

  const warnings: string[] = [];
  if (measured.length > 0 && ok.length === 0)
    warnings.push(
      // The first error itself, not a pointer to where the errors are printed: they come before the warnings
      // on the terminal and under error_samples in --json.
      failed === 0
        ? "every request was aborted before it finished"
        : `all ${failed} requests failed; the first: ${samples.find((x) => !x.startsWith("aborted:")) ?? samples[0]}`,
    );
  else if (failed > 0) warnings.push(`${failed} of ${measured.length} requests failed and are excluded from latencies`);
  if (aborted > 0 && ok.length > 0)
    warnings.push(`${aborted} of ${measured.length} requests were aborted by us (interrupted) and are excluded`);
  if (fallback > 0)
    warnings.push(
      `${fallback} successful requests had no usage.completion_tokens; their output length is the count of chunks with output (may undercount multi-token chunks)`,
    );
  if (missingPrompt > 0)
    warnings.push(`${missingPrompt} requests had no usage.prompt_tokens; the client's target input length was used`);
  if (multi > 0)
    warnings.push(
      `chunks carry more than one token (${multi} multi-token chunks): pooled chunk ITL exceeds TPOT; see itl_token_ms for per-token ITL`,
    );
  if (oslMismatch > 0)
    warnings.push(
      `${oslMismatch} requests' output length differs from the target by more than min(5 %, 50 tokens) (mean difference ${ins.osl_mismatch_mean_pct.toFixed(1)} %); send ignore_eos`,
    );

  const perRequest: MetricsResult["perRequest"] = {
    input_lens: [],
    output_lens: [],
    ttfts: [],
    itls: [],
    latencies: [],
    start_times: [],
    queue_times: [],
    errors: [],
  };
  for (const r of measured) {
    const s = isSuccess(r);
    perRequest.input_lens.push(r.promptTokens >= 0 ? r.promptTokens : r.targetInputLen);
    perRequest.output_lens.push(s ? r.outputTokens : 0);
    perRequest.ttfts.push(s ? r.ttftMs / 1000 : 0);
    perRequest.itls.push(s ? chunkItls(r).map((x) => x / 1000) : []);
    perRequest.latencies.push(s ? r.e2elMs / 1000 : 0);
    perRequest.start_times.push(r.sendMs / 1000);
    perRequest.queue_times.push((r.sendMs - r.createdMs) / 1000);
    perRequest.errors.push(s ? "" : `${r.errorClass}: ${r.errorMessage ?? ""}`);
  }
  return { summary, warnings, perRequest };
}
