// Sweeps against one server: output length (robust fit of E2E against output length → per-token
// decode cost and fixed cost), and concurrency or request rate (throughput–latency curve). One
// server start for the whole sweep; levels run in a seeded random order so drift does not line up
// with the swept variable; every level is stored as a block as soon as it finishes.
import { UsageError } from "../errors.ts";
import {
  batchCeilingFromCommand,
  diagnoseSweep,
  type LevelDiagnosis,
  type LevelEvidence,
  type SweepDiagnosis,
  tokenBudgetFromCommand,
} from "../load/diagnose.ts";
import { type FrontierPoint, frontierPoints, type TtftRatePoint, ttftRatePoints } from "../load/frontier.ts";
import { type TuneHandoff, tuneHandoff } from "../load/relieve.ts";
import { type BlockSample, variantTelemetry } from "./blocks.ts";
import { bootstrapCI, type Interval, mean, quantile, theilSen, theilSenBootstrap } from "./stats.ts";
import {
  finishSweep,
  type LevelData,
  runSweepSession,
  type SweepDeps,
  type SweepPlan,
  serverSamplesOf,
  type TargetOptions,
} from "./sweep-run.ts";
import { parseVariant, type VariantSpec } from "./variants.ts";

export type { SweepDeps, SweepProgress, TargetOptions } from "./sweep-run.ts";

export interface LengthSweepOptions extends TargetOptions {
  /** Output lengths (tokens). Default 16,32,64,128,256,512. */
  outLens?: number[];
  /** Measured requests per length. Default 5. */
  requestsPerLength?: number;
  randomInputLen?: number;
  /** Warm-up requests per length, excluded. Default 1. */
  warmup?: number;
  resamples?: number;
  level?: number;
}

export interface SweepPoint {
  outputLen: number;
  n: number;
  failed: number;
  e2elMs: { mean: number; ci: Interval };
  ttftMs: number;
  tpotMs: number;
  /** Output tokens ÷ E2E (the rate a client sees at this length). */
  tokPerS: number;
  /** Mean of (measured − fitted) E2E at this length. */
  meanResidualMs: number;
  /** Median of (measured − fitted) E2E at this length (robust to one slow request). */
  medianResidualMs: number;
}

export interface SweepFit {
  method: "theil-sen";
  formula: string;
  /** b: per-token decode cost (the rate long generations converge to is 1000/b tok/s). */
  perTokenMs: Interval;
  /** a: fixed cost per request (≈ TTFT). */
  fixedMs: Interval;
  convergedTokPerS: number;
  medianAbsResidualMs: number;
  maxAbsResidualMs: number;
  /** TPOT change per 1000 output tokens (context-length drift), Theil–Sen with bootstrap CI. */
  tpotDriftMsPer1k: Interval;
}

export interface SweepResult {
  kind: "sweep-lengths";
  runId: string;
  dbPath: string;
  status: "complete" | "partial";
  /** Continued from an earlier, interrupted session (or re-analysed) with --resume. */
  resumed: boolean;
  target: string;
  config: Record<string, unknown>;
  points: SweepPoint[];
  fit: SweepFit;
  residuals: Array<{ outputLen: number; outputTokens: number; e2elMs: number; fittedMs: number; residualMs: number }>;
  measuredTtftMs: number;
  warnings: string[];
}

export interface LoadSweepOptions extends TargetOptions {
  mode: "concurrency" | "rate";
  /** Concurrency levels (users) or request rates (req/s); on --resume the stored ones. */
  levels?: number[];
  /** Measured requests per level. Default max(20, 4 × level) for concurrency, 20 for rate. */
  numPrompts?: number;
  randomInputLen?: number;
  randomOutputLen?: number;
  warmup?: number;
  /** GPUs serving the target, for the frontier's tokens per second per GPU. Default 1. */
  gpus?: number;
  /** The running batch's ceiling (max-num-seqs) when the server command does not show it. */
  maxNumSeqs?: number;
  /** The step token budget (max-num-batched-tokens) when the server command does not show it. */
  maxNumBatchedTokens?: number;
}

