import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { generateTrace } from "../../bench/gen-trace.ts";
import { InputError } from "../../src/errors.ts";
import { analyzeTrace, formatAnalysis, toReportSection } from "../../src/trace/index.ts";
import { TraceBuilder } from "./helpers.ts";

const dir = mkdtempSync(join(tmpdir(), "inferscope-trace-analyze-"));
let seq = 0;
const file = (b: TraceBuilder, ext = ".pt.trace.json") => b.write(join(dir, `t${seq++}${ext}`));

const GEMM = "nvjet_tst_64x8_64x16_4x1_v_bz_splitK_TNT";
const ATTN =
  "void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4>, false>(flash::Flash_fwd_params)";
const NORM = "void vllm::rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*)";
const AR = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)";
const ACT = "void vllm::act_and_mul_kernel<c10::BFloat16, &vllm::silu_kernel>(c10::BFloat16*)";
const ELT = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<long>>(int)";

/** Three steps: eager prefill, eager decode with a host-bound gap, CUDA-graph mixed step with a memcpy. */
function threeSteps(): TraceBuilder {
  const b = new TraceBuilder();
  b.annotation("execute_context_1(128)_generation_0(0)", 0, 100);
  b.eager(GEMM, 10, 20, 30);
  b.eager(ATTN, 15, 50, 20);
  b.eager(NORM, 60, 75, 5); // launched before the GPU went idle at 70: "other" idle 70–75
  b.annotation("execute_context_0(0)_generation_2(2)", 200, 100);
  b.eager(GEMM, 210, 220, 40); // GPU idle 80–220 waiting for this launch: host-bound
  b.eager(AR, 230, 260, 10);
  b.annotation("execute_context_1(16)_generation_1(1)", 400, 100);
  const g = b.launch(410, 12, "cudaGraphLaunch");
  b.kernel(ATTN, 420, 10, { corr: g });
  b.kernel(GEMM, 432, 8, { corr: g }); // graph-internal gap 430–432: "other"
  b.kernel(ACT, 440, 3, { corr: g });
  const m = b.launch(415, 3, "cudaMemcpyAsync");
  b.memcpy(443, 2, m);
  for (let i = 0; i < 20; i++) b.python(`f${i}`, i, 1);
  return b;
}

test("per-step decomposition: windows, classes, host-bound vs other idle, kinds, CUDA graphs", async () => {
  const a = await analyzeTrace([file(threeSteps())]);
  assert.equal(a.stepMode, "annotation");
  assert.deepEqual(
    a.steps.map((s) => [s.kind, s.startUs, s.durUs]),
    [
      ["prefill", 0, 80],
      ["decode", 80, 190],
      ["mixed", 270, 175],
    ],
  );
  const [s0, s1, s2] = a.steps;
  assert.deepEqual(s0!.busyByClass, { gemm: 30, attention: 20, norm: 5 });
  assert.equal(s0!.idleHostUs, 20);
  assert.equal(s0!.idleOtherUs, 5);
  assert.deepEqual(s1!.busyByClass, { gemm: 40, communication: 10 });
  assert.equal(s1!.idleHostUs, 140);
  assert.equal(s1!.idleOtherUs, 0);
  assert.equal(s1!.commExposedUs, 10);
  assert.equal(s1!.allReduceCalls, 1);
  assert.equal(s1!.allReduceUs, 10);
  assert.deepEqual(s1!.tokens, { contextRequests: 0, contextTokens: 0, generationRequests: 2, generationTokens: 2 });
  // graph step: all four activities attributed through the shared correlation id
  assert.deepEqual(s2!.busyByClass, { gemm: 8, attention: 10, activation: 3, memcpy: 2 });
  assert.equal(s2!.kernels, 4);
  assert.equal(s2!.idleHostUs, 150);
  assert.equal(s2!.idleOtherUs, 2);
  assert.deepEqual(s2!.launch, { calls: 2, graphLaunches: 1, cpuUs: 15, meanLatencyUs: 19 });
  for (const s of a.steps) {
    assert.ok(!s.clipped);
    const classSum = Object.values(s.busyByClass).reduce((x, y) => x + (y ?? 0), 0);
    assert.ok(Math.abs(classSum + s.idleUs - s.durUs) < 1e-6, `step ${s.index}: busy + idle = window`);
  }
  assert.deepEqual(a.overall.kernelUsByClass, {
    communication: 10,
    gemm: 78,
    attention: 30,
    norm: 5,
    activation: 3,
    memcpy: 2,
  });
  assert.equal(a.overall.kernels, 9);
  assert.equal(a.overall.kernelsOutsideSteps, 0);
  assert.equal(a.kernelClasses[AR]!.rule, "comm.nccl");
  assert.equal(a.overall.topKernels[0]!.name, GEMM);
  assert.equal(a.overall.topKernels[0]!.count, 3);
  assert.deepEqual(
    a.overall.byKind.map((k) => [k.kind, k.count]),
    [
      ["decode", 1],
      ["prefill", 1],
      ["mixed", 1],
    ],
  );
  assert.equal(a.overall.byKind[0]!.headline, "decode step 0.19 ms = gemm 0.04 + communication 0.01 + idle 0.14");
  const sec = toReportSection(a);
  assert.equal(sec.decodeSteps, 1);
  assert.equal(sec.stepMs.value, 0.19);
  assert.equal(sec.allReduceCallsPerStep, 1);
  assert.equal(sec.allReducePerCallUs.value, 10);
});

