// The deployment model: a step's duration as a sum of named components (pure; no clock, no I/O).
import type { Profile } from "./profile.ts";

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

// NCCL tuning.cc latency constants (µs), order LL, LL128, Simple (collectives.md §3.2).
const BASE_LAT: Record<Algorithm, [number, number, number]> = { Tree: [6.8, 14.0, 8.4], Ring: [6.6, 14.0, 8.4] };
const HW_LAT: Record<"nvlink" | "pcie", Record<Algorithm, [number, number, number]>> = {
  nvlink: { Tree: [0.6, 1.25, 4.0], Ring: [0.6, 1.9, 3.4] },
  pcie: { Tree: [1.0, 1.9, 4.0], Ring: [1.0, 2.5, 5.7] },
};
const PROTO_INDEX: Record<Protocol, 0 | 1 | 2> = { LL: 0, LL128: 1, Simple: 2 };
// Bandwidth factors applied to bus bandwidth (collectives.md §3.1, simplified: ring forms).
const PROTO_BW: Record<Protocol, number> = { LL: 0.5, LL128: 0.92, Simple: 1 };

/** NCCL's modelled single-node all-reduce time (µs) for one call of `bytes`. */
export function ncclAllReduceUs(
  protocol: Protocol,
  algorithm: Algorithm,
  n: number,
  link: "nvlink" | "pcie",
  bytes: number,
  busGBs: number,
): number {
  if (n <= 1) return 0;
  const i = PROTO_INDEX[protocol];
  const lat = BASE_LAT[algorithm][i] + 2 * (n - 1) * HW_LAT[link][algorithm][i];
  const algBw = busGBs * PROTO_BW[protocol] * (algorithm === "Ring" ? n / (2 * (n - 1)) : 0.5);
  return lat + bytes / (1000 * algBw);
}

/** Parses an NCCL_PROTO value into the enabled protocol set (null = automatic). */
export function parseNcclProto(value: string | undefined): Set<Protocol> | null {
  if (value === undefined || value.trim() === "") return null;
  const v = value.trim();
  const exclude = v.startsWith("^");
  const names = (exclude ? v.slice(1) : v)
    .split(",")
    .map((s) => s.trim().toLowerCase())
    .filter(Boolean);
  const map: Record<string, Protocol> = { ll: "LL", ll128: "LL128", simple: "Simple" };
  const listed = new Set<Protocol>();
  for (const n of names) {
    const p = map[n];
    if (!p) throw new Error(`NCCL_PROTO: unknown protocol "${n}" (LL, LL128, Simple)`);
    listed.add(p);
  }
  if (!exclude) return listed;
  const all = new Set<Protocol>(["LL", "LL128", "Simple"]);
  for (const p of listed) all.delete(p);
  return all;
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
  const link = profile.hardware.interconnect;
  // vLLM's custom all-reduce rule (collectives.md §7.1).
  let custom = tp > 1 && !knobs.disableCustomAllReduce;
  if (custom && ![2, 4, 6, 8].includes(tp)) {
    custom = false;
    reason.push(`custom all-reduce off: world size ${tp} not in {2, 4, 6, 8}`);
  } else if (custom && tp > 2 && link !== "nvlink") {
    custom = false;
    reason.push("custom all-reduce off: not supported on more than two PCIe-only GPUs");
  } else if (knobs.disableCustomAllReduce && tp > 1) reason.push("custom all-reduce off: --disable-custom-all-reduce");
  const algo = (knobs.ncclAlgo ?? "").trim().toLowerCase();
  const algorithm: Algorithm = algo.startsWith("tree")
    ? "Tree"
    : algo.startsWith("ring")
      ? "Ring"
      : profile.collectives.algorithm;
  const enabled = parseNcclProto(knobs.ncclProto);
  let candidates: Protocol[];
  if (enabled === null) {
    candidates = link === "nvlink" ? ["LL", "LL128", "Simple"] : ["LL", "Simple"];
  } else candidates = [...enabled];
  if (candidates.length === 0) candidates = ["Simple"];
  let protocol: Protocol;
  if (candidates.includes(profile.collectives.defaultProtocol)) protocol = profile.collectives.defaultProtocol;
  else {
    const bytes = profile.model.hidden * profile.model.activationBytes;
    protocol = candidates.reduce((best, p) =>
      perCallNcclUs(profile, tp, p, algorithm, bytes) < perCallNcclUs(profile, tp, best, algorithm, bytes) ? p : best,
    );
  }
  reason.push(
    enabled === null
      ? `NCCL protocol ${protocol} (automatic selection)`
      : `NCCL protocol ${protocol} (NCCL_PROTO=${knobs.ncclProto})`,
  );
  return {
    tp,
    graphsAllowed: !knobs.enforceEager,
    customAllReduce: custom,
    protocol,
    algorithm,
    specTokens: Math.max(0, knobs.specTokens ?? 0),
    reason,
  };
}

/** Effective per-call NCCL all-reduce cost in the decode loop (µs). */
export function perCallNcclUs(
  profile: Profile,
  tp: number,
  protocol: Protocol,
  algorithm: Algorithm,
  bytes: number,
): number {
  if (tp <= 1) return 0;
  const c = profile.collectives;
  const link = profile.hardware.interconnect;
  const bus = profile.hardware.linkGBs;
  const model = ncclAllReduceUs(protocol, algorithm, tp, link, bytes, bus);
  let given = c.perCallUs[protocol];
  if (given === undefined) {
    // Protocols without a measured figure inherit the measured ones' misfit to NCCL's model.
    const refBytes0 = profile.model.hidden * profile.model.activationBytes;
    const refTp0 = profile.engine.tensorParallelSize;
    const ratios = (Object.keys(c.perCallUs) as Protocol[]).map(
      (q) => c.perCallUs[q]! / ncclAllReduceUs(q, algorithm, refTp0, link, refBytes0, bus),
    );
    if (!ratios.length) return model * c.latencyScale + c.skewUs;
    given =
      (ncclAllReduceUs(protocol, algorithm, refTp0, link, refBytes0, bus) * ratios.reduce((a, b) => a + b, 0)) /
      ratios.length;
  }
  // A measured per-call figure holds at the profile's TP and the batch-1 size: scale its latency
  // part with NCCL's latency model for another TP, and add the extra bandwidth time for larger messages.
  const refTp = profile.engine.tensorParallelSize;
  const refBytes = profile.model.hidden * profile.model.activationBytes;
  const latNow = ncclAllReduceUs(protocol, algorithm, tp, link, 0, bus);
  const latRef = ncclAllReduceUs(protocol, algorithm, refTp, link, 0, bus);
  const bwNow = model - latNow;
  const bwRef = refTp > 1 ? ncclAllReduceUs(protocol, algorithm, refTp, link, refBytes, bus) - latRef : 0;
  return given * (latRef > 0 ? latNow / latRef : 1) + Math.max(0, bwNow - bwRef);
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

  constructor(profile: Profile, knobs: Knobs) {
    this.profile = profile;
    this.config = resolveConfig(profile, knobs);
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
    if (this.config.customAllReduce && bytes < this.profile.engine.customAllReduceMaxBytes && bytes % 16 === 0) {
      const us = c.customUs + bytes / (1000 * this.profile.hardware.linkGBs) + (eager ? c.eagerCallUs : 0);
      return { impl: "custom", us };
    }
    const us =
      perCallNcclUs(this.profile, this.config.tp, this.config.protocol, this.config.algorithm, bytes) +
      (eager ? c.eagerCallUs : 0);
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

  private scratch = new Float64Array(COMPONENTS.length);

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
