// npm run bench:model — how right the model is where it was not fitted. Every figure is left out unless it says
// in-sample: leave one source out, leave the future out (fit on rows published before a cut date, predict those after),
// leave one engine × GPU generation out, one model family out, one engine out (each fold refits everything, its
// spreads chosen inside the fold: a cold start), and row-level leave-one-out on the decode rows (it leaks siblings).
// Scores for all rows, the datacenter subset (vLLM, SGLang, TensorRT-LLM on HBM accelerators), dense and MoE rows and
// serving rows; the spread between sources that measured one configuration; the per-kernel cost beside the traces';
// the build-time fit; predict() latency and a 10,000-point what-if grid.
//   --write-inflations   also write src/model/corpus/cv-inflations.json (what runs from src/ use)
//   --warm               warm-start each fold at the full fit's spreads (faster; optimistic)
//   --only=G,G           only these groupings (source, future, engine-gen, family, engine, row)
//   --rows               print every row's left-out errors
import { writeFileSync } from "node:fs";
import { performance } from "node:perf_hooks";
import Table from "cli-table3";
import { type CorpusRow, shippedCorpus } from "../src/model/corpus.ts";
import type { CvResult, CvScore, Grouping } from "../src/model/cv.ts";
import {
  crossValidate,
  evidenceRows,
  FUTURE_CUTS,
  INFLATIONS_FILE,
  inflationsFile,
  isDatacenter,
  publishedDate,
} from "../src/model/cv.ts";
import { SEED_DEPLOYMENT } from "../src/model/examples.ts";
import { predict } from "../src/model/predict.ts";
import {
  corpusFit,
  fitCorpus,
  fittedFactor,
  kernelCostCoef,
  predictive,
  predictiveSteps,
  rowPredictSteps,
} from "../src/model/priors.ts";
import { shippedTraceRows } from "../src/model/trace-rows.ts";
import { whatif, whatifGrid } from "../src/model/whatif.ts";

const args = process.argv.slice(2);
const flag = (f: string) => args.includes(f);
const onlyArg = args.find((a) => a.startsWith("--only="))?.slice(7);

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  if (!n) return Number.NaN;
  return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}
const pct = (x: number) => `${(100 * x).toFixed(1)} %`;
const sgn = (x: number) => (Number.isFinite(x) ? `${x >= 0 ? "+" : ""}${(100 * x).toFixed(1)} %` : "–");
const line = (s: CvScore) =>
  s.n ? `${pct(s.medianAbsError)} | ${pct(s.coverage)} | ${s.medianRatio.toFixed(2)}× (${s.n})` : "–";

const corpus = shippedCorpus();
const rows = evidenceRows(corpus);
const dc = rows.filter(isDatacenter);

// 0. The build-time fit (the build runs it once; a process from src/ runs it when the cache is stale).
{
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  const f = fitCorpus(corpus);
  const c = process.cpuUsage(c0);
  console.log(
    `corpus: ${rows.length} rows (${corpus.rows.length} decode, ${rows.length - corpus.rows.length} serving; ${dc.length} datacenter) + ${shippedTraceRows().length} traces; the fit: ${((performance.now() - t0) / 1000).toFixed(1)} s wall, ${((c.user + c.system) / 1e6).toFixed(1)} s CPU (target < 30 s on the 2-core host), ${f.names.length} parameters`,
  );
}

