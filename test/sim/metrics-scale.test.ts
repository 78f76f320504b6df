// Under --time-scale X the sim's /metrics hold simulated seconds (what the profiled deployment would
// export), not the X-times-shorter wall time, and the gauge inferscope_sim_time_scale says X.
import assert from "node:assert/strict";
import { performance } from "node:perf_hooks";
import { test } from "node:test";
import { Engine, SimRequest, type StepRecord } from "../../src/sim/engine.ts";
import { SimMetrics } from "../../src/sim/exposition.ts";
import { loadProfile, StepModel } from "../../src/sim/index.ts";
import { tokenize } from "../../src/sim/text.ts";
import { sample } from "./util.ts";

function setup(timeScale: number, speedZero: boolean) {
  const profile = loadProfile("glm5-8x-rtxpro6000-pcie");
  const model = new StepModel(profile, {});
  const metrics = new SimMetrics({
    modelName: "m",
    maxModelLen: profile.model.maxModelLen,
    blockSize: profile.engine.blockSize,
    numGpuBlocks: profile.engine.numGpuBlocks,
    prefixCaching: profile.engine.enablePrefixCaching,
    specTokens: 0,
    faultKinds: [],
    nowUnixS: 0,
  });
  const steps: StepRecord[] = [];
  const engine = new Engine({
    model,
    metrics,
    clock: () => performance.now(),
    timeScale,
    speedZero,
    seed: 5,
    maxNumSeqs: profile.engine.maxNumSeqs,
    maxNumBatchedTokens: profile.engine.maxNumBatchedTokens,
    acceptance: 0.7,
    onStep: (r) => steps.push(r),
  });
  return { engine, metrics, steps, profile };
}

/** One request; resolves with it and the engine's own stamp (req.lastTokenAt, engine clock) of each token. */
function one(engine: Engine, id: number, maxTokens: number): Promise<{ req: SimRequest; stamps: number[] }> {
  return new Promise((resolve) => {
    const stamps: number[] = [];
    const req = new SimRequest({
      id,
      promptIds: tokenize(`time scale request ${id}`),
      maxTokens,
      ignoreEos: true,
      seed: id,
      sink: {
        onTokens(q, _from, _count, finish) {
          stamps.push(q.lastTokenAt);
          if (finish) resolve({ req: q, stamps });
        },
      },
    });
    engine.submit(req);
  });
}

const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
/** The engine's catch-up window (engine.ts CATCH_UP_MS): the chain restarts only when a step ends later than this. */
const CATCH_UP_MS = 100;

