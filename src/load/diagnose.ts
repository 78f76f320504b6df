// Which limit bends the curve (pure): from the server's gauges sampled through one load level
// (running, waiting, KV usage, preemptions, read through the engine catalogs' concepts), the client's
// self-check and the hardware's telemetry, name the binding limit(s) with their evidence, or say
// "unknown" and which metric would decide it. Rules and thresholds: docs/metrics.md "Binding limit".

import type { Concept, Source } from "../metrics/concepts.ts";
import { detectEngines, NameIndex } from "../metrics/engines/index.ts";
import type { Exposition } from "../metrics/types.ts";
import { npMean, npPercentile } from "./npstats.ts";

/** One scrape of the server's load gauges; null where the engine does not export the concept. */
export interface ServerSample {
  /** Wall-clock ms (any origin; only differences are used). */
  tMs: number;
  running: number | null;
  waiting: number | null;
  /** KV-cache usage, 0–1. */
  kvUsage: number | null;
  /** Cumulative preemption counter. */
  preemptions: number | null;
  /** The step-tokens histogram's cumulative _sum and _count (tokens, steps); absent where not exported. */
  stepTokens?: number | null;
  steps?: number | null;
  /** The step-time histogram's cumulative _sum (seconds) and _count; absent where not exported (vLLM V1). */
  stepSeconds?: number | null;
  stepTimeCount?: number | null;
}

const SAMPLED: ReadonlyArray<[Concept, keyof Omit<ServerSample, "tMs">]> = [
  ["running", "running"],
  ["waiting", "waiting"],
  ["kv_usage", "kvUsage"],
  ["preemptions", "preemptions"],
];

/** Reads one sample from an exposition through the most likely engine's concept bindings. */
export function readServerSample(exp: Exposition, tMs: number): { sample: ServerSample; engine: string | null } {
  const sample: ServerSample = { tMs, running: null, waiting: null, kvUsage: null, preemptions: null };
  const engine = detectEngines(exp.families)[0]?.engine;
  if (!engine) return { sample, engine: null };
  const idx = new NameIndex(exp.families);
  for (const [concept, field] of SAMPLED) {
    for (const b of engine.concepts[concept] ?? []) {
      const s = b.source;
      if (s.kind !== "gauge" && s.kind !== "counter") continue;
      const fam = idx.get(s.metric);
      if (!fam) continue;
      const family = exp.families.find((f) => f.name === fam.name)!;
      // Summed over label sets: data-parallel engines export one child per engine.
      let v = 0;
      for (const x of family.samples) if (!x.name.endsWith("_created")) v += x.value;
      sample[field] = v * (s.kind === "gauge" ? (s.scale ?? 1) : 1);
      break;
    }
  }
  const tokens = histogramTotals(exp, engine.concepts.step_tokens);
  if (tokens) [sample.stepTokens, sample.steps] = tokens;
  const time = histogramTotals(exp, engine.concepts.step_time);
  if (time) [sample.stepSeconds, sample.stepTimeCount] = time;
  return { sample, engine: engine.id };
}

/** The first histogram binding's cumulative [_sum × scale, _count] over its matching children; null where none is exported. */
function histogramTotals(
  exp: Exposition,
  bindings: ReadonlyArray<{ source: Source }> | undefined,
): [number, number] | null {
  for (const b of bindings ?? []) {
    const src = b.source;
    if (src.kind !== "histogram") continue;
    const family = exp.families.find((f) => f.name === src.metric);
    if (!family) continue;
    let sum = 0;
    let count = 0;
    for (const x of family.samples) {
      if (src.match && Object.entries(src.match).some(([k, v]) => x.labels[k] !== v)) continue;
      if (x.name.endsWith("_sum")) sum += x.value;
      else if (x.name.endsWith("_count")) count += x.value;
    }
    return [sum * (src.scale ?? 1), count];
  }
  return null;
}

export interface Spread {
  mean: number;
  p90: number;
  max: number;
}

