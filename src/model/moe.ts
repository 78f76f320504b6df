// MoE physics as named terms: experts touched per step, expert-GEMM regime per kernel family, routing kernels per
// layer, shared experts, EP all-to-all vs TP all-reduce, MLA absorbed decode and FP8 block scales. Pure.
//
// What enters the step time: the touched-expert bytes (decodeLoads), the padded-M expert FLOPs (evalDecode's compute
// beyond bandwidth, via expertFlopScale) and the routing kernel count (kernelCount). The corpus-fitted factors in
// priors.ts multiply those parts as before; everything else here is stated beside the step, with its formula.
import { paramBreakdown } from "./architecture.ts";
import type { Engine } from "./collectives.ts";
import type { Range } from "./range.ts";
import type { Resolved } from "./resolve.ts";
import type { GroupLoad } from "./step.ts";

// ---------------------------------------------------------------- experts touched

/** Distinct experts touched by B tokens choosing k of E, uniform independent routing (models.md §2.1). */
export function expertsTouched(E: number, k: number, B: number): number {
  return E * (1 - (1 - k / E) ** B);
}

/** Experts read on the busiest device per MoE layer: mean E_touched/EP, worst device above it. */
export function expertsOnBusiestDevice(E: number, k: number, B: number, ep: number): Range {
  const touched = expertsTouched(E, k, B);
  const mean = touched / ep;
  if (ep <= 1) return { low: mean, mid: mean, high: mean };
  const cap = Math.min(E / ep, B * k);
  const sd = Math.sqrt(mean * (1 - 1 / ep));
  const max = Math.min(cap, mean + sd * Math.sqrt(2 * Math.log(ep)));
  return { low: mean, mid: (mean + max) / 2, high: max };
}

// ---------------------------------------------------------------- expert GEMM kernel families

export type MoeKernelFamilyId =
  | "triton-fused-moe"
  | "cutlass-grouped"
  | "deepgemm"
  | "llamacpp-mul-mat-id"
  | "trtllm-moe"
  | "mlx-gather-qmm"
  | "torch-gather";

export interface MoeKernelFamily {
  id: MoeKernelFamilyId;
  label: string;
  /** Rows each touched expert's GEMM is padded to at M tokens (the tile on the token axis; 1 = no padding). */
  paddedM: (M: number, tokens: number, experts: number) => number;
  /** How the tile is chosen, and where that comes from. */
  tile: string;
  source: string;
}

const ceilTo = (x: number, t: number) => Math.ceil(x / t) * t;

