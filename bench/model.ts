// npm run bench:model — grouped cross-validation of the corpus fit (the decode rows of src/model/corpus/), the
// out-of-support inflations it implies, the benchmark rows (never fitted) against the workload prediction, predict()
// latency and a 10,000-point what-if grid. `--write-inflations` also writes the
// inflations to src/model/corpus/cv-inflations.json (what runs from src/ use; the build stores its own).
import { writeFileSync } from "node:fs";
import { performance } from "node:perf_hooks";
import Table from "cli-table3";
import { shippedCorpus } from "../src/model/corpus.ts";
import type { CvScore, Grouping } from "../src/model/cv.ts";
import { crossValidate, INFLATIONS_FILE, inflationsFile } from "../src/model/cv.ts";
import { SEED_DEPLOYMENT } from "../src/model/examples.ts";
import { predict } from "../src/model/predict.ts";
import { corpusFit } from "../src/model/priors.ts";
import { whatifGrid } from "../src/model/whatif.ts";
import { predictWorkload } from "../src/model/workload.ts";

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

// 1. Grouped cross-validation on the corpus: leave one source out (the headline), one model family out, one engine
// out — each fold refits everything, hyperparameters included — and row-level leave-one-out last (it leaks siblings).
const corpus = shippedCorpus();
const c0 = process.cpuUsage();
const l0 = performance.now();
const cv = crossValidate(corpus);
const cvMs = performance.now() - l0;
const cvCpu = process.cpuUsage(c0);
const pct = (x: number) => `${(100 * x).toFixed(1)} %`;
const line = (s: CvScore) =>
  s.n ? `${pct(s.medianAbsError)} | ${pct(s.coverage)} | ${s.medianRatio.toFixed(2)}× (n ${s.n})` : "no rows";