export interface Percentiles {
  mean: number;
  p50: number;
  p90: number;
  p99: number;
}

export interface LoadPoint {
  level: number;
  n: number;
  failed: number;
  outputThroughput: number;
  requestThroughput: number;
  ttftMs: Percentiles;
  tpotMs: Percentiles;
  e2elMs: Percentiles;
  /** The binding limit(s) at this level, with their evidence (docs/metrics.md "Binding limit"). */
  diagnosis: LevelDiagnosis;
}

export interface LoadSweepResult {
  kind: "sweep-concurrency" | "sweep-rate";
  mode: "concurrency" | "rate";
  runId: string;
  dbPath: string;
  status: "complete" | "partial";
  /** Continued from an earlier, interrupted session (or re-analysed) with --resume. */
  resumed: boolean;
  target: string;
  config: Record<string, unknown>;
  /** Sorted by level: the throughput–latency curve. */
  points: LoadPoint[];
  /** The lowest level at which a limit binds, and the request rate completed there (the onset). */
  knee: SweepDiagnosis["knee"];
  /** The knee's relieving knobs as `inferscope tune`'s search space, and the command (null without a knee). */
  tune: TuneHandoff | null;
  /** Tokens/s per GPU against tokens/s per user, per level, with the Pareto-optimal points marked. */
  frontier: { gpus: number; points: FrontierPoint[] };
  /** Rate sweeps: TTFT p90 against the offered rate, per level, labelled with its limit; null for concurrency. */
  ttftRate?: { points: TtftRatePoint[] } | null;
  /** Set by finishSweep from the stored telemetry. */
  warnings?: string[];
}

function positiveInts(xs: number[], what: string): number[] {
  if (!xs.length) throw new UsageError(`${what}: give at least one value`);
  for (const x of xs) if (!(Number.isInteger(x) && x >= 1)) throw new UsageError(`${what}: ${x} is not an integer ≥ 1`);
  return [...new Set(xs)].sort((a, b) => a - b);
}

/** A sweep's stored configuration: the design a resumed run takes over. */
export interface LengthSweepConfig extends Record<string, unknown> {
  outLens: number[];
  requestsPerLength: number;
  randomInputLen: number;
  warmup: number;
  seed: number;
  url: string | null;
  serverCmd: string | null;
  variant: string | VariantSpec | null;
  model: string | null;
  resamples: number;
  level: number;
}

/** Options the caller set, as (config key, flag) pairs: what a resume checks against the stored run. */
function givenKeys<K extends string>(
  opts: object,
  pairs: Array<[K, string, string?]>,
): Array<{ key: K; flag: string }> {
  const o = opts as Record<string, unknown>;
  return pairs.filter(([k, , optName]) => o[optName ?? k] !== undefined).map(([key, flag]) => ({ key, flag }));
}

const TARGET_FLAGS: Array<[string, string]> = [
  ["randomInputLen", "--random-input-len"],
  ["warmup", "--warmup"],
  ["seed", "--seed"],
  ["url", "--url"],
  ["serverCmd", "--server-cmd"],
  ["variant", "--variant"],
  ["model", "--model"],
];

