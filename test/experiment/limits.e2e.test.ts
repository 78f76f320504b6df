// The binding limit on the real simulator: a rate sweep against a sim built to saturate by
// max-num-seqs, and one built to saturate by its KV capacity, each names its limit (and only it) at the
// knee, with the onset within 10 % of the sim's truth: the rate it completed requests at in the steps
// that limit held its queue back (/debug/limit_truth), and for max-num-seqs also the step model's capacity.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { runLoadSweep } from "../../src/experiment/sweep.ts";
import { pointLabel, rebuildSweepReport } from "../../src/report/sweep.ts";
import type { LimitTruth } from "../../src/sim/engine.ts";
import { resolveSim } from "../../src/sim/index.ts";
import { decodeBatch, prefillBatch } from "../../src/sim/timing.ts";
import { runCli } from "../helpers/cli.ts";
import { spawnSim } from "../helpers/sim.ts";

const PROFILE = "llama3-8b-1xh100";
const TIME_SCALE = 2;
const IN = 32;
const OUT = 32;
const dir = mkdtempSync(join(tmpdir(), "inferscope-limits-"));
after(() => rmSync(dir, { recursive: true, force: true }));
/** The max-num-seqs sweep's run, overlaid on the KV sweep's report (both in one store). */
let seqsRun: string | null = null;

/**
 * Requests per wall second a batch of `b` sustains: b requests finish every OUT decode steps of batch
 * b (mean context IN + OUT/2), in the sim's clock ÷ its time scale. Prefill rides in those steps.
 */
function capacity(b: number, maxNumSeqs?: number): number {
  const { model } = resolveSim({ profile: PROFILE, maxNumSeqs, env: {} });
  const stepMs = model.stepMs(decodeBatch(b, IN + OUT / 2));
  return (b * 1000 * TIME_SCALE) / (OUT * stepMs);
}

/**
 * The server-side limits per level. The client's own limit is left out: on a loaded test host its
 * self-check may flag event-loop delay at any level (that rule is the self-check's, tested apart).
 */
function serverLimits(r: Awaited<ReturnType<typeof runLoadSweep>>): string[][] {
  return r.points.map((p) => p.diagnosis.binding.map((b) => b.limit).filter((l) => l !== "client"));
}

/**
 * The sim's truth: the limit that held its queue back in most steps, and the rate (wall req/s) at
 * which it completed requests in those steps — the throughput that limit allows.
 */
function truthOf(t: LimitTruth, timeScale = TIME_SCALE): { limit: string; rate: number; workRate: number } {
  const kinds = ["none", "max-num-seqs", "kv-capacity", "token-budget", "compute", "host"] as const;
  const [limit, b] = kinds
    .slice(1)
    .map((k) => [k, t[k]] as const)
    .sort((x, y) => y[1].steps - x[1].steps)[0]!;
  // The work those steps did, in requests: in the unit the limit costs (tokens for compute, sequence-steps
  // for the host) ÷ that unit per finished request over the run. A batch that grows without a ceiling
  // finishes requests in bursts; its work rate is steadier than its finish count.
  const unit = limit === "host" ? "seqs" : "tokens";
  const perRequest = kinds.reduce((a, k) => a + t[k][unit], 0) / kinds.reduce((a, k) => a + t[k].finished, 0);
  return {
    limit,
    rate: (b.finished * 1000 * timeScale) / b.simMs,
    workRate: (b[unit] * 1000 * timeScale) / (perRequest * b.simMs),
  };
}

async function sweep(
  simArgs: string[],
  levels: number[],
  db: string,
  o: { inLen?: number; budget?: number; timeScale?: number; numPrompts?: number; dcgm?: boolean } = {},
) {
  const sim = await spawnSim(["--profile", PROFILE, "--time-scale", String(o.timeScale ?? TIME_SCALE), ...simArgs]);
  try {
    const r = await runLoadSweep({
      url: sim.url,
      mode: "rate",
      levels,
      numPrompts: o.numPrompts ?? 120,
      randomInputLen: o.inLen ?? IN,
      maxNumBatchedTokens: o.budget,
      randomOutputLen: OUT,
      warmup: 1,
      db,
      telemetry: (o.dcgm
        ? { kind: "dcgm", url: `${sim.url}/dcgm/metrics`, intervalMs: 100 }
        : { kind: "none" }) as never,
      serverSampleMs: 25,
    });
    const truth = (await (await fetch(`${sim.url}/debug/limit_truth`)).json()) as LimitTruth;
    return { r, truth };
  } finally {
    await sim.stop();
  }
}