/** The server's side of one level, from its samples. */
export interface ServerLoadStats {
  samples: number;
  /** Seconds between the first and last sample (wall clock). */
  spanS: number;
  running: Spread | null;
  /**
   * The running batch's ceiling (max-num-seqs, slots) and where it came from: the flag or the server
   * command ("given"), the server's own statement (llama.cpp /props total_slots), or the sweep's highest.
   */
  ceiling: number | null;
  ceilingSource: CeilingSource | null;
  /** Of the samples with requests waiting, the share with the batch at its ceiling; null without a queue or a ceiling. */
  pinnedShare: number | null;
  waiting: (Spread & { growthPerS: number }) | null;
  kvUsage: Spread | null;
  preemptionsPerS: number | null;
  /** Tokens per engine step over the level (the step-tokens histogram's deltas), and the step budget when known. */
  stepTokensMean: number | null;
  tokenBudget: number | null;
  /** Mean step time over the level, ms (the engine's step-time histogram's deltas); null where not exported. */
  stepTimeMeanMs: number | null;
}

function spread(xs: number[]): Spread | null {
  if (!xs.length) return null;
  return { mean: npMean(xs), p90: npPercentile(xs, 90), max: Math.max(...xs) };
}

/** Least-squares slope of y against x (per second when x is in s); 0 with fewer than 2 distinct x. */
function slope(xs: number[], ys: number[]): number {
  const n = xs.length;
  if (n < 2) return 0;
  const mx = npMean(xs);
  const my = npMean(ys);
  let sxy = 0;
  let sxx = 0;
  for (let i = 0; i < n; i++) {
    sxy += (xs[i]! - mx) * (ys[i]! - my);
    sxx += (xs[i]! - mx) ** 2;
  }
  return sxx > 0 ? sxy / sxx : 0;
}

function present<K extends keyof ServerSample>(ss: readonly ServerSample[], k: K): ServerSample[] {
  return ss.filter((s) => s[k] !== null && Number.isFinite(s[k] as number));
}

export type CeilingSource = "given" | "server" | "observed";

export function summarizeServerSamples(
  samples: readonly ServerSample[],
  ceiling: { value: number; source: CeilingSource } | null,
  tokenBudget: number | null = null,
): ServerLoadStats {
  const ss = [...samples].sort((a, b) => a.tMs - b.tMs);
  const spanS = ss.length > 1 ? (ss.at(-1)!.tMs - ss[0]!.tMs) / 1000 : 0;
  const run = present(ss, "running");
  const wait = present(ss, "waiting");
  const kv = present(ss, "kvUsage");
  const pre = present(ss, "preemptions");
  const w = spread(wait.map((s) => s.waiting!));
  let pinnedShare: number | null = null;
  // Of the samples with a queue, the share with the batch full: the queue is there because the batch is.
  const queued = ss.filter((s) => s.running !== null && s.waiting !== null && s.waiting > 0);
  // Within one of it: a scrape between a request's finish and the next step's admission reads one slot free.
  const full = ceiling ? Math.max(1, ceiling.value - 1) : 0;
  if (ceiling && queued.length) pinnedShare = queued.filter((s) => s.running! >= full).length / queued.length;
  const preSpan = pre.length > 1 ? (pre.at(-1)!.tMs - pre[0]!.tMs) / 1000 : 0;
  const st = ss.filter((s) => s.stepTokens != null && s.steps != null);
  const dSteps = st.length > 1 ? st.at(-1)!.steps! - st[0]!.steps! : 0;
  const sh = ss.filter((s) => s.stepSeconds != null && s.stepTimeCount != null);
  const dTimed = sh.length > 1 ? sh.at(-1)!.stepTimeCount! - sh[0]!.stepTimeCount! : 0;
  return {
    samples: ss.length,
    spanS,
    running: spread(run.map((s) => s.running!)),
    ceiling: ceiling?.value ?? null,
    ceilingSource: ceiling?.source ?? null,
    pinnedShare,
    waiting: w
      ? {
          ...w,
          growthPerS: slope(
            wait.map((s) => s.tMs / 1000),
            wait.map((s) => s.waiting!),
          ),
        }
      : null,
    kvUsage: spread(kv.map((s) => s.kvUsage!)),
    preemptionsPerS: preSpan > 0 ? Math.max(0, pre.at(-1)!.preemptions! - pre[0]!.preemptions!) / preSpan : null,
    stepTokensMean: dSteps > 0 ? (st.at(-1)!.stepTokens! - st[0]!.stepTokens!) / dSteps : null,
    tokenBudget,
    stepTimeMeanMs: dTimed > 0 ? ((sh.at(-1)!.stepSeconds! - sh[0]!.stepSeconds!) * 1000) / dTimed : null,
  };
}

