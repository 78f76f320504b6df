// The run loop every sweep shares: one target, levels in a seeded random order, each level stored
// as a block the moment it finishes, and --resume: reload the stored design, refuse contradicting
// options, skip finished levels, run the rest in the original order, analyse everything from the
// store (so a resumed sweep is analysed exactly as an uninterrupted one would be).
import { homedir, hostname } from "node:os";
import { join, resolve } from "node:path";
import { InputError, InterruptedError, TargetError, UsageError } from "../errors.ts";
import type { ServerSample } from "../load/diagnose.ts";
import { clipToWindow, type SampledServer, startServerSampler } from "../load/server-sampler.ts";
import { claimRun, type HeldLock } from "../output-file.ts";

export { clipToWindow };

import { sameProcessAlive } from "../process-id.ts";
import { type SecretSeal, sealCommand } from "../secrets.ts";
import { collectEnvironment, defaultDbPath, openStore, type RunRecord, type Store } from "../store/index.ts";
import type { TelemetrySpec } from "../telemetry/types.ts";
import {
  type BlockResult,
  type BlockRunner,
  type BlockSample,
  benchBlockRunner,
  cappedFinding,
  fromStored,
  runWatchedBlock,
  storeBlockTelemetry,
  toStored,
  variantTelemetry,
  type Workload,
} from "./blocks.ts";
import { shuffle } from "./design.ts";
import { sealTarget, sealVariant, unsealTarget } from "./sealed.ts";
import { makeRng, mean } from "./stats.ts";
import { parseVariant, type ServerHandle, setInterruptNote, startServer, type VariantSpec } from "./variants.ts";

export interface SweepProgress {
  phase: "start" | "level";
  message: string;
  /** Levels finished so far (this session and earlier ones). */
  done: number;
  total: number;
  /** Position in the run's order and the level, on "level" events. */
  index?: number;
  level?: number;
}

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
  /**
   * Continue this sweep run: its design (levels, order, workload, target) comes from the store,
   * finished levels are kept, the rest run in the original order. Options given as well must
   * match the stored ones. A finished run is only re-analysed.
   */
  resume?: string;
  readyTimeoutMs?: number;
  /** A stream with no data for this long fails as a stall (ms); not stored, so a resume may change it. */
  stallTimeoutMs?: number;
  /** Hardware telemetry over each level's measured window (`--telemetry`); not stored in the design. */
  telemetry?: TelemetrySpec;
  /**
   * Scrape the server's /metrics this often through each level (ms) for the binding-limit diagnosis;
   * 0 = never. Default 200. Not stored in the design.
   */
  serverSampleMs?: number;
  graceMs?: number;
  logDir?: string;
  cwd?: string;
  signal?: AbortSignal;
  onProgress?: (e: SweepProgress) => void;
}

export const DEFAULT_SERVER_SAMPLE_MS = 200;

export interface SweepDeps {
  blockRunner?: BlockRunner;
  startServer?: typeof startServer;
}

export interface LevelData {
  samples: BlockSample[];
  outputThroughput: number;
  requestThroughput: number;
  /** The server's load gauges sampled through the level (absent for levels stored before they were). */
  server?: StoredServerSamples;
  client?: BlockResult["client"];
  achieved?: BlockResult["achieved"];
}

/**
 * A level's sampled gauges as stored in its block summary: rows of [tMs, running, waiting, kvUsage,
 * preemptions, stepTokens, steps, stepSeconds, stepTimeCount] (the last four absent in older runs).
 */
export interface StoredServerSamples {
  engine: string | null;
  error: string | null;
  /** The batch ceiling the server stated (llama.cpp /props total_slots), when it did. */
  ceiling?: number | null;
  rows: Array<
    [
      number,
      number | null,
      number | null,
      number | null,
      number | null,
      (number | null)?,
      (number | null)?,
      (number | null)?,
      (number | null)?,
    ]
  >;
}

export function serverSamplesOf(s: StoredServerSamples): ServerSample[] {
  return s.rows.map(([tMs, running, waiting, kvUsage, preemptions, stepTokens, steps, stepSeconds, stepTimeCount]) => ({
    tMs,
    running,
    waiting,
    kvUsage,
    preemptions,
    stepTokens: stepTokens ?? null,
    steps: steps ?? null,
    stepSeconds: stepSeconds ?? null,
    stepTimeCount: stepTimeCount ?? null,
  }));
}

