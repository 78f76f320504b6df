// End to end: capture a trace from the real simulator process over HTTP and check the per-class
// totals against the simulator's own truth sidecar.
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { TargetError } from "../../src/errors.ts";
import { captureTrace } from "../../src/trace/index.ts";
import { spawnSim } from "../helpers/sim.ts";

const close = (a: number, b: number, rel = 1e-3) => Math.abs(a - b) <= rel * Math.max(Math.abs(b), 1e-9);

test("trace capture from the simulator: per-class kernel totals equal the sim's truth to 0.1 %", async () => {
  const dir = mkdtempSync(join(tmpdir(), "inferscope-trace-capture-"));
  const sim = await spawnSim(
    ["--profile", "mixtral-8x7b-2xa100", "--time-scale", "50", "--profiler-dir", dir, "--seed", "3"],
    {
      timeoutMs: 60_000,
    },
  );
  try {
    const r = await captureTrace(sim.url, { dir, steps: 12, concurrency: 2, timeoutMs: 60_000 });
    assert.equal(r.files.length, 1);
    assert.ok(r.tokens > 0);
    const truthFile = readdirSync(dir).find((f) => f.endsWith(".truth.json"));
    assert.ok(truthFile, "the simulator wrote its truth sidecar");
    const truth = JSON.parse(readFileSync(join(dir, truthFile), "utf8")) as {
      steps: number;
      kernelUs: Record<string, number>;
      kernelsPerStep: number[];
      allReduce: { kernelName: string | null; callsPerStep: number };
    };
    const a = r.analysis;
    const got = a.overall.kernelUsByClass;
    const k = truth.kernelUs;
    assert.equal(a.stepMode, "annotation");
    assert.equal(a.steps.length, truth.steps);
    assert.equal(
      a.overall.kernels,
      truth.kernelsPerStep.reduce((x, y) => x + y, 0),
    );
    for (const cls of ["gemm", "attention", "moe", "norm", "activation", "sampling", "elementwise"] as const)
      assert.ok(close(got[cls] ?? 0, k[cls] ?? 0), `${cls}: ${got[cls]} vs truth ${k[cls]}`);
    assert.ok(
      close(got.communication ?? 0, (k.allreduce ?? 0) + (k.allgather ?? 0)),
      `communication ${got.communication}`,
    );
    assert.ok((k.allreduce ?? 0) > 0, "TP 2 profile has all-reduces");
    assert.ok((k.moe ?? 0) > 0, "MoE profile has expert kernels");
    const total = Object.values(got).reduce((x, y) => x + (y ?? 0), 0);
    const truthTotal = Object.values(k).reduce((x, y) => x + y, 0);
    assert.ok(close(total, truthTotal), `total ${total} vs ${truthTotal}`);
    // The all-reduce kernel the sim names is classified as communication, once per call.
    assert.equal(a.kernelClasses[truth.allReduce.kernelName!]!.class, "communication");
    const decode = a.steps.filter((s) => s.kind === "decode" && !s.clipped);
    assert.ok(decode.length > 0);
    for (const s of decode) assert.equal(s.allReduceCalls, truth.allReduce.callsPerStep);
  } finally {
    await sim.stop();
  }
});

test("trace capture against a server without the profiler: a clear 404 error", async () => {
  const dir = mkdtempSync(join(tmpdir(), "inferscope-trace-capture-"));
  const sim = await spawnSim(["--profile", "llama3-8b-1xh100", "--time-scale", "50"], {
    timeoutMs: 60_000,
    env: { VLLM_TORCH_PROFILER_DIR: "" },
  });
  try {
    await assert.rejects(captureTrace(sim.url, { dir, steps: 2, timeoutMs: 20_000 }), (e: unknown) => {
      assert.ok(e instanceof TargetError);
      assert.match((e as Error).message, /\/start_profile: 404: the server's profiler is not enabled/);
      return true;
    });
  } finally {
    await sim.stop();
  }
});
