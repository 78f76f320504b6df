// Worker-thread helpers: how many shards `--workers auto` picks, and merging their loop-delay histograms.
import assert from "node:assert/strict";
import { createHistogram } from "node:perf_hooks";
import { test } from "node:test";
import { autoWorkers, autoWorkersChoice, eldPoints, mergeEld, type ShardEld } from "../../src/load/shard.ts";

test("--workers auto: one per 256 streams, within the cores, one core left to a server on loopback", () => {
  assert.equal(autoWorkers(1, "http://127.0.0.1:8000", 16), 1);
  assert.equal(autoWorkers(256, "http://127.0.0.1:8000", 16), 1);
  assert.equal(autoWorkers(257, "http://127.0.0.1:8000", 16), 2);
  assert.equal(autoWorkers(4000, "http://127.0.0.1:8000", 16), 15);
  assert.equal(autoWorkers(4000, "http://gpu-node-3:8000", 16), 16);
  assert.equal(autoWorkers(1000, "http://localhost:8000", 2), 1);
  assert.equal(autoWorkers(1000, "http://10.0.0.5:8000", 2), 2);
});

test("--workers auto says why: one loop below 4 cores with the server on the host, else ≤ 256 streams a loop", () => {
  const two = autoWorkersChoice(1000, "http://127.0.0.1:8000", 2);
  assert.equal(two.workers, 1);
  assert.match(two.why, /2 core\(s\) and the server runs on it/);
  assert.equal(autoWorkersChoice(1000, "http://127.0.0.1:8000", 3).workers, 1);
  const eight = autoWorkersChoice(1000, "http://127.0.0.1:8000", 8);
  assert.equal(eight.workers, 4);
  assert.match(eight.why, /≤ 256 streams each/);
  // Fewer cores than the streams need: each loop owns more, and the note says how many.
  const four = autoWorkersChoice(4000, "http://127.0.0.1:8000", 4);
  assert.equal(four.workers, 3);
  assert.match(four.why, /1334 streams each, more than 256/);
  assert.match(autoWorkersChoice(10, "http://127.0.0.1:8000", 2).why, /1 event loop \(10 streams/);
});

test("merged shard histograms give the percentiles of all samples together", () => {
  // Two shards with known delays (ns): one fast, one slow.
  const a = createHistogram();
  const b = createHistogram();
  for (let i = 1; i <= 900; i++) a.record(1_000_000 + i * 1000); // 1.001–1.9 ms
  for (let i = 1; i <= 100; i++) b.record(20_000_000 + i * 10_000); // 20.01–21 ms
  const part = (h: ReturnType<typeof createHistogram>): ShardEld => ({
    count: h.count,
    points: eldPoints(h),
  });
  const m = mergeEld([part(a), part(b)]);
  assert.equal(m.totalCount, 1000);
  const ms = (p: number) => m.getValueAtPercentile(p) / 1e6;
  // Exact: p50 is the 500th of 1,000 samples (1.5 ms), p99 the 990th (20.9 ms).
  assert.ok(Math.abs(ms(50) - 1.5) < 0.02, `p50 ${ms(50)}`);
  assert.ok(ms(89) < 2 && ms(91) > 19.9, `p89 ${ms(89)} p91 ${ms(91)}`);
  assert.ok(Math.abs(ms(99) - 20.9) < 0.15, `p99 ${ms(99)}`);
  assert.ok(Math.abs(m.maxValue / 1e6 - 21) < 0.05);
  assert.equal(mergeEld([]).totalCount, 0);
});
