// Time slices (pure): the run cut into equal intervals, each with its own rates, goodput and latency
// percentiles, so bursts, warm-up and drift show instead of averaging away. Rules (docs/metrics.md):
// - a request belongs to the slice its send time falls in (AIPerf's rule: request start) for arrivals,
//   TTFT, TPOT, E2EL and goodput;
// - a completion belongs to the slice its stream ended in; a token, and the ITL gap that ends with it,
//   to the slice in which it was received;
// - latencies use the whole-run definitions (vLLM-compatible, summarize.ts) and the same percentile code.
import { percentileKey } from "./npstats.ts";
import { chunkItls, chunkTokens, isSuccess, meetsSlo, stats } from "./summarize.ts";
import type { GoodputSlo, RequestRecord, Stats } from "./types.ts";
import { CHUNK_CHOICES } from "./types.ts";

/** More slices than this are merged into wider ones (a chart and a table stay readable). */
export const MAX_SLICES = 1000;

export interface SliceOptions {
  /** Slice width (ms). */
  widthMs: number;
  /** Default [99]. */
  percentiles?: number[];
  goodput?: GoodputSlo;
}

export interface SliceRow {
  index: number;
  /** Seconds from the run's start (the first measured request's schedule); end is exclusive. */
  start_s: number;
  end_s: number;
  /** Seconds of the slice inside the run (the last slice is usually shorter): the rates' denominator. */
  width_s: number;
  /** Requests sent in the slice, and per second. */
  arrivals: number;
  arrival_rate: number;
  /** Successful requests whose stream ended in the slice, and per second. */
  completed: number;
  request_throughput: number;
  /** Requests that failed (server or connection) with their end in the slice. */
  failed: number;
  /** Output tokens received in the slice, and per second. */
  output_tokens: number;
  output_throughput: number;
  /** Of the requests sent in the slice: how many met the SLO (failures do not), per second, and their share; null without an SLO. */
  good: number | null;
  goodput: number | null;
  good_fraction: number | null;
  /** Requests sent in the slice (successful ones): TTFT, TPOT, E2EL. Gaps received in the slice: ITL. */
  ttft_ms: Stats;
  tpot_ms: Stats;
  itl_ms: Stats;
  e2el_ms: Stats;
}

export interface SliceResult {
  /** The width used (ms): the one asked for, or wider when the run would need more than MAX_SLICES. */
  width_ms: number;
  rule: string;
  slices: SliceRow[];
  notes: string[];
  /** Where slice 0 starts, on the records' clock (ms from the run's origin); absent with no measured record. */
  start_ms?: number;
}

export const SLICE_RULE =
  "requests by send time (arrivals, TTFT, TPOT, E2EL, goodput); completions by stream end; tokens and ITL gaps by receive time";

