// The study under a time-scaled sim: the sim's /metrics already hold simulated time, so the audit reads
// as on the simulated deployment (seed: ITL ≈ 20.9 ms in the 10–25 ms bucket) and the server's means are
// shown as exported, not multiplied by the scale a second time.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { SEED_DEPLOYMENT } from "../../src/model/index.ts";
import type { AuditSection, StudyMeta } from "../../src/report/types.ts";
import { decodeBatch, resolveSim, type SimHandle, startSim } from "../../src/sim/index.ts";
import { deploymentOf } from "../../src/study/deployment.ts";
import { assemble, defaultPlan, type Measurements } from "../../src/study/index.ts";
import { type BenchMeasure, phaseAudit } from "../../src/study/phases.ts";
import { endSlackMs } from "../helpers/timing.ts";
import { post } from "../sim/util.ts";

const X = 10;
const meanMs = (v: string) => Number(/mean ([\d.]+) ms/.exec(v)?.[1]);
const perS = (v: string) => Number(/ ([\d.]+)\/s/.exec(v)?.[1]);
const row = (a: AuditSection, name: string) => a.families.find((f) => f.name === name)!.value ?? "";

describe("audit phase against the sim at time-scale 10", { timeout: 60_000 }, () => {
  let sim: SimHandle;
  before(async () => {
    sim = await startSim({ port: 0, timeScale: X, seed: 2 });
  });
  after(() => sim?.close(2000));

  test("durations, bucket remarks, window and rates read in simulated time", async () => {
    const TOKENS = 80;
    let done: () => void = () => {};
    const until = new Promise<void>((r) => (done = r));
    const auditP = phaseAudit(sim.url, { until, timeScale: X });
    let prompt = 0;
    const client: { ttft: number; gaps: number[] }[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await post(sim.url, "/v1/completions", {
        prompt: `audit ${i}`,
        max_tokens: TOKENS,
        ignore_eos: true,
        stream: true,
        stream_options: { include_usage: true },
      });
      assert.equal(r.status, 200);
      prompt = JSON.parse(r.data.at(-2)!).usage.prompt_tokens;
      const t = r.times.slice(0, TOKENS);
      client.push({ ttft: t[0]! - r.t0, gaps: t.slice(1).map((x, j) => x - t[j]!) });
    }
    done();
    const a = await auditP;
    const { model } = resolveSim({});
    let step = 0;
    for (let k = 1; k < TOKENS; k++) step += model.stepMs(decodeBatch(1, prompt + k));
    step /= TOKENS - 1;
    // ITL: the profile's ≈ 20 ms decode step, in vLLM's (0.01, 0.025] bucket as on the seed deployment: within 5 %
    // and the lateness the requests' own gaps show at their ends on a loaded host (test/helpers/timing.ts; caught:
    // wall-time durations, 10× off).
    const stepAt = (k: number) => model.stepMs(decodeBatch(1, prompt + k + 1)) / X;
    const nGaps = client.reduce((acc, c) => acc + c.gaps.length, 0);
    const slack = (X * client.reduce((acc, c) => acc + endSlackMs(c.gaps, stepAt), 0)) / nGaps;
    const itl = row(a, "vllm:inter_token_latency_seconds");
    assert.ok(
      Math.abs(meanMs(itl) - step) <= 0.05 * step + slack,
      `audit ITL "${itl}" vs profile step ${step} ms (± 5 % + ${slack} ms)`,
    );
    // The mean sits in the 15 ms wide (10, 25] ms bucket (in wall time it would be the 10 ms wide first one).
    assert.match(itl, /buckets are 15 ms wide around/);
    // TTFT in simulated ms: above the profile's frontend + prefill (≈ 50 ms), and no later than the client saw the
    // first token, scaled (the server stamps before it sends; wall time would be 10× under it).
    const ttft = meanMs(row(a, "vllm:time_to_first_token_seconds"));
    const clientTtft = (X * client.reduce((acc, c) => acc + c.ttft, 0)) / client.length;
    assert.ok(ttft > 40 && ttft <= clientTtft * 1.01, `audit TTFT ${ttft} ms vs client ${clientTtft} ms (simulated)`);
    // Rates are per simulated second over a simulated window: one request at a time cannot generate
    // faster than one token per decode step (wall rates would be ≈ 10× that).
    const gen = row(a, "vllm:generation_tokens_total");
    const rate = perS(gen);
    assert.ok(rate > 0 && rate < (1000 / step) * 1.05, `generation rate "${gen}" vs ≤ ${1000 / step}/s`);
    assert.ok(a.windowMs > 3 * TOKENS * step * 0.95, `window ${a.windowMs} ms covers the 3 requests' simulated time`);
    const n = Number(/^n ([\d.]+)/.exec(gen)?.[1]);
    assert.equal(n, 3 * TOKENS);
    assert.ok(Math.abs((rate * a.windowMs) / 1000 / n - 1) < 0.02, `rate × window = ${(rate * a.windowMs) / 1000}`);
  });
});

test("assemble at time-scale 10: server means as exported, no 'x× smaller' audit caveat", () => {
  const bench: BenchMeasure = {
    requests: 3,
    outputLen: 4,
    ttftMs: [80, 81, 82],
    itlGroups: [
      [20.9, 20.9, 20.9],
      [20.8, 21, 20.9],
    ],
    tpotMs: [20.9, 20.9],
    e2eMs: [143, 144],
    server: { ttftMeanMs: 79.5, itlMeanMs: 20.9 },
    warnings: [],
    clientSaturated: false,
    clientOverheadMs: 0.3,
  };
  const audit: AuditSection = {
    engine: "vLLM",
    windowMs: 49_000,
    families: [],
    gaps: [],
    notes: ["request-level only"],
  };
  const m: Measurements = {
    timeScale: X,
    plan: defaultPlan(true),
    seed: 1,
    deployment: deploymentOf(SEED_DEPLOYMENT),
    kind: "embedded-sim",
    bench,
    audit,
  };
  const meta = {
    tool: { name: "inferscope", version: "test" },
    startedAt: "2026-12-02T00:00:00.000Z",
    finishedAt: "2026-12-02T00:00:01.000Z",
    durationMs: 1000,
    quick: true,
    seed: 1,
    target: { kind: "embedded-sim" },
    timeScale: X,
    deployment: m.deployment,
    flags: {},
    environment: {},
    phases: [],
  } satisfies StudyMeta;
  const r = assemble(m, meta);
  assert.equal(r.latency!.server!.itlMeanMs, 20.9);
  assert.equal(r.latency!.server!.ttftMeanMs, 79.5);
  assert.ok(!r.audit!.notes.some((n) => /smaller|wall-clock seconds/.test(n)), r.audit!.notes.join(" | "));
  assert.ok(r.audit!.notes.some((n) => /simulated seconds/.test(n)));
  assert.ok(r.latency!.notes.some((n) => /inferscope_sim_time_scale = 10/.test(n)));
});
