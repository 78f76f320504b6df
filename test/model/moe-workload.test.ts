import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { InputError, UsageError } from "../../src/errors.ts";
import { SEED_DEPLOYMENT } from "../../src/model/examples.ts";
import { explain } from "../../src/model/explain.ts";
import {
  expertFlopScale,
  expertsTouched,
  MOE_KERNEL_FAMILIES,
  moeKernelFamily,
  ROUTING_KERNELS,
} from "../../src/model/moe.ts";
import { workloadFromOptions } from "../../src/model/options.ts";
import { predict, predictStep } from "../../src/model/predict.ts";
import { resolve } from "../../src/model/resolve.ts";
import { kernelCount } from "../../src/model/step.ts";
import type { StepCostFn, WorkloadSpec } from "../../src/model/workload.ts";
import {
  parseLengths,
  percentile,
  predictWorkload,
  schedulerDefaults,
  simulateSchedule,
} from "../../src/model/workload.ts";

// ---------------------------------------------------------------- MoE physics

test("MoE physics: every term named with its formula, inputs and source; explain has a sentence for each", () => {
  const p = predict(SEED_DEPLOYMENT);
  const names = (p.decode.physics ?? []).map((t) => t.name);
  for (const n of [
    "moe-experts-touched",
    "moe-expert-gemm",
    "moe-routing-kernels",
    "moe-shared-experts",
    "moe-ep-vs-tp",
    "mla-absorbed",
  ])
    assert.ok(names.includes(n), `${n} missing from ${names.join(", ")}`);
  for (const t of p.decode.physics!) {
    assert.ok(t.formula.length > 10, t.name);
    assert.ok(t.source.length > 5, t.name);
    assert.ok(Object.keys(t.inputs).length > 0, t.name);
  }
  // The seed's decomposition is unchanged: 156 all-reduces of 12 KiB.
  assert.equal(p.collectives.countPerToken, 156);
  assert.equal(p.collectives.bytesEach, 12288);
  const touched = p.decode.physics!.find((t) => t.name === "moe-experts-touched")!;
  assert.equal((touched.inputs as any).touchedPerLayer, 8);
  // The decode term where each lands lists it.
  assert.deepEqual(p.decode.terms.find((t) => t.name === "moe-experts")!.inputs.physics, [
    "moe-experts-touched",
    "moe-expert-gemm",
  ]);
  const lines = explain(p);
  for (const re of [
    /Experts touched: 8 of 256/,
    /Expert GEMMs run CUTLASS grouped GEMM/,
    /Routing kernels per MoE layer/,
    /EP vs TP per MoE layer/,
    /MLA absorbed decode/,
  ])
    assert.ok(
      lines.some((l) => re.test(l)),
      String(re),
    );
});

test("MoE physics: experts touched, the routing kernel list matches the kernel count, EP bytes vs all-reduce bytes", () => {
  assert.equal(expertsTouched(256, 8, 1), 8);
  // B → ∞ touches every expert; B = 64 with k/E = 1/32 touches 256·(1 − (31/32)^64).
  assert.ok(Math.abs(expertsTouched(256, 8, 64) - 256 * (1 - (31 / 32) ** 64)) < 1e-9);
  assert.ok(expertsTouched(256, 8, 10_000) > 255.99);
  for (const engine of ["vllm", "sglang", "trtllm", "llamacpp", "mlx", "gptfast"] as const) {
    const one = engine === "mlx" || engine === "llamacpp";
    const r = resolve({
      model: "qwen3-235b-a22b",
      gpu: one ? "m2-ultra" : "h100-sxm",
      gpus: one ? 1 : 8,
      tp: one ? 1 : 8,
      engine,
    });
    assert.equal(kernelCount(r).moeRoutingPerLayer, ROUTING_KERNELS[engine].length, engine);
  }
  const p = predict({ model: "qwen3-235b-a22b", gpu: "h100-sxm", gpus: 8, tp: 8, batch: 16 });
  const ep = p.decode.physics!.find((t) => t.name === "moe-ep-vs-tp")!.inputs as any;
  // dispatch (BF16) + combine = 2·B·k·h·2·(1 − 1/8); all-reduce B·h·2.
  const h = p.architecture.hidden;
  assert.equal(ep.tpAllReduceBytesPerLayer, 16 * h * 2);
  assert.equal(ep.epDispatchBytesPerLayer + ep.epCombineBytesPerLayer, Math.round(16 * 8 * h * 2 * (7 / 8)) * 2);
});

