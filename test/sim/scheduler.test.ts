import assert from "node:assert/strict";
import { performance } from "node:perf_hooks";
import { test } from "node:test";
import { Engine, SimRequest, type StepRecord } from "../../src/sim/engine.ts";
import { SimMetrics } from "../../src/sim/exposition.ts";
import { decodeBatch, loadProfile, StepModel } from "../../src/sim/index.ts";
import { tokenize } from "../../src/sim/text.ts";
import { MAX_TIMER_MS } from "../../src/sleep.ts";

function setup(
  overrides: Record<string, unknown>,
  opts: { speedZero?: boolean; timeScale?: number; knobs?: object; profile?: string } = {},
) {
  const profile = loadProfile(opts.profile ?? "llama3-8b-1xh100", overrides);
  const model = new StepModel(profile, opts.knobs ?? {});
  const metrics = new SimMetrics({
    modelName: "m",
    maxModelLen: profile.model.maxModelLen,
    blockSize: profile.engine.blockSize,
    numGpuBlocks: profile.engine.numGpuBlocks,
    prefixCaching: profile.engine.enablePrefixCaching,
    specTokens: model.config.specTokens,
    faultKinds: [],
    nowUnixS: 0,
  });
  const steps: StepRecord[] = [];
  const engine = new Engine({
    model,
    metrics,
    clock: () => performance.now(),
    timeScale: opts.timeScale ?? 1,
    speedZero: opts.speedZero ?? true,
    seed: 3,
    maxNumSeqs: profile.engine.maxNumSeqs,
    maxNumBatchedTokens: profile.engine.maxNumBatchedTokens,
    acceptance: 0.5,
    onStep: (r) => steps.push(r),
  });
  return { engine, metrics, steps, model };
}

/** Submits requests and resolves with each one's output event times when all finish. */
function run(engine: Engine, reqs: Array<{ prompt: string | Uint32Array; maxTokens: number }>) {
  return Promise.all(
    reqs.map(
      (r, i) =>
        new Promise<{ times: number[]; counts: number[]; req: SimRequest }>((resolve) => {
          const times: number[] = [];
          const counts: number[] = [];
          const req = new SimRequest({
            id: i,
            promptIds: typeof r.prompt === "string" ? tokenize(r.prompt) : r.prompt,
            maxTokens: r.maxTokens,
            ignoreEos: true,
            seed: i,
            sink: {
              onTokens(_q, _from, count, finish) {
                times.push(performance.now());
                counts.push(count);
                if (finish) resolve({ times, counts, req });
              },
            },
          });
          engine.submit(req);
        }),
    ),
  );
}

test("continuous batching respects max-num-seqs and requests join and leave between steps", async () => {
  const { engine, metrics, steps } = setup({ "engine.maxNumSeqs": 4 });
  const out = await run(
    engine,
    Array.from({ length: 10 }, (_, i) => ({ prompt: `request number ${i} says hello`, maxTokens: 5 + i })),
  );
  assert.equal(out.length, 10);
  for (const s of steps) assert.ok(s.shape.decodeSeqs + s.shape.prefillSeqs <= 4, JSON.stringify(s.shape));
  assert.ok(
    steps.some((s) => s.shape.decodeSeqs > 0 && s.shape.prefillSeqs > 0),
    "a step mixes prefill and decode",
  );
  assert.equal(metrics.success.length, 10);
  const served = out.reduce((a, o) => a + o.req.generated, 0);
  assert.equal(served, 10 * 5 + 45);
  assert.equal(metrics.generationTokens, served);
  assert.equal(metrics.ttft.count, 10);
  assert.equal(metrics.itl.count, served - 10);
  // One iteration-tokens observation per step with output; every step here has output.
  assert.equal(metrics.iterationTokens.count, steps.length);
  assert.equal(metrics.iterationTokens.sum, served + out.reduce((a, o) => a + o.req.promptLen, 0));
  assert.equal(metrics.running, 0);
});

test("chunked prefill splits a long prompt by max-num-batched-tokens; the first token comes after the last chunk", async () => {
  const { engine, metrics, steps } = setup({ "engine.maxNumBatchedTokens": 32 });
  const ids = new Uint32Array(100).map((_, i) => i + 1);
  const [o] = await run(engine, [{ prompt: ids, maxTokens: 3 }]);
  assert.deepEqual(
    steps.slice(0, 4).map((s) => s.shape.prefillTokens),
    [32, 32, 32, 4],
  );
  assert.equal(steps.length, 4 + 2);
  assert.equal(o!.times.length, 3);
  // Intermediate chunks emit nothing, so they add no iteration-tokens observation.
  assert.equal(metrics.iterationTokens.count, 3);
  assert.equal(metrics.promptTokens, 100);
});

