// `inferscope tune`: the model ranks the candidates, restart-controlled blocks measure them, the
// surrogate is refitted after every block, and candidates are raced out until one is separated
// from the rest (or the rest are within tolerance, or the budget is spent). Every block is stored as
// it finishes; the planner is a pure replay of the stored blocks, so --resume continues exactly.
import { cpus, homedir } from "node:os";
import { join } from "node:path";
import { unmetNeed } from "../discover/experiments.ts";
import {
  commandFacts,
  discover,
  discoverDeployment,
  type GivenDeployment,
  hasCollectives,
  hostFacts,
  modelInputsFor,
} from "../discover/index.ts";
import { InputError, InterruptedError, plainReason, TargetError, UsageError } from "../errors.ts";
import { openStoreFrom } from "../experiment/ab.ts";
import {
  type BlockResult,
  type BlockRunner,
  type BlockSample,
  benchBlockRunner,
  cappedFinding,
  runWatchedBlock,
  storeBlockTelemetry,
  toStored,
  type VariantTelemetry,
  variantTelemetry,
  type Workload,
} from "../experiment/blocks.ts";
import { sealTarget, unsealTarget } from "../experiment/sealed.ts";
import { mean, normalQuantile } from "../experiment/stats.ts";
import { type ServerHandle, setInterruptNote, startServer } from "../experiment/variants.ts";
import { engineById } from "../metrics/engines/index.ts";
import { inputFromOptions, type ModelCliOptions, type ModelInput } from "../model/index.ts";
import { DEFAULT_SPAN_WAIT_MS } from "../otlp/bench.ts";
import { engineFlagHint, type OtlpReceiver, startOtlpReceiver } from "../otlp/receiver.ts";
import { requestSpanFlags } from "../otlp/server-flags.ts";
import { claimOutputDir, claimRun, type HeldLock } from "../output-file.ts";
import { type SecretSeal, sealCommand } from "../secrets.ts";
import { DEFAULT_PROFILE, embeddedSimCommand, profileDeployment, profileModelOptions } from "../sim/profile.ts";
import { collectEnvironment, type Store } from "../store/index.ts";
import {
  candidates as buildCandidates,
  type Candidate,
  commandFor,
  type KnobSpec,
  type PruneContext,
  parseKnob,
} from "./knobs.ts";
import { type CandidatePrediction, type ModelPlan, OBJECTIVES, type Objective, planModel } from "./model.ts";
import { type BlockSpanSummary, blockSpanSummary, type CandidateSpans, candidateSpans, compareSpans } from "./spans.ts";
import { difference, type Observation, type Posterior, posterior, probabilityBest } from "./surrogate.ts";

/** Where tune's OTLP receiver listens (`--otlp-receiver [HOST:]PORT`, `--otlp-grpc-receiver`, `--otlp-wait`). */
export interface TuneOtlp {
  host: string;
  port: number;
  grpc?: { host: string; port: number };
  /** After each block, how long to wait for spans still unsent (ms). */
  waitMs?: number;
}

export interface Slo {
  ttftMs?: number;
  tpotMs?: number;
}

export interface TuneOptions {
  /** Server command; `{port}` is filled in. Absent: the embedded sim (profile, timeScale, simSet). */
  serverCmd?: string;
  profile?: string;
  timeScale?: number;
  /** Embedded sim: `--set key=value` overrides of its profile (hidden parameters in tests). */
  simSet?: Record<string, string | number>;
  /** --knob specs; absent: the engine registry's knobs that apply to the deployment. */
  knobs?: string[];
  objective?: Objective;
  slo?: Slo;
  /** Server starts, and/or wall time (ms). */
  budget?: { starts?: number; timeMs?: number };
  /** Relative difference below which two candidates count as equal (default 0.01). */
  tolerance?: number;
  /** δ: the chance of dropping the true best, spread over the candidates (default 0.05). */
  errorRate?: number;
  /** Blocks the chosen candidate needs at least (default 2: one restart-to-restart replicate). */
  minBlocks?: number;
  workload?: Partial<Workload>;
  given?: GivenDeployment;
  seed?: number;
  db?: string | Store;
  resume?: string;
  /** An OTLP receiver for the whole run: every block's requests joined with the engine's request spans. */
  otlp?: TuneOtlp;
  /** Also write the report (index.html, report.md, results.json) into this directory. */
  outDir?: string;
  readyTimeoutMs?: number;
  graceMs?: number;
  logDir?: string;
  cwd?: string;
  apiKey?: string;
  signal?: AbortSignal;
  onProgress?: (e: TuneProgress) => void;
}

export interface TuneDeps {
  startServer?: typeof startServer;
  blockRunner?: BlockRunner;
  /** Model input to use instead of discovering one (tests; `null` = no model). */
  modelInput?: ModelInput | null;
}

export interface TuneProgress {
  phase: "start" | "otlp" | "server" | "block" | "block-done" | "drop" | "stop";
  runId: string;
  message: string;
}

export interface TuneConfig {
  serverCmd: string;
  embedded: { profile: string; timeScale: number; set: Record<string, string | number> } | null;
  knobs: KnobSpec[];
  knobSource: "given" | "registry";
  candidates: Candidate[];
  objective: Objective;
  slo: Slo;
  budget: { starts: number; timeMs: number | null };
  tolerance: number;
  errorRate: number;
  minBlocks: number;
  workload: Workload;
  seed: number;
  prune: PruneContext;
  /** Filled once the first server has answered (discovery → the model). */
  model: ModelPlan | null;
  modelInput: { options: ModelCliOptions | null; missing: string[]; assumptions: string[] } | null;
  /** Keyed hashes of the secrets in serverCmd (stored sealed); a resume checks the ones given again. */
  sealed?: SecretSeal | null;
  /** The OTLP receiver the run was started with (absent: none). */
  otlp?: TuneOtlp & { waitMs: number };
}

/** One finished block, as the planner sees it. */
export interface DoneBlock {
  index: number;
  round: number;
  candidate: number;
  /** Objective in its unit (unscaled), and its log form (lower is better) with variance. */
  value: number;
  y: number;
  w: number;
  requests: number;
  failedRequests: number;
  sloMet?: number;
}

export interface Interval3 {
  estimate: number;
  low: number;
  high: number;
}

