// Correctness against the real simulator process over 127.0.0.1, compared with its hidden truth.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { formatConsole } from "../../src/load/console.ts";
import { runBench } from "../../src/load/runner.ts";
import { type SimProcess, spawnSimProcess } from "../../src/load/selftest.ts";
import { chunkItls, chunkTokens, tokenItls } from "../../src/load/summarize.ts";
import { runSweep } from "../../src/load/sweep.ts";
import { resolveSim } from "../../src/sim/index.ts";
import { decodeBatch, prefillBatch } from "../../src/sim/timing.ts";

const SCALE = 2;

describe("batch-1 timing against the sim's truth", { timeout: 120_000 }, () => {
  let sim: SimProcess;
  before(async () => {
    sim = await spawnSimProcess(["--time-scale", String(SCALE)]);
  });
  after(() => sim?.stop());

  // Timing is judged against the server's own /metrics for the same requests, with bounds that grow by the noise
  // this run measured (the client's event-loop delay, the spread of send → response head), never a fixed
  // wall-clock tolerance: on a loaded host every delivery is late, but only by what those measures show.
  test("client ITL and TTFT match the server's for the same requests, within the noise the run measured", async (t) => {
    const res = await runBench({
      baseUrl: sim.url,
      concurrency: 1,
      numPrompts: 3,
      warmup: 1,
      randomInputLen: 16,
      randomOutputLen: 100,
      ignoreEos: true,
    });
    assert.equal(res.summary.completed, 3);
    const { profile, model } = resolveSim({ timeScale: SCALE });
    let gaps = 0;
    let gapSum = 0;
    let stepTruth = 0;
    let ttftTruth = 0;
    const measured = res.requests.filter((x) => !x.warmup);
    for (const r of measured) {
      assert.equal(r.outputTokens, 100);
      const P = r.promptTokens;
      // Token k + 1 comes from a decode step over a context of P + k tokens.
      for (let k = 1; k < r.outputTokens; k++) stepTruth += model.stepMs(decodeBatch(1, P + k)) / SCALE;
      for (const g of chunkItls(r)) {
        gapSum += g;
        gaps++;
      }
      ttftTruth += (profile.cost.frontendMs + model.stepMs(prefillBatch(P))) / SCALE;
      // The sim answers with its head on arrival: it reaches the client before the first token (an ordering, not
      // a timing: catches a client that stamps the head late or the first token early).
      assert.ok(r.headersMs <= r.ttftMs, `head at ${r.headersMs} ms after the first token at ${r.ttftMs} ms`);
    }
    const clientItl = gapSum / gaps;
    stepTruth /= gaps;
    ttftTruth /= measured.length;
    const clientTtft = res.summary.mean_ttft_ms as number;
    // The server's own /metrics for the same window: what it actually did, even on a loaded machine.
    const sv = res.server!;
    assert.ok(sv && sv.itl_mean_ms !== null && sv.ttft_mean_ms !== null, "server view present");
    assert.equal(sv.generation_tokens, res.summary.total_output_tokens);
    // Noise this run measured: how late the client's loop ran at worst, and how much the loopback path (send →
    // response head, both ways under the same load at the same moments) varied between requests.
    const eldMax = res.client.eventLoopDelayMs.max;
    const heads = measured.map((r) => r.headersMs);
    const headSpread = Math.max(...heads) - Math.min(...heads);
    const noise = eldMax + Math.max(...heads);
    t.diagnostic(
      `ITL client ${clientItl.toFixed(3)} server ${sv.itl_mean_ms!.toFixed(3)} profile ${stepTruth.toFixed(3)} ms; ` +
        `TTFT client mean ${clientTtft.toFixed(3)} server ${sv.ttft_mean_ms!.toFixed(3)} profile ${ttftTruth.toFixed(3)} ms; ` +
        `noise: loop delay max ${eldMax.toFixed(2)} ms, send → head ${Math.min(...heads).toFixed(3)}–${Math.max(...heads).toFixed(3)} ms`,
    );
    // ITL: a request's gaps add up to its last token's arrival − its first's, so client and server differ by how
    // much later the last token was delivered than the first: at most the worst delivery delay, twice per request.
    // (Catches gaps counted or timed on another clock — the usage trailer as a token, wall vs simulated time.)
    const itlBound = 0.005 * sv.itl_mean_ms! + (2 * noise * measured.length) / gaps;
    assert.ok(
      Math.abs(clientItl - sv.itl_mean_ms!) <= itlBound,
      `client ITL ${clientItl} vs server ${sv.itl_mean_ms} (± ${itlBound})`,
    );
    // The console says the server's rows are wall clock and gives the sim's own (simulated) ITL.
    const text = formatConsole(res);
    assert.match(text, new RegExp(`Server time scale \\(sim\\):\\s+${SCALE}x \\(times below in wall clock\\)`));
    const simItl = Number(/Server mean ITL, simulated \(ms\):\s+([\d.]+)/.exec(text)?.[1]);
    assert.ok(Math.abs(simItl - sv.itl_mean_ms! * SCALE) < 0.01 * SCALE, `console simulated ITL ${simItl}`);
    // The client cannot see a token before the server emits it.
    assert.ok(clientTtft >= sv.ttft_mean_ms! - 0.05, `client TTFT ${clientTtft} < server ${sv.ttft_mean_ms}`);
    // The sim stamps arrival when it has parsed the request's headers (its own HTTP handling overlaps the
    // profile's frontend cost), so the client's TTFT is the server's plus the loopback both ways — which the same
    // request's send → head measured. What is left is the first token's delivery delay against the head's: within
    // the client's worst loop delay and the spread of the loopback path (≈ 0.3 ms on a quiet host; a client that
    // stamps the first token late, or adds a round trip, is caught beyond that).
    const ttftLessTransit = measured.reduce((a, r) => a + r.ttftMs - r.headersMs, 0) / measured.length;
    const ttftBound = 0.25 + eldMax + headSpread;
    t.diagnostic(
      `client TTFT less send → head ${ttftLessTransit.toFixed(3)} ms vs server ${sv.ttft_mean_ms!.toFixed(3)} (± ${ttftBound.toFixed(3)})`,
    );
    assert.ok(
      Math.abs(ttftLessTransit - sv.ttft_mean_ms!) <= ttftBound,
      `client TTFT less transit ${ttftLessTransit} vs server ${sv.ttft_mean_ms} (± ${ttftBound})`,
    );
    // The server against its profile: timers only fire late, so only the step jitter (σ 2 %, a mean of three
    // here) can put it below; how much later it runs on a loaded host test/sim/metrics-scale bounds with the
    // engine's own stamps, so here that is reported, not asserted.
    assert.ok(sv.ttft_mean_ms! >= ttftTruth * 0.95, `server TTFT ${sv.ttft_mean_ms} below its profile ${ttftTruth}`);
  });
});