test("max-num-seqs: the batch pinned at 8 with a queue; onset within 10 % of 8 ÷ E2E(8)", async () => {
  const truth = capacity(8, 8);
  const { r, truth: t } = await sweep(
    ["--max-num-seqs", "8"],
    [0.5 * truth, 1.6 * truth].map((x) => Number(x.toFixed(2))),
    join(dir, "limits.db"),
  );
  seqsRun = r.runId;
  const sim = truthOf(t);
  assert.equal(sim.limit, "max-num-seqs");
  // The step model's capacity and the sim's own count agree.
  assert.ok(Math.abs(sim.rate - truth) / truth < 0.05, `sim ${sim.rate} vs model ${truth}`);
  assert.deepEqual(serverLimits(r), [[], ["max-num-seqs"]]);
  assert.ok(r.knee);
  assert.deepEqual(r.knee.limits, ["max-num-seqs"]);
  assert.match(r.knee.evidence[0]!, /running pinned at 8/);
  assert.ok(Math.abs(r.knee.onsetRate - truth) / truth < 0.1, `onset ${r.knee.onsetRate} vs truth ${truth}`);
  assert.ok(Math.abs(r.knee.onsetRate - sim.rate) / sim.rate < 0.1, `onset ${r.knee.onsetRate} vs sim ${sim.rate}`);

  // The frontier: the pinned level adds no throughput per GPU over what it costs each user.
  assert.equal(r.frontier.points.length, 2);
  assert.ok(r.frontier.points.every((p) => p.tokPerSecPerGpu > 0 && p.tokPerSecPerUser > 0));
  assert.match(r.frontier.points[1]!.limit!, /(^|\+)max-num-seqs$/);
  // The report, rebuilt from the store: the chart drawn as SVG with each point's load and limit.
  const rep = await rebuildSweepReport(r.runId, { dbPath: join(dir, "limits.db"), outDir: join(dir, "seqs-report") });
  const html = readFileSync(rep.report.html, "utf8");
  const chart = html.slice(html.indexOf('id="chart-frontier"'), html.indexOf("</figure>"));
  assert.match(chart, /<svg[^>]*>/);
  for (const p of r.frontier.points) assert.ok(chart.includes(`>${pointLabel(p, "rate")}<`), pointLabel(p, "rate"));
  assert.match(pointLabel(r.frontier.points[1]!, "rate"), /^\d+(\.\d+)? req\/s · (client\+)?max-num-seqs$/);
  assert.match(html, /id="sweep-knee">Knee at 121\.?\d* req\/s/);
});

test("KV capacity: 40 blocks of 16 tokens run out, with preemptions; onset within 10 % of the sim's own rate", async () => {
  // A request ends holding 4 blocks (64 tokens), so about 10 fit; the levels sit either side of the
  // capacity of the batch the blocks hold on average (3.5 each: 3 for 16 steps, then 4).
  const blocks = 40;
  const rough = capacity(blocks / 3.5);
  const { r, truth: t } = await sweep(
    ["--num-gpu-blocks-override", String(blocks), "--set", "model.maxModelLen=512", "--no-enable-prefix-caching"],
    [0.5 * rough, 1.6 * rough].map((x) => Number(x.toFixed(2))),
    join(dir, "limits.db"),
  );
  const sim = truthOf(t);
  assert.equal(sim.limit, "kv-capacity");
  assert.deepEqual(serverLimits(r), [[], ["kv-capacity"]]);
  assert.ok(r.knee);
  assert.deepEqual(r.knee.limits, ["kv-capacity"]);
  assert.match(r.knee.evidence[0]!, /KV capacity: usage (0\.9\d|1\.0) \(p90\), \d+(\.\d+)? preemptions\/s/);
  assert.ok(Math.abs(r.knee.onsetRate - sim.rate) / sim.rate < 0.1, `onset ${r.knee.onsetRate} vs sim ${sim.rate}`);

  // Both sweeps on one chart, from the store: every point of both runs drawn, each run its own colour.
  assert.ok(seqsRun, "the max-num-seqs sweep ran first");
  const both = await runCli([
    "report",
    r.runId,
    "--overlay",
    seqsRun,
    "--db",
    join(dir, "limits.db"),
    "--out",
    join(dir, "overlay"),
    "--json",
  ]);
  assert.equal(both.code, 0, both.stderr);
  const html = readFileSync(join(dir, "overlay", "index.html"), "utf8");
  // Both charts (the frontier, then TTFT p90 against rate) have every point of both runs.
  for (const id of ["chart-frontier", "chart-ttft-rate"]) {
    const chart = html.slice(html.indexOf(`id="${id}"`), html.indexOf("</figure>", html.indexOf(`id="${id}"`)));
    for (const run of [r.runId, seqsRun]) assert.ok(chart.includes(`>${run}<`), `${id}: legend names ${run}`);
    assert.equal((chart.match(/ req\/s( · [a-z+-]+)?<\/text>/g) ?? []).length, 4, `${id}: four labelled points`);
  }
});