export interface TuneCandidate extends Pick<Candidate, "id" | "name" | "settings" | "env" | "unset" | "args"> {
  command: string;
  status: "best" | "alive" | "dropped" | "skipped";
  skipped: string | null;
  predicted: Interval3 | null;
  /** The refitted surrogate's 95 % interval (model + every measurement). */
  posterior: Interval3;
  measured: (Interval3 & { blocks: number; requests: number }) | null;
  /** Measured gain over the baseline (positive = better): in the objective's unit, and as a share of the baseline's value. */
  gain: { absolute: Interval3; relative: Interval3 } | null;
  probabilityBest: number;
  dropped: { afterBlock: number; reason: string } | null;
  /** With --otlp-receiver: its blocks' requests joined with the engine's request spans, pooled. */
  spans?: CandidateSpans | null;
}

export interface TuneResult {
  kind: "tune";
  runId: string;
  dbPath: string;
  /** complete: a choice was made; inconclusive: the run ended (its budget spent) before it could choose; partial: interrupted. */
  status: "complete" | "partial" | "inconclusive";
  objective: { name: Objective; label: string; unit: string; lowerIsBetter: boolean; define: string };
  slo: Slo;
  baseline: { id: string; measured: Interval3 | null };
  best: {
    id: string;
    name: string;
    env: Record<string, string>;
    unset: string[];
    args: string[];
    command: string;
    objective: Interval3;
    /** Measured gain over the baseline: in the objective's unit (positive = better) and relative. */
    gain: { absolute: Interval3; relative: Interval3 } | null;
    probabilityBest: number;
  } | null;
  stop: {
    reason: "separated" | "equivalent" | "budget" | "interrupted" | "exhausted";
    message: string;
    unseparated: string[];
  };
  restarts: number;
  elapsedS: number;
  /** Server starts a full grid needs for every candidate to have the best's blocks. */
  gridStarts: number;
  candidates: TuneCandidate[];
  blocks: Array<{
    index: number;
    round: number;
    candidate: string;
    value: number | null;
    status: string;
    error: string | null;
  }>;
  model: { available: boolean; reason: string | null; unmapped: string[]; notes: string[]; assumptions: string[] };
  /** Per candidate, from the hardware's counters (empty without --telemetry). */
  telemetry: VariantTelemetry[];
  errors: string[];
  warnings: string[];
  method: string;
  /** Where the report was written (with --out). */
  report?: { html: string };
  /** With --otlp-receiver: the receiver, what the servers were given, the winner's split and every finding. */
  otlp?: TuneSpansResult;
}

export interface TuneSpansResult {
  /** This session's receiver (a resumed run listens anew). */
  endpoint: string | null;
  grpcEndpoint: string | null;
  /** The flags and environment each started server got, or null when the engine has to be told by hand. */
  serverFlags: string | null;
  /** For an engine the catalog cannot configure: what to give it by hand. */
  hint: string | null;
  /** The winner against the baseline, part by part (null without a winner or spans for both). */
  comparison: string | null;
  /** Per block ("block 3 (c1): …"): unmatched requests or spans, an engine that sends nothing, bad bodies. */
  findings: string[];
}

const DEFAULT_WORKLOAD: Workload = {
  numPrompts: 10,
  randomInputLen: 32,
  randomOutputLen: 128,
  concurrency: 1,
  warmup: 1,
  seed: 0,
};

// ---------------------------------------------------------------- configuration

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/** Knob specs from the engine's registry that apply to this deployment (`--threads {cores}` filled). */
export function registryKnobs(
  engine: string | null,
  prune: PruneContext,
  d: Parameters<typeof unmetNeed>[1],
): KnobSpec[] {
  const e = engine ? engineById(engine) : undefined;
  const out: KnobSpec[] = [];
  for (const k of e?.knobs ?? []) {
    if (k.needs.some((n) => unmetNeed(n, d) !== null)) continue;
    const change = k.change.replace(/\{cores\}/g, String(prune.hostCores ?? ""));
    const env = /^([A-Za-z_][A-Za-z0-9_]*)=(\S+)$/.exec(change);
    if (env) out.push(parseKnob(`${env[1]}=,${env[2]}`));
    else if (/^--?[\w-]+$/.test(change)) out.push(parseKnob(change));
    else {
      const f = /^(--?[\w-]+)\s+(\S+)$/.exec(change);
      if (f) out.push(parseKnob(`${f[1]}=,${f[2]}`));
    }
  }
  return out;
}

