import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { InputError, UsageError } from "../../src/errors.ts";
import { ncclCandidates, ncclMenu } from "../../src/model/collectives.ts";
import { explainSim } from "../../src/sim/explain.ts";
import { goFloat, pyRepr } from "../../src/sim/exposition.ts";
import {
  decodeBatch,
  explainStep,
  listProfiles,
  loadProfile,
  perCallNcclUs,
  prefillBatch,
  resolveConfig,
} from "../../src/sim/index.ts";
import { profileHardware } from "../../src/sim/profile.ts";
import { countTokens, tokenText, VOCAB } from "../../src/sim/text.ts";

const glm = loadProfile("glm5-8x-rtxpro6000-pcie");
const ms = (e: ReturnType<typeof explainStep>, name: string) => e.components.find((c) => c.name === name)!.ms;

test("built-in profiles load and validate", () => {
  const names = listProfiles();
  for (const n of ["glm5-8x-rtxpro6000-pcie", "llama3-8b-1xh100", "llama3-70b-4xh100-nvlink", "mixtral-8x7b-2xa100"])
    assert.ok(names.includes(n), n);
  for (const n of names) assert.equal(loadProfile(n).name, n);
});

test("GLM-5 seed profile reproduces both A/B arms at batch 1 (seed §3.5)", () => {
  const ll = explainSim({ env: { NCCL_PROTO: "LL" } });
  const def = explainSim({ env: {} });
  assert.ok(ll.decode.stepMs >= 17.0 && ll.decode.stepMs <= 17.3, `LL step ${ll.decode.stepMs}`);
  assert.ok(Math.abs(def.decode.stepMs - 20.9) < 0.1, `default step ${def.decode.stepMs}`);
  assert.ok(Math.abs(ll.request128S - 2.22) < 0.02, `LL T(128) ${ll.request128S}`);
  assert.ok(Math.abs(def.request128S - 2.71) < 0.02, `default T(128) ${def.request128S}`);
  assert.ok(Math.abs(ll.ttftMs - 52) < 2, `TTFT ${ll.ttftMs}`);
  const share = ms(ll.decode, "allreduce") / ll.decode.stepMs;
  assert.ok(share >= 0.55 && share <= 0.65, `all-reduce share ${share}`);
  // 2 per layer x 78 = 156, + 1 embedding all-reduce; + 1 logits all-gather, each 12 KiB at batch 1.
  assert.equal(ll.decode.allReduce.calls, 157);
  assert.equal(ll.decode.allGather.calls, 1);
  assert.equal(ll.decode.allReduce.bytesPerCall, 12288);
  assert.equal(ll.decode.allReduce.impl, "nccl");
  assert.equal(ll.decode.allReduce.kernelName, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL");
  const compute = ll.decode.stepMs - ms(ll.decode, "allreduce") - ms(ll.decode, "allgather");
  assert.ok(compute >= 6 && compute <= 10, `compute ${compute}`);
  assert.equal(ll.config.customAllReduce, false);
  // The components sum to the step.
  const sum = ll.decode.components.reduce((a, c) => a + c.ms, 0);
  assert.ok(Math.abs(sum - ll.decode.stepMs) < 1e-9);
});

test("profile hardware maps onto the model's catalog GPU and link", () => {
  const hw = profileHardware(glm);
  assert.equal(hw.gpu.id, "rtx-pro-6000");
  assert.equal(hw.link.kind, "pcie");
  assert.equal(hw.link.ncclBusBwGBs, 48); // NCCL topo.cc PCIe Gen5 x16
  const l70 = profileHardware(loadProfile("llama3-70b-4xh100-nvlink"));
  assert.equal(l70.gpu.sm, 90);
  assert.equal(l70.link.label, "NVLink4 (NVSwitch)");
  assert.equal(l70.link.ncclBusBwGBs, 370);
  // linkGBs overrides the catalog's bus bandwidth (NVLink3: 240).
  assert.equal(profileHardware(loadProfile("mixtral-8x7b-2xa100")).link.ncclBusBwGBs, 230);
  const pcie4 = profileHardware(loadProfile("glm5-8x-rtxpro6000-pcie", { "hardware.interconnect": "pcie4" }));
  assert.equal(pcie4.link.ncclBusBwGBs, 24);
});

test("NCCL scaling off the reference follows the analytical model (collectives.md §3)", () => {
  const near = (a: number, b: number, tol = 0.01) => assert.ok(Math.abs(a - b) < tol, `${a} vs ${b}`);
  const ref = 6144 * 2;
  // At the reference (TP 8, one token) the calibrated figures hold exactly.
  near(perCallNcclUs(glm, 8, "LL", "Ring", ref), 62.4, 1e-9);
  near(perCallNcclUs(glm, 8, "Simple", "Ring", ref), 86.6, 1e-9);
  // Another TP scales the latency part by NCCL's latency ratio: Ring LL on PCIe 6.6 + 2(n−1)·1.0 µs.
  near(perCallNcclUs(glm, 4, "LL", "Ring", ref), (62.4 * 12.6) / 20.6);
  // Larger messages add the bandwidth time: LL algBw = min(LL cap, 48/2) · n/(2(n−1)).
  const bytes = 1024 * ref;
  const algBw = 24 * (8 / 14);
  near(perCallNcclUs(glm, 8, "LL", "Ring", bytes), 62.4 + (bytes - ref) / (1000 * algBw));
  // The same numbers straight from the model's candidates, including Tree's own bandwidth form.
  const { gpu, link } = profileHardware(glm);
  const cand = (n: number, algorithm: string, protocol: string) =>
    ncclCandidates(link, gpu, n, 0, ncclMenu(link, gpu, n)).find(
      (c) => c.algorithm === algorithm && c.protocol === protocol,
    )!;
  const t8 = cand(8, "Tree", "LL");
  near(perCallNcclUs(glm, 8, "LL", "Tree", bytes), 62.4 + (bytes - ref) / (1000 * t8.algBwGBs));
  // A protocol without a calibrated figure inherits the calibrated ones' mean misfit to the model.
  const model = (p: string) => cand(8, "Ring", p).latencyUs + ref / (1000 * cand(8, "Ring", p).algBwGBs);
  const misfit = (62.4 / model("LL") + 86.6 / model("Simple")) / 2;
  near(perCallNcclUs(glm, 8, "LL128", "Ring", ref), model("LL128") * misfit);
  // No calibrated figure at all: NCCL's model itself (NVLink LL capped at Hopper's 141 GB/s).
  const l70 = loadProfile("llama3-70b-4xh100-nvlink");
  near(perCallNcclUs(l70, 4, "LL", "Ring", 16384), 6.6 + 6 * 0.6 + 16384 / (1000 * 141 * (4 / 6)));
  assert.equal(perCallNcclUs(glm, 1, "LL", "Ring", ref), 0);
});

test("NCCL_PROTO / NCCL_ALGO and protocol choice", () => {
  assert.equal(resolveConfig(glm, {}).protocol, "Simple");
  assert.equal(resolveConfig(glm, { ncclProto: "LL" }).protocol, "LL");
  assert.equal(resolveConfig(glm, { ncclProto: "ll,simple" }).protocol, "Simple");
  assert.equal(resolveConfig(glm, { ncclProto: "^LL128" }).protocol, "Simple");
  // LL128 is off by default on PCIe, but naming it forces it.
  assert.equal(resolveConfig(glm, { ncclProto: "LL128" }).protocol, "LL128");
  // Excluding the default picks the cheaper remaining protocol.
  assert.equal(resolveConfig(glm, { ncclProto: "^Simple" }).protocol, "LL");
  assert.throws(
    () => resolveConfig(glm, { ncclProto: "Fast" }),
    (e: unknown) => e instanceof UsageError && /unknown protocol "Fast"/.test(e.message),
  );
  assert.equal(resolveConfig(glm, {}).algorithm, "Ring");
  assert.equal(resolveConfig(glm, { ncclAlgo: "tree" }).algorithm, "Tree");
  assert.equal(resolveConfig(glm, { ncclAlgo: "Ring,Tree" }).algorithm, "Ring");
  const nvls = resolveConfig(glm, { ncclAlgo: "NVLS" });
  assert.equal(nvls.algorithm, "Ring");
  assert.ok(
    nvls.reason.some((r) => /NCCL_ALGO=NVLS: no Ring\/Tree named/.test(r)),
    nvls.reason.join("; "),
  );
});

test("custom all-reduce follows vLLM's rule", () => {
  const l70 = loadProfile("llama3-70b-4xh100-nvlink");
  const mix = loadProfile("mixtral-8x7b-2xa100");
  assert.equal(resolveConfig(l70, {}).customAllReduce, true);
  assert.equal(resolveConfig(l70, { disableCustomAllReduce: true }).customAllReduce, false);
  assert.equal(resolveConfig(mix, {}).customAllReduce, true);
  assert.equal(resolveConfig(glm, {}).customAllReduce, false);
  assert.equal(resolveConfig(glm, { tensorParallelSize: 2 }).customAllReduce, true);
  assert.equal(resolveConfig(glm, { tensorParallelSize: 6 }).customAllReduce, false);
  assert.equal(resolveConfig(l70, { tensorParallelSize: 3 }).customAllReduce, false);
  assert.ok(resolveConfig(glm, {}).reason.some((r) => /custom all-reduce off: world size 8 > 2 .*NVLink/.test(r)));
  // GeForce cards have PCIe P2P disabled: no custom all-reduce even at TP 2 (the model's rule).
  const geforce = loadProfile("glm5-8x-rtxpro6000-pcie", { "hardware.catalogGpu": "rtx-4090" });
  const g2 = resolveConfig(geforce, { tensorParallelSize: 2 });
  assert.equal(g2.customAllReduce, false);
  assert.ok(
    g2.reason.some((r) => /peer-to-peer disabled/.test(r)),
    g2.reason.join("; "),
  );
  const e = explainStep(l70, {}, decodeBatch(1, 128));
  assert.match(e.allReduce.kernelName!, /cross_device_reduce_1stage/);
  const n = explainStep(l70, { disableCustomAllReduce: true }, decodeBatch(1, 128));
  assert.equal(n.allReduce.impl, "nccl");
  assert.ok(n.stepMs > e.stepMs);
  assert.equal(explainStep(loadProfile("llama3-8b-1xh100"), {}, decodeBatch(1, 128)).allReduce.calls, 0);
});

test("enforce-eager, batch size and prefill change the step the way the model says", () => {
  const graph = explainStep(glm, { ncclProto: "LL" }, decodeBatch(1, 128));
  const eager = explainStep(glm, { ncclProto: "LL", enforceEager: true }, decodeBatch(1, 128));
  assert.equal(eager.mode, "eager");
  assert.ok(ms(eager, "launch") > ms(graph, "launch"));
  assert.ok(ms(eager, "allreduce") > ms(graph, "allreduce"));
  const b8 = explainStep(glm, { ncclProto: "LL" }, decodeBatch(8, 128));
  assert.ok(b8.stepMs > graph.stepMs && b8.stepMs < 8 * graph.stepMs);
  const pf = explainStep(glm, { ncclProto: "LL" }, prefillBatch(512));
  assert.equal(pf.mode, "piecewise");
  assert.ok(pf.stepMs > graph.stepMs);
});

test("every hidden parameter can be overridden", () => {
  const p = loadProfile("glm5-8x-rtxpro6000-pcie", {
    "collectives.perCallUs.LL": 30,
    "cost.launchUs.graph": 1,
    "cost.samplingUs": 0,
  });
  const e = explainStep(p, { ncclProto: "LL" }, decodeBatch(1, 128));
  assert.ok(Math.abs(e.allReduce.perCallUs - 30) < 1e-9);
  assert.ok(Math.abs(ms(e, "allreduce") - (157 * 30) / 1000) < 1e-9);
  assert.ok(Math.abs(ms(e, "launch") - (78 * 16 + 12) / 1000) < 1e-9);
});

test("invalid profiles name the file and the field", () => {
  const dir = mkdtempSync(join(tmpdir(), "sim-prof-"));
  const f = join(dir, "bad.yaml");
  writeFileSync(f, "name: x\nmodel:\n  servedName: m\n  architecture: A\n  layers: -3\n");
  assert.throws(
    () => loadProfile(f),
    (err: unknown) => err instanceof InputError && err.message.includes(f) && err.message.includes("model.layers"),
  );
  writeFileSync(f, "name: [unclosed\n");
  assert.throws(
    () => loadProfile(f),
    (err: unknown) => err instanceof InputError && err.message.startsWith(`${f}:2:1: not valid YAML`),
  );
  assert.throws(() => loadProfile("no-such-profile"), /unknown profile/);
  assert.throws(() => loadProfile("glm5-8x-rtxpro6000-pcie", { "cost.bogus": 1 }), /cost/);
  // Hardware names must resolve in the model's catalog; the error names the field and its line.
  const prof = readFileSync(new URL("../../src/sim/profiles/glm5-8x-rtxpro6000-pcie.yaml", import.meta.url), "utf8");
  writeFileSync(f, prof.replace("catalogGpu: rtx-pro-6000", "catalogGpu: rtx-pro-6001"));
  const line = prof.split("\n").findIndex((l) => l.includes("catalogGpu")) + 1;
  assert.throws(
    () => loadProfile(f),
    (err: unknown) =>
      err instanceof InputError &&
      err.message.startsWith(`${f}:${line}:1: field "hardware.catalogGpu": unknown GPU "rtx-pro-6001"`),
  );
  writeFileSync(f, prof.replace("interconnect: pcie", "interconnect: pcie9x"));
  assert.throws(() => loadProfile(f), /field "hardware.interconnect": unknown interconnect "pcie9x"/);
});

test("Python/prometheus_client float rendering", () => {
  assert.equal(pyRepr(1), "1.0");
  assert.equal(pyRepr(0.3), "0.3");
  assert.equal(pyRepr(1e-5), "1e-05");
  assert.equal(pyRepr(0.0001), "0.0001");
  assert.equal(pyRepr(20000), "20000.0");
  assert.equal(pyRepr(1e16), "1e+16");
  assert.equal(goFloat(1753795326.9352946), "1.7537953269352946e+09");
  assert.equal(goFloat(12345678), "1.2345678e+07");
  assert.equal(goFloat(Number.POSITIVE_INFINITY), "+Inf");
  assert.equal(goFloat(0.025), "0.025");
});

test("generated text re-counts to the number of tokens served", () => {
  assert.equal(VOCAB.length, 256);
  for (const w of VOCAB) assert.ok(/^[a-z]{1,4}$/.test(w), w);
  let text = "";
  for (let i = 0; i < 500; i++) text += tokenText(7, i);
  assert.equal(countTokens(text), 500);
  assert.equal(tokenText(7, 3), tokenText(7, 3));
  assert.equal(countTokens("Hello, world! internationalization"), 11); // Hell|o|,| worl|d|!| inte|rnat|iona|liza|tion
});
