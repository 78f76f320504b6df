// Kernel-name classification: one ordered rule table (data), first match wins. Pure.
import { InputError } from "../errors.ts";
import { zod } from "../lazy.ts";

export const KERNEL_CLASSES = [
  "communication",
  "gemm",
  "attention",
  "moe",
  "norm",
  "activation",
  "quantization",
  "sampling",
  "elementwise",
  "memcpy",
  "memset",
  "other",
] as const;
export type KernelClass = (typeof KERNEL_CLASSES)[number];
export const CLASS_INDEX: Record<KernelClass, number> = Object.fromEntries(
  KERNEL_CLASSES.map((c, i) => [c, i]),
) as Record<KernelClass, number>;
export const COMM_CLASS = 0;

export interface Rule {
  /** Stable id shown as "matched rule", e.g. "comm.nccl". */
  id: string;
  class: KernelClass;
  /** Regular expression source, tested against the (demangled) kernel name. */
  match: string;
  /** Case-insensitive unless false. */
  ignoreCase?: boolean;
  /** The rule does not apply when this also matches (false friends). */
  unless?: string;
  /** Which activity kinds the rule applies to; default: kernels only. */
  kinds?: Array<"kernel" | "memcpy" | "memset">;
  /** The name alone is only a hint: the launching CPU op, where it maps to a class, decides. */
  weak?: boolean;
  note?: string;
}

export interface RuleFile {
  rules: Rule[];
}

