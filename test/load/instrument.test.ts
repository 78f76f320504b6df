// bench:client's instruments: the heap window's arithmetic and a real allocation seen through it, the
// allocation-free clock, the probe reader against the real probe process, and a bench run that
// reports one window per reading loop (this thread, or each worker thread).
import assert from "node:assert/strict";
import { performance } from "node:perf_hooks";
import { after, before, test } from "node:test";
import { hrMs, perfNow } from "../../src/load/clock.ts";
import { type Probe, startProbe } from "../../src/load/delay.ts";
import { HeapWindow, heapWindowFrom } from "../../src/load/heapwindow.ts";
import { type LoopReport, ProbeReader } from "../../src/load/instrument.ts";
import { runBench } from "../../src/load/runner.ts";
import { type SpawnedSim, spawnSim } from "../helpers/sim.ts";

const stat = (gcType: string, before: number, after: number) => ({
  gcType,
  cost: 1500,
  beforeGC: { heapStatistics: { usedHeapSize: before } },
  afterGC: { heapStatistics: { usedHeapSize: after } },
});

test("heap window: growth between the edges plus what each collection freed", () => {
  // 100 → 400 (+300), scavenge to 150, → 350 (+200), mark-compact to 100, → 180 at the end (+80).
  const r = heapWindowFrom(100, 180, [stat("Scavenge", 400, 150), stat("MarkSweepCompact", 350, 100)]);
  assert.equal(r.allocatedBytes, 580);
  assert.equal(r.markCompacts, 1);
  assert.deepEqual(
    r.gcs.map((g) => g.type),
    ["Scavenge", "MarkSweepCompact"],
  );
  assert.equal(r.gcs[0]!.costMs, 1.5);
  assert.equal(heapWindowFrom(100, 90, []).allocatedBytes, 0);
});

test("heap window: sees what the window allocated, through collections", () => {
  const w = new HeapWindow();
  w.start();
  // 400,000 small objects kept briefly (≥ 32 B each): more than a young generation, so collections run.
  let keep: Array<{ a: number; b: number }> = [];
  for (let i = 0; i < 400_000; i++) {
    keep.push({ a: i, b: i + 1 });
    if (keep.length > 10_000) keep = [];
  }
  const r = w.end();
  assert.ok(r.allocatedBytes >= 400_000 * 24, `${r.allocatedBytes} B`);
  assert.ok(r.gcs.length >= 1, "collections in the window");
});

test("perfNow: performance.now()'s clock, with nothing allocated per call", () => {
  for (let i = 0; i < 5; i++) {
    const a = performance.now();
    const p = perfNow();
    const b = performance.now();
    // Calibrated to the tightest bracket: within the bracket here, plus a µs of calibration error.
    assert.ok(p >= a - 0.001 && p <= b + 0.001, `${a} ≤ ${p} ≤ ${b}`);
  }
  const sink = new Float64Array(4);
  const loop = (n: number) => {
    for (let i = 0; i < n; i++) sink[i & 3] = perfNow();
  };
  loop(300_000);
  const w = new HeapWindow();
  w.start();
  loop(1_000_000);
  const r = w.end();
  // performance.now() costs 32 B per call on Node 20: this catches a return to it (or to a BigInt kept).
  assert.ok(r.allocatedBytes / 1_000_000 < 4, `${(r.allocatedBytes / 1_000_000).toFixed(2)} B per call`);
  assert.ok(Math.abs(hrMs() - Number(process.hrtime.bigint()) / 1e6) < 1);
});

let probe: Probe;
let sim: SpawnedSim;
before(async () => {
  probe = await startProbe();
  sim = await spawnSim(["--speed", "zero"]);
});
after(async () => {
  probe?.stop();
  await sim?.stop();
});

test("probe reader: one event per probe line, stamped on receipt in this loop", async () => {
  const r = new ProbeReader(probe.port);
  await r.connected;
  const t0 = hrMs();
  // Real time for the probe's 2 ms writes to arrive; nothing here waits for a condition instead.
  await new Promise((res) => setTimeout(res, 200));
  const t1 = hrMs();
  const ev = r.stop(t0, t1);
  // ~100 writes in 200 ms; a loaded host's timer fires late, so only a loose floor.
  assert.ok(ev.writtenHrMs.length >= 10, `${ev.writtenHrMs.length} events`);
  for (let i = 0; i < ev.writtenHrMs.length; i++) {
    assert.ok(ev.writtenHrMs[i]! >= t0 && ev.writtenHrMs[i]! <= t1);
    assert.ok(ev.delayMs[i]! >= 0, `delay ${ev.delayMs[i]}`);
    if (i > 0) assert.ok(ev.writtenHrMs[i]! > ev.writtenHrMs[i - 1]!);
  }
});

for (const workers of [1, 2]) {
  test(`bench instruments: one window per reading loop (${workers} loop${workers > 1 ? "s" : ""})`, async () => {
    const loops: LoopReport[] = [];
    const res = await runBench(
      {
        baseUrl: sim.url,
        concurrency: 8,
        numPrompts: 32,
        randomInputLen: 8,
        randomOutputLen: 64,
        ignoreEos: true,
        noServerMetrics: true,
        transport: "h1",
        workers,
      },
      { instrument: { probePort: probe.port, heap: true, onLoop: (l) => loops.push(l) } },
    );
    assert.equal(res.summary.completed, 32);
    assert.equal(loops.length, workers);
    assert.deepEqual(loops.map((l) => l.loop).sort(), workers === 1 ? [0] : [0, 1]);
    for (const l of loops) {
      assert.ok(l.toHrMs > l.fromHrMs, "a window");
      assert.ok(l.heap && l.heap.allocatedBytes > 0, "the loop's heap was sampled");
      assert.ok(l.probe, "the loop read the probe");
      for (const w of l.probe.writtenHrMs) assert.ok(w >= l.fromHrMs && w <= l.toHrMs);
    }
  });
}
