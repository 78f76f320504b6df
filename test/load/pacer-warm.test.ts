// Connections for a burst are opened in the gap before it, never while it is sent: the pacer announces each
// burst ahead (pace's `ahead`), the pool readies fresh idle connections (H1Pool.warm), and a replay on the
// real sim opens none between the first and the last send of any instant.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { perfNow } from "../../src/load/clock.ts";
import { H1Pool, setConnectHook } from "../../src/load/h1.ts";
import { burstEnd, pace } from "../../src/load/pacer.ts";
import { runBench } from "../../src/load/runner.ts";
import { type SpawnedSim, spawnSim } from "../helpers/sim.ts";

test("pace: each burst is announced once, before its first entry, with its size and last time", async () => {
  // Three bursts (ties and entries < 2.5 ms apart belong together), then a lone entry.
  const times = Float64Array.from([0, 0, 1, 30, 30, 30, 31.5, 60, 90]);
  assert.equal(burstEnd(times, 0), 3);
  assert.equal(burstEnd(times, 3), 7);
  assert.equal(burstEnd(times, 7), 8);
  const origin = performance.now();
  const events: string[] = [];
  const announced: Array<[number, number, number]> = [];
  await pace(times, origin, (i) => events.push(`send ${i}`), {
    ahead: (first, count, lastMs) => {
      announced.push([first, count, lastMs]);
      events.push(`ahead ${first}`);
      // Announced in the gap: the burst's first entry is not due yet.
      assert.ok(performance.now() - origin < times[first]!, `burst at ${times[first]} announced late`);
    },
  }).done;
  // The first burst is due at once (no gap to announce it in: the run's preconnect covers it).
  assert.deepEqual(announced, [
    [3, 4, 31.5],
    [7, 1, 60],
    [8, 1, 90],
  ]);
  assert.ok(
    events.indexOf("ahead 3") < events.indexOf("send 3") && events.indexOf("ahead 3") > events.indexOf("send 2"),
  );
  assert.equal(events.filter((e) => e.startsWith("send")).length, times.length);
});

describe("H1Pool.warm against a real loopback server", () => {
  let server: http.Server;
  let origin: string;
  before(async () => {
    server = http.createServer((_q, s) => s.end("ok"));
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => {
    server.closeAllConnections();
    server.close();
  });

  test("fresh idle connections are kept, ones stale by the burst's time replaced, the limit holds", async () => {
    let opened = 0;
    setConnectHook(() => opened++);
    const pool = new H1Pool(origin, { connections: 6, keepAliveMs: 4000 });
    try {
      await pool.preconnect(4);
      assert.equal(opened, 4);
      // Fresh at a burst 100 ms away: nothing to do for 4; two more for 6.
      assert.equal(pool.warm(4, perfNow() + 100), 0);
      assert.equal(pool.warm(6, perfNow() + 100), 2);
      // Still connecting: counted, not opened twice.
      assert.equal(pool.warm(6, perfNow() + 100), 0);
      assert.equal(opened, 6);
      // At a burst 10 s away the 4 idle ones would be past their 4 s keep-alive: closed now and replaced; the 2
      // still connecting count, and the limit (6) bounds the rest however many are asked for.
      const n = pool.warm(50, perfNow() + 10_000);
      assert.equal(n, 4);
      assert.equal(pool.size, 6);
      assert.equal(opened, 10);
    } finally {
      setConnectHook(null);
      pool.close();
    }
  });
});

describe("replay on the sim: no connection opened while a burst is sent", { timeout: 120_000 }, () => {
  let sim: SpawnedSim;
  let dir: string;
  before(async () => {
    sim = await spawnSim(["--time-scale", "4"]);
    dir = mkdtempSync(join(tmpdir(), "inferscope-warm-"));
  });
  after(async () => {
    await sim?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test("5 instants of 8 requests, each while the last instant's still stream", async () => {
    // 300 output tokens outlast the 250 ms between instants, so every instant needs 8 more connections.
    const lines: string[] = [];
    for (let b = 0; b < 5; b++)
      for (let k = 0; k < 8; k++)
        // Longest first in the file: the instant goes out shortest first (shortestFirst).
        lines.push(JSON.stringify({ timestamp: b * 250, input_length: 64 + 8 * (7 - k), output_length: 300 }));
    const path = join(dir, "bursts.jsonl");
    writeFileSync(path, `${lines.join("\n")}\n`);
    const connects: number[] = [];
    let originPerf = Number.NaN;
    setConnectHook((t) => connects.push(t));
    let res: Awaited<ReturnType<typeof runBench>>;
    try {
      res = await runBench(
        { baseUrl: sim.url, dataset: "jsonl", datasetPath: path, telemetry: "none", noServerMetrics: true },
        { onOrigin: (o) => (originPerf = o) },
      );
    } finally {
      setConnectHook(null);
    }
    assert.equal(res.summary.completed, 40);
    assert.ok(Number.isFinite(originPerf));
    const recs = res.requests.filter((r) => !r.warmup);
    let inBurst = 0;
    let during = 0;
    for (let b = 0; b < 5; b++) {
      const inst = recs.filter((r) => r.scheduledMs === b * 250).sort((x, y) => x.sendMs - y.sendMs);
      assert.deepEqual(
        inst.map((r) => r.targetInputLen),
        [64, 72, 80, 88, 96, 104, 112, 120],
      );
      const sends = inst.map((r) => originPerf + r.sendMs);
      assert.equal(sends.length, 8);
      const [a, z] = [Math.min(...sends), Math.max(...sends)];
      inBurst += connects.filter((c) => c >= a && c <= z).length;
      if (b > 0) during += connects.filter((c) => c > originPerf + (b - 1) * 250 && c < a).length;
    }
    // Without the readying, each later instant opens 7 connections between its first and last send
    // (the 8th's after its own stamp): 28 in all. With it they open in the gaps before.
    assert.equal(inBurst, 0, `${inBurst} connections opened while an instant was being sent`);
    assert.ok(during >= 8, `only ${during} connections opened in the gaps`);
    assert.equal(res.schedule!.maxDueAtOnce, 8);
    assert.equal(res.schedule!.instants, 5);
  });
});
