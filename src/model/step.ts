// The decode step (models.md §5): t_step ≈ Σ max(FLOPs/(η_c·F), bytes/(η_m·BW)) + n_kernels·c + n_AR·t_AR + t_engine.
// Pure: evaluated once per parameter set (optimistic, central, pessimistic) and zipped into ranges.
import { paramBreakdown } from "./architecture.ts";
import type { AllReduceChoice, Engine } from "./collectives.ts";
import { chooseAllReduce } from "./collectives.ts";
import { expertFlopScale, ROUTING_KERNELS } from "./moe.ts";
import type { Format, TensorGroup } from "./quantization.ts";
import type { Range } from "./range.ts";
import type { Resolved } from "./resolve.ts";

// ---------------------------------------------------------------- constants with their sources

export interface EngineConstants {
  engineMs: Range;
  /** Host work per running sequence per step (scheduler bookkeeping, sampling, detokenize), µs: an assumption the
   * serving rows fit. */
  hostSeqUs: Range;
  kernelGraphUs: Range;
  kernelEagerUs: Range;
  source: string;
}

/** Fixed costs per engine. Kernel cost: models.md §5 (≈3 µs per op under graphs, 2–5 µs range; eager 10–25 µs launches). */
export const ENGINE_CONSTANTS: Record<Engine, EngineConstants> = {
  vllm: {
    engineMs: { low: 0.1, mid: 0.3, high: 0.8 },
    hostSeqUs: { low: 5, mid: 15, high: 40 },
    kernelGraphUs: { low: 2, mid: 3, high: 5 },
    kernelEagerUs: { low: 6, mid: 10, high: 20 },
    source:
      "models.md §5 (aiconfigurator 3 µs/op; eager launches 10–25 µs); engine time: scheduler, sampling, detokenize",
  },
  sglang: {
    engineMs: { low: 0.1, mid: 0.3, high: 0.8 },
    hostSeqUs: { low: 5, mid: 12, high: 30 },
    kernelGraphUs: { low: 2, mid: 3, high: 5 },
    kernelEagerUs: { low: 6, mid: 10, high: 20 },
    source: "models.md §5",
  },
  trtllm: {
    engineMs: { low: 0.05, mid: 0.2, high: 0.5 },
    hostSeqUs: { low: 2, mid: 6, high: 20 },
    kernelGraphUs: { low: 2, mid: 3, high: 5 },
    kernelEagerUs: { low: 6, mid: 10, high: 20 },
    source: "models.md §5 (PDL overlaps launches: +5 tok/s on B200)",
  },
  llamacpp: {
    engineMs: { low: 0.05, mid: 0.15, high: 0.4 },
    hostSeqUs: { low: 2, mid: 6, high: 20 },
    kernelGraphUs: { low: 1.5, mid: 2.5, high: 5 },
    kernelEagerUs: { low: 2.5, mid: 3.8, high: 7 },
    source: "models.md §5.1 (llama.cpp CUDA graphs save ≈ 0.87 ms per token on ≈ 700 kernels ⇒ ≈ 1.3 µs per launch)",
  },
  gptfast: {
    engineMs: { low: 0.02, mid: 0.05, high: 0.2 },
    hostSeqUs: { low: 1, mid: 3, high: 10 },
    kernelGraphUs: { low: 2, mid: 3, high: 5 },
    kernelEagerUs: { low: 6, mid: 10, high: 20 },
    source: "models.md §5 (torch.compile reduce-overhead = CUDA graphs)",
  },
  mlx: {
    engineMs: { low: 0.05, mid: 0.2, high: 0.5 },
    hostSeqUs: { low: 2, mid: 6, high: 20 },
    // Metal command buffers: no CUDA graphs; lazy evaluation batches a step's kernels into one buffer.
    kernelGraphUs: { low: 3, mid: 6, high: 12 },
    kernelEagerUs: { low: 3, mid: 6, high: 12 },
    source: "assumption (Metal dispatch a few µs per kernel; fitted on validation-public.md V9)",
  },
};