export type LimitId = "kv-capacity" | "max-num-seqs" | "token-budget" | "compute" | "host" | "client" | "power";

export interface BindingLimit {
  limit: LimitId;
  /** One line: the limit and the numbers that show it. */
  evidence: string;
  /** Server flags (or other changes) that relieve it, for this engine. */
  knobs: string[];
}

/** Everything about one load level the diagnosis reads. */
export interface LevelEvidence {
  /** Concurrency (users) or request rate (req/s). */
  level: number;
  mode: "rate" | "concurrency";
  engine: string | null;
  samples: readonly ServerSample[];
  /** Requests completed per second (the level's achieved rate). */
  requestThroughput: number;
  /** Achieved ÷ scheduled rate over their own spans (open loop), null otherwise. */
  achievedRatio: number | null;
  client: { saturated: boolean; eldP99Ms: number | null; reason?: string } | null;
  /** Share of the window with the GPU clock held by its power limit (telemetry), null without telemetry. */
  powerCappedShare: number | null;
  /** The level's step time, ms: its client TPOT p50 (one decode step of the level's running batch); null without one. */
  stepMs?: number | null;
  /** The GPU's busy share over the level's window, 0–1 (telemetry: DCGM_FI_DEV_GPU_UTIL), null without telemetry. */
  gpuBusy?: number | null;
}

/** Step time against the running batch: this level's against the lowest level's (the step at the smallest batch). */
export interface StepTrend {
  baseBatch: number;
  baseStepMs: number;
  batch: number;
  stepMs: number;
  /** stepMs ÷ baseStepMs − 1. */
  growth: number;
  /** (stepMs − baseStepMs) ÷ (batch − baseBatch); 0 where the batch did not grow. */
  msPerSeq: number;
}

export interface LevelDiagnosis {
  level: number;
  server: ServerLoadStats;
  /** Whether the server (or client) ran out of room at this level: a queue that stays or grows, or a lagging rate. */
  saturated: boolean;
  binding: BindingLimit[];
  /** Step time against batch from the lowest level to this one; null without a step time or a running batch at either. */
  stepTrend: StepTrend | null;
  /** Saturated with no limit named: what is missing and which metric would decide it; null otherwise. */
  unknown: string | null;
}

/** KV usage (p90) at or above this, with preemptions or a queue the batch ceiling does not explain, binds. */
export const KV_FULL = 0.9;
/** A queue (≥ 1 waiting on average) with the batch at its ceiling in at least this share of the queued samples binds. */
export const PINNED_SHARE = 0.5;
/** Steps carrying at least this share of the token budget on average, with a queue, bind. */
export const BUDGET_SHARE = 0.9;
/** The GPU held at its power limit for at least this share of the window binds. */
export const POWER_SHARE = 0.5;
/**
 * A step this much longer than the lowest level's: the batch's per-sequence work sets the pace, not the step's
 * fixed cost. A memory-bound decode step (weights read once per step) grows a few % from B = 1 to B = 64,
 * so past this share each sequence costs about as much step time as it brings throughput.
 */
export const STEP_GROWTH = 0.5;
/**
 * GPU busy (DCGM_FI_DEV_GPU_UTIL: the share of time any kernel runs) at or above this in a saturated window:
 * the GPU is the bottleneck (compute). Below it, the GPU waits on the host between kernels and steps: an engine
 * that does not overlap its scheduler and sampling with the GPU reads the host's share of each step as idle.
 */
export const GPU_BUSY = 0.7;

