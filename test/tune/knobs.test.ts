// The --knob grammar, the candidate product and its pruning rules, the surrogate's algebra, and the
// option checks that must fail before any server starts.
import assert from "node:assert/strict";
import { test } from "node:test";
import { parseBudget, parseSlo } from "../../src/cli/commands/tune.ts";
import { UsageError } from "../../src/errors.ts";
import { candidates, commandFor, type PruneContext, parseKnob } from "../../src/tune/knobs.ts";
import { tokensPerStep } from "../../src/tune/model.ts";
import { blockObjective, resolveTuneConfig } from "../../src/tune/run.ts";
import { difference, estimateTau, posterior } from "../../src/tune/surrogate.ts";

const ctx: PruneContext = { engine: "vllm", tp: 8, gpus: 8, hostCores: 16, collectives: true };

test("parseKnob: env with an empty item = unset, --flag=a,b, --switch off/on", () => {
  const e = parseKnob("NCCL_PROTO=,LL,Simple");
  assert.equal(e.kind, "env");
  assert.deepEqual(
    e.values.map((v) => [v.label, v.value]),
    [
      ["unset", null],
      ["LL", "LL"],
      ["Simple", "Simple"],
    ],
  );
  const f = parseKnob("--spec-tokens=0,2");
  assert.equal(f.kind, "flag");
  assert.deepEqual(
    f.values.map((v) => v.value),
    ["0", "2"],
  );
  const s = parseKnob("--enforce-eager");
  assert.equal(s.kind, "switch");
  assert.deepEqual(
    s.values.map((v) => v.label),
    ["off", "on"],
  );
  for (const bad of ["", "NCCL_PROTO=LL", "1BAD=a,b", "--x=a,a", "plain"])
    assert.throws(() => parseKnob(bad), UsageError, bad);
});