// One speculative-decoding simulator serves the multi-token test and the load-shape tests.
let specSim: Promise<SimProcess> | null = null;
const getSpecSim = () => {
  specSim ??= spawnSimProcess(["--time-scale", "50", "--spec-tokens", "3", "--acceptance", "0.7"]);
  return specSim;
};
after(async () => {
  if (specSim) await (await specSim).stop();
});

describe("speculative decoding: multi-token chunks", { timeout: 120_000 }, () => {
  let sim: SimProcess;
  before(async () => {
    sim = await getSpecSim();
  });

  test("pooled chunk ITL > TPOT; per-token ITL splits each gap by the chunk's tokens", async () => {
    const res = await runBench({
      baseUrl: sim.url,
      concurrency: 2,
      numPrompts: 4,
      randomInputLen: 16,
      randomOutputLen: 80,
      ignoreEos: true,
      percentiles: [50, 99],
    });
    const s = res.summary;
    assert.equal(s.completed, 4);
    assert.ok(
      (s.mean_itl_ms as number) > (s.mean_tpot_ms as number) * 1.3,
      `ITL ${s.mean_itl_ms} TPOT ${s.mean_tpot_ms}`,
    );
    assert.ok(s.inferscope.multi_token_chunks > 0);
    assert.ok(res.warnings.some((w) => /more than one token/.test(w)));
    for (const r of res.requests) {
      let sum = 0;
      let first = -1;
      let firstTok = 0;
      let last = 0;
      for (let j = 0; j < r.chunks.tMs.length; j++) {
        const k = chunkTokens(r, j);
        if (k <= 0) continue;
        sum += k;
        if (first < 0) {
          first = r.chunks.tMs[j]!;
          firstTok = k;
        }
        last = r.chunks.tMs[j]!;
      }
      assert.equal(sum, r.outputTokens, "usage deltas add up to completion_tokens");
      const t = tokenItls(r);
      assert.equal(t.length, r.outputTokens - firstTok);
      const total = t.reduce((a, b) => a + b, 0);
      assert.ok(Math.abs(total - (last - first)) < 1e-6);
    }
  });
});