// 1. Cross-validation.
const all: Exclude<Grouping, "row">[] = ["source", "future", "engine-gen", "family", "engine"];
const want = onlyArg ? new Set(onlyArg.split(",")) : undefined;
const extra = all.filter((g) => g !== "source" && g !== "family" && g !== "engine" && (!want || want.has(g))) as (
  | "engine-gen"
  | "future"
)[];
const l0 = performance.now();
const cpu0 = process.cpuUsage();
const cv = crossValidate(corpus, { extra, rowLoo: !want || want.has("row"), warm: flag("--warm") });
const cvMs = performance.now() - l0;
const cvCpu = process.cpuUsage(cpu0);
const names: Record<Grouping, string> = {
  source: "leave one source out",
  future: `leave the future out (cuts ${FUTURE_CUTS.join(", ")})`,
  "engine-gen": "leave one engine × GPU generation out",
  family: "leave one model family out",
  engine: "leave one engine out",
  row: "leave one decode row out (leaks siblings)",
};
const summary = new Table({
  head: [
    "validation (median |error| | 80 % coverage | median high/low (rows))",
    "folds",
    "all",
    "datacenter",
    "dense",
    "MoE",
    "serving",
  ],
  style: { head: [], border: [] },
});
const serving = (r: CvResult) => ({
  ...r.all,
  ...(() => {
    const s = r.rows.filter((x) => x.serving);
    return {
      n: s.length,
      medianAbsError: median(s.map((x) => Math.abs(x.error))),
      coverage: s.length ? s.filter((x) => x.inside).length / s.length : Number.NaN,
      medianRatio: median(s.map((x) => x.ratio)),
    };
  })(),
});
for (const g of all) {
  const w = cv.widened[g];
  const p = cv.plain[g];
  if (!w || !p) continue;
  summary.push([
    `${names[g]}, widened`,
    w.folds,
    line(w.all),
    line(w.datacenter),
    line(w.dense),
    line(w.moe),
    line(serving(w)),
  ]);
  summary.push([`  as fitted`, p.folds, line(p.all), line(p.datacenter), line(p.dense), line(p.moe), line(serving(p))]);
}
if (cv.plain.row) {
  const r = cv.plain.row;
  summary.push([names.row, r.folds, line(r.all), line(r.datacenter), line(r.dense), line(r.moe), "–"]);
}
console.log(
  `every figure left out; ${flag("--warm") ? "folds warm-started at the full fit's spreads (optimistic)" : "each fold chooses its own spreads (cold start)"}. Targets on the datacenter subset, leave-one-source-out and leave-future-out: median |error| ≤ 15 %, coverage 75–90 %, median high/low ≤ 1.8×`,
);
console.log(summary.toString());

// What the folds chose (cold start): the spread of each hyperparameter across folds.
{
  const t = new Table({
    head: ["spread", "full fit", "folds: min–median–max (source / future)"],
    style: { head: [], border: [] },
  });
  const hs = [...(cv.plain.source?.hypers ?? []), ...(cv.plain.future?.hypers ?? [])];
  for (const k of ["sigma", ...Object.keys(cv.hyper.tau)]) {
    const get = (h: (typeof hs)[number]["hyper"]) => (k === "sigma" ? h.sigma : h.tau[k as keyof typeof h.tau]);
    const vs = hs.map((h) => get(h.hyper)).sort((a, b) => a - b);
    if (!vs.length) continue;
    t.push([k, get(cv.hyper), `${vs[0]}–${median(vs)}–${vs[vs.length - 1]}`]);
  }
  console.log("spreads chosen inside the folds (empirical Bayes per fold):");
  console.log(t.toString());
}

// Inflations and calibration.
{
  const inf = new Table({
    head: ["extrapolation", "held-out rows", "interval ×", "basis"],
    style: { head: [], border: [] },
  });
  for (const k of Object.values(cv.inflations.kinds)) inf.push([k.kind, k.n, Math.sqrt(1 + k.a).toFixed(2), k.basis]);
  const sc = cv.inflations.scale;
  inf.push(["(calibration, dense rows)", sc.n.dense, sc.dense.toFixed(2), "80th pct of |z|"]);
  inf.push(["(calibration, MoE rows)", sc.n.moe, sc.moe.toFixed(2), "80th pct of |z|"]);
  console.log("out-of-support inflations and the 80 % calibration (cross-fitted in the widened lines above):");
  console.log(inf.toString());
}