test("MoE physics: kernel families per engine/format/device, padded M grows the expert FLOPs, never below 1", () => {
  const fam = (o: object) =>
    moeKernelFamily(resolve({ model: "deepseek-v3", gpu: "h100-sxm", gpus: 8, tp: 8, ...o })).id;
  assert.equal(fam({ quant: "fp8-block" }), "deepgemm");
  assert.equal(fam({ quant: "bf16" }), "triton-fused-moe");
  assert.equal(fam({ engine: "trtllm" }), "trtllm-moe");
  assert.equal(fam({ engine: "llamacpp" }), "llamacpp-mul-mat-id");
  // Triton: M = 1 padded to 16 while tokens ≤ E; llama.cpp's vector kernels pad nothing up to 8 tokens per expert.
  const tri = MOE_KERNEL_FAMILIES["triton-fused-moe"];
  assert.equal(tri.paddedM(1, 1, 256), 16);
  assert.equal(tri.paddedM(20, 512, 256), 64);
  assert.equal(MOE_KERNEL_FAMILIES["llamacpp-mul-mat-id"].paddedM(3, 3, 8), 3);
  const r1 = resolve({ model: "qwen3-235b-a22b", gpu: "h100-sxm", gpus: 8, tp: 8, batch: 1 });
  assert.equal(expertFlopScale(r1), 16);
  const rl = resolve({ model: "qwen3-235b-a22b", gpu: "h100-sxm", gpus: 8, tp: 8, batch: 1, engine: "llamacpp" });
  assert.equal(expertFlopScale(rl), 1);
});

// ---------------------------------------------------------------- workload

const QWEN = { model: "qwen3-8b", gpu: "h100-sxm" } as const;
const fixed = (n: number) => ({ mean: n, sd: 0, source: "fixed" });

test("workload: at C = 1 every decode step is pure; TPOT equals the decode step at batch 1 and the mean context", () => {
  const w = predictWorkload(QWEN, { concurrency: 1, inputLen: fixed(230), outputLen: fixed(220), requests: 20 });
  assert.equal(w.stepsWithPrefill, 0);
  assert.equal(w.prefillShare, 0);
  const step = predictStep({ ...QWEN, batch: 1, contextLen: 230 + 110 }).stepMs;
  assert.ok(Math.abs(w.meanTpotMs.mid / step.mid - 1) < 0.005, `${w.meanTpotMs.mid} vs ${step.mid}`);
  assert.ok(Math.abs(w.meanItlMs.mid / step.mid - 1) < 0.005);
  assert.ok(w.meanTpotMs.low <= w.meanTpotMs.mid && w.meanTpotMs.mid <= w.meanTpotMs.high);
  // TTFT covers the prefill step and the intake.
  assert.ok(w.ttftMs.mid > step.mid);
});

test("workload: TPOT grows with concurrency and with the input length; the prefill share is named", () => {
  const spread = (m: number) => ({ mean: m, sd: 0.8 * m, source: "log-normal" });
  const run = (C: number, I: number) =>
    predictWorkload(QWEN, { concurrency: C, inputLen: spread(I), outputLen: spread(220), requests: 150 });
  const c2 = run(2, 230);
  const c8 = run(8, 230);
  const c8long = run(8, 2000);
  assert.ok(c8.meanTpotMs.mid > c2.meanTpotMs.mid, `${c8.meanTpotMs.mid} ≤ ${c2.meanTpotMs.mid}`);
  assert.ok(c8long.meanTpotMs.mid > c8.meanTpotMs.mid, `${c8long.meanTpotMs.mid} ≤ ${c8.meanTpotMs.mid}`);
  assert.ok(c8.prefillShare > 0 && c8.prefillShare < 0.5);
  assert.ok(c8.meanTpotMs.mid > c8.pureDecodeTpotMs);
  assert.match(c8.summary, /prefill chunks ride in \d+\.\d % of decode steps, \+\d+\.\d+ ms each: mean TPOT/);
  assert.ok(c8.p99TpotMs.mid >= c8.meanTpotMs.mid);
  assert.ok(c8.p99ItlMs.mid >= c8.meanItlMs.mid);
});

