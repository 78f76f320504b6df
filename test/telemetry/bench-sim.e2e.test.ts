// bench --telemetry against a real `inferscope sim` process: the counters read over the measured window
// agree with the sim's own energy truth and with the model's collective bytes, through the library and the CLI.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { runBench } from "../../src/load/runner.ts";
import { inputFromOptions, predict } from "../../src/model/index.ts";
import type { TelemetryTruth } from "../../src/sim/telemetry.ts";
import { modelHardware, modelTxBytesPerOutputToken } from "../../src/study/phases.ts";
import { runCli, STACK } from "../helpers/cli.ts";
import { type SpawnedSim, spawnSim } from "../helpers/sim.ts";

async function truth(url: string): Promise<TelemetryTruth> {
  const r = await fetch(`${url}/debug/telemetry_truth`);
  assert.equal(r.status, 200);
  return (await r.json()) as TelemetryTruth;
}

describe("bench --telemetry on the embedded sim (seed profile)", () => {
  let sim: SpawnedSim;
  before(async () => {
    // The exporter collects every 100 ms of wall time and is read every 50 ms (faster than it collects, so no
    // collection is missed); at time scale 3 the window is ~7 s, so its edges weigh ~1 %.
    sim = await spawnSim(["--time-scale", "3", "--dcgm-interval-ms", "100", "--seed", "5"]);
  });
  after(async () => {
    await sim?.stop();
  });

  test("auto reads the sim's exporter; J/token = the energy truth over the window (2 %), bytes/token = the model's (1 %)", async () => {
    // The truth is read with the sim idle before and after; the idle energy outside the measured window
    // (model lookup, the source's start, the wait for a reading past the end) is the idle power × that time.
    const t0 = await truth(sim.url);
    const res = await runBench({
      baseUrl: sim.url,
      numPrompts: 24,
      concurrency: 1,
      randomInputLen: 24,
      randomOutputLen: 40,
      ignoreEos: true,
      seed: 2,
      telemetry: { kind: "auto", intervalMs: 25 },
    });
    const n = res.requests.filter((r) => !r.warmup && r.errorClass === null).length;
    const t1 = (await truth(sim.url)) as TelemetryTruth & { power: { idleW: number } };
    const t = res.telemetry;
    assert.ok(t?.summary, `telemetry: ${JSON.stringify(t?.notes)}`);
    assert.equal(t.source.kind, "sim");
    assert.match(t.source.why, /embedded sim/);
    const s = t.summary;
    assert.equal(s.energyMethod, "counter");
    const tokens = t1.generatedTokens - t0.generatedTokens;
    assert.equal(s.tokens, tokens, "the window's output tokens are the sim's generated tokens");
    let energy = 0;
    for (let g = 0; g < t1.gpus.length; g++) energy += t1.gpus[g]!.energyJ - t0.gpus[g]!.energyJ;
    const idleWallS = s.window.startS - t0.unixS + (t1.unixS - s.window.endS);
    energy -= t1.gpus.length * t1.power.idleW * t1.timeScale * idleWallS;
    const truthJpt = energy / tokens;
    const rel = Math.abs(s.joulesPerToken! / truthJpt - 1);
    assert.ok(rel < 0.02, `J/token ${s.joulesPerToken} vs truth ${truthJpt} (${(rel * 100).toFixed(2)} %)`);
    // Interconnect: the model's collective bytes for these requests (P prompt, O output tokens each).
    // Collective bytes are linear in the tokens, so the requests' mean lengths give the total.
    const ok = res.requests.filter((r) => !r.warmup && r.errorClass === null);
    assert.equal(ok.length, n);
    const P = ok.reduce((a, r) => a + r.promptTokens, 0) / n;
    const O = ok.reduce((a, r) => a + r.outputTokens, 0) / n;
    const input = inputFromOptions({
      model: "glm-5",
      quant: "nvfp4",
      gpu: "rtx-pro-6000",
      gpus: "8",
      tp: "8",
      interconnect: "pcie5",
    });
    const hw = modelHardware(predict({ ...input, batch: 1 }), 8);
    const modelBytes = modelTxBytesPerOutputToken(hw, P, O)!;
    const measured = s.interconnect!.bytesPerToken!;
    const bound = s.interconnect!.bytesPerTokenError ?? 0;
    const brel = Math.abs(measured / modelBytes - 1);
    // Within 1 % of the model, widened only by the bound the summary itself states (collections the reader
    // missed while this host was busy, and the two straddling the window's edges).
    assert.ok(
      Math.abs(measured - modelBytes) <= 0.01 * modelBytes + bound,
      `bytes/token ${measured} ± ${bound} vs model ${modelBytes} (${(brel * 100).toFixed(2)} %)`,
    );
    assert.ok(bound < 0.1 * modelBytes, `the stated bound ${bound} is not a blanket`);
    // Samples are cut to the window (one kept each side) and travel with the result.
    assert.ok(t.samples.length >= 8 * 4);
    assert.ok(t.samples.every((x) => x.t >= s.window.startS - 0.2 && x.t <= s.window.endS + 0.2));
  });

  test("the CLI prints the telemetry block, --json carries it, and none records nothing", async () => {
    const args = ["--num-prompts", "3", "--concurrency", "1", "--random-output-len", "16", "--ignore-eos"];
    const text = await runCli(["bench", "--base-url", sim.url, ...args, "--telemetry", "auto@50ms"]);
    assert.equal(text.code, 0, text.stderr);
    assert.match(text.stdout, /Hardware telemetry/);
    assert.match(text.stdout, /J\/token/);
    const json = await runCli(["bench", "--base-url", sim.url, ...args, "--telemetry", "auto@50ms", "--json"]);
    assert.equal(json.code, 0, json.stderr);
    const out = JSON.parse(json.stdout);
    assert.equal(out.inferscope.telemetry.source.kind, "sim");
    assert.ok(out.inferscope.telemetry.summary.energyJ > 0);
    assert.ok(out.inferscope.telemetry.samples.length > 0);
    const none = await runCli(["bench", "--base-url", sim.url, ...args, "--telemetry", "none", "--json"]);
    assert.equal(none.code, 0, none.stderr);
    assert.equal(JSON.parse(none.stdout).inferscope.telemetry, null);
  });

  test("an explicit source that cannot start fails before anything is sent (exit 3, no stack)", async () => {
    const r = await runCli(["bench", "--base-url", sim.url, "--num-prompts", "2", "--telemetry", "nvidia-smi"], {
      env: { PATH: "/nonexistent" },
    });
    assert.equal(r.code, 3, r.stderr);
    assert.match(r.stderr, /nvidia-smi/);
    assert.doesNotMatch(r.stderr, STACK);
    const bad = await runCli(["bench", "--base-url", sim.url, "--telemetry", "gpu-magic"]);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /--telemetry/);
  });
});