/** E2E against output length: Theil–Sen fit E2E = a + b·(n − 1), bootstrap CIs, residuals per request. */
export async function runLengthSweep(opts: LengthSweepOptions, deps: SweepDeps = {}): Promise<SweepResult> {
  // On resume the stored lengths apply; given ones are still checked, then compared with them.
  const outLens =
    opts.resume && opts.outLens === undefined ? [] : positiveInts(opts.outLens ?? [16, 32, 64, 128, 256, 512], "--out");
  if (!opts.resume || opts.outLens !== undefined) {
    if (outLens.length < 2) throw new UsageError("--out needs at least two output lengths to fit a line");
    if (outLens[0] < 2) throw new UsageError("--out lengths must be ≥ 2 tokens");
  }
  const perLen = opts.requestsPerLength ?? 5;
  if (!(Number.isInteger(perLen) && perLen >= 1))
    throw new UsageError(`--requests must be an integer ≥ 1, got ${perLen}`);
  const config: LengthSweepConfig = {
    outLens,
    requestsPerLength: perLen,
    randomInputLen: opts.randomInputLen ?? 32,
    warmup: opts.warmup ?? 1,
    seed: opts.seed ?? 0,
    url: opts.url ?? null,
    serverCmd: opts.serverCmd ?? null,
    variant: opts.variant ?? null,
    model: opts.model ?? null,
    resamples: opts.resamples ?? 1000,
    level: opts.level ?? 0.95,
  };
  const plan: SweepPlan<LengthSweepConfig> = {
    kind: "sweep-lengths",
    config,
    given: givenKeys<keyof LengthSweepConfig & string>(opts, [
      ["outLens", "--out"],
      ["requestsPerLength", "--requests"],
      ...(TARGET_FLAGS as Array<[keyof LengthSweepConfig & string, string]>),
      ["resamples", "resamples"],
      ["level", "level"],
    ]),
    levels: (c) => c.outLens,
    workload: (c, n) => ({
      numPrompts: c.requestsPerLength,
      randomInputLen: c.randomInputLen,
      randomOutputLen: n,
      concurrency: 1,
      warmup: c.warmup,
      seed: c.seed,
      model: c.model ?? undefined,
    }),
    label: (_c, n) => `out=${n}`,
    unit: "lengths",
  };
  const s = await runSweepSession(plan, ["sweep-lengths"], opts, deps);
  try {
    const c = s.config;
    const result = analyseLengthSweep(s.runId, s.store.path, s.target, c, s.results, {
      seed: c.seed,
      resamples: c.resamples,
      level: c.level,
      partial: s.interrupted !== null || s.results.size < s.total,
      resumed: s.resumed,
    });
    return finishSweep(s, result, "lengths");
  } finally {
    s.lock?.release();
    if (s.owned) s.store.close();
  }
}

