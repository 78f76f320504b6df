// A/B experiments with server restarts: each block starts the variant's server (or uses its URL),
// runs the workload, stops the server; blocks follow a seeded balanced ABBA order; every block is
// written to the run store as it finishes, so a killed run keeps its data and --resume continues it.

import { homedir } from "node:os";
import { join } from "node:path";
import { InterruptedError, TargetError, UsageError } from "../errors.ts";
import { claimRun, type HeldLock } from "../output-file.ts";
import { type SecretSeal, sealCommand } from "../secrets.ts";
import { collectEnvironment, openStore, type Store } from "../store/index.ts";
import { type Attribution, attributePerOp } from "./attribute.ts";
import {
  type BlockResult,
  type BlockRunner,
  type BlockSample,
  benchBlockRunner,
  cappedFinding,
  DEFAULT_WORKLOAD,
  fromStored,
  runWatchedBlock,
  storeBlockTelemetry,
  toStored,
  type VariantTelemetry,
  variantTelemetry,
  type Workload,
} from "./blocks.ts";
import { type PlannedBlock, planBlocks } from "./design.ts";
import { sealTarget, unsealTarget } from "./sealed.ts";
import {
  bootstrapCI,
  type Comparison,
  compareSamples,
  type Interval,
  mean,
  median,
  sd,
  type WelchResult,
  welchT,
} from "./stats.ts";
import { resumeConflicts } from "./sweep-run.ts";
import {
  describeVariant,
  parseVariant,
  type ServerHandle,
  setInterruptNote,
  startServer,
  type VariantSpec,
} from "./variants.ts";

export interface ABOptions {
  /** Server command for variants that are not URLs; `{port}` is filled in and $PORT set. */
  serverCmd?: string;
  /** Variant specs (`name:ENV=V --flag`, `name=http://…`) or parsed ones. The first is the baseline. */
  variants?: Array<string | VariantSpec>;
  /** Rounds: each round runs every variant once (ABBA…). Default 2. */
  repeats?: number;
  workload?: Partial<Workload>;
  /** Operations per token (e.g. 156 all-reduces) → per-operation cost of each difference. */
  opsPerToken?: number;
  /** What one operation is called in the attribution. Default "all-reduce". */
  opName?: string;
  /** Seeds the block order and the bootstrap. Default: the workload seed. */
  seed?: number;
  /** Run store path, or an open store. Default ~/.inferscope/runs.db. */
  db?: string | Store;
  /** Continue this run: its configuration is taken from the store; finished blocks are kept. */
  resume?: string;
  /** Bootstrap resamples (default 2000) and confidence level (default 0.95). */
  resamples?: number;
  level?: number;
  readyTimeoutMs?: number;
  graceMs?: number;
  /** Server logs go here (one file per block). Default ~/.inferscope/logs/<run id>/. */
  logDir?: string;
  cwd?: string;
  apiKey?: string;
  signal?: AbortSignal;
  onProgress?: (e: ABProgress) => void;
}

export interface ABDeps {
  /** The workload engine; default runBench. */
  blockRunner?: BlockRunner;
  startServer?: typeof startServer;
}

export interface ABProgress {
  phase: "start" | "server" | "block" | "block-done" | "block-failed" | "analysis";
  runId: string;
  blockIndex?: number;
  totalBlocks: number;
  variant?: string;
  message: string;
}

export type MetricName = "tpot_ms" | "ttft_ms" | "e2el_ms" | "output_tok_s";

export const METRICS: Record<MetricName, { label: string; unit: string; lowerIsBetter: boolean; define: string }> = {
  tpot_ms: {
    label: "per-token decode time",
    unit: "ms/token",
    lowerIsBetter: true,
    define: "TPOT per request, (E2EL − TTFT)/(n − 1) (vLLM)",
  },
  ttft_ms: { label: "TTFT", unit: "ms", lowerIsBetter: true, define: "first chunk with choices − send (vLLM)" },
  e2el_ms: { label: "E2E latency", unit: "ms", lowerIsBetter: true, define: "last chunk with choices − send (vLLM)" },
  output_tok_s: {
    label: "throughput per request",
    unit: "tok/s",
    lowerIsBetter: false,
    define: "output tokens ÷ E2EL per request",
  },
};

