// Sweeps against one server: output length (robust fit of E2E against output length → per-token
// decode cost and fixed cost), and concurrency or request rate (throughput–latency curve). One
// server start for the whole sweep; levels run in a seeded random order so drift does not line up
// with the swept variable; every level is stored as a block as soon as it finishes.
import { homedir } from "node:os";
import { join } from "node:path";
import { InterruptedError, UsageError } from "../errors.ts";
import { collectEnvironment, openStore, type Store } from "../store/index.ts";
import {
  type BlockRunner,
  type BlockSample,
  benchBlockRunner,
  runWatchedBlock,
  toStored,
  type Workload,
} from "./blocks.ts";
import { shuffle } from "./design.ts";
import { bootstrapCI, type Interval, makeRng, mean, quantile, theilSen, theilSenBootstrap } from "./stats.ts";
import { parseVariant, type ServerHandle, startServer, type VariantSpec } from "./variants.ts";

export interface TargetOptions {
  /** A running server. */
  url?: string;
  /** Or a command to start one (`{port}`, $PORT), stopped at the end. */
  serverCmd?: string;
  /** Env/flags for the started server, in variant syntax (`name:ENV=V --flag`). */
  variant?: string | VariantSpec;
  model?: string;
  apiKey?: string;
  db?: string | Store;
  seed?: number;
  readyTimeoutMs?: number;
  graceMs?: number;
  logDir?: string;
  cwd?: string;
  signal?: AbortSignal;
  onProgress?: (e: { phase: string; message: string; done: number; total: number }) => void;
}

export interface SweepDeps {
  blockRunner?: BlockRunner;
  startServer?: typeof startServer;
}

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
  /** Concurrency levels (users) or request rates (req/s). */
  levels: number[];
  /** Measured requests per level. Default max(20, 4 × level) for concurrency, 20 for rate. */
  numPrompts?: number;
  randomInputLen?: number;
  randomOutputLen?: number;
  warmup?: number;
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
}

export interface LoadSweepResult {
  kind: "sweep-concurrency" | "sweep-rate";
  mode: "concurrency" | "rate";
  runId: string;
  dbPath: string;
  status: "complete" | "partial";
  target: string;
  config: Record<string, unknown>;
  /** Sorted by level: the throughput–latency curve. */
  points: LoadPoint[];
}

interface Target {
  baseUrl: string;
  server: ServerHandle | null;
  describe: string;
}

async function openTarget(opts: TargetOptions, deps: SweepDeps, name: string, logDir: string): Promise<Target> {
  if (opts.url && opts.serverCmd) throw new UsageError("give --url or --server-cmd, not both");
  if (opts.url) return { baseUrl: opts.url.replace(/\/+$/, ""), server: null, describe: opts.url };
  if (!opts.serverCmd) throw new UsageError("a sweep needs --url URL or --server-cmd CMD");
  const v: VariantSpec =
    typeof opts.variant === "string" ? parseVariant(opts.variant) : (opts.variant ?? { name, env: {}, args: [] });
  const server = await (deps.startServer ?? startServer)({
    name: v.name,
    cmd: opts.serverCmd,
    env: v.env,
    args: v.args,
    logFile: join(logDir, `${v.name}.log`),
    readyTimeoutMs: opts.readyTimeoutMs,
    graceMs: opts.graceMs,
    apiKey: opts.apiKey,
    cwd: opts.cwd,
    signal: opts.signal,
  });
  return { baseUrl: server.url, server, describe: server.command };
}

function storeFrom(db: string | Store | undefined): { store: Store; owned: boolean } {
  if (db && typeof db === "object") return { store: db, owned: false };
  return { store: openStore(db), owned: true };
}

function positiveInts(xs: number[], what: string): number[] {
  if (!xs.length) throw new UsageError(`${what}: give at least one value`);
  for (const x of xs) if (!(Number.isInteger(x) && x >= 1)) throw new UsageError(`${what}: ${x} is not an integer ≥ 1`);
  return [...new Set(xs)].sort((a, b) => a - b);
}

/**
 * Runs the workload at each level in a seeded random order against one server, storing each level
 * as a block. Returns the samples per level; stops (and marks the run partial) on interrupt.
 */
