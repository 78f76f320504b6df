// The deployment model: a step's duration as a sum of named components (pure; no clock, no I/O).
// NCCL's cost and vLLM's custom all-reduce rule come from the analytical model (src/model/collectives.ts).
import { UsageError } from "../errors.ts";
import type { NcclCandidate } from "../model/collectives.ts";
import { customArDecision, ncclCandidates, ncclMenu, parseNcclList } from "../model/collectives.ts";
import { type Profile, profileHardware, type SimHardware } from "./profile.ts";

export type Protocol = "LL" | "LL128" | "Simple";
export type Algorithm = "Ring" | "Tree";

/** The knobs a real deployment reads from its flags and environment. */
export interface Knobs {
  tensorParallelSize?: number;
  /** The NCCL_PROTO environment value ("" or undefined = NCCL's automatic selection). */
  ncclProto?: string;
  /** The NCCL_ALGO environment value. */
  ncclAlgo?: string;
  disableCustomAllReduce?: boolean;
  enforceEager?: boolean;
  /** Speculative decoding: draft tokens per step (0 = off). */
  specTokens?: number;
}

/** What one engine step runs. */
export interface BatchShape {
  /** Prompt tokens computed this step (all prefill chunks). */
  prefillTokens: number;
  /** Sequences with a prefill chunk this step. */
  prefillSeqs: number;
  /** Σ over prefill chunks of tokens × (context before + tokens/2): attention work. */
  prefillAttnTokenCtx: number;
  /** Σ over prefill chunks of (context before + tokens): KV read by prefill attention. */
  prefillKvTokens: number;
  /** Sequences decoding one token (plus drafts) this step. */
  decodeSeqs: number;
  /** Σ of the decode sequences' context lengths. */
  decodeContextTokens: number;
}

export interface Component {
  name: string;
  ms: number;
}

export interface StepExplanation {
  components: Component[];
  stepMs: number;
  tokens: number;
  mode: "graph" | "piecewise" | "eager";
  kernels: number;
  allReduce: {
    impl: "none" | "custom" | "nccl";
    protocol: Protocol | null;
    algorithm: Algorithm | null;
    calls: number;
    bytesPerCall: number;
    perCallUs: number;
    kernelName: string | null;
  };
  allGather: { calls: number; perCallUs: number };
}

/**
 * A step this many times a lone decode's, bound by a per-sequence cost, counts as the batch holding requests
 * back (the limit truth's compute / host): each sequence then costs the step about as much as it adds.
 */
export const BATCH_BOUND_GROWTH = 2;

/** Component names, in the order explain() lists them. */
export const COMPONENTS = [
  "weights",
  "kv",
  "compute",
  "launch",
  "allreduce",
  "allgather",
  "sampling",
  "scheduler",
  "draft",
] as const;

const PROTOCOLS: Protocol[] = ["LL", "LL128", "Simple"];
const ALGORITHMS = ["Ring", "Tree", "NVLS"] as const;

/** Validates an NCCL_PROTO value's names: a typo must not silently run the default protocol. */
function checkNcclProto(value: string | undefined): void {
  if (value === undefined || value.trim() === "") return;
  const names = value
    .trim()
    .replace(/^\^/, "")
    .split(/[,\s]+/)
    .filter(Boolean);
  for (const n of names)
    if (!PROTOCOLS.some((p) => p.toLowerCase() === n.toLowerCase()))
      throw new UsageError(`NCCL_PROTO: unknown protocol "${n}" (LL, LL128, Simple)`);
}

/** Everything about a configuration that does not depend on the batch. */
export interface ResolvedConfig {
  tp: number;
  graphsAllowed: boolean;
  customAllReduce: boolean;
  protocol: Protocol;
  algorithm: Algorithm;
  specTokens: number;
  reason: string[];
}