export interface MetricSummary {
  n: number;
  mean: number;
  median: number;
  sd: number;
  /** Bootstrap CI of the mean. */
  ci: Interval;
}

export interface VariantStats {
  name: string;
  description: string;
  url: string | null;
  env: Record<string, string>;
  args: string[];
  blocks: number;
  requests: number;
  failedRequests: number;
  metrics: Record<MetricName, MetricSummary>;
  /** Output tokens/s of each block's measured phase (closed-loop aggregate throughput). */
  blockThroughput: number[];
  /** Mean TPOT per block: a drift or restart-to-restart spread shows here. */
  blockTpotMs: number[];
}

export interface VariantDiff {
  baseline: string;
  variant: string;
  metric: MetricName;
  unit: string;
  /** a = baseline, b = variant; diff = mean(baseline) − mean(variant) with bootstrap CI. */
  comparison: Comparison;
  /** Positive = the variant is better (faster or higher throughput). */
  improvement: Interval;
  /** Welch's t on per-block means (each server start one observation); null below 2 blocks per arm. */
  blockLevel: WelchResult | null;
  verdict: string;
}

export interface ABBlock {
  index: number;
  round: number;
  variant: string;
  status: "complete" | "failed" | "skipped" | "pending";
  requests: number;
  failedRequests: number;
  meanTpotMs: number | null;
  outputThroughput: number | null;
  server: Record<string, unknown> | null;
  error: string | null;
}

export interface ABResult {
  kind: "ab";
  runId: string;
  dbPath: string;
  status: "complete" | "partial";
  baseline: string;
  config: ABConfig;
  blocks: ABBlock[];
  variants: VariantStats[];
  diffs: VariantDiff[];
  /** One plain sentence per non-baseline variant, on per-token decode time. */
  verdicts: string[];
  attribution: Array<{ variant: string } & Attribution>;
  errors: Array<{ variant: string; block: number; message: string }>;
  /** Caveats on the statistics (restart-to-restart spread, failed requests …). */
  warnings: string[];
  /** Per variant, from the hardware's counters over the blocks' windows (empty without --telemetry). */
  telemetry: VariantTelemetry[];
  method: string;
}

export interface ABConfig {
  serverCmd: string | null;
  variants: VariantSpec[];
  repeats: number;
  workload: Workload;
  seed: number;
  opsPerToken: number | null;
  opName: string;
  resamples: number;
  level: number;
  design: PlannedBlock[];
  /** Keyed hashes of the secrets in serverCmd and variants (stored sealed); a resume checks the ones given again. */
  sealed?: SecretSeal | null;
}

