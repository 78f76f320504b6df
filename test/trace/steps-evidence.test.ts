// Step evidence on hand-built traces with kernel names unlike the H200 traces': piecewise graph
// launches, eager steps issued back to back (no annotation, no gap, a sampling tail that varies),
// and classes by context (softmax between GEMMs, a router softmax that feeds a top-k, sampling only
// after the LM head).
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { analyzeTrace } from "../../src/trace/index.ts";
import { findRepeats } from "../../src/trace/repeats.ts";
import { TraceBuilder } from "./helpers.ts";

const dir = mkdtempSync(join(tmpdir(), "inferscope-trace-steps-"));

const GEMM = "ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_stages_64x4_tn";
const LAYER = [
  "rms_norm_kernel",
  GEMM, // qkv
  "rotary_embedding_kernel",
  "ampere_bf16_s16816gemm_bf16_64x64_sliced1x2_ldg8_f2f_nn", // Q·Kᵀ
  "void softmax_kernel<float>",
  "ampere_bf16_s16816gemm_bf16_64x64_sliced1x2_ldg8_f2f_tn", // P·V
  GEMM, // o
  "fused_add_rms_norm_kernel",
  GEMM, // gate_up
  "act_and_mul_kernel",
  GEMM, // down
];
const HEAD = ["embedding_lookup_kernel"];
const LM_HEAD = "ampere_bf16_s16816gemm_bf16_256x128_ldg8_f2f_stages_32x3_tn";

/** One decode step's kernel names: head, `layers` layers, final norm, LM head, sampling tail. */
function stepNames(layers: number, tail: string[]): string[] {
  return [...HEAD, ...Array.from({ length: layers }, () => LAYER).flat(), "rms_norm_kernel", LM_HEAD, ...tail];
}

test("findRepeats: the fewest units markers agree on, and their start by walking back", () => {
  // 5 units of [a b c x x c], the second of them a kernel longer; a partial unit before and after
  const unit = [1, 2, 3, 9, 9, 3];
  const seq = [9, 3, ...[0, 1, 2, 3, 4].flatMap((i) => (i === 1 ? [...unit, 7] : unit)), 1, 2];
  const r = findRepeats(seq, { pick: "smallest", minCoverage: 0.7 })!;
  assert.equal(r.count, 5);
  assert.deepEqual(
    r.units.map(([s]) => seq[s]),
    [1, 1, 1, 1, 1],
  );
  assert.equal(r.units[0]![0], 2, "the partial unit before is left out");
  assert.equal(r.units[4]![1], seq.length - 2, "and the partial unit after");
  // a sequence with no repeat has none
  assert.equal(findRepeats([1, 2, 3, 4, 5, 6, 7, 8], { pick: "smallest", minCoverage: 0.7 }), undefined);
});

test("eager steps back to back, no annotation and no gap: steps by the repeating sequence, layers inside, tail variations tolerated", async () => {
  const b = new TraceBuilder();
  let t = 1000;
  const tails = [
    ["argmax_kernel"],
    ["argmax_kernel", "copy_kernel"],
    ["argmax_kernel"],
    ["argmax_kernel"],
    ["argmax_kernel", "copy_kernel"],
  ];
  for (const tail of tails)
    for (const n of stepNames(6, tail)) {
      b.eager(n, t - 3, t, n === LM_HEAD ? 40 : n.includes("gemm") ? 12 : 3);
      t += (n === LM_HEAD ? 40 : n.includes("gemm") ? 12 : 3) + 1;
    }
  const a = await analyzeTrace([b.write(join(dir, "eager-back-to-back.json"))]);
  assert.equal(a.stepMode, "period", a.notes.join("; "));
  assert.equal(a.steps.length, 5);
  assert.equal(a.layers?.layers, 6);
  assert.equal(a.layers?.kernelsPerLayer, LAYER.length);
  for (const s of a.steps) {
    assert.equal(s.kernelsByClass.sampling, 1, `step ${s.index}: the argmax`);
    // Q·Kᵀ, softmax, P·V per layer
    assert.equal(s.kernelsByClass.attention, 6 * 3, `step ${s.index}`);
  }
  assert.equal(a.kernelClasses["void softmax_kernel<float>"]!.class, "attention");
});

test("piecewise CUDA graphs: one step per period of graph launches, eager attention between the pieces in its step", async () => {
  const b = new TraceBuilder();
  let t = 1000;
  const piece = (names: string[]) => {
    const c = b.launch(t - 5, 4, "cudaGraphLaunch");
    for (const n of names) {
      b.kernel(n, t, 10, { corr: c });
      t += 11;
    }
  };
  for (let s = 0; s < 4; s++) {
    piece(["embedding_lookup_kernel", "rms_norm_kernel", GEMM]);
    b.eager("flash_fwd_splitkv_kernel", t - 3, t, 5);
    t += 6;
    piece([
      "ampere_bf16_s16816gemm_bf16_64x64_o",
      "rms_norm_kernel",
      GEMM,
      "act_and_mul_kernel",
      GEMM,
      "rms_norm_kernel",
      GEMM,
    ]);
    b.eager("flash_fwd_splitkv_kernel", t - 3, t, 5);
    t += 6;
    piece([GEMM, "rms_norm_kernel", LM_HEAD]);
    b.eager("argmax_kernel", t - 3, t, 4);
    t += 5;
  }
  const a = await analyzeTrace([b.write(join(dir, "piecewise.json"))]);
  assert.equal(a.stepMode, "graph");
  assert.equal(a.steps.length, 4);
  assert.match(a.notes.join("\n"), /one step per 3 CUDA\/HIP graph launches/);
  for (const s of a.steps) {
    assert.equal(s.kernels, 3 + 1 + 7 + 1 + 3 + 1);
    assert.equal(s.kernelsByClass.attention, 2);
    assert.equal(s.kernelsByClass.sampling, 1);
  }
});

test("context: a router softmax that feeds a top-k is not attention; a sampling name before the LM head is not sampling", async () => {
  const b = new TraceBuilder();
  let t = 1000;
  for (let s = 0; s < 2; s++) {
    const names = [
      GEMM,
      "void softmax_kernel<float>",
      "topk_kernel",
      GEMM,
      "argmax_kernel",
      GEMM,
      LM_HEAD,
      "argmax_kernel",
    ];
    const c = b.launch(t - 5, 4, "cudaGraphLaunch");
    for (const n of names) {
      b.kernel(n, t, 10, { corr: c });
      t += 11;
    }
  }
  const a = await analyzeTrace([b.write(join(dir, "router.json"))]);
  assert.equal(a.steps.length, 2);
  for (const s of a.steps) {
    assert.equal(s.kernelsByClass.attention ?? 0, 0, "softmax → topk is a choice, not attention");
    assert.equal(s.kernelsByClass.sampling, 1, "only the argmax after the LM head");
  }
  const soft = a.kernelClasses["void softmax_kernel<float>"]!;
  assert.deepEqual([soft.class, soft.decidedBy], ["elementwise", "context not-sampling.before-lm-head"]);
  const argmax = a.kernelClasses.argmax_kernel!;
  assert.equal(argmax.variants?.length, 2, "one name, two classes by place: both shown");
});
