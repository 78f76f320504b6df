// Step segmentation against the simulator: every step the sim writes is found as one step and holds
// exactly that step's kernels (glm5, batch 1, time-scale 10 as the study runs it), and hand-built
// back-to-back annotations that share a nanosecond stay two steps.
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { gunzipSync } from "node:zlib";
import { analyzeTrace, captureTrace } from "../../src/trace/index.ts";
import { spawnSim } from "../helpers/sim.ts";
import { TraceBuilder } from "./helpers.ts";

const GEMM = "nvjet_tst_64x8_64x16_4x1_v_bz_splitK_TNT";
const AR = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)";

test("glm5 batch-1 capture from the sim at time-scale 10: steps and per-step kernels equal the truth", async () => {
  const dir = mkdtempSync(join(tmpdir(), "inferscope-trace-steps-"));
  const sim = await spawnSim(
    ["--profile", "glm5-8x-rtxpro6000-pcie", "--time-scale", "10", "--profiler-dir", dir, "--seed", "5"],
    { timeoutMs: 60_000 },
  );
  try {
    const r = await captureTrace(sim.url, { dir, steps: 40, concurrency: 1, timeoutMs: 60_000 });
    const truthFile = readdirSync(dir).find((f) => f.endsWith(".truth.json"));
    assert.ok(truthFile, "the simulator wrote its truth sidecar");
    const truth = JSON.parse(readFileSync(join(dir, truthFile), "utf8")) as {
      steps: number;
      stepMs: number[];
      kernelsPerStep: number[];
      allReduce: { callsPerStep: number };
    };
    assert.equal(truth.steps, 40, "one prefill and 39 decode steps");
    const a = r.analysis;
    assert.equal(a.stepMode, "annotation");
    assert.equal(a.steps.length, truth.steps);
    assert.deepEqual(
      a.steps.map((s) => s.kernels),
      truth.kernelsPerStep,
    );
    assert.ok(a.steps.every((s) => !s.clipped));
    assert.equal(a.steps.filter((s) => s.kind === "decode").length, truth.steps - 1);
    for (const s of a.steps) assert.equal(s.allReduceCalls, truth.allReduce.callsPerStep);
    // Back-to-back steps: each window (last kernel end to last kernel end) is its own step's time.
    for (const s of a.steps.slice(1))
      assert.ok(
        Math.abs(s.durUs / 1000 - truth.stepMs[s.index]!) <= 0.01 * truth.stepMs[s.index]!,
        `step ${s.index}: window ${s.durUs / 1000} ms vs truth ${truth.stepMs[s.index]} ms`,
      );
    // The sim writes step annotations as Kineto does: ts + dur of one is exactly the next ts.
    const doc = JSON.parse(gunzipSync(readFileSync(r.files[0]!)).toString("utf8")) as {
      traceEvents: Array<{ cat?: string; ts: number; dur?: number }>;
    };
    const ann = doc.traceEvents.filter((e) => e.cat === "user_annotation").sort((x, y) => x.ts - y.ts);
    assert.equal(ann.length, truth.steps);
    for (let i = 1; i < ann.length; i++) {
      const endNs = Math.round((ann[i - 1]!.ts + ann[i - 1]!.dur!) * 1000);
      assert.ok(endNs <= Math.round(ann[i]!.ts * 1000), `annotation ${i - 1} ends after annotation ${i} starts`);
    }
  } finally {
    await sim.stop();
  }
});

test("back-to-back step annotations sharing a nanosecond stay two steps; a launch in the shared ns is the later step's", async () => {
  const b = new TraceBuilder();
  // Kineto rounds ts and dur to the ns each: the first annotation ends 1 ns after the second starts.
  b.annotation("execute_context_0(0)_generation_1(1)", 1000.001, 100.0);
  b.annotation("execute_context_0(0)_generation_1(1)", 1100.0, 100.001);
  b.annotation("execute_context_0(0)_generation_1(1)", 1200.0, 100.0);
  const g0 = b.launch(1005, 8, "cudaGraphLaunch");
  b.kernel(GEMM, 1010, 40, { corr: g0 });
  b.kernel(AR, 1050, 40, { corr: g0 });
  // Launched at the next step's first ns, inside the previous annotation's rounded end.
  const g1 = b.launch(1100.0, 8, "cudaGraphLaunch");
  b.kernel(GEMM, 1110, 40, { corr: g1 });
  b.kernel(AR, 1150, 40, { corr: g1 });
  const g2 = b.launch(1200.0, 8, "cudaGraphLaunch");
  b.kernel(GEMM, 1210, 40, { corr: g2 });
  b.kernel(AR, 1250, 40, { corr: g2 });
  const dir = mkdtempSync(join(tmpdir(), "inferscope-trace-steps-"));
  const a = await analyzeTrace([b.write(join(dir, "adjacent.pt.trace.json"))]);
  assert.equal(a.steps.length, 3);
  assert.deepEqual(
    a.steps.map((s) => s.kernels),
    [2, 2, 2],
  );
  assert.deepEqual(
    a.steps.map((s) => s.allReduceCalls),
    [1, 1, 1],
  );
  assert.ok(a.steps.every((s) => !s.clipped));
});
