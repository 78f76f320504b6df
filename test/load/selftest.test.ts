// `inferscope bench --self-test`: the client's ceiling against a real `inferscope sim --speed zero`.
import assert from "node:assert/strict";
import { test } from "node:test";
import { formatSelfTest, runSelfTest } from "../../src/load/selftest.ts";

test("self-test: spawns the sim, streams at each level, reports tokens per CPU-second and loop delay", {
  timeout: 60_000,
}, async () => {
  const r = await runSelfTest({ streams: [1, 20], requestsPerStream: 3, outputLen: 32 });
  assert.equal(r.points.length, 2);
  for (const p of r.points) {
    assert.equal(p.failed, 0);
    assert.equal(p.requests, p.streams * 3);
    assert.equal(p.outputTokens, p.streams * 3 * 32, "every token counted from the server's usage");
    assert.ok(p.cpuSeconds > 0 && p.wallSeconds > 0);
    assert.ok(Math.abs(p.tokensPerCpuSecond - p.outputTokens / p.cpuSeconds) < 1e-6 * p.tokensPerCpuSecond);
    assert.ok(p.loopDelayP99Ms >= p.loopDelayP50Ms && p.loopDelayP50Ms >= 0);
  }
  const text = formatSelfTest(r);
  assert.match(text, /streams\s+requests\s+tokens\/CPU-s/);
  assert.equal(text.split("\n").length, 4);
});