/** η_m: achieved fraction of spec bandwidth for weight streaming (models.md §5, §7: 0.6–0.85 implied *including* fixed costs, so the
 * streaming-only upper bound is a little higher: V5 F16 implies ≥ 0.82; aiconfigurator uses 0.8). */
export const ETA_M_SPEC: Range = { low: 0.6, mid: 0.8, high: 0.9 };
/** η_m relative to a measured copy bandwidth (the copy probe already includes the DRAM efficiency). */
export const ETA_M_MEASURED: Range = { low: 0.85, mid: 0.95, high: 1.0 };
/** η_c: achieved fraction of dense tensor throughput in decode/prefill GEMMs (assumption). */
export const ETA_C: Range = { low: 0.4, mid: 0.6, high: 0.75 };
/** Dequantizing GEMV kernels (llama.cpp k-quants) reach less of the bandwidth (validation V4/V5: 29–60 % implied). */
export const GGUF_KERNEL_EFF: Range = { low: 0.5, mid: 0.8, high: 1.0 };
/** Pipeline-parallel hand-off between stages (aiconfigurator: 10 µs). */
export const P2P_US: Range = { low: 5, mid: 10, high: 20 };
/** EP dispatch/combine all-to-all per call at decode sizes (assumption; DeepEP/pplx low-latency kernels). */
export const A2A_US: Range = { low: 15, mid: 25, high: 50 };

// ---------------------------------------------------------------- kernel counts

export interface KernelCount {
  perStep: number;
  perDenseLayer: number;
  perMoeLayer: number;
  perStepExtra: number;
  /** Of perMoeLayer: router GEMM, top-k, align/sort/permute and combine kernels (the MoE routing term). */
  moeRoutingPerLayer: number;
  /** MoE layers × moeRoutingPerLayer. */
  moeRoutingPerStep: number;
  basis: string;
}

/** Kernels launched per decode step (excluding all-reduces, costed separately). Counted from each engine's op sequence. */
export function kernelCount(r: Resolved): KernelCount {
  const a = r.arch;
  const e = r.engine;
  const aq = r.recipe.activationQuant ? 1 : 0;
  const attnQuantized = r.recipe.groups.attention.bpw < 16 && aq ? 2 : 0;
  let attn: number;
  let dense: number;
  let moe: number;
  let norms: number;
  let extra: number;
  let routing: number;
  if (e === "llamacpp") {
    // ggml graph without fusion: rms_norm+mul ×2, q/k/v, rope ×2, cache cpy ×2, KQ, softmax, KQV, permute/cont, o, add ×2.
    norms = 6;
    attn = a.attention === "mla" ? 20 : 12;
    dense = 5;
    moe = 9 + (a.moe?.shared ? 5 : 0);
    // ffn_gate_inp matmul, soft_max, argsort/top-k, get_rows, weights sum/div (mul_mat_id does the gather).
    routing = ROUTING_KERNELS.llamacpp.length;
    extra = 5;
  } else if (e === "mlx") {
    // mlx-lm: rms_norm ×2, q/k/v matmuls, q/k norms, rope ×2, cache update ×2, sdpa, o_proj, residual adds ×2.
    norms = 4;
    attn = a.attention === "mla" ? 16 : 10 + (a.qkNorm ? 2 : 0);
    dense = 4;
    // MoE: gate matmul, softmax, argpartition, gather, gather_qmm ×3, activation, weighted sum.
    moe = 9 + (a.moe?.shared ? 4 : 0);
    routing = ROUTING_KERNELS.mlx.length;
    extra = 6;
  } else if (e === "gptfast") {
    norms = 2;
    attn = a.attention === "mla" ? 9 : 5;
    dense = 3;
    moe = 6 + (a.moe?.shared ? 3 : 0);
    routing = ROUTING_KERNELS.gptfast.length;
    extra = 4;
  } else {
    // vLLM/SGLang/TRT-LLM with fused add+RMSNorm: 2 norms per layer.
    norms = e === "trtllm" ? 1 : 2;
    // GQA: qkv GEMM, rope, cache write, attention, o_proj. MLA (absorbed): fused q_a/kv_a GEMM, 2 norms, q_b GEMM,
    // rope, cache write, W_UK bmm, attention (+combine), W_UV bmm, o_proj.
    attn = a.attention === "mla" ? 11 : 5 + (a.qkNorm ? 1 : 0);
    // DSA indexer: wq_b, wk, k-norm, rope, weights proj, FP8 quant, cache write, logits, top-k.
    if (a.indexer) attn += 9;
    dense = 3 + 2 * aq;
    // MoE: router GEMM, top-k, align/sort, grouped GEMM 1, activation, grouped GEMM 2, combine (+ shared expert).
    moe = 7 + 2 * aq + (a.moe?.shared ? 3 + 2 * aq : 0);
    // router GEMM, top-k, align/sort, combine (moe.ts names them).
    routing = ROUTING_KERNELS[e].length;
    extra = e === "trtllm" ? 6 : 8;
  }
  attn += attnQuantized;
  const p = paramBreakdown(a);
  const perDenseLayer = norms + attn + dense;
  const perMoeLayer = norms + attn + moe;
  const perStep = p.denseLayerCount * perDenseLayer + p.moeLayerCount * perMoeLayer + extra;
  return {
    perStep,
    perDenseLayer,
    perMoeLayer,
    perStepExtra: extra,
    moeRoutingPerLayer: a.moe ? routing : 0,
    moeRoutingPerStep: a.moe ? routing * p.moeLayerCount : 0,
    basis: `${p.denseLayerCount} dense layers × ${perDenseLayer} + ${p.moeLayerCount} MoE layers × ${perMoeLayer} + ${extra} per step (embedding, final norm, LM head, sampling); ${e} op sequence, all-reduces excluded`,
  };
}