export function resolveConfig(profile: Profile, knobs: Knobs): ResolvedConfig {
  const tp = knobs.tensorParallelSize ?? profile.engine.tensorParallelSize;
  const reason: string[] = [];
  const { gpu, link } = profileHardware(profile);
  // vLLM's custom all-reduce rule (collectives.md §7.1), size-independent part; the per-call size test is in allReduceCall.
  const car = customArDecision("vllm", gpu, link, tp, 0, knobs.disableCustomAllReduce ? false : undefined);
  if (tp > 1) reason.push(`custom all-reduce ${car.used ? "on" : "off"}: ${car.reason}`);
  checkNcclProto(knobs.ncclProto);
  const menu = ncclMenu(link, gpu, tp, knobs.ncclProto, knobs.ncclAlgo);
  // The sim runs Ring and Tree kernels; NVLS is left to the analytical model.
  const algoSet = parseNcclList(knobs.ncclAlgo?.trim(), ALGORITHMS);
  const named = algoSet ? [...algoSet.set].filter((a) => a === "Ring" || a === "Tree") : [];
  const allowed = named.length ? menu.algorithms.filter((a): a is Algorithm => a === "Ring" || a === "Tree") : [];
  const bytes = profile.model.hidden * profile.model.activationBytes;
  let algorithm: Algorithm = profile.collectives.algorithm;
  if (allowed.length && !allowed.includes(algorithm))
    algorithm = allowed.reduce((best, a) =>
      perCallNcclUs(profile, tp, profile.collectives.defaultProtocol, a, bytes) <
      perCallNcclUs(profile, tp, profile.collectives.defaultProtocol, best, bytes)
        ? a
        : best,
    );
  else if (algoSet && !named.length)
    reason.push(`NCCL_ALGO=${knobs.ncclAlgo}: no Ring/Tree named (the sim runs those only); using ${algorithm}`);
  const candidates = menu.protocols;
  let protocol: Protocol;
  if (candidates.includes(profile.collectives.defaultProtocol)) protocol = profile.collectives.defaultProtocol;
  else {
    protocol = candidates.reduce((best, p) =>
      perCallNcclUs(profile, tp, p, algorithm, bytes) < perCallNcclUs(profile, tp, best, algorithm, bytes) ? p : best,
    );
  }
  reason.push(
    knobs.ncclProto === undefined || knobs.ncclProto.trim() === ""
      ? `NCCL protocol ${protocol} (automatic selection)`
      : `NCCL protocol ${protocol} (NCCL_PROTO=${knobs.ncclProto})`,
  );
  return {
    tp,
    graphsAllowed: !knobs.enforceEager,
    customAllReduce: car.used,
    protocol,
    algorithm,
    specTokens: Math.max(0, knobs.specTokens ?? 0),
    reason,
  };
}

/** NCCL's cost model (src/model/collectives.ts) for one protocol/algorithm over n ranks of the profile's hardware. */
function ncclCost(hw: SimHardware, n: number, protocol: Protocol, algorithm: Algorithm): NcclCandidate {
  const menu = ncclMenu(hw.link, hw.gpu, n);
  return ncclCandidates(hw.link, hw.gpu, n, 0, menu).find((c) => c.protocol === protocol && c.algorithm === algorithm)!;
}

/**
 * Per-call NCCL all-reduce cost in the decode loop as a function of message bytes (µs): the profile's
 * calibrated figure at its own TP and batch-1 size, scaled by NCCL's model to another TP (latency
 * ratio) and to larger messages (extra bandwidth time).
 */
export function ncclCallModel(
  profile: Profile,
  tp: number,
  protocol: Protocol,
  algorithm: Algorithm,
): (bytes: number) => number {
  if (tp <= 1) return () => 0;
  const hw = profileHardware(profile);
  const c = profile.collectives;
  const refTp = profile.engine.tensorParallelSize;
  const refBytes = profile.model.hidden * profile.model.activationBytes;
  const now = ncclCost(hw, tp, protocol, algorithm);
  const modelUs = (k: NcclCandidate, bytes: number) => k.latencyUs + bytes / (1000 * k.algBwGBs);
  let given = c.perCallUs[protocol];
  if (given === undefined) {
    // Protocols without a measured figure inherit the measured ones' misfit to NCCL's model.
    const measured = PROTOCOLS.filter((q) => c.perCallUs[q] !== undefined);
    if (refTp <= 1 || !measured.length) return (bytes) => modelUs(now, bytes) * c.latencyScale + c.skewUs;
    const ratio =
      measured.reduce((a, q) => a + c.perCallUs[q]! / modelUs(ncclCost(hw, refTp, q, algorithm), refBytes), 0) /
      measured.length;
    given = modelUs(ncclCost(hw, refTp, protocol, algorithm), refBytes) * ratio;
  }
  if (refTp <= 1) return (bytes) => given + bytes / (1000 * now.algBwGBs);
  const ref = ncclCost(hw, refTp, protocol, algorithm);
  const latScale = ref.latencyUs > 0 ? now.latencyUs / ref.latencyUs : 1;
  const bwRefUs = refBytes / (1000 * ref.algBwGBs);
  const fixed = given * latScale;
  return (bytes) => fixed + Math.max(0, bytes / (1000 * now.algBwGBs) - bwRefUs);
}