test("overlapping streams: communication under compute is overlapped, the rest exposed; compute overlap is shared", async () => {
  const b = new TraceBuilder();
  b.annotation("execute_context_0(0)_generation_8(8)", 0, 200);
  b.eager(GEMM, 5, 10, 50, 7);
  b.eager(AR, 6, 40, 40, 20);
  b.eager(ELT, 7, 50, 20, 21);
  const a = await analyzeTrace([file(b)]);
  const s = a.steps[0]!;
  assert.deepEqual(s.busyByClass, { communication: 10, gemm: 45, elementwise: 15 });
  assert.equal(s.busyUs, 70);
  assert.equal(s.commExposedUs, 10);
  assert.equal(s.commOverlappedUs, 30);
  assert.deepEqual(s.kernelUsByClass, { communication: 40, gemm: 50, elementwise: 20 });
  assert.equal(s.durUs, 80);
  assert.equal(s.idleHostUs, 10);
  assert.equal(a.overall.streams, 3);
});

test("clipped steps: launches without GPU activity or a step past the trace end are flagged and left out of summaries", async () => {
  const b = new TraceBuilder();
  b.kernel(GEMM, 5, 10); // from before the capture started: no launch record
  b.annotation("execute_context_0(0)_generation_1(1)", 20, 50);
  b.eager(GEMM, 25, 30, 20);
  b.annotation("execute_context_0(0)_generation_1(1)", 100, 50);
  b.eager(GEMM, 105, 110, 20);
  b.launch(120); // its kernel ran after the profiler stopped
  b.annotation("execute_context_0(0)_generation_1(1)", 200, 5000);
  b.eager(NORM, 210, 215, 3);
  b.events.push({ name: "Record Window End", ph: "i", s: "g", pid: "", tid: "", ts: 300 });
  const a = await analyzeTrace([file(b)]);
  assert.deepEqual(
    a.steps.map((s) => s.clipped),
    [false, true, true],
  );
  assert.match(a.steps[1]!.clipReason!, /1 launches have no GPU activity/);
  assert.match(a.steps[2]!.clipReason!, /past the end of the trace/);
  assert.equal(a.overall.kernelsOutsideSteps, 1);
  assert.equal(a.overall.byKind[0]!.count, 1);
  assert.match(a.notes.join("\n"), /2 of 3 steps clipped/);
});

