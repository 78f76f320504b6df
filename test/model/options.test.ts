import assert from "node:assert/strict";
import { test } from "node:test";
import { SEED_DEPLOYMENT } from "../../src/model/examples.ts";
import { fit } from "../../src/model/fit.ts";
import { loadMeasurements } from "../../src/model/io.ts";
import { inputFromOptions } from "../../src/model/options.ts";
import { predict } from "../../src/model/predict.ts";

const fx = (f: string) => new URL(`./fixtures/${f}`, import.meta.url).pathname;

test("--hardware YAML, custom device flags and --topo become a ModelInput", () => {
  const hw = predict(
    inputFromOptions({
      model: "llama-3.1-8b",
      hardware: fx("hardware-3090x2.yaml"),
      tp: "2",
      quant: "q4_k_m",
      engine: "llamacpp",
    }),
  );
  assert.equal(hw.hardware.gpu.bandwidthGBs, 936);
  assert.equal(hw.hardware.gpu.tflopsBf16, 71);
  assert.equal(hw.input.gpus, 2);
  assert.equal(hw.hardware.interconnect.label, "PCIe Gen4 x16");
  const custom = predict(
    inputFromOptions({
      model: "qwen3-8b",
      gpu: "my-card",
      gpuBandwidth: "1.2TB/s",
      gpuTflopsBf16: "150",
      gpuMemory: "48GB",
    }),
  );
  assert.equal(custom.hardware.gpu.bandwidthGBs, 1200);
  assert.equal(custom.hardware.gpu.memoryGB, 48);
  const topo = predict(
    inputFromOptions({ model: "glm-5", quant: "nvfp4", gpu: "rtx-pro-6000", tp: "8", topo: fx("topo-pcie-8gpu.txt") }),
  );
  assert.match(topo.hardware.interconnect.label, /worst path SYS, cross-socket/);
  assert.equal(topo.collectives.customAllReduce.used, false);
  assert.throws(
    () => inputFromOptions({ model: "glm-5", hardware: fx("hardware-bad.txt") }),
    /hardware-bad\.txt:\d+:\d+: invalid YAML/,
  );
  assert.throws(() => inputFromOptions({ model: "glm-5" }), /--gpu is required/);
  assert.throws(() => inputFromOptions({ model: "glm-5", gpu: "h100-sxm", tp: "two" }), /--tp expects a whole number/);
});

test("model fit reads nccl-tests output text directly; with it the isolated latency is pinned", () => {
  const input = SEED_DEPLOYMENT;
  const ms = [...loadMeasurements(fx("seed-measurements.json")), ...loadMeasurements(fx("all_reduce_perf-pcie8.txt"))];
  const f = fit(input, ms);
  const lat = f.parameters.find((p) => p.name === "arLatUs")!;
  assert.ok(lat.pinned, lat.why);
  assert.ok(Math.abs(lat.posterior.mean - 26) < 2.5, String(lat.posterior.mean));
  assert.ok(f.residuals.some((r) => /nccl-tests 8192 B/.test(r.label)));
});