/** Effective per-call NCCL all-reduce cost in the decode loop (µs). */
export function perCallNcclUs(
  profile: Profile,
  tp: number,
  protocol: Protocol,
  algorithm: Algorithm,
  bytes: number,
): number {
  return ncclCallModel(profile, tp, protocol, algorithm)(bytes);
}

const ELEMENT_NAME: Record<number, string> = { 2: "bf16", 4: "f32", 1: "f8e4m3" };

/**
 * The step-time model with all batch-independent constants folded in. explain() is the truth;
 * stepMs() is the same sum without allocating (the engine calls it every step).
 */
export class StepModel {
  readonly profile: Profile;
  readonly config: ResolvedConfig;
  private readonly tpScale: number;
  private readonly kvScale: number;
  private readonly bwBytesPerMs: number;
  private readonly flopsPerMs: number;
  private readonly kernels: number;
  private readonly arCount: number;
  private readonly agCount: number;
  private readonly bytesPerToken: number;
  private readonly linkBusGBs: number;
  private readonly ncclCallUs: (bytes: number) => number;

  constructor(profile: Profile, knobs: Knobs) {
    this.profile = profile;
    this.config = resolveConfig(profile, knobs);
    this.linkBusGBs = profileHardware(profile).link.ncclBusBwGBs;
    this.ncclCallUs = ncclCallModel(profile, this.config.tp, this.config.protocol, this.config.algorithm);
    const refTp = profile.engine.tensorParallelSize;
    this.tpScale = refTp / this.config.tp;
    // MLA's latent KV is replicated on every rank; GQA heads are split.
    this.kvScale = profile.model.attention === "mla" ? 1 : this.tpScale;
    this.bwBytesPerMs = profile.hardware.memBandwidthGBs * 1e6;
    this.flopsPerMs = profile.hardware.gemmTflops * 1e9;
    this.kernels = profile.model.layers * profile.cost.kernelsPerLayer + profile.cost.kernelsFixed;
    const tp = this.config.tp;
    this.arCount =
      tp > 1 ? profile.model.layers * profile.collectives.allReducesPerLayer + profile.collectives.extraAllReduces : 0;
    this.agCount = tp > 1 ? profile.collectives.allGathers : 0;
    this.bytesPerToken = profile.model.hidden * profile.model.activationBytes;
  }

  mode(b: BatchShape): "graph" | "piecewise" | "eager" {
    if (!this.config.graphsAllowed) return "eager";
    const decodeTokens = b.decodeSeqs * (1 + this.config.specTokens);
    return b.prefillTokens === 0 && decodeTokens <= this.profile.engine.maxCaptureSize ? "graph" : "piecewise";
  }

  tokens(b: BatchShape): number {
    return b.prefillTokens + b.decodeSeqs * (1 + this.config.specTokens);
  }

  /** Per-call all-reduce cost and implementation for a step of `tokens` tokens. */
  allReduceCall(tokens: number, eager: boolean): { impl: "custom" | "nccl"; us: number } {
    const bytes = tokens * this.bytesPerToken;
    const c = this.profile.collectives;
    // vLLM's should_custom_ar size test (collectives.md §7.1), with the profile's max_size.
    if (this.config.customAllReduce && bytes < this.profile.engine.customAllReduceMaxBytes && bytes % 16 === 0) {
      const us = c.customUs + bytes / (1000 * this.linkBusGBs) + (eager ? c.eagerCallUs : 0);
      return { impl: "custom", us };
    }
    const us = this.ncclCallUs(bytes) + (eager ? c.eagerCallUs : 0);
    return { impl: "nccl", us };
  }