function storeServerSamples(x: SampledServer, w?: { startMs: number; endMs: number } | null): StoredServerSamples {
  return {
    engine: x.engine,
    error: x.error,
    ceiling: x.ceiling ?? null,
    rows: clipToWindow(x.samples, w).map((v) => [
      v.tMs,
      v.running,
      v.waiting,
      v.kvUsage,
      v.preemptions,
      v.stepTokens ?? null,
      v.steps ?? null,
      v.stepSeconds ?? null,
      v.stepTimeCount ?? null,
    ]),
  };
}

/** What one sweep kind contributes to the shared loop. */
export interface SweepPlan<C extends Record<string, unknown>> {
  kind: string;
  /** The configuration built from the options (defaults filled in); stored with a new run. */
  config: C;
  /** Config keys the caller set explicitly, with the flag that sets each (checked on resume). */
  given: Array<{ key: keyof C & string; flag: string }>;
  levels: (c: C) => number[];
  workload: (c: C, level: number) => Workload;
  label: (c: C, level: number) => string;
  /** "lengths" or "levels", for messages. */
  unit: string;
}

export interface SweepSession<C> {
  store: Store;
  owned: boolean;
  /** This process's claim on the run (one writer per run); released with the store. */
  lock?: HeldLock;
  runId: string;
  config: C;
  target: string;
  /** Every finished level of the run, read back from the store. */
  results: Map<number, LevelData>;
  total: number;
  interrupted: Error | null;
  resumed: boolean;
  /** The run was already complete: nothing ran, nothing is written. */
  reanalysed: boolean;
}

interface Target {
  baseUrl: string;
  server: ServerHandle | null;
  describe: string;
}