/** Validates and normalizes options into the configuration that is stored with the run. */
export function resolveABConfig(opts: ABOptions): ABConfig {
  const variants = (opts.variants ?? []).map((v) => (typeof v === "string" ? parseVariant(v) : v));
  if (variants.length < 2)
    throw new UsageError("an A/B experiment needs at least two --variant", {
      hint: "example: --variant base: --variant ll:NCCL_PROTO=LL",
    });
  const names = new Set<string>();
  for (const v of variants) {
    if (names.has(v.name)) throw new UsageError(`variant name "${v.name}" is used twice`);
    names.add(v.name);
  }
  const needsCmd = variants.filter((v) => !v.url);
  if (needsCmd.length && !opts.serverCmd)
    throw new UsageError(`variant "${needsCmd[0].name}" has no URL, so --server-cmd is required`, {
      hint: "give --server-cmd 'vllm serve MODEL --port {port}', or name=http://host:port variants",
    });
  const repeats = opts.repeats ?? 2;
  if (!(Number.isInteger(repeats) && repeats >= 1))
    throw new UsageError(`--repeats must be an integer ≥ 1, got ${repeats}`);
  const workload: Workload = { ...DEFAULT_WORKLOAD, ...stripUndefined(opts.workload ?? {}) };
  if (workload.requestRate !== undefined) delete workload.concurrency;
  for (const k of ["numPrompts", "randomInputLen", "randomOutputLen"] as const)
    if (!(Number.isInteger(workload[k]) && workload[k] >= 1))
      throw new UsageError(`${flagName(k)} must be an integer ≥ 1, got ${workload[k]}`);
  if (workload.randomOutputLen < 2)
    throw new UsageError("--random-output-len must be ≥ 2: per-token decode time needs two tokens");
  if (opts.opsPerToken !== undefined && !(opts.opsPerToken > 0))
    throw new UsageError(`--ops-per-token must be > 0, got ${opts.opsPerToken}`);
  if (opts.resamples !== undefined && !(Number.isInteger(opts.resamples) && opts.resamples >= 10))
    throw new UsageError(`--resamples must be an integer ≥ 10 (a bootstrap needs resamples), got ${opts.resamples}`);
  const seed = opts.seed ?? workload.seed;
  // The key never goes into the stored config; it is passed to the runner separately.
  const { apiKey: _k, ...storedWorkload } = workload;
  return {
    serverCmd: opts.serverCmd ?? null,
    variants,
    repeats,
    workload: storedWorkload,
    seed,
    opsPerToken: opts.opsPerToken ?? null,
    opName: opts.opName ?? "all-reduce",
    resamples: opts.resamples ?? 2000,
    level: opts.level ?? 0.95,
    design: planBlocks(
      variants.map((v) => v.name),
      repeats,
      seed,
    ),
  };
}

// Workload keys that define the experiment (a stall timeout or an API key may change between sessions).
const WORKLOAD_KEYS = [
  "numPrompts",
  "randomInputLen",
  "randomOutputLen",
  "concurrency",
  "requestRate",
  "warmup",
  "seed",
  "model",
] as const;

/** Options given with --resume that contradict the stored run, one phrase each (as `sweep` refuses them). */
export function abResumeConflicts(opts: ABOptions, stored: ABConfig): string[] {
  const given: Array<{ key: string; flag: string }> = [];
  const fresh: Record<string, unknown> = {};
  const old: Record<string, unknown> = {};
  const w = opts.workload ?? {};
  for (const k of WORKLOAD_KEYS)
    if (w[k] !== undefined) {
      given.push({ key: k, flag: flagName(k) });
      fresh[k] = w[k];
      old[k] = (stored.workload as Partial<Workload>)[k];
    }
  const top: Array<[keyof ABOptions & keyof ABConfig, string]> = [
    ["serverCmd", "--server-cmd"],
    ["repeats", "--repeats"],
    ["opsPerToken", "--ops-per-token"],
    ["opName", "--op-name"],
    ["resamples", "--resamples"],
  ];
  for (const [k, flag] of top)
    if (opts[k] !== undefined) {
      given.push({ key: k, flag });
      // A command is compared as stored: its secrets as placeholders (their hashes are checked later).
      fresh[k] = k === "serverCmd" ? sealCommand(opts.serverCmd!).shown : opts[k];
      old[k] = stored[k];
    }
  if (opts.variants?.length) {
    given.push({ key: "variants", flag: "--variant" });
    fresh.variants = opts.variants.map((v) => describeVariant(typeof v === "string" ? parseVariant(v) : v)).join(" ");
    old.variants = stored.variants.map(describeVariant).join(" ");
  }
  return resumeConflicts(given, fresh, old);
}