  /** The named components of one step (ms). Order = COMPONENTS. */
  componentsInto(b: BatchShape, out: Float64Array): number {
    const p = this.profile;
    const cost = p.cost;
    const T = this.tokens(b);
    const seqs = b.prefillSeqs + b.decodeSeqs;
    if (T === 0) {
      out.fill(0);
      return 0;
    }
    let weightBytes = cost.denseWeightBytes * this.tpScale;
    const moe = p.model.moe;
    if (moe) {
      // Expected distinct experts touched per layer by T routed tokens.
      const touched = moe.experts * (1 - (1 - moe.topK / moe.experts) ** T);
      weightBytes += touched * moe.expertBytesPerGpu * this.tpScale;
    }
    const weights = weightBytes / this.bwBytesPerMs;
    const kvTokens = b.decodeContextTokens + b.prefillKvTokens + b.decodeSeqs * this.config.specTokens;
    const kv = (kvTokens * cost.kvBytesPerToken * this.kvScale) / this.bwBytesPerMs;
    const gemm = (T * cost.flopsPerToken * this.tpScale) / this.flopsPerMs;
    const attn = (b.prefillAttnTokenCtx * cost.attnFlopsPerTokenCtx * this.tpScale) / this.flopsPerMs;
    const compute = Math.max(0, gemm - weights) + attn;
    const mode = this.mode(b);
    const launchUs =
      mode === "graph" ? cost.launchUs.graph : mode === "piecewise" ? cost.launchUs.piecewise : cost.launchUs.eager;
    const launch = (this.kernels * launchUs) / 1000;
    const eager = mode === "eager";
    const ar = this.arCount ? (this.arCount * this.allReduceCall(T, eager).us) / 1000 : 0;
    const ag = this.agCount
      ? (this.agCount * (p.collectives.allGatherUs + (eager ? p.collectives.eagerCallUs : 0))) / 1000
      : 0;
    const sampling = (cost.samplingUs + cost.samplingUsPerSeq * seqs) / 1000;
    const scheduler = (cost.schedulerUs + cost.schedulerUsPerSeq * seqs) / 1000;
    const draft = this.config.specTokens && b.decodeSeqs ? (this.config.specTokens * cost.draftUsPerToken) / 1000 : 0;
    out[0] = weights;
    out[1] = kv;
    out[2] = compute;
    out[3] = launch;
    out[4] = ar;
    out[5] = ag;
    out[6] = sampling;
    out[7] = scheduler;
    out[8] = draft;
    return weights + kv + compute + launch + ar + ag + sampling + scheduler + draft;
  }

  /** Splits for the profiler: expert-weight share of `weights`, attention share of `compute` (ms). */
  splits(b: BatchShape): { expertWeightsMs: number; attnComputeMs: number } {
    const p = this.profile;
    const T = this.tokens(b);
    const moe = p.model.moe;
    const expertWeightsMs = moe
      ? (moe.experts * (1 - (1 - moe.topK / moe.experts) ** T) * moe.expertBytesPerGpu * this.tpScale) /
        this.bwBytesPerMs
      : 0;
    const attnComputeMs = (b.prefillAttnTokenCtx * p.cost.attnFlopsPerTokenCtx * this.tpScale) / this.flopsPerMs;
    return { expertWeightsMs, attnComputeMs };
  }

  /** All-reduces per step (0 without tensor parallelism). */
  get allReduceCalls(): number {
    return this.arCount;
  }

  /** All-reduce message bytes per token (hidden × activation bytes). */
  get allReduceBytesPerToken(): number {
    return this.bytesPerToken;
  }

  /**
   * What one step moves and computes per GPU, as the components model it: DRAM bytes (weights + KV, the
   * `weights` and `kv` components × bandwidth) and GEMM + attention FLOPs. For telemetry; not used for timing.
   */
  stepWork(b: BatchShape, components: Float64Array): { dramBytes: number; flops: number } {
    const T = this.tokens(b);
    const dramBytes = (components[0]! + components[1]!) * this.bwBytesPerMs;
    const flops =
      (T * this.profile.cost.flopsPerToken + b.prefillAttnTokenCtx * this.profile.cost.attnFlopsPerTokenCtx) *
      this.tpScale;
    return { dramBytes, flops };
  }

