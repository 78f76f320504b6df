import assert from "node:assert/strict";
import { test } from "node:test";
import { InputError } from "../../src/errors.ts";
import {
  Classifier,
  classifyKernel,
  classifyOp,
  DEFAULT_RULES,
  decideClass,
  OP_RULES,
  parseRuleFile,
} from "../../src/trace/classify.ts";

// [kernel name, expected class, expected rule]
const CASES: Array<[string, string, string]> = [
  ["ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "communication", "comm.nccl"],
  ["ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "communication", "comm.nccl"],
  ["ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "communication", "comm.nccl"],
  ["ncclSymkDevKernel_AllReduce_AGxLLMC_R_sum_bf16(ncclSymkDevWorkArgs4K)", "communication", "comm.nccl-symmetric"],
  ["void ncclSymDevKernel_AllReduce_RSxLD_AGxST_sum_bf16<1>(ncclSymDevArgs)", "communication", "comm.nccl-symmetric"],
  [
    "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 4>(vllm::RankData*, vllm::RankSignals, vllm::Signal*, __nv_bfloat16*, int, int)",
    "communication",
    "comm.vllm-custom-ar",
  ],
  ["void vllm::cross_device_reduce_2stage<__nv_bfloat16, 8>(vllm::RankData*)", "communication", "comm.vllm-custom-ar"],
  [
    "void c10d::symmetric_memory::multimem_all_reduce_kernel<c10::BFloat16, 16, 8>(c10::BFloat16*)",
    "communication",
    "comm.symmetric-memory",
  ],
  [
    "void c10d::symmetric_memory::two_shot_all_reduce_kernel<float, 16, 8>(float*)",
    "communication",
    "comm.symmetric-memory",
  ],
  [
    "void flashinfer::trtllm_allreduce_fusion::allreduce_fusion_kernel_oneshot_lamport<__nv_bfloat16, 4, true>(flashinfer::AllReduceFusionParams)",
    "communication",
    "comm.trtllm-fused-ar",
  ],
  // false friend: an Inductor pointwise fusion whose name merely contains all_reduce
  ["triton_poi_fused_add_all_reduce_embedding_0", "elementwise", "elementwise.torch"],
  ["triton_poi_fused_all_reduce_mul_3", "elementwise", "elementwise.inductor"],
  ["fused_moe_kernel", "moe", "moe.fused"],
  ["void vllm::moe::moe_align_block_size_kernel<int>(int const*, int*)", "moe", "moe.fused"],
  ["void vllm::moe::topkGatingSoftmax<8, 64, 4, 16, int, float>(float const*)", "moe", "moe.fused"],
  ["void vllm::moe::grouped_topk_kernel<float>(float*)", "moe", "moe.fused"],
  ["void cutlass::gemm::kernel::GemmGrouped<cutlass::gemm::kernel::MoeFCGemm>(Params)", "moe", "moe.fused"],
  [
    "void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass::bfloat16_t>, false>(flash::Flash_fwd_params)",
    "attention",
    "attention.flash",
  ],
  // FA3 is wrapped in cutlass::device_kernel: attention, not GEMM
  [
    "void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<flash::CollectiveMainloopFwdSm90<2, cute::tuple<cute::C<1> > > > > >(flash::FlashAttnFwdSm90::Params)",
    "attention",
    "attention.flash",
  ],
  [
    "void flashinfer::BatchDecodeWithPagedKVCacheKernel<flashinfer::PosEncodingMode>(Params)",
    "attention",
    "attention.flashinfer",
  ],
  [
    "void flashmla::flash_fwd_splitkv_mla_kernel<flashmla::Flash_fwd_kernel_traits_mla<576>>(Params)",
    "attention",
    "attention.flash",
  ],
  ["void vllm::paged_attention_v2_kernel<__nv_bfloat16, 128>(float*)", "attention", "attention.paged"],
  [
    "void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16>(__nv_bfloat16 const*)",
    "attention",
    "attention.kv-cache-write",
  ],
  [
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
    "gemm",
    "gemm.cublas-xmma",
  ],
  ["nvjet_tst_64x8_64x16_4x1_v_bz_splitK_TNT", "gemm", "gemm.cublas-xmma"],
  ["void marlin::Marlin<(vllm::ScalarTypeId)4, 256, 1, 8, 8, 4, false>(int4 const*)", "gemm", "gemm.marlin"],
  ["ampere_bf16_s16816gemm_bf16_64x64_sliced1x2_ldg8_f2f_stages_64x5_tn", "gemm", "gemm.ampere"],
  [
    "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int>, cutlass::gemm::collective::CollectiveMma> >(Params)",
    "gemm",
    "gemm.cutlass",
  ],
  ["triton_tem_fused_mm_0", "gemm", "gemm.triton"],
  ["_w8a8_block_fp8_matmul", "gemm", "gemm.scaled-mm"],
  ["void vllm::rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*)", "norm", "norm.rms-layer"],
  ["void vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*)", "norm", "norm.rms-layer"],
  ["void flashinfer::norm::RMSNormKernel<8u, __nv_bfloat16>(__nv_bfloat16*)", "norm", "norm.rms-layer"],
  ["triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0", "norm", "norm.inductor"],
  ["void vllm::act_and_mul_kernel<c10::BFloat16, &vllm::silu_kernel>(c10::BFloat16*)", "activation", "activation"],
  ["triton_poi_fused_mul_silu_1", "activation", "activation"],
  [
    "void vllm::dynamic_scaled_fp8_quant_kernel<c10::BFloat16, c10::Float8_e4m3fn>(c10::Float8_e4m3fn*)",
    "quantization",
    "quantization",
  ],
  ["_per_token_group_quant_fp8", "quantization", "quantization"],
  ["void flashinfer::sampling::TopKTopPSamplingFromProbKernel<1024u>(float*)", "sampling", "sampling"],
  [
    "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)",
    "sampling",
    "sampling",
  ],
  [
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::ArgMaxOps<float>, unsigned int, long, 4> >(Op)",
    "sampling",
    "sampling",
  ],
  ["void vllm::rotary_embedding_kernel<c10::BFloat16, true>(long const*)", "elementwise", "elementwise.rotary"],
  [
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<long>, at::detail::Array<char*, 1> >(int)",
    "elementwise",
    "elementwise.torch",
  ],
  [
    "void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 1, 128, 1>(float*)",
    "elementwise",
    "elementwise.torch",
  ],
  // Kernel families of the major stacks, as they appear in the public traces in ../shared/traces/.
  [
    "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x32x64_MI16x16x1_SN_LDSB1_AFC1_AFEM1_AFEM1_ASEM1_CLR1_CADS0",
    "gemm",
    "gemm.tensile",
  ],
  ["Cijk_Ailk_Bjlk_SB_Bias_AS_SAV_UserArgs_MT64x16x16_MI16x16x1_SN_LDSB0_AFC1", "gemm", "gemm.tensile"],
  [
    "bmm_Bfloat16_MxE2m1MxE4m3_Fp32_t128x16x256u2_s3_et128x16_m128x16x32_cga1x1x1_16dp256b_rM_TN_transOut_schedP2x1x2x3_biasM_bN_tmaOpt_clmp_dynBatch_sm100f",
    "gemm",
    "gemm.trtllm-gen",
  ],
  [
    "bmm_MxE4m3_MxE2m1MxE4m3_Fp32_t128x16x256u2_s3_et128x16_m128x16x32_cga1x1x1_16dp256b_rM_TN_transOut_schedP2x1x2x3_biasM_bN_tma_tmaOpt_clmp_swiGlu_dynBatch_sm100f",
    "gemm",
    "gemm.trtllm-gen",
  ],
  ["void deep_gemm::fp8_gemm_kernel<128u, 128u>(float*)", "gemm", "gemm.deepgemm-machete"],
  ["void machete::MacheteKernelTemplate<cutlass::bfloat16_t>(Params)", "gemm", "gemm.deepgemm-machete"],
  ["_matmul_ogs_NNT_bf16xbf16xmxfp4_16x128x256x1_swiglu", "moe", "moe.triton-ogs"],
  ["_finalize_matmul_scatter_bf16", "moe", "moe.triton-ogs"],
  ["_combined_routing_compute", "moe", "moe.triton-ogs"],
  ["_sum_bitmatrix_rows", "moe", "moe.triton-ogs"],
  ["_topk_forward", "moe", "moe.triton-topk"],
  ["fused_moe_kernel", "moe", "moe.fused"],
  ["_ZN5aiter6fmoe_g1u1_bf16_pertokenFp8", "moe", "moe.fused"],
  [
    "_ZN7ck_tile6kentryILi2ENS_38FmhaBatchPrefillWithPagedKVCacheKernelINS_40BlockFmhaBatchPrefillPipelineQRKSVSAsync",
    "attention",
    "attention.flash",
  ],
  ["kernel_unified_attention_3d", "attention", "attention.flash"],
  ["_fwd_kernel", "attention", "attention.triton"],
  ["_fwd_grouped_kernel_stage1", "attention", "attention.triton"],
  ["reduce_segments", "attention", "attention.split-kv-reduce"],
  ["merge_attn_states_kernel", "attention", "attention.split-kv-reduce"],
  [
    "cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmma_f16_knob_35_64x64x64_4x1x1_kernel0_0",
    "attention",
    "attention.cudnn-sdpa",
  ],
  ["fmha_cutlassF_bf16_aligned_64x64_rf_sm80", "attention", "attention.flash"],
  ["xformers_flash_decoding_kernel", "attention", "attention.xformers"],
  ["my_sliding_window_attention_kernel", "attention", "attention.named"],
  ["build_page_table_kernel", "attention", "attention.kv-cache-write"],
  [
    "void (anonymous namespace)::store_kvcache<2048l, 4, false, long>((anonymous namespace)::StoreKVCacheParams)",
    "attention",
    "attention.kv-cache-write",
  ],
  ["create_flashinfer_kv_indices_triton", "attention", "attention.kv-cache-write"],
  [
    "_ZN5aiter24add_rmsnorm_quant_kernelIDF16bDF16bLi64ELi8ELb0ELb0ELb1ELi1EEEvPT0_PT_PfS4_S4_S4_diiiiiiib",
    "norm",
    "norm.rms-layer",
  ],
  ["_ZN7ck_tile6kentryILi1ENS_12Rmsnorm2dFwdINS_27Rmsnorm2dFwdPipelineOnePass", "norm", "norm.rms-layer"],
  [
    "_ZN7sgl_hip10activation18act_and_mul_kernelI14__hip_bfloat16TnPFT_RKS3_EXadL_Z4siluIS2_ES3_S5_EEEEvPS3_PS4_i",
    "activation",
    "activation",
  ],
  ["compute_position_kernel", "elementwise", "elementwise.engine-bookkeeping"],
  [
    "void (anonymous namespace)::resolve_future_token_ids_kernel<long>(long*, long const*, unsigned long)",
    "elementwise",
    "elementwise.engine-bookkeeping",
  ],
  [
    "void rocprim::ROCPRIM_400200_NS::detail::trampoline_kernel<rocprim::ROCPRIM_400200_NS::detail::wrapped_scan_config<rocprim::ROCPRIM_400200_NS::default_config, long>>()",
    "elementwise",
    "elementwise.cub-rocprim",
  ],
  [
    "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<2>>()",
    "elementwise",
    "elementwise.torch",
  ],
  ["void mscclpp::allreduce_kernel<bf16>(int)", "communication", "comm.rccl"],
  ["some_unknown_kernel_xyz", "other", "default"],
];

test("every default rule is exercised and each name lands in its class with the matching rule", () => {
  const used = new Set<string>();
  for (const [name, cls, rule] of CASES) {
    const c = classifyKernel(name);
    assert.deepEqual({ class: c.class, rule: c.rule }, { class: cls, rule }, name);
    used.add(c.rule);
  }
  used.add(classifyKernel("Memcpy DtoH (Device -> Pinned)", undefined, "memcpy").rule);
  used.add(classifyKernel("Memset (Device)", undefined, "memset").rule);
  used.add("comm.rccl");
  used.add("comm.quick-reduce");
  used.add("comm.all-to-all");
  used.add("comm.generic");
  used.add("moe.routing");
  used.add("moe.grouped-gemm");
  used.add("attention.mla");
  for (const r of DEFAULT_RULES) assert.ok(used.has(r.id), `rule ${r.id} has no test case`);
});

test("the launching op decides where the name is unknown or weak; a specific name rule is never overridden", () => {
  const unknown = classifyKernel("some_unknown_kernel_xyz");
  assert.deepEqual(decideClass(unknown, ["aten::addmm"]), { class: "gemm", by: "op aten::addmm" });
  assert.deepEqual(decideClass(unknown, []), { class: "other", by: "default" });
  // innermost op first; an op that says nothing is skipped in favour of the one enclosing it
  assert.deepEqual(decideClass(unknown, ["my_helper", "vllm::unified_attention_with_output"]), {
    class: "attention",
    by: "op vllm::unified_attention_with_output",
  });
  const bmm = classifyKernel("bmm_Bfloat16_MxE2m1MxE4m3_Fp32_t128x16x256u2_s3");
  assert.equal(bmm.weak, true);
  assert.deepEqual(decideClass(bmm, ["vllm::moe_forward"]), { class: "moe", by: "op vllm::moe_forward" });
  assert.deepEqual(decideClass(bmm, ["cudaGraphLaunch"]), { class: "gemm", by: "rule gemm.trtllm-gen" });
  const cijk = classifyKernel("Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x32x64");
  assert.deepEqual(decideClass(cijk, ["vllm::moe_forward"]), { class: "gemm", by: "rule gemm.tensile" });
  // op table examples (one per rule)
  const ops: Array<[string, string]> = [
    ["nccl:all_reduce", "communication"],
    ["vllm::moe_forward", "moe"],
    ["_C_cache_ops::reshape_and_cache_flash", "attention"],
    ["sglang::store_cache", "attention"],
    ["aten::_scaled_mm", "gemm"],
    ["aiter::rmsnorm2d_fwd_with_add_ck", "norm"],
    ["_C::rotary_embedding", "elementwise"],
    ["sgl_kernel::silu_and_mul", "activation"],
    ["_C::scaled_fp8_quant", "quantization"],
    ["aten::argmax", "sampling"],
    ["aten::cumsum", "elementwise"],
  ];
  const used = new Set<string>();
  for (const [op, cls] of ops) {
    const c = classifyOp(op);
    assert.equal(c?.class, cls, op);
    used.add(c!.rule);
  }
  for (const r of OP_RULES) assert.ok(used.has(r.id), `op rule ${r.id} has no test case`);
  assert.equal(classifyOp("CUDAGraph::replay"), undefined);
});

test("rules not covered above still match their own examples", () => {
  assert.equal(classifyKernel("rcclGenericKernel_AllReduce(int)").rule, "comm.rccl");
  assert.equal(classifyKernel("void rcclAllReduceKernel<float>(int)").rule, "comm.rccl");
  assert.equal(classifyKernel("void quickreduce::allreduce_prototype_twoshot<half>(int)").rule, "comm.quick-reduce");
  assert.equal(classifyKernel("void deep_ep::intranode::dispatch<8>(int)").rule, "comm.all-to-all");
  assert.equal(classifyKernel("void pplx::dispatchKernel<bf16>(int)").rule, "comm.all-to-all");
  assert.equal(classifyKernel("void c10d::reduce_scatter_kernel<float>(int)").rule, "comm.generic");
  assert.equal(classifyKernel("void topk_sigmoid_kernel<float>(float*)").rule, "moe.routing");
  assert.equal(classifyKernel("void deep_gemm::m_grouped_fp8_gemm_kernel<128>(int)").rule, "moe.grouped-gemm");
  assert.equal(classifyKernel("void cutlass_mla_decode_kernel<128>(int)").rule, "attention.mla");
  assert.equal(classifyKernel("Memcpy HtoD (Pinned -> Device)", undefined, "memcpy").class, "memcpy");
  assert.equal(classifyKernel("Memset (Device)", undefined, "memset").class, "memset");
});

test("user rules run first and record their id", () => {
  const rules = parseRuleFile({
    rules: [{ id: "mine.fused-ar-norm", class: "communication", match: "^my_fused_allreduce_rmsnorm" }],
  });
  const c = new Classifier(rules);
  assert.deepEqual(c.classify("my_fused_allreduce_rmsnorm_kernel"), {
    class: "communication",
    rule: "mine.fused-ar-norm",
  });
  // overriding a default: route cutlass kernels to "other"
  const o = new Classifier(parseRuleFile({ rules: [{ id: "x", class: "other", match: "cutlass_80" }] }));
  assert.deepEqual(o.classify("void cutlass::Kernel2<cutlass_80_tensorop_s16816gemm>(P)"), {
    class: "other",
    rule: "x",
  });
  const cs = new Classifier(parseRuleFile({ rules: [{ id: "cs", class: "gemm", match: "^ABC", ignoreCase: false }] }));
  assert.equal(cs.classify("abc_kernel").rule, "default");
  assert.equal(cs.classify("ABC_kernel").rule, "cs");
});

test("a user rule can be weak: the launching op then decides", () => {
  const c = new Classifier(
    parseRuleFile({ rules: [{ id: "site.mine", class: "gemm", match: "^mykern", weak: true }] }),
  );
  const cls = c.classify("mykern_v2");
  assert.deepEqual(cls, { class: "gemm", rule: "site.mine", weak: true });
  assert.deepEqual(decideClass(cls, ["vllm::moe_forward"]), { class: "moe", by: "op vllm::moe_forward" });
  assert.deepEqual(decideClass(cls, []), { class: "gemm", by: "rule site.mine" });
  assert.throws(
    () => parseRuleFile({ rules: [{ id: "a", class: "gemm", match: "x", weak: "yes" }] }, "r.yaml"),
    /rules\.0\.weak/,
  );
});

test("bad rule files are rejected with the path of the problem", () => {
  assert.throws(
    () => parseRuleFile({ rules: [{ id: "a", class: "gpu", match: "x" }] }, "r.yaml"),
    (e: unknown) => {
      assert.ok(e instanceof InputError);
      assert.match((e as Error).message, /^r\.yaml: rules\.0\.class/);
      return true;
    },
  );
  assert.throws(
    () => parseRuleFile({ rules: [{ id: "a", class: "gemm", match: "(" }] }, "r.yaml"),
    /rules\.0\.match: invalid regular expression/,
  );
  assert.throws(() => parseRuleFile({ rule: [] }, "r.yaml"), /r\.yaml: rules/);
});

test("--rules files: YAML or JSON, with file:line:col for syntax errors", async () => {
  const { mkdtempSync, writeFileSync } = await import("node:fs");
  const { tmpdir } = await import("node:os");
  const { join } = await import("node:path");
  const { loadRuleFile } = await import("../../src/trace/analyze.ts");
  const d = mkdtempSync(join(tmpdir(), "inferscope-rules-"));
  const ok = join(d, "ok.json");
  writeFileSync(ok, JSON.stringify({ rules: [{ id: "a", class: "gemm", match: "^my_gemm" }] }));
  assert.equal((await loadRuleFile(ok)).rules[0]!.id, "a");
  const bad = join(d, "bad.yaml");
  writeFileSync(bad, "rules:\n  - id: x\n    class: [gemm\n");
  await assert.rejects(loadRuleFile(bad), /bad\.yaml:\d+:\d+: /);
  const wrong = join(d, "wrong.yaml");
  writeFileSync(wrong, "rules:\n  - id: x\n    class: nope\n    match: a\n");
  await assert.rejects(loadRuleFile(wrong), /wrong\.yaml: rules\.0\.class/);
});
