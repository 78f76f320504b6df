// `inferscope bench --self-test`: the client's ceiling against a real `inferscope sim --speed zero`.
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { test } from "node:test";
import { formatSelfTest, runSelfTest, spawnSimProcess } from "../../src/load/selftest.ts";

test("self-test: spawns the sim, streams at each level, reports tokens per CPU-second, loop delay and the added delay beside the platform floor", {
  timeout: 90_000,
}, async () => {
  const r = await runSelfTest({
    streams: [1, 20],
    requestsPerStream: 3,
    outputLen: 32,
    delay: { streams: 40, outputLen: 24 },
  });
  assert.equal(r.points.length, 2);
  for (const p of r.points) {
    assert.equal(p.failed, 0);
    assert.equal(p.requests, p.streams * 3);
    assert.equal(p.outputTokens, p.streams * 3 * 32, "every token counted from the server's usage");
    assert.ok(p.cpuSeconds > 0 && p.wallSeconds > 0);
    assert.ok(Math.abs(p.tokensPerCpuSecond - p.outputTokens / p.cpuSeconds) < 1e-6 * p.tokensPerCpuSecond);
    assert.ok(p.loopDelayP99Ms >= p.loopDelayP50Ms && p.loopDelayP50Ms >= 0);
  }
  const d = r.delay!;
  assert.ok(d, "the added-delay check ran");
  assert.equal(d.streams, 40);
  assert.equal(d.reps, 1);
  for (const k of ["floorP50Ms", "floorP99Ms", "clientP50Ms", "clientP99Ms", "idleMedianMs"] as const)
    assert.ok(Number.isFinite(d[k]) && d[k] >= 0, `${k} = ${d[k]}`);
  assert.ok(d.floorP99Ms >= d.floorP50Ms && d.clientP99Ms >= d.clientP50Ms);
  assert.ok(d.floorCpuPerReadUs > 0 && d.clientCpuPerReadUs > 0);
  assert.equal(d.excessP99Ms, d.clientP99Ms - d.floorP99Ms);
  const text = formatSelfTest(r);
  assert.ok(r.simScheduling === "idle" || r.simScheduling === "normal");
  assert.match(text, /streams\s+requests\s+tokens\/CPU-s/);
  assert.match(text, /platform floor \d+\.\d\d ms .*this client \d+\.\d\d ms, client − floor -?\d+\.\d\d ms/);
  assert.equal(text.split("\n").length, 5);
});

test("spawnSimProcess({ idle }) runs every sim thread under SCHED_IDLE where chrt exists", {
  timeout: 30_000,
  skip: process.platform !== "linux" || !existsSync("/usr/bin/chrt") ? "needs Linux and util-linux chrt" : false,
}, async () => {
  const sim = await spawnSimProcess(["--speed", "zero"], { idle: true });
  try {
    assert.equal(sim.scheduling, "idle");
    // /proc/<tid>/stat field 41 is the policy (SCHED_IDLE = 5); threads started later inherit it.
    const tids = readdirSync(`/proc/${sim.pid}/task`);
    assert.ok(tids.length > 1);
    for (const t of tids) {
      const stat = readFileSync(`/proc/${sim.pid}/task/${t}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      assert.equal(fields[41 - 3], "5", `thread ${t} policy`);
    }
    const res = await fetch(`${sim.url}/v1/models`);
    assert.equal(res.status, 200);
  } finally {
    await sim.stop();
  }
  const plain = await spawnSimProcess(["--speed", "zero"]);
  try {
    assert.equal(plain.scheduling, "normal");
    const stat = readFileSync(`/proc/${plain.pid}/stat`, "utf8");
    assert.equal(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[41 - 3], "0");
  } finally {
    await plain.stop();
  }
});