describe("fault injection", { timeout: 120_000 }, () => {
  let sim: SimProcess;
  before(async () => {
    sim = await spawnSimProcess([
      "--time-scale",
      "50",
      "--faults",
      "http500:0.08,http429:0.05,disconnect:0.08,stall:0.08,malformed:0.08",
      "--seed",
      "3",
    ]);
  });
  after(() => sim?.stop());

  test("every failed request is classified and excluded; the rest are unaffected; none lost", async () => {
    const n = 80;
    const res = await runBench({
      baseUrl: sim.url,
      concurrency: 16,
      numPrompts: n,
      randomInputLen: 16,
      randomOutputLen: 24,
      ignoreEos: true,
      stallTimeoutMs: 250,
    });
    const recs = res.requests;
    assert.equal(recs.length, n, "none lost");
    assert.deepEqual(
      recs.map((r) => r.index).sort((a, b) => a - b),
      Array.from({ length: n }, (_, i) => i),
    );
    const s = res.summary;
    assert.equal(s.completed + s.failed, n);
    const seen = new Set<string>();
    for (const r of recs) {
      if (r.errorClass === null) {
        assert.equal(r.outputTokens, 24);
        assert.equal(r.finishReason, "length");
        continue;
      }
      seen.add(r.errorClass);
      assert.ok(
        ["http", "disconnect", "stall", "malformed"].includes(r.errorClass),
        `${r.errorClass}: ${r.errorMessage}`,
      );
      if (r.errorClass === "http") assert.match(r.errorMessage!, /^HTTP (500|429)/);
    }
    for (const c of ["http", "disconnect", "stall", "malformed"]) assert.ok(seen.has(c), `saw no ${c} failure`);
    // Latency distributions hold successful requests only.
    assert.equal(s.inferscope.ttft_ms.count, s.completed);
    assert.equal(s.inferscope.e2el_ms.count, s.completed);
    assert.equal(s.total_output_tokens, 24 * s.completed);
  });
});