export function resolveTuneConfig(opts: TuneOptions): TuneConfig {
  const objective: Objective = opts.objective ?? "tpot";
  if (!(objective in OBJECTIVES))
    throw new UsageError(`--objective ${objective} is not one of ${Object.keys(OBJECTIVES).join(", ")}`);
  const slo = opts.slo ?? {};
  if (objective === "throughput-at-slo" && slo.ttftMs === undefined && slo.tpotMs === undefined)
    throw new UsageError("--objective throughput-at-slo needs --slo (e.g. --slo ttft:500,tpot:50)");
  // An SLO only shapes the throughput-at-slo objective; with tpot or ttft it would be dropped without a word.
  if (objective !== "throughput-at-slo" && (slo.ttftMs !== undefined || slo.tpotMs !== undefined))
    throw new UsageError(
      `--slo applies to --objective throughput-at-slo only; --objective ${objective} does not use it`,
      {
        hint: "add --objective throughput-at-slo, or drop --slo",
      },
    );
  const tolerance = opts.tolerance ?? 0.01;
  if (!(tolerance >= 0 && tolerance < 0.5)) throw new UsageError(`--tolerance must be in [0, 0.5), got ${tolerance}`);
  const errorRate = opts.errorRate ?? 0.05;
  if (!(errorRate > 0 && errorRate < 0.5)) throw new UsageError(`--error-rate must be in (0, 0.5), got ${errorRate}`);
  const minBlocks = opts.minBlocks ?? 2;
  if (!(Number.isInteger(minBlocks) && minBlocks >= 1)) throw new UsageError(`--min-blocks must be an integer ≥ 1`);
  const workload: Workload = {
    ...DEFAULT_WORKLOAD,
    telemetry: { kind: "auto" },
    ...stripUndefined(opts.workload ?? {}),
  };
  if (workload.requestRate !== undefined) delete workload.concurrency;
  for (const k of ["numPrompts", "randomInputLen", "randomOutputLen"] as const)
    if (!(Number.isInteger(workload[k]) && workload[k] >= 1))
      throw new UsageError(`--${k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)} must be an integer ≥ 1`);
  if (workload.randomOutputLen < 2) throw new UsageError("--random-output-len must be ≥ 2: TPOT needs two tokens");
  const embedded = opts.serverCmd
    ? null
    : { profile: opts.profile ?? DEFAULT_PROFILE, timeScale: opts.timeScale ?? 10, set: opts.simSet ?? {} };
  if (opts.serverCmd && (opts.profile || opts.timeScale !== undefined || opts.simSet))
    throw new UsageError("--profile, --time-scale and --set apply to the embedded sim only, not to a --server-cmd");
  if (embedded && !(embedded.timeScale > 0 && embedded.timeScale <= 1000))
    throw new UsageError(`--time-scale must be in (0, 1000], got ${embedded.timeScale}`);
  if (opts.otlp && embedded && embedded.timeScale !== 1)
    throw new UsageError(
      `--otlp-receiver on the embedded sim needs --time-scale 1 (got ${embedded.timeScale}): its spans carry the sim's clock, which the client's lines up with only at 1`,
      { hint: "add --time-scale 1, or drop --otlp-receiver" },
    );
  const otlpWait = opts.otlp?.waitMs ?? DEFAULT_SPAN_WAIT_MS;
  if (!(otlpWait >= 0 && Number.isFinite(otlpWait))) throw new UsageError(`--otlp-wait must be ≥ 0, got ${otlpWait}`);
  const seed = opts.seed ?? workload.seed;
  const serverCmd = opts.serverCmd ?? embeddedSimCommand(embedded!.profile, embedded!.timeScale, seed, embedded!.set);

  // What is known before any server starts: the command, the given flags, this host, the profile.
  const given = opts.given ?? {};
  const command = commandFacts(opts.serverCmd);
  const host = hostFacts({ measure: false });
  const profile = embedded ? profileDeployment(embedded.profile) : undefined;
  const d = discoverDeployment({ command, given, host, profile });
  const prune: PruneContext = {
    engine: d.engine.value,
    tp: d.tp.value,
    gpus: d.gpus.value,
    hostCores: host.cores || cpus().length,
    collectives: hasCollectives(d),
  };
  const knobSource = opts.knobs?.length ? "given" : "registry";
  const knobs = opts.knobs?.length ? opts.knobs.map(parseKnob) : registryKnobs(d.engine.value, prune, d);
  if (!knobs.length)
    throw new UsageError(
      d.engine.value
        ? `no knob of ${d.engine.value}'s registry applies to this deployment: give --knob`
        : "the engine is not known from the server command: give --knob (e.g. --knob NCCL_PROTO=,LL,Simple)",
    );
  const cands = buildCandidates(knobs, prune);
  const runnable = cands.filter((c) => !c.skipped).length;
  if (runnable < 2)
    throw new UsageError(
      `only ${runnable} candidate can run: ${cands
        .filter((c) => c.skipped)
        .map((c) => `${c.name}: ${c.skipped}`)
        .join("; ")}`,
    );
  const starts = opts.budget?.starts ?? 3 * runnable;
  if (!(Number.isInteger(starts) && starts >= 2)) throw new UsageError(`--budget must allow at least 2 server starts`);
  const timeMs = opts.budget?.timeMs ?? null;
  if (timeMs !== null && !(timeMs > 0)) throw new UsageError("--budget time must be > 0");
  const { apiKey: _k, ...storedWorkload } = workload;
  return {
    serverCmd,
    embedded,
    knobs,
    knobSource,
    candidates: cands,
    objective,
    slo,
    budget: { starts, timeMs },
    tolerance,
    errorRate,
    minBlocks,
    workload: storedWorkload,
    seed,
    prune,
    model: null,
    modelInput: null,
    ...(opts.otlp ? { otlp: { ...opts.otlp, waitMs: otlpWait } } : {}),
  };
}

// ---------------------------------------------------------------- the objective of one block

/** The block's objective (unscaled) and its log form with the variance its own requests give. */
export function blockObjective(
  reqs: BlockSample[],
  durationMs: number,
  objective: Objective,
  slo: Slo,
  scale: number,
): { value: number; y: number; w: number; sloMet?: number } | null {
  const ok = reqs.filter((r) => r.ok);
  if (objective === "throughput-at-slo") {
    const good = ok.map((r) => {
      const meets =
        (slo.ttftMs === undefined || r.ttftMs * scale <= slo.ttftMs) &&
        (slo.tpotMs === undefined || !(r.tpotMs * scale > slo.tpotMs));
      return meets ? r.outputTokens : 0;
    });
    const total = good.reduce((a, b) => a + b, 0);
    const met = good.filter((x) => x > 0).length;
    if (total <= 0) return { value: 0, y: Number.POSITIVE_INFINITY, w: 0, sloMet: 0 };
    const n = good.length;
    const m = total / n;
    const v = good.reduce((s, x) => s + (x - m) ** 2, 0) / Math.max(1, n - 1);
    const value = total / ((durationMs * scale) / 1000);
    return { value, y: -Math.log(value), w: v / (n * m * m), sloMet: met };
  }
  const xs = ok.map((r) => (objective === "tpot" ? r.tpotMs : r.ttftMs) * scale).filter(Number.isFinite);
  if (xs.length === 0) return null;
  const m = mean(xs);
  const v = xs.length > 1 ? xs.reduce((s, x) => s + (x - m) ** 2, 0) / (xs.length - 1) : (0.05 * m) ** 2;
  return { value: m, y: Math.log(m), w: v / (xs.length * m * m) };
}

// ---------------------------------------------------------------- the planner (a pure replay)

export interface PlanState {
  alive: Set<number>;
  dropped: Map<number, { afterBlock: number; reason: string }>;
  round: number;
  queue: number[];
  post: Posterior;
  obs: Observation[];
  leader: number | null;
  stop: TuneResult["stop"] | null;
  pBest: Map<number, number>;
}