/** Pure analysis of a length sweep's samples (exported for the report and tests). */
export function analyseLengthSweep(
  runId: string,
  dbPath: string,
  target: string,
  config: Record<string, unknown>,
  results: Map<number, { samples: BlockSample[] }>,
  o: { seed: number; resamples: number; level: number; partial: boolean; resumed?: boolean },
): SweepResult {
  const xs: number[] = [];
  const ys: number[] = [];
  const tags: number[] = [];
  const tpX: number[] = [];
  const tpY: number[] = [];
  const lens = [...results.keys()].sort((a, b) => a - b);
  for (const n of lens)
    for (const r of results.get(n)!.samples) {
      if (!r.ok || !(r.outputTokens >= 1) || !Number.isFinite(r.e2elMs)) continue;
      xs.push(r.outputTokens - 1);
      ys.push(r.e2elMs);
      tags.push(n);
      if (Number.isFinite(r.tpotMs)) {
        tpX.push(r.outputTokens);
        tpY.push(r.tpotMs);
      }
    }
  const warnings: string[] = [];
  const nan: Interval = { estimate: Number.NaN, lo: Number.NaN, hi: Number.NaN, level: o.level };
  let fit = { slope: Number.NaN, intercept: Number.NaN };
  let perTokenMs = nan;
  let fixedMs = nan;
  if (new Set(xs).size >= 2) {
    const f = theilSenBootstrap(xs, ys, { seed: o.seed + 17, resamples: o.resamples, level: o.level });
    fit = f.fit;
    perTokenMs = f.slope;
    fixedMs = f.intercept;
  } else warnings.push("fewer than two distinct output lengths completed: no fit");
  let drift = nan;
  if (new Set(tpX).size >= 2) {
    const d = theilSenBootstrap(tpX, tpY, { seed: o.seed + 29, resamples: Math.min(o.resamples, 500), level: o.level });
    drift = { estimate: d.slope.estimate * 1000, lo: d.slope.lo * 1000, hi: d.slope.hi * 1000, level: o.level };
    if (drift.lo > 0)
      warnings.push(
        `TPOT grows with output length (${drift.estimate.toFixed(3)} ms per 1000 tokens): decode cost depends on context, so b is an average over these lengths`,
      );
  }
  const residuals = xs.map((x, i) => {
    const fitted = fit.intercept + fit.slope * x;
    return { outputLen: tags[i], outputTokens: x + 1, e2elMs: ys[i], fittedMs: fitted, residualMs: ys[i] - fitted };
  });
  const absRes = residuals.map((r) => Math.abs(r.residualMs)).filter(Number.isFinite);
  const points: SweepPoint[] = lens.map((n, i) => {
    const ok = results.get(n)!.samples.filter((r) => r.ok);
    const e2e = ok.map((r) => r.e2elMs);
    const res = residuals.filter((r) => r.outputLen === n).map((r) => r.residualMs);
    return {
      outputLen: n,
      n: ok.length,
      failed: results.get(n)!.samples.length - ok.length,
      e2elMs: {
        mean: mean(e2e),
        ci: bootstrapCI(e2e, { seed: o.seed + 101 + i, resamples: o.resamples, level: o.level }),
      },
      ttftMs: mean(ok.map((r) => r.ttftMs)),
      tpotMs: mean(ok.map((r) => r.tpotMs).filter(Number.isFinite)),
      tokPerS: mean(ok.map((r) => (r.outputTokens * 1000) / r.e2elMs)),
      meanResidualMs: mean(res),
      medianResidualMs: res.length ? quantile(res, 0.5) : Number.NaN,
    };
  });
  const allOk = lens.flatMap((n) => results.get(n)!.samples.filter((r) => r.ok));
  for (const p of points)
    if (p.n && Math.abs(p.medianResidualMs) > Math.max(5 * (perTokenMs.estimate || 0), 0.05 * p.e2elMs.mean))
      warnings.push(
        `length ${p.outputLen}: median residual ${p.medianResidualMs.toFixed(1)} ms is large: E2E is not linear in length here`,
      );
  return {
    kind: "sweep-lengths",
    runId,
    dbPath,
    status: o.partial ? "partial" : "complete",
    resumed: o.resumed ?? false,
    target,
    config,
    points,
    fit: {
      method: "theil-sen",
      formula: "E2E(n) = a + b·(n − 1), n = output tokens (server usage)",
      perTokenMs,
      fixedMs,
      convergedTokPerS: 1000 / perTokenMs.estimate,
      medianAbsResidualMs: absRes.length ? quantile(absRes, 0.5) : Number.NaN,
      maxAbsResidualMs: absRes.length ? Math.max(...absRes) : Number.NaN,
      tpotDriftMsPer1k: drift,
    },
    residuals,
    measuredTtftMs: mean(allOk.map((r) => r.ttftMs)),
    warnings,
  };
}

// Re-exported so callers that only need the point estimate have it without the bootstrap.
export { theilSen };

export interface LoadSweepConfig extends Record<string, unknown> {
  mode: "concurrency" | "rate";
  levels: number[];
  numPrompts: number | null;
  randomInputLen: number;
  randomOutputLen: number;
  warmup: number;
  seed: number;
  url: string | null;
  serverCmd: string | null;
  variant: string | VariantSpec | null;
  model: string | null;
  gpus?: number;
  maxNumSeqs?: number | null;
  maxNumBatchedTokens?: number | null;
}

