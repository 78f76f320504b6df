// Sweep saturation: completions against arrivals over their own spans, not vLLM's drain-inclusive rate.
import assert from "node:assert/strict";
import { test } from "node:test";
import { blankRecord } from "../../src/load/client.ts";
import type { BenchResult } from "../../src/load/runner.ts";
import { achievedRate, fmtRate, type SweepPoint, saturationReason } from "../../src/load/sweep.ts";

/** 20 requests scheduled every 50 ms (20 req/s); each ends `e2e(i)` ms after its arrival. */
function point(e2e: (i: number) => number, failed = 0): SweepPoint {
  const requests = Array.from({ length: 20 }, (_, i) => {
    const r = blankRecord();
    r.index = i;
    r.scheduledMs = i * 50;
    r.sendMs = r.scheduledMs;
    // Relative to the send, as the client records it.
    r.endMs = e2e(i);
    if (i < failed) r.errorClass = "http";
    return r;
  });
  const ok = 20 - failed;
  const durationS = Math.max(...requests.map((r) => r.sendMs + r.endMs)) / 1000;
  const result = {
    requests,
    summary: { completed: ok, failed, request_throughput: ok / durationS },
    client: { saturated: false },
  } as unknown as BenchResult;
  const a = achievedRate(result);
  return { kind: "rate", value: 20, result, achievedRatio: a?.ratio ?? null, achievedRate: a?.rate ?? null };
}

test("a server that keeps up is not saturated, though vLLM's rate (with the drain) reads 20 % low", () => {
  const p = point(() => 300);
  assert.ok(p.result.summary.request_throughput < 0.9 * 20, "the old rule would have stopped here");
  assert.ok(Math.abs(p.achievedRatio! - 1) < 1e-9);
  assert.ok(Math.abs(p.achievedRate! - 20) < 1e-9);
  assert.equal(saturationReason(p), null);
});

test("a server that falls behind spreads its completions: saturated", () => {
  // Each request waits behind the previous ones: latency grows by 40 ms per request.
  const p = point((i) => 100 + 40 * i);
  assert.ok(p.achievedRatio! < 0.9);
  assert.match(saturationReason(p)!, /completed at 11\.\d+ req\/s against 20 req\/s scheduled/);
});

test("failures over 10 % stop a sweep; failed requests do not count as completions", () => {
  const p = point(() => 150, 3);
  assert.match(saturationReason(p)!, /3 of 20 requests failed/);
  assert.equal(achievedRate({ requests: [] } as unknown as BenchResult), null);
  assert.deepEqual([18.623235978144663, 5, 0.125, 123.456, Number.POSITIVE_INFINITY].map(fmtRate), [
    "18.62",
    "5",
    "0.125",
    "123.46",
    "inf",
  ]);
});
