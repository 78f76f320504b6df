// The binding-limit diagnosis (pure): each limit from its own evidence, and "unknown" naming what would decide it.
import assert from "node:assert/strict";
import { test } from "node:test";
import { clipToWindow } from "../../src/experiment/sweep-run.ts";
import {
  batchCeilingFromCommand,
  diagnoseLevel,
  diagnoseSweep,
  type LevelEvidence,
  readServerSample,
  type ServerSample,
  summarizeServerSamples,
  tokenBudgetFromCommand,
} from "../../src/load/diagnose.ts";
import { parseExposition } from "../../src/metrics/parse.ts";

/** 20 samples 100 ms apart from per-index functions. */
function series(f: (i: number) => Partial<ServerSample>): ServerSample[] {
  return Array.from({ length: 20 }, (_, i) => ({
    tMs: 1000 + i * 100,
    running: null,
    waiting: null,
    kvUsage: null,
    preemptions: null,
    ...f(i),
  }));
}

function level(samples: ServerSample[], extra: Partial<LevelEvidence> = {}): LevelEvidence {
  return {
    level: 10,
    mode: "rate",
    engine: "vllm",
    samples,
    requestThroughput: 9.5,
    achievedRatio: 0.95,
    client: { saturated: false, eldP99Ms: 1.2 },
    powerCappedShare: null,
    ...extra,
  };
}

test("reads running, waiting, KV usage and preemptions through the engine's concepts (vLLM and llama.cpp)", () => {
  const vllm = parseExposition(
    [
      "# TYPE vllm:num_requests_running gauge",
      'vllm:num_requests_running{engine="0"} 5',
      'vllm:num_requests_running{engine="1"} 3',
      "# TYPE vllm:num_requests_waiting gauge",
      "vllm:num_requests_waiting 2",
      "# TYPE vllm:kv_cache_usage_perc gauge",
      "vllm:kv_cache_usage_perc 0.75",
      "# TYPE vllm:num_preemptions counter",
      "vllm:num_preemptions_total 7",
      "# TYPE vllm:iteration_tokens_total histogram",
      'vllm:iteration_tokens_total_bucket{le="+Inf"} 40',
      "vllm:iteration_tokens_total_sum 1200",
      "vllm:iteration_tokens_total_count 40",
      "# TYPE vllm:generation_tokens counter",
      "vllm:generation_tokens_total 100",
      "",
    ].join("\n"),
  );
  const r = readServerSample(vllm, 42);
  assert.equal(r.engine, "vllm");
  assert.deepEqual(r.sample, {
    tMs: 42,
    running: 8,
    waiting: 2,
    kvUsage: 0.75,
    preemptions: 7,
    stepTokens: 1200,
    steps: 40,
  });
  const llama = parseExposition(
    [
      "# TYPE llamacpp:requests_processing gauge",
      "llamacpp:requests_processing 4",
      "# TYPE llamacpp:requests_deferred gauge",
      "llamacpp:requests_deferred 6",
      "# TYPE llamacpp:prompt_tokens_total counter",
      "llamacpp:prompt_tokens_total 10",
      "# TYPE llamacpp:tokens_predicted_total counter",
      "llamacpp:tokens_predicted_total 10",
      "",
    ].join("\n"),
  );
  const l = readServerSample(llama, 1);
  assert.equal(l.engine, "llamacpp");
  assert.deepEqual(l.sample, { tMs: 1, running: 4, waiting: 6, kvUsage: null, preemptions: null });
});

test("max-num-seqs: the batch pinned at its ceiling with a growing queue, KV not full", () => {
  const s = series((i) => ({ running: i < 2 ? 4 : 8, waiting: i, kvUsage: 0.3, preemptions: 0 }));
  const d = diagnoseLevel(level(s), { value: 8, source: "given" });
  assert.deepEqual(
    d.binding.map((b) => b.limit),
    ["max-num-seqs"],
  );
  assert.match(
    d.binding[0]!.evidence,
    /running pinned at 8 in 95 % of the samples with a queue, waiting grows 10 req\/s at 10 req\/s/,
  );
  assert.ok(d.binding[0]!.knobs.includes("--max-num-seqs (raise)"));
  assert.equal(d.saturated, true);
  assert.equal(d.unknown, null);
  assert.equal(d.server.waiting!.growthPerS, 10);
});