// ---------------------------------------------------------------- bytes and FLOPs per GPU

// Experts touched per step live in moe.ts with the other MoE terms; re-exported for existing callers.
export { expertsOnBusiestDevice, expertsTouched } from "./moe.ts";

export interface GroupLoad {
  group: TensorGroup | "kv" | "attentionCore";
  label: string;
  bytes: number;
  flops: number;
  format?: Format;
  params?: number;
  /** Tokens of the step these loads were built for (routed experts: sets M for the padded-tile FLOPs). */
  tokens?: number;
}

/** Bytes streamed and FLOPs per GPU for one decode step of B sequences (models.md §2–4), over all layers (PP stages run in sequence). */
export function decodeLoads(r: Resolved, expertsLocal: number, tokens = r.batch, ctx = r.contextLen): GroupLoad[] {
  const a = r.arch;
  const p = paramBreakdown(a);
  const g = r.recipe.groups;
  const tp = r.tp;
  const B = tokens;
  const loads: GroupLoad[] = [];
  const gg = a.ggufBytes;
  const byteOf = (params: number, f: Format) => (params * f.bpw) / 8;
  // Attention projections: divided by TP (models.md §2); GQA K/V duplicated when TP > KV heads.
  let attnPerGpu: number;
  if (a.attention === "gqa") {
    const kvProj = 2 * a.hidden * a.kvHeads * a.headDim;
    attnPerGpu = (p.attentionPerLayer - kvProj) / tp + kvProj / Math.min(tp, a.kvHeads);
  } else attnPerGpu = p.attentionPerLayer / tp;
  attnPerGpu = (attnPerGpu + p.indexerPerLayer / tp) * a.layers;
  loads.push({
    group: "attention",
    label: "attention projections",
    params: attnPerGpu,
    bytes: gg
      ? (gg.attention / ((p.attentionPerLayer + p.indexerPerLayer) * a.layers)) * attnPerGpu
      : byteOf(attnPerGpu, g.attention),
    flops: 2 * B * attnPerGpu,
    format: g.attention,
  });
  if (p.denseLayerCount > 0) {
    const par = (p.denseLayerCount * p.denseMlpPerLayer) / tp;
    loads.push({
      group: "denseMlp",
      label: a.moe ? "leading dense MLP layers" : "MLP",
      params: par,
      bytes: gg ? gg.denseMlp / tp : byteOf(par, g.denseMlp),
      flops: 2 * B * par,
      format: g.denseMlp,
    });
  }
  if (a.moe && p.moeLayerCount > 0) {
    const L = p.moeLayerCount;
    const router = (L * p.routerPerLayer) / tp;
    loads.push({
      group: "router",
      label: "router",
      params: router,
      bytes: gg ? gg.router / tp : byteOf(router, g.router),
      flops: 2 * B * router * tp,
      format: g.router,
    });
    if (a.moe.shared > 0) {
      const sh = (L * p.sharedParamsPerLayer) / tp;
      loads.push({
        group: "shared",
        label: "shared experts",
        params: sh,
        bytes: gg ? gg.shared / tp : byteOf(sh, g.shared),
        flops: 2 * B * sh,
        format: g.shared,
      });
    }
    const ex = (L * expertsLocal * p.expertParams) / r.moeTp;
    const perExpertGgufBytes = gg ? gg.experts / (L * a.moe.experts) : 0;
    loads.push({
      group: "experts",
      label: `routed experts (${expertsLocal.toFixed(1)} per layer on the busiest device)`,
      params: ex,
      bytes: gg ? (L * expertsLocal * perExpertGgufBytes) / r.moeTp : byteOf(ex, g.experts),
      // FLOPs: each token runs k experts; per device ≈ B·k/EP of them.
      flops: (2 * B * a.moe.topk * L * p.expertParams) / (r.moeTp * r.ep),
      format: g.experts,
      tokens: B,
    });
  }
  const head = (a.vocab * a.hidden) / tp;
  loads.push({
    group: "lmHead",
    label: "LM head",
    params: head,
    bytes: gg ? gg.lmHead / tp : byteOf(head, g.lmHead),
    flops: 2 * B * head,
    format: g.lmHead,
  });
  // KV cache and attention core.
  const kv = kvReadPerGpu(r, ctx);
  loads.push({ group: "kv", label: "KV cache", bytes: kv.bytesPerSeq * B, flops: 0 });
  loads.push({ group: "attentionCore", label: "attention core", bytes: 0, flops: attentionCoreFlops(r, ctx) * B });
  return loads;
}