test("candidates: the product, baseline first, names and commands; impossible ones pruned with a reason", () => {
  const ks = ["NCCL_PROTO=,LL,Simple", "--spec-tokens=0,2", "--enforce-eager"].map(parseKnob);
  const cs = candidates(ks, ctx);
  assert.equal(cs.length, 12);
  assert.equal(cs[0]!.name, "baseline");
  assert.deepEqual(cs[0]!.unset, ["NCCL_PROTO"]);
  assert.deepEqual(cs[0]!.args, ["--spec-tokens", "0"]);
  assert.ok(cs.every((c) => c.skipped === null));
  const ll = cs.find((c) => c.name === "NCCL_PROTO=LL --spec-tokens 2 --enforce-eager")!;
  assert.deepEqual(ll.env, { NCCL_PROTO: "LL" });
  assert.equal(
    commandFor(ll, "vllm serve m --port {port}"),
    "NCCL_PROTO=LL vllm serve m --port {port} --spec-tokens 2 --enforce-eager",
  );
  assert.equal(commandFor(cs[0]!, "vllm serve m"), "env -u NCCL_PROTO vllm serve m --spec-tokens 0");

  // No collectives (TP 1): an NCCL knob cannot change anything, so its non-baseline values are pruned.
  const tp1 = candidates([parseKnob("NCCL_PROTO=,LL"), parseKnob("--enforce-eager")], {
    ...ctx,
    tp: 1,
    collectives: false,
  });
  assert.deepEqual(
    tp1.map((c) => c.skipped !== null),
    [false, true, false, true],
  );
  assert.match(tp1[1]!.skipped!, /only changes collectives.*TP 1/);
  // llama.cpp rules: threads above the host's cores, a ubatch larger than the batch.
  const lc = candidates([parseKnob("--threads=1,2,32"), parseKnob("--ubatch-size=128,4096")], {
    engine: "llamacpp",
    tp: null,
    gpus: null,
    hostCores: 2,
    collectives: false,
  });
  assert.match(lc.find((c) => c.settings["--threads"] === "32")!.skipped!, /more than the host's 2 cores/);
  const ub = candidates([parseKnob("--ubatch-size=128,4096"), parseKnob("--batch-size=2048,8192")], {
    ...ctx,
    engine: "llamacpp",
  });
  assert.match(
    ub.find((c) => c.settings["--ubatch-size"] === "4096" && c.settings["--batch-size"] === "2048")!.skipped!,
    /larger than --batch-size/,
  );
  const tp = candidates([parseKnob("--tensor-parallel-size=8,3")], ctx);
  assert.match(tp[1]!.skipped!, /TP 3 does not divide the 8 GPUs/);
  assert.throws(() => candidates([parseKnob("A=1,2"), parseKnob("A=3,4")], ctx), /given twice/);
});

test("surrogate: with no model and flat priors the posterior mean is the precision-weighted block mean", () => {
  const cands = [
    { m: 0, levels: [0] },
    { m: 0, levels: [1] },
  ];
  const priors = { bias: 100, knob: [100], interaction: 1e-6, tau0: 0.01, nu0: 1e6 };
  const obs = [
    { candidate: 0, y: Math.log(20), w: 0 },
    { candidate: 0, y: Math.log(22), w: 0 },
    { candidate: 1, y: Math.log(15), w: 0 },
  ];
  const p = posterior(cands, [2], priors, obs);
  assert.ok(Math.abs(p.mean[0]! - (Math.log(20) + Math.log(22)) / 2) < 1e-6);
  assert.ok(Math.abs(p.mean[1]! - Math.log(15)) < 1e-6);
  // sd of a mean of n blocks = τ/√n (τ pinned by the huge prior weight).
  assert.ok(Math.abs(p.sd[0]! - 0.01 / Math.SQRT2) < 1e-6);
  const d = difference(p, 1, 0);
  assert.ok(Math.abs(d.sd - Math.sqrt(0.01 ** 2 / 2 + 0.01 ** 2)) < 1e-6);
  // τ from replicated blocks: pooled spread minus the blocks' own noise.
  const t = estimateTau(
    [
      { candidate: 0, y: 0, w: 0 },
      { candidate: 0, y: 0.02, w: 0 },
    ],
    { ...priors, nu0: 0 },
  );
  assert.ok(Math.abs(t.tau - Math.sqrt(0.0002)) < 1e-9);
  // An unmeasured candidate is predicted from the model and the knob corrections learned elsewhere.
  const three = [
    { m: Math.log(10), levels: [0, 0] },
    { m: Math.log(10), levels: [1, 0] },
    { m: Math.log(10), levels: [0, 1] },
    { m: Math.log(10), levels: [1, 1] },
  ];
  const q = posterior(three, [2, 2], { bias: 1, knob: [1, 1], interaction: 0.001, tau0: 0.001, nu0: 1e6 }, [
    { candidate: 0, y: Math.log(10), w: 0 },
    { candidate: 1, y: Math.log(8), w: 0 },
    { candidate: 2, y: Math.log(5), w: 0 },
  ]);
  assert.ok(
    Math.abs(Math.exp(q.mean[3]!) - 4) < 0.05,
    `additive in log: 10 × 0.8 × 0.5 = 4, got ${Math.exp(q.mean[3]!)}`,
  );
});

test("block objective: TPOT mean with its log variance; goodput counts only requests within the SLO", () => {
  const r = (tpot: number, ttft: number, n = 10) => ({
    index: 0,
    ok: true,
    ttftMs: ttft,
    e2elMs: ttft + tpot * (n - 1),
    tpotMs: tpot,
    outputTokens: n,
    promptTokens: 4,
    error: null,
  });
  const b = blockObjective([r(10, 100), r(12, 100)], 1000, "tpot", {}, 1)!;
  assert.equal(b.value, 11);
  assert.ok(Math.abs(b.w - 2 / (2 * 121)) < 1e-12);
  const g = blockObjective(
    [r(10, 100), r(60, 100), r(10, 900)],
    2000,
    "throughput-at-slo",
    { ttftMs: 500, tpotMs: 50 },
    1,
  )!;
  assert.equal(g.value, 10 / 2);
  assert.equal(g.sloMet, 1);
  // Time scale: a sim run 10× faster is read back in real time.
  assert.equal(blockObjective([r(1, 10)], 100, "tpot", {}, 10)!.value, 10);
  assert.equal(tokensPerStep(2, 0.5), 1.75);
  assert.equal(tokensPerStep(0, 0.9), 1);
});

test("option checks fail before any server starts", () => {
  assert.throws(() => resolveTuneConfig({ knobs: ["NCCL_PROTO=,LL"], objective: "wat" as never }), /--objective wat/);
  assert.throws(() => resolveTuneConfig({ knobs: ["NCCL_PROTO=,LL"], objective: "throughput-at-slo" }), /needs --slo/);
  assert.throws(() => resolveTuneConfig({ knobs: ["NCCL_PROTO=,LL"], tolerance: 0.9 }), /--tolerance/);
  assert.throws(
    () => resolveTuneConfig({ knobs: ["NCCL_PROTO=,LL"], serverCmd: "x --port {port}", timeScale: 5 }),
    /embedded sim only/,
  );
  assert.throws(() => resolveTuneConfig({ knobs: ["NCCL_PROTO=,LL"], workload: { randomOutputLen: 1 } }), /≥ 2/);
  assert.deepEqual(parseSlo("ttft:500,tpot:50"), { ttftMs: 500, tpotMs: 50 });
  assert.throws(() => parseSlo("itl:5"), /ttft:MS or tpot:MS/);
  assert.deepEqual(parseBudget("40,30m"), { starts: 40, timeMs: 1_800_000 });
  assert.throws(() => parseBudget("1"), /at least 2/);
  // Without --knob the registry gives the knobs that apply: the seed deployment (vLLM, TP 8).
  const c = resolveTuneConfig({});
  assert.equal(c.knobSource, "registry");
  assert.deepEqual(
    c.knobs.map((k) => k.name),
    ["NCCL_PROTO", "--disable-custom-all-reduce", "--enforce-eager"],
  );
});