function shuffle(xs: number[], seed: number): number[] {
  const out = xs.slice();
  let s = seed >>> 0 || 1;
  for (let i = out.length - 1; i > 0; i--) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    const j = s % (i + 1);
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

/** Replays the finished blocks through the racing rules; the state says what to run next or why to stop. */
export function plan(cfg: TuneConfig, done: DoneBlock[], startsUsed = done.length, elapsedMs = 0): PlanState {
  const model = cfg.model!;
  const cands = cfg.candidates;
  const runnable = cands.map((c, i) => (c.skipped ? -1 : i)).filter((i) => i >= 0);
  const K = runnable.length;
  const z = normalQuantile(1 - cfg.errorRate / K);
  const tol = Math.log(1 + cfg.tolerance);
  const sCands = cands.map((c, i) => ({
    m: model.predictions[i]!.m,
    levels: cfg.knobs.map((k) =>
      Math.max(
        0,
        k.values.findIndex((v) => v.label === c.settings[k.name]),
      ),
    ),
  }));
  const levels = cfg.knobs.map((k) => k.values.length);
  const alive = new Set(runnable);
  const dropped = new Map<number, { afterBlock: number; reason: string }>();
  const obs: Observation[] = [];
  const blocksOf = (c: number) => obs.filter((o) => o.candidate === c).length;
  let post = posterior(sCands, levels, model.priors, obs);
  const name = (c: number) => `${cands[c]!.id} (${cands[c]!.name})`;

  const newRound = (r: number): number[] => {
    const a = [...alive];
    if (r === 1) {
      // The baseline first (the gain is measured against it), then the most promising by the model.
      // Ties (the model cannot tell them apart) go single changes first: each measured alone
      // identifies its own correction, where a combination's surprise would be split over several.
      const pb = probabilityBest(post, a, 2000, cfg.seed + 1);
      const changes = (c: number) => cfg.knobs.filter((k) => cands[c]!.settings[k.name] !== k.values[0]!.label).length;
      const gain = (c: number) => Math.round(post.mean[c]! * 1e6);
      const order = a.sort((x, y) =>
        x === 0
          ? -1
          : y === 0
            ? 1
            : gain(x) - gain(y) || changes(x) - changes(y) || Math.round((pb.get(y)! - pb.get(x)!) * 100) || x - y,
      );
      // The baseline again third and fifth: two replicates, so the restart-to-restart spread is
      // measured before anything is decided on it.
      if (order[0] === 0 && order.length >= 2) order.splice(2, 0, 0);
      if (order.length >= 4) order.splice(4, 0, 0);
      return order;
    }
    return shuffle(a, cfg.seed * 7919 + r);
  };
  let round = 1;
  let queue = newRound(1);
  let leader: number | null = null;
  let stop: TuneResult["stop"] | null = null;

  const decide = (afterBlock: number) => {
    const measured = [...alive].filter((c) => blocksOf(c) > 0);
    if (!measured.length) return;
    leader = measured.reduce((b, c) => (post.mean[c]! < post.mean[b]! ? c : b));
    // Nothing is dropped or stopped on the prior guess of the restart spread alone.
    if (post.tauDf - model.priors.nu0 < 2) return;
    // Drop what is confidently worse than the leader: a one-sided test at δ/K on the posterior difference.
    for (const c of [...alive]) {
      if (c === leader) continue;
      const d = difference(post, c, leader);
      if (d.mean / Math.max(d.sd, 1e-12) > z) {
        alive.delete(c);
        const pct = (Math.exp(OBJECTIVES[cfg.objective].lowerIsBetter ? d.mean : -d.mean) - 1) * 100;
        dropped.set(c, {
          afterBlock,
          reason: `${blocksOf(c) ? `${blocksOf(c)} block${blocksOf(c) > 1 ? "s" : ""} measured` : "not measured: predicted by the model + fitted corrections"}; posterior ${Math.abs(pct).toFixed(1)} % ${OBJECTIVES[cfg.objective].lowerIsBetter ? "slower" : "lower"} than ${name(leader)} then, P(better) < ${(cfg.errorRate / K).toPrecision(2)}`,
        });
      }
    }
    const l = leader;
    const rest = [...alive].filter((c) => c !== l);
    if (blocksOf(l) >= cfg.minBlocks) {
      if (!rest.length)
        stop = { reason: "separated", message: `${name(l)} is separated from every other candidate`, unseparated: [] };
      else if (
        rest.every((c) => {
          const d = difference(post, c, l);
          return (d.mean + tol) / Math.max(d.sd, 1e-12) > z;
        })
      )
        stop = {
          reason: "equivalent",
          message: `no remaining candidate is better than ${name(l)} by more than ${(cfg.tolerance * 100).toFixed(1)} % (${rest.map(name).join(", ")} within tolerance)`,
          unseparated: rest.map((c) => cands[c]!.id),
        };
    }
  };

  for (const b of done) {
    const at = queue.indexOf(b.candidate);
    if (at >= 0) queue.splice(at, 1);
    obs.push({ candidate: b.candidate, y: b.y, w: b.w });
    // A candidate that fails the SLO in a block cannot be the best at this SLO.
    if (!Number.isFinite(b.y)) {
      obs.pop();
      alive.delete(b.candidate);
      dropped.set(b.candidate, { afterBlock: b.index, reason: "no request met the SLO in its block" });
    }
    post = posterior(sCands, levels, model.priors, obs);
    decide(b.index);
    queue = queue.filter((c) => alive.has(c));
    if (stop) break;
    if (!queue.length) queue = newRound(++round);
  }
  if (!stop) {
    queue = queue.filter((c) => alive.has(c));
    if (!queue.length) queue = newRound(++round);
    const over = startsUsed >= cfg.budget.starts || (cfg.budget.timeMs !== null && elapsedMs >= cfg.budget.timeMs);
    if (over) {
      const l = leader;
      const rest = l === null ? [...alive] : [...alive].filter((c) => c !== l);
      stop = {
        reason: "budget",
        message: `the budget (${startsUsed} of ${cfg.budget.starts} server starts${cfg.budget.timeMs !== null ? `, ${(elapsedMs / 60000).toFixed(1)} of ${(cfg.budget.timeMs / 60000).toFixed(1)} min` : ""}) is spent before the candidates were separated`,
        unseparated: rest.map((c) => cands[c]!.id),
      };
    } else if (!alive.size) stop = { reason: "exhausted", message: "every candidate was dropped", unseparated: [] };
  }
  const pBest = alive.size ? probabilityBest(post, [...alive], 4000, cfg.seed + 2) : new Map<number, number>();
  return { alive, dropped, round, queue, post, obs, leader, stop, pBest };
}

// ---------------------------------------------------------------- running

export async function runTune(opts: TuneOptions, deps: TuneDeps = {}): Promise<TuneResult> {
  const { store, owned } = openStoreFrom(opts.db);
  const locks: HeldLock[] = [];
  const held: Held = { receiver: null };
  try {
    return await runWithStore(opts, deps, store, locks, held);
  } finally {
    await held.receiver?.close();
    for (const l of locks) l.release();
    if (owned) store.close();
  }
}

async function modelFor(
  cfg: TuneConfig,
  url: string,
  opts: TuneOptions,
  deps: TuneDeps,
): Promise<{ plan: ModelPlan; inputs: TuneConfig["modelInput"] }> {
  const load = {
    inputLen: cfg.workload.randomInputLen,
    outputLen: cfg.workload.randomOutputLen,
    concurrency: cfg.workload.concurrency ?? 1,
  };
  if (deps.modelInput !== undefined)
    return {
      plan: planModel(
        deps.modelInput,
        deps.modelInput ? null : "no model input given",
        cfg.knobs,
        cfg.candidates,
        cfg.objective,
        load,
      ),
      inputs: null,
    };
  const given = opts.given ?? {};
  let inputs: TuneConfig["modelInput"];
  if (cfg.embedded) {
    const o = profileModelOptions(profileDeployment(cfg.embedded.profile));
    inputs =
      o.model && o.gpu
        ? { options: o, missing: [], assumptions: [] }
        : { options: null, missing: ["the profile's model or GPU is not in the catalog"], assumptions: [] };
  } else {
    const r = await discover({ url, serverCmd: cfg.serverCmd, given, apiKey: opts.apiKey, signal: opts.signal });
    inputs = modelInputsFor(r.discovery, given, r.host);
  }
  let input: ModelInput | null = null;
  let why: string | null = null;
  if (inputs.options)
    try {
      input = inputFromOptions(inputs.options);
    } catch (err) {
      why = `the model cannot describe this deployment: ${(err as Error).message}`;
    }
  else why = `the model needs ${inputs.missing.join("; ")}`;
  return { plan: planModel(input, why, cfg.knobs, cfg.candidates, cfg.objective, load), inputs };
}

function doneFromStore(store: Store, runId: string): DoneBlock[] {
  const det = store.getRun(runId);
  return det.blocks
    .filter((b) => b.status === "complete" && b.summary)
    .sort((a, b) => a.index - b.index)
    .map((b) => {
      const s = b.summary as Record<string, number>;
      return {
        index: b.index,
        round: s.round!,
        candidate: s.candidate!,
        value: s.value!,
        y: s.y === null ? Number.POSITIVE_INFINITY : s.y!,
        w: s.w!,
        requests: s.requests!,
        failedRequests: s.failedRequests!,
        sloMet: s.sloMet,
      };
    });
}

/** What runTune closes whatever happens. */
interface Held {
  receiver: OtlpReceiver | null;
}

/** One receiver for the whole run, started before any server (a busy port is refused before anything is stored). */
async function startTuneReceiver(o: TuneOtlp): Promise<OtlpReceiver> {
  return startOtlpReceiver({ host: o.host, port: o.port, grpcHost: o.grpc?.host, grpcPort: o.grpc?.port });
}

async function runWithStore(
  opts: TuneOptions,
  deps: TuneDeps,
  store: Store,
  locks: HeldLock[],
  held: Held,
): Promise<TuneResult> {
  // A directory that cannot hold the report must not cost a whole run; a second run naming it is refused.
  if (opts.outDir) locks.push(claimOutputDir(opts.outDir, "--out"));
  const runner = deps.blockRunner ?? benchBlockRunner;
  const start = deps.startServer ?? startServer;
  const apiKey = opts.apiKey ?? opts.workload?.apiKey ?? process.env.OPENAI_API_KEY;
  const t0 = Date.now();
  let cfg: TuneConfig;
  let runId: string;
  let elapsedBefore = 0;
  // The command as stored (secrets as placeholders) and their keyed hashes: every config write uses these.
  let stored: { serverCmd: string; sealed: SecretSeal | null };
  let startsBefore = 0;
  if (opts.resume) {
    // One writer per run: locked before its blocks are read, so a second resume is refused, not run twice.
    locks.push(claimRun(store.path, store.getRun(opts.resume).run.id));
    const prev = store.getRun(opts.resume);
    if (prev.run.kind !== "tune") throw new UsageError(`run ${prev.run.id} is a ${prev.run.kind} run, not a tune run`);
    if (prev.run.status === "complete") throw new UsageError(`run ${prev.run.id} is already complete`);
    // A stall timeout or an API key may change between sessions; what defines the experiment may not.
    const flag = (k: string) => `--${k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
    const FLAGS: Record<string, string> = {
      knobs: "--knob",
      simSet: "--set",
      errorRate: "--error-rate",
      model: "--served-model",
    };
    const clash: string[] = [];
    const top = [
      "serverCmd",
      "knobs",
      "objective",
      "slo",
      "budget",
      "tolerance",
      "errorRate",
      "minBlocks",
      "profile",
      "timeScale",
      "simSet",
    ] as const;
    const storedCfg = prev.run.config as unknown as TuneConfig;
    for (const k of top) {
      const v = opts[k];
      // The same --server-cmd may be given again (it carries a secret the run does not store).
      if (k === "serverCmd" && v !== undefined && sealCommand(v as string).shown === storedCfg.serverCmd) continue;
      if (v !== undefined && !(Array.isArray(v) && v.length === 0)) clash.push(FLAGS[k] ?? flag(k));
    }
    for (const [k, v] of Object.entries(opts.workload ?? {}))
      if (v !== undefined && k !== "stallTimeoutMs" && k !== "apiKey") clash.push(FLAGS[k] ?? flag(k));
    for (const [k, v] of Object.entries(opts.given ?? {})) if (v !== undefined) clash.push(flag(k));
    if (clash.length)
      throw new UsageError(
        `--resume ${prev.run.id}: the run's own configuration is used; leave out ${clash.join(", ")}`,
        {
          hint: "or start a new tune run without --resume",
        },
      );
    runId = prev.run.id;
    // The receiver may listen elsewhere this time (its port busy); a run started without one stays without.
    if (opts.otlp && !storedCfg.otlp)
      throw new UsageError(
        `--resume ${prev.run.id}: the run was started without --otlp-receiver, so its blocks have no spans; leave it out`,
        { hint: "or start a new tune run with --otlp-receiver" },
      );
    // The stored command has placeholders for its secrets: take them again (same flag or the environment).
    const t = unsealTarget(
      runId,
      { serverCmd: storedCfg.serverCmd, variants: [], sealed: storedCfg.sealed ?? null },
      { serverCmd: opts.serverCmd },
    );
    cfg = { ...storedCfg, serverCmd: t.serverCmd ?? storedCfg.serverCmd };
    stored = { serverCmd: storedCfg.serverCmd, sealed: storedCfg.sealed ?? null };
    if (cfg.otlp) {
      cfg.otlp = { ...cfg.otlp, ...stripUndefined(opts.otlp ?? {}) };
      held.receiver = await startTuneReceiver(cfg.otlp);
    }
    for (const b of prev.blocks)
      if (b.status === "running" || b.status === "failed") store.updateBlock(b.id, { status: "discarded" });
    const s = prev.summaries?.tune as Partial<TuneResult> | undefined;
    elapsedBefore = (s?.elapsedS ?? 0) * 1000;
    startsBefore = prev.blocks.length;
    store.updateRun(runId, { status: "running", finishedAt: null, error: null });
  } else {
    cfg = resolveTuneConfig(opts);
    if (cfg.otlp) held.receiver = await startTuneReceiver(cfg.otlp);
    // Stored without its secrets: placeholders and keyed hashes.
    const sealed = sealTarget(cfg.serverCmd, []);
    stored = { serverCmd: sealed.serverCmd ?? cfg.serverCmd, sealed: sealed.sealed };
    runId = store.saveRun({
      kind: "tune",
      config: { ...cfg, ...stored } as unknown as Record<string, unknown>,
      environment: collectEnvironment(),
    }).id;
    locks.push(claimRun(store.path, runId));
  }
  const progress = (phase: TuneProgress["phase"], message: string) => opts.onProgress?.({ phase, runId, message });
  setInterruptNote(`finished blocks are saved in run ${runId} (${store.path}); continue with --resume ${runId}`);
  const logDir = opts.logDir ?? join(homedir(), ".inferscope", "logs", runId);
  const workload: Workload = { ...cfg.workload, apiKey };
  const scale = cfg.embedded?.timeScale ?? 1;
  const errors: string[] = [];
  const done = doneFromStore(store, runId);
  let starts = startsBefore;
  let interrupted: Error | null = null;
  let state: PlanState | null = cfg.model ? plan(cfg, done, starts, elapsedBefore) : null;
  progress(
    "start",
    `run ${runId}: ${cfg.candidates.filter((c) => !c.skipped).length} candidates, objective ${cfg.objective}`,
  );
  const rx = held.receiver;
  const spanSetup = rx ? serverSpanSetup(cfg, rx) : null;
  if (rx && spanSetup)
    progress(
      "otlp",
      `OTLP receiver on ${rx.endpoint}${rx.grpcEndpoint ? ` (gRPC ${rx.grpcEndpoint})` : ""}: ${spanSetup.hint ?? `each server started gets ${spanSetup.shown}`}`,
    );
  let spanBlocks = 0;
  // Receiver findings go to the block that follows them (a bad body sent while a server starts included).
  let findingsSeen = 0;

  for (;;) {
    if (state?.stop) break;
    if (opts.signal?.aborted) {
      interrupted = opts.signal.reason instanceof Error ? opts.signal.reason : new InterruptedError();
      break;
    }
    const c = state ? state.queue[0]! : 0;
    const round = state ? state.round : 1;
    const cand = cfg.candidates[c]!;
    const index = starts;
    const blockId = store.addBlock(runId, { index, variant: cand.id });
    starts++;
    let server: ServerHandle | null = null;
    try {
      progress("server", `block ${index + 1}: starting ${cand.id} (${cand.name})`);
      server = await start({
        name: cand.id,
        cmd: cfg.serverCmd,
        env: { ...spanSetup?.env, ...cand.env },
        unsetEnv: cand.unset,
        args: [...cand.args, ...(spanSetup?.args ?? [])],
        logFile: join(logDir, `block${index}-${cand.id}.log`),
        readyTimeoutMs: opts.readyTimeoutMs,
        graceMs: opts.graceMs,
        apiKey,
        cwd: opts.cwd,
        signal: opts.signal,
      });
      store.updateBlock(blockId, { server: server.describe() });
      if (!cfg.model) {
        const m = await modelFor(cfg, server.url, opts, deps);
        cfg.model = m.plan;
        cfg.modelInput = m.inputs;
        store.updateRun(runId, { config: { ...cfg, ...stored } as unknown as Record<string, unknown> });
        state = plan(cfg, done, starts, elapsedBefore + Date.now() - t0);
      }
      progress("block", `block ${index + 1}: ${cand.id} (${cand.name})`);
      // An engine that sent nothing over a whole block and its wait is not configured: later blocks do not wait.
      const silent = rx !== null && rx.requests === 0 && spanBlocks > 0;
      const res: BlockResult = await runWatchedBlock(runner, server.url, workload, {
        variant: cand.id,
        blockIndex: index,
        signal: opts.signal,
        server,
        spans: rx && cfg.otlp ? { receiver: rx, waitMs: silent ? 0 : cfg.otlp.waitMs } : undefined,
      });
      let spans: BlockSpanSummary | null = null;
      if (rx && res.spans) {
        const rf = rx.findings;
        spans = blockSpanSummary(
          res.spans,
          rf.slice(findingsSeen).map((f) => `${f.kind} (${f.status}): ${f.detail}`),
        );
        findingsSeen = rf.length;
        if (silent)
          spans.findings.push(
            "the engine has sent no span since the receiver started: this block did not wait for any",
          );
        spanBlocks++;
      }
      store.addRequests(runId, blockId, res.requests.map(toStored));
      storeBlockTelemetry(store, runId, blockId, res.telemetry);
      const ok = res.requests.filter((r) => r.ok);
      if (!ok.length) {
        const why = res.requests.find((r) => r.error)?.error ?? "no requests completed";
        throw new TargetError(`candidate ${cand.id} (${cand.name}): every request in block ${index} failed (${why})`);
      }
      const obj = blockObjective(res.requests, res.durationMs, cfg.objective, cfg.slo, scale);
      if (!obj) throw new TargetError(`candidate ${cand.id}: block ${index} gave no ${cfg.objective} value`);
      const d: DoneBlock = {
        index,
        round,
        candidate: c,
        value: obj.value,
        y: obj.y,
        w: obj.w,
        requests: res.requests.length,
        failedRequests: res.requests.length - ok.length,
        sloMet: obj.sloMet,
      };
      store.updateBlock(blockId, {
        status: "complete",
        finishedAt: new Date().toISOString(),
        summary: {
          ...d,
          y: Number.isFinite(d.y) ? d.y : null,
          durationMs: res.durationMs,
          warnings: res.warnings ?? [],
          ...(spans ? { otlp: spans } : {}),
        },
        server: server.describe(),
      });
      done.push(d);
      progress("block-done", `block ${index + 1}: ${cand.id} ${fmt(obj.value)} ${OBJECTIVES[cfg.objective].unit}`);
    } catch (err) {
      const e = err instanceof Error ? err : new Error(String(err));
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
      if (!(e instanceof TargetError) || !cfg.model) throw e;
      // A candidate whose server fails is out (with the reason); the race goes on without it.
      errors.push(e.message);
      cfg.candidates[c] = { ...cand, skipped: `failed: ${e.message.split("\n")[0]}` };
      store.updateRun(runId, { config: { ...cfg, ...stored } as unknown as Record<string, unknown> });
      if (c === 0) throw new TargetError(`the baseline failed, so no gain can be measured: ${e.message}`);
    } finally {
      if (server) await server.stop();
      // Joined (or the block failed): the next block's spans start from an empty receiver.
      rx?.clear();
    }
    state = plan(cfg, done, starts, elapsedBefore + Date.now() - t0);
    for (const [i, dr] of state.dropped)
      if (dr.afterBlock === index) progress("drop", `dropped ${cfg.candidates[i]!.id}: ${dr.reason}`);
  }
  const elapsedS = (elapsedBefore + Date.now() - t0) / 1000;
  const final = state ?? null;
  const result = summarize(cfg, store, runId, done, final, starts, elapsedS, errors);
  if (cfg.otlp && result.otlp) {
    result.otlp.endpoint = rx?.endpoint ?? null;
    result.otlp.grpcEndpoint = rx?.grpcEndpoint ?? null;
    result.otlp.serverFlags = spanSetup?.hint ? null : (spanSetup?.shown ?? null);
    result.otlp.hint = spanSetup?.hint ?? null;
  }
  if (interrupted) result.stop = { reason: "interrupted", message: interrupted.message, unseparated: [] };
  // Over, yet nothing chosen (a budget spent before two candidates were measured) is not "complete".
  else result.status = result.best === null ? "inconclusive" : "complete";
  store.setSummary(runId, "tune", result);
  store.finishRun(
    runId,
    interrupted ? "partial" : "complete",
    interrupted ? interrupted.message : errors.length ? errors.join("\n") : null,
  );
  if (!interrupted) progress("stop", result.stop.message);
  // An interrupted tune writes its partial report too (status partial, the blocks finished so far).
  if (opts.outDir) {
    const { writeTuneReport } = await import("./report.ts");
    try {
      result.report = { html: (await writeTuneReport(result, opts.outDir)).html };
    } catch (e) {
      throw new InputError(`${opts.outDir}: cannot write the report: ${plainReason(e)}`, {
        hint: `the run is stored; rebuild its report with: inferscope report ${runId} --out DIR`,
      });
    }
  }
  if (interrupted)
    throw new InterruptedError(
      `${interrupted.message}; ${done.length === 1 ? "1 block is" : `${done.length} blocks are`} saved in run ${runId} (${store.path})${result.report ? `, partial report in ${opts.outDir}` : ""}; continue with --resume ${runId}`,
    );
  return result;
}