function flagName(k: string): string {
  return `--${k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

export function openStoreFrom(db: string | Store | undefined): { store: Store; owned: boolean } {
  if (db && typeof db === "object") return { store: db, owned: false };
  return { store: openStore(db), owned: true };
}

/** Runs (or resumes) an A/B experiment and returns its analysis. Partial data is always stored. */
export async function runAB(opts: ABOptions, deps: ABDeps = {}): Promise<ABResult> {
  const { store, owned } = openStoreFrom(opts.db);
  const locks: HeldLock[] = [];
  try {
    return await runABWithStore(opts, deps, store, locks);
  } finally {
    for (const l of locks) l.release();
    if (owned) store.close();
  }
}

async function runABWithStore(opts: ABOptions, deps: ABDeps, store: Store, locks: HeldLock[]): Promise<ABResult> {
  const runner = deps.blockRunner ?? benchBlockRunner;
  const start = deps.startServer ?? startServer;
  const apiKey = opts.apiKey ?? opts.workload?.apiKey ?? process.env.OPENAI_API_KEY;

  let config: ABConfig;
  let runId: string;
  const done = new Set<number>();
  const failedVariants = new Set<string>();
  // The first failure's hint per variant ("the server wants a key (--api-key …)"), for the final error.
  const hints = new Map<string, string>();
  if (opts.resume) {
    // One writer per run: locked before its blocks are read, so a second resume is refused, not run twice.
    locks.push(claimRun(store.path, store.getRun(opts.resume).run.id));
    const prev = store.getRun(opts.resume);
    if (prev.run.kind !== "ab") throw new UsageError(`run ${prev.run.id} is a ${prev.run.kind} run, not an A/B run`);
    if (prev.run.status === "complete") throw new UsageError(`run ${prev.run.id} is already complete`);
    config = prev.run.config as unknown as ABConfig;
    const conflicts = abResumeConflicts(opts, config);
    if (conflicts.length)
      throw new UsageError(`--resume ${prev.run.id}: options differ from the stored run: ${conflicts.join("; ")}`, {
        hint: "leave those options out (the run's own are used), or start a new A/B run without --resume",
      });
    runId = prev.run.id;
    // The stored target has placeholders for its secrets: take them again (same flags or the environment).
    const target = unsealTarget(
      runId,
      { serverCmd: config.serverCmd, variants: config.variants, sealed: config.sealed ?? null },
      {
        serverCmd: opts.serverCmd,
        variants: opts.variants?.map((v) => (typeof v === "string" ? parseVariant(v) : v)),
      },
    );
    config = { ...config, ...target };
    for (const b of prev.blocks) {
      if (b.status === "complete") done.add(b.index);
      // Unfinished blocks are rerun from scratch; their partial requests stay in the store, marked.
      else if (b.status === "running" || b.status === "failed") store.updateBlock(b.id, { status: "discarded" });
    }
    store.updateRun(runId, { status: "running", finishedAt: null, error: null });
  } else {
    config = resolveABConfig(opts);
    // Stored without its secrets: placeholders and keyed hashes.
    const sealed = sealTarget(config.serverCmd, config.variants);
    runId = store.saveRun({
      kind: "ab",
      config: { ...config, ...sealed } as unknown as Record<string, unknown>,
      environment: collectEnvironment(),
    }).id;
    locks.push(claimRun(store.path, runId));
  }

  setInterruptNote(`finished blocks are saved in run ${runId} (${store.path}); continue with --resume ${runId}`);
  const logDir = opts.logDir ?? join(homedir(), ".inferscope", "logs", runId);
  const total = config.design.length;
  const progress = (e: Omit<ABProgress, "runId" | "totalBlocks">) =>
    opts.onProgress?.({ ...e, runId, totalBlocks: total });
  progress({ phase: "start", message: `run ${runId}: ${total} blocks, ${done.size} already done` });
  const errors: ABResult["errors"] = [];
  const workload: Workload = { ...config.workload, apiKey };
  const byName = new Map(config.variants.map((v) => [v.name, v]));

  let interrupted: Error | null = null;
  for (const planned of config.design) {
    if (done.has(planned.index)) continue;
    if (opts.signal?.aborted) {
      interrupted = asError(opts.signal.reason);
      break;
    }
    const v = byName.get(planned.variant)!;
    if (failedVariants.has(v.name)) {
      errors.push({ variant: v.name, block: planned.index, message: `skipped: variant "${v.name}" failed earlier` });
      continue;
    }
    const blockId = store.addBlock(runId, { index: planned.index, variant: v.name });
    let server: ServerHandle | null = null;
    try {
      let baseUrl = v.url ?? "";
      if (!v.url) {
        progress({
          phase: "server",
          blockIndex: planned.index,
          variant: v.name,
          message: `starting ${describeVariant(v)}`,
        });
        server = await start({
          name: v.name,
          cmd: config.serverCmd!,
          env: v.env,
          args: v.args,
          logFile: join(logDir, `block${planned.index}-${v.name}.log`),
          readyTimeoutMs: opts.readyTimeoutMs,
          graceMs: opts.graceMs,
          apiKey,
          cwd: opts.cwd,
          signal: opts.signal,
        });
        baseUrl = server.url;
        store.updateBlock(blockId, { server: server.describe() });
      } else store.updateBlock(blockId, { server: { name: v.name, url: v.url } });
      progress({
        phase: "block",
        blockIndex: planned.index,
        variant: v.name,
        message: `block ${planned.index + 1}/${total}: ${v.name}`,
      });
      const res = await runWatchedBlock(runner, baseUrl, workload, {
        variant: v.name,
        blockIndex: planned.index,
        signal: opts.signal,
        server,
      });
      const ok = res.requests.filter((r) => r.ok);
      store.addRequests(runId, blockId, res.requests.map(toStored));
      if (ok.length === 0) {
        const why = res.requests.find((r) => r.error)?.error ?? "no requests completed";
        throw new TargetError(`variant "${v.name}": every request in block ${planned.index} failed (${why})`);
      }
      storeBlockTelemetry(store, runId, blockId, res.telemetry);
      store.updateBlock(blockId, {
        status: "complete",
        finishedAt: new Date().toISOString(),
        summary: blockSummary(res),
        ...(server ? { server: server.describe() } : {}),
      });
      done.add(planned.index);
      progress({
        phase: "block-done",
        blockIndex: planned.index,
        variant: v.name,
        message: `block ${planned.index + 1}/${total} ${v.name}: ${ok.length} requests, TPOT ${mean(ok.map((r) => r.tpotMs)).toFixed(2)} ms`,
      });
    } catch (err) {
      const e = asError(err);
      const isInterrupt = e instanceof InterruptedError || opts.signal?.aborted;
      store.updateBlock(blockId, {
        status: "failed",
        finishedAt: new Date().toISOString(),
        error: isInterrupt ? "interrupted" : e.message,
        ...(server ? { server: server.describe() } : {}),
      });
      if (isInterrupt) {
        interrupted = e instanceof InterruptedError ? e : new InterruptedError();
        break;
      }
      // Name the variant (the --variant the user gave) in every error that does not already.
      const said = abWords(e.message, v);
      const message = said.startsWith(`variant "${v.name}"`) ? said : `variant "${v.name}": ${said}`;
      errors.push({ variant: v.name, block: planned.index, message });
      if (e instanceof TargetError && e.hint && !hints.has(v.name)) hints.set(v.name, abWords(e.hint, v));
      failedVariants.add(v.name);
      progress({ phase: "block-failed", blockIndex: planned.index, variant: v.name, message });
      if (!(e instanceof TargetError)) throw e; // a bug or bad input: stop
    } finally {
      if (server) await server.stop();
    }
  }

  // Analyse everything this run has stored (earlier sessions included when resuming).
  progress({ phase: "analysis", message: "computing statistics" });
  const result = analyseRun(store, runId, config, errors);
  const complete = done.size === total;
  store.setSummary(runId, "ab", result);
  if (interrupted) {
    store.finishRun(runId, "partial", interrupted.message);
    throw new InterruptedError(
      `${interrupted.message}; ${done.size} of ${total} blocks are saved in run ${runId} (${store.path}); continue with --resume ${runId}`,
    );
  }
  result.status = complete ? "complete" : "partial";
  store.setSummary(runId, "ab", result);
  store.finishRun(
    runId,
    complete ? "complete" : "partial",
    errors.length ? errors.map((e) => e.message).join("\n") : null,
  );
  const missing = config.variants.filter((v) => !result.variants.find((s) => s.name === v.name && s.requests > 0));
  if (missing.length) {
    const first = errors.find((e) => e.variant === missing[0].name);
    throw new TargetError(
      `${first?.message ?? `variant "${missing[0].name}" produced no data`}\n  the other variants' blocks are saved in run ${runId} (${store.path})`,
      { hint: hints.get(missing[0].name) },
    );
  }
  return result;
}