// 2. Sources that measured one configuration: their spread, the interval's width there, the in-sample misfit.
{
  const f = corpusFit();
  const key = (r: (typeof rows)[number]) =>
    [
      r.model,
      r.precision,
      r.hardware.device,
      r.hardware.count,
      `tp${r.parallelism.tp}ep${r.parallelism.ep ?? 1}dp${r.parallelism.dp ?? 1}`,
      r.engine.name,
      r.kind,
      r.workload.concurrency ?? 1,
      r.workload.inputLen,
      r.workload.outputLen,
    ].join(" ");
  const groups = new Map<string, typeof rows>();
  for (const r of rows) groups.set(key(r), [...(groups.get(key(r)) ?? []), r]);
  const t = new Table({
    head: [
      "configuration group",
      "rows (sources)",
      "spread max/min",
      "80 % interval high/low",
      "covers",
      "in-sample median misfit",
      "without source offsets",
    ],
    style: { head: [], border: [] },
  });
  let n = 0;
  let covered = 0;
  let misfitOver = 0;
  for (const [k, rs] of groups) {
    if (rs.length < 2) continue;
    const ms = rs.map((r) => r.measuredMs);
    const spread = Math.max(...ms) / Math.min(...ms);
    const preds = rs.map((r) => {
      const st = rowPredictSteps(corpus, r, f.support);
      return st.length > 1 ? predictiveSteps(f, st, true, 0, true) : predictive(f, st[0].sp);
    });
    const ratio = median(preds.map((p) => p.high80 / p.low80));
    // In sample, the fit reproduces each row with its source's offset; a new deployment gets no offset (and the
    // interval carries τ_src instead), so both are printed.
    const off = (r: CorpusRow) => {
      const j = f.index.get(`src/${r.sourceKey}`);
      return j === undefined ? 0 : f.theta[j];
    };
    const misfit = median(rs.map((r, i) => Math.abs(Math.log(preds[i].ms / r.measuredMs) + off(r))));
    const bare = median(rs.map((r, i) => Math.abs(Math.log(preds[i].ms / r.measuredMs))));
    n++;
    if (ratio >= spread) covered++;
    if (Math.exp(misfit) > spread && Math.exp(misfit) > 1.1) misfitOver++;
    t.push([
      k,
      `${rs.length} (${new Set(rs.map((r) => r.sourceKey)).size})`,
      `${spread.toFixed(2)}×`,
      `${ratio.toFixed(2)}×`,
      ratio >= spread ? "yes" : "NO",
      sgn(Math.exp(misfit) - 1),
      sgn(Math.exp(bare) - 1),
    ]);
  }
  console.log(
    `configuration groups measured more than once (releases, dates, flags, harnesses): ${n}; the interval covers the spread in ${covered}; in-sample median misfit (with the rows' source offsets) above the group's spread and 10 % in ${misfitOver}`,
  );
  if (flag("--rows") || n <= 60) console.log(t.toString());
}

// 3. Per row (--rows): in-sample beside left-out; otherwise the datacenter misses of leave-one-source-out.
{
  const loso = cv.widened.source;
  const lfo = cv.widened.future;
  const t = new Table({
    head: ["row", "published", "measured ms", "in-sample", "LOSO", "LOSO 80 %", "future", "engine × gen"],
    style: { head: [], border: [] },
  });
  for (const r of cv.perRow) {
    const s = loso?.rows.find((x) => x.id === r.id);
    const fu = lfo?.rows.find((x) => x.id === r.id);
    const eg = cv.widened["engine-gen"]?.rows.find((x) => x.id === r.id);
    if (!flag("--rows") && !(s && s.datacenter && !s.inside)) continue;
    const row = rows.find((x) => x.id === r.id)!;
    t.push([
      r.id,
      publishedDate(row),
      row.measuredMs.toFixed(2),
      sgn(r.inSample),
      s ? sgn(s.error) : "–",
      s ? `${s.low.toFixed(2)}–${s.high.toFixed(2)}${s.inside ? "" : " MISS"}` : "–",
      fu ? sgn(fu.error) : "–",
      eg ? sgn(eg.error) : "–",
    ]);
  }
  console.log(flag("--rows") ? "per row:" : "datacenter rows outside their leave-one-source-out interval:");
  console.log(t.toString());
  const inS = cv.perRow.map((r) => Math.abs(r.inSample));
  console.log(
    `in-sample (the shipped fit saw every row; contrast only): median |error| ${pct(median(inS))}; effective parameters ${cv.effectiveParameters.toFixed(1)} of ${cv.parameters}; residual σ ${(100 * cv.hyper.sigma).toFixed(1)} % (log)`,
  );
}
console.log(
  `${Object.values(cv.plain).reduce((s, r) => s + (r?.folds ?? 0), 0)} refits in ${(cvMs / 1000).toFixed(1)} s wall / ${((cvCpu.user + cvCpu.system) / 1e6).toFixed(1)} s CPU`,
);
if (flag("--write-inflations")) {
  const text = JSON.stringify(inflationsFile(cv.inflations), null, 2).replace(
    /\[\s*("[^"\n]*"(?:,\s*"[^"\n]*")*)\s*\]/g,
    (_m, l: string) => `[${l.split(/,\s*/).join(", ")}]`,
  );
  writeFileSync(INFLATIONS_FILE, `${text}\n`);
  console.log(`wrote ${INFLATIONS_FILE}`);
}