/**
 * What each started server gets to send its spans to `rx`: the engine's catalog flags (the embedded sim: vLLM's), or
 * none and a hint for an engine the catalog cannot configure (or a command that already names the flag).
 */
function serverSpanSetup(
  cfg: TuneConfig,
  rx: OtlpReceiver,
): { args: string[]; env: Record<string, string>; shown: string; hint: string | null } {
  const flags = requestSpanFlags(cfg.embedded !== null, cfg.serverCmd, cfg.embedded?.timeScale ?? 1);
  const args = flags?.args(rx.endpoint) ?? [];
  if (!flags || (args[0] && cfg.serverCmd.includes(args[0])))
    return {
      args: [],
      env: {},
      shown: "",
      hint: flags
        ? `the server command sets ${args[0]} itself: it must point at ${rx.endpoint}/v1/traces`
        : engineFlagHint(rx.endpoint, rx.grpcEndpoint),
    };
  const env = Object.entries(flags.env).map(([k, v]) => `${k}=${v}`);
  return { args, env: flags.env, shown: [...env, ...args].join(" "), hint: null };
}

function fmt(x: number): string {
  if (!Number.isFinite(x)) return "n/a";
  const a = Math.abs(x);
  return x.toFixed(a >= 100 ? 0 : a >= 10 ? 1 : 2);
}

