// Number formats, their real bits per weight (hardware.md §2), per-tensor-group recipes, and KV-cache dtypes. Pure.
import { UsageError } from "../errors.ts";
import type { Architecture } from "./architecture.ts";
import { suggestFrom } from "./hardware.ts";

export interface Format {
  id: string;
  bpw: number;
  /** Tensor-core precision the matmul runs at (for the compute term). */
  computeAs: "bf16" | "fp8" | "fp4";
  source: string;
}

const GG = "ggml-common.h block structs (hardware.md §2)";
const MLX = "mlx.core.quantize affine: bits + 16-bit scale and bias per group of 64";

/** bpw = block bytes × 8 / block elements. */
export const FORMATS: Record<string, Format> = {
  f32: { id: "f32", bpw: 32, computeAs: "bf16", source: "4 B" },
  bf16: { id: "bf16", bpw: 16, computeAs: "bf16", source: "2 B" },
  f16: { id: "f16", bpw: 16, computeAs: "bf16", source: "2 B" },
  fp8: { id: "fp8", bpw: 8, computeAs: "fp8", source: "1 B + negligible per-tensor/channel scale" },
  "fp8-block": { id: "fp8-block", bpw: 8 + 32 / 16384, computeAs: "fp8", source: "1 B + FP32 scale per 128×128 block" },
  int8: { id: "int8", bpw: 8, computeAs: "bf16", source: "weight-only INT8, per-channel scale" },
  nvfp4: { id: "nvfp4", bpw: 4.5, computeAs: "fp4", source: "E2M1 + FP8 scale per 16 (block_nvfp4: 36 B / 64)" },
  mxfp4: { id: "mxfp4", bpw: 4.25, computeAs: "bf16", source: "E2M1 + E8M0 scale per 32 (block_mxfp4: 17 B / 32)" },
  "int4-awq": {
    id: "int4-awq",
    bpw: 4 + 16 / 128 + 4 / 128,
    computeAs: "bf16",
    source: "4 bit + FP16 scale and 4-bit zero per 128",
  },
  "int4-gptq": {
    id: "int4-gptq",
    bpw: 4 + 16 / 128,
    computeAs: "bf16",
    source: "4 bit + FP16 scale per 128 (symmetric)",
  },
  // MLX affine quantization (mlx-lm default group size 64): N-bit weights + FP16 scale and bias per 64.
  "mlx-8bit": { id: "mlx-8bit", bpw: 8 + 32 / 64, computeAs: "bf16", source: MLX },
  "mlx-6bit": { id: "mlx-6bit", bpw: 6 + 32 / 64, computeAs: "bf16", source: MLX },
  "mlx-5bit": { id: "mlx-5bit", bpw: 5 + 32 / 64, computeAs: "bf16", source: MLX },
  "mlx-4bit": { id: "mlx-4bit", bpw: 4 + 32 / 64, computeAs: "bf16", source: MLX },
  q4_0: { id: "q4_0", bpw: (18 * 8) / 32, computeAs: "bf16", source: GG },
  q4_1: { id: "q4_1", bpw: (20 * 8) / 32, computeAs: "bf16", source: GG },
  q5_0: { id: "q5_0", bpw: (22 * 8) / 32, computeAs: "bf16", source: GG },
  q5_1: { id: "q5_1", bpw: (24 * 8) / 32, computeAs: "bf16", source: GG },
  q8_0: { id: "q8_0", bpw: (34 * 8) / 32, computeAs: "bf16", source: GG },
  q8_1: { id: "q8_1", bpw: (36 * 8) / 32, computeAs: "bf16", source: GG },
  q2_k: { id: "q2_k", bpw: (84 * 8) / 256, computeAs: "bf16", source: GG },
  q3_k: { id: "q3_k", bpw: (110 * 8) / 256, computeAs: "bf16", source: GG },
  q4_k: { id: "q4_k", bpw: (144 * 8) / 256, computeAs: "bf16", source: GG },
  q5_k: { id: "q5_k", bpw: (176 * 8) / 256, computeAs: "bf16", source: GG },
  q6_k: { id: "q6_k", bpw: (210 * 8) / 256, computeAs: "bf16", source: GG },
  q8_k: { id: "q8_k", bpw: (292 * 8) / 256, computeAs: "bf16", source: GG },
  iq2_xxs: { id: "iq2_xxs", bpw: (66 * 8) / 256, computeAs: "bf16", source: GG },
  iq2_xs: { id: "iq2_xs", bpw: (74 * 8) / 256, computeAs: "bf16", source: GG },
  iq2_s: { id: "iq2_s", bpw: (82 * 8) / 256, computeAs: "bf16", source: GG },
  iq3_xxs: { id: "iq3_xxs", bpw: (98 * 8) / 256, computeAs: "bf16", source: GG },
  iq3_s: { id: "iq3_s", bpw: (110 * 8) / 256, computeAs: "bf16", source: GG },
  iq1_s: { id: "iq1_s", bpw: (50 * 8) / 256, computeAs: "bf16", source: GG },
  iq1_m: { id: "iq1_m", bpw: (56 * 8) / 256, computeAs: "bf16", source: GG },
  iq4_nl: { id: "iq4_nl", bpw: (18 * 8) / 32, computeAs: "bf16", source: GG },
  iq4_xs: { id: "iq4_xs", bpw: (136 * 8) / 256, computeAs: "bf16", source: GG },
  tq1_0: { id: "tq1_0", bpw: (54 * 8) / 256, computeAs: "bf16", source: GG },
  tq2_0: { id: "tq2_0", bpw: (66 * 8) / 256, computeAs: "bf16", source: GG },
};

