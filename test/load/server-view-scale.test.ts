// bench's server view beside the client view when the sim runs its clock faster: the sim's /metrics
// are simulated seconds (gauge inferscope_sim_time_scale), the client's are wall; server-view converts
// the server's means to wall time and keeps the server's own figures under server_clock.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { serverDelta, timeScaleOf, totalsFromText } from "../../src/load/server-view.ts";
import { decodeBatch, prefillBatch, resolveSim, type SimHandle, startSim } from "../../src/sim/index.ts";
import { endSlackMs } from "../helpers/timing.ts";
import { get, post } from "../sim/util.ts";

const expo = (ttftSum: number, count: number, scale?: number) =>
  [
    "# TYPE vllm:time_to_first_token_seconds histogram",
    `vllm:time_to_first_token_seconds_bucket{le="+Inf"} ${count}`,
    `vllm:time_to_first_token_seconds_sum ${ttftSum}`,
    `vllm:time_to_first_token_seconds_count ${count}`,
    ...(scale === undefined ? [] : ["# TYPE inferscope_sim_time_scale gauge", `inferscope_sim_time_scale ${scale}`]),
    "",
  ].join("\n");

test("a real server (no gauge): means as exported, time_scale 1, no server_clock", () => {
  const v = serverDelta(totalsFromText(expo(0, 0)), totalsFromText(expo(0.5, 10)));
  assert.equal(v.time_scale, 1);
  assert.equal(v.ttft_mean_ms, 50);
  assert.equal(v.server_clock, null);
  assert.ok(!v.sources.includes("inferscope_sim_time_scale"));
});

test("a sim at time-scale 10: wall means = simulated ÷ 10; server_clock keeps the simulated ones", () => {
  const v = serverDelta(totalsFromText(expo(0, 0, 10)), totalsFromText(expo(0.5, 10, 10)));
  assert.equal(v.time_scale, 10);
  assert.ok(Math.abs(v.ttft_mean_ms! - 5) < 1e-12, String(v.ttft_mean_ms));
  assert.equal(v.server_clock!.ttft_mean_ms, 50);
  assert.equal(v.server_clock!.itl_mean_ms, null);
  assert.ok(v.sources.includes("inferscope_sim_time_scale"));
  // A nonsense gauge is not a scale.
  assert.equal(timeScaleOf(totalsFromText(expo(0, 0, 0))), 1);
});

describe("against the sim at time-scale 10 (in process, 127.0.0.1)", { timeout: 60_000 }, () => {
  const X = 10;
  let sim: SimHandle;
  before(async () => {
    sim = await startSim({ port: 0, timeScale: X, seed: 4 });
  });
  after(() => sim?.close(2000));

  test("server view: wall means sit beside the client's; server_clock is the profile's simulated time", async () => {
    const TOKENS = 60;
    const beforeTotals = totalsFromText((await get(sim.url, "/metrics")).body);
    const client: Array<{ ttft: number; gaps: number; span: number; prompt: number; each: number[] }> = [];
    for (let i = 0; i < 3; i++) {
      const r = await post(sim.url, "/v1/completions", {
        prompt: `server view ${i}`,
        max_tokens: TOKENS,
        ignore_eos: true,
        stream: true,
        stream_options: { include_usage: true },
      });
      assert.equal(r.status, 200);
      const t = r.times.slice(0, TOKENS);
      client.push({
        ttft: t[0]! - r.t0,
        gaps: t.length - 1,
        span: t.at(-1)! - t[0]!,
        prompt: JSON.parse(r.data.at(-2)!).usage.prompt_tokens,
        each: t.slice(1).map((x, i) => x - t[i]!),
      });
    }
    const afterText = (await get(sim.url, "/metrics")).body;
    const v = serverDelta(beforeTotals, totalsFromText(afterText));
    assert.equal(v.time_scale, X);
    assert.equal(v.requests, 3);
    const own = v.server_clock!;
    for (const k of ["ttft_mean_ms", "itl_mean_ms", "e2e_mean_ms", "decode_mean_ms"] as const)
      assert.ok(Math.abs(own[k]! / X - v[k]!) < 1e-9 * own[k]!, `${k}: ${own[k]} / ${X} vs ${v[k]}`);
    // The profile's step per gap (wall), and the lateness at each request's ends its gaps show (a loaded host).
    const { model, profile } = resolveSim({});
    const P = client[0]!.prompt;
    const stepAt = (k: number) => model.stepMs(decodeBatch(1, P + k + 1)) / X;
    const gaps = client.reduce((a, c) => a + c.gaps, 0);
    const slack = client.reduce((a, c) => a + endSlackMs(c.each, stepAt), 0) / gaps;
    // Side by side in one clock: the client's wall ITL equals the server's wall figure, up to the delivery delay of
    // each request's last token against its first (inside the end noise). Caught: the server's mean not converted
    // to wall time (10× off), or converted twice.
    const clientItl = client.reduce((a, c) => a + c.span, 0) / gaps;
    assert.ok(
      Math.abs(clientItl - v.itl_mean_ms!) <= 0.01 * v.itl_mean_ms! + slack,
      `client ITL ${clientItl} vs server ${v.itl_mean_ms} (± 1 % + ${slack})`,
    );
    // The client cannot see the first token before the server emits it (both wall).
    const clientTtft = client.reduce((a, c) => a + c.ttft, 0) / client.length;
    assert.ok(clientTtft >= v.ttft_mean_ms! - 0.05, `client TTFT ${clientTtft} < server ${v.ttft_mean_ms}`);
    // The server's own clock is the profile's: mean decode step ≈ 20 ms, not 2 (within 5 % and the end noise).
    let step = 0;
    for (let k = 1; k < TOKENS; k++) step += model.stepMs(decodeBatch(1, P + k));
    step /= TOKENS - 1;
    assert.ok(
      Math.abs(own.itl_mean_ms! - step) <= 0.05 * step + slack * X,
      `server ITL ${own.itl_mean_ms} vs profile ${step} ms (± 5 % + ${slack * X})`,
    );
    const ttftTruth = profile.cost.frontendMs + model.stepMs(prefillBatch(P));
    assert.ok(own.ttft_mean_ms! >= ttftTruth * 0.99, `server TTFT ${own.ttft_mean_ms} vs profile ${ttftTruth} ms`);
  });
});