// Order matters. Communication first (fused all-reduce kernels live in flashinfer/trtllm namespaces),
// then MoE and attention (FA3 kernels are wrapped in cutlass::device_kernel), then GEMM, then the rest.
// A `weak` rule is a hint only: where the launching CPU op maps to a class, the op decides.
export const DEFAULT_RULES: readonly Rule[] = [
  { id: "memcpy.activity", class: "memcpy", match: ".", kinds: ["memcpy"], note: "gpu_memcpy activity" },
  { id: "memset.activity", class: "memset", match: ".", kinds: ["memset"], note: "gpu_memset activity" },
  { id: "comm.nccl", class: "communication", match: "^(void )?nccl(Dev)?Kernel" },
  { id: "comm.nccl-symmetric", class: "communication", match: "ncclSymk?DevKernel|ncclSymk" },
  { id: "comm.rccl", class: "communication", match: "\\brccl[A-Z]\\w*Kernel|\\bmscclpp?|msccl_kernel" },
  {
    id: "comm.vllm-custom-ar",
    class: "communication",
    match: "cross_device_reduce|CustomAllreduce|custom_all_reduce|custom_ar_",
    note: "vLLM/SGLang/aiter custom all-reduce (one-shot 1stage, two-shot 2stage)",
  },
  {
    id: "comm.symmetric-memory",
    class: "communication",
    match: "multimem_(all_reduce|all_gather|reduce_scatter|st|ld)|\\b(one|two)_shot_all_reduce",
    note: "PyTorch symmetric memory",
  },
  {
    id: "comm.trtllm-fused-ar",
    class: "communication",
    match: "allreduce_fusion_kernel|trtllm_allreduce|lamport|allreduce_kernel|oneShotAllReduce|twoShotAllReduce",
    unless: "^triton_",
  },
  { id: "comm.quick-reduce", class: "communication", match: "quickreduce|allreduce_prototype" },
  {
    id: "comm.all-to-all",
    class: "communication",
    match: "\\b(pplx|deep_ep)::|all_to_all|alltoall|dispatchKernel|combineKernel|nvshmemi?_",
    unless: "^triton_",
  },
  {
    id: "comm.generic",
    class: "communication",
    match: "all_?reduce|all_?gather|reduce_?scatter",
    unless: "^triton_|^void at::native|elementwise",
    note: "torch.compile kernels whose names merely contain all_reduce are excluded",
  },
  {
    id: "moe.triton-ogs",
    class: "moe",
    match: "matmul_ogs|_finalize_matmul|_combined_routing|_sum_bitmatrix|bitmatrix|_routing_",
    note: "triton_kernels MoE (gpt-oss): expert GEMMs with gather/scatter, routing",
  },
  {
    id: "moe.fused",
    class: "moe",
    match:
      "fused_moe|moe_align|moe_sum|moe_permute|moe_unpermute|\\bmoe_|_moe_|MoeFC|moe::|expandInputRows|finalizeMoe|fmoe_|ck_moe|MoeSorting|FusedMoe",
  },
  {
    id: "moe.routing",
    class: "moe",
    match: "topkGating|topk_softmax|grouped_topk|topk_sigmoid|count_and_sort_expert|expert_tokens|router|gating",
  },
  { id: "moe.grouped-gemm", class: "moe", match: "GemmGrouped|grouped_gemm|m_grouped|group_gemm" },
  {
    id: "moe.triton-topk",
    class: "moe",
    match: "^_topk_forward",
    weak: true,
    note: "triton_kernels routing top-k; an op such as a sampler's topk decides otherwise",
  },
  {
    id: "attention.cudnn-sdpa",
    class: "attention",
    match: "cudnn.*(sdpa|fmha|flash|_mha)|\\bsdpa_|_sdpa_",
    note: "cuDNN's fused scaled-dot-product attention (cudnn_generated_fort_native_sdpa_*), a dense fused kernel, not paged",
  },
  {
    id: "attention.flash",
    class: "attention",
    match:
      "\\bflash::|flash_fwd|flash_bwd|FlashAttn|flash_attn|fmha|_fwd_kernel_with_kv|unified_attention|mha_fwd|mha_varlen",
  },
  {
    id: "attention.flashinfer",
    class: "attention",
    match: "flashinfer.*(Decode|Prefill|Attention|MLA|PagedKV|RaggedKV|MergeStates)|Batch(Decode|Prefill)With",
  },
  { id: "attention.mla", class: "attention", match: "\\bmla\\b|_mla_|mla_|Mla|cutlass_mla|flashmla|FlashMLA" },
  {
    id: "attention.paged",
    class: "attention",
    match: "paged_?attention|PagedAttention|xqa_kernel|decode_attention|paged_mqa|paged_kv",
    note: "attention over a paged KV cache (vLLM paged_attention_v1/v2, TensorRT-LLM XQA, decode attention)",
  },
  { id: "attention.xformers", class: "attention", match: "xformers|\\bkernel_mha|cutlassF" },
  {
    id: "attention.named",
    class: "attention",
    match: "attention_kernel|attn_fwd|_attention|attention_",
    note: "any other kernel whose name says it computes attention",
  },
  {
    id: "attention.triton",
    class: "attention",
    match: "^_fwd_kernel|^_fwd_grouped_kernel|_decode_att|_decode_grouped_att|extend_attention|_fwd_kernel_stage",
    weak: true,
    note: "Triton attention (SGLang extend/decode, vLLM prefix prefill); generic names, so the op may decide",
  },
  {
    id: "attention.split-kv-reduce",
    class: "attention",
    match: "reduce_segments|merge_(attn_)?states|split_?kv_(reduce|combine)|splitkv_combine|combine_(attn|partial)",
    weak: true,
    note: "principle: split-KV (flash-decoding) attention ends with a kernel that merges the partial outputs of the KV segments (vLLM reduce_segments, FlashInfer merge_states, split-KV combine); weak, as 'reduce segments' can mean other things: the op decides where there is one",
  },
  {
    id: "attention.kv-cache-write",
    class: "attention",
    match:
      "reshape_and_cache|concat_and_cache|kv_cache|store_kvcache|store_cache|set_kv_buffer|(kv|page|block)_(indices|indptr|table)",
    note: "principle: KV-cache writes, and the page/block index tables paged attention reads (FlashInfer/SGLang kv_indices, kv_indptr, block tables), are part of the attention block",
  },
  { id: "gemm.marlin", class: "gemm", match: "marlin", note: "before quantization: Marlin kernels dequantize inside" },
  {
    id: "gemm.tensile",
    class: "gemm",
    match: "Cijk_|hipblaslt|rocblas_.*gemm|\\bTensile",
    note: "AMD Tensile/hipBLASLt",
  },
  {
    id: "gemm.trtllm-gen",
    class: "gemm",
    match: "^bmm_",
    weak: true,
    note: "trtllm-gen batched GEMMs (incl. MXFP4 E2m1); under a fused-MoE op they are MoE",
  },
  { id: "gemm.cublas-xmma", class: "gemm", match: "sm\\d+_xmma|xmma_gemm|\\bnvjet|cublasLt|cublas|gemv|gemmk|gemmSN" },
  { id: "gemm.ampere", class: "gemm", match: "(ampere|turing|volta|hopper)_.*gemm|s16816gemm|s1688gemm|h16816gemm" },
  { id: "gemm.deepgemm-machete", class: "gemm", match: "deep_gemm|deepgemm|machete|fp8_gemm|fp4_gemm" },
  { id: "gemm.cutlass", class: "gemm", match: "cutlass|cute::" },
  {
    id: "gemm.scaled-mm",
    class: "gemm",
    match: "scaled_mm|_mm_kernel|matmul|\\bgemm|gemm_|Gemm|splitKreduce|awq_|gptq|wvSplitK|LLGemm|LLMM1",
  },
  { id: "gemm.triton", class: "gemm", match: "^triton_(tem|mm)|^triton_.*_mm_|_matmul_" },
  {
    id: "norm.rms-layer",
    class: "norm",
    match: "rms_?norm|RMSNorm|layer_?norm|LayerNorm|group_?norm|rmsnorm|_norm_kernel",
  },
  {
    id: "norm.inductor",
    class: "norm",
    match: "^triton_(red|per)_fused.*(rsqrt|_mean_|var_mean)",
    note: "torch.compile fusions containing rsqrt/mean are norms",
  },
  {
    id: "activation",
    class: "activation",
    match: "act_and_mul|silu|gelu|swiglu|relu|swish|sigmoid_and_mul|fatrelu|_and_mul_kernel",
  },
  {
    id: "quantization",
    class: "quantization",
    match: "quant|fp8_|_fp8|fp4|int8|cvt_fp16_to|scaled_fp|float8|to_fp8",
  },
  {
    id: "sampling",
    class: "sampling",
    match:
      "sampling|Sampling|top_?k_?top_?p|TopKTopP|top_p|min_p|multinomial|argmax|ArgMax|gumbel|exponential_|SoftMax|softmax|log_softmax|penalt|distribution_elementwise|sort_kernel|radixSort|DeviceRadixSort|DeviceSegmentedRadixSort|topk",
  },
  {
    id: "elementwise.rotary",
    class: "elementwise",
    match: "rotary|rope",
    note: "rotary embedding is elementwise work",
  },
  {
    id: "elementwise.torch",
    class: "elementwise",
    match:
      "elementwise|vectorized_|unrolled_|CatArrayBatchedCopy|index_select|indexSelect|gather_kernel|scatter|fill_kernel|copy_kernel|embedding|reduce_kernel|\\bcat_|where_kernel|masked_|clamp|multi_tensor_apply",
  },
  {
    id: "elementwise.engine-bookkeeping",
    class: "elementwise",
    match:
      "compute_position|resolve_future|future_token|page_indices|prepare_inputs|advance_step|slot_mapping|req_to_token|_prepare_|(update|copy)_(input|position|seq_len)s?",
    weak: true,
    note: "principle: a serving engine's GPU-side input preparation for the next step (positions, slot mappings, page indices, the token ids an overlap scheduler resolves from the previous step's futures); weak: an op decides where there is one",
  },
  {
    id: "elementwise.cub-rocprim",
    class: "elementwise",
    match: "\\bcub::|rocprim::|\\bhipcub::|DeviceScan|DeviceReduce|DeviceSelect",
    weak: true,
    note: "CUB/rocPRIM scans and reductions; a launching sort/top-k op makes them sampling",
  },
  { id: "elementwise.inductor", class: "elementwise", match: "^triton_(poi|red|per)_", weak: true },
] as const;