/** KV bytes read per sequence per step on one GPU (models.md §3). */
export function kvReadPerGpu(
  r: Resolved,
  ctx: number,
): { bytesPerSeq: number; bytesPerTokenAllLayers: number; formula: string } {
  const a = r.arch;
  const kv = r.kv;
  if (a.attention === "mla" && a.mla) {
    const latentPerLayer = kv.mlaBytesPerLayer ?? (a.mla.kvLoraRank + a.mla.qkRopeHeadDim) * kv.bytesPerElement;
    if (a.indexer) {
      const idxPerLayer = a.indexer.headDim + (a.indexer.headDim / 128) * 4;
      const perLayer = ctx * idxPerLayer + Math.min(ctx, a.indexer.topk) * latentPerLayer;
      return {
        bytesPerSeq: perLayer * a.layers,
        bytesPerTokenAllLayers: (latentPerLayer + idxPerLayer) * a.layers,
        formula: `L·(ctx·${idxPerLayer} + min(ctx, ${a.indexer.topk})·${latentPerLayer}) B — DSA indexer scans all tokens, attention reads the top ${a.indexer.topk}; MLA latent replicated on every TP rank`,
      };
    }
    return {
      bytesPerSeq: ctx * latentPerLayer * a.layers,
      bytesPerTokenAllLayers: latentPerLayer * a.layers,
      formula: `L·ctx·${latentPerLayer} B (MLA latent, replicated on every TP rank)`,
    };
  }
  const perTokLayer = 2 * a.kvHeads * a.headDim * kv.bytesPerElement;
  const shard = Math.min(r.tp, a.kvHeads);
  const win = a.slidingWindow;
  const winLayers = win ? win.layers : 0;
  const fullLayers = a.layers - winLayers;
  const tokens = fullLayers * ctx + winLayers * Math.min(ctx, win?.window ?? ctx);
  return {
    bytesPerSeq: (tokens * perTokLayer) / shard,
    bytesPerTokenAllLayers: perTokLayer * a.layers,
    formula: `2·KV·d·bytes per layer per token / min(TP, KV)${win ? `; ${winLayers} windowed layers capped at ${win.window} tokens` : ""}`,
  };
}

