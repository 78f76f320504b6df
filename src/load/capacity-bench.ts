// The capacity search's trials on the load generator: one bench per load, by request rate or by an
// arrival schedule compressed by a speed (a replay). The search itself is pure (capacity.ts).

import { MAX_TIMER_MS } from "../sleep.ts";
import { ALL_FAILED_MIN, type LoadTrial } from "./capacity.ts";
import type { LevelEvidence, SweepDiagnosis } from "./diagnose.ts";
import { type FrontierPoint, frontierPoints } from "./frontier.ts";
import { type BenchDeps, type BenchResult, runBench } from "./runner.ts";
import type { SampledServer } from "./server-sampler.ts";
import { meetsSlo } from "./summarize.ts";
import { achievedRate, diagnoseRuns, frontierOf, runEvidence, runSampled } from "./sweep.ts";
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
  /** The limit(s) binding at this run, from the server's gauges through it (set after the search; see diagnoseTrials). */
  limits?: string[];
}

/** A trial that also keeps, per run in call order, what the binding-limit diagnosis reads. */
export type SampledTrial = LoadTrial<BenchTrialDetail> & {
  runs: Array<{ evidence: LevelEvidence; server: SampledServer | null; result: BenchResult }>;
};

/**
 * Names the binding limit of each of the search's runs (in the order they ran, as `runs` holds them) and the knee:
 * the lowest load where a server-side limit binds. Writes each run's limits into its detail.
 */
export function diagnoseTrials(
  trial: SampledTrial,
  runs: ReadonlyArray<{ detail?: BenchTrialDetail }>,
): { knee: SweepDiagnosis["knee"]; frontier: FrontierPoint[] } {
  const aligned = trial.runs.length === runs.length;
  const d = aligned && trial.runs.some((r) => r.server) ? diagnoseRuns(trial.runs) : null;
  if (d)
    runs.forEach((r, i) => {
      if (r.detail) r.detail.limits = d.levels[i]!.binding.map((b) => b.limit);
    });
  // Each run a point: the search's loads trace the throughput–interactivity curve too.
  const frontier = frontierPoints(
    trial.runs.map((r, i) => frontierOf(r.evidence.level, r.result, d?.levels[i])),
    1,
  );
  return { knee: d?.knee ?? null, frontier };
}

/**
 * How one load becomes bench options: a request rate, a schedule's times divided by a speed, or a trace replay's
 * own speed (--replay-speed: the trace's requests and lengths, its gaps divided by the load).
 */
export type LoadKnob = { kind: "rate" } | { kind: "speed"; arrivalsMs: ArrayLike<number> } | { kind: "replay" };

/**
 * Share of finished requests (successes and failures; not those we aborted) meeting every SLO bound, the
 * failures among them, and the first failure's own words.
 */
export function goodShare(
  res: BenchResult,
  slo: GoodputSlo,
): { good: number; total: number; failed: number; error?: string } {
  let good = 0;
  let total = 0;
  let failed = 0;
  let error: string | undefined;
  for (const r of res.requests) {
    if (r.warmup || r.errorClass === "aborted") continue;
    total++;
    if (r.errorClass !== null) {
      failed++;
      error ??= `${r.errorClass}: ${r.errorMessage}`;
    } else if (meetsSlo(r, slo)) good++;
  }
  return { good, total, failed, error };
}

export function benchTrial(
  base: BenchOptions,
  knob: LoadKnob,
  slo: GoodputSlo,
  deps: BenchDeps = {},
  run: (o: BenchOptions, d: BenchDeps) => Promise<BenchResult> = runBench,
  /** Scrape the server's /metrics this often through each run, for the binding limit (0: not at all). */
  sampleMs = 0,
): SampledTrial {
  const runs: SampledTrial["runs"] = [];
  const trial: LoadTrial<BenchTrialDetail> = async (load, replicate, limit) => {
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
    // A server failing every request is told in ALL_FAILED_MIN requests, not a whole run's schedule.
    o.stopAfterFailures = ALL_FAILED_MIN;
    // The run ends within the search's time left: past it, it is stopped as an interrupt is (one controller
    // for both; Node 20's AbortSignal.any holds its sources weakly) and reported cut, not interrupted.
    const ac = new AbortController();
    const user = deps.signal;
    const onUser = () => ac.abort(user?.reason);
    if (user?.aborted) onUser();
    else user?.addEventListener("abort", onUser, { once: true });
    let cut = false;
    const timer = setTimeout(
      () => {
        cut = !user?.aborted;
        ac.abort(new Error("the capacity search's time bound"));
      },
      Math.min(MAX_TIMER_MS, Math.max(0, limit?.timeLeftMs ?? MAX_TIMER_MS)),
    );
    let res: BenchResult;
    try {
      // An unfinished run is not counted: its in-flight requests are cut at once, not after a grace.
      const sampled = await runSampled(o, { graceMs: 0, ...deps, signal: ac.signal }, sampleMs, run);
      res = sampled.result;
      runs.push({
        evidence: runEvidence(load, "rate", res, sampled.server, achievedRate(res)),
        server: sampled.server,
        result: res,
      });
    } finally {
      clearTimeout(timer);
      user?.removeEventListener("abort", onUser);
    }
    const { good, total, failed, error } = goodShare(res, slo);
    const pk = Object.keys(res.summary.inferscope.ttft_ms.percentiles).pop();
    const s = res.summary;
    const pct = (x: { count: number; percentiles: Record<string, number> }) =>
      x.count > 0 && pk ? (x.percentiles[pk] ?? null) : null;
    return {
      good,
      total,
      failed,
      error,
      partial: res.partial,
      cut: cut && res.partial,
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
  return Object.assign(trial, { runs });
}
