// Length sweep against the real simulator: the fitted per-token cost and fixed cost match its truth.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import type { BlockSample } from "../../src/experiment/blocks.ts";
import { analyseLengthSweep, runLengthSweep, runLoadSweep } from "../../src/experiment/sweep.ts";
import { explainSim } from "../../src/sim/explain.ts";
import { openStore } from "../../src/store/index.ts";
import { spawnSim } from "../helpers/sim.ts";

const TIME_SCALE = 4;
const dir = mkdtempSync(join(tmpdir(), "inferscope-sweep-"));
after(() => rmSync(dir, { recursive: true, force: true }));

test("length sweep: E2E = a + b·(n − 1) recovers the sim's decode step (b) and TTFT (a)", async () => {
  const truth = explainSim({ env: { NCCL_PROTO: "LL" } });
  const stepMs = truth.decode.stepMs / TIME_SCALE;
  const sim = await spawnSim(["--time-scale", String(TIME_SCALE)], { env: { NCCL_PROTO: "LL" } });
  const db = join(dir, "sweep.db");
  try {
    const r = await runLengthSweep({
      url: sim.url,
      outLens: [8, 24, 48, 96],
      requestsPerLength: 3,
      randomInputLen: 16,
      warmup: 1,
      db,
      resamples: 400,
    });
    assert.equal(r.status, "complete");
    assert.deepEqual(
      r.points.map((p) => p.outputLen),
      [8, 24, 48, 96],
    );
    assert.ok(r.points.every((p) => p.n === 3));
    const b = r.fit.perTokenMs;
    // Within 10 % of the true step, and the CI is tight around it (client overhead adds a little).
    assert.ok(Math.abs(b.estimate - stepMs) / stepMs < 0.1, `b = ${b.estimate} vs step ${stepMs}`);
    assert.ok(b.lo <= b.estimate && b.estimate <= b.hi);
    // The fixed cost is the TTFT (prefill + frontend) within a few steps' worth.
    assert.ok(
      Math.abs(r.fit.fixedMs.estimate - r.measuredTtftMs) < 3 * stepMs + 0.2 * r.measuredTtftMs,
      `a = ${r.fit.fixedMs.estimate} vs TTFT ${r.measuredTtftMs}`,
    );
    assert.equal(r.residuals.length, 12);
    assert.ok(r.fit.medianAbsResidualMs < 0.05 * r.points.at(-1)!.e2elMs.mean);
    const s = openStore(db);
    const d = s.getRun(r.runId);
    assert.equal(d.run.kind, "sweep-lengths");
    assert.equal(d.run.status, "complete");
    assert.equal(d.blocks.length, 4);
    assert.equal(d.requestCount, 12);
    s.close();

    const c = await runLoadSweep({
      url: sim.url,
      mode: "concurrency",
      levels: [1, 4],
      numPrompts: 8,
      randomInputLen: 8,
      randomOutputLen: 16,
      warmup: 0,
      db,
    });
    assert.deepEqual(
      c.points.map((p) => p.level),
      [1, 4],
    );
    // Batching: 4 users get more than 2× the throughput of one on this profile.
    assert.ok(c.points[1].outputThroughput > 2 * c.points[0].outputThroughput, JSON.stringify(c.points));
  } finally {
    await sim.stop();
  }
});

test("the length-sweep fit on hand-made samples: exact line, one outlier, drift warning", () => {
  const mk = (n: number, e2el: number, tpot: number): BlockSample => ({
    index: 0,
    ok: true,
    ttftMs: 50,
    e2elMs: e2el,
    tpotMs: tpot,
    outputTokens: n,
    promptTokens: 8,
    error: null,
  });
  const results = new Map<number, { samples: BlockSample[] }>();
  for (const n of [16, 32, 64, 128]) results.set(n, { samples: [0, 1, 2].map(() => mk(n, 50 + 17.4 * (n - 1), 17.4)) });
  results.get(64)!.samples[1].e2elMs += 900; // a hiccup
  const r = analyseLengthSweep("x", ":memory:", "t", {}, results, {
    seed: 1,
    resamples: 200,
    level: 0.95,
    partial: false,
  });
  assert.equal(r.fit.perTokenMs.estimate, 17.4);
  assert.ok(Math.abs(r.fit.fixedMs.estimate - 50) < 1e-9);
  assert.ok(Math.abs(r.fit.convergedTokPerS - 1000 / 17.4) < 1e-9);
  assert.equal(r.residuals.filter((x) => Math.abs(x.residualMs) > 1).length, 1);
  assert.deepEqual(r.warnings, []);
  // TPOT rising with length is flagged as context-length drift.
  for (const [n, v] of results) for (const s of v.samples) s.tpotMs = 17 + n / 100;
  const d = analyseLengthSweep("x", ":memory:", "t", {}, results, {
    seed: 1,
    resamples: 200,
    level: 0.95,
    partial: false,
  });
  assert.ok(d.fit.tpotDriftMsPer1k.estimate > 9 && d.fit.tpotDriftMsPer1k.estimate < 11);
  assert.match(d.warnings.join("\n"), /TPOT grows with output length/);
});