async function openTarget(opts: TargetOptions, deps: SweepDeps, name: string, logDir: string): Promise<Target> {
  if (opts.url && opts.serverCmd) throw new UsageError("give --url or --server-cmd, not both");
  if (opts.url) {
    let u: URL | null = null;
    try {
      u = new URL(opts.url);
    } catch {}
    if (!u || (u.protocol !== "http:" && u.protocol !== "https:"))
      throw new UsageError(`--url is not an http(s) URL: ${opts.url}`);
    return { baseUrl: opts.url.replace(/\/+$/, ""), server: null, describe: opts.url };
  }
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

function targetFlag(o: TargetOptions): string {
  return o.serverCmd ? "(--server-cmd)" : "(--url)";
}

/** The bench engine's words in the flags a sweep user typed: --url (or --server-cmd), no --connect-timeout. */
function sweepWords(text: string | undefined, o: TargetOptions): string | undefined {
  return text
    ?.replace("(--base-url)", targetFlag(o))
    .replaceAll("--base-url", o.serverCmd ? "--server-cmd" : "--url")
    .replace(" (--connect-timeout)", "");
}

function storeFrom(db: string | Store | undefined): { store: Store; owned: boolean } {
  if (db && typeof db === "object") return { store: db, owned: false };
  return { store: openStore(db), owned: true };
}

const SUBCOMMAND: Record<string, string> = {
  "sweep-lengths": "inferscope sweep lengths",
  "sweep-concurrency": "inferscope sweep concurrency",
  "sweep-rate": "inferscope sweep rate",
};

/** JSON with sorted keys, so a stored object and a freshly built one compare by content. */
function canonical(v: unknown): string {
  return JSON.stringify(v, (_k, x) =>
    x && typeof x === "object" && !Array.isArray(x)
      ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : x,
  );
}

function normalizeFor(key: string, v: unknown): unknown {
  if (v == null) return null;
  if (key === "url" && typeof v === "string") return v.replace(/\/+$/, "");
  // Compared as stored: secrets as placeholders (their keyed hashes are checked when the run resumes).
  if (key === "serverCmd" && typeof v === "string") return sealCommand(v).shown;
  if (key === "variant") return sealVariant(typeof v === "string" ? parseVariant(v) : (v as VariantSpec));
  return v;
}

function show(v: unknown): string {
  if (v == null) return "not set";
  if (Array.isArray(v)) return v.join(",");
  if (typeof v === "string") return JSON.stringify(v);
  if (typeof v === "object") return canonical(v);
  return String(v);
}

/** Options the caller set that contradict the stored run, one phrase each. */
export function resumeConflicts(
  given: ReadonlyArray<{ key: string; flag: string }>,
  fresh: Record<string, unknown>,
  stored: Record<string, unknown>,
): string[] {
  const out: string[] = [];
  for (const { key, flag } of given) {
    // A key older runs did not store cannot contradict them.
    if (!(key in stored)) continue;
    const a = normalizeFor(key, stored[key]);
    const b = normalizeFor(key, fresh[key]);
    if (canonical(a) !== canonical(b)) out.push(`${flag} is ${show(a)} in the run, ${show(b)} now`);
  }
  return out;
}

function loadForResume(store: Store, id: string, kinds: readonly string[]): RunRecord {
  let run: RunRecord;
  try {
    run = store.getRun(id).run;
  } catch (e) {
    if (e instanceof UsageError)
      throw new UsageError(`${e.message}: nothing to resume`, {
        hint: `list sweep runs with: inferscope runs list --kind ${kinds[0]}${store.path !== resolve(defaultDbPath()) ? ` --db ${store.path}` : ""}`,
      });
    throw e;
  }
  if (!kinds.includes(run.kind)) {
    const how = SUBCOMMAND[run.kind] ?? (run.kind === "ab" ? "inferscope ab" : null);
    throw new UsageError(
      `run ${run.id} is a ${run.kind} run, not a ${kinds.join(" or ")} run`,
      how ? { hint: `resume it with: ${how} --resume ${run.id}` } : {},
    );
  }
  if (
    run.status === "running" &&
    run.pid != null &&
    run.pid !== process.pid &&
    run.host === hostname() &&
    sameProcessAlive(run.pid, run.pidStart)
  )
    throw new UsageError(`run ${run.id} is still running (pid ${run.pid}); stop that process first`);
  return run;
}

/**
 * Starts or resumes a sweep, runs the levels that are not finished, and reads every finished level
 * back from the store. Stops (with `interrupted` set) on an interrupt; other errors mark the run
 * partial or failed and are thrown.
 */
export async function runSweepSession<C extends Record<string, unknown>>(
  plan: SweepPlan<C>,
  kinds: readonly string[],
  opts: TargetOptions,
  deps: SweepDeps,
): Promise<SweepSession<C>> {
  const { store, owned } = storeFrom(opts.db);
  const locks: HeldLock[] = [];
  try {
    return { ...(await session(plan, kinds, opts, deps, store, owned, locks)), lock: locks[0] };
  } catch (e) {
    for (const l of locks) l.release();
    if (owned) store.close();
    throw e;
  }
}

async function session<C extends Record<string, unknown>>(
  plan: SweepPlan<C>,
  kinds: readonly string[],
  opts: TargetOptions,
  deps: SweepDeps,
  store: Store,
  owned: boolean,
  locks: HeldLock[],
): Promise<SweepSession<C>> {
  let config: C;
  let runId: string;
  let kind = plan.kind;
  const done = new Set<number>();
  if (opts.resume) {
    const run = loadForResume(store, opts.resume, kinds);
    kind = run.kind;
    // Stored runs lack keys added later (e.g. resamples): those come from the options.
    config = { ...plan.config, ...(run.config as C) };
    const conflicts = resumeConflicts(plan.given, plan.config, run.config);
    if (conflicts.length)
      throw new UsageError(`--resume ${run.id}: options differ from the stored run: ${conflicts.join("; ")}`, {
        hint: "leave those options out (the run's own are used), or start a new sweep without --resume",
      });
    runId = run.id;
    // One writer per run: locked before its levels are read, so a second resume is refused, not run twice.
    locks.push(claimRun(store.path, runId));
    // The stored target holds placeholders for its secrets: take them again (same flags or the environment).
    const givenKeys = new Set<string>(plan.given.map((g) => g.key));
    const storedVariant = config.variant as string | VariantSpec | null;
    const freshVariant = givenKeys.has("variant") ? (plan.config.variant as string | VariantSpec | null) : null;
    const t = unsealTarget(
      run.id,
      {
        serverCmd: (config.serverCmd as string | null) ?? null,
        variants: storedVariant
          ? [typeof storedVariant === "string" ? parseVariant(storedVariant) : storedVariant]
          : [],
        sealed: (config.sealed as SecretSeal | null | undefined) ?? null,
      },
      {
        serverCmd: givenKeys.has("serverCmd") ? ((plan.config.serverCmd as string | null) ?? undefined) : undefined,
        variants: freshVariant ? [typeof freshVariant === "string" ? parseVariant(freshVariant) : freshVariant] : [],
      },
    );
    config = { ...config, serverCmd: t.serverCmd, ...(storedVariant ? { variant: t.variants[0] } : {}) };
    const detail = store.getRun(runId);
    for (const b of detail.blocks) if (b.status === "complete") done.add(b.index);
    const total = plan.levels(config).length;
    if (detail.run.status === "complete" && done.size === total) {
      const results = loadResults(store, runId, config, plan);
      const prev = detail.summaries.sweep as { target?: unknown } | undefined;
      const target = typeof prev?.target === "string" ? prev.target : String(config.url ?? config.serverCmd ?? "");
      return {
        store,
        owned,
        runId,
        config,
        target,
        results,
        total,
        interrupted: null,
        resumed: true,
        reanalysed: true,
      };
    }
    // Unfinished levels run again from scratch; their partial rows stay in the store, marked.
    for (const b of detail.blocks)
      if (b.status === "running" || b.status === "failed") store.updateBlock(b.id, { status: "discarded" });
    store.updateRun(runId, { status: "running", finishedAt: null, error: null });
  } else {
    config = plan.config;
    // Stored without its secrets: placeholders and keyed hashes.
    const v = config.variant as string | VariantSpec | null;
    const sealed = sealTarget(
      config.serverCmd as string | null,
      v ? [typeof v === "string" ? parseVariant(v) : v] : [],
    );
    const stored = {
      ...config,
      serverCmd: sealed.serverCmd,
      ...(v ? { variant: sealed.variants[0] } : {}),
      sealed: sealed.sealed,
    };
    runId = store.saveRun({ kind, config: stored, environment: collectEnvironment() }).id;
    locks.push(claimRun(store.path, runId));
  }
  const targetOpts: TargetOptions = {
    ...opts,
    url: (config.url as string | null) ?? undefined,
    serverCmd: (config.serverCmd as string | null) ?? undefined,
    variant: (config.variant as string | VariantSpec | null) ?? undefined,
  };
  setInterruptNote(`finished ${plan.unit} are saved in run ${runId} (${store.path}); continue with --resume ${runId}`);
  const levels = plan.levels(config);
  const order = shuffle(levels, makeRng(Number(config.seed ?? 0)));
  const total = order.length;
  const logDir = opts.logDir ?? join(homedir(), ".inferscope", "logs", runId);
  const runner = deps.blockRunner ?? benchBlockRunner;
  opts.onProgress?.({
    phase: "start",
    message: `run ${runId}: ${total} ${plan.unit}${done.size ? `, ${done.size} already done` : ""}`,
    done: done.size,
    total,
  });
  let interrupted: Error | null = null;
  let target: Target | null = null;
  try {
    if (done.size < total) target = await openTarget(targetOpts, deps, kind, logDir);
    for (const [i, level] of order.entries()) {
      if (done.has(i)) continue;
      if (opts.signal?.aborted) throw opts.signal.reason;
      const label = plan.label(config, level);
      opts.onProgress?.({
        phase: "level",
        message: `${label} (${i + 1}/${total})`,
        done: done.size,
        total,
        index: i,
        level,
      });
      if (opts.signal?.aborted) throw opts.signal.reason;
      const t = target!;
      const blockId = store.addBlock(runId, {
        index: i,
        variant: label,
        server: t.server?.describe() ?? { url: t.baseUrl },
      });
      let sampled: SampledServer | null = null;
      // The server's gauges through the level: stopped (and awaited) whatever the block's outcome.
      const sampler =
        (opts.serverSampleMs ?? DEFAULT_SERVER_SAMPLE_MS) > 0
          ? startServerSampler(t.baseUrl, {
              intervalMs: opts.serverSampleMs ?? DEFAULT_SERVER_SAMPLE_MS,
              headers: opts.apiKey ? { authorization: `Bearer ${opts.apiKey}` } : undefined,
              signal: opts.signal,
            })
          : null;
      try {
        const res = await runWatchedBlock(
          runner,
          t.baseUrl,
          {
            ...plan.workload(config, level),
            apiKey: opts.apiKey,
            stallTimeoutMs: opts.stallTimeoutMs,
            telemetry: opts.telemetry,
          },
          { variant: t.server?.name ?? label, blockIndex: i, signal: opts.signal, server: t.server },
        ).finally(async () => {
          sampled = sampler ? await sampler.stop() : null;
        });
        store.addRequests(runId, blockId, res.requests.map(toStored));
        storeBlockTelemetry(store, runId, blockId, res.telemetry);
        const ok = res.requests.filter((r) => r.ok);
        // A level that measured nothing is a failed target, as in `ab`: never a "complete" sweep of NaNs.
        if (ok.length === 0) {
          const why = res.requests.find((r) => r.error)?.error ?? "no requests completed";
          throw new TargetError(`${label}: every request failed (${why})`, {
            url: t.baseUrl,
            hint: `check the server at ${t.baseUrl} (${opts.serverCmd ? "--server-cmd" : "--url"})`,
          });
        }
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
            ...(sampled ? { server: storeServerSamples(sampled, res.window) } : {}),
            ...(res.client ? { client: res.client } : {}),
            ...(res.achieved !== undefined ? { achieved: res.achieved } : {}),
          },
        });
        done.add(i);
      } catch (err) {
        const isInterrupt = err instanceof InterruptedError || opts.signal?.aborted;
        store.updateBlock(blockId, {
          status: "failed",
          finishedAt: new Date().toISOString(),
          error: isInterrupt ? "interrupted" : (err as Error).message,
        });
        throw err;
      }
    }
  } catch (err) {
    const e = err instanceof Error ? err : new Error(String(err));
    if (e instanceof InterruptedError || opts.signal?.aborted)
      interrupted = e instanceof InterruptedError ? e : new InterruptedError();
    else {
      store.finishRun(runId, done.size ? "partial" : "failed", e.message);
      if (e instanceof TargetError)
        throw new TargetError(
          `${sweepWords(e.message, targetOpts)}\n  ${done.size} of ${total} ${plan.unit} are saved in run ${runId} (${store.path}); continue with --resume ${runId}`,
          // The bench engine's words name its own flags; a sweep's target is --url or --server-cmd.
          { url: e.url, status: e.status, hint: sweepWords(e.hint, targetOpts), cause: e },
        );
      throw e;
    }
  } finally {
    if (target?.server) await target.server.stop();
  }
  return {
    store,
    owned,
    runId,
    config,
    target: target?.describe ?? String(config.url ?? config.serverCmd ?? ""),
    results: loadResults(store, runId, config, plan),
    total,
    interrupted,
    resumed: Boolean(opts.resume),
    reanalysed: false,
  };
}

