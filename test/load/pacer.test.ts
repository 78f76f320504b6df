// The open loop's pacer: every entry once, in order, never early; stop() ends it; poll() sends what is due.
import assert from "node:assert/strict";
import { test } from "node:test";
import { pace } from "../../src/load/pacer.ts";

test("pace: every entry exactly once, in order, never before its time", async (t) => {
  const times = new Float64Array(300);
  for (let i = 0; i < times.length; i++) times[i] = i * 0.5 + (i % 7 === 0 ? 0 : 0.25); // 150 ms, with ties
  const origin = performance.now();
  const seen: number[] = [];
  const late: number[] = [];
  await pace(times, origin, (i, now) => {
    seen.push(i);
    assert.ok(now >= times[i]!, `entry ${i} sent at ${now} before ${times[i]}`);
    late.push(now - times[i]!);
  }).done;
  assert.deepEqual(
    seen,
    Array.from({ length: times.length }, (_, i) => i),
  );
  assert.ok(performance.now() - origin >= times[times.length - 1]!);
  // The floor this host allows right now: the same schedule kept by a thread that does nothing but wait for each
  // time (0.1 ms futex slices, no event loop). On a quiet host it is ~0.1 ms; a CPU hog beside this test
  // made the pacer's median 20 ms late, and the floor's with it.
  const floor: number[] = [];
  const sleeper = new Int32Array(new SharedArrayBuffer(4));
  const origin2 = performance.now();
  for (const t of times) {
    let now = performance.now() - origin2;
    while (now < t) {
      Atomics.wait(sleeper, 0, 0, 0.1);
      now = performance.now() - origin2;
    }
    floor.push(now - t);
  }
  late.sort((a, b) => a - b);
  floor.sort((a, b) => a - b);
  const p = (xs: number[], q: number) => xs[Math.floor(q * (xs.length - 1))]!;
  t.diagnostic(
    `lateness median ${p(late, 0.5).toFixed(3)} ms; floor median ${p(floor, 0.5).toFixed(3)} p90 ${p(floor, 0.9).toFixed(3)} ms`,
  );
  // A send is late by less than Node's 1 ms timer granularity beyond that floor (caught: a pacer that sleeps on
  // whole-ms timers up to each entry, or sends one entry per event-loop turn).
  assert.ok(
    p(late, 0.5) < 1 + p(floor, 0.9),
    `median lateness ${p(late, 0.5)} ms; floor p50 ${p(floor, 0.5)} p90 ${p(floor, 0.9)} ms`,
  );
});

test("pace: stop() ends the schedule early and resolves done; poll() sends what is due", async () => {
  const times = Float64Array.from([0, 5, 10, 10_000, 20_000]);
  const origin = performance.now();
  const seen: number[] = [];
  const p = pace(times, origin, (i) => {
    seen.push(i);
    if (i === 2) setImmediate(p.stop);
  });
  await p.done;
  assert.deepEqual(seen, [0, 1, 2]);
  // A poll with a clock past the next entry sends it at once (what the h1 read hook does).
  const q = pace(Float64Array.from([1e9, 2e9]), performance.now(), (i) => seen.push(10 + i));
  q.poll(1.5e9);
  assert.deepEqual(seen.slice(3), [10]);
  q.stop();
  await q.done;
  const empty = pace(new Float64Array(0), performance.now(), () => assert.fail("nothing to send"));
  await empty.done;
});