/** Saves the summary and closes the run: partial (and rethrown as an interrupt) or complete. */
function finishSweep<T>(s: Awaited<ReturnType<typeof sweepLevels>>, result: T, done: string): T {
  s.store.setSummary(s.runId, "sweep", result);
  if (s.interrupted) {
    s.store.finishRun(s.runId, "partial", s.interrupted.message);
    throw new InterruptedError(`${s.interrupted.message}; ${done} saved in run ${s.runId}`);
  }
  s.store.finishRun(s.runId, "complete");
  return result;
}

async function sweepLevels(
  kind: string,
  opts: TargetOptions,
  deps: SweepDeps,
  levels: number[],
  workloadFor: (level: number) => Workload,
  labelFor: (level: number) => string,
  config: Record<string, unknown>,
): Promise<{
  store: Store;
  owned: boolean;
  runId: string;
  target: string;
  results: Map<number, { samples: BlockSample[]; outputThroughput: number; requestThroughput: number }>;
  interrupted: Error | null;
}> {
  if (opts.url && opts.serverCmd) throw new UsageError("give --url or --server-cmd, not both");
  if (!opts.url && !opts.serverCmd) throw new UsageError("a sweep needs --url URL or --server-cmd CMD");
  const { store, owned } = storeFrom(opts.db);
  const runId = store.saveRun({ kind, config, environment: collectEnvironment() }).id;
  const logDir = opts.logDir ?? join(homedir(), ".inferscope", "logs", runId);
  const runner = deps.blockRunner ?? benchBlockRunner;
  const order = shuffle(levels, makeRng(opts.seed ?? 0));
  const results = new Map<number, { samples: BlockSample[]; outputThroughput: number; requestThroughput: number }>();
  let interrupted: Error | null = null;
  let target: Target | null = null;
  try {
    target = await openTarget(opts, deps, kind, logDir);
    for (const [i, level] of order.entries()) {
      if (opts.signal?.aborted) throw opts.signal.reason;
      const label = labelFor(level);
      opts.onProgress?.({
        phase: "level",
        message: `${label} (${i + 1}/${order.length})`,
        done: i,
        total: order.length,
      });
      const blockId = store.addBlock(runId, {
        index: i,
        variant: label,
        server: target.server?.describe() ?? { url: target.baseUrl },
      });
      try {
        const res = await runWatchedBlock(runner, target.baseUrl, workloadFor(level), {
          variant: target.server?.name ?? label,
          blockIndex: i,
          signal: opts.signal,
          server: target.server,
        });
        store.addRequests(runId, blockId, res.requests.map(toStored));
        const ok = res.requests.filter((r) => r.ok);
        store.updateBlock(blockId, {
          status: "complete",
          finishedAt: new Date().toISOString(),
          summary: {
            level,
            requests: res.requests.length,
            failedRequests: res.requests.length - ok.length,
            outputThroughput: res.outputThroughput,
            requestThroughput: res.requestThroughput,
            meanE2elMs: mean(ok.map((r) => r.e2elMs)),
          },
        });
        results.set(level, {
          samples: res.requests,
          outputThroughput: res.outputThroughput,
          requestThroughput: res.requestThroughput,
        });
      } catch (err) {
        store.updateBlock(blockId, {
          status: "failed",
          finishedAt: new Date().toISOString(),
          error: (err as Error).message,
        });
        throw err;
      }
    }
  } catch (err) {
    const e = err instanceof Error ? err : new Error(String(err));
    if (e instanceof InterruptedError || opts.signal?.aborted)
      interrupted = e instanceof InterruptedError ? e : new InterruptedError();
    else {
      store.finishRun(runId, results.size ? "partial" : "failed", e.message);
      if (owned) store.close();
      throw e;
    }
  } finally {
    if (target?.server) await target.server.stop();
  }
  return { store, owned, runId, target: target?.describe ?? opts.url ?? opts.serverCmd ?? "", results, interrupted };
}