/** Throughput–latency curve over concurrency levels or request rates. */
export async function runLoadSweep(opts: LoadSweepOptions, deps: SweepDeps = {}): Promise<LoadSweepResult> {
  const mode = opts.mode;
  if (mode !== "concurrency" && mode !== "rate") throw new UsageError(`unknown sweep mode "${mode}"`);
  let levels: number[] = [];
  if (opts.levels === undefined) {
    if (!opts.resume)
      throw new UsageError(`sweep ${mode} needs --levels`, {
        hint: `example: --levels ${mode === "rate" ? "1,2,4" : "1,2,4,8"}, or --resume RUN_ID to continue a stored sweep`,
      });
  } else if (mode === "concurrency") levels = positiveInts(opts.levels, "--levels");
  else {
    if (!opts.levels.length) throw new UsageError("--levels: give at least one value");
    for (const r of opts.levels) if (!(r > 0)) throw new UsageError(`--levels: ${r} is not a request rate > 0`);
    levels = [...new Set(opts.levels)].sort((a, b) => a - b);
  }
  const config: LoadSweepConfig = {
    mode,
    levels,
    numPrompts: opts.numPrompts ?? null,
    randomInputLen: opts.randomInputLen ?? 32,
    randomOutputLen: opts.randomOutputLen ?? 64,
    warmup: opts.warmup ?? 1,
    seed: opts.seed ?? 0,
    url: opts.url ?? null,
    serverCmd: opts.serverCmd ?? null,
    variant: opts.variant ?? null,
    model: opts.model ?? null,
    gpus: opts.gpus ?? 1,
    maxNumSeqs: opts.maxNumSeqs ?? null,
    maxNumBatchedTokens: opts.maxNumBatchedTokens ?? null,
  };
  if (!(Number.isInteger(config.gpus) && config.gpus! >= 1))
    throw new UsageError(`--gpus: ${config.gpus} is not an integer ≥ 1`);
  const kind = mode === "rate" ? "sweep-rate" : "sweep-concurrency";
  const plan: SweepPlan<LoadSweepConfig> = {
    kind,
    config,
    given: givenKeys<keyof LoadSweepConfig & string>(opts, [
      ["levels", "--levels"],
      ["numPrompts", "--num-prompts"],
      ["randomOutputLen", "--random-output-len"],
      ["gpus", "--gpus"],
      ["maxNumSeqs", "--max-num-seqs"],
      ["maxNumBatchedTokens", "--max-num-batched-tokens"],
      ...(TARGET_FLAGS as Array<[keyof LoadSweepConfig & string, string]>),
    ]),
    levels: (c) => c.levels,
    workload: (c, level) => ({
      numPrompts: c.numPrompts ?? (c.mode === "concurrency" ? Math.max(20, 4 * level) : 20),
      randomInputLen: c.randomInputLen,
      randomOutputLen: c.randomOutputLen,
      ...(c.mode === "concurrency" ? { concurrency: level } : { requestRate: level }),
      warmup: c.warmup,
      seed: c.seed,
      model: c.model ?? undefined,
    }),
    label: (c, level) => (c.mode === "rate" ? `rate=${level}` : `c=${level}`),
    unit: "levels",
  };
  // The stored kind decides the mode; asking for the other one is refused with the right command.
  const s = await runSweepSession(plan, [kind], opts, deps);
  try {
    // Per level, the share of the window the GPU ran power-capped and its busy share (telemetry), for the diagnosis.
    const capped = new Map<string, number>();
    const busy = new Map<string, number>();
    for (const v of variantTelemetry(s.store, s.runId, s.store.getRun(s.runId).blocks)) {
      if (v.powerCappedBlocks > 0) capped.set(v.variant, v.limitedShare);
      if (v.gpuBusy !== null) busy.set(v.variant, v.gpuBusy);
    }
    const result = analyseLoadSweep(s.runId, s.store.path, s.target, s.config, s.results, {
      partial: s.interrupted !== null || s.results.size < s.total,
      resumed: s.resumed,
      powerCappedShare: (level) => capped.get(plan.label(s.config, level)) ?? null,
      gpuBusy: (level) => busy.get(plan.label(s.config, level)) ?? null,
    });
    return finishSweep(s, result, "levels");
  } finally {
    s.lock?.release();
    if (s.owned) s.store.close();
  }
}

function quantileOrNull(xs: number[]): number | null {
  const ok = xs.filter(Number.isFinite);
  return ok.length ? quantile(ok, 0.5) : null;
}

const limitOf = (p: LoadPoint) => p.diagnosis.binding.map((b) => b.limit).join("+") || null;

/** A rate sweep's TTFT p90 against the offered rate (null for a concurrency sweep); also rebuilds it for runs stored without it. */
export function ttftRateOf(
  mode: "concurrency" | "rate",
  points: readonly LoadPoint[],
): { points: TtftRatePoint[] } | null {
  if (mode !== "rate") return null;
  return {
    points: ttftRatePoints(
      points.map((p) => ({
        level: p.level,
        ttftP90Ms: p.ttftMs.p90,
        completedRate: p.requestThroughput,
        limit: limitOf(p),
      })),
    ),
  };
}