describe("worker threads", { timeout: 120_000 }, () => {
  let sim: SimProcess;
  before(async () => {
    sim = await spawnSimProcess([
      "--time-scale",
      "50",
      "--faults",
      "http500:0.05,disconnect:0.05,malformed:0.05",
      "--seed",
      "4",
    ]);
  });
  after(() => sim?.stop());

  test("closed loop over 2 shards: every request once, in the JSONL too, faults classified, times on one clock", async () => {
    const dir = mkdtempSync(join(tmpdir(), "inferscope-shards-"));
    const path = join(dir, "recs.jsonl");
    try {
      const n = 60;
      const res = await runBench({
        baseUrl: sim.url,
        concurrency: 8,
        numPrompts: n,
        randomInputLen: 16,
        randomOutputLen: 20,
        ignoreEos: true,
        workers: 2,
        recordsPath: path,
      });
      assert.equal(res.client.workers, 2);
      assert.deepEqual(
        res.requests.map((r) => r.index).sort((a, b) => a - b),
        Array.from({ length: n }, (_, i) => i),
      );
      const lines = readFileSync(path, "utf8").trim().split("\n").slice(1);
      assert.equal(lines.length, n, "every record in the JSONL");
      const s = res.summary;
      assert.equal(s.completed + s.failed, n);
      assert.ok(s.failed > 0 && s.completed > 0);
      for (const r of res.requests) {
        if (r.errorClass === null) {
          assert.equal(r.outputTokens, 20);
          assert.equal(r.chunks.tMs.length, 21, "20 token chunks and the usage trailer");
        } else assert.ok(["http", "disconnect", "malformed"].includes(r.errorClass), r.errorClass);
        // Send times are on the run's clock: within the run, never before its start.
        assert.ok(r.sendMs >= 0 && r.sendMs <= res.summary.duration * 1000 + 1, `sendMs ${r.sendMs}`);
      }
      assert.equal(s.total_output_tokens, 20 * s.completed);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("open loop over 2 shards: the schedule is kept (each request at or after its time), cap split", async () => {
    const res = await runBench({
      baseUrl: sim.url,
      requestRate: 300,
      maxConcurrency: 4,
      numPrompts: 40,
      seed: 2,
      randomInputLen: 16,
      randomOutputLen: 10,
      ignoreEos: true,
      noServerMetrics: true,
      workers: 2,
    });
    assert.equal(res.requests.length, 40);
    const sched = res.requests.map((r) => r.scheduledMs).sort((a, b) => a - b);
    assert.ok(Math.abs(sched[sched.length - 1]! - (40 / 300) * 1000) < 1e-6, "last arrival at N/rate");
    for (const r of res.requests)
      assert.ok(r.sendMs >= r.scheduledMs - 0.01, `sent early: ${r.sendMs} < ${r.scheduledMs}`);
    assert.ok(res.summary.max_concurrent_requests <= 4);
  });

  test("a 4xx on the first request stops every shard with the server's message", async () => {
    await assert.rejects(
      runBench({ baseUrl: sim.url, model: "no-such-model", concurrency: 4, numPrompts: 20, workers: 2 }),
      (e: Error) => e.name === "TargetError" && /no-such-model/.test(e.message),
    );
  });
});

describe("open loop, cap and sweeps", { timeout: 120_000 }, () => {
  let sim: SimProcess;
  before(async () => {
    sim = await getSpecSim();
  });

  test("a rate with a cap: schedule followed, queue time recorded, in-flight never above the cap", async () => {
    const res = await runBench({
      baseUrl: sim.url,
      requestRate: 200,
      maxConcurrency: 2,
      numPrompts: 30,
      seed: 5,
      randomInputLen: 16,
      randomOutputLen: 40,
      ignoreEos: true,
      percentiles: [50, 99],
    });
    assert.equal(res.summary.completed, 30);
    assert.equal(res.setup.request_rate, 200);
    // Scheduled times are the precomputed gamma schedule: the last lands at N/rate.
    const sched = res.requests.map((r) => r.scheduledMs).sort((a, b) => a - b);
    assert.ok(Math.abs(sched[sched.length - 1]! - 150) < 1e-6);
    assert.ok(res.summary.max_concurrent_requests <= 2);
    // 200 req/s into 2 slots of ~40-token requests: requests wait for a slot.
    assert.ok(res.summary.inferscope.client_queue_ms.max > 0);
    for (const r of res.requests) assert.ok(r.sendMs >= r.createdMs && r.createdMs >= r.scheduledMs - 0.001);
  });

  test("uncapped open loop: every request sent at or after its time, in schedule order", async () => {
    const res = await runBench({
      baseUrl: sim.url,
      requestRate: 400,
      numPrompts: 40,
      seed: 9,
      randomInputLen: 16,
      randomOutputLen: 8,
      ignoreEos: true,
      noServerMetrics: true,
      percentiles: [50, 99],
    });
    assert.equal(res.summary.completed, 40);
    const byIndex = [...res.requests].sort((a, b) => a.index - b.index);
    for (let i = 0; i < byIndex.length; i++) {
      const r = byIndex[i]!;
      assert.ok(r.sendMs >= r.scheduledMs - 0.01, `request ${i} sent early: ${r.sendMs} < ${r.scheduledMs}`);
      assert.ok(r.createdMs <= r.sendMs + 1e-9);
      if (i > 0) assert.ok(r.sendMs >= byIndex[i - 1]!.sendMs, "sends follow the schedule's order");
    }
    assert.ok(res.summary.inferscope.schedule_lag_ms.percentiles.p50! >= 0);
  });

  test("an interrupt during a long arrival gap returns at once with partial results", async () => {
    const ac = new AbortController();
    const t0 = performance.now();
    setTimeout(() => ac.abort(), 300);
    const res = await runBench(
      {
        baseUrl: sim.url,
        requestRate: 0.5,
        burstiness: Number.POSITIVE_INFINITY,
        numPrompts: 5,
        randomInputLen: 16,
        randomOutputLen: 4,
        ignoreEos: true,
        noServerMetrics: true,
      },
      { signal: ac.signal, graceMs: 200 },
    );
    assert.equal(res.partial, true);
    assert.equal(res.summary.completed, 0);
    assert.ok(performance.now() - t0 < 1500, "did not wait for the next arrival (2 s away)");
  });

  test("sweep over concurrency, and auto (synchronous, throughput, rates between)", async () => {
    const base = { baseUrl: sim.url, numPrompts: 8, randomInputLen: 16, randomOutputLen: 16, ignoreEos: true };
    const s = await runSweep(base, { concurrency: [1, 4] });
    assert.deepEqual(
      s.points.map((p) => [p.kind, p.value, p.result.summary.completed]),
      [
        ["concurrency", 1, 8],
        ["concurrency", 4, 8],
      ],
    );
    assert.ok(s.points[1]!.result.summary.max_concurrent_requests > 1);
    const a = await runSweep(base, { auto: true, autoSteps: 2 });
    assert.equal(a.points[0]!.kind, "synchronous");
    assert.equal(a.points[1]!.kind, "throughput");
    assert.ok(a.points.length >= 3 || a.stoppedEarly !== null);
    const rates = a.points.filter((p) => p.kind === "rate").map((p) => p.value);
    const sync = a.points[0]!.result.summary.request_throughput;
    const max = a.points[1]!.result.summary.request_throughput;
    for (const r of rates) assert.ok(r > sync && r < max);
  });
});