/** CPU ops (innermost first) that decide a kernel's class where its name is unknown or weak. */
export interface OpRule {
  id: string;
  class: KernelClass;
  match: string;
}

export const OP_RULES: readonly OpRule[] = [
  {
    id: "op.collective",
    class: "communication",
    match: "^nccl:|^c10d::|_c10d_functional::|all_reduce|all_gather|reduce_scatter|all_to_all|symm_mem::",
  },
  { id: "op.moe", class: "moe", match: "moe|expert|SortTokens|routing|^TopK$" },
  {
    id: "op.attention",
    class: "attention",
    match:
      "attention|attn|flash_|fmha|\\bmla|sdpa|scaled_dot_product|reshape_and_cache|store_cache|store_kvcache|paged_|kv_cache|kv_indices",
  },
  {
    id: "op.gemm",
    class: "gemm",
    match:
      "^aten::(mm|addmm|bmm|baddbmm|matmul|linear|_scaled_mm|addmv|mv|_addmm_activation|_int_mm)$|gemm|scaled_mm|marlin|machete|gptq|awq|wvsplitk|LLMM1",
  },
  { id: "op.norm", class: "norm", match: "rms_?norm|layer_?norm|group_?norm|rmsnorm" },
  { id: "op.rotary", class: "elementwise", match: "rotary|rope" },
  { id: "op.activation", class: "activation", match: "silu|gelu|swiglu|act_and_mul|^aten::(relu|sigmoid|tanh)_?$" },
  { id: "op.quantization", class: "quantization", match: "quant|fp8|fp4|per_token_group" },
  {
    id: "op.sampling",
    class: "sampling",
    match:
      "^aten::(argmax|argmin|topk|sort|multinomial|softmax|_softmax|log_softmax|_log_softmax|exponential_)$|sampl|top_k|top_p|min_p",
  },
  {
    id: "op.elementwise",
    class: "elementwise",
    match:
      "^aten::(copy_|fill_|zero_|zeros|ones|empty|add|add_|mul|mul_|sub|sub_|div|div_|cat|index|index_select|gather|scatter|scatter_|where|masked_fill_|clamp|clamp_|arange|_to_copy|to|contiguous|clone|embedding|neg|pow|rsqrt|mean|sum|eq|ne|lt|gt|le|ge|max|min|cumsum|nonzero|repeat_interleave|index_put_|_index_put_impl_|exp|log|sqrt|abs|any|all|_foreach_\\w+|bitwise_\\w+)$",
  },
];

