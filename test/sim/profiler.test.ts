import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { gunzipSync } from "node:zlib";
import { startSim } from "../../src/sim/index.ts";
import { get, post } from "./util.ts";

interface Ev {
  ph: string;
  cat?: string;
  name: string;
  ts: number;
  dur?: number;
  pid: number;
  tid: number;
  args?: Record<string, unknown>;
}

async function capture(opts: Parameters<typeof startSim>[0], requests: number, tokens = 12) {
  const dir = mkdtempSync(join(tmpdir(), "sim-prof-"));
  const sim = await startSim({ port: 0, timeScale: 20, warmup: false, profilerDir: dir, ...opts });
  try {
    assert.equal((await post(sim.url, "/start_profile", {})).status, 200);
    await Promise.all(
      Array.from({ length: requests }, (_, i) =>
        post(sim.url, "/v1/completions", {
          prompt: `profile me ${i}`,
          max_tokens: tokens,
          ignore_eos: true,
          stream: true,
        }),
      ),
    );
    assert.equal((await post(sim.url, "/stop_profile", {})).status, 200);
    const files = readdirSync(dir);
    const trace = files.find((f) => f.endsWith(".pt.trace.json.gz"));
    assert.ok(trace, `trace file in ${files.join(", ")}`);
    assert.match(trace!, /^.+-rank-0\.\d+\.pt\.trace\.json\.gz$/);
    const truthFile = files.find((f) => f.endsWith(".truth.json"));
    assert.ok(truthFile);
    const doc = JSON.parse(gunzipSync(readFileSync(join(dir, trace!))).toString("utf8"));
    const truth = JSON.parse(readFileSync(join(dir, truthFile!), "utf8"));
    const served = JSON.parse((await get(sim.url, "/debug/profile_truth")).body);
    return { doc, truth, served };
  } finally {
    await sim.close();
  }
}

test("profiler: a valid gzip Kineto trace whose per-class kernel totals equal the truth", async () => {
  const { doc, truth, served } = await capture({ env: { NCCL_PROTO: "LL" } }, 2);
  assert.deepEqual(served, truth);
  const events: Ev[] = doc.traceEvents;
  const kernels = events.filter((e) => e.ph === "X" && e.cat === "kernel");
  assert.ok(kernels.length > 1000);
  assert.equal(truth.steps, events.filter((e) => e.cat === "user_annotation").length);
  assert.ok(truth.steps >= 12);
  // Step annotations name the batch the way vLLM does.
  for (const a of events.filter((e) => e.cat === "user_annotation"))
    assert.match(a.name, /^execute_context_\d+\(\d+\)_generation_\d+\(\d+\)$/);
  // Classify by name, as a trace analyzer would, and compare with the truth (0.1 %).
  const cls = (n: string) =>
    n.startsWith("ncclDevKernel_AllReduce")
      ? "allreduce"
      : n.startsWith("ncclDevKernel_AllGather")
        ? "allgather"
        : n === "fused_moe_kernel" || n.includes("vllm::moe::")
          ? "moe"
          : /flash|mla/i.test(n)
            ? "attention"
            : /nvjet|xmma_gemm|s16816gemm/.test(n)
              ? "gemm"
              : null;
  const sums: Record<string, number> = {};
  for (const k of kernels) {
    const c = cls(k.name);
    if (c) sums[c] = (sums[c] ?? 0) + k.dur!;
  }
  for (const c of ["allreduce", "allgather", "moe", "attention"]) {
    assert.ok(
      Math.abs(sums[c]! / truth.kernelUs[c] - 1) < 0.001,
      `${c}: trace ${sums[c]} vs truth ${truth.kernelUs[c]}`,
    );
  }
  // GEMM includes the draft class only with speculative decoding (off here).
  assert.ok(Math.abs(sums.gemm! / truth.kernelUs.gemm - 1) < 0.001);
  // The all-reduce truth is the model's all-reduce component, jitter included.
  assert.ok(Math.abs(truth.kernelUs.allreduce / 1000 / truth.componentsMs.allreduce - 1) < 1e-5);
  // 157 NCCL LL all-reduces per step (2 x 78 layers + embedding).
  const ar = kernels.filter((k) => k.name === "ncclDevKernel_AllReduce_Sum_bf16_RING_LL");
  assert.equal(ar.length, 157 * truth.steps);
  // Every kernel links to a runtime event through its correlation id.
  const runtime = new Set(
    events.filter((e) => e.cat === "cuda_runtime").map((e) => (e.args as { correlation: number }).correlation),
  );
  for (const k of kernels) assert.ok(runtime.has((k.args as { correlation: number }).correlation));
  assert.ok(events.some((e) => e.name === "cudaGraphLaunch"));
  assert.ok(
    events.some((e) => e.name === "cudaLaunchKernel"),
    "prefill steps launch kernels one by one",
  );
  // Kernels on one stream never overlap and the step's kernels + gaps fill the step.
  const sorted = kernels.sort((a, b) => a.ts - b.ts);
  for (let i = 1; i < sorted.length; i++) assert.ok(sorted[i]!.ts >= sorted[i - 1]!.ts + sorted[i - 1]!.dur! - 0.002);
  const kernelUs = Object.values(truth.kernelUs as Record<string, number>).reduce((a, b) => a + b, 0);
  const stepUs = (truth.stepMs as number[]).reduce((a, b) => a + b, 0) * 1000;
  assert.ok(Math.abs((kernelUs + truth.gapUs.launch + truth.gapUs.scheduler) / stepUs - 1) < 1e-4);
});

test("profiler: kernel names follow the configuration (NCCL default protocol, custom all-reduce)", async () => {
  const simple = await capture({ env: {} }, 1, 3);
  const names = new Set((simple.doc.traceEvents as Ev[]).filter((e) => e.cat === "kernel").map((e) => e.name));
  assert.ok(names.has("ncclDevKernel_AllReduce_Sum_bf16_RING_SIMPLE"));
  const custom = await capture({ profile: "llama3-70b-4xh100-nvlink", env: {} }, 1, 3);
  const cnames = [...new Set((custom.doc.traceEvents as Ev[]).filter((e) => e.cat === "kernel").map((e) => e.name))];
  assert.ok(cnames.some((n) => n.includes("cross_device_reduce_1stage")));
  assert.ok(!cnames.some((n) => n.startsWith("ncclDevKernel_AllReduce")));
  assert.ok(cnames.some((n) => n.startsWith("sm90_xmma_gemm")));
});

test("profiler endpoints exist only when a profiler dir is configured", async () => {
  const sim = await startSim({ port: 0, speed: "zero", warmup: false, env: {} });
  try {
    assert.equal((await post(sim.url, "/start_profile", {})).status, 404);
  } finally {
    await sim.close();
  }
});