/** Per engine: the server flags that relieve each limit (a flag the engine lacks is left out). */
export const LIMIT_KNOBS: Record<string, Partial<Record<LimitId, string[]>>> = {
  vllm: {
    "max-num-seqs": ["--max-num-seqs (raise)", "more replicas (--data-parallel-size)"],
    "kv-capacity": [
      "--gpu-memory-utilization (raise)",
      "--kv-cache-dtype fp8",
      "--tensor-parallel-size (more KV per replica)",
      "--max-num-seqs (lower: fewer preemptions)",
    ],
    "token-budget": [
      "--max-num-batched-tokens (raise: fewer, larger prefill chunks)",
      "disaggregated prefill (prefill and decode on separate instances)",
    ],
    compute: [
      "--tensor-parallel-size (raise) or more replicas (--data-parallel-size)",
      "--quantization fp8",
      "speculative decoding off at high batch (drop --speculative-config)",
    ],
    host: [
      "--async-scheduling",
      "CUDA graphs (drop --enforce-eager; raise --max-cudagraph-capture-size)",
      "--api-server-count (raise)",
      "a faster CPU",
    ],
  },
  sglang: {
    "max-num-seqs": ["--max-running-requests (raise)", "more replicas (--dp-size)"],
    "kv-capacity": ["--mem-fraction-static (raise)", "--kv-cache-dtype fp8_e5m2", "--tp-size"],
    "token-budget": ["--chunked-prefill-size (raise)", "--max-prefill-tokens (raise)"],
  },
  llamacpp: {
    "max-num-seqs": ["--parallel / -np (raise; with --ctx-size raised to match)"],
    "kv-capacity": ["--ctx-size / -c (raise)", "--cache-type-k q8_0 --cache-type-v q8_0"],
    "token-budget": ["--batch-size / -b (raise)", "--ubatch-size / -ub (raise)"],
  },
  "*": {
    client: ["inferscope --workers N (more event loops)", "a second client host"],
    power: ["the board power limit (nvidia-smi -pl)", "cooling / clocks", "a lower batch ceiling"],
    compute: [
      "more GPUs (tensor parallel or replicas)",
      "a quantized model (fp8)",
      "speculative decoding off at high batch",
    ],
    host: ["CUDA graphs", "overlapped (async) scheduling", "more API-server processes", "a faster CPU"],
  },
};

export function knobsFor(engine: string | null, limit: LimitId): string[] {
  return LIMIT_KNOBS[engine ?? ""]?.[limit] ?? LIMIT_KNOBS["*"]?.[limit] ?? [];
}

const f2 = (x: number) => (Math.abs(x) >= 10 ? x.toFixed(0) : x.toFixed(x >= 1 ? 1 : 2));
const pct = (x: number) => `${Math.round(x * 100)} %`;
const METRICS_HINT =
  "the running and waiting gauges and KV usage (vllm:num_requests_running, vllm:num_requests_waiting, vllm:kv_cache_usage_perc) would decide it";

/** This level's step against the base (the lowest level's step and running batch); null without either. */
function stepTrendOf(st: ServerLoadStats, stepMs: number | null | undefined, base: StepBase | null): StepTrend | null {
  if (!base || stepMs == null || !(stepMs > 0) || !st.running) return null;
  const batch = st.running.mean;
  const dB = batch - base.batch;
  return {
    baseBatch: base.batch,
    baseStepMs: base.stepMs,
    batch,
    stepMs,
    growth: stepMs / base.stepMs - 1,
    msPerSeq: dB > 0 ? (stepMs - base.stepMs) / dB : 0,
  };
}

/** A level's step time: the engine's step-time histogram where exported, else the client's TPOT p50. */
function levelStepMs(e: LevelEvidence, st: ServerLoadStats): number | null {
  return st.stepTimeMeanMs ?? e.stepMs ?? null;
}

/** The step at the smallest batch: the lowest level's step time and running mean. */
export interface StepBase {
  batch: number;
  stepMs: number;
}

/**
 * Names the limit(s) binding at one level. `ceiling` is the batch ceiling (given, or the sweep's observed
 * maximum); `base` the lowest level's step time and batch, against which step-time growth is read.
 */