// Built on first use: zod is loaded only when a --rules file is given.
let schema: ReturnType<typeof buildSchema> | undefined;
function buildSchema() {
  const { z } = zod();
  return z.object({
    rules: z.array(
      z
        .object({
          id: z.string().min(1),
          class: z.enum(KERNEL_CLASSES),
          match: z.string().min(1),
          ignoreCase: z.boolean().optional(),
          unless: z.string().optional(),
          kinds: z.array(z.enum(["kernel", "memcpy", "memset"])).optional(),
          weak: z.boolean().optional(),
          note: z.string().optional(),
        })
        .strict(),
    ),
  });
}

/** Validates a rules document (parsed JSON/YAML); `where` names the file for messages. */
export function parseRuleFile(doc: unknown, where = "rules"): RuleFile {
  schema ??= buildSchema();
  const r = schema.safeParse(doc);
  if (!r.success) {
    const issue = r.error.issues[0]!;
    throw new InputError(`${where}: ${issue.path.join(".") || "(root)"}: ${issue.message}`, {
      hint: 'expected {"rules": [{"id": "...", "class": "gemm", "match": "regex"}]}',
    });
  }
  r.data.rules.forEach((rule, i) => {
    for (const key of ["match", "unless"] as const) {
      const src = rule[key];
      if (src === undefined) continue;
      try {
        new RegExp(src);
      } catch (e) {
        throw new InputError(`${where}: rules.${i}.${key}: invalid regular expression: ${(e as Error).message}`);
      }
    }
  });
  return r.data as RuleFile;
}

export interface Classification {
  class: KernelClass;
  rule: string;
  /** Set when the matching rule is weak: the launching op may decide instead. */
  weak?: true;
}

interface Compiled {
  id: string;
  cls: KernelClass;
  re: RegExp;
  unless?: RegExp;
  kinds: number; // bitmask: 1 kernel, 2 memcpy, 4 memset
  weak: boolean;
}

const KIND_BIT = { kernel: 1, memcpy: 2, memset: 4 } as const;
export type ActivityKind = keyof typeof KIND_BIT;