/** The bench engine names its own flags (--base-url, --connect-timeout); an A/B's are --variant and --server-cmd. */
function abWords(text: string, v: { name: string; url?: string }): string {
  const target = v.url ? `--variant ${v.name}=URL` : "--server-cmd";
  return text
    .replace("(--base-url)", `(${target})`)
    .replaceAll("--base-url", target)
    .replace(" (--connect-timeout)", "");
}

function asError(e: unknown): Error {
  return e instanceof Error ? e : new Error(String(e));
}

function blockSummary(res: BlockResult): Record<string, unknown> {
  const ok = res.requests.filter((r) => r.ok);
  return {
    requests: res.requests.length,
    failedRequests: res.requests.length - ok.length,
    meanTpotMs: mean(ok.map((r) => r.tpotMs).filter(Number.isFinite)),
    meanTtftMs: mean(ok.map((r) => r.ttftMs)),
    meanE2elMs: mean(ok.map((r) => r.e2elMs)),
    durationMs: res.durationMs,
    outputThroughput: res.outputThroughput,
    requestThroughput: res.requestThroughput,
    warnings: res.warnings ?? [],
    bench: res.summary ?? null,
  };
}

/** Samples of one metric from a set of requests (successful ones only). */
export function metricSamples(reqs: readonly BlockSample[], m: MetricName): number[] {
  const ok = reqs.filter((r) => r.ok);
  const vals =
    m === "tpot_ms"
      ? ok.map((r) => r.tpotMs)
      : m === "ttft_ms"
        ? ok.map((r) => r.ttftMs)
        : m === "e2el_ms"
          ? ok.map((r) => r.e2elMs)
          : ok.map((r) => (r.outputTokens * 1000) / r.e2elMs);
  return vals.filter(Number.isFinite);
}