/** Cuts the measured (non-warm-up) records into slices of `widthMs`, from the first scheduled send to the last stream end. */
export function computeSlices(records: readonly RequestRecord[], opts: SliceOptions): SliceResult {
  if (!(opts.widthMs > 0)) throw new RangeError(`slice width must be > 0 ms, got ${opts.widthMs}`);
  const percentiles = opts.percentiles ?? [99];
  const measured = records.filter((r) => !r.warmup);
  const notes: string[] = [];
  if (measured.length === 0) return { width_ms: opts.widthMs, rule: SLICE_RULE, slices: [], notes };
  let t0 = Number.POSITIVE_INFINITY;
  let t1 = Number.NEGATIVE_INFINITY;
  for (const r of measured) {
    t0 = Math.min(t0, r.scheduledMs, r.createdMs, r.sendMs);
    const e = r.sendMs + (Number.isNaN(r.endMs) ? 0 : r.endMs);
    t1 = Math.max(t1, e, r.sendMs);
  }
  let w = opts.widthMs;
  const span = t1 - t0;
  if (span / w > MAX_SLICES) {
    w = Math.ceil(span / MAX_SLICES);
    notes.push(`the run spans ${(span / 1000).toFixed(1)} s: slices widened to ${w} ms to stay within ${MAX_SLICES}`);
  }
  const n = Math.max(1, Math.ceil(span / w) || 1);
  // A time exactly at the run's end belongs to the last slice.
  const at = (t: number) => Math.min(n - 1, Math.max(0, Math.floor((t - t0) / w)));

  const arrivals = new Array<number>(n).fill(0);
  const completed = new Array<number>(n).fill(0);
  const failed = new Array<number>(n).fill(0);
  const tokens = new Array<number>(n).fill(0);
  const good = new Array<number>(n).fill(0);
  const finished = new Array<number>(n).fill(0);
  const ttft: number[][] = Array.from({ length: n }, () => []);
  const tpot: number[][] = Array.from({ length: n }, () => []);
  const e2el: number[][] = Array.from({ length: n }, () => []);
  const itl: number[][] = Array.from({ length: n }, () => []);
  const slo = opts.goodput;
  const hasSlo =
    slo !== undefined &&
    (slo.ttft !== undefined || slo.tpot !== undefined || slo.e2el !== undefined || slo.itl !== undefined);

  for (const r of measured) {
    const s = at(r.sendMs);
    arrivals[s]!++;
    if (r.errorClass === "aborted") continue;
    const end = r.sendMs + (Number.isNaN(r.endMs) ? 0 : r.endMs);
    finished[s]!++;
    if (!isSuccess(r)) {
      failed[at(end)]!++;
      continue;
    }
    completed[at(end)]!++;
    ttft[s]!.push(r.ttftMs);
    e2el[s]!.push(r.e2elMs);
    if (r.outputTokens > 1) tpot[s]!.push((r.e2elMs - r.ttftMs) / (r.outputTokens - 1));
    if (hasSlo && meetsSlo(r, slo!)) good[s]!++;
    // Tokens by the chunk that carried them; without per-chunk usage the request's usage total is
    // spread over its output chunks, so the slices add up to the run's total_output_tokens.
    const { tMs, flags } = r.chunks;
    let counted = 0;
    for (let j = 0; j < tMs.length; j++) if (flags[j]! & CHUNK_CHOICES) counted += chunkTokens(r, j);
    const scale = counted > 0 ? r.outputTokens / counted : 0;
    for (let j = 0; j < tMs.length; j++) {
      if (!(flags[j]! & CHUNK_CHOICES)) continue;
      const k = chunkTokens(r, j);
      if (k > 0) tokens[at(r.sendMs + tMs[j]!)]! += k * scale;
    }
    // Each gap ends at a chunk with choices; it is received with that chunk.
    const gaps = chunkItls(r);
    let g = 0;
    let first = true;
    for (let j = 0; j < tMs.length; j++) {
      if (!(flags[j]! & CHUNK_CHOICES)) continue;
      if (first) {
        first = false;
        continue;
      }
      itl[at(r.sendMs + tMs[j]!)]!.push(gaps[g++]!);
    }
  }

  const slices: SliceRow[] = [];
  for (let i = 0; i < n; i++) {
    const a = t0 + i * w;
    const b = Math.min(t0 + (i + 1) * w, i === n - 1 ? Math.max(t1, a) : Number.POSITIVE_INFINITY);
    const widthS = (b - a) / 1000;
    const per = (x: number) => (widthS > 0 ? x / widthS : 0);
    slices.push({
      index: i,
      start_s: (i * w) / 1000,
      end_s: (i * w) / 1000 + widthS,
      width_s: widthS,
      arrivals: arrivals[i]!,
      arrival_rate: per(arrivals[i]!),
      completed: completed[i]!,
      request_throughput: per(completed[i]!),
      failed: failed[i]!,
      output_tokens: Math.round(tokens[i]! * 1000) / 1000,
      output_throughput: per(tokens[i]!),
      good: hasSlo ? good[i]! : null,
      goodput: hasSlo ? per(good[i]!) : null,
      good_fraction: hasSlo ? (finished[i]! > 0 ? good[i]! / finished[i]! : null) : null,
      ttft_ms: stats(ttft[i]!, percentiles),
      tpot_ms: stats(tpot[i]!, percentiles),
      itl_ms: stats(itl[i]!, percentiles),
      e2el_ms: stats(e2el[i]!, percentiles),
    });
  }
  return { width_ms: w, rule: SLICE_RULE, slices, notes, start_ms: t0 };
}

const cell = (s: Stats, x: number | undefined) => (s.count === 0 || x === undefined ? "n/a" : x.toFixed(1));

/** The slices as a fixed-width console table (pure text); the last percentile asked for is shown beside the median. */
export function formatSlices(res: SliceResult, percentiles: number[] = [99]): string {
  const p = percentiles[percentiles.length - 1] ?? 99;
  const pk = `p${percentileKey(p)}`;
  const hasSlo = res.slices.some((r) => r.good !== null);
  const head = [
    "slice (s)",
    "arr/s",
    "done",
    "fail",
    "out tok/s",
    ...(hasSlo ? ["good/s", "good %"] : []),
    "TTFT p50",
    `TTFT ${pk}`,
    "TPOT p50",
    `ITL ${pk}`,
  ];
  const rows = res.slices.map((r) => [
    `${r.start_s.toFixed(1)}–${r.end_s.toFixed(1)}`,
    r.arrival_rate.toFixed(2),
    String(r.completed),
    String(r.failed),
    r.output_throughput.toFixed(1),
    ...(hasSlo
      ? [(r.goodput ?? 0).toFixed(2), r.good_fraction === null ? "n/a" : (100 * r.good_fraction).toFixed(1)]
      : []),
    cell(r.ttft_ms, r.ttft_ms.median),
    cell(r.ttft_ms, r.ttft_ms.percentiles[pk]),
    cell(r.tpot_ms, r.tpot_ms.median),
    cell(r.itl_ms, r.itl_ms.percentiles[pk]),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ");
  const out = [
    `Time slices of ${res.width_ms >= 1000 ? `${res.width_ms / 1000} s` : `${res.width_ms} ms`} (${res.rule}; latencies in ms)`,
    line(head),
    ...rows.map(line),
  ];
  for (const n of res.notes) out.push(`note: ${n}`);
  return out.join("\n");
}