function attentionCoreFlops(r: Resolved, ctx: number): number {
  const a = r.arch;
  if (a.attention === "mla" && a.mla) {
    const eff = a.indexer ? Math.min(ctx, a.indexer.topk) : ctx;
    const headSize = a.mla.kvLoraRank + a.mla.qkRopeHeadDim;
    const idx = a.indexer ? 2 * ctx * a.indexer.heads * a.indexer.headDim : 0;
    return (a.layers * (4 * eff * a.heads * headSize + idx)) / r.tp;
  }
  const win = a.slidingWindow;
  const winLayers = win ? win.layers : 0;
  const tokens = (a.layers - winLayers) * ctx + winLayers * Math.min(ctx, win?.window ?? ctx);
  return (4 * tokens * a.heads * a.headDim) / r.tp;
}

/** Peak dense TFLOPS for a format on this device. */
export function peakTflops(r: Resolved, f: Format | undefined): number {
  const t = r.gpu.tflops;
  if (f?.computeAs === "fp4" && t.fp4) return t.fp4;
  if ((f?.computeAs === "fp4" || f?.computeAs === "fp8") && t.fp8) return t.fp8;
  return t.bf16;
}

// ---------------------------------------------------------------- one evaluation

export interface ParamSet {
  /** Bandwidth efficiency vs the reference bandwidth (spec or measured). */
  etaM: number;
  etaC: number;
  ggufEff: number;
  kernelUs: number;
  engineMs: number;
  arUs: number;
  a2aUs: number;
  p2pUs: number;
  expertsLocal: number;
  /** Calibrated per-step fixed time replacing kernels + engine. */
  fixedMs?: number;
  /** Per-group multiplier on the read time (fitted format factors); replaces the GGUF kernel efficiency. */
  loadScale?: (l: GroupLoad) => number;
  /** Extra multiplier on routed-expert reads (calibrated small-M shortfall and maturity). */
  expertScale?: number;
}

export interface StepEval {
  weightsMs: number;
  kvMs: number;
  computeMs: number;
  kernelsMs: number;
  allReduceMs: number;
  extraCollectivesMs: number;
  allToAllMs: number;
  p2pMs: number;
  engineMs: number;
  totalMs: number;
  weightBytes: number;
  kvBytes: number;
  flops: number;
  loads: GroupLoad[];
}

export function referenceBandwidthGBs(r: Resolved): { gbs: number; measured: boolean } {
  const m = r.input.measuredBandwidthGBs ?? r.input.calibration?.measuredBandwidthGBs ?? r.gpu.measuredBandwidthGBs;
  return m ? { gbs: m, measured: true } : { gbs: r.gpu.bandwidthGBs, measured: false };
}

export interface CollectiveCounts {
  perToken: number;
  embedding: number;
  logitsGather: number;
  bytesEach: number;
  logitsBytes: number;
  moeAllToAll: number;
}

export function collectiveCounts(r: Resolved, tokens = r.batch): CollectiveCounts {
  const a = r.arch;
  const tp = r.tp;
  const p = paramBreakdown(a);
  const tpColl = tp > 1 && r.engine !== "llamacpp";
  const moeLayers = r.moeAllToAll ? p.moeLayerCount : 0;
  return {
    // 2 per layer: after the attention output projection and after the MLP/MoE block (collectives.md §1).
    perToken: tpColl ? 2 * a.layers - moeLayers : 0,
    embedding: tpColl ? 1 : 0,
    logitsGather: tpColl ? 1 : 0,
    bytesEach: tokens * a.hidden * 2,
    logitsBytes: (tokens * a.vocab * 2) / Math.max(1, tp),
    moeAllToAll: 2 * moeLayers,
  };
}