test("workload: the schedule's prefill share matches a direct count and the closed-form expectation", () => {
  // A constant-cost step: 10 ms, + 1 ms per 100 prompt tokens. 3 clients, 100-token prompts, 50-token outputs.
  const cost: StepCostFn = (_B, T) => {
    const ms = 10 + T / 100;
    return { low: ms, mid: ms, high: ms };
  };
  const spec: WorkloadSpec = { concurrency: 3, inputLen: fixed(100), outputLen: fixed(50), requests: 60, seed: 7 };
  const s = simulateSchedule(spec, { maxNumBatchedTokens: 64, maxNumSeqs: 100, source: "test" }, cost);
  assert.equal(s.requests.length, 60);
  // Every request yields exactly its output length in tokens, each from a distinct, increasing step.
  for (const r of s.requests) {
    assert.equal(r.tokenSteps.length, 50);
    for (let i = 1; i < r.tokenSteps.length; i++) assert.ok(r.tokenSteps[i] > r.tokenSteps[i - 1]);
  }
  // Budget respected: decodes + prompt tokens ≤ 64 per step.
  for (const st of s.steps) assert.ok(st.decodes + st.prefillTokens <= 64);
  // Direct count: a 100-token prompt needs ⌈100/(64 − decodes)⌉ chunks; every chunk step with a decode counts.
  const decodeSteps = s.steps.filter((x) => x.decodes > 0);
  const withPrefill = decodeSteps.filter((x) => x.prefillTokens > 0).length;
  const share = withPrefill / decodeSteps.length;
  // Closed form: each request's prompt rides in ≈ 2 steps (64 − 2 decodes = 62 tokens per step); per client cycle
  // of 2 + 49 steps, the other two clients decode, so ≈ 3·2 prompt steps per 51-step cycle fall in decode steps.
  const expected = (3 * 2) / 51;
  assert.ok(Math.abs(share - expected) < 0.04, `share ${share} vs ${expected}`);
  // The predictWorkload bookkeeping counts the same way.
  const prompts = s.steps.reduce((a, x) => a + x.prefillTokens, 0);
  assert.equal(prompts, 60 * 100);
});

test("workload: percentile is numpy's linear interpolation; engine defaults cite their source", () => {
  assert.equal(percentile([1, 2, 3, 4], 50), 2.5);
  assert.equal(percentile([1, 2, 3, 4, 5], 99), 4.96);
  const h100 = schedulerDefaults(resolve({ ...QWEN }));
  assert.equal(h100.maxNumBatchedTokens, 8192);
  assert.match(h100.source, /get_batch_defaults/);
  const a100 = schedulerDefaults(resolve({ model: "qwen3-8b", gpu: "a100-80gb" }));
  assert.equal(a100.maxNumBatchedTokens, 2048);
});