/** Rebuilds the whole analysis from the store: what the CLI prints, `runs show` and the report use. */
export function analyseRun(store: Store, runId: string, config: ABConfig, errors: ABResult["errors"] = []): ABResult {
  const detail = store.getRun(runId);
  const completeBlocks = detail.blocks.filter((b) => b.status === "complete");
  const reqs = store.getRequests(runId);
  const byBlock = new Map<number, BlockSample[]>();
  for (const r of reqs) {
    if (r.blockId == null) continue;
    let l = byBlock.get(r.blockId);
    if (!l) byBlock.set(r.blockId, (l = []));
    l.push(fromStored(r));
  }
  const blocks: ABBlock[] = config.design.map((p) => {
    const recs = detail.blocks.filter((b) => b.index === p.index);
    const b = recs.find((x) => x.status === "complete") ?? recs.at(-1);
    const s = (b?.summary ?? {}) as Record<string, number>;
    const err = errors.find((e) => e.block === p.index);
    return {
      index: p.index,
      round: p.round,
      variant: p.variant,
      status: b?.status === "complete" ? "complete" : b?.status === "failed" ? "failed" : err ? "skipped" : "pending",
      requests: s.requests ?? 0,
      failedRequests: s.failedRequests ?? 0,
      meanTpotMs: b?.status === "complete" ? (s.meanTpotMs ?? null) : null,
      outputThroughput: b?.status === "complete" ? (s.outputThroughput ?? null) : null,
      server: b?.server ?? null,
      error: b?.error ?? err?.message ?? null,
    };
  });
  const level = config.level;
  const B = config.resamples;
  const variants: VariantStats[] = config.variants.map((v, vi) => {
    const vb = completeBlocks.filter((b) => b.variant === v.name);
    const all = vb.flatMap((b) => byBlock.get(b.id) ?? []);
    const metrics = {} as Record<MetricName, MetricSummary>;
    (Object.keys(METRICS) as MetricName[]).forEach((m, mi) => {
      const xs = metricSamples(all, m);
      metrics[m] = {
        n: xs.length,
        mean: mean(xs),
        median: xs.length ? median(xs) : Number.NaN,
        sd: sd(xs),
        ci: bootstrapCI(xs, { seed: config.seed * 1000 + vi * 10 + mi, resamples: B, level }),
      };
    });
    return {
      name: v.name,
      description: describeVariant(v),
      url: v.url ?? null,
      env: v.env,
      args: v.args,
      blocks: vb.length,
      requests: all.length,
      failedRequests: all.filter((r) => !r.ok).length,
      metrics,
      blockThroughput: vb.map((b) =>
        Number((b.summary as Record<string, number> | null)?.outputThroughput ?? Number.NaN),
      ),
      blockTpotMs: vb.map((b) => Number((b.summary as Record<string, number> | null)?.meanTpotMs ?? Number.NaN)),
    };
  });
  const baseline = config.variants[0].name;
  const base = variants[0];
  const baseReqs = completeBlocks.filter((b) => b.variant === baseline).flatMap((b) => byBlock.get(b.id) ?? []);
  const blockMeans = (variant: string, m: MetricName) =>
    completeBlocks
      .filter((b) => b.variant === variant)
      .map((b) => mean(metricSamples(byBlock.get(b.id) ?? [], m)))
      .filter(Number.isFinite);
  const warnings: string[] = [];
  const diffs: VariantDiff[] = [];
  const verdicts: string[] = [];
  const attribution: ABResult["attribution"] = [];
  config.variants.slice(1).forEach((v, vi) => {
    const vReqs = completeBlocks.filter((b) => b.variant === v.name).flatMap((b) => byBlock.get(b.id) ?? []);
    (Object.keys(METRICS) as MetricName[]).forEach((m, mi) => {
      const a = metricSamples(baseReqs, m);
      const b = metricSamples(vReqs, m);
      if (a.length < 2 || b.length < 2) return;
      const comparison = compareSamples(a, b, { seed: config.seed * 7919 + vi * 31 + mi, resamples: B, level });
      const sign = METRICS[m].lowerIsBetter ? 1 : -1;
      const d = comparison.diff;
      const improvement: Interval = sign === 1 ? d : { estimate: -d.estimate, lo: -d.hi, hi: -d.lo, level: d.level };
      const ba = blockMeans(baseline, m);
      const bb = blockMeans(v.name, m);
      const blockLevel = ba.length >= 2 && bb.length >= 2 ? welchT(ba, bb) : null;
      diffs.push({
        baseline,
        variant: v.name,
        metric: m,
        unit: METRICS[m].unit,
        comparison,
        improvement,
        blockLevel,
        verdict: verdictFor(v.name, baseline, m, comparison, improvement),
      });
      // Requests of one server start are not independent of each other: if the per-start means
      // disagree with the per-request verdict, say so.
      if (m === "tpot_ms" && comparison.detected && blockLevel && !(blockLevel.p < 0.05))
        warnings.push(
          `${v.name} vs ${baseline}: per-block mean TPOT (one value per server start) gives Welch p = ${pfmt(blockLevel.p)}; ` +
            `the restart-to-restart spread is large next to the effect — add --repeats before trusting the per-request CI`,
        );
    });
    const tp = diffs.find((d) => d.variant === v.name && d.metric === "tpot_ms");
    verdicts.push(tp ? tp.verdict : `${v.name}: not enough data to compare with ${baseline}`);
    if (tp && config.opsPerToken)
      attribution.push({ variant: v.name, ...attributePerOp(tp.comparison.diff, config.opsPerToken, config.opName) });
  });
  void base;
  const telemetry = variantTelemetry(store, runId, detail.blocks);
  const capped = cappedFinding(telemetry);
  if (capped) warnings.push(capped);
  return {
    kind: "ab",
    telemetry,
    runId,
    dbPath: store.path,
    status: detail.run.status === "complete" ? "complete" : "partial",
    baseline,
    config,
    blocks,
    variants,
    diffs,
    verdicts,
    attribution,
    errors: errors.length ? errors : storedErrors(detail.blocks),
    warnings,
    method:
      `${config.repeats} rounds × ${config.variants.length} variants in a seeded balanced order (ABBA…), ` +
      `a fresh server start per block; per request: TPOT = (E2EL − TTFT)/(n − 1); ` +
      `${Math.round(level * 100)} % percentile-bootstrap CIs (${B} resamples, seed ${config.seed}); ` +
      `Welch's t and Mann–Whitney U (normal approximation with tie correction) on per-request values; ` +
      `detectable effect at α = 0.05, power 0.8.`,
  };
}