test("prefix cache: a repeated prompt hits its full blocks", async () => {
  const { engine, metrics, steps } = setup({});
  const ids = new Uint32Array(200).map((_, i) => i * 7 + 1);
  await run(engine, [{ prompt: ids, maxTokens: 2 }]);
  const before = steps.length;
  await run(engine, [{ prompt: ids, maxTokens: 2 }]);
  assert.equal(metrics.prefixQueries, 400);
  assert.equal(metrics.prefixHits, 192); // floor(199 / 16) blocks of 16
  assert.equal(steps[before]!.shape.prefillTokens, 8);
});

test("KV exhaustion preempts the newest request, which recomputes and still finishes", async () => {
  const { engine, metrics } = setup({ "engine.numGpuBlocks": 12, "engine.enablePrefixCaching": false });
  const out = await run(
    engine,
    Array.from({ length: 3 }, (_, i) => ({ prompt: new Uint32Array(40).fill(i + 1), maxTokens: 40 })),
  );
  assert.ok(metrics.preemptions > 0, "preempted");
  for (const o of out) assert.equal(o.req.generated, 40);
  assert.equal(metrics.success.length, 3);
});

test("speculative decoding emits multi-token outputs and counts drafts", async () => {
  const { engine, metrics } = setup({}, { knobs: { specTokens: 3 } });
  const [o] = await run(engine, [{ prompt: "spec test", maxTokens: 200 }]);
  assert.equal(o!.req.generated, 200);
  assert.ok(o!.counts.some((c) => c > 1));
  assert.ok(Math.max(...o!.counts) <= 4);
  assert.equal(metrics.specDraftTokens, 3 * metrics.specDrafts);
  assert.equal(metrics.generationTokens, 200);
  // Acceptance 0.5: mean accepted per draft = 0.5 + 0.25 + 0.125 = 0.875.
  const mean = metrics.specAccepted / metrics.specDrafts;
  assert.ok(mean > 0.6 && mean < 1.15, `mean accepted ${mean}`);
});

test("the engine clock keeps the model's step time at batch 1 (time-scale 5)", async () => {
  const { engine, model } = setup({}, { speedZero: false, timeScale: 5, profile: "glm5-8x-rtxpro6000-pcie" });
  // Two sequential requests; mean inter-token gap = Σ spans / Σ gaps, which does not depend on how
  // late any timer fired in between (the step chain catches up), only on the endpoints.
  let span = 0;
  let gaps = 0;
  for (let i = 0; i < 2; i++) {
    const [o] = await run(engine, [{ prompt: `timing test ${i}`, maxTokens: 400 }]);
    const t = o!.times;
    span += t[t.length - 1]! - t[1]!;
    gaps += t.length - 2;
  }
  const mean = span / gaps;
  const truth = model.stepMs(decodeBatch(1, 200)) / 5;
  assert.ok(Math.abs(mean / truth - 1) < 0.02, `mean ${mean} vs truth ${truth}`);
});

test("a step longer than Node's timer limit is waited for in chunks, not re-armed every 1 ms (issue 42)", async () => {
  // At 1e-10 of real time a request's first wait lasts months: the engine must not ask for a timer past
  // 2^31 − 1 ms (Node sets that to 1 ms and warns, and the engine re-armed it in a loop). startSim refuses such
  // a scale (MIN_TIME_SCALE); the engine is bounded on its own.
  const { engine } = setup({}, { speedZero: false, timeScale: 1e-10 });
  const real = globalThis.setTimeout;
  const delays: number[] = [];
  let seen!: () => void;
  const armed = new Promise<void>((r) => {
    seen = r;
  });
  globalThis.setTimeout = ((cb: () => void, ms?: number) => {
    delays.push(ms ?? 0);
    seen();
    // Unref'd: a month-long timer must not hold the test process.
    return real(cb, Math.min(ms ?? 0, MAX_TIMER_MS)).unref();
  }) as typeof setTimeout;
  try {
    engine.submit(
      new SimRequest({
        id: 0,
        promptIds: tokenize("a long wait"),
        maxTokens: 2,
        ignoreEos: true,
        seed: 0,
        sink: { onTokens() {} },
      }),
    );
    await armed;
  } finally {
    globalThis.setTimeout = real;
    engine.close();
  }
  assert.deepEqual(delays, [MAX_TIMER_MS]);
});