// Timing here is judged against the engine's own stamps for the same tokens (and the lateness it measured against
// its own deadlines), never a fixed wall-clock tolerance: a loaded host makes timers late, which moves every
// measured gap, but not the relation between the histograms and the stamps, nor the steps' simulated lengths.
test("time-scale 10: TTFT, ITL, TPOT and E2E histograms hold simulated seconds, not 1/10 of them", async (t) => {
  const X = 10;
  const TOKENS = 120;
  const { engine, metrics, steps, profile } = setup(X, false);
  const runs: { req: SimRequest; stamps: number[] }[] = [];
  for (let i = 0; i < 2; i++) runs.push(await one(engine, i, TOKENS));
  // Each step's simulated length is its wall length × X (the trace uses the same clock); the lengths are the
  // profile's step times × the seeded jitter, so they do not depend on the host.
  const simMs = (s: StepRecord) => (s.endMs - s.startMs) * X;
  const prefill = steps.filter((s) => s.shape.prefillSeqs > 0);
  const decode = steps.filter((s) => s.shape.decodeSeqs > 0);
  assert.equal(prefill.length, 2);
  assert.equal(decode.length, 2 * (TOKENS - 1));
  const itlTruth = sum(decode.map(simMs)) / decode.length;
  // The same order as the profile's batch-1 step (≈ 20.9 ms for this profile), not ≈ 2.1 ms.
  assert.ok(itlTruth > 15 && itlTruth < 30, `simulated step ${itlTruth} ms`);

  // Batch 1, one request after the other: step i emitted token i, so each token has its step's deadline.
  assert.equal(steps.length, 2 * TOKENS);
  const stamps = runs.flatMap((r) => r.stamps);
  assert.equal(stamps.length, steps.length);
  const late = stamps.map((at, i) => at - steps[i]!.endMs);
  // No token leaves before its step's deadline (catches a sim that runs ahead of its profile).
  for (const [i, l] of late.entries()) assert.ok(l >= -1e-9, `token ${i} sent ${-l} ms before its step ended`);

  // ITL: the histogram is exactly the gaps between the engine's own stamps, in simulated ms (catches wall-time
  // histograms: 10× off; and any other clock than the token stamps).
  const k = X / 1000;
  const gaps = runs.flatMap((r) => r.stamps.slice(1).map((at, i) => (at - r.stamps[i]!) * k));
  assert.equal(metrics.itl.count, gaps.length);
  assert.ok(Math.abs(metrics.itl.sum / sum(gaps) - 1) < 1e-9, `ITL sum ${metrics.itl.sum} vs stamps ${sum(gaps)}`);
  const itl = (1000 * metrics.itl.sum) / metrics.itl.count;
  // …and those gaps are the decode steps (chained on deadlines). A request's gaps add up to its decode steps plus
  // the lateness of its first and last token, plus any chain restart after a step later than the catch-up window:
  // that is the noise this host added, measured, and the bound grows by exactly it (catches gaps that are not the
  // steps: a broken chain, a step length other than the profile's, lateness that accumulates).
  let slackMs = 0;
  let restarts = 0;
  let at = 0;
  for (const r of runs) {
    const own = steps.slice(at, at + r.stamps.length);
    const l = late.slice(at, at + r.stamps.length);
    at += r.stamps.length;
    slackMs += (l[0]! + l[l.length - 1]!) * X;
    for (let i = 1; i < own.length; i++) {
      const gap = own[i]!.startMs - own[i - 1]!.endMs;
      if (gap <= 1e-9) continue;
      assert.ok(gap > CATCH_UP_MS, `chain restarted ${gap} ms after its deadline, inside the catch-up window`);
      slackMs += gap * X;
      restarts++;
    }
  }
  const bound = 0.001 * itlTruth + slackMs / gaps.length;
  t.diagnostic(
    `ITL ${itl.toFixed(3)} ms vs steps ${itlTruth.toFixed(3)} ms; measured lateness allows ±${(slackMs / gaps.length).toFixed(4)} ms (${restarts} restarts), token lateness max ${Math.max(...late).toFixed(3)} ms wall`,
  );
  assert.ok(Math.abs(itl - itlTruth) <= bound, `server ITL ${itl} ms vs simulated step ${itlTruth} ms (± ${bound})`);

  // TTFT: exactly the engine's stamps (first token − arrival) in simulated ms; at least frontend + prefill step
  // (timers only fire late), and above that by no more than the scheduling delay and lateness the engine stamped.
  const ttftStamps = runs.map((r) => (r.req.firstTokenAt - r.req.arrival) * k);
  assert.ok(Math.abs(metrics.ttft.sum / sum(ttftStamps) - 1) < 1e-9, `TTFT sum ${metrics.ttft.sum}`);
  const ttftTruth = profile.cost.frontendMs + prefill.reduce((a, s) => a + simMs(s), 0) / prefill.length;
  const ttft = (1000 * metrics.ttft.sum) / metrics.ttft.count;
  const delay =
    sum(runs.map((r, i) => prefill[i]!.startMs - r.req.arrival - profile.cost.frontendMs / X + late[i * TOKENS]!)) *
    (X / runs.length);
  assert.ok(
    ttft >= ttftTruth * (1 - 1e-9) && ttft <= ttftTruth + delay + 1e-6 * ttftTruth,
    `server TTFT ${ttft} ms vs ${ttftTruth} ms + measured delay ${delay} ms`,
  );
  // TPOT = decode time / (n − 1) per request, and E2E = TTFT + decode, all in the same time base.
  const tpot = (1000 * metrics.tpot.sum) / metrics.tpot.count;
  assert.ok(Math.abs(tpot / itl - 1) < 1e-9, `TPOT ${tpot} vs ITL ${itl}`);
  const e2e = (1000 * metrics.e2e.sum) / 2;
  assert.ok(Math.abs(e2e - (ttft + (TOKENS - 1) * itl)) < 1e-6 * e2e, `E2E ${e2e}`);
  assert.ok(Math.abs((1000 * metrics.decode.sum) / 2 - (TOKENS - 1) * itl) < 1e-6 * e2e);
  // The exposition says which time base it is in.
  const text = metrics.render(false);
  assert.match(text, /^# TYPE inferscope_sim_time_scale gauge$/m);
  assert.equal(sample(text, "inferscope_sim_time_scale"), X);
  assert.ok(
    Math.abs(sample(text, "vllm:inter_token_latency_seconds_sum") - metrics.itl.sum) < 1e-9,
    "the rendered _sum is the simulated one",
  );
  // The buckets hold the same simulated gaps: each bucket's count is the stamps' count at or below its bound (in
  // wall time the ≈ 2 ms gaps would all sit under 0.01). The profile's ≈ 21 ms step is in vLLM's (0.01, 0.025]
  // bucket, as on the real deployment (seed scenario).
  assert.ok(itlTruth / 1000 > 0.01 && itlTruth / 1000 <= 0.025);
  for (const le of ["0.01", "0.025", "0.05"])
    assert.equal(
      sample(text, "vllm:inter_token_latency_seconds_bucket", `le="${le}"`),
      gaps.filter((g) => g <= Number(le)).length,
      `bucket le=${le}`,
    );
  const om = metrics.render(true);
  assert.match(om, /^inferscope_sim_time_scale 10\.0$/m);
});

test("time-scale 1 and --speed zero export a time scale of 1 (wall time is the only time)", async () => {
  for (const [x, zero] of [
    [1, false],
    [10, true],
  ] as const) {
    const { engine, metrics } = setup(x, zero);
    await one(engine, 1, 4);
    assert.equal(metrics.timeScale, 1);
    assert.equal(sample(metrics.render(false), "inferscope_sim_time_scale"), 1);
  }
});