function storedErrors(blocks: ReturnType<Store["getRun"]>["blocks"]): ABResult["errors"] {
  return blocks
    .filter((b) => b.status === "failed" && b.error && b.error !== "interrupted")
    .map((b) => ({ variant: b.variant, block: b.index, message: b.error! }));
}

export function fmt(x: number, digits = 2): string {
  if (!Number.isFinite(x)) return "n/a";
  const a = Math.abs(x);
  const d = a >= 100 ? Math.max(0, digits - 2) : a >= 10 ? Math.max(1, digits - 1) : digits;
  return x.toFixed(d);
}

function verdictFor(variant: string, baseline: string, m: MetricName, c: Comparison, imp: Interval): string {
  const meta = METRICS[m];
  const unit = meta.unit;
  const p = `Welch p = ${pfmt(c.welch.p)}, Mann–Whitney p = ${pfmt(c.mannWhitney.p)}`;
  if (!c.detected)
    return (
      `no detectable difference in ${meta.label} between ${variant} and ${baseline} at this sample size ` +
      `(Δ ${fmt(imp.estimate)} ${unit} [${fmt(imp.lo)}, ${fmt(imp.hi)}]; ${p}); detectable effect ≈ ${fmt(c.mde)} ${unit}`
    );
  const better = imp.estimate > 0;
  const word = m === "output_tok_s" ? (better ? "higher" : "lower") : better ? "faster" : "slower";
  const mag = better ? imp : { estimate: -imp.estimate, lo: -imp.hi, hi: -imp.lo, level: imp.level };
  const what = m === "tpot_ms" ? "" : ` in ${meta.label}`;
  const rel = Math.abs(c.relDiff * 100);
  return `${variant} is ${word}${what} by ${fmt(mag.estimate)} ${unit} [${fmt(mag.lo)}, ${fmt(mag.hi)}] than ${baseline} (${fmt(rel, 1)} %; ${p})`;
}

function pfmt(p: number): string {
  if (!Number.isFinite(p)) return "n/a";
  if (p < 1e-4) return p.toExponential(1);
  return p.toPrecision(2);
}