test("workload: request-rate mode runs Poisson arrivals; lengths files parse, bad ones name file and line", () => {
  const w = predictWorkload(QWEN, { requestRate: 2, inputLen: fixed(500), outputLen: fixed(100), requests: 40 });
  assert.equal(w.mode, "request-rate");
  assert.equal(w.requestsSimulated, 40);
  assert.ok(w.meanTpotMs.mid > 0 && w.ttftMs.mid > 0);
  const csv = parseLengths("TIMESTAMP,ContextTokens,GeneratedTokens\n0,100,10\n1,300,30\n", "a.csv");
  assert.equal(csv.input.mean, 200);
  assert.deepEqual(csv.output.samples, [10, 30]);
  const jsonl = parseLengths(
    '{"input_length": 5, "output_length": 7}\n{"input_length": 9, "output_length": 1}\n',
    "m.jsonl",
  );
  assert.equal(jsonl.input.mean, 7);
  const res = parseLengths(JSON.stringify({ input_lens: [1, 3], output_lens: [2, 2] }), "r.json");
  assert.equal(res.output.mean, 2);
  assert.throws(
    () => parseLengths('{"input_length": 5}\n', "m.jsonl"),
    (e: unknown) => e instanceof InputError && /m\.jsonl:1:/.test((e as Error).message),
  );
  assert.throws(() => parseLengths("a,b\n1,2\n", "x.csv"), /x\.csv:1: CSV header needs/);
  // The CLI options: a lengths file from disk; workload flags without a load are refused.
  const dir = mkdtempSync(join(tmpdir(), "inferscope-wl-"));
  const f = join(dir, "lens.csv");
  writeFileSync(f, "ContextTokens,GeneratedTokens\n100,10\n200,20\n");
  const spec = workloadFromOptions({ concurrency: "4", lengths: f })!;
  assert.equal(spec.inputLen.mean, 150);
  assert.equal(workloadFromOptions({}), undefined);
  // ShareGPT lengths as bench would send them (its token estimate, vLLM's filters).
  const sg = workloadFromOptions({
    concurrency: "2",
    dataset: "sharegpt",
    datasetPath: "../shared/workloads/sharegpt-fastchat/dummy_conversation.json",
  })!;
  assert.ok(sg.inputLen.samples!.length > 0 && sg.inputLen.mean >= 4);
  assert.equal(sg.inputLen.samples!.length, sg.outputLen.samples!.length);
  assert.throws(() => workloadFromOptions({ concurrency: "2", dataset: "sharegpt" }), /needs --dataset-path/);
  assert.throws(() => workloadFromOptions({ concurrency: "2", dataset: "alpaca", datasetPath: f }), UsageError);
  assert.throws(() => workloadFromOptions({ lengths: f }), UsageError);
  assert.throws(() => workloadFromOptions({ concurrency: "0" }), UsageError);
  assert.throws(() => workloadFromOptions({ concurrency: "2", lengths: f, inputLen: "5" }), UsageError);
});

function cli(args: string[]): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((done) => {
    const p = spawn(process.execPath, ["bin/inferscope.mjs", ...args], { stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    p.stdout.on("data", (d) => (stdout += d));
    p.stderr.on("data", (d) => (stderr += d));
    p.on("close", (status) => done({ status, stdout, stderr }));
  });
}

test("CLI: model predict --concurrency 4 --input-len 230 --output-len 220 names the prefill share, text and --json", async () => {
  const args = ["model", "predict", "--model", "qwen3-8b", "--gpu", "h100-sxm", "--concurrency", "4"];
  const lens = ["--input-len", "230", "--output-len", "220", "--requests", "40"];
  const j = await cli([...args, ...lens, "--json"]);
  assert.equal(j.status, 0, j.stderr);
  const w = JSON.parse(j.stdout).workload;
  for (const k of ["meanTpotMs", "p99TpotMs", "meanItlMs", "p99ItlMs", "ttftMs"])
    assert.ok(w[k].low <= w[k].mid && w[k].mid <= w[k].high, k);
  assert.equal(typeof w.prefillShare, "number");
  assert.equal(typeof w.stepsWithPrefill, "number");
  const t = await cli([...args, ...lens]);
  assert.equal(t.status, 0, t.stderr);
  assert.match(t.stdout, /benchmark at concurrency 4/);
  assert.match(
    t.stdout,
    /prefill chunks ride in [\d.]+ % of decode steps, \+[\d.]+ ms each: mean TPOT [\d.]+ ms vs pure decode/,
  );
  const bad = await cli([...args.slice(0, 6), "--lengths", "/nonexistent/lens.csv"]);
  assert.notEqual(bad.status, 0);
  assert.match(bad.stderr, /--lengths/);
  assert.doesNotMatch(bad.stderr, /at .*\.ts:\d+/);
});