const summary = new Table({
  head: ["validation", "folds", "all: median |error| | 80 % coverage | median high/low", "dense", "MoE"],
  style: { head: [], border: [] },
});
const names: Record<Grouping, string> = {
  source: "leave one source out",
  family: "leave one model family out",
  engine: "leave one engine out",
  row: "leave one row out (leaks siblings)",
};
for (const g of ["source", "family", "engine"] as const) {
  const w = cv.widened[g];
  summary.push([`${names[g]}, widened out of support`, w.folds, line(w.all), line(w.dense), line(w.moe)]);
  const p = cv.plain[g];
  summary.push([`  ${names[g]}, as fitted`, p.folds, line(p.all), line(p.dense), line(p.moe)]);
}
const rl = cv.plain.row;
summary.push([names.row, rl.folds, line(rl.all), line(rl.dense), line(rl.moe)]);
console.log(
  `grouped cross-validation on the corpus (${corpus.rows.length} decode rows, src/model/corpus/; its ${corpus.benchmarks.length} benchmark rows are never fitted): every figure is left out (targets for leave-one-source-out: median |error| ≤ 12 %, coverage 75–90 % overall and for MoE, median high/low ≤ 1.6×)`,
);
console.log(summary.toString());
const inf = new Table({
  head: ["extrapolation", "held-out rows", "interval ×", "basis"],
  style: { head: [], border: [] },
});
for (const k of Object.values(cv.inflations.kinds)) inf.push([k.kind, k.n, Math.sqrt(1 + k.a).toFixed(2), k.basis]);
const sc = cv.inflations.scale;
inf.push(["(calibration, dense rows)", sc.n.dense, sc.dense.toFixed(2), "80th pct of |z|"]);
inf.push(["(calibration, MoE rows)", sc.n.moe, sc.moe.toFixed(2), "80th pct of |z|"]);
console.log(
  "out-of-support inflations (median of z² over the grouped folds' held-out rows, backfitted per kind) and the 80 % calibration per class (the 80th percentile of |z| after them, against the normal's 1.28); both cross-fitted in the widened lines above:",
);
console.log(inf.toString());
const rowsT = new Table({
  head: [
    "row",
    "measured ms",
    "in-sample",
    "left out: source",
    "family",
    "engine",
    "row",
    "LOSO 80 %",
    "extrapolations (LOSO)",
  ],
  style: { head: [], border: [] },
});
const sgn = (x: number) => (Number.isFinite(x) ? `${x >= 0 ? "+" : ""}${(100 * x).toFixed(1)} %` : "–");
for (const r of cv.perRow) {
  const s = cv.widened.source.rows.find((x) => x.id === r.id)!;
  rowsT.push([
    r.id,
    s.measuredMs.toFixed(2),
    sgn(r.inSample),
    sgn(r.source),
    sgn(r.family),
    sgn(r.engine),
    sgn(r.row ?? Number.NaN),
    `${s.low.toFixed(2)}–${s.high.toFixed(2)}${s.inside ? "" : " MISS"}`,
    s.extrapolations.map((e) => e.kind).join(", "),
  ]);
}
console.log("per row: in-sample error (the shipped fit saw it) beside its left-out errors");
console.log(rowsT.toString());
console.log(
  `effective number of parameters Σ(1 − posterior var / prior var) = ${cv.effectiveParameters.toFixed(1)} of ${cv.parameters} for ${corpus.rows.length} rows; residual σ ${(100 * cv.hyper.sigma).toFixed(1)} % (log); spreads ${Object.entries(
    cv.hyper.tau,
  )
    .map(([k, v]) => `${k} ${v}`)
    .join(", ")}`,
);
{
  const f = corpusFit();
  const one = f.params.filter((p) => p.rows === 1 && !p.name.startsWith("src/")).map((p) => p.name);
  console.log(
    `parameters informed by one row only (shrunk toward their group's mean by the estimated τ): ${one.length} — ${one.join(", ")}`,
  );
  const errs = corpus.rows.map((r) => Math.abs(predict(r.input).decode.stepMs.mid - r.measuredMs) / r.measuredMs);
  console.log(
    `in-sample (the shipped fit, all rows seen; for contrast only): median |error| ${(100 * median(errs)).toFixed(1)} % over ${f.rowsUsed.length} rows`,
  );
}
{
  // Benchmark rows (kind: benchmark): serving TPOT under load, never fitted, so every figure here is left out. The
  // workload schedule (continuous batching, chunked prefill) at the row's concurrency and mean lengths.
  const bt = new Table({
    head: [
      "benchmark row",
      "measured TPOT ms",
      "predicted mean TPOT (80 %)",
      "error",
      "decode step at C",
      "prefill share",
    ],
    style: { head: [], border: [] },
  });
  const errs: number[] = [];
  let inside = 0;
  for (const r of corpus.benchmarks) {
    const w = predictWorkload(r.input, {
      concurrency: r.workload.concurrency,
      inputLen: { mean: r.workload.inputLen, sd: 0, source: "the row's mean input length" },
      outputLen: { mean: r.workload.outputLen, sd: 0, source: "the row's mean output length" },
    });
    const t = w.meanTpotMs;
    const e = (t.mid - r.measuredMs) / r.measuredMs;
    errs.push(Math.abs(e));
    if (t.low <= r.measuredMs && r.measuredMs <= t.high) inside++;
    bt.push([
      r.id,
      r.measuredMs.toFixed(2),
      `${t.mid.toFixed(2)} (${t.low.toFixed(2)}–${t.high.toFixed(2)})`,
      sgn(e),
      predict(r.input).decode.stepMs.mid.toFixed(2),
      `${(100 * w.prefillShare).toFixed(0)} %`,
    ]);
  }
  if (corpus.benchmarks.length) {
    console.log(
      `benchmark rows (never fitted): median |error| ${(100 * median(errs)).toFixed(1)} %, ${inside}/${corpus.benchmarks.length} inside the 80 % interval`,
    );
    console.log(bt.toString());
  }
}
console.log(
  `${Object.values(cv.plain).reduce((s, r) => s + r.folds, 0)} refits in ${(cvMs / 1000).toFixed(1)} s wall / ${((cvCpu.user + cvCpu.system) / 1e6).toFixed(1)} s CPU`,
);
if (process.argv.includes("--write-inflations")) {
  // Short string lists on one line, as biome formats JSON.
  const text = JSON.stringify(inflationsFile(cv.inflations), null, 2).replace(
    /\[\s*("[^"\n]*"(?:,\s*"[^"\n]*")*)\s*\]/g,
    (_m, l: string) => `[${l.split(/,\s*/).join(", ")}]`,
  );
  writeFileSync(INFLATIONS_FILE, `${text}\n`);
  console.log(`wrote ${INFLATIONS_FILE}`);
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