/** Compiles user rules (first, so they win) followed by the defaults; memoises per name. */
export class Classifier {
  private readonly compiled: Compiled[];
  private readonly cache = new Map<string, Classification>();
  constructor(extra?: RuleFile) {
    const all = [...(extra?.rules ?? []), ...DEFAULT_RULES];
    this.compiled = all.map((r) => {
      const flags = r.ignoreCase === false ? "" : "i";
      return {
        id: r.id,
        cls: r.class,
        re: new RegExp(r.match, flags),
        unless: r.unless ? new RegExp(r.unless, flags) : undefined,
        kinds: (r.kinds ?? ["kernel"]).reduce((m, k) => m | KIND_BIT[k], 0),
        weak: r.weak === true,
      };
    });
  }
  classify(name: string, kind: ActivityKind = "kernel"): Classification {
    const key = kind === "kernel" ? name : `${kind}\u0000${name}`;
    const hit = this.cache.get(key);
    if (hit) return hit;
    const bit = KIND_BIT[kind];
    let out: Classification = { class: kind === "kernel" ? "other" : kind, rule: "default" };
    for (const r of this.compiled) {
      if (!(r.kinds & bit)) continue;
      if (r.re.test(name) && !r.unless?.test(name)) {
        out = r.weak ? { class: r.cls, rule: r.id, weak: true } : { class: r.cls, rule: r.id };
        break;
      }
    }
    this.cache.set(key, out);
    return out;
  }
}

const defaultClassifier = new Classifier();

/** Classifies one kernel name: its class and the id of the rule that matched ("default" if none). */
export function classifyKernel(name: string, rules?: RuleFile, kind: ActivityKind = "kernel"): Classification {
  return (rules ? new Classifier(rules) : defaultClassifier).classify(name, kind);
}

/** nn.Module names (innermost first) that decide where neither the name nor an op does. */
export const MODULE_RULES: readonly OpRule[] = [
  { id: "module.moe", class: "moe", match: "moe|experts" },
  { id: "module.attention", class: "attention", match: "attention|attn" },
  { id: "module.norm", class: "norm", match: "rms_?norm|layer_?norm" },
  { id: "module.rotary", class: "elementwise", match: "rotary|rope" },
  { id: "module.sampler", class: "sampling", match: "sampler" },
  { id: "module.linear", class: "gemm", match: "linear$" },
  { id: "module.embedding", class: "elementwise", match: "embedding$" },
];

const compiledOps = OP_RULES.map((r) => ({ ...r, re: new RegExp(r.match, "i") }));
const compiledModules = MODULE_RULES.map((r) => ({ ...r, re: new RegExp(r.match, "i") }));

/** The class an nn.Module name (without "nn.Module: " and its _N suffix) stands for, if any. */
export function classifyModule(module: string): { class: KernelClass; rule: string } | undefined {
  for (const r of compiledModules) if (r.re.test(module)) return { class: r.class, rule: r.id };
  return undefined;
}

/** The class a CPU op name stands for (e.g. aten::addmm → gemm), or undefined for ops that say nothing. */
export function classifyOp(op: string): { class: KernelClass; rule: string } | undefined {
  for (const r of compiledOps) if (r.re.test(op)) return { class: r.class, rule: r.id };
  return undefined;
}

/**
 * How a kernel's class is decided from its evidence: a specific name rule wins; else the innermost
 * launching CPU op that maps to a class; else the innermost nn.Module around the launch that does;
 * else a weak name rule; else "other". `ops` and `modules` are innermost first.
 */
export function decideClass(
  name: Classification,
  ops: readonly string[],
  modules: readonly string[] = [],
): { class: KernelClass; by: string } {
  if (name.rule !== "default" && !name.weak) return { class: name.class, by: `rule ${name.rule}` };
  for (const op of ops) {
    const c = classifyOp(op);
    if (c) return { class: c.class, by: `op ${op}` };
  }
  for (const m of modules) {
    const c = classifyModule(m);
    if (c) return { class: c.class, by: `module ${m}` };
  }
  return { class: name.class, by: name.rule === "default" ? "default" : `rule ${name.rule}` };
}