test("token budget: 1024-token prompts chunked through 128-token steps; onset within 10 % of the sim's own rate", async () => {
  const budget = 128;
  const inLen = 1024;
  // Each step carries `budget` tokens; a request needs inLen + OUT of them.
  const { model } = resolveSim({ profile: PROFILE, maxNumBatchedTokens: budget, env: {} });
  const rough = ((budget / (inLen + OUT)) * 1000 * TIME_SCALE) / model.stepMs(prefillBatch(budget, inLen / 2));
  const { r, truth: t } = await sweep(
    ["--max-num-batched-tokens", String(budget), "--no-enable-prefix-caching"],
    [0.5 * rough, 1.6 * rough].map((x) => Number(x.toFixed(2))),
    join(dir, "budget.db"),
    { inLen, budget },
  );
  const sim = truthOf(t);
  assert.equal(sim.limit, "token-budget");
  assert.deepEqual(serverLimits(r), [[], ["token-budget"]]);
  assert.ok(r.knee);
  assert.match(
    r.knee.evidence[0]!,
    /token budget \(chunked prefill\): \d+ tokens per step \(step-tokens histogram\) against a budget of 128/,
  );
  assert.ok(Math.abs(r.knee.onsetRate - sim.rate) / sim.rate < 0.1, `onset ${r.knee.onsetRate} vs sim ${sim.rate}`);
});

/**
 * A compute or host sweep: the sim's truth and the diagnosis name `limit` alone, at the top level only, the
 * evidence reads the step's growth per sequence, and the onset is within 10 % of the sim's work rate.
 * Returns the GPU busy % the evidence names.
 */
function checkStepBound(
  limit: "compute" | "host",
  r: Awaited<ReturnType<typeof runLoadSweep>>,
  sim: ReturnType<typeof truthOf>,
): number {
  assert.equal(sim.limit, limit);
  assert.deepEqual(serverLimits(r), [[], [limit]]);
  assert.ok(r.knee);
  assert.deepEqual(r.knee.limits, [limit]);
  const m = new RegExp(`^${limit}: step time grows [\\d.]+ ms per sequence past B = [\\d.]+ .*GPU busy (\\d+) %`).exec(
    r.knee.evidence[0]!,
  );
  assert.ok(m, r.knee.evidence[0]);
  assert.ok(
    Math.abs(r.knee.onsetRate - sim.workRate) / sim.workRate < 0.1,
    `onset ${r.knee.onsetRate} vs sim ${sim.workRate}`,
  );
  return Number(m[1]);
}

test("host: a 10 ms per-sequence scheduler cost; step time grows with the batch, GPU busy low; onset within 10 % of the sim's", async () => {
  const ts = 20;
  const perSeqMs = 10;
  // Each request is in OUT steps, each costing it perSeqMs of host time: the rate the host allows (levels
  // either side of it; the sim's truth is what it completed while the host held it).
  const asym = (1000 * ts) / (OUT * perSeqMs);
  const { r, truth: t } = await sweep(
    ["--set", `cost.schedulerUsPerSeq=${perSeqMs * 1000 - 1.5}`],
    [0.4 * asym, 1.3 * asym].map((x) => Number(x.toFixed(2))),
    join(dir, "host.db"),
    { timeScale: ts, numPrompts: 100, dcgm: true },
  );
  const busy = checkStepBound("host", r, truthOf(t, ts));
  assert.ok(busy < 70, r.knee!.evidence[0]);
});

test("compute: a 10-TFLOPS GEMM; step time grows with the batch, GPU busy high; onset within 10 % of the sim's", async () => {
  const ts = 5;
  const tflops = 10;
  // Short prompts: a lone prompt's prefill is not compute-bound by itself; the batch's tokens are.
  const inLen = 4;
  // Past the roofline's ridge every token costs its GEMM time: the rate the GEMMs allow.
  const msPerToken = resolveSim({ profile: PROFILE, env: {} }).profile.cost.flopsPerToken / (tflops * 1e9);
  const asym = (1000 * ts) / ((inLen + OUT) * msPerToken);
  const { r, truth: t } = await sweep(
    ["--set", `hardware.gemmTflops=${tflops}`],
    [0.3 * asym, 1.3 * asym].map((x) => Number(x.toFixed(2))),
    join(dir, "compute.db"),
    { timeScale: ts, numPrompts: 60, dcgm: true, inLen },
  );
  const busy = checkStepBound("compute", r, truthOf(t, ts));
  assert.ok(busy >= 70, r.knee!.evidence[0]);
});

test("CLI: a bad --server-sample, --gpus or --max-num-batched-tokens is refused before any work (exit 2)", async () => {
  for (const [flag, value, msg] of [
    ["--server-sample", "soon", /--server-sample: not a duration: "soon"/],
    ["--gpus", "0", /--gpus/],
    ["--max-num-batched-tokens", "-3", /--max-num-batched-tokens/],
  ] as const) {
    const r = await runCli([
      "sweep",
      "rate",
      "--url",
      "http://127.0.0.1:9",
      "--levels",
      "1",
      flag,
      value,
      "--db",
      join(dir, "cli.db"),
    ]);
    assert.equal(r.code, 2, `${flag} ${value}: ${r.stderr}`);
    assert.match(r.stderr, msg);
    assert.doesNotMatch(r.stderr, /\n\s+at /, "no stack trace");
  }
});