/** ggml_type enum values → format id (ggml.h). */
export const GGML_TYPES: Record<number, string> = {
  0: "f32",
  1: "f16",
  2: "q4_0",
  3: "q4_1",
  6: "q5_0",
  7: "q5_1",
  8: "q8_0",
  9: "q8_1",
  10: "q2_k",
  11: "q3_k",
  12: "q4_k",
  13: "q5_k",
  14: "q6_k",
  15: "q8_k",
  16: "iq2_xxs",
  17: "iq2_xs",
  18: "iq3_xxs",
  19: "iq1_s",
  20: "iq4_nl",
  21: "iq3_s",
  22: "iq2_s",
  23: "iq4_xs",
  24: "i8",
  25: "i16",
  26: "i32",
  27: "i64",
  28: "f64",
  29: "iq1_m",
  30: "bf16",
  34: "tq1_0",
  35: "tq2_0",
  39: "mxfp4",
};

/** Bits per element of a ggml type (integers and f64 included for completeness). */
export function ggmlTypeBpw(type: number): number | undefined {
  const id = GGML_TYPES[type];
  if (!id) return undefined;
  const fixed: Record<string, number> = { i8: 8, i16: 16, i32: 32, i64: 64, f64: 64 };
  return fixed[id] ?? FORMATS[id]?.bpw;
}

export type TensorGroup = "attention" | "denseMlp" | "router" | "shared" | "experts" | "lmHead" | "embedding";

export interface Recipe {
  name: string;
  description: string;
  groups: Record<TensorGroup, Format>;
  /** Activations quantized too (W8A8 / W4A4): adds quantize kernels and uses the low-precision tensor cores. */
  activationQuant: boolean;
  /** GGUF-style dequantizing GEMV kernels (llama.cpp k-quants): their bandwidth efficiency is lower. */
  gguf: boolean;
  source: string;
}

function all(f: string, overrides: Partial<Record<TensorGroup, string>> = {}): Record<TensorGroup, Format> {
  const groups = ["attention", "denseMlp", "router", "shared", "experts", "lmHead", "embedding"] as TensorGroup[];
  const out = {} as Record<TensorGroup, Format>;
  for (const gname of groups) out[gname] = FORMATS[overrides[gname] ?? f];
  return out;
}

/** Blend of two formats: fraction `f` of the tensors at `hi`, the rest at `lo` (llama.cpp's use_more_bits mixes). */
function blend(lo: string, hi: string, f: number): Format {
  const a = FORMATS[lo];
  const b = FORMATS[hi];
  return { id: `${lo}/${hi}`, bpw: a.bpw * (1 - f) + b.bpw * f, computeAs: "bf16", source: `${GG}; mix` };
}

/** llama.cpp use_more_bits(i, n): first and last n/8 layers and every third in between. */
export function moreBitsFraction(layers: number): number {
  let k = 0;
  for (let i = 0; i < layers; i++)
    if (i < layers / 8 || i >= (7 * layers) / 8 || (i - Math.floor(layers / 8)) % 3 === 2) k++;
  return k / layers;
}

/** GGUF k-quant "_M" mixes: attn_v and ffn_down get more bits in use_more_bits layers; output is Q6_K. */
function kQuantMix(a: Architecture, base: string, more: string): Partial<Record<TensorGroup, Format>> {
  const f = moreBitsFraction(a.layers);
  const h = a.hidden;
  const v = h * a.kvHeads * a.headDim;
  const attnTotal = 2 * h * a.heads * a.headDim + 2 * v;
  const attn = blend(base, more, (v * f) / attnTotal);
  const mlp = blend(base, more, f / 3); // down is one of three equal matrices
  return { attention: attn, denseMlp: mlp, shared: mlp, experts: mlp };
}