test("ProfilerStep#N and GPU-gap segmentation", async () => {
  const b = new TraceBuilder();
  for (let i = 0; i < 3; i++) {
    b.annotation(`ProfilerStep#${i + 7}`, i * 1000, 500);
    b.eager(GEMM, i * 1000 + 10, i * 1000 + 20, 100);
    b.eager(NORM, i * 1000 + 11, i * 1000 + 122, 10);
  }
  const a = await analyzeTrace([file(b)]);
  assert.equal(a.stepMode, "profiler-step");
  assert.deepEqual(
    a.steps.map((s) => [s.name, s.kind, s.kernels]),
    [
      ["ProfilerStep#7", "unknown", 2],
      ["ProfilerStep#8", "unknown", 2],
      ["ProfilerStep#9", "unknown", 2],
    ],
  );
  const g = await analyzeTrace([file(b)], { stepMode: "gap" });
  assert.equal(g.stepMode, "gap");
  assert.equal(g.steps.length, 3);
  assert.deepEqual(
    g.steps.map((s) => s.durUs),
    [112, 1000, 1000],
  );
  assert.match(g.notes.join(), /gaps ≥ 100 µs/);
  // gap mode without any runtime events at all
  const k = new TraceBuilder();
  for (let i = 0; i < 4; i++) for (let j = 0; j < 5; j++) k.kernel(GEMM, i * 5000 + j * 12, 10);
  const gk = await analyzeTrace([file(k)], { stepMode: "annotation" });
  assert.equal(gk.stepMode, "gap");
  assert.equal(gk.steps.length, 4);
  assert.match(gk.notes.join(), /no vLLM execute_\* or SGLang step\[…\] annotations/);
  assert.equal(gk.steps[1]!.busyByClass.gemm, 50);
});

test("multi-rank: per-rank step times, skew, straggler from distributedInfo ranks", async () => {
  const mk = (rank: number, stepUs: number, arUs: number) => {
    const b = new TraceBuilder();
    b.trailing.distributedInfo = { backend: "nccl", rank, world_size: 2 };
    for (let i = 0; i < 4; i++) {
      const t = i * 10_000;
      b.annotation("execute_context_0(0)_generation_1(1)", t, stepUs);
      b.eager(GEMM, t + 1, t + 10, stepUs - 20 - arUs);
      b.eager(AR, t + 2, t + stepUs - 10 - arUs, arUs);
    }
    return file(b);
  };
  const a = await analyzeTrace([mk(1, 1000, 50), mk(0, 1200, 250)]);
  assert.deepEqual(
    a.ranks.map((r) => r.rank),
    [0, 1],
  );
  assert.equal(a.skew!.alignedSteps, 4);
  assert.deepEqual(
    a.skew!.perRank.map((p) => [p.rank, p.meanCommUs]),
    [
      [0, 250],
      [1, 50],
    ],
  );
  assert.equal(a.skew!.maxSkewUs, 200);
  assert.equal(a.skew!.slowestRank, 0);
  assert.equal(a.skew!.stragglerRank, 1);
});

test("bad input: CPU-only trace, CUPTI failure, non-trace JSON, empty file", async () => {
  const cpu = new TraceBuilder();
  cpu.annotation("execute_context_0(0)_generation_1(1)", 0, 10);
  cpu.cpuOp("aten::mm", 1, 5);
  await assert.rejects(analyzeTrace([file(cpu)]), (e: unknown) => {
    assert.ok(e instanceof InputError);
    assert.match((e as Error).message, /no GPU kernels.*activities=\[ProfilerActivity\.CPU, ProfilerActivity\.CUDA\]/);
    return true;
  });
  const rt = new TraceBuilder();
  rt.launch(1);
  rt.trailing.WARNING = ["CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"];
  await assert.rejects(
    analyzeTrace([file(rt)]),
    /CUPTI could not record kernels.*profiler said: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES/,
  );
  const other = join(dir, "package.json");
  writeFileSync(other, JSON.stringify({ name: "x", version: "1" }));
  await assert.rejects(
    analyzeTrace([other]),
    /package\.json: not a profiler trace: the JSON has no "traceEvents" array \(top-level keys: name, version\)/,
  );
  const empty = join(dir, "empty.json");
  writeFileSync(empty, "");
  await assert.rejects(analyzeTrace([empty]), /empty\.json: empty file/);
  const noEvents = join(dir, "no-events.json");
  writeFileSync(noEvents, '{"traceEvents": []}');
  await assert.rejects(analyzeTrace([noEvents]), /no GPU kernels.*no events at all/);
});