export function diagnoseLevel(
  e: LevelEvidence,
  ceiling: { value: number; source: CeilingSource } | null,
  tokenBudget: number | null = null,
  base: StepBase | null = null,
): LevelDiagnosis {
  const st = summarizeServerSamples(e.samples, ceiling, tokenBudget);
  const trend = stepTrendOf(st, levelStepMs(e, st), base);
  const binding: BindingLimit[] = [];
  const bind = (limit: LimitId, evidence: string) =>
    binding.push({
      limit,
      evidence,
      knobs: knobsFor(limit === "client" || limit === "power" ? null : e.engine, limit),
    });
  const at = `at ${f2(e.level)} ${e.mode === "rate" ? "req/s" : "users"}`;
  const queue = st.waiting !== null && st.waiting.mean >= 1;
  // A closed loop's queue levels off at users − ceiling: only an open loop's grows without bound.
  const growing = e.mode === "rate" && st.waiting !== null && st.waiting.growthPerS > 0 && queue;
  const lagging = e.achievedRatio !== null && e.achievedRatio < 0.9;
  const pinned = queue && st.pinnedShare !== null && st.pinnedShare >= PINNED_SHARE;
  // A closed loop keeps `level` requests out. With more users than a given ceiling and the batch at it,
  // the rest queue even where the waiting gauge cannot see them (llama.cpp holds requests beyond its
  // HTTP threads in the kernel's accept queue): the client's own count is the evidence.
  const atCeiling = closedLoopPinnedShare(e, st);
  const hiddenQueue = !pinned && atCeiling !== null && atCeiling >= PINNED_SHARE;
  const serverSaturated = queue || lagging || pinned || hiddenQueue;
  const saturated = serverSaturated || Boolean(e.client?.saturated);

  if (e.client?.saturated)
    bind(
      "client",
      `the client: ${e.client.reason ?? (e.client.eldP99Ms !== null ? `event-loop delay p99 ${f2(e.client.eldP99Ms)} ms` : "saturated")}`,
    );
  if (e.powerCappedShare !== null && e.powerCappedShare >= POWER_SHARE)
    bind("power", `power: capped ${pct(e.powerCappedShare)} of the window`);
  const kvFull = st.kvUsage !== null && st.kvUsage.p90 >= KV_FULL;
  const preempting = st.preemptionsPerS !== null && st.preemptionsPerS > 0;
  // A full KV cache binds once requests queue or the rate lags: preempting, or holding the queue back
  // with the batch below its ceiling. Preemptions alone, with no queue, cost recompute but bend nothing yet.
  if (kvFull && (queue || lagging) && (preempting || !pinned))
    bind(
      "kv-capacity",
      `KV capacity: usage ${f2(st.kvUsage!.p90)} (p90), ${f2(st.preemptionsPerS ?? 0)} preemptions/s ${at}${queue ? `, ${f2(st.waiting!.mean)} waiting` : ""}`,
    );
  const budgetFull =
    st.tokenBudget !== null && st.stepTokensMean !== null && st.stepTokensMean >= BUDGET_SHARE * st.tokenBudget;
  // A plateau only observed (no ceiling given) is the KV cache's or the token budget's when either is full.
  if (pinned && !((kvFull || budgetFull) && st.ceilingSource === "observed"))
    bind(
      "max-num-seqs",
      `max-num-seqs: running pinned at ${st.ceiling}${ceilingNote(st)} in ${pct(st.pinnedShare!)} of the samples with a queue, waiting ${growing ? `grows ${f2(st.waiting!.growthPerS)} req/s` : `mean ${f2(st.waiting!.mean)}`} ${at}`,
    );
  // Steps filled to their token budget while requests wait or the rate lags: prompts are chunked
  // through a budget the decode steps share (prefill interference). vLLM admits a request while any
  // budget is left, so the queue may sit in the running batch (requests mid-prefill), not in waiting.
  if (budgetFull && (queue || lagging))
    bind(
      "token-budget",
      `token budget (chunked prefill): ${f2(st.stepTokensMean!)} tokens per step (step-tokens histogram) against a budget of ${st.tokenBudget}, ${queue ? `${f2(st.waiting!.mean)} waiting` : `completions at ${pct(e.achievedRatio ?? 0)} of arrivals`}, running mean ${f2(st.running?.mean ?? 0)} ${at}`,
    );
  if (hiddenQueue && !binding.some((b) => b.limit === "max-num-seqs"))
    bind(
      "max-num-seqs",
      `max-num-seqs: running pinned at ${st.ceiling}${ceilingNote(st)} in ${pct(atCeiling!)} of the samples with ${f2(e.level)} users, ${f2(e.level - st.ceiling!)} beyond it waiting; the waiting gauge reads ${st.waiting ? `mean ${f2(st.waiting.mean)}` : "nothing"} (they queue before the engine's scheduler: for llama.cpp, raise --threads-http above the users to see them)`,
    );
  // Nothing holds the queue back at admission, yet the rate lags: the batch grows and its step with it.
  // GPU busy tells whose work the step is: the GPU's (compute) or the host's between kernels.
  let undecided: string | null = null;
  const admitted = !binding.some(
    (b) => b.limit === "max-num-seqs" || b.limit === "kv-capacity" || b.limit === "token-budget",
  );
  // The server's own saturation only: a client that lags its schedule says nothing about the step.
  if (serverSaturated && admitted && trend) {
    const grew = trend.growth > STEP_GROWTH;
    const steps = `step time ${f2(trend.baseStepMs)} ms at B = ${f2(trend.baseBatch)} → ${f2(trend.stepMs)} ms at B = ${f2(trend.batch)}`;
    const slopeText = grew
      ? `step time grows ${f2(trend.msPerSeq)} ms per sequence past B = ${f2(trend.baseBatch)} (${steps})`
      : `step time flat in B (${steps})`;
    const busy = e.gpuBusy ?? null;
    if (busy !== null && busy < GPU_BUSY) bind("host", `host: ${slopeText} and GPU busy ${pct(busy)} ${at}`);
    else if (busy !== null && grew) bind("compute", `compute: ${slopeText}, GPU busy ${pct(busy)} ${at}`);
    else if (grew)
      undecided = `compute or host: ${slopeText} ${at}; GPU busy would decide (telemetry: DCGM_FI_DEV_GPU_UTIL)`;
  }
  let unknown: string | null = null;
  if (saturated && !binding.length && undecided) unknown = undecided;
  else if (saturated && !binding.length) {
    if (!st.samples) unknown = `no server metrics were sampled: ${METRICS_HINT}`;
    else if (st.running === null || st.waiting === null)
      unknown = `the engine exports no running/waiting gauge: ${METRICS_HINT}`;
    else
      unknown =
        `a queue (${f2(st.waiting.mean)} waiting) with the batch below its ceiling (running p90 ${f2(st.running.p90)}${st.ceiling !== null ? ` of ${st.ceiling}` : ""})` +
        `${st.kvUsage ? ` and KV usage ${f2(st.kvUsage.p90)}` : ", KV usage not exported"}` +
        `${st.stepTokensMean !== null ? `, ${f2(st.stepTokensMean)} tokens per step${st.tokenBudget === null ? " (the token budget, --max-num-batched-tokens, was not given)" : ` of ${st.tokenBudget}`}` : ""}` +
        ": step time against batch (a step-time histogram) would tell compute from the host or prefill interference";
  }
  return { level: e.level, server: st, saturated, binding, stepTrend: trend, unknown };
}