export const MOE_KERNEL_FAMILIES: Record<MoeKernelFamilyId, MoeKernelFamily> = {
  "triton-fused-moe": {
    id: "triton-fused-moe",
    label: "Triton fused_moe",
    // moe_align_block_size pads every expert's token list to BLOCK_SIZE_M; the untuned default config takes 16 while
    // the step's tokens ≤ E, else 64 (FP8 block-quantized: 64).
    paddedM: (M, tokens, E) => ceilTo(M, tokens <= E ? 16 : 64),
    tile: "BLOCK_SIZE_M 16 while tokens ≤ E, else 64; each expert's rows padded to it by moe_align_block_size",
    source:
      "vLLM model_executor/layers/fused_moe/fused_moe.py get_default_config and moe_align_block_size (SGLang ships the same kernel)",
  },
  "cutlass-grouped": {
    id: "cutlass-grouped",
    label: "CUTLASS grouped GEMM",
    // Small M runs swap-AB configs (tokens on the narrow N side of the MMA); larger M 64-row tiles.
    paddedM: (M) => (M <= 16 ? ceilTo(M, 16) : ceilTo(M, 64)),
    tile: "swap-AB configs for M ≤ 16 (16-wide token tiles), 64-row tiles above",
    source:
      "vLLM cutlass_moe / FlashInfer CUTLASS fused MoE (grouped GEMM over per-expert problems; SM90 swap-AB small-M path, vLLM issue #40016)",
  },
  deepgemm: {
    id: "deepgemm",
    label: "DeepGEMM FP8 block-scaled grouped GEMM",
    // Contiguous layout (prefill) aligns each expert to 128 rows; the masked layout used at decode runs BLOCK_M 64.
    paddedM: (M) => ceilTo(M, 64),
    tile: "masked layout at decode (BLOCK_M 64); contiguous layout aligns each expert's M to 128 (get_m_alignment_for_contiguous_layout)",
    source: "deepseek-ai/DeepGEMM README and m_grouped_gemm_fp8_fp8_bf16_nt_{contiguous,masked}",
  },
  "llamacpp-mul-mat-id": {
    id: "llamacpp-mul-mat-id",
    label: "llama.cpp mul_mat_id",
    // Up to 8 tokens per expert: vector kernels (MMVQ/MMV), one pass over the expert's weights, no padding; above, MMQ
    // tiles of 8–128 token columns.
    paddedM: (M) => (M <= 8 ? M : ceilTo(M, 8)),
    tile: "MMVQ (no padding) up to MMVQ_MAX_BATCH_SIZE 8 tokens per expert, MMQ tiles in steps of 8 above",
    source: "llama.cpp ggml-cuda mmvq.cuh (MMVQ_MAX_BATCH_SIZE 8) and mmq.cuh; CPU: ggml_compute_forward_mul_mat_id",
  },
  "trtllm-moe": {
    id: "trtllm-moe",
    label: "TensorRT-LLM MoE (CUTLASS grouped, min-latency kernels)",
    paddedM: (M) => ceilTo(M, 16),
    tile: "16-row tiles in its low-latency MoE kernels",
    source: "TensorRT-LLM cutlass_kernels/moe_gemm (grouped GEMM per expert)",
  },
  "mlx-gather-qmm": {
    id: "mlx-gather-qmm",
    label: "MLX gather_qmm",
    paddedM: (M) => (M <= 8 ? M : ceilTo(M, 32)),
    tile: "quantized matrix-vector kernels for few rows, 32-row tiles above",
    source: "mlx-lm SwitchGLU → mx.gather_qmm",
  },
  "torch-gather": {
    id: "torch-gather",
    label: "PyTorch gather + bmm (gpt-fast)",
    paddedM: (M) => M,
    tile: "per-token gathered expert weights, no tiles on the token axis",
    source: "pytorch-labs/gpt-fast mixtral-moe ConditionalFeedForward",
  },
};

/** The expert-GEMM kernel family an engine runs for this format on this device. */
export function moeKernelFamily(r: Resolved): MoeKernelFamily {
  const F = MOE_KERNEL_FAMILIES;
  const fmt = r.recipe.groups.experts.id;
  switch (r.engine) {
    case "llamacpp":
      return F["llamacpp-mul-mat-id"];
    case "mlx":
      return F["mlx-gather-qmm"];
    case "gptfast":
      return F["torch-gather"];
    case "trtllm":
      return F["trtllm-moe"];
    default:
      // FP8 with 128×128 block scales on Hopper: DeepGEMM; FP4 formats on Blackwell: CUTLASS grouped (FlashInfer).
      if (fmt === "fp8-block" && r.gpu.arch === "hopper") return F.deepgemm;
      if ((fmt === "nvfp4" || fmt === "mxfp4") && r.gpu.arch === "blackwell") return F["cutlass-grouped"];
      return F["triton-fused-moe"];
  }
}

/** Tokens per touched expert at a step of `tokens` tokens (M of the expert GEMMs). */
export function tokensPerExpert(r: Resolved, tokens = r.batch): number {
  const m = r.arch.moe;
  if (!m) return 1;
  return Math.max(1, (tokens * m.topk) / expertsTouched(m.experts, m.topk, tokens));
}

/**
 * Padded-to-real FLOP ratio of the routed-expert GEMMs: each touched expert's GEMM runs paddedM rows for M real
 * ones. Multiplies the expert FLOPs in the compute-beyond-bandwidth part (memory-bound at small M, so zero there).
 */