/** E2E against output length: Theil–Sen fit E2E = a + b·(n − 1), bootstrap CIs, residuals per request. */
export async function runLengthSweep(opts: LengthSweepOptions, deps: SweepDeps = {}): Promise<SweepResult> {
  const outLens = positiveInts(opts.outLens ?? [16, 32, 64, 128, 256, 512], "--out");
  if (outLens.length < 2) throw new UsageError("--out needs at least two output lengths to fit a line");
  if (outLens[0] < 2) throw new UsageError("--out lengths must be ≥ 2 tokens");
  const perLen = opts.requestsPerLength ?? 5;
  if (!(Number.isInteger(perLen) && perLen >= 1))
    throw new UsageError(`--requests must be an integer ≥ 1, got ${perLen}`);
  const seed = opts.seed ?? 0;
  const config = {
    outLens,
    requestsPerLength: perLen,
    randomInputLen: opts.randomInputLen ?? 32,
    warmup: opts.warmup ?? 1,
    seed,
    url: opts.url ?? null,
    serverCmd: opts.serverCmd ?? null,
    variant: opts.variant ?? null,
    model: opts.model ?? null,
  };
  const s = await sweepLevels(
    "sweep-lengths",
    opts,
    deps,
    outLens,
    (n) => ({
      numPrompts: perLen,
      randomInputLen: config.randomInputLen,
      randomOutputLen: n,
      concurrency: 1,
      warmup: config.warmup,
      seed,
      model: opts.model,
      apiKey: opts.apiKey,
    }),
    (n) => `out=${n}`,
    config,
  );
  try {
    const result = analyseLengthSweep(s.runId, s.store.path, s.target, config, s.results, {
      seed,
      resamples: opts.resamples ?? 1000,
      level: opts.level ?? 0.95,
      partial: s.interrupted !== null,
    });
    return finishSweep(s, result, `${s.results.size} of ${outLens.length} lengths`);
  } finally {
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
  o: { seed: number; resamples: number; level: number; partial: boolean },
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

/** Throughput–latency curve over concurrency levels or request rates. */
export async function runLoadSweep(opts: LoadSweepOptions, deps: SweepDeps = {}): Promise<LoadSweepResult> {
  const mode = opts.mode;
  if (mode !== "concurrency" && mode !== "rate") throw new UsageError(`unknown sweep mode "${mode}"`);
  const levels =
    mode === "concurrency"
      ? positiveInts(opts.levels, "--levels")
      : (() => {
          if (!opts.levels.length) throw new UsageError("--rates: give at least one value");
          for (const r of opts.levels) if (!(r > 0)) throw new UsageError(`--rates: ${r} is not > 0`);
          return [...new Set(opts.levels)].sort((a, b) => a - b);
        })();
  const seed = opts.seed ?? 0;
  const config = {
    mode,
    levels,
    numPrompts: opts.numPrompts ?? null,
    randomInputLen: opts.randomInputLen ?? 32,
    randomOutputLen: opts.randomOutputLen ?? 64,
    warmup: opts.warmup ?? 1,
    seed,
    url: opts.url ?? null,
    serverCmd: opts.serverCmd ?? null,
    variant: opts.variant ?? null,
    model: opts.model ?? null,
  };
  const kind = mode === "rate" ? "sweep-rate" : "sweep-concurrency";
  const s = await sweepLevels(
    kind,
    opts,
    deps,
    levels,
    (level) => ({
      numPrompts: opts.numPrompts ?? (mode === "concurrency" ? Math.max(20, 4 * level) : 20),
      randomInputLen: config.randomInputLen,
      randomOutputLen: config.randomOutputLen,
      ...(mode === "concurrency" ? { concurrency: level } : { requestRate: level }),
      warmup: config.warmup,
      seed,
      model: opts.model,
      apiKey: opts.apiKey,
    }),
    (level) => (mode === "rate" ? `rate=${level}` : `c=${level}`),
    config,
  );
  try {
    const pct = (xs: number[]): Percentiles =>
      xs.length
        ? { mean: mean(xs), p50: quantile(xs, 0.5), p90: quantile(xs, 0.9), p99: quantile(xs, 0.99) }
        : { mean: Number.NaN, p50: Number.NaN, p90: Number.NaN, p99: Number.NaN };
    const points: LoadPoint[] = [...s.results.entries()]
      .sort((a, b) => a[0] - b[0])
      .map(([level, r]) => {
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
        };
      });
    const result: LoadSweepResult = {
      kind,
      mode,
      runId: s.runId,
      dbPath: s.store.path,
      status: s.interrupted ? "partial" : "complete",
      target: s.target,
      config,
      points,
    };
    return finishSweep(s, result, `${s.results.size} of ${levels.length} levels`);
  } finally {
    if (s.owned) s.store.close();
  }
}