/** The winner's split against the baseline's, when both have joined requests. */
function comparisonOf(candidates: TuneCandidate[], best: TuneResult["best"], objective: Objective): string | null {
  const base = candidates[0]?.spans;
  const win = best && best.id !== "c0" ? candidates.find((c) => c.id === best.id)?.spans : null;
  return base?.joined && win?.joined ? compareSpans(base, win, best!.name, objective) : null;
}

/** The result: every candidate's prediction, posterior, measurement and fate; the best and its gain. */
export function summarize(
  cfg: TuneConfig,
  store: Store,
  runId: string,
  done: DoneBlock[],
  state: PlanState | null,
  restarts: number,
  elapsedS: number,
  errors: string[],
): TuneResult {
  const meta = OBJECTIVES[cfg.objective];
  const lower = meta.lowerIsBetter;
  const z95 = normalQuantile(0.975);
  const toUnit = (y: number) => (lower ? Math.exp(y) : Math.exp(-y));
  const interval = (m: number, s: number): Interval3 => {
    const a = toUnit(m - z95 * s);
    const b = toUnit(m + z95 * s);
    return { estimate: toUnit(m), low: Math.min(a, b), high: Math.max(a, b) };
  };
  const tau = state?.post.tau ?? 0.01;
  const measuredOf = (c: number) => {
    const bs = done.filter((d) => d.candidate === c && Number.isFinite(d.y));
    if (!bs.length) return null;
    const ym = mean(bs.map((b) => b.y));
    const v = (tau ** 2 + mean(bs.map((b) => b.w))) / bs.length;
    return { ym, v, blocks: bs.length, requests: bs.reduce((s, b) => s + b.requests - b.failedRequests, 0) };
  };
  const leader = state?.leader ?? null;
  const m0 = measuredOf(0);
  /** A candidate's measured gain over the baseline: only the two candidates' own blocks, τ² included. */
  const gainOf = (c: number): { absolute: Interval3; relative: Interval3 } | null => {
    const mb = measuredOf(c);
    if (!m0 || !mb || c === 0) return null;
    const d = m0.ym - mb.ym;
    const s = Math.sqrt(m0.v + mb.v);
    // Relative to the baseline's own value: the share of its time saved, or the throughput added.
    const rel = (x: number) => (lower ? 1 - Math.exp(-x) : Math.exp(x) - 1);
    const v0 = toUnit(m0.ym);
    const absOf = (x: number) => (lower ? v0 - v0 / Math.exp(x) : v0 * (Math.exp(x) - 1));
    return {
      relative: { estimate: rel(d), low: rel(d - z95 * s), high: rel(d + z95 * s) },
      absolute: { estimate: absOf(d), low: absOf(d - z95 * s), high: absOf(d + z95 * s) },
    };
  };
  const det = store.getRun(runId);
  // Each finished block's join as stored: a resumed run keeps the split of the blocks it did not run.
  const spanBlocks = det.blocks
    .filter((b) => b.status === "complete" && (b.summary as { otlp?: BlockSpanSummary } | null)?.otlp)
    .sort((a, b) => a.index - b.index)
    .map((b) => ({ index: b.index, candidate: b.variant, otlp: (b.summary as { otlp: BlockSpanSummary }).otlp }));
  const candidates: TuneCandidate[] = cfg.candidates.map((c, i) => {
    const pred: CandidatePrediction | undefined = cfg.model?.predictions[i];
    const m = measuredOf(i);
    const status: TuneCandidate["status"] = c.skipped
      ? "skipped"
      : i === leader
        ? "best"
        : state?.dropped.has(i)
          ? "dropped"
          : "alive";
    return {
      id: c.id,
      name: c.name,
      settings: c.settings,
      env: c.env,
      unset: c.unset,
      args: c.args,
      command: commandFor(c, cfg.serverCmd),
      status,
      skipped: c.skipped,
      predicted: pred?.value ?? null,
      posterior: state
        ? interval(state.post.mean[i]!, state.post.sd[i]!)
        : { estimate: Number.NaN, low: Number.NaN, high: Number.NaN },
      measured: m ? { ...interval(m.ym, Math.sqrt(m.v)), blocks: m.blocks, requests: m.requests } : null,
      gain: gainOf(i),
      probabilityBest: state?.pBest.get(i) ?? 0,
      dropped: state?.dropped.get(i) ?? null,
      ...(cfg.otlp ? { spans: candidateSpans(spanBlocks.filter((b) => b.candidate === c.id).map((b) => b.otlp)) } : {}),
    };
  });
  let best: TuneResult["best"] = null;
  // Choosing needs a comparison: with only one candidate measured (a budget of 1ms spent on the
  // baseline's first block), "best" would be a guess at P(best) ≈ 1/K, so none is named.
  const measuredCount = cfg.candidates.filter((_, i) => (measuredOf(i)?.blocks ?? 0) > 0).length;
  const runnable = cfg.candidates.filter((c) => !c.skipped).length;
  // Only when the run was cut short: a run that separated the candidates may have dropped the rest on the model's word.
  const cutShort = !state?.stop || state.stop.reason === "budget" || state.stop.reason === "interrupted";
  const tooFew = measuredCount < 2 && runnable > 1 && cutShort;
  if (leader !== null && !tooFew) {
    const c = cfg.candidates[leader]!;
    const mb = measuredOf(leader)!;
    const gain = leader !== 0 ? gainOf(leader) : null;
    best = {
      id: c.id,
      name: c.name,
      env: c.env,
      unset: c.unset,
      args: c.args,
      command: commandFor(c, cfg.serverCmd),
      objective: interval(mb.ym, Math.sqrt(mb.v)),
      gain,
      probabilityBest: state?.pBest.get(leader) ?? 0,
    };
  }
  const blocks = det.blocks
    .slice()
    .sort((a, b) => a.index - b.index || a.id - b.id)
    .map((b) => {
      const s = (b.summary ?? {}) as Record<string, number>;
      return {
        index: b.index,
        round: s.round ?? 0,
        candidate: b.variant,
        value: b.status === "complete" ? (s.value ?? null) : null,
        status: b.status,
        error: b.error,
      };
    });
  const warnings: string[] = [];
  if (cfg.model && !cfg.model.available)
    warnings.push(`no model prediction (${cfg.model.reason}): candidates are ranked by measurements only`);
  if (cfg.embedded && cfg.embedded.timeScale !== 1)
    warnings.push(
      `embedded sim at time scale ${cfg.embedded.timeScale}: times are multiplied back by ${cfg.embedded.timeScale}`,
    );
  // Per candidate, from the hardware's counters over its blocks' windows (with --telemetry).
  const telemetry = variantTelemetry(store, runId, det.blocks);
  const capped = cappedFinding(telemetry, { plural: "candidates", allCapped: "every candidate ran capped" });
  if (capped) warnings.push(capped);
  const K = cfg.candidates.filter((c) => !c.skipped).length;
  const bestBlocks = leader !== null ? (measuredOf(leader)?.blocks ?? 0) : 0;
  return {
    kind: "tune",
    runId,
    dbPath: store.path,
    status: "partial",
    objective: { name: cfg.objective, ...meta },
    slo: cfg.slo,
    baseline: { id: "c0", measured: m0 ? interval(m0.ym, Math.sqrt(m0.v)) : null },
    best,
    stop:
      tooFew && state?.stop
        ? {
            ...state.stop,
            message: `${state.stop.message}; ${measuredCount ? "only one candidate was measured" : "no candidate was measured"}, so none is chosen${state.stop.reason === "budget" ? " (the budget is too small to choose: allow more server starts or time)" : ""}`,
          }
        : (state?.stop ?? { reason: "budget", message: "stopped before any block finished", unseparated: [] }),
    restarts,
    elapsedS,
    gridStarts: K * Math.max(1, bestBlocks),
    candidates,
    blocks,
    model: {
      available: cfg.model?.available ?? false,
      reason: cfg.model?.reason ?? null,
      unmapped: cfg.model?.unmapped ?? [],
      notes: cfg.model?.notes ?? [],
      assumptions: cfg.modelInput?.assumptions ?? [],
    },
    errors,
    warnings,
    telemetry,
    ...(cfg.otlp
      ? {
          otlp: {
            endpoint: null,
            grpcEndpoint: null,
            serverFlags: null,
            hint: null,
            comparison: comparisonOf(candidates, best, cfg.objective),
            findings: spanBlocks.flatMap((b) =>
              b.otlp.findings.map((f) => `block ${b.index + 1} (${b.candidate}): ${f}`),
            ),
          },
        }
      : {}),
    method:
      `One block = a fresh server start + ${cfg.workload.numPrompts} measured requests (${cfg.workload.warmup} warm-up). ` +
      `Surrogate: log objective = model prediction + common bias + one correction per knob value + a per-candidate deviation ` +
      `(normal priors from the model's 80 % interval; sd ${cfg.model?.priors.interaction ?? 0.03} for combinations), block noise = restart-to-restart τ² ` +
      `(pooled over repeated candidates, prior τ₀ = ${cfg.model?.priors.tau0 ?? 0.01}) + the block's own request variance; refitted after every block. ` +
      `Round 1 runs the baseline, the most promising candidate, the baseline twice more (restart replicates: nothing is dropped before two of them), then the rest by expected gain (ties: fewer changes first); later rounds in a seeded random order. ` +
      `A candidate is dropped when the posterior says it is worse than the leader at one-sided level δ/K = ${cfg.errorRate}/${K}; ` +
      `the run stops when one candidate remains, or none can beat the leader by more than ${(cfg.tolerance * 100).toFixed(1)} % at that level ` +
      `(the leader having ≥ ${cfg.minBlocks} blocks), or the budget is spent.`,
  };
}
