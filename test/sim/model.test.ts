import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { InputError } from "../../src/errors.ts";
import { explainSim } from "../../src/sim/explain.ts";
import { goFloat, pyRepr } from "../../src/sim/exposition.ts";
import {
  decodeBatch,
  explainStep,
  listProfiles,
  loadProfile,
  ncclAllReduceUs,
  prefillBatch,
  resolveConfig,
} from "../../src/sim/index.ts";
import { countTokens, tokenText, VOCAB } from "../../src/sim/text.ts";
import { parseNcclProto } from "../../src/sim/timing.ts";

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

test("NCCL latency model matches collectives.md §3.4", () => {
  const near = (a: number, b: number) => assert.ok(Math.abs(a - b) < 0.05, `${a} vs ${b}`);
  near(ncclAllReduceUs("LL", "Ring", 8, "pcie", 0, 48), 20.6);
  near(ncclAllReduceUs("Simple", "Ring", 8, "pcie", 0, 48), 88.2);
  near(ncclAllReduceUs("Simple", "Tree", 8, "pcie", 0, 48), 64.4);
  near(ncclAllReduceUs("LL", "Tree", 4, "nvlink", 0, 370), 10.4);
  near(ncclAllReduceUs("LL128", "Ring", 2, "nvlink", 0, 370), 17.8);
  assert.equal(ncclAllReduceUs("LL", "Ring", 1, "pcie", 12288, 48), 0);
});

test("NCCL_PROTO parsing and protocol choice", () => {
  assert.equal(parseNcclProto(undefined), null);
  assert.deepEqual([...parseNcclProto("LL")!], ["LL"]);
  assert.deepEqual([...parseNcclProto("^LL128")!].sort(), ["LL", "Simple"]);
  assert.deepEqual([...parseNcclProto("ll,simple")!].sort(), ["LL", "Simple"]);
  assert.throws(() => parseNcclProto("Fast"), /unknown protocol/);
  assert.equal(resolveConfig(glm, {}).protocol, "Simple");
  assert.equal(resolveConfig(glm, { ncclProto: "LL" }).protocol, "LL");
  // Excluding the default picks the cheaper remaining protocol.
  assert.equal(resolveConfig(glm, { ncclProto: "^Simple" }).protocol, "LL");
});

test("custom all-reduce follows vLLM's rule", () => {
  const l70 = loadProfile("llama3-70b-4xh100-nvlink");
  const mix = loadProfile("mixtral-8x7b-2xa100");
  assert.equal(resolveConfig(l70, {}).customAllReduce, true);
  assert.equal(resolveConfig(l70, { disableCustomAllReduce: true }).customAllReduce, false);
  assert.equal(resolveConfig(mix, {}).customAllReduce, true);
  assert.equal(resolveConfig(glm, {}).customAllReduce, false);
  assert.equal(resolveConfig(glm, { tensorParallelSize: 2 }).customAllReduce, true);
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