/** Every finished level of a run, from the store: the one source both fresh and resumed runs analyse. */
export function loadResults<C extends Record<string, unknown>>(
  store: Store,
  runId: string,
  config: C,
  plan: Pick<SweepPlan<C>, "levels" | "label">,
): Map<number, LevelData> {
  const order = shuffle(plan.levels(config), makeRng(Number(config.seed ?? 0)));
  const detail = store.getRun(runId);
  const byBlock = new Map<number, BlockSample[]>();
  for (const r of store.getRequests(runId)) {
    if (r.blockId == null) continue;
    let l = byBlock.get(r.blockId);
    if (!l) byBlock.set(r.blockId, (l = []));
    l.push(fromStored(r));
  }
  const results = new Map<number, LevelData>();
  for (const b of detail.blocks) {
    if (b.status !== "complete") continue;
    const level = order[b.index];
    if (level === undefined || b.variant !== plan.label(config, level))
      throw new InputError(
        `run ${runId}: block ${b.index} (${b.variant}) does not match the stored design (${level === undefined ? "no such position" : plan.label(config, level)})`,
      );
    if (results.has(level)) continue;
    const s = (b.summary ?? {}) as Record<string, unknown>;
    const num = (x: unknown) => (typeof x === "number" ? x : Number.NaN);
    results.set(level, {
      samples: byBlock.get(b.id) ?? [],
      outputThroughput: num(s.outputThroughput),
      requestThroughput: num(s.requestThroughput),
      ...(s.server ? { server: s.server as StoredServerSamples } : {}),
      ...(s.client ? { client: s.client as BlockResult["client"] } : {}),
      ...(s.achieved !== undefined ? { achieved: s.achieved as BlockResult["achieved"] } : {}),
    });
  }
  return results;
}

/** Saves the summary and closes the run: partial (rethrown as an interrupt, with how to resume) or complete. */
export function finishSweep<T>(s: SweepSession<unknown>, result: T, unit: string): T {
  // Per level, from the hardware's counters (a level is a "variant" of the run's blocks).
  const telemetry = variantTelemetry(s.store, s.runId, s.store.getRun(s.runId).blocks);
  if (telemetry.length) {
    const r = result as { telemetry?: unknown; warnings?: string[] };
    r.telemetry = telemetry;
    const capped = cappedFinding(telemetry, { plural: "levels", allCapped: "every level ran capped" });
    if (capped) (r.warnings ??= []).push(capped);
  }
  if (s.reanalysed) return result;
  s.store.setSummary(s.runId, "sweep", result);
  if (s.interrupted) {
    s.store.finishRun(s.runId, "partial", s.interrupted.message);
    throw new InterruptedError(
      `${s.interrupted.message}; ${s.results.size} of ${s.total} ${unit} are saved in run ${s.runId} (${s.store.path}); continue with --resume ${s.runId}`,
    );
  }
  s.store.finishRun(s.runId, "complete");
  return result;
}