  private scratch = new Float64Array(COMPONENTS.length);

  /**
   * What bounds this step, if a per-sequence cost does: `compute` (the GEMM past the roofline's ridge, plus
   * prefill attention) or `host` (the per-sequence sampling and scheduler work) outweighs the rest of the
   * step, and the step takes at least BATCH_BOUND_GROWTH × a lone decode's. Past that batch a sequence adds
   * about as much step time as it brings throughput: a queue forms inside the batch (docs/sim.md "Limit truth").
   */
  perSeqBound(b: BatchShape): "compute" | "host" | null {
    const c = this.scratch;
    const step = this.componentsInto(b, c);
    if (step <= 0) return null;
    const cost = this.profile.cost;
    const host = ((cost.samplingUsPerSeq + cost.schedulerUsPerSeq) * (b.prefillSeqs + b.decodeSeqs)) / 1000;
    const bound = c[2]! > step / 2 ? "compute" : host > step / 2 ? "host" : null;
    if (!bound) return null;
    const ctx = b.decodeSeqs ? b.decodeContextTokens / b.decodeSeqs : 0;
    return step >= BATCH_BOUND_GROWTH * this.componentsInto(decodeBatch(1, ctx), c) ? bound : null;
  }

  /** Mean step time (ms) for this batch, before jitter. */
  stepMs(b: BatchShape): number {
    return this.componentsInto(b, this.scratch);
  }

  explain(b: BatchShape): StepExplanation {
    const arr = new Float64Array(COMPONENTS.length);
    const stepMs = this.componentsInto(b, arr);
    const T = this.tokens(b);
    const mode = this.mode(b);
    const call = this.arCount && T ? this.allReduceCall(T, mode === "eager") : null;
    return {
      components: COMPONENTS.map((name, i) => ({ name, ms: arr[i]! })),
      stepMs,
      tokens: T,
      mode,
      kernels: this.kernels,
      allReduce: {
        impl: call ? call.impl : "none",
        protocol: call?.impl === "nccl" ? this.config.protocol : null,
        algorithm: call?.impl === "nccl" ? this.config.algorithm : null,
        calls: this.arCount,
        bytesPerCall: T * this.bytesPerToken,
        perCallUs: call ? call.us : 0,
        kernelName: call ? this.allReduceKernelName(call.impl) : null,
      },
      allGather: { calls: this.agCount, perCallUs: this.agCount ? this.profile.collectives.allGatherUs : 0 },
    };
  }

  /** The kernel name a profiler shows for this configuration's all-reduce. */
  allReduceKernelName(impl: "custom" | "nccl"): string {
    const el = ELEMENT_NAME[this.profile.model.activationBytes] ?? "bf16";
    if (impl === "custom")
      return `void vllm::cross_device_reduce_1stage<__nv_bfloat16, ${this.config.tp}>(vllm::RankData*, vllm::RankSignals, vllm::Signal*, __nv_bfloat16*, int, int)`;
    const proto = this.config.protocol === "Simple" ? "SIMPLE" : this.config.protocol;
    return `ncclDevKernel_AllReduce_Sum_${el}_${this.config.algorithm.toUpperCase()}_${proto}`;
  }
}

/** Batch shapes for the common cases. */
export function decodeBatch(seqs: number, contextTokens: number): BatchShape {
  return {
    prefillTokens: 0,
    prefillSeqs: 0,
    prefillAttnTokenCtx: 0,
    prefillKvTokens: 0,
    decodeSeqs: seqs,
    decodeContextTokens: seqs * contextTokens,
  };
}

export function prefillBatch(promptTokens: number, contextBefore = 0): BatchShape {
  return {
    prefillTokens: promptTokens,
    prefillSeqs: 1,
    prefillAttnTokenCtx: promptTokens * (contextBefore + promptTokens / 2),
    prefillKvTokens: contextBefore + promptTokens,
    decodeSeqs: 0,
    decodeContextTokens: 0,
  };
}

/** The profile's true step decomposition for a batch (the hidden truth for tests). */
export function explainStep(profile: Profile, knobs: Knobs, batch: BatchShape): StepExplanation {
  return new StepModel(profile, knobs).explain(batch);
}
