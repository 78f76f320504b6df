import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { test } from "node:test";

const fx = (f: string) => new URL(`./fixtures/${f}`, import.meta.url).pathname;
const SEED = [
  "--model",
  "glm-5",
  "--quant",
  "nvfp4",
  "--gpu",
  "rtx-pro-6000",
  "--gpus",
  "8",
  "--tp",
  "8",
  "--interconnect",
  "pcie5",
  "--engine",
  "vllm",
];

function cli(args: string[]): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, ["bin/inferscope.mjs", ...args], { stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    p.stdout.on("data", (d) => (stdout += d));
    p.stderr.on("data", (d) => (stderr += d));
    p.on("close", (status) => resolve({ status, stdout, stderr }));
  });
}

test("model predict --json carries stepMs, tokensPerSecond, terms and collectives", async () => {
  const r = await cli(["model", "predict", ...SEED, "--json"]);
  assert.equal(r.status, 0, r.stderr);
  const p = JSON.parse(r.stdout);
  for (const k of ["low", "mid", "high"]) {
    assert.equal(typeof p.decode.stepMs[k], "number");
    assert.equal(typeof p.decode.tokensPerSecond[k], "number");
  }
  assert.ok(
    p.decode.terms.every(
      (t: { name: string; ms: object; share: number; formula: string; inputs: object }) =>
        t.name && t.ms && typeof t.share === "number" && t.formula && t.inputs,
    ),
  );
  assert.equal(p.collectives.countPerToken, 156);
  assert.equal(p.collectives.bytesEach, 12288);
  assert.equal(p.collectives.protocol, "LL");
  assert.equal(typeof p.collectives.latencyUsEach.mid, "number");
  assert.ok(p.prefill.ttftMs.mid > 0);
  assert.ok(Array.isArray(p.assumptions));
});

// Each spawn costs ≈ 2–3 s of CPU (tsx + every command module), so the CLI tests are few; the library tests cover the rest.
test("model explain --measurements fits the seed and prints the §3 arithmetic", async () => {
  const r = await cli(["model", "explain", ...SEED, "--measurements", fx("seed-measurements.json")]);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /24\.5 µs/);
  assert.match(r.stdout, /matches the NCCL_PROTO=LL arm/);
  assert.match(r.stdout, /61\.3 µs per call/);
  assert.match(r.stdout, /72\.5 µs per call/);
  assert.match(r.stdout, /Custom all-reduce: disabled/);
  assert.match(r.stdout, /100–140 tok\/s/);
});

test("usage errors: unknown GPU gets a did-you-mean list, exit 2, no stack trace", async () => {
  const a = await cli(["model", "predict", "--model", "glm-5", "--gpu", "rtx-pro-600"]);
  assert.equal(a.status, 2);
  assert.match(a.stderr, /unknown GPU "rtx-pro-600"; did you mean: rtx-pro-6000/);
  assert.doesNotMatch(a.stderr, /\n\s+at /);
});