export function evalDecode(
  r: Resolved,
  P: ParamSet,
  ar: AllReduceChoice | null,
  kernels: KernelCount,
  pre?: GroupLoad[],
): StepEval {
  const loads = pre ?? decodeLoads(r, P.expertsLocal);
  const bw = referenceBandwidthGBs(r).gbs * P.etaM; // GB/s = bytes/µs·1e-3
  const ggufEff = r.recipe.gguf && r.recipe.groups.attention.bpw < 16 ? P.ggufEff : 1;
  let weightsMs = 0;
  let computeMs = 0;
  let kvMs = 0;
  let weightBytes = 0;
  let kvBytes = 0;
  let flops = 0;
  for (const l of loads) {
    const memMs = P.loadScale
      ? (l.bytes / (bw * 1e6)) * P.loadScale(l) * (l.group === "experts" ? (P.expertScale ?? 1) : 1)
      : l.bytes / (bw * 1e6 * (l.group === "kv" ? 1 : ggufEff));
    // Routed experts run padded tiles on the token axis (moe.ts: the kernel family's M_pad / M).
    const flopsRun = l.group === "experts" ? l.flops * expertFlopScale(r, l.tokens ?? r.batch) : l.flops;
    const compMs = flopsRun / (peakTflops(r, l.format) * 1e9 * P.etaC);
    flops += l.flops;
    if (l.group === "kv" || l.group === "attentionCore") {
      kvBytes += l.bytes;
      kvMs += memMs;
      if (l.group === "attentionCore") computeMs += compMs;
    } else {
      weightBytes += l.bytes;
      weightsMs += memMs;
      computeMs += Math.max(0, compMs - memMs);
    }
  }
  // Attention core runs against the KV read: only the part above the KV streaming time counts.
  const core = loads.find((l) => l.group === "attentionCore");
  if (core) {
    const coreMs = core.flops / (peakTflops(r, undefined) * 1e9 * P.etaC);
    computeMs -= coreMs;
    computeMs += Math.max(0, coreMs - kvMs);
  }
  const cc = collectiveCounts(r);
  const zero = r.input.zeroComm === true;
  const allReduceMs = zero || !ar ? 0 : (cc.perToken * P.arUs) / 1000;
  const extraCollectivesMs = zero || !ar ? 0 : ((cc.embedding + cc.logitsGather) * P.arUs) / 1000;
  const allToAllMs = zero ? 0 : (cc.moeAllToAll * P.a2aUs) / 1000;
  const p2pMs = zero ? 0 : ((r.pp - 1) * P.p2pUs) / 1000;
  let kernelsMs = (kernels.perStep * P.kernelUs) / 1000;
  let engineMs = P.engineMs;
  if (P.fixedMs !== undefined) {
    const k = kernelsMs + engineMs;
    kernelsMs = k > 0 ? (P.fixedMs * kernelsMs) / k : P.fixedMs;
    engineMs = P.fixedMs - kernelsMs;
  }
  const totalMs =
    weightsMs + kvMs + computeMs + kernelsMs + allReduceMs + extraCollectivesMs + allToAllMs + p2pMs + engineMs;
  return {
    weightsMs,
    kvMs,
    computeMs,
    kernelsMs,
    allReduceMs,
    extraCollectivesMs,
    allToAllMs,
    p2pMs,
    engineMs,
    totalMs,
    weightBytes,
    kvBytes,
    flops,
    loads,
  };
}

export function allReduceFor(r: Resolved, tokens = r.batch): AllReduceChoice | null {
  if (r.tp <= 1 || r.engine === "llamacpp") return null;
  return chooseAllReduce({
    engine: r.engine,
    gpu: r.gpu,
    link: r.link,
    n: r.tp,
    bytes: tokens * r.arch.hidden * 2,
    cudaGraphs: r.cudaGraphs,
    ncclProto: r.input.ncclProto,
    ncclAlgo: r.input.ncclAlgo,
    ncclFallback: r.input.ncclFallback,
    customAllReduce: r.input.customAllReduce,
  });
}