export function expertFlopScale(r: Resolved, tokens = r.batch): number {
  const m = r.arch.moe;
  if (!m) return 1;
  const M = (tokens * m.topk) / expertsTouched(m.experts, m.topk, tokens);
  const fam = moeKernelFamily(r);
  return Math.max(1, fam.paddedM(M, tokens, m.experts) / M);
}

// ---------------------------------------------------------------- routing kernels

/** Routing kernels per MoE layer, by engine: their count is kernelCount's moeRoutingPerLayer. */
export const ROUTING_KERNELS: Record<Engine, string[]> = {
  vllm: [
    "router GEMM",
    "top-k softmax (fused topk_softmax / grouped top-k)",
    "align/sort (moe_align_block_size; permute on the CUTLASS/DeepGEMM paths)",
    "unpermute + weighted reduce (moe_sum)",
  ],
  sglang: [
    "router GEMM",
    "top-k (biased grouped top-k)",
    "align/sort (moe_align_block_size; permute on the DeepGEMM path)",
    "unpermute + weighted reduce",
  ],
  trtllm: ["router GEMM", "top-k softmax", "expand/permute rows", "finalize (unpermute + weighted reduce)"],
  llamacpp: ["ffn_gate_inp mul_mat", "soft_max", "argsort top-k", "get_rows (route weights)", "weights sum/div"],
  mlx: ["gate matmul", "softmax", "argpartition", "weighted sum"],
  gptfast: ["gate linear", "top-k", "softmax"],
};

// ---------------------------------------------------------------- the named physics terms

export interface MoePhysicsTerm {
  name: string;
  label: string;
  formula: string;
  inputs: Record<string, unknown>;
  /** Where this enters the step: the decode term it lands in, or "stated beside the step". */
  entersAs: string;
  source: string;
}

const r4 = (x: number, d = 4) => Number(x.toPrecision(d));

/** Bytes of one activation element sent in the EP dispatch (FP8 + a 1×128 scale when activations are quantized). */
function dispatchBytesPerElement(r: Resolved): number {
  return r.recipe.activationQuant ? 1 + 4 / 128 : 2;
}

export interface EpVsTp {
  tpAllReduceBytesPerLayer: number;
  epDispatchBytesPerLayer: number;
  epCombineBytesPerLayer: number;
  /** Bandwidth part of one dispatch + combine per layer at the link's NCCL bus bandwidth, µs. */
  epBandwidthUsPerLayer: number;
  formula: string;
}

/** EP dispatch + combine bytes per layer (B·k·h per direction) against the TP all-reduce's B·h·2. */
export function epVsTp(r: Resolved, tokens = r.batch): EpVsTp {
  const a = r.arch;
  const k = a.moe?.topk ?? 0;
  const h = a.hidden;
  // Each device sends its tokens' k copies; the share routed to itself stays local. Without EP the alternative
  // compared is EP over the TP group.
  const group = r.ep > 1 ? r.ep : r.tp;
  const remote = group > 1 ? 1 - 1 / group : 0;
  const disp = tokens * k * h * dispatchBytesPerElement(r) * remote;
  const comb = tokens * k * h * 2 * remote;
  const bw = Math.max(r.link.ncclBusBwGBs, 0);
  return {
    tpAllReduceBytesPerLayer: tokens * h * 2,
    epDispatchBytesPerLayer: Math.round(disp),
    epCombineBytesPerLayer: Math.round(comb),
    epBandwidthUsPerLayer: bw > 0 ? (disp + comb) / (bw * 1e3) : 0,
    formula:
      "dispatch B·k·h·(1 B FP8 + scale, or 2 B) + combine B·k·h·2 B per layer, × (1 − 1/EP) leaving the device (EP = the TP group when not set); TP all-reduce B·h·2 B",
  };
}

export interface MlaAbsorbed {
  headsPerGpu: number;
  latentBytesPerTokenLayer: number;
  attnFlopsPerTokenLayer: number;
  /** FLOPs per byte of latent KV read: compute-heavy when it nears the device's ridge. */
  flopsPerLatentByte: number;
  absorbedFlopsPerTokenLayer: number;
  absorbedBytesPerLayer: number;
}

