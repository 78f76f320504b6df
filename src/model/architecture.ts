// Model architectures: the catalog (shared/reference/models.md §1), a Hugging Face config.json reader, and
// per-layer parameter counts (models.md §1.1). Pure: callers read files and pass parsed objects.
import { InputError, UsageError } from "../errors.ts";
import { suggestFrom } from "./hardware.ts";

export interface MlaDims {
  qLoraRank: number | null;
  kvLoraRank: number;
  qkNopeHeadDim: number;
  qkRopeHeadDim: number;
  vHeadDim: number;
}

export interface MoeDims {
  experts: number;
  topk: number;
  shared: number;
  expertFfn: number;
  /** Shared-expert FFN width per shared expert (defaults to expertFfn). */
  sharedFfn: number;
  /** Leading dense layers (DeepSeek/GLM first_k_dense_replace). */
  denseLayers: number;
}

export interface Architecture {
  name: string;
  /** How the numbers were obtained: catalog row, config.json path, GGUF file. */
  source: string;
  hfArchitecture?: string;
  layers: number;
  hidden: number;
  vocab: number;
  tiedEmbeddings: boolean;
  heads: number;
  kvHeads: number;
  headDim: number;
  attention: "gqa" | "mla";
  mla?: MlaDims;
  /** DeepSeek-V3.2 / GLM-5 sparse-attention indexer. */
  indexer?: { heads: number; headDim: number; topk: number };
  /** Sliding-window layers: window length and how many layers use it. */
  slidingWindow?: { window: number; layers: number };
  qkNorm: boolean;
  ffn: number;
  moe?: MoeDims;
  mtpLayers: number;
  dtype: string;
  /** Quantization declared by the checkpoint (config.json quantization_config), if any. */
  declaredQuant?: DeclaredQuant;
  /** Per-group bytes measured from a GGUF file's tensors (overrides bpw arithmetic). */
  ggufBytes?: GgufGroupBytes;
  paramsVendor?: string;
}

export interface DeclaredQuant {
  method: string;
  /** Our recipe name (see quantization.ts). */
  recipe: string;
  detail: string;
}

/** Bytes per tensor group read from a GGUF file (whole model, all layers). */
export interface GgufGroupBytes {
  attention: number;
  denseMlp: number;
  router: number;
  shared: number;
  /** All routed experts of all MoE layers. */
  experts: number;
  embedding: number;
  lmHead: number;
  other: number;
  params: {
    attention: number;
    denseMlp: number;
    router: number;
    shared: number;
    experts: number;
    embedding: number;
    lmHead: number;
  };
  typeCounts: Record<string, number>;
  bpwOverall: number;
}

// ---------------------------------------------------------------- parameter counts (models.md §1.1)

export interface ParamBreakdown {
  /** Per layer, attention projections (MLA or GQA), excluding the indexer. */
  attentionPerLayer: number;
  indexerPerLayer: number;
  denseMlpPerLayer: number;
  expertParams: number;
  sharedParamsPerLayer: number;
  routerPerLayer: number;
  denseLayerCount: number;
  moeLayerCount: number;
  embedding: number;
  lmHead: number;
  total: number;
  active: number;
}

export function attentionParams(a: Architecture): number {
  const h = a.hidden;
  if (a.attention === "mla" && a.mla) {
    const m = a.mla;
    const qk = m.qkNopeHeadDim + m.qkRopeHeadDim;
    const q = m.qLoraRank ? h * m.qLoraRank + m.qLoraRank * a.heads * qk : h * a.heads * qk;
    return (
      q +
      h * (m.kvLoraRank + m.qkRopeHeadDim) +
      m.kvLoraRank * a.heads * (m.qkNopeHeadDim + m.vHeadDim) +
      a.heads * m.vHeadDim * h
    );
  }
  return h * a.heads * a.headDim + 2 * h * a.kvHeads * a.headDim + a.heads * a.headDim * h;
}

export function indexerParams(a: Architecture): number {
  if (!a.indexer) return 0;
  const qIn = a.mla?.qLoraRank ?? a.hidden;
  return qIn * a.indexer.heads * a.indexer.headDim + a.hidden * a.indexer.headDim + a.hidden * a.indexer.heads;
}

const breakdownCache = new WeakMap<Architecture, ParamBreakdown>();

