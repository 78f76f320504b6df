import assert from "node:assert/strict";
import { test } from "node:test";
import { UsageError } from "../../src/errors.ts";
import { SEED_DEPLOYMENT } from "../../src/model/examples.ts";
import { explain } from "../../src/model/explain.ts";
import { predict } from "../../src/model/predict.ts";
import type { ModelInput } from "../../src/model/resolve.ts";
import { ceilings, whatif, whatifGrid } from "../../src/model/whatif.ts";

test("worked example: 156 all-reduces of 12 KiB, extras stated separately, custom AR off with vLLM's reason, LL/Simple menu", () => {
  const p = predict(SEED_DEPLOYMENT);
  const c = p.collectives;
  assert.equal(c.countPerToken, 156);
  assert.equal(c.bytesEach, 12288);
  assert.deepEqual(
    c.extra.filter((e) => e.count > 0).map((e) => e.name),
    ["embedding all-reduce", "logits gather"],
  );
  assert.equal(c.implementation, "nccl");
  assert.equal(c.customAllReduce.used, false);
  assert.match(
    c.customAllReduce.engineMessage!,
    /Custom allreduce is disabled because it's not supported on more than two PCIe-only GPUs/,
  );
  assert.deepEqual(c.protocolMenu, ["LL", "Simple"]);
  assert.equal(c.protocol, "LL");
  assert.ok(c.reason.some((r) => /LL128 off by default/.test(r)));
  // Ranges are ordered and the terms add up to the step.
  for (const r of [p.decode.stepMs, p.decode.tokensPerSecond, c.latencyUsEach])
    assert.ok(r.low <= r.mid && r.mid <= r.high);
  const sum = p.decode.terms.reduce((s, t) => s + t.ms.mid, 0);
  assert.ok(Math.abs(sum - p.decode.stepMs.mid) < 1e-3);
  assert.ok(Math.abs(p.decode.terms.reduce((s, t) => s + t.share, 0) - 1) < 1e-3);
  for (const t of p.decode.terms) assert.ok(t.formula && t.source && t.inputs, t.name);
  // The measured 17.4 ms sits inside the uncalibrated range.
  assert.ok(p.decode.stepMs.low < 17.4 && p.decode.stepMs.high > 17.4);
  assert.ok(p.prefill.ttftMs.mid > 0);
  assert.ok(p.assumptions.length > 5);
});

test("weight bytes per GPU reproduce models.md §2", () => {
  const gb = (i: ModelInput) => predict(i).decode.weightBytesPerGpu / 1e9;
  const h100 = { gpu: "h100-sxm", engine: "vllm" } as const;
  assert.equal(gb({ ...h100, model: "llama-3.1-8b", quant: "bf16" }).toFixed(1), "15.0");
  assert.equal(gb({ ...h100, model: "llama-3.1-70b", quant: "bf16", tp: 8 }).toFixed(1), "17.4");
  assert.equal(gb({ gpu: "a100-80gb-sxm", model: "mixtral-8x7b", quant: "bf16", tp: 2 }).toFixed(1), "12.7");
  // models.md's table says 5.4 GB without its own replication rule; TP 8 > 4 KV heads duplicates K/V (+0.1 GB).
  assert.equal(gb({ ...h100, model: "qwen3-235b-a22b", quant: "bf16", tp: 8 }).toFixed(1), "5.5");
  // models.md's 4.6 GB puts the LM head in FP8 too; the FP8 checkpoint keeps it (and the router) BF16: +0.1 GB.
  assert.equal(gb({ ...h100, model: "deepseek-v3", quant: "fp8-block", tp: 8 }).toFixed(1), "4.7");
  assert.equal(gb({ ...SEED_DEPLOYMENT, quant: "nvfp4-all" }).toFixed(2), "2.89");
  assert.equal(gb({ ...SEED_DEPLOYMENT, quant: "nvfp4" }).toFixed(2), "5.51");
  assert.equal(gb({ ...SEED_DEPLOYMENT, quant: "nvfp4-routed" }).toFixed(2), "6.14");
});

test("explain prints a sentence per term and names the custom-AR reason", () => {
  const p = predict(SEED_DEPLOYMENT);
  const s = explain(p);
  assert.ok(s.length >= p.decode.terms.length + 3);
  assert.ok(s.some((x) => /156 per token of 12288 B \(12 KiB\)/.test(x)));
  assert.ok(s.some((x) => /no LL128/.test(x)));
  assert.ok(s.some((x) => /Custom all-reduce: disabled/.test(x)));
});