/** MLA absorbed decode (DeepSeek-V3 / GLM-5): attention over the kv_lora_rank + rope latent, W_UK/W_UV absorbed. */
export function mlaAbsorbed(r: Resolved, ctx = r.contextLen): MlaAbsorbed | undefined {
  const a = r.arch;
  if (a.attention !== "mla" || !a.mla) return undefined;
  const m = a.mla;
  const H = a.heads / r.tp;
  const latent = r.kv.mlaBytesPerLayer ?? (m.kvLoraRank + m.qkRopeHeadDim) * r.kv.bytesPerElement;
  const eff = a.indexer ? Math.min(ctx, a.indexer.topk) : ctx;
  // Scores q·[c_kv; k_rope] over the context, then the weighted sum of c_kv: 2·H·ctx·(2·kv_lora + rope).
  const attn = 2 * H * eff * (2 * m.kvLoraRank + m.qkRopeHeadDim);
  // q_nope·W_UK into the latent and the latent output through W_UV, once per token.
  const absorbed = 2 * H * m.kvLoraRank * (m.qkNopeHeadDim + m.vHeadDim);
  const wBytes = (H * m.kvLoraRank * (m.qkNopeHeadDim + m.vHeadDim) * r.recipe.groups.attention.bpw) / 8;
  return {
    headsPerGpu: H,
    latentBytesPerTokenLayer: latent,
    attnFlopsPerTokenLayer: attn,
    flopsPerLatentByte: eff > 0 ? attn / (eff * latent) : 0,
    absorbedFlopsPerTokenLayer: absorbed,
    absorbedBytesPerLayer: wBytes,
  };
}

/** FP8 128×128 block scales: their bytes (one FP32 per weight block, one per 1×128 activation group). */
export function fp8BlockScales(
  r: Resolved,
  loads: GroupLoad[],
  tokens = r.batch,
): { weightScaleBytes: number; activationScaleBytes: number; weightShare: number } | undefined {
  const fp8 = loads.filter((l) => l.format?.id === "fp8-block" && l.params);
  if (!fp8.length) return undefined;
  const params = fp8.reduce((s, l) => s + (l.params ?? 0), 0);
  const bytes = fp8.reduce((s, l) => s + l.bytes, 0);
  const w = (params / (128 * 128)) * 4;
  // Each quantized GEMM input carries one FP32 per 128 elements of its K: qkv/o and the expert GEMMs' inputs.
  const a = r.arch;
  const k = a.moe?.topk ?? 1;
  const perLayer = tokens * (2 * a.hidden + k * (a.hidden + (a.moe?.expertFfn ?? a.ffn)));
  const act = ((perLayer * a.layers) / 128) * 4;
  return { weightScaleBytes: w, activationScaleBytes: act, weightShare: bytes > 0 ? w / bytes : 0 };
}

/**
 * The MoE physics terms of one decode step, each with its formula, inputs, where it enters the step and its source.
 * `loads` are the step's decodeLoads; `arUsEach` the TP all-reduce's per-call latency; `a2aUsEach` the all-to-all's.
 */
