// Per-kernel evidence end to end: the name, the launching CPU op (and the ops around it), the
// nn.Module frames around the launch; graph replays keep to their names.
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { classifyModule, MODULE_RULES } from "../../src/trace/classify.ts";
import { analyzeTrace } from "../../src/trace/index.ts";
import { TraceBuilder } from "./helpers.ts";

const dir = mkdtempSync(join(tmpdir(), "inferscope-trace-evidence-"));

test("a kernel's class is decided by its name, else its launching op (innermost first), else its nn.Module; each says which", async () => {
  const b = new TraceBuilder();
  b.annotation("execute_context_0(0)_generation_8(8)", 0, 1000);
  // 1. unknown name under aten::addmm: the op decides
  const mm = b.cpuOp("aten::addmm", 10, 20);
  b.kernel("my_kernel_a", 100, 10, { corr: b.launch(12, 2, "cudaLaunchKernel", mm), ext: mm });
  // 2. unknown name whose innermost op says nothing, inside vllm::unified_attention_with_output
  b.cpuOp("vllm::unified_attention_with_output", 40, 40);
  const inner = b.cpuOp("my_helper_op", 45, 10);
  b.kernel("my_kernel_b", 120, 10, { corr: b.launch(47, 2, "cudaLaunchKernel", inner), ext: inner });
  // 3. no op at all, inside nn.Module frames: the innermost module that maps decides
  b.python("nn.Module: Qwen3DecoderLayer_0", 90, 200);
  b.python("nn.Module: Qwen3Attention_0", 95, 50);
  b.python("vllm/attention/layer.py(300): forward", 96, 40);
  b.kernel("my_kernel_c", 140, 10, { corr: b.launch(100, 2) });
  // 4. same name shape, but inside a module that says nothing (MLP): default
  b.python("nn.Module: Qwen3MLP_0", 150, 50);
  b.kernel("my_kernel_d", 160, 10, { corr: b.launch(155, 2) });
  // 5. a specific name is never overridden by its op
  const mf = b.cpuOp("vllm::moe_forward", 300, 30);
  b.kernel("Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x32x64", 400, 10, {
    corr: b.launch(305, 2, "cudaLaunchKernel", mf),
    ext: mf,
  });
  // 6. a weak name under a fused-MoE op is MoE; the same name under no op keeps its rule
  b.kernel("bmm_Bfloat16_MxE2m1MxE4m3_Fp32_t128x16", 420, 10, {
    corr: b.launch(310, 2, "cudaLaunchKernel", mf),
    ext: mf,
  });
  b.kernel("bmm_Bfloat16_MxE2m1MxE4m3_Fp32_t128x16", 440, 30, { corr: b.launch(500, 2) });
  // 7. a graph replay inside an attention module: replayed kernels have no op, names decide
  b.python("nn.Module: RadixAttention_0", 600, 100);
  const g = b.launch(610, 5, "hipGraphLaunch");
  b.kernel("my_kernel_e", 700, 10, { corr: g });
  const a = await analyzeTrace([b.write(join(dir, "evidence.pt.trace.json"))]);
  const k = a.kernelClasses;
  assert.deepEqual([k.my_kernel_a!.class, k.my_kernel_a!.decidedBy], ["gemm", "op aten::addmm"]);
  assert.deepEqual(
    [k.my_kernel_b!.class, k.my_kernel_b!.decidedBy],
    ["attention", "op vllm::unified_attention_with_output"],
  );
  assert.deepEqual([k.my_kernel_c!.class, k.my_kernel_c!.decidedBy], ["attention", "module Qwen3Attention"]);
  assert.deepEqual([k.my_kernel_d!.class, k.my_kernel_d!.decidedBy], ["other", "default"]);
  const cijk = k["Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x32x64"]!;
  assert.deepEqual([cijk.class, cijk.decidedBy], ["gemm", "rule gemm.tensile"]);
  const bmm = k["bmm_Bfloat16_MxE2m1MxE4m3_Fp32_t128x16"]!;
  // split by op: the dominant (30 µs, no op) first, both listed
  assert.deepEqual([bmm.class, bmm.decidedBy], ["gemm", "rule gemm.trtllm-gen"]);
  assert.deepEqual(bmm.variants, [
    { class: "gemm", decidedBy: "rule gemm.trtllm-gen", count: 1, totalUs: 30 },
    { class: "moe", decidedBy: "op vllm::moe_forward", count: 1, totalUs: 10 },
  ]);
  assert.deepEqual([k.my_kernel_e!.class, k.my_kernel_e!.decidedBy], ["other", "default"]);
  // per-kernel classes reach the totals: the MoE-launched bmm counts as moe
  assert.equal(a.overall.kernelUsByClass.moe, 10);
  assert.equal(a.overall.kernelUsByClass.gemm, 10 + 10 + 30);
  assert.equal(a.overall.kernelUsByClass.attention, 20);
  assert.match(a.notes.join(), /4 kernels classified by their launching CPU op or module/);
  // only the nn.Module frames were parsed; the rest of the Python stack was skipped unread
  assert.equal(a.ranks[0]!.info.skippedEvents >= 1, true);
});

test("module rules: one example each", () => {
  const cases: Array<[string, string]> = [
    ["Qwen3MoeSparseMoeBlock", "moe"],
    ["RadixAttention", "attention"],
    ["RMSNorm", "norm"],
    ["RotaryEmbedding", "elementwise"],
    ["Sampler", "sampling"],
    ["QKVParallelLinear", "gemm"],
    ["VocabParallelEmbedding", "elementwise"],
  ];
  const used = new Set<string>();
  for (const [m, cls] of cases) {
    const c = classifyModule(m);
    assert.equal(c?.class, cls, m);
    used.add(c!.rule);
  }
  for (const r of MODULE_RULES) assert.ok(used.has(r.id), `module rule ${r.id} has no test case`);
  assert.equal(classifyModule("Qwen3MLP"), undefined);
  assert.equal(classifyModule("Qwen3DecoderLayer"), undefined);
});
