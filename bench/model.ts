// npm run bench:model — leave-one-out scoring on the corpus (validation-public.md), predict() latency and a 10,000-point
// what-if grid.
import { performance } from "node:perf_hooks";
import Table from "cli-table3";
import { shippedCorpus } from "../src/model/corpus.ts";
import { SEED_DEPLOYMENT } from "../src/model/examples.ts";
import { predict } from "../src/model/predict.ts";
import { corpusFit, leaveOneOut } from "../src/model/priors.ts";
import { whatifGrid } from "../src/model/whatif.ts";

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

// 1. Leave-one-out on the corpus: refit (hyperparameters too) without each row, predict it.
const corpus = shippedCorpus();
const c0 = process.cpuUsage();
const l0 = performance.now();
const loo = leaveOneOut(corpus);
const looMs = performance.now() - l0;
const looCpu = process.cpuUsage(c0);
const t = new Table({
  head: ["row", "measured ms/token", "LOO centre", "80 % interval", "error", "inside", "high/low"],
  style: { head: [], border: [] },
});
for (const r of loo.rows)
  t.push([
    r.id,
    r.measuredMs.toFixed(2),
    r.centreMs.toFixed(2),
    `${r.low.toFixed(2)}–${r.high.toFixed(2)}`,
    `${r.error >= 0 ? "+" : ""}${(100 * r.error).toFixed(1)} %`,
    r.inside ? "yes" : "NO",
    `${r.ratio.toFixed(2)}×`,
  ]);
console.log(
  `leave-one-out on the corpus (${corpus.rows.length} rows of validation-public.md, src/model/corpus/): each row predicted by a fit that never saw it`,
);
console.log(t.toString());
const inside = loo.rows.filter((r) => r.inside).length;
console.log(
  `median |error| ${(100 * loo.medianAbsError).toFixed(1)} % (target ≤ 12 %); coverage of the 80 % interval ${inside}/${loo.rows.length} = ${(100 * loo.coverage).toFixed(1)} % (target 75–90 %); median high/low ${loo.medianRatio.toFixed(2)}× (target ≤ 1.5×)`,
);
console.log(
  `fit on all rows: residual σ ${(100 * loo.hyper.sigma).toFixed(1)} % (log); spreads ${Object.entries(loo.hyper.tau)
    .map(([k, v]) => `${k} ${v}`)
    .join(
      ", ",
    )}; ${loo.rows.length} refits in ${(looMs / 1000).toFixed(1)} s wall / ${((looCpu.user + looCpu.system) / 1e6).toFixed(1)} s CPU`,
);
{
  // The same rows predicted in-sample (the shipped fit has seen them): for contrast only.
  const f = corpusFit();
  const errs = corpus.rows.map((r) => Math.abs(predict(r.input).decode.stepMs.mid - r.measuredMs) / r.measuredMs);
  console.log(
    `in-sample (the shipped fit, all rows seen): median |error| ${(100 * median(errs)).toFixed(1)} % over ${f.rowsUsed.length} rows`,
  );
}

// 2. predict() latency on the worked example.
for (let i = 0; i < 200; i++) predict(SEED_DEPLOYMENT);
const times: number[] = [];
for (let i = 0; i < 2000; i++) {
  const t0 = performance.now();
  predict(SEED_DEPLOYMENT);
  times.push(performance.now() - t0);
}
const pMed = median(times);
const p99 = [...times].sort((a, b) => a - b)[Math.floor(0.99 * times.length)];
console.log(
  `predict(): median ${(pMed * 1000).toFixed(0)} µs, p99 ${(p99 * 1000).toFixed(0)} µs over ${times.length} runs (target < 5 ms: ${(5 / pMed).toFixed(0)}× headroom)`,
);

// 3. A 10,000-point what-if grid: 10 batch × 10 context × 5 TP × 4 protocols × 5 KV/interconnect variants.
const axes = {
  batch: [1, 2, 4, 8, 16, 32, 64, 128, 192, 256],
  context: [256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072],
  tp: [1, 2, 4, 8, 8],
  proto: ["LL", "LL128", "Simple", "LL,Simple"],
  kv: ["auto", "fp8", "auto", "fp8", "bf16"],
};
// Wall time on a shared machine includes other processes' time slices; CPU time is reported beside it.
const gridRuns: { wall: number; cpu: number; n: number }[] = [];
for (let i = 0; i < 3; i++) {
  const c0 = process.cpuUsage();
  const g0 = performance.now();
  const grid = whatifGrid(SEED_DEPLOYMENT, axes);
  const wall = performance.now() - g0;
  const c = process.cpuUsage(c0);
  gridRuns.push({ wall, cpu: (c.user + c.system) / 1000, n: grid.length });
}
const gWall = median(gridRuns.map((x) => x.wall));
const gCpu = median(gridRuns.map((x) => x.cpu));
console.log(
  `what-if grid: ${gridRuns[0].n} points, median of 3 runs ${gWall.toFixed(0)} ms wall / ${gCpu.toFixed(0)} ms CPU (${((gWall * 1000) / gridRuns[0].n).toFixed(0)} µs/point; target < 2000 ms: ratio ${(gWall / 2000).toFixed(2)})`,
);