test("KV capacity: usage near 1 with preemptions, the batch well below its ceiling", () => {
  const s = series((i) => ({ running: 12, waiting: 3, kvUsage: 0.97, preemptions: 2 * i }));
  const d = diagnoseLevel(level(s), { value: 256, source: "given" });
  assert.deepEqual(
    d.binding.map((b) => b.limit),
    ["kv-capacity"],
  );
  // 38 preemptions over 1.9 s.
  assert.match(
    d.binding[0]!.evidence,
    /KV capacity: usage 0\.97 \(p90\), 20 preemptions\/s at 10 req\/s, 3\.0 waiting/,
  );
  assert.ok(d.binding[0]!.knobs.includes("--kv-cache-dtype fp8"));
  // Full and preempting, but no queue and no lag: nothing binds yet.
  const calm = diagnoseLevel(level(series((i) => ({ running: 12, waiting: 0, kvUsage: 0.95, preemptions: i }))), {
    value: 256,
    source: "given",
  });
  assert.deepEqual(calm.binding, []);
  assert.equal(calm.saturated, false);
});

test("both bind: the batch pinned and the KV cache preempting", () => {
  const s = series((i) => ({ running: 8, waiting: 5, kvUsage: 0.99, preemptions: i }));
  const d = diagnoseLevel(level(s), { value: 8, source: "given" });
  assert.deepEqual(d.binding.map((b) => b.limit).sort(), ["kv-capacity", "max-num-seqs"]);
});

test("client and power bind from the self-check and telemetry", () => {
  const s = series(() => ({ running: 2, waiting: 0, kvUsage: 0.1, preemptions: 0 }));
  const d = diagnoseLevel(
    level(s, { client: { saturated: true, eldP99Ms: 9, reason: "event loop busy" }, powerCappedShare: 0.82 }),
    null,
  );
  assert.deepEqual(
    d.binding.map((b) => [b.limit, b.evidence]),
    [
      ["client", "the client: event loop busy"],
      ["power", "power: capped 82 % of the window"],
    ],
  );
});

test("unknown names the metric that would decide it", () => {
  const none = diagnoseLevel(level([], { achievedRatio: 0.6 }), null);
  assert.equal(none.saturated, true);
  assert.deepEqual(none.binding, []);
  assert.match(none.unknown!, /no server metrics were sampled: .*vllm:num_requests_running/);
  // A queue the batch ceiling and the KV cache do not explain: step time would decide it.
  const q = diagnoseLevel(level(series(() => ({ running: 20, waiting: 4, kvUsage: 0.4, preemptions: 0 }))), {
    value: 256,
    source: "given",
  });
  assert.match(q.unknown!, /4\.0 waiting.*running p90 20 of 256.*KV usage 0\.40.*step-time histogram/);
  // Not saturated: nothing binds, nothing is unknown.
  const ok = diagnoseLevel(level(series(() => ({ running: 3, waiting: 0, kvUsage: 0.1, preemptions: 0 }))), null);
  assert.deepEqual([ok.saturated, ok.binding, ok.unknown], [false, [], null]);
});

