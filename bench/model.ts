// npm run bench:model — validation table (validation-public.md), predict() latency and a 10,000-point what-if grid.
import { readFileSync } from "node:fs";
import { performance } from "node:perf_hooks";
import Table from "cli-table3";
import { SEED_DEPLOYMENT } from "../src/model/examples.ts";
import { predict } from "../src/model/predict.ts";
import type { ValidationRow } from "../src/model/validate.ts";
import { validateRows } from "../src/model/validate.ts";
import { whatifGrid } from "../src/model/whatif.ts";

const rows: ValidationRow[] = JSON.parse(
  readFileSync(new URL("../test/model/fixtures/validation-public.json", import.meta.url), "utf8"),
).rows;

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

// 1. Validation: predicted from catalog inputs alone.
const v = validateRows(rows);
const t = new Table({
  head: ["row", "measured ms/token", "predicted mid (range)", "error", "inside", "largest term"],
  style: { head: [], border: [] },
});
for (const r of v.results)
  t.push([
    r.id,
    r.measuredMs.toFixed(2),
    `${r.predictedMs.mid.toFixed(2)} (${r.predictedMs.low.toFixed(2)}–${r.predictedMs.high.toFixed(2)})`,
    `${r.error >= 0 ? "+" : ""}${(100 * r.error).toFixed(1)} %`,
    r.inside ? "yes" : "NO",
    r.dominant,
  ]);
console.log("validation-public.md, predicted from catalog inputs alone (no fitting to the rows)");
console.log(t.toString());
console.log(
  `median |error| ${(100 * v.medianAbsError).toFixed(1)} % (target ≤ 20 %); inside range ${v.inside}/${v.results.length}`,
);
for (const r of v.results.filter((x) => x.note)) console.log(`  note ${r.id}: ${r.note}`);

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
