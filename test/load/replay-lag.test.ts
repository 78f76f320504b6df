// What a replay's lag is made of (pure): requests due at one instant go out one after another, so a
// request's lag is its instant's first send's lateness plus the sends before it in that instant.
import assert from "node:assert/strict";
import { test } from "node:test";
import { blankRecord } from "../../src/load/client.ts";
import { explainLag, lagBreakdown, scheduleSummary } from "../../src/load/replay.ts";
import { shortestFirst } from "../../src/load/runner.ts";

const rec = (index: number, scheduledMs: number, sendMs: number, warmup = false) => {
  const r = blankRecord();
  r.index = index;
  r.scheduledMs = scheduledMs;
  r.sendMs = sendMs;
  r.warmup = warmup;
  return r;
};

test("lagBreakdown: instants, the largest, the first sends' lateness and the share behind earlier sends", () => {
  // Instant 0: first 0.1 ms late, then 0.3 and 0.6 (behind: 0.2 + 0.5); instant 100: one send, 0.2 late;
  // instant 200: two sends, the first 0.1 late, the second 0.4 (behind 0.3). A warm-up and an unsent one are left out.
  const recs = [
    rec(0, 0, 0.1),
    rec(1, 0, 0.3),
    rec(2, 0, 0.6),
    rec(3, 100, 100.2),
    rec(4, 200, 200.4),
    rec(5, 200, 200.1),
    rec(6, 200, 199, true),
    rec(7, 300, Number.NaN),
  ];
  const b = lagBreakdown(recs, (i) => 1000 * (i + 1));
  assert.equal(b.instants, 3);
  assert.equal(b.maxDueAtOnce, 3);
  assert.equal(b.maxDueBodyBytes, 1000 + 2000 + 3000);
  assert.ok(Math.abs(b.firstLagMaxMs! - 0.2) < 1e-9);
  // Summed lag 0.1 + 0.3 + 0.6 + 0.2 + 0.4 + 0.1 = 1.7; behind 0.2 + 0.5 + 0.3 = 1.0.
  assert.ok(Math.abs(b.behindShare! - 1.0 / 1.7) < 1e-9, String(b.behindShare));
  // Without body sizes the bytes are unknown, not zero.
  assert.equal(lagBreakdown(recs).maxDueBodyBytes, null);
  const sc = scheduleSummary(recs, { speed: 20, startOffsetMs: 0, traceSpanMs: 200 }, "trace", () => 500_000);
  assert.equal(sc.requests, 6);
  assert.equal(sc.maxDueAtOnce, 3);
  const line = explainLag(sc);
  assert.match(
    line,
    /^lag p99 0\.\d+ ms: 3 requests due at one instant \(1\.50 MB of bodies\), 3 instants; the first of each instant p99 0\.\d+ ms/,
  );
  assert.match(line, /59 % of the summed lag is waiting behind earlier sends of the same instant/);
  // Every send exactly on time: no parts to share.
  assert.equal(lagBreakdown([rec(0, 5, 5), rec(1, 5, 5)]).behindShare, null);
  assert.equal(lagBreakdown([]).maxDueAtOnce, 0);
});

test("shortestFirst: ties go out shortest body first (stable), other entries in schedule order", () => {
  const times = Float64Array.from([0, 0, 0, 5, 9, 9]);
  const body = (n: number) => ({ body: Buffer.alloc(n) });
  const pre = [body(300), body(100), body(300), body(50), { body: "x".repeat(40) }, body(20)];
  assert.deepEqual(Array.from(shortestFirst(times, pre)!), [1, 0, 2, 3, 5, 4]);
  // No two due at once: the schedule's own order (null).
  assert.equal(shortestFirst(Float64Array.from([0, 1, 2]), [body(3), body(2), body(1)]), null);
});
