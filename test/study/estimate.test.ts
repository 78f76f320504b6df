import assert from "node:assert/strict";
import { test } from "node:test";
import { makeRng } from "../../src/experiment/stats.ts";
import {
  decompose,
  estimateFromTrace,
  pooledMeanCI,
  pooledMeanDraws,
  type TraceStep,
} from "../../src/study/estimate.ts";

function normal(u: () => number): number {
  return Math.sqrt(-2 * Math.log(1 - u())) * Math.cos(2 * Math.PI * u());
}

function syntheticSteps(
  u: () => number,
  n: number,
  truth: { ar: number; calls: number; comm: number; compute: number; idle: number },
): TraceStep[] {
  return Array.from({ length: n }, () => {
    const j = Math.exp(0.02 * normal(u));
    return {
      periodMs: (truth.ar + truth.comm + truth.compute + truth.idle) * j,
      allReduceMs: truth.ar * j,
      allReduceCalls: truth.calls,
      otherCommMs: truth.comm * j,
      computeMs: truth.compute * j,
    };
  });
}

test("pooled mean CI: cluster bootstrap covers the true mean about 95 % of the time", () => {
  const u = makeRng(3);
  let covered = 0;
  const trials = 200;
  for (let t = 0; t < trials; t++) {
    const groups = Array.from({ length: 8 }, () => Array.from({ length: 50 }, () => 20 + normal(u)));
    const ci = pooledMeanCI(groups, t + 1);
    if (ci.lo <= 20 && 20 <= ci.hi) covered++;
  }
  assert.ok(covered / trials > 0.88 && covered / trials <= 1, `coverage ${covered / trials}`);
});

test("pooledMeanDraws falls back to sample resampling with few requests", () => {
  const r = pooledMeanDraws([[1, 2, 3, 4]], 1);
  assert.equal(r.estimate, 2.5);
  assert.ok(r.draws.length > 0);
  assert.deepEqual(pooledMeanDraws([], 1).draws, []);
});

test("trace estimates recover per-call cost and share; decomposition adds up to the token time", () => {
  const truth = { ar: 13.6, calls: 157, comm: 0.14, compute: 5.5, idle: 1.5 };
  const steps = syntheticSteps(makeRng(9), 64, truth);
  const tr = estimateFromTrace(steps, 5);
  const perCall = (1000 * truth.ar) / truth.calls;
  assert.ok(tr.perCallUs.lo <= perCall && perCall <= tr.perCallUs.hi, JSON.stringify(tr.perCallUs));
  assert.equal(tr.callsPerStep, 157);
  const period = truth.ar + truth.comm + truth.compute + truth.idle;
  assert.ok(Math.abs(tr.share.estimate - truth.ar / period) < 1e-9, "share is exact when jitter scales every part");
  // A few steps stretched by a late host do not move the medians.
  const late = steps.map((s, i) => (i % 10 === 0 ? { ...s, periodMs: s.periodMs * 2 } : s));
  assert.ok(Math.abs(estimateFromTrace(late, 5).share.estimate - truth.ar / period) < 1e-9);
  const d = decompose(tr);
  const sum = d.parts.reduce((s, p) => s + p.ms.value, 0);
  assert.ok(Math.abs(sum - tr.periodMs.estimate) < 1e-9, "parts add up to the median step");
  assert.deepEqual(
    d.parts.map((p) => p.component),
    ["communication", "compute", "overhead"],
  );
  const ceil = 1000 / (period - truth.ar);
  assert.ok(d.ceilingNoAllReduce.lo <= ceil && ceil <= d.ceilingNoAllReduce.hi, JSON.stringify(d.ceilingNoAllReduce));
  assert.throws(() => estimateFromTrace([], 1), /no decode steps/);
});

test("unscale: the sim's share is multiplied back, the client's own wall overhead counted once", async () => {
  const { unscale } = await import("../../src/study/phases.ts");
  // 10× sim: 5.46 ms of simulated work (54.6 ms real-world) + 2 ms of client HTTP overhead.
  assert.ok(Math.abs(unscale(7.46, 10, 2) - 56.6) < 1e-9);
  assert.equal(unscale(7.46, 1, 2), 7.46);
  assert.ok(Math.abs(unscale(7.46, 10, 0) - 74.6) < 1e-9);
});
