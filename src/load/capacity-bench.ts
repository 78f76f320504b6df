// The capacity search's trials on the load generator: one bench per load, by request rate or by an
// arrival schedule compressed by a speed (a replay). The search itself is pure (capacity.ts).
import type { LoadTrial } from "./capacity.ts";
import { type BenchDeps, type BenchResult, runBench } from "./runner.ts";
import { meetsSlo } from "./summarize.ts";
import type { BenchOptions, GoodputSlo } from "./types.ts";

/** What the search keeps of each run (the --json `capacity.runs[].detail`). */
export interface BenchTrialDetail {
  completed: number;
  failed: number;
  request_throughput: number;
  output_throughput: number;
  /** The last percentile asked for (default p99), ms; null when nothing was measured. */
  ttft_p_ms: number | null;
  tpot_p_ms: number | null;
  duration_s: number;
}

/**
 * How one load becomes bench options: a request rate, a schedule's times divided by a speed, or a trace replay's
 * own speed (--replay-speed: the trace's requests and lengths, its gaps divided by the load).
 */
export type LoadKnob = { kind: "rate" } | { kind: "speed"; arrivalsMs: ArrayLike<number> } | { kind: "replay" };

/** Share of finished requests (successes and failures; not those we aborted) meeting every SLO bound. */
export function goodShare(res: BenchResult, slo: GoodputSlo): { good: number; total: number } {
  let good = 0;
  let total = 0;
  for (const r of res.requests) {
    if (r.warmup || r.errorClass === "aborted") continue;
    total++;
    if (r.errorClass === null && meetsSlo(r, slo)) good++;
  }
  return { good, total };
}

export function benchTrial(
  base: BenchOptions,
  knob: LoadKnob,
  slo: GoodputSlo,
  deps: BenchDeps = {},
  run: (o: BenchOptions, d: BenchDeps) => Promise<BenchResult> = runBench,
): LoadTrial<BenchTrialDetail> {
  return async (load, replicate) => {
    const o: BenchOptions = { ...base, saveResult: undefined, recordsPath: undefined, goodput: slo };
    if (knob.kind === "rate") o.requestRate = load;
    else if (knob.kind === "replay") o.replaySpeed = load;
    else {
      o.arrivalsMs = Array.from(knob.arrivalsMs, (t) => t / load);
      o.requestRate = undefined;
      o.numPrompts = undefined;
      o.durationMs = undefined;
    }
    // Each replicate draws its own arrivals and prompts: the spread is run to run, not one sample repeated (a replay's
    // schedule is the trace's: its replicates differ by the run alone).
    o.seed = (base.seed ?? 0) + replicate;
    const res = await run(o, deps);
    const { good, total } = goodShare(res, slo);
    const pk = Object.keys(res.summary.inferscope.ttft_ms.percentiles).pop();
    const s = res.summary;
    const pct = (x: { count: number; percentiles: Record<string, number> }) =>
      x.count > 0 && pk ? (x.percentiles[pk] ?? null) : null;
    return {
      good,
      total,
      partial: res.partial,
      detail: {
        completed: s.completed,
        failed: s.failed,
        request_throughput: s.request_throughput,
        output_throughput: s.output_throughput,
        ttft_p_ms: pct(s.inferscope.ttft_ms),
        tpot_p_ms: pct(s.inferscope.tpot_ms),
        duration_s: s.duration,
      },
    };
  };
}