/** Memoised per architecture object (architectures are never mutated after construction). */
export function paramBreakdown(a: Architecture): ParamBreakdown {
  let p = breakdownCache.get(a);
  if (!p) breakdownCache.set(a, (p = computeBreakdown(a)));
  return p;
}

function computeBreakdown(a: Architecture): ParamBreakdown {
  const attn = attentionParams(a);
  const idx = indexerParams(a);
  const moe = a.moe;
  const denseLayerCount = moe ? Math.min(moe.denseLayers, a.layers) : a.layers;
  const moeLayerCount = a.layers - denseLayerCount;
  const denseMlp = 3 * a.hidden * a.ffn;
  const expert = moe ? 3 * a.hidden * moe.expertFfn : 0;
  const shared = moe ? moe.shared * 3 * a.hidden * moe.sharedFfn : 0;
  const router = moe ? a.hidden * moe.experts : 0;
  const embedding = a.vocab * a.hidden;
  const lmHead = a.vocab * a.hidden;
  const perLayerAttn = (attn + idx) * a.layers;
  const mlpTotal = denseLayerCount * denseMlp + moeLayerCount * (router + shared + (moe?.experts ?? 0) * expert);
  const mlpActive = denseLayerCount * denseMlp + moeLayerCount * (router + shared + (moe?.topk ?? 0) * expert);
  const head = a.tiedEmbeddings ? 0 : lmHead;
  return {
    attentionPerLayer: attn,
    indexerPerLayer: idx,
    denseMlpPerLayer: denseMlp,
    expertParams: expert,
    sharedParamsPerLayer: shared,
    routerPerLayer: router,
    denseLayerCount,
    moeLayerCount,
    embedding,
    lmHead,
    total: perLayerAttn + mlpTotal + embedding + head,
    active: perLayerAttn + mlpActive + embedding + head,
  };
}

// ---------------------------------------------------------------- catalog (models.md §1, validation-public.md)

type CatalogEntry = Architecture & { aliases: string[] };

function dense(
  name: string,
  aliases: string[],
  layers: number,
  hidden: number,
  heads: number,
  kvHeads: number,
  headDim: number,
  ffn: number,
  vocab: number,
  source: string,
  extra: Partial<Architecture> = {},
): CatalogEntry {
  return {
    name,
    aliases,
    source,
    layers,
    hidden,
    vocab,
    tiedEmbeddings: false,
    heads,
    kvHeads,
    headDim,
    attention: "gqa",
    qkNorm: false,
    ffn,
    mtpLayers: 0,
    dtype: "bfloat16",
    ...extra,
  };
}

/** DeepSeek-V3's MLA (q/kv LoRA ranks 1536/512, 128 + 64 q/k head dims, 128 v), which V3.2 and Kimi-K2 keep. */
// The precision the official checkpoints ship in (their config.json quantization_config), used when --quant is not
// given, as for a config.json the user points at; every alias of the entry ships the same.
const OFFICIAL_MXFP4: DeclaredQuant = {
  method: "mxfp4",
  recipe: "mxfp4",
  detail: "MXFP4 routed experts, other tensors BF16 (the official checkpoint's config.json: quantization_config mxfp4)",
};
const OFFICIAL_FP8_BLOCK: DeclaredQuant = {
  method: "fp8",
  recipe: "fp8-block",
  detail:
    "FP8 with a scale per 128×128 block (the official checkpoint's config.json: quantization_config fp8, weight_block_size)",
};
const DSV3_MLA: MlaDims = { qLoraRank: 1536, kvLoraRank: 512, qkNopeHeadDim: 128, qkRopeHeadDim: 64, vHeadDim: 128 };