export const RECIPE_NAMES = [
  "bf16",
  "fp16",
  "fp8",
  "fp8-block",
  "int8",
  "nvfp4",
  "nvfp4-all",
  "nvfp4-routed",
  "mxfp4",
  "mxfp4-q8_0",
  "int4-awq",
  "int4-gptq",
  "q4_0",
  "q5_0",
  "q4_k_m",
  "q4_k_s",
  "q5_k_m",
  "q6_k",
  "q8_0",
  "q3_k_m",
  "q2_k",
  "ud-q4_k_xl",
  "f16",
  "gguf",
  "mlx-8bit",
  "mlx-6bit",
  "mlx-5bit",
  "mlx-4bit",
];

const recipeCache = new WeakMap<Architecture, Map<string, Recipe>>();

/** Resolves a quantization name to per-group formats for this architecture (memoised per architecture object). */
export function recipe(nameIn: string, a: Architecture): Recipe {
  let m = recipeCache.get(a);
  if (!m) recipeCache.set(a, (m = new Map()));
  let r = m.get(nameIn);
  if (!r) m.set(nameIn, (r = buildRecipe(nameIn, a)));
  return r;
}

function buildRecipe(nameIn: string, a: Architecture): Recipe {
  const name = nameIn
    .toLowerCase()
    .replace(/^awq$/, "int4-awq")
    .replace(/^gptq$/, "int4-gptq")
    .replace(/-/g, (m) => m);
  const mk = (groups: Record<TensorGroup, Format>, description: string, extra: Partial<Recipe> = {}): Recipe => ({
    name,
    description,
    groups,
    activationQuant: false,
    gguf: false,
    source: "hardware.md §2",
    ...extra,
  });
  switch (name) {
    case "bf16":
    case "fp16":
    case "f16":
      return mk(all(name === "bf16" ? "bf16" : "f16"), "every tensor 16-bit", { gguf: name === "f16" });
    case "fp8":
    case "fp8-block":
      return mk(
        all(name, { lmHead: "bf16", router: "bf16", embedding: "bf16" }),
        "linear layers FP8 (W8A8), LM head and router BF16",
        {
          activationQuant: true,
        },
      );
    case "int8":
      return mk(
        all("int8", { router: "bf16", embedding: "bf16" }),
        "weight-only INT8 on every linear layer incl. the LM head (gpt-fast int8)",
      );
    case "nvfp4":
      return mk(
        all("nvfp4", { attention: "bf16", lmHead: "bf16", router: "bf16", embedding: "bf16" }),
        "attention + LM head BF16, every MLP/expert NVFP4 (ModelOpt-style; models.md §2 row 2)",
        { activationQuant: true },
      );
    case "nvfp4-all":
      return mk(
        all("nvfp4", { router: "bf16", embedding: "bf16" }),
        "every linear tensor NVFP4 (router BF16; models.md §2 row 1)",
        {
          activationQuant: true,
        },
      );
    case "nvfp4-routed":
      return mk(
        all("bf16", { experts: "nvfp4" }),
        "attention, dense, shared experts, LM head BF16; routed experts NVFP4 (models.md §2 row 3)",
        { activationQuant: true },
      );
    case "mxfp4":
      return mk(all("bf16", { experts: "mxfp4" }), "routed experts MXFP4, every other tensor BF16 (gpt-oss)");
    case "mxfp4-q8_0":
      // ggml-org's gpt-oss GGUFs: 12.1 GB for gpt-oss-20b = MXFP4 experts (10.2 GB) + the rest at ≈ 8.5 bpw (derived).
      return mk(
        all("q8_0", { experts: "mxfp4", router: "f32" }),
        "GGUF gpt-oss: routed experts MXFP4, attention, embedding and output Q8_0 (llama.cpp)",
        { gguf: true, source: "ggml-org gpt-oss GGUF file size (derived)" },
      );
    case "int4-awq":
    case "int4-gptq":
      return mk(
        all(name, { lmHead: "bf16", router: "bf16", embedding: "bf16" }),
        `linear layers ${name} group 128, LM head BF16`,
      );
    case "mlx-8bit":
    case "mlx-6bit":
    case "mlx-5bit":
    case "mlx-4bit":
      return mk(all(name), `MLX ${name.slice(4)} affine, group 64, on every linear layer, embedding and LM head`, {
        source: MLX,
      });
    case "q4_0":
    case "q5_0":
    case "q8_0":
    case "q6_k":
    case "q2_k": {
      const base = name;
      return mk(
        all(base, { lmHead: name === "q8_0" ? "q8_0" : "q6_k", router: "f32", embedding: base }),
        `GGUF ${name.toUpperCase()}; output Q6_K`,
        {
          gguf: true,
        },
      );
    }
    case "q4_k_m":
    case "q5_k_m":
    case "q4_k_s":
    case "q3_k_m": {
      const base = { q4_k_m: "q4_k", q5_k_m: "q5_k", q4_k_s: "q4_k", q3_k_m: "q3_k" }[name]!;
      const more = { q4_k_m: "q6_k", q5_k_m: "q6_k", q4_k_s: "q5_k", q3_k_m: "q4_k" }[name]!;
      const groups = { ...all(base, { lmHead: "q6_k", router: "f32" }), ...kQuantMix(a, base, more) } as Record<
        TensorGroup,
        Format
      >;
      return mk(
        groups,
        `GGUF ${name.toUpperCase()}: ${base.toUpperCase()}, attn_v/ffn_down ${more.toUpperCase()} in llama.cpp's use_more_bits layers, output Q6_K`,
        {
          gguf: true,
          source: "llama.cpp quantize rules (use_more_bits) + ggml-common.h bpw",
        },
      );
    }
    case "ud-q4_k_xl":
      return mk(
        {
          ...all("q6_k", { router: "f32", lmHead: "q6_k", denseMlp: "q5_k", shared: "q8_0" }),
          experts: blend("q4_k", "q5_1", 1 / 3),
        },
        "Unsloth UD-Q4_K_XL approximation: routed gate/up Q4_K, down Q5_1, attention Q6_K, shared Q8_0 (read the .gguf for the real mix)",
        { gguf: true, source: "hardware.md §2 [ud-quants]" },
      );
    case "gguf":
      if (!a.ggufBytes) throw new UsageError("--quant gguf needs a .gguf file as --model");
      return ggufRecipe(a);
    default: {
      const s = suggestFrom(name, RECIPE_NAMES);
      throw new UsageError(`unknown quantization "${nameIn}"${s.length ? `; did you mean: ${s.join(", ")}?` : ""}`, {
        hint: `one of ${RECIPE_NAMES.join(", ")}`,
      });
    }
  }
}

