// The study's estimates against the simulator's hidden truth. Each draw starts the embedded sim
// with randomized hidden profile parameters (SimOptions.overrides, as `--set` does) in this process
// (a child per draw costs seconds of tsx start-up), runs the study's trace phase against it as a
// --url target with its profiler directory, and checks that the reported 95 % intervals of
// per-all-reduce cost, all-reduce share and the zero-all-reduce ceiling contain the true values
// from explainStep (read here, test-side only; the study never sees them).
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { makeRng } from "../../src/experiment/stats.ts";
import { decodeBatch, explainStep, loadProfile, startSim } from "../../src/sim/index.ts";
import { DEFAULT_PROFILE, runStudy } from "../../src/study/index.ts";

const DRAWS = 10;

function drawParams(u: () => number): Record<string, number> {
  const between = (lo: number, hi: number) => lo + (hi - lo) * u();
  const simple = between(40, 130);
  const r3 = (x: number) => Math.round(x * 1000) / 1000;
  return {
    "collectives.perCallUs.Simple": r3(simple),
    "collectives.perCallUs.LL": r3(between(15, simple - 5)),
    "hardware.memBandwidthGBs": Math.round(between(900, 1800)),
    "cost.launchUs.graph": r3(between(1, 5)),
    "cost.schedulerUs": Math.round(between(80, 800)),
    "cost.samplingUs": Math.round(between(50, 300)),
    "cost.jitterSigma": r3(between(0.005, 0.05)),
  };
}

/** True values at batch 1 over the contexts the trace covers (they vary slightly with context). */
function truthRange(set: Record<string, number>, ctxLo: number, ctxHi: number) {
  const profile = loadProfile(DEFAULT_PROFILE, set);
  const at = (ctx: number) => {
    const ex = explainStep(profile, {}, decodeBatch(1, ctx));
    const ar = ex.components.find((c) => c.name === "allreduce")!.ms;
    return { perCallUs: ex.allReduce.perCallUs, share: ar / ex.stepMs, ceiling: 1000 / (ex.stepMs - ar) };
  };
  const a = at(ctxLo);
  const b = at(ctxHi);
  const span = (k: keyof typeof a) => [Math.min(a[k], b[k]), Math.max(a[k], b[k])] as const;
  return { perCallUs: span("perCallUs"), share: span("share"), ceiling: span("ceiling") };
}

const covers = (q: { low?: number; high?: number } | undefined, t: readonly [number, number]) =>
  q !== undefined && q.low !== undefined && q.high !== undefined && q.low <= t[1] && t[0] <= q.high;

test(`truth: per-all-reduce cost, all-reduce share and zero-all-reduce ceiling cover the sim's hidden values in ≥ 90 % of ${DRAWS} random draws`, async (t) => {
  const u = makeRng(20261202);
  let hits = 0;
  const log: string[] = [];
  for (let i = 0; i < DRAWS; i++) {
    const set = drawParams(u);
    const dir = mkdtempSync(join(tmpdir(), "inferscope-truth-"));
    const sim = await startSim({ port: 0, timeScale: 4, seed: i + 1, overrides: set, profilerDir: dir });
    let result: Awaited<ReturnType<typeof runStudy>>["result"];
    try {
      ({ result } = await runStudy({
        url: sim.url,
        profilerDir: dir,
        phases: ["trace"],
        seed: i + 1,
        dbPath: null,
        plan: { trace: { steps: 64, outputLen: 64 } },
      }));
    } finally {
      await sim.close(1000);
      rmSync(dir, { recursive: true, force: true });
    }
    const tr = result.trace;
    assert.ok(tr, `draw ${i}: no trace section (${JSON.stringify(result.meta.phases)})`);
    // The capture's prompt is a short sentence; contexts run from it to it + 64 tokens.
    const truth = truthRange(set, 8, 8 + 64 + 16);
    const ok = {
      perCall: covers(tr.allReducePerCallUs, truth.perCallUs),
      share: covers({ low: tr.allReduceShare.low! / 100, high: tr.allReduceShare.high! / 100 }, truth.share),
      ceiling: covers(result.summary.ceiling?.tokensPerSecond, truth.ceiling),
    };
    const all = ok.perCall && ok.share && ok.ceiling;
    if (all) hits++;
    log.push(
      `draw ${i} ${all ? "ok  " : "MISS"} perCall ${tr.allReducePerCallUs.low?.toFixed(2)}–${tr.allReducePerCallUs.high?.toFixed(2)} vs ${truth.perCallUs[0].toFixed(2)}` +
        ` share ${tr.allReduceShare.low?.toFixed(2)}–${tr.allReduceShare.high?.toFixed(2)} % vs ${(100 * truth.share[0]).toFixed(2)}–${(100 * truth.share[1]).toFixed(2)} %` +
        ` ceiling ${result.summary.ceiling?.tokensPerSecond.low?.toFixed(1)}–${result.summary.ceiling?.tokensPerSecond.high?.toFixed(1)} vs ${truth.ceiling[0].toFixed(1)}–${truth.ceiling[1].toFixed(1)}`,
    );
  }
  t.diagnostic(log.join("\n"));
  const rate = hits / DRAWS;
  assert.ok(rate >= 0.9, `coverage ${hits}/${DRAWS}:\n${log.join("\n")}`);
});