test("what-ifs move the step the right way", () => {
  const rows = whatif(SEED_DEPLOYMENT, [
    "zero-comm",
    "custom-ar",
    "nvlink",
    "protocols",
    "kv=fp8",
    "tp=4",
    "batch=1,8,64",
  ]);
  const by = (s: string) => rows.find((r) => r.scenario === s)!;
  const base = rows[0].stepMs.mid;
  assert.ok(by("zero-comm").stepMs.mid < base - 4);
  assert.ok(by("custom-ar").stepMs.mid < base);
  assert.ok(by("custom-ar").notes.some((n) => /hypothetical/.test(n)));
  assert.ok(by("nvlink").stepMs.mid < base);
  assert.equal(by("nvlink").allReduce.implementation, "vllm-custom");
  assert.ok(by("proto=Simple").stepMs.mid > by("proto=LL").stepMs.mid);
  assert.equal(by("proto=LL128").allReduce.protocol, "LL128");
  assert.ok(by("tp=4").allReduce.count === 156 && by("tp=4").stepMs.mid !== base);
  // Throughput grows with batch, per-sequence rate falls.
  assert.ok(by("batch=64").tokensPerSecondTotal.mid > by("batch=8").tokensPerSecondTotal.mid);
  assert.ok(by("batch=64").tokensPerSecond.mid < by("batch=1").tokensPerSecond.mid);
  assert.throws(() => whatif(SEED_DEPLOYMENT, ["warp-drive"]), UsageError);
});

test("the seed's NCCL_PROTO=LL what-if, before any measurement: its range holds the measured −3.83 ms", () => {
  // seed-scenario.md §3.5: 2.71 → 2.22 s for 128 tokens. The host (sockets, CPU) is not in the seed's record, so
  // whether NCCL's ring search falls back is unknown: the range spans both answers.
  const measured = -3.83;
  const [, ll] = whatif(SEED_DEPLOYMENT, ["proto=LL"]);
  const r = ll!.deltaMsRange!;
  assert.ok(r.low <= measured && measured <= r.high, JSON.stringify(r));
  assert.ok(ll!.deltaMs < 0 && r.high === 0, JSON.stringify(ll));
  assert.ok(
    ll!.notes.some((n) => /if NCCL's ring search falls back: -\d/.test(n)),
    ll!.notes.join("; "),
  );
  // Told the fallback happened (NCCL's log line), the change is Simple's bounded extra, and holds the seed's.
  const [, given] = whatif({ ...SEED_DEPLOYMENT, ncclFallback: true }, ["proto=LL"]);
  const g = given!.deltaMsRange!;
  assert.ok(g.low <= measured && measured <= g.high && g.high < -1, JSON.stringify(g));
  // On one socket with Gen5 links NCCL already runs LL: forcing it changes nothing.
  const [, node] = whatif({ ...SEED_DEPLOYMENT, interconnect: "pcie5-node" }, ["proto=LL"]);
  assert.equal(node!.deltaMs, 0);
  // The baseline says NCCL may run Simple, and why.
  const base = predict(SEED_DEPLOYMENT);
  assert.equal(base.collectives.searchFallback?.state, "unknown");
  assert.ok(base.collectives.reason.some((x) => /may fall back/.test(x)));
});

test("ceilings without measurements are model rows tied to named assumptions", () => {
  const rows = ceilings(SEED_DEPLOYMENT);
  assert.ok(rows.some((r) => /zero-cost communication/.test(r.name)));
  assert.ok(rows.some((r) => /NVLink instead of PCIe/.test(r.name)));
  for (const r of rows) assert.ok(r.stepMs.low <= r.stepMs.high && r.assumption.length > 0);
});

test("grid what-if and input validation", () => {
  const g = whatifGrid(SEED_DEPLOYMENT, { batch: [1, 2], proto: ["LL", "Simple"] });
  assert.equal(g.length, 4);
  assert.throws(() => predict({ ...SEED_DEPLOYMENT, gpu: "rtx-pro-600" }), /did you mean: rtx-pro-6000/);
  assert.throws(() => predict({ ...SEED_DEPLOYMENT, tp: 16 }), /GPUs, but --gpus is 8/);
  assert.throws(() => predict({ ...SEED_DEPLOYMENT, interconnect: "pcie9x" }), /unknown interconnect/);
  assert.throws(() => predict({ ...SEED_DEPLOYMENT, model: "llama-3.1-8b", ep: 2 }), /mixture-of-experts/);
  // Custom device by its numbers.
  const p = predict({
    model: "llama-3.1-8b",
    gpu: { name: "my-3090", bandwidth: "936GB/s", tflopsBf16: 71, memory: "24GB" },
  });
  assert.equal(p.hardware.gpu.bandwidthGBs, 936);
  assert.equal(p.memory.fits, true);
});

test("DP attention + EP beyond the TP group replaces MoE all-reduces by all-to-all", () => {
  const p = predict({
    model: "deepseek-v3",
    quant: "fp8",
    gpu: "h200-sxm",
    gpus: 8,
    tp: 1,
    dp: 8,
    ep: 8,
    interconnect: "nvlink4",
  });
  assert.equal(p.collectives.countPerToken, 0);
  assert.equal(p.collectives.allToAllPerToken, 2 * 58);
  assert.ok(p.decode.terms.some((t) => t.name === "alltoall"));
});
