// Time slices: the same definitions as the whole run, sums that add up to it, and a two-phase run on the
// real sim whose rate change shows in the slices, checked against the server's own /metrics.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import { parseRecordsJsonl } from "../../src/load/records.ts";
import { runBench } from "../../src/load/runner.ts";
import { type SimProcess, spawnSimProcess } from "../../src/load/selftest.ts";
import { computeSlices, formatSlices } from "../../src/load/slices.ts";
import { computeMetrics } from "../../src/load/summarize.ts";

const path = new URL("./fixtures/recorded.jsonl", import.meta.url).pathname;
const recs = parseRecordsJsonl(readFileSync(path, "utf8"), path);

test("one slice over the whole run reproduces the whole-run latency statistics", () => {
  const m = computeMetrics(recs, { percentiles: [50, 99], goodput: { ttft: 60 } });
  const s = computeSlices(recs, { widthMs: 3_600_000, percentiles: [50, 99], goodput: { ttft: 60 } });
  assert.equal(s.slices.length, 1);
  const one = s.slices[0]!;
  const ins = m.summary.inferscope;
  assert.deepEqual(one.ttft_ms, ins.ttft_ms);
  assert.deepEqual(one.tpot_ms, ins.tpot_ms);
  assert.deepEqual(one.itl_ms, ins.itl_ms);
  assert.deepEqual(one.e2el_ms, ins.e2el_ms);
  assert.equal(one.completed, m.summary.completed);
  assert.equal(one.failed, m.summary.failed);
  assert.equal(one.output_tokens, m.summary.total_output_tokens);
  // Goodput counts the same requests as the run's (width = the run's span, so the rates agree too).
  assert.equal(one.good, Math.round((m.summary.request_goodput as number) * m.summary.duration));
  assert.equal(one.arrivals, recs.filter((r) => !r.warmup).length);
});

test("narrow slices add up to the run: arrivals, completions, tokens and ITL gaps", () => {
  const m = computeMetrics(recs, {});
  for (const w of [1, 7, 25, 100]) {
    const s = computeSlices(recs, { widthMs: w });
    const sum = (f: (r: (typeof s.slices)[number]) => number) => s.slices.reduce((a, r) => a + f(r), 0);
    assert.equal(
      sum((r) => r.arrivals),
      4,
      `width ${w}`,
    );
    assert.equal(
      sum((r) => r.completed),
      m.summary.completed,
    );
    assert.ok(Math.abs(sum((r) => r.output_tokens) - m.summary.total_output_tokens) < 1e-6);
    assert.equal(
      sum((r) => r.itl_ms.count),
      m.summary.inferscope.itl_ms.count,
    );
    for (const r of s.slices) assert.ok(r.width_s > 0 && r.width_s <= w / 1000 + 1e-12);
    assert.equal(s.slices[0]!.good, null);
  }
  assert.throws(() => computeSlices(recs, { widthMs: 0 }), /slice width/);
});

test("a run longer than the slice cap widens the slices and says so", () => {
  const s = computeSlices(recs, { widthMs: 0.01 });
  assert.ok(s.slices.length <= 1000);
  assert.ok(s.width_ms > 0.01);
  assert.match(s.notes[0]!, /widened/);
  assert.match(formatSlices(s), /arr\/s/);
});

describe("a two-phase run on the sim", { timeout: 90_000 }, () => {
  let sim: SimProcess;
  before(async () => {
    sim = await spawnSimProcess(["--time-scale", "10"]);
  });
  after(() => sim?.stop());

  test("the slices show the rate step; their totals equal the server's own counters", async () => {
    // 4 req/s for 3 s, then 16 req/s for 3 s: constant gaps, so each 1-s slice holds 4, then 16, scheduled sends.
    const times: number[] = [];
    for (let i = 0; i < 12; i++) times.push(i * 250);
    for (let i = 0; i < 48; i++) times.push(3000 + i * 62.5);
    const res = await runBench({
      baseUrl: sim.url,
      arrivalsMs: times,
      randomInputLen: 32,
      randomOutputLen: 24,
      ignoreEos: true,
      goodput: { ttft: 10_000 },
    });
    assert.equal(res.summary.completed, 60);
    const s = computeSlices(res.requests, { widthMs: 1000, goodput: { ttft: 10_000 } });
    const rows = s.slices;
    // The server's /metrics delta over the run counts the same requests and tokens the slices do.
    assert.ok(res.server, "the sim's /metrics were read");
    assert.equal(
      rows.reduce((a, r) => a + r.completed, 0),
      res.server.requests,
    );
    assert.ok(Math.abs(rows.reduce((a, r) => a + r.output_tokens, 0) - res.server.generation_tokens!) < 1e-6);
    // Arrivals by send time: a send late by its measured schedule lag can cross into the next slice;
    // every other request lands where the schedule put it.
    const t0 = Math.min(...res.requests.map((r) => Math.min(r.scheduledMs, r.createdMs, r.sendMs)));
    const slot = (t: number) => Math.floor((t - t0) / s.width_ms);
    for (const row of rows) {
      const planned = res.requests.filter((r) => slot(r.scheduledMs) === row.index).length;
      const crossed = res.requests.filter((r) => slot(r.scheduledMs) !== slot(r.sendMs)).length;
      assert.ok(Math.abs(row.arrivals - planned) <= crossed, `slice ${row.index}: ${row.arrivals} vs ${planned}`);
    }
    // The step shows: the second phase's slices carry about four times the arrivals and tokens of the first.
    const phase = (a: number, b: number) => rows.filter((r) => r.start_s >= a && r.end_s <= b);
    const rate = (xs: typeof rows, f: (r: (typeof rows)[number]) => number) =>
      xs.reduce((a, r) => a + f(r), 0) / xs.reduce((a, r) => a + r.width_s, 0);
    const p1 = phase(0, 3);
    const p2 = phase(3, 6);
    assert.ok(p1.length >= 2 && p2.length >= 2, `slices ${JSON.stringify(rows.map((r) => [r.start_s, r.end_s]))}`);
    const ratio = rate(p2, (r) => r.arrival_rate * r.width_s) / rate(p1, (r) => r.arrival_rate * r.width_s);
    assert.ok(ratio > 3 && ratio < 5.4, `arrival ratio ${ratio}`);
    const tokRatio = rate(p2, (r) => r.output_tokens) / rate(p1, (r) => r.output_tokens);
    assert.ok(tokRatio > 2, `token ratio ${tokRatio}`);
    // Latencies are per slice, with the run's definitions.
    for (const r of [...p1, ...p2]) assert.ok(r.ttft_ms.count > 0 && r.good !== null && r.good_fraction !== null);
  });
});

test("the study's slices are in the deployment's clock: times × the sim's scale, rates ÷ it", async () => {
  const { latencySlices } = await import("../../src/study/assemble.ts");
  const s = computeSlices(recs, { widthMs: 50, percentiles: [50] });
  const one = latencySlices(s, 1);
  const ten = latencySlices(s, 10);
  assert.equal(ten.widthS, one.widthS * 10);
  for (let i = 0; i < one.rows.length; i++) {
    const a = one.rows[i]!;
    const b = ten.rows[i]!;
    assert.ok(Math.abs(b.t - a.t * 10) < 1e-9 && Math.abs(b.outputTokensPerS * 10 - a.outputTokensPerS) < 1e-9);
    assert.equal(a.ttftP50Ms === undefined, s.slices[i]!.ttft_ms.count === 0);
  }
});