export const MODELS: CatalogEntry[] = [
  dense(
    "llama-3.1-8b",
    ["llama3.1-8b", "meta-llama-3.1-8b", "llama-3-8b", "meta-llama-3-8b", "llama3-8b"],
    32,
    4096,
    32,
    8,
    128,
    14336,
    128256,
    "models.md §1 [cfg-llama]",
  ),
  dense(
    "llama-3.1-70b",
    ["llama3.1-70b", "llama-3-70b", "meta-llama-3.1-70b", "llama-3.3-70b", "llama3.3-70b", "llama-3.3-70b-instruct"],
    80,
    8192,
    64,
    8,
    128,
    28672,
    128256,
    "models.md §1 [cfg-llama]; Llama-3.3-70B has the same config.json shape (80 layers, 8192, 64/8 heads, FFN 28672, vocab 128256, untied: oumi configs/recipes/llama3_3/README.md)",
  ),
  dense(
    "llama-2-7b",
    ["llama2-7b"],
    32,
    4096,
    32,
    32,
    128,
    11008,
    32000,
    "validation-public.md V2 (32 layers, 4096, MHA, FFN 11008, vocab 32000)",
    {
      dtype: "float16",
    },
  ),
  dense("qwen3-8b", ["qwen/qwen3-8b"], 36, 4096, 32, 8, 128, 12288, 151936, "validation-public.md V1", {
    qkNorm: true,
  }),
  dense(
    "llama-2-70b",
    ["llama2-70b", "llama-2-70b-chat"],
    80,
    8192,
    64,
    8,
    128,
    28672,
    32000,
    'meta-pytorch/gpt-fast model.py transformer_configs["70B"] (Llama-2-70B: 80 layers, 8192, 64/8 heads, FFN 28672, vocab 32000)',
    { dtype: "float16" },
  ),
  dense(
    "llama-3.1-405b",
    ["llama3.1-405b", "meta-llama-3.1-405b"],
    126,
    16384,
    128,
    8,
    128,
    53248,
    128256,
    'meta-pytorch/gpt-fast model.py transformer_configs["llama-3.1-405b"] (126 layers, 16384, 128/8 heads, FFN 53248)',
  ),
  dense(
    "qwen3-4b",
    ["qwen/qwen3-4b", "qwen3-4b-instruct-2507"],
    36,
    2560,
    32,
    8,
    128,
    9728,
    151936,
    "Qwen/Qwen3-4B config.json (36 layers, 2560, 32/8 heads, head_dim 128, FFN 9728, tied embeddings; -Instruct-2507 same shape)",
    { qkNorm: true, tiedEmbeddings: true },
  ),
  dense(
    "qwen3-0.6b",
    ["qwen/qwen3-0.6b"],
    28,
    1024,
    16,
    8,
    128,
    3072,
    151936,
    "Qwen/Qwen3-0.6B config.json (28 layers, 1024, 16/8 heads, head_dim 128, FFN 3072, vocab 151936, tied embeddings; values recalled, not re-read from a snapshot here)",
    { qkNorm: true, tiedEmbeddings: true },
  ),
  dense(
    "qwen3-14b",
    ["qwen/qwen3-14b", "qwen3-14b-awq"],
    40,
    5120,
    40,
    8,
    128,
    17408,
    151936,
    "Qwen/Qwen3-14B config.json (40 layers, 5120, 40/8 heads, head_dim 128, FFN 17408, vocab 151936, untied; checked against the config.json copy in github.com/citsjtu2020/LLM-Prof sglang/Model_Config.md)",
    { qkNorm: true },
  ),
  dense(
    "qwen3-32b",
    ["qwen/qwen3-32b", "qwen3-32b-fp8", "qwen3-32b-awq"],
    64,
    5120,
    64,
    8,
    128,
    25600,
    151936,
    "Qwen/Qwen3-32B config.json (64 layers, 5120, 64/8 heads, head_dim 128, FFN 25600, vocab 151936, untied; the copy in ChibiQuest verl docs, with its layer count restored, and the Qwen3-32B shape checks of several inference repos agree)",
    { qkNorm: true },
  ),
  dense(
    "qwen2.5-14b",
    ["qwen/qwen2.5-14b", "qwen2.5-14b-instruct"],
    48,
    5120,
    40,
    8,
    128,
    13824,
    152064,
    "Qwen/Qwen2.5-14B config.json (48 layers, 5120, 40/8 heads, FFN 13824, vocab 152064, untied; checked against the config.json copy in github.com/citsjtu2020/LLM-Prof sglang/Model_Config.md)",
  ),
  {
    ...dense(
      "mixtral-8x7b",
      ["mixtral", "mixtral-8x7b-instruct"],
      32,
      4096,
      32,
      8,
      128,
      14336,
      32000,
      "models.md §1 [cfg-mixtral]",
    ),
    moe: { experts: 8, topk: 2, shared: 0, expertFfn: 14336, sharedFfn: 14336, denseLayers: 0 },
  },
  {
    ...dense("qwen3-235b-a22b", ["qwen3-235b"], 94, 4096, 64, 4, 128, 12288, 151936, "models.md §1 [cfg-qwen3]", {
      qkNorm: true,
    }),
    moe: { experts: 128, topk: 8, shared: 0, expertFfn: 1536, sharedFfn: 1536, denseLayers: 0 },
  },
  dense(
    "qwen2-7b",
    ["qwen/qwen2-7b", "qwen2-7b-instruct"],
    28,
    3584,
    28,
    4,
    128,
    18944,
    152064,
    "Qwen/Qwen2-7B config.json (validation-public.md V7 notes: dense anchor on GB10)",
  ),
  {
    ...dense(
      "qwen3-30b-a3b",
      ["qwen3-coder-30b-a3b", "qwen3-30b-a3b-instruct-2507", "qwen3-coder-30b-a3b-instruct", "qwen/qwen3-30b-a3b"],
      48,
      2048,
      32,
      4,
      128,
      6144,
      151936,
      "Qwen/Qwen3-30B-A3B config.json (validation-public.md V7–V10; Qwen3-Coder-30B-A3B has the same shape)",
      { qkNorm: true },
    ),
    moe: { experts: 128, topk: 8, shared: 0, expertFfn: 768, sharedFfn: 768, denseLayers: 0 },
  },
  {
    ...dense(
      "gpt-oss-20b",
      [],
      24,
      2880,
      64,
      8,
      64,
      2880,
      201088,
      "openai/gpt-oss-20b config.json (validation-public.md V10)",
    ),
    declaredQuant: OFFICIAL_MXFP4,
    moe: { experts: 32, topk: 4, shared: 0, expertFfn: 2880, sharedFfn: 2880, denseLayers: 0 },
    slidingWindow: { window: 128, layers: 12 },
  },
  {
    ...dense("gpt-oss-120b", ["gpt-oss"], 36, 2880, 64, 8, 64, 2880, 201088, "models.md §1 [cfg-gptoss]"),
    declaredQuant: OFFICIAL_MXFP4,
    moe: { experts: 128, topk: 4, shared: 0, expertFfn: 2880, sharedFfn: 2880, denseLayers: 0 },
    slidingWindow: { window: 128, layers: 18 },
  },
  {
    ...dense(
      "deepseek-v3",
      ["deepseek-r1", "deepseek-v3-0324", "deepseek-r1-0528", "deepseek-v3.1", "deepseek-v3.1-terminus"],
      61,
      7168,
      128,
      128,
      192,
      18432,
      129280,
      "models.md §1 [cfg-dsv3] (DeepSeek-V3.1 / -Terminus: same config.json shape, a post-trained V3 checkpoint)",
    ),
    attention: "mla",
    mla: DSV3_MLA,
    declaredQuant: OFFICIAL_FP8_BLOCK,
    moe: { experts: 256, topk: 8, shared: 1, expertFfn: 2048, sharedFfn: 2048, denseLayers: 3 },
    mtpLayers: 1,
  },
  {
    ...dense(
      "glm-4.5-air",
      ["zai-org/glm-4.5-air", "glm-4.5v", "glm-4.5v-fp8", "glm-4.6v", "glm4.5-air"],
      46,
      4096,
      96,
      8,
      128,
      10944,
      151552,
      "GLM-4.5-Air (glm4_moe) as in THUDM slime scripts/models/glm4.5-106B-A12B.sh: 1 dense + 45 MoE layers, 96/8 heads × 128, 128 experts top-8 + 1 shared of 1408, untied; GLM-4.5V/4.6V use this language model",
    ),
    moe: { experts: 128, topk: 8, shared: 1, expertFfn: 1408, sharedFfn: 1408, denseLayers: 1 },
    mtpLayers: 1,
  },
  {
    ...dense(
      "glm-4.5",
      [
        "zai-org/glm-4.5",
        "glm-4.5-fp8",
        "glm-4.6",
        "glm-4.6-fp8",
        "zai-org/glm-4.6",
        "glm-4.7",
        "glm-4.7-fp8",
        "glm4.5",
      ],
      92,
      5120,
      96,
      8,
      128,
      12288,
      151552,
      "zai-org/GLM-4.5 config.json (Glm4MoeForCausalLM: 92 layers, first 3 dense, 5120, 96/8 heads × 128, QK-norm, FFN 12288, 160 experts top-8 + 1 shared of 1536, vocab 151552, untied, 1 MTP layer) as copied in NVIDIA-NeMo/Megatron-Bridge tests/unit_tests/models/glm/test_glm45_bridge.py and THUDM slime scripts/models/glm4.5-355B-A32B.sh; GLM-4.6 and GLM-4.7 keep this shape",
      { qkNorm: true },
    ),
    moe: { experts: 160, topk: 8, shared: 1, expertFfn: 1536, sharedFfn: 1536, denseLayers: 3 },
    mtpLayers: 1,
  },
  {
    ...dense(
      "kimi-k2",
      [
        "moonshotai/kimi-k2-instruct",
        "kimi-k2-instruct",
        "kimi-k2-instruct-0905",
        "kimi-k2-thinking",
        "kimi-k2.5",
        "moonshotai/kimi-k2.5",
      ],
      61,
      7168,
      64,
      64,
      192,
      18432,
      163840,
      "moonshotai/Kimi-K2 config.json (DeepSeek-V3 shape with 64 heads and 384 experts: 61 layers, first 1 dense, MLA q/kv LoRA 1536/512, 384 experts top-8 + 1 shared of 2048, vocab 163840, untied, no MTP layer) as copied in the Kimi-K2-Thinking / K2.5 param-count fixtures of an inference repo and ParagEkbote/hf-model-inspector's Kimi-K2-Instruct-0905 report; Kimi-K2.5's language model has this shape (its vision tower is not modelled)",
    ),
    attention: "mla",
    mla: DSV3_MLA,
    moe: { experts: 384, topk: 8, shared: 1, expertFfn: 2048, sharedFfn: 2048, denseLayers: 1 },
  },
  {
    ...dense(
      "deepseek-v3.2",
      ["deepseek-v3.2-exp", "deepseek-ai/deepseek-v3.2", "deepseek_v32", "deepseek-math-v2"],
      61,
      7168,
      128,
      128,
      192,
      18432,
      129280,
      "DeepSeek-V3 shape [cfg-dsv3] + DSA indexer (DeepseekV32Config: index_n_heads 64, index_head_dim 128, index_topk 2048); DeepSeek-Math-V2 is built on DeepSeek-V3.2-Exp-Base (same shape)",
    ),
    attention: "mla",
    mla: DSV3_MLA,
    declaredQuant: OFFICIAL_FP8_BLOCK,
    indexer: { heads: 64, headDim: 128, topk: 2048 },
    moe: { experts: 256, topk: 8, shared: 1, expertFfn: 2048, sharedFfn: 2048, denseLayers: 3 },
    mtpLayers: 1,
  },
  {
    ...dense(
      "glm-5",
      ["glm5", "glm-5.1", "zai-org/glm-5", "glm_moe_dsa"],
      78,
      6144,
      64,
      64,
      64,
      12288,
      154880,
      "models.md §1 [cfg-glm5] (GLM-5.1 checkpoint config.json)",
    ),
    hfArchitecture: "GlmMoeDsaForCausalLM",
    attention: "mla",
    mla: { qLoraRank: 2048, kvLoraRank: 512, qkNopeHeadDim: 192, qkRopeHeadDim: 64, vHeadDim: 256 },
    indexer: { heads: 32, headDim: 128, topk: 2048 },
    moe: { experts: 256, topk: 8, shared: 1, expertFfn: 2048, sharedFfn: 2048, denseLayers: 3 },
    mtpLayers: 1,
    paramsVendor: "744 B total / 40 B active (zai-org README)",
  },
];