export function moePhysics(
  r: Resolved,
  loads: GroupLoad[],
  k: { moeRoutingPerLayer: number; moeRoutingPerStep: number },
  arUsEach: number,
  a2aUsEach: number,
): MoePhysicsTerm[] {
  const a = r.arch;
  const out: MoePhysicsTerm[] = [];
  const m = a.moe;
  const pb = paramBreakdown(a);
  const B = r.batch;
  const peak = (f?: string) => {
    const t = r.gpu.tflops;
    if (f === "fp4" && t.fp4) return t.fp4;
    if ((f === "fp4" || f === "fp8") && t.fp8) return t.fp8;
    return t.bf16;
  };
  if (m) {
    const touched = expertsTouched(m.experts, m.topk, B);
    const busy = expertsOnBusiestDevice(m.experts, m.topk, B, r.ep);
    out.push({
      name: "moe-experts-touched",
      label: "experts touched per step",
      formula:
        "E_touched(B) = E·(1 − (1 − k/E)^B); busiest EP device: E_touched/EP + √(E_touched/EP·(1 − 1/EP)·2 ln EP)",
      inputs: {
        experts: m.experts,
        topk: m.topk,
        batch: B,
        ep: r.ep,
        touchedPerLayer: r4(touched),
        busiestDevice: { low: r4(busy.low), mid: r4(busy.mid), high: r4(busy.high) },
      },
      entersAs: "moe-experts (bytes: each touched expert's weights streamed once per layer)",
      source: "models.md §2.1 (uniform independent routing; real routing is skewed: fewer distinct experts)",
    });
    const fam = moeKernelFamily(r);
    const M = (B * m.topk) / touched;
    const Mp = fam.paddedM(M, B, m.experts);
    const ex = loads.find((l) => l.group === "experts");
    const fmt = r.recipe.groups.experts;
    const bytesPerParam = fmt.bpw / 8;
    const ridge = ((peak(fmt.computeAs) * 1e12) / (r.gpu.bandwidthGBs * 1e9)) * (0.6 / 0.8);
    // Padded intensity: 2·M_pad FLOPs per weight element over bytesPerParam bytes.
    const intensity = (2 * Mp) / bytesPerParam;
    const regime = intensity < ridge ? "memory-bound" : "compute-bound";
    // The M at which the padded GEMM reaches the ridge (tokens per expert).
    let mStar = 1;
    while (
      mStar < 1e5 &&
      (2 * fam.paddedM(mStar, Math.max(B, (mStar * m.experts) / m.topk), m.experts)) / bytesPerParam < ridge
    )
      mStar *= 2;
    out.push({
      name: "moe-expert-gemm",
      label: `expert GEMMs (${fam.label})`,
      formula:
        "t = max(bytes_touched/(η_m·BW), 2·E_touched·M_pad·params_e/(η_c·F)); M = B·k/E_touched, M_pad = M rounded up to the family's tile",
      inputs: {
        family: fam.id,
        tile: fam.tile,
        tokensPerExpert: r4(M),
        paddedM: Mp,
        flopScale: r4(Mp / M),
        intensityFlopsPerByte: r4(intensity),
        ridgeFlopsPerByte: r4(ridge),
        regime,
        computeBoundFromM: mStar >= 1e5 ? "beyond 1e5" : `≈ ${mStar}`,
        expertGB: ex ? r4(ex.bytes / 1e9) : 0,
      },
      entersAs:
        "moe-experts (streaming, × the fitted small-M factor) and compute beyond bandwidth (padded FLOPs above the streaming time)",
      source: `${fam.source}; ridge = F_peak·η_c / (BW·η_m) with η_c 0.6, η_m 0.8`,
    });
    out.push({
      name: "moe-routing-kernels",
      label: "router, top-k, permute and unpermute kernels",
      formula: "MoE layers · n_routing(engine) · c_kernel (+ router weights BF16 ÷ TP)",
      inputs: {
        engine: r.engine,
        kernelsPerLayer: ROUTING_KERNELS[r.engine],
        perLayer: k.moeRoutingPerLayer,
        perStep: k.moeRoutingPerStep,
        moeLayers: pb.moeLayerCount,
        routerFlopsPerStep: 2 * B * pb.routerPerLayer * pb.moeLayerCount,
      },
      entersAs: "moe-routing (kernel count × the fitted per-kernel cost)",
      source:
        "each engine's op sequence (vLLM fused_moe layer, SGLang topk.py, TRT-LLM MoE plugin, llama.cpp build_moe_ffn)",
    });
    if (m.shared > 0) {
      const sh = loads.find((l) => l.group === "shared");
      out.push({
        name: "moe-shared-experts",
        label: "shared experts (dense path per token)",
        formula: "MoE layers · shared · 3·h·ffn_shared ÷ TP · bpw/8 bytes; FLOPs 2·B·params (M = B: every token)",
        inputs: {
          shared: m.shared,
          GB: sh ? r4(sh.bytes / 1e9) : 0,
          M: B,
          flops: sh ? sh.flops : 0,
        },
        entersAs: "moe-shared",
        source: "models.md §1.1 (shared experts run for every token, like a dense MLP)",
      });
    }
    const c = epVsTp(r);
    const L = pb.moeLayerCount;
    out.push({
      name: "moe-ep-vs-tp",
      label: "EP all-to-all vs TP all-reduce",
      formula: `${c.formula}; t_EP = 2·(t_A2A + bytes/(2·busBw)), t_TP = t_AR(B·h·2)`,
      inputs: {
        tpAllReduceBytesPerLayer: c.tpAllReduceBytesPerLayer,
        epDispatchBytesPerLayer: c.epDispatchBytesPerLayer,
        epCombineBytesPerLayer: c.epCombineBytesPerLayer,
        bytesRatio:
          c.tpAllReduceBytesPerLayer > 0
            ? r4((c.epDispatchBytesPerLayer + c.epCombineBytesPerLayer) / c.tpAllReduceBytesPerLayer)
            : 0,
        tpUsPerLayer: r4(arUsEach),
        epUsPerLayer: r4(2 * a2aUsEach + c.epBandwidthUsPerLayer),
        epBandwidthUsPerLayer: r4(c.epBandwidthUsPerLayer),
        moeLayers: L,
        used: r.moeAllToAll ? "ep-alltoall" : r.tp > 1 ? "tp-allreduce" : "none",
      },
      entersAs: r.moeAllToAll
        ? "alltoall (latency only; the bandwidth part is stated here)"
        : "allreduce (the MoE block ends in the TP all-reduce); the EP figure is the alternative",
      source:
        "collectives.md §1 (EP replaces the MoE all-reduce by dispatch + combine); DeepEP low-latency kernels dispatch FP8",
    });
  }
  const mla = mlaAbsorbed(r);
  if (mla) {
    const ridgeBf16 = ((r.gpu.tflops.bf16 * 1e12) / (r.gpu.bandwidthGBs * 1e9)) * (0.6 / 0.8);
    out.push({
      name: "mla-absorbed",
      label: "MLA absorbed decode",
      formula:
        "attention over the latent: 2·H·ctx·(2·kv_lora + rope) FLOPs per token per layer on ctx·(kv_lora + rope)·bytes; absorbed W_UK/W_UV: 2·H·kv_lora·(d_nope + d_v) FLOPs per token",
      inputs: {
        headsPerGpu: mla.headsPerGpu,
        contextLen: r.contextLen,
        latentBytesPerTokenLayer: mla.latentBytesPerTokenLayer,
        attnFlopsPerTokenLayer: mla.attnFlopsPerTokenLayer,
        flopsPerLatentByte: r4(mla.flopsPerLatentByte),
        ridgeFlopsPerByteBf16: r4(ridgeBf16),
        regime: mla.flopsPerLatentByte < ridgeBf16 ? "memory-bound" : "compute-bound",
        absorbedFlopsPerTokenLayer: mla.absorbedFlopsPerTokenLayer,
        absorbedWeightBytesPerLayer: Math.round(mla.absorbedBytesPerLayer),
      },
      entersAs: "kv (latent reads) and compute beyond bandwidth (attention core above the KV streaming time)",
      source: "DeepSeek-V2/V3 papers (weight absorption), FlashMLA; models.md §3",
    });
  }
  const fp8 = fp8BlockScales(r, loads);
  if (fp8)
    out.push({
      name: "fp8-block-scales",
      label: "FP8 block-scale overhead",
      formula:
        "weights: 4 B per 128×128 block (bpw 8 + 32/16384); activations: 4 B per 1×128 group, one quantize kernel per GEMM input; dequant: one scale FMA per 128-K block in the GEMM",
      inputs: {
        weightScaleMB: r4(fp8.weightScaleBytes / 1e6),
        weightScaleShare: r4(fp8.weightShare),
        activationScaleKB: r4(fp8.activationScaleBytes / 1e3),
      },
      entersAs: "weights (scales in bpw), kernels (+2 quantize kernels per MLP block), compute (≈ 1/64 extra FLOPs)",
      source:
        "DeepSeek-V3 technical report §3.3 (fine-grained FP8: 1×128 activation tiles, 128×128 weight blocks); DeepGEMM",
    });
  return out;
}