// 4. The per-kernel cost the fit found, beside what the traces measured (kernels outside GEMM/MoE/attention).
{
  const f = corpusFit();
  for (const t of shippedTraceRows()) {
    const dev = t.device.startsWith("h") ? "hopper-hbm" : t.device.startsWith("mi") ? "cdna3-hbm" : "blackwell-hbm";
    const k = fittedFactor(f, kernelCostCoef(t.cudaGraphs ? "cuda-graphs" : "cuda-eager", dev));
    const c = 3 * k.mean;
    console.log(
      `per-kernel cost, ${dev} under ${t.cudaGraphs ? "CUDA graphs" : "eager"}: fitted ${c.toFixed(2)} µs (80 % ${(c * Math.exp(-1.2816 * k.logSd)).toFixed(2)}–${(c * Math.exp(1.2816 * k.logSd)).toFixed(2)}); trace ${t.id}: ${t.measured.perKernelUs} µs over ${t.measured.kernels} kernels`,
    );
  }
}

// 5. The seed's A/B as the model predicts it before any restart: NCCL_PROTO=LL against NCCL's own choice.
{
  const w = whatif(SEED_DEPLOYMENT, ["proto=LL"]);
  const base = w[0].stepMs;
  const ll = w[1].stepMs;
  console.log(
    `seed what-if proto=LL: ${base.mid.toFixed(2)} → ${ll.mid.toFixed(2)} ms per token (Δ ${(ll.mid - base.mid).toFixed(2)} ms; the seed measured −3.83 ms)`,
  );
}

// 6. predict() latency on the worked example.
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
  `predict(): median ${(pMed * 1000).toFixed(0)} µs, p99 ${(p99 * 1000).toFixed(0)} µs over ${times.length} runs (target < 1 ms median)`,
);

// 7. A 10,000-point what-if grid: 10 batch × 10 context × 5 TP × 4 protocols × 5 KV/interconnect variants.
const axes = {
  batch: [1, 2, 4, 8, 16, 32, 64, 128, 192, 256],
  context: [256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072],
  tp: [1, 2, 4, 8, 8],
  proto: ["LL", "LL128", "Simple", "LL,Simple"],
  kv: ["auto", "fp8", "auto", "fp8", "bf16"],
};
const gridRuns: { wall: number; cpu: number; n: number }[] = [];
for (let i = 0; i < 3; i++) {
  const c0 = process.cpuUsage();
  const g0 = performance.now();
  const grid = whatifGrid(SEED_DEPLOYMENT, axes);
  const wall = performance.now() - g0;
  const c = process.cpuUsage(c0);
  gridRuns.push({ wall, cpu: (c.user + c.system) / 1000, n: grid.length });
}
console.log(
  `what-if grid: ${gridRuns[0].n} points, median of 3 runs ${median(gridRuns.map((x) => x.wall)).toFixed(0)} ms wall / ${median(gridRuns.map((x) => x.cpu)).toFixed(0)} ms CPU`,
);