/** Where the ceiling in an evidence line came from, unless the user or the command gave it. */
function ceilingNote(st: ServerLoadStats): string {
  if (st.ceilingSource === "observed") return " (the sweep's highest; the ceiling was not given)";
  return st.ceilingSource === "server" ? " (the server's stated slots)" : "";
}

/**
 * A closed loop with more users than a given or server-stated batch ceiling: the share of the samples with the batch
 * within one of it; null otherwise (open loop, an observed ceiling, no running gauge, users ≤ ceiling).
 */
function closedLoopPinnedShare(e: LevelEvidence, st: ServerLoadStats): number | null {
  if (e.mode !== "concurrency" || st.ceilingSource === "observed" || st.ceiling === null || e.level <= st.ceiling)
    return null;
  const run = e.samples.filter((s) => s.running !== null && Number.isFinite(s.running));
  if (!run.length) return null;
  const full = Math.max(1, st.ceiling - 1);
  return run.filter((s) => s.running! >= full).length / run.length;
}

export interface SweepDiagnosis {
  levels: LevelDiagnosis[];
  /**
   * The knee: the lowest level at which a server-side limit binds (the client's is named per level only), its limits, and the onset — the request rate the
   * server completed there (the throughput the limit allows). Null when no level binds.
   */
  knee: { level: number; limits: LimitId[]; onsetRate: number; evidence: string[] } | null;
}