/** Lists each physics term's name under the decode term it lands in (`inputs.physics`). */
export function attachPhysics(terms: { name: string; inputs: Record<string, unknown> }[], physics: MoePhysicsTerm[]) {
  for (const p of physics) {
    const t = terms.find((x) => x.name === p.entersAs.split(" ")[0]);
    if (!t) continue;
    const list = (t.inputs.physics as string[] | undefined) ?? [];
    list.push(p.name);
    t.inputs.physics = list;
  }
}

const num = (x: unknown, d = 2) => (typeof x === "number" ? x.toFixed(d) : String(x));

/** One plain sentence per physics term (model explain). */
export function physicsSentence(t: MoePhysicsTerm): string {
  const i = t.inputs as Record<string, any>;
  switch (t.name) {
    case "moe-experts-touched":
      return `Experts touched: ${i.topk} of ${i.experts} per token at batch ${i.batch} touch ${num(i.touchedPerLayer, 1)} distinct experts per layer (${t.formula.split(";")[0]})${i.ep > 1 ? `; the busiest of ${i.ep} EP devices holds ${num(i.busiestDevice.mid, 1)} (${num(i.busiestDevice.low, 1)}–${num(i.busiestDevice.high, 1)})` : ""}. Enters ${t.entersAs}.`;
    case "moe-expert-gemm":
      return `Expert GEMMs run ${t.label.replace(/^expert GEMMs \(|\)$/g, "")}: M = ${num(i.tokensPerExpert)} token(s) per touched expert, padded to ${i.paddedM} (${i.tile}), so ${num(i.intensityFlopsPerByte, 0)} FLOPs per weight byte against a ridge of ${num(i.ridgeFlopsPerByte, 0)}: ${i.regime}; compute-bound from M ${i.computeBoundFromM}. Source: ${t.source}.`;
    case "moe-routing-kernels":
      return `Routing kernels per MoE layer (${i.engine}): ${(i.kernelsPerLayer as string[]).join(", ")} → ${i.perStep} per step over ${i.moeLayers} MoE layers; enters ${t.entersAs}.`;
    case "moe-shared-experts":
      return `Shared experts: ${i.shared} per MoE layer on the dense path, every token (M = ${i.M}), ${num(i.GB, 3)} GB per step.`;
    case "moe-ep-vs-tp":
      return `EP vs TP per MoE layer: dispatch ${i.epDispatchBytesPerLayer} B + combine ${i.epCombineBytesPerLayer} B leave each device (${num(i.bytesRatio, 1)}× the all-reduce's ${i.tpAllReduceBytesPerLayer} B); ≈ ${num(i.epUsPerLayer, 1)} µs as all-to-alls (of which bandwidth ${num(i.epBandwidthUsPerLayer, 2)} µs) vs ${num(i.tpUsPerLayer, 1)} µs as one all-reduce; this deployment: ${i.used}.`;
    case "mla-absorbed":
      return `MLA absorbed decode: ${i.headsPerGpu} heads per GPU attend over a ${i.latentBytesPerTokenLayer}-byte latent per token per layer, ${num(i.flopsPerLatentByte, 0)} FLOPs per latent byte (BF16 ridge ${num(i.ridgeFlopsPerByteBf16, 0)}: ${i.regime}); absorbed W_UK/W_UV cost ${i.absorbedFlopsPerTokenLayer} FLOPs per token per layer on ${i.absorbedWeightBytesPerLayer} B of weights.`;
    case "fp8-block-scales":
      return `FP8 block scales: ${num(i.weightScaleMB, 2)} MB of FP32 weight scales per GPU (${num(100 * i.weightScaleShare, 3)} % of the FP8 bytes) and ${num(i.activationScaleKB, 1)} KB of activation scales per step; enters ${t.entersAs}.`;
    default:
      return `${t.label}: ${t.formula}.`;
  }
}