/** Per-group bpw measured from a GGUF file's tensor types. */
export function ggufRecipe(a: Architecture): Recipe {
  const b = a.ggufBytes!;
  const f = (bytes: number, params: number, label: string): Format => ({
    id: `gguf:${label}`,
    bpw: params > 0 ? (bytes * 8) / params : 16,
    computeAs: "bf16",
    source: "GGUF tensor types (file header)",
  });
  return {
    name: "gguf",
    description: `per-tensor types read from the GGUF header (${Object.entries(b.typeCounts)
      .map(([k, v]) => `${v}× ${k.toUpperCase()}`)
      .join(", ")}; ${b.bpwOverall.toFixed(2)} bpw overall)`,
    groups: {
      attention: f(b.attention, b.params.attention, "attention"),
      denseMlp: f(b.denseMlp, b.params.denseMlp, "dense"),
      router: f(b.router, b.params.router, "router"),
      shared: f(b.shared, b.params.shared, "shared"),
      experts: f(b.experts, b.params.experts, "experts"),
      lmHead: f(b.lmHead, b.params.lmHead, "output"),
      embedding: f(b.embedding, b.params.embedding, "token_embd"),
    },
    activationQuant: false,
    gguf: true,
    source: "GGUF header",
  };
}

// ---------------------------------------------------------------- KV cache

export interface KvFormat {
  id: string;
  /** Bytes per stored element (GQA K/V, MLA latent). */
  bytesPerElement: number;
  /** vLLM's fp8_ds_mla layout: 656 B per token per layer for the MLA latent. */
  mlaBytesPerLayer?: number;
  source: string;
}

export const KV_NAMES = ["auto", "bf16", "fp16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_ds_mla", "q8_0", "q4_0", "f32"];

export function kvFormat(name: string, a: Architecture): KvFormat {
  const n = name.toLowerCase();
  if (n === "auto" || n === "bf16" || n === "fp16" || n === "f16")
    return { id: n === "auto" ? "bf16 (auto)" : n, bytesPerElement: 2, source: "2 B" };
  if (n.startsWith("fp8")) {
    if (a.attention === "mla")
      return {
        id: "fp8_ds_mla",
        bytesPerElement: 1,
        mlaBytesPerLayer: 656,
        source: "vLLM fp8_ds_mla: 512 FP8 + 4 FP32 scales + 64 BF16 rope = 656 B (models.md §3)",
      };
    return { id: n, bytesPerElement: 1, source: "1 B" };
  }
  if (n === "q8_0") return { id: n, bytesPerElement: 34 / 32, source: GG };
  if (n === "q4_0") return { id: n, bytesPerElement: 18 / 32, source: GG };
  if (n === "f32") return { id: n, bytesPerElement: 4, source: "4 B" };
  const s = suggestFrom(n, KV_NAMES);
  throw new UsageError(`unknown KV-cache dtype "${name}"${s.length ? `; did you mean: ${s.join(", ")}?` : ""}`);
}