export function listModels(): Architecture[] {
  return MODELS.map(({ aliases: _a, ...m }) => m);
}

export function modelNames(): string[] {
  return MODELS.flatMap((m) => [m.name, ...m.aliases]);
}

const modelCache = new Map<string, Architecture>();

export function findModel(name: string): Architecture | undefined {
  const n = name.toLowerCase().trim().replace(/_/g, "-");
  const cached = modelCache.get(n);
  if (cached) return cached;
  const hit = MODELS.find((m) => m.name === n || m.aliases.includes(n) || m.aliases.includes(n.replace(/^.*\//, "")));
  if (!hit) return undefined;
  const { aliases: _a, ...m } = hit;
  const frozen = Object.freeze({ ...m }) as Architecture;
  modelCache.set(n, frozen);
  return frozen;
}

export function requireModel(name: string): Architecture {
  const m = findModel(name);
  if (m) return m;
  const s = suggestFrom(name, modelNames());
  throw new UsageError(`unknown model "${name}"${s.length ? `; did you mean: ${s.join(", ")}?` : ""}`, {
    hint: "run `inferscope model catalog models`, or pass a config.json / .gguf path",
  });
}

// ---------------------------------------------------------------- Hugging Face config.json

type Json = Record<string, unknown>;

/** Builds an Architecture from a parsed config.json; a missing needed key names the key and the file. */
export function fromHfConfig(raw: unknown, file = "config.json"): Architecture {
  if (!raw || typeof raw !== "object" || Array.isArray(raw)) throw new InputError(`${file}: not a JSON object`);
  const top = raw as Json;
  // Multimodal wrappers keep the language model in text_config.
  const c: Json = top.text_config && typeof top.text_config === "object" ? { ...(top.text_config as Json) } : top;
  const num = (key: string, fallback?: number | null): number => {
    const v = c[key];
    if (typeof v === "number" && Number.isFinite(v)) return v;
    if (fallback !== undefined && fallback !== null) return fallback;
    throw new InputError(`${file}: missing key "${key}" (needed for the decode model)`, {
      hint: `add "${key}" to ${file} or use a catalog model (--model glm-5)`,
    });
  };
  const opt = (...keys: string[]): number | undefined => {
    for (const k of keys) {
      const v = c[k];
      if (typeof v === "number" && Number.isFinite(v)) return v;
    }
    return undefined;
  };
  const archs = Array.isArray(top.architectures) ? (top.architectures as string[]) : [];
  const modelType = String(c.model_type ?? top.model_type ?? "");
  const hidden = num("hidden_size");
  const heads = num("num_attention_heads");
  const layers = num("num_hidden_layers");
  const vocab = num("vocab_size");
  const kvHeads = num("num_key_value_heads", heads);
  const headDim = num("head_dim", Math.floor(hidden / heads));
  const experts = opt("n_routed_experts", "num_local_experts", "num_experts");
  const isMla = typeof c.kv_lora_rank === "number";
  let moe: MoeDims | undefined;
  if (experts && experts > 1) {
    const topk = opt("num_experts_per_tok", "experts_per_token", "moe_topk");
    if (topk === undefined)
      throw new InputError(`${file}: missing key "num_experts_per_tok" (MoE model with ${experts} experts)`);
    const expertFfn = opt("moe_intermediate_size", "expert_intermediate_size") ?? num("intermediate_size");
    const shared =
      opt("n_shared_experts", "num_shared_experts") ?? (typeof c.shared_expert_intermediate_size === "number" ? 1 : 0);
    const sharedFfn = opt("shared_expert_intermediate_size") ?? expertFfn;
    let denseLayers = opt("first_k_dense_replace") ?? 0;
    if (Array.isArray(c.mlp_only_layers) && (c.mlp_only_layers as number[]).length)
      denseLayers = (c.mlp_only_layers as number[]).length;
    moe = {
      experts,
      topk,
      shared,
      expertFfn,
      sharedFfn: shared > 1 && opt("shared_expert_intermediate_size") ? sharedFfn / shared : sharedFfn,
      denseLayers,
    };
  }
  const ffn = moe && moe.denseLayers === 0 ? (opt("intermediate_size") ?? moe.expertFfn) : num("intermediate_size");
  let mla: MlaDims | undefined;
  if (isMla) {
    mla = {
      qLoraRank: typeof c.q_lora_rank === "number" ? (c.q_lora_rank as number) : null,
      kvLoraRank: num("kv_lora_rank"),
      qkNopeHeadDim: num("qk_nope_head_dim"),
      qkRopeHeadDim: num("qk_rope_head_dim"),
      vHeadDim: num("v_head_dim"),
    };
  }
  const indexer =
    typeof c.index_n_heads === "number"
      ? { heads: num("index_n_heads"), headDim: num("index_head_dim"), topk: num("index_topk") }
      : undefined;
  let slidingWindow: Architecture["slidingWindow"];
  const sw = opt("sliding_window");
  if (sw && c.use_sliding_window !== false) {
    const types = Array.isArray(c.layer_types) ? (c.layer_types as string[]) : null;
    const nWin = types
      ? types.filter((t) => String(t).includes("sliding")).length
      : c.use_sliding_window === true
        ? layers
        : 0;
    if (nWin > 0) slidingWindow = { window: sw, layers: nWin };
  }
  const name = String(top._name_or_path ?? (archs[0] || modelType || file));
  return {
    name,
    source: `config.json: ${file}`,
    hfArchitecture: archs[0],
    layers,
    hidden,
    vocab,
    tiedEmbeddings: c.tie_word_embeddings === true,
    heads,
    kvHeads: isMla ? heads : kvHeads,
    headDim,
    attention: isMla ? "mla" : "gqa",
    mla,
    indexer,
    slidingWindow,
    qkNorm: /qwen3|olmo2|gemma3/.test(modelType),
    ffn,
    moe,
    mtpLayers: opt("num_nextn_predict_layers") ?? 0,
    dtype: String(c.torch_dtype ?? c.dtype ?? top.torch_dtype ?? "bfloat16"),
    declaredQuant: readQuantConfig(top.quantization_config ?? c.quantization_config),
  };
}

/** Maps a checkpoint's quantization_config to one of our recipes. */
export function readQuantConfig(q: unknown): DeclaredQuant | undefined {
  if (!q || typeof q !== "object") return undefined;
  const o = q as Json;
  const method = String(o.quant_method ?? o.quantization ?? "").toLowerCase();
  const algo = String(o.quant_algo ?? "").toUpperCase();
  const excludes = [o.exclude_modules, o.ignore, o.ignored_layers, o.modules_to_not_convert]
    .filter(Array.isArray)
    .flat()
    .map(String);
  const attnExcluded = excludes.some((s) => /attn|attention/.test(s));
  const sharedExcluded = excludes.some((s) => /shared_expert/.test(s));
  if (method === "fp8") {
    const blocked = Array.isArray(o.weight_block_size);
    return {
      method,
      recipe: blocked ? "fp8-block" : "fp8",
      detail: `FP8 ${blocked ? "block-scaled 128×128" : "per-tensor/channel"}`,
    };
  }
  if (method === "mxfp4") return { method, recipe: "mxfp4", detail: "MXFP4 experts, other tensors BF16" };
  if (method === "awq" || method === "gptq" || method === "awq_marlin" || method === "gptq_marlin") {
    const gs = typeof o.group_size === "number" ? o.group_size : 128;
    const bits = typeof o.bits === "number" ? o.bits : 4;
    return {
      method,
      recipe: `int${bits}-${method.startsWith("awq") ? "awq" : "gptq"}`,
      detail: `${method} ${bits}-bit, group ${gs}`,
    };
  }
  if (method === "modelopt" || method === "modelopt_fp4" || algo.includes("FP4")) {
    if (algo.includes("FP8")) return { method, recipe: "fp8", detail: "ModelOpt FP8" };
    const recipe = attnExcluded ? (sharedExcluded ? "nvfp4-routed" : "nvfp4") : "nvfp4-all";
    return {
      method,
      recipe,
      detail: `ModelOpt NVFP4; excluded from quantization: ${excludes.length ? excludes.slice(0, 6).join(", ") : "none listed"}`,
    };
  }
  if (method === "compressed-tensors") {
    const s = JSON.stringify(o).toLowerCase();
    if (s.includes('"num_bits":4') && s.includes('"type":"float"'))
      return { method, recipe: attnExcluded ? "nvfp4" : "nvfp4-all", detail: "compressed-tensors FP4" };
    if (s.includes('"num_bits":8') && s.includes('"type":"float"'))
      return { method, recipe: "fp8", detail: "compressed-tensors FP8" };
    if (s.includes('"num_bits":4')) return { method, recipe: "int4-gptq", detail: "compressed-tensors INT4" };
    if (s.includes('"num_bits":8')) return { method, recipe: "int8", detail: "compressed-tensors INT8" };
  }
  return { method, recipe: "bf16", detail: `unrecognised quant_method "${method}"; assuming BF16` };
}

/** Total / active parameter counts in billions, for display. */
export function paramSummary(a: Architecture): { totalB: number; activeB: number } {
  const p = paramBreakdown(a);
  return { totalB: p.total / 1e9, activeB: p.active / 1e9 };
}