test("a sweep's knee: the lowest level that binds, its onset the rate completed there; an observed ceiling", () => {
  const mk = (lvl: number, running: number, waiting: number, thr: number) =>
    level(
      series(() => ({ running, waiting, kvUsage: 0.2, preemptions: 0 })),
      { level: lvl, requestThroughput: thr },
    );
  const d = diagnoseSweep([mk(40, 16, 30, 31), mk(10, 9, 0, 10), mk(20, 16, 6, 30.5)]);
  assert.deepEqual(
    d.levels.map((l) => [l.level, l.binding.map((b) => b.limit)]),
    [
      [10, []],
      [20, ["max-num-seqs"]],
      [40, ["max-num-seqs"]],
    ],
  );
  assert.equal(d.levels[1]!.server.ceilingSource, "observed");
  assert.match(d.levels[1]!.binding[0]!.evidence, /the sweep's highest/);
  assert.deepEqual(d.knee && { level: d.knee.level, limits: d.knee.limits, onset: d.knee.onsetRate }, {
    level: 20,
    limits: ["max-num-seqs"],
    onset: 30.5,
  });
  // The client's limit is named at its level but is not the server's knee.
  const c = diagnoseSweep([
    { ...mk(10, 9, 0, 10), client: { saturated: true, eldP99Ms: 12, reason: "event-loop delay p99 12 ms" } },
    mk(20, 16, 6, 30.5),
  ]);
  assert.deepEqual(
    c.levels[0]!.binding.map((b) => b.limit),
    ["client"],
  );
  assert.equal(c.knee?.level, 20);
  // A given ceiling the batch never reaches: no max-num-seqs.
  assert.equal(diagnoseSweep([mk(20, 16, 6, 30)], { maxNumSeqs: 64 }).knee, null);
});

test("summaries: preemptions per second over the counter's own span; spans and spreads", () => {
  const s = summarizeServerSamples(
    series((i) => ({ running: i, preemptions: i < 10 ? null : 3 * i })),
    null,
  );
  assert.equal(s.samples, 20);
  assert.ok(Math.abs(s.spanS - 1.9) < 1e-9);
  assert.ok(Math.abs(s.preemptionsPerS! - 30) < 1e-9);
  assert.equal(s.running!.max, 19);
  assert.equal(s.waiting, null);
  assert.equal(s.pinnedShare, null);
});

test("token budget: steps filled to --max-num-batched-tokens while requests wait, the batch below its ceiling", () => {
  // 40 steps per 100 ms sample, 250 tokens each of a 256 budget.
  const s = series((i) => ({
    running: 6,
    waiting: 5,
    kvUsage: 0.2,
    preemptions: 0,
    stepTokens: 10_000 * i,
    steps: 40 * i,
  }));
  const d = diagnoseLevel(level(s), { value: 256, source: "given" }, 256);
  assert.deepEqual(
    d.binding.map((b) => b.limit),
    ["token-budget"],
  );
  assert.match(
    d.binding[0]!.evidence,
    /250 tokens per step \(step-tokens histogram\) against a budget of 256, 5\.0 waiting, running mean 6\.0/,
  );
  assert.ok(d.binding[0]!.knobs[0]!.startsWith("--max-num-batched-tokens"));
  // Without the budget it is unknown, and says which flag would decide it.
  const u = diagnoseLevel(level(s), { value: 256, source: "given" }, null);
  assert.deepEqual(u.binding, []);
  assert.match(u.unknown!, /250 tokens per step \(the token budget, --max-num-batched-tokens, was not given\)/);
  // A plateau only observed (no ceiling given) is the budget's, not max-num-seqs.
  const obs = diagnoseLevel(level(s), { value: 6, source: "observed" }, 256);
  assert.deepEqual(
    obs.binding.map((b) => b.limit),
    ["token-budget"],
  );
  // Half-full steps do not bind.
  const half = series((i) => ({
    running: 6,
    waiting: 5,
    kvUsage: 0.2,
    preemptions: 0,
    stepTokens: 5_000 * i,
    steps: 40 * i,
  }));
  assert.deepEqual(diagnoseLevel(level(half), { value: 256, source: "given" }, 256).binding, []);
});

test("ceilings and budgets from a server command: the last flag wins, = or space", () => {
  assert.equal(batchCeilingFromCommand("vllm serve m --max-num-seqs 64 --max-num-seqs=128"), 128);
  assert.equal(batchCeilingFromCommand("llama-server -m x.gguf -np 4 -c 8192"), 4);
  assert.equal(batchCeilingFromCommand("vllm serve m --max-num-seqs-x 3"), null);
  assert.equal(tokenBudgetFromCommand("vllm serve m --max-num-batched-tokens=2048"), 2048);
  assert.equal(tokenBudgetFromCommand("llama-server -b 512"), 512);
  assert.equal(tokenBudgetFromCommand(null), null);
});

test("a level's samples are clipped to its measured window; a window shorter than two scrapes keeps its neighbours", () => {
  const at = (tMs: number, running: number) => ({ tMs, running, waiting: 0, kvUsage: null, preemptions: null });
  // Idle scrapes during warm-up (0–200) and after the last request (900–1000) are left out.
  const ss = [at(0, 0), at(100, 0), at(200, 2), at(500, 2), at(800, 2), at(900, 0), at(1000, 0)];
  assert.deepEqual(
    clipToWindow(ss, { startMs: 150, endMs: 850 }).map((s) => s.tMs),
    [200, 500, 800],
  );
  assert.deepEqual(
    clipToWindow(ss, { startMs: 450, endMs: 550 }).map((s) => s.tMs),
    [200, 500, 800],
  );
  assert.equal(clipToWindow(ss, null).length, ss.length);
});

test("closed loop, more users than a given ceiling, batch at it, waiting gauge blind: max-num-seqs from the client's count", () => {
  // llama.cpp with its default HTTP pool: requests beyond it wait in the accept queue, deferred reads 0.
  const s = series((i) => ({ running: i % 5 === 0 ? 3 : 4, waiting: 0 }));
  const conc = (users: number) =>
    level(s, { level: users, mode: "concurrency", engine: "llamacpp", achievedRatio: null });
  const d = diagnoseLevel(conc(8), { value: 4, source: "given" });
  assert.deepEqual(
    d.binding.map((b) => b.limit),
    ["max-num-seqs"],
  );
  assert.match(
    d.binding[0]!.evidence,
    /^max-num-seqs: running pinned at 4 in 100 % of the samples with 8\.0 users, 4\.0 beyond it waiting; the waiting gauge reads mean 0\.00 .*--threads-http/,
  );
  assert.ok(d.binding[0]!.knobs.some((k) => k.startsWith("--parallel")));
  assert.equal(d.saturated, true);
  // As many users as slots: nobody waits. An observed ceiling or an open loop: the users' count proves nothing.
  assert.deepEqual(diagnoseLevel(conc(4), { value: 4, source: "given" }).binding, []);
  assert.deepEqual(diagnoseLevel(conc(8), { value: 4, source: "observed" }).binding, []);
  assert.deepEqual(diagnoseLevel(level(s, { level: 8, achievedRatio: 1 }), { value: 4, source: "given" }).binding, []);
  // The batch mostly below the ceiling (a client that cannot keep its users busy): nothing named.
  const low = series((i) => ({ running: i % 3 ? 2 : 4, waiting: 0 }));
  const l = level(low, { level: 8, mode: "concurrency", engine: "llamacpp", achievedRatio: null });
  assert.deepEqual(diagnoseLevel(l, { value: 4, source: "given" }).binding, []);
});

test("compute and host: a lagging rate with nothing held back at admission, read from step time against batch and GPU busy", () => {
  // Lowest level: 2 running, a 10 ms step. Top level: 20 running, the rate lagging, a 20.8 ms step.
  const low = (extra: Partial<LevelEvidence>) =>
    level(
      series(() => ({ running: 2, waiting: 0, kvUsage: 0.05, preemptions: 0 })),
      { level: 5, stepMs: 10, achievedRatio: 1, ...extra },
    );
  const high = (extra: Partial<LevelEvidence>) =>
    level(
      series(() => ({ running: 20, waiting: 0, kvUsage: 0.3, preemptions: 0 })),
      { level: 40, stepMs: 20.8, achievedRatio: 0.7, ...extra },
    );
  const limits = (d: ReturnType<typeof diagnoseSweep>) => d.levels.map((l) => l.binding.map((b) => b.limit));
  const compute = diagnoseSweep([low({ gpuBusy: 0.5 }), high({ gpuBusy: 0.96 })], { maxNumSeqs: 256 });
  assert.deepEqual(limits(compute), [[], ["compute"]]);
  assert.equal(
    compute.levels[1]!.binding[0]!.evidence,
    "compute: step time grows 0.60 ms per sequence past B = 2.0 (step time 10 ms at B = 2.0 → 21 ms at B = 20), GPU busy 96 % at 40 req/s",
  );
  assert.match(
    compute.levels[1]!.binding[0]!.knobs.join(";"),
    /--tensor-parallel-size.*--quantization fp8.*speculative/,
  );
  assert.deepEqual(compute.knee?.limits, ["compute"]);
  assert.deepEqual(compute.levels[1]!.stepTrend, {
    baseBatch: 2,
    baseStepMs: 10,
    batch: 20,
    stepMs: 20.8,
    growth: 20.8 / 10 - 1,
    msPerSeq: (20.8 - 10) / 18,
  });

  const host = diagnoseSweep([low({ gpuBusy: 0.5 }), high({ gpuBusy: 0.41 })], { maxNumSeqs: 256 });
  assert.deepEqual(limits(host), [[], ["host"]]);
  assert.match(
    host.levels[1]!.binding[0]!.evidence,
    /^host: step time grows 0\.60 ms per sequence .* and GPU busy 41 %/,
  );
  assert.match(host.levels[1]!.binding[0]!.knobs.join(";"), /--async-scheduling.*CUDA graphs.*--api-server-count/);
  // A flat step with the GPU mostly idle is the host's too.
  const flat = diagnoseSweep([low({}), high({ stepMs: 10.5, gpuBusy: 0.41 })], { maxNumSeqs: 256 });
  assert.match(flat.levels[1]!.binding[0]!.evidence, /^host: step time flat in B .* and GPU busy 41 %/);
  // A grown step with the GPU busy but a flat one is not compute's: nothing decides, so unknown says what would.
  const busyFlat = diagnoseSweep([low({}), high({ stepMs: 10.5, gpuBusy: 0.95 })], { maxNumSeqs: 256 });
  assert.deepEqual(limits(busyFlat), [[], []]);
  // Without telemetry: compute or host, and GPU busy would decide.
  const blind = diagnoseSweep([low({}), high({})], { maxNumSeqs: 256 });
  assert.deepEqual(limits(blind), [[], []]);
  assert.match(
    blind.levels[1]!.unknown!,
    /^compute or host: step time grows 0\.60 ms per sequence .*GPU busy would decide/,
  );
  // A batch limit at admission is the limit: the step's growth is not named beside it.
  const pinned = diagnoseSweep(
    [
      low({ gpuBusy: 0.5 }),
      level(
        series(() => ({ running: 20, waiting: 6, kvUsage: 0.3, preemptions: 0 })),
        { level: 40, stepMs: 20.8, achievedRatio: 0.7, gpuBusy: 0.96 },
      ),
    ],
    { maxNumSeqs: 20 },
  );
  assert.deepEqual(limits(pinned), [[], ["max-num-seqs"]]);
  // A client that lags its own schedule, the server keeping up: nothing of the server's is named.
  const client = diagnoseSweep(
    [low({}), high({ achievedRatio: 1, gpuBusy: 0.3, client: { saturated: true, eldP99Ms: 40 } })],
    { maxNumSeqs: 256 },
  );
  assert.deepEqual(limits(client), [[], ["client"]]);
});

test("step time from the engine's step-time histogram where exported (vLLM V0's, in ms), over the client's TPOT", () => {
  const exp = parseExposition(
    [
      "# TYPE vllm:num_requests_running gauge",
      "vllm:num_requests_running 4",
      "# TYPE vllm:num_requests_waiting gauge",
      "vllm:num_requests_waiting 0",
      "# TYPE vllm:model_execute_time_milliseconds histogram",
      'vllm:model_execute_time_milliseconds_bucket{le="+Inf"} 50',
      "vllm:model_execute_time_milliseconds_sum 400",
      "vllm:model_execute_time_milliseconds_count 50",
    ].join("\n"),
  );
  const { sample } = readServerSample(exp, 0);
  assert.deepEqual([sample.stepSeconds, sample.stepTimeCount], [0.4, 50]);
  // 10 steps of 8 ms, then of 20 ms: the histogram's deltas over each level, not the client's TPOT.
  const timed = (running: number, stepMs: number) =>
    series((i) => ({
      running,
      waiting: 0,
      kvUsage: 0.1,
      preemptions: 0,
      stepSeconds: (i * 10 * stepMs) / 1000,
      stepTimeCount: i * 10,
    }));
  const d = diagnoseSweep(
    [
      level(timed(2, 8), { level: 5, stepMs: 30, achievedRatio: 1 }),
      level(timed(20, 20), { level: 40, stepMs: 30, achievedRatio: 0.7, gpuBusy: 0.95 }),
    ],
    { maxNumSeqs: 256 },
  );
  assert.equal(d.levels[0]!.server.stepTimeMeanMs, 8);
  assert.ok(Math.abs(d.levels[1]!.stepTrend!.stepMs - 20) < 1e-9);
  assert.deepEqual(
    d.levels.map((l) => l.binding.map((b) => b.limit)),
    [[], ["compute"]],
  );
});