/**
 * Diagnoses every level of a sweep. Without a given ceiling (`maxNumSeqs`), the highest running
 * count any level reached stands for it, so a batch that stops growing while a queue forms is seen.
 */
export function diagnoseSweep(
  levels: readonly LevelEvidence[],
  o: { maxNumSeqs?: number | null; serverMaxNumSeqs?: number | null; maxNumBatchedTokens?: number | null } = {},
): SweepDiagnosis {
  let ceiling: { value: number; source: CeilingSource } | null = null;
  if (o.maxNumSeqs) ceiling = { value: o.maxNumSeqs, source: "given" };
  else if (o.serverMaxNumSeqs) ceiling = { value: o.serverMaxNumSeqs, source: "server" };
  else {
    let max = 0;
    for (const l of levels) for (const s of l.samples) if (s.running !== null && s.running > max) max = s.running;
    if (max > 0) ceiling = { value: max, source: "observed" };
  }
  const sorted = [...levels].sort((a, b) => a.level - b.level);
  // The step at the smallest batch: the lowest level with a step time and a running batch.
  let base: StepBase | null = null;
  for (const l of sorted) {
    const st = summarizeServerSamples(l.samples, null);
    const stepMs = levelStepMs(l, st);
    if (stepMs !== null && stepMs > 0 && st.running) {
      base = { batch: st.running.mean, stepMs };
      break;
    }
  }
  const out = sorted.map((l) => diagnoseLevel(l, ceiling, o.maxNumBatchedTokens ?? null, base));
  // The client's limit is a caveat on the measurement, not the server's knee: it is named per level.
  const k = out.findIndex((d) => d.binding.some((b) => b.limit !== "client"));
  return {
    levels: out,
    knee:
      k < 0
        ? null
        : {
            level: out[k]!.level,
            limits: out[k]!.binding.map((b) => b.limit).filter((l) => l !== "client"),
            onsetRate: sorted[k]!.requestThroughput,
            evidence: out[k]!.binding.filter((b) => b.limit !== "client").map((b) => b.evidence),
          },
  };
}

/** The step token budget a server command sets: vLLM --max-num-batched-tokens, SGLang --chunked-prefill-size, llama.cpp -b/--batch-size. */
export function tokenBudgetFromCommand(cmd: string | null | undefined): number | null {
  return lastFlagValue(
    cmd,
    /(?:^|\s)(?:--max-num-batched-tokens|--chunked-prefill-size|--batch-size|-b)(?:=|\s+)(\d+)(?=\s|$)/g,
  );
}

/** The running batch's ceiling a server command sets: vLLM --max-num-seqs, SGLang --max-running-requests, llama.cpp -np/--parallel. */
export function batchCeilingFromCommand(cmd: string | null | undefined): number | null {
  return lastFlagValue(cmd, /(?:^|\s)(?:--max-num-seqs|--max-running-requests|--parallel|-np)(?:=|\s+)(\d+)(?=\s|$)/g);
}

function lastFlagValue(cmd: string | null | undefined, re: RegExp): number | null {
  if (!cmd) return null;
  let found: number | null = null;
  // The last one wins, as in the engines' own argument parsers.
  for (const m of cmd.matchAll(re)) found = Number(m[1]);
  return found !== null && found > 0 ? found : null;
}