/** Pure analysis of a concurrency or rate sweep: percentiles per level, sorted by level. */
export function analyseLoadSweep(
  runId: string,
  dbPath: string,
  target: string,
  config: LoadSweepConfig,
  results: Map<number, LevelData>,
  o: {
    partial: boolean;
    resumed?: boolean;
    powerCappedShare?: (level: number) => number | null;
    gpuBusy?: (level: number) => number | null;
  },
): LoadSweepResult {
  const pct = (xs: number[]): Percentiles =>
    xs.length
      ? { mean: mean(xs), p50: quantile(xs, 0.5), p90: quantile(xs, 0.9), p99: quantile(xs, 0.99) }
      : { mean: Number.NaN, p50: Number.NaN, p90: Number.NaN, p99: Number.NaN };
  const sorted = [...results.entries()].sort((a, b) => a[0] - b[0]);
  const evidence: LevelEvidence[] = sorted.map(([level, r]) => ({
    level,
    mode: config.mode,
    engine: r.server?.engine ?? null,
    samples: r.server ? serverSamplesOf(r.server) : [],
    requestThroughput: r.achieved?.rate ?? r.requestThroughput,
    achievedRatio: r.achieved?.ratio ?? null,
    client: r.client ?? null,
    powerCappedShare: o.powerCappedShare?.(level) ?? null,
    // A decode step of the level's running batch: the client's TPOT p50.
    stepMs: quantileOrNull(r.samples.filter((x) => x.ok).map((x) => x.tpotMs)),
    gpuBusy: o.gpuBusy?.(level) ?? null,
  }));
  const v = config.variant;
  const variantArgs = v ? (typeof v === "string" ? parseVariant(v) : v).args.join(" ") : "";
  const cmd = `${config.serverCmd ?? ""} ${variantArgs}`;
  const diag = diagnoseSweep(evidence, {
    maxNumSeqs: config.maxNumSeqs ?? batchCeilingFromCommand(cmd),
    serverMaxNumSeqs: sorted.find(([, r]) => r.server?.ceiling)?.[1].server?.ceiling ?? null,
    maxNumBatchedTokens: config.maxNumBatchedTokens ?? tokenBudgetFromCommand(cmd),
  });
  const points: LoadPoint[] = sorted.map(([level, r], i) => {
    const ok = r.samples.filter((x) => x.ok);
    return {
      level,
      n: ok.length,
      failed: r.samples.length - ok.length,
      outputThroughput: r.outputThroughput,
      requestThroughput: r.requestThroughput,
      ttftMs: pct(ok.map((x) => x.ttftMs)),
      tpotMs: pct(ok.map((x) => x.tpotMs).filter(Number.isFinite)),
      e2elMs: pct(ok.map((x) => x.e2elMs)),
      diagnosis: diag.levels[i]!,
    };
  });
  const gpus = config.gpus ?? 1;
  return {
    kind: config.mode === "rate" ? "sweep-rate" : "sweep-concurrency",
    mode: config.mode,
    runId,
    dbPath,
    status: o.partial ? "partial" : "complete",
    resumed: o.resumed ?? false,
    target,
    config,
    points,
    knee: diag.knee,
    tune: diag.knee
      ? tuneHandoff({
          engine: evidence.find((e) => e.engine)?.engine ?? null,
          limits: diag.knee.limits,
          serverCmd: config.serverCmd ? cmd.trim() : null,
          ceiling: diag.levels.find((l) => l.level === diag.knee!.level)?.server.ceiling ?? null,
          tokenBudget: config.maxNumBatchedTokens ?? tokenBudgetFromCommand(cmd),
        })
      : null,
    frontier: {
      gpus,
      points: frontierPoints(
        points.map((p) => ({
          level: p.level,
          outputThroughput: p.outputThroughput,
          tpotP50Ms: p.tpotMs.p50,
          limit: limitOf(p),
        })),
        gpus,
      ),
    },
    ttftRate: ttftRateOf(config.mode, points),
  };
}