test("a generated decode trace: per-class totals equal the generator's truth, one step per annotation", async () => {
  const p = join(dir, "gen.pt.trace.json");
  const truth = await generateTrace(p, { targetBytes: 2e6, layers: 8, seed: 7 });
  const a = await analyzeTrace([p]);
  assert.equal(a.steps.length, truth.steps);
  for (const [cls, us] of Object.entries(truth.kernelUsByClass))
    assert.ok(Math.abs((a.overall.kernelUsByClass as Record<string, number>)[cls]! - us) <= 1e-6 * us + 1e-3, cls);
  assert.equal(a.overall.kernels, truth.kernels);
  // each window runs from the previous step's last kernel end: the generator's step plus its 30 µs between steps
  for (let i = 1; i < truth.stepDurUs.length; i++)
    assert.ok(Math.abs(a.steps[i]!.durUs - (truth.stepDurUs[i]! + 30)) < 0.01, `step ${i}`);
  assert.equal(a.ranks[0]!.info.skippedEvents > 0, true);
});

test("text rendering names the decode headline, classes, rules and idle split", async () => {
  const a = await analyzeTrace([file(threeSteps())]);
  const text = formatAnalysis(a);
  assert.match(text, /decode step 0\.19 ms = gemm 0\.04 \+ communication 0\.01 \+ idle 0\.14/);
  assert.match(text, /idle \(host-bound\)\s+│\s+0\.140/);
  assert.match(text, /communication \(rule comm\.nccl\)/);
  assert.match(text, /step 1 \(decode, 2 req, 2 tok; vllm\): 0\.050 ms of GPU time line, busy 0\.050, idle 0\.000/);
  assert.match(text, /step 2 \(mixed, 2 req, 17 tok; vllm\): .* 4 activities \(3 from graph replays\)/);
});

test("CLI: --json with --rules, and a clean error with exit code 2", () => {
  const p = file(threeSteps(), ".pt.trace.json.gz");
  const run = (...args: string[]) =>
    spawnSync(process.execPath, ["--import", "tsx", "src/cli/main.ts", "trace", ...args], { encoding: "utf8" });
  const rules = join(dir, "rules.yaml");
  writeFileSync(rules, "rules:\n  - id: site.rmsnorm-as-other\n    class: other\n    match: rms_norm\n");
  const j = run(p, "--json", "--rules", rules);
  assert.equal(j.status, 0, j.stderr);
  const a = JSON.parse(j.stdout);
  assert.deepEqual(a.kernelClasses[NORM], {
    class: "other",
    rule: "site.rmsnorm-as-other",
    decidedBy: "rule site.rmsnorm-as-other",
    count: 1,
    totalUs: 5,
  });
  assert.equal(a.steps[1].kind, "decode");
  const bad = join(dir, "bad.json");
  writeFileSync(bad, '{"traceEvents": [ }');
  const e = run(bad);
  assert.equal(e.status, 2);
  assert.match(e.stderr, /inferscope: error: .*bad\.json: no GPU kernels in the trace \(0 events\)/);
  assert.doesNotMatch(e.stderr, /at .*\.ts:\d+/);
});
