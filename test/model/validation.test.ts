// The corpus (src/model/corpus/*.yaml, validation-public.md as data) and what the fitted model must do in sample. The
// grouped cross-validation (source, future, engine × GPU generation, family, engine) refits the corpus some 80 times:
// its figures are bench:model's, which prints them with the targets (docs/model.md).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { InputError } from "../../src/errors.ts";
import { requireModel } from "../../src/model/architecture.ts";
import { parseCorpus, shippedCorpus } from "../../src/model/corpus.ts";
import { evidenceRows, INFLATIONS_FILE, inflationsStamp } from "../../src/model/cv.ts";
import { SEED_DEPLOYMENT } from "../../src/model/examples.ts";
import { requireGpu } from "../../src/model/hardware.ts";
import { predict } from "../../src/model/predict.ts";
import {
  configKey,
  corpusFit,
  fittedFactor,
  kernelCostCoef,
  predictive,
  predictiveSteps,
  rowPredictSteps,
} from "../../src/model/priors.ts";
import { shippedTraceRows } from "../../src/model/trace-rows.ts";

test("the corpus holds every validation-public.md row and variant, each with its measured value defined", () => {
  const c = shippedCorpus();
  assert.ok(c.rows.length >= 80, String(c.rows.length));
  for (const v of ["V1", "V2", "V3", "V4", "V5", "V6", "V7", "V8", "V9", "V10", "V11", "V12", "V13"])
    assert.ok(
      c.rows.some((r) => r.id === v || r.id.startsWith(`${v}-`)),
      `${v} missing`,
    );
  // Variants inside rows: V3 BF16 ×3 + INT8 ×4, V9 four MLX widths, V11 eight GGUF types.
  assert.equal(c.rows.filter((r) => r.id.startsWith("V3-")).length, 7);
  assert.equal(c.rows.filter((r) => r.id.startsWith("V9-")).length, 4);
  assert.equal(c.rows.filter((r) => r.id.startsWith("V11-")).length, 8);
  for (const r of c.rows) {
    assert.ok(c.definitions[r.measured.definition], `${r.id}: definition ${r.measured.definition}`);
    assert.ok(r.measuredMs > 0 && r.engine.date && r.modelSupportSince && r.source, r.id);
    assert.ok(r.sourceKey && r.family, `${r.id}: grouping keys`);
  }
  assert.equal(c.rows.find((r) => r.id === "V1")!.measuredMs, 7.28);
  assert.ok(Math.abs(c.rows.find((r) => r.id === "V11-Q8_0")!.measuredMs - 1000 / 22.87) < 1e-9);
});

test("a bad corpus names the file, line and column", () => {
  assert.throws(
    () => parseCorpus("rows:\n  - id: X\n    label: x\n", "c.yaml"),
    (e: unknown) =>
      e instanceof InputError && /c\.yaml:\d+:\d+/.test(e.message) && /hardware is missing/.test(e.message),
  );
  const good = shippedCorpus();
  assert.ok(good.rows.length > 0);
  assert.throws(
    () => parseCorpus("rows: [\n", "bad.yaml"),
    (e: unknown) => e instanceof InputError && /bad\.yaml:\d+:\d+/.test(e.message),
  );
  const text = `rows:\n  - id: A\n    label: a\n    model: qwen3-8b\n    precision: bf16\n    hardware: { device: h100-sxm, count: 1 }\n    parallelism: { tp: 1 }\n    engine: { name: vllx, date: 2025-10, cudaGraphs: true }\n    modelSupportSince: 2025-04\n    workload: { batch: 1, inputLen: 1, outputLen: 2 }\n    measured: { value: 7, unit: ms/token, quantity: q, definition: "a long definition of the measured value here" }\n    source: s\n`;
  assert.throws(
    () => parseCorpus(text, "e.yaml"),
    (e: unknown) => e instanceof InputError && /e\.yaml:8:\d+/.test(e.message) && /engine\.name/.test(e.message),
  );
});

test("grouping keys, kind and benchmark concurrency are checked with file, line and column", () => {
  const row = (extra: string, workload = "{ batch: 1, inputLen: 1, outputLen: 2 }") =>
    `rows:\n  - id: A\n    label: a\n    model: qwen3-8b\n    precision: bf16\n    hardware: { device: h100-sxm, count: 1 }\n    parallelism: { tp: 1 }\n    engine: { name: vllm, date: 2025-10, cudaGraphs: true }\n    modelSupportSince: 2025-04\n    workload: ${workload}\n    measured: { value: 7, unit: ms/token, quantity: q, definition: "a long definition of the measured value here" }\n    source: s\n${extra}`;
  const bad = (text: string, pattern: RegExp) =>
    assert.throws(
      () => parseCorpus(text, "g.yaml"),
      (e: unknown) => e instanceof InputError && /g\.yaml:\d+:\d+/.test(e.message) && pattern.test(e.message),
    );
  bad(row("    family: qwen3\n"), /sourceKey must be text/);
  bad(row("    sourceKey: s\n"), /family must be text/);
  bad(row("    sourceKey: Some Blog\n    family: qwen3\n"), /sourceKey "Some Blog" must be a lower-case slug/);
  bad(
    row("    sourceKey: s\n    family: qwen3\n    kind: serving\n"),
    /kind "serving" is not one of decode, benchmark/,
  );
  bad(row("    sourceKey: s\n    family: qwen3\n    kind: benchmark\n"), /benchmark needs workload\.concurrency/);
  bad(
    row("    sourceKey: s\n    family: qwen3\n", "{ batch: 1, inputLen: 1, outputLen: 2, concurrency: 4 }"),
    /workload\.concurrency 4 > 1 needs kind: benchmark/,
  );
  const ok = parseCorpus(
    row(
      "    sourceKey: s\n    family: qwen3\n    kind: benchmark\n",
      "{ batch: 4, inputLen: 230, outputLen: 220, concurrency: 4, dataset: sharegpt }",
    ),
    "g.yaml",
  ).benchmarks[0];
  assert.deepEqual(
    [ok.kind, ok.workload.concurrency, ok.workload.dataset, ok.sourceKey, ok.family],
    ["benchmark", 4, "sharegpt", "s", "qwen3"],
  );
  // A benchmark row is kept apart from the decode rows the fit uses; a row without kind is a decode row.
  assert.equal(
    parseCorpus(
      row(
        "    sourceKey: s\n    family: qwen3\n    kind: benchmark\n",
        "{ batch: 4, inputLen: 1, outputLen: 2, concurrency: 4 }",
      ),
      "g.yaml",
    ).rows.length,
    0,
  );
  assert.equal(parseCorpus(row("    sourceKey: s\n    family: qwen3\n"), "g.yaml").rows[0].kind, "decode");
});

test("the shipped corpus spans the engines, GPU generations, sources and MoE rows grouped validation needs", () => {
  const c = shippedCorpus();
  const moe = c.rows.filter((r) => requireModel(r.model).moe);
  assert.ok(moe.length >= 30, `MoE rows ${moe.length}`);
  assert.ok(new Set(c.rows.map((r) => r.engine.name)).size >= 4);
  const gen = (d: string) => (/^m\d/.test(d) ? "apple" : requireGpu(d).arch);
  assert.ok(new Set(c.rows.map((r) => gen(r.hardware.device))).size >= 3);
  assert.ok(new Set(c.rows.map((r) => r.sourceKey)).size >= 10);
  // A source key names one document: its rows cite the same repository or site, and rows citing the same text never
  // carry two keys (which would let a held-out source leak through its twin).
  const firstWord = new Map<string, string>();
  const keyOfSource = new Map<string, string>();
  for (const r of c.rows) {
    const w = r.source.split(" ")[0];
    assert.equal(firstWord.get(r.sourceKey) ?? w, w, `${r.id}: ${r.sourceKey} cites ${w}`);
    firstWord.set(r.sourceKey, w);
    assert.equal(keyOfSource.get(r.source) ?? r.sourceKey, r.sourceKey, `${r.id}: "${r.source}" under two keys`);
    keyOfSource.set(r.source, r.sourceKey);
  }
});

test("an early release's slowness sits in the release and maturity terms, not in the format it ran", () => {
  // P5: SGLang v0.4.1.post2 ran DeepSeek-V3 (FP8 block-scaled) days after support landed, 3.6× slower than the later
  // releases' rows would predict. In the full fit that excess belongs to the maturity terms and its release month,
  // so a dense FP8 model on a current SGLang is not predicted slow. (The FP8 family's own factor is no longer near
  // the 16-bit reference since the serving rows: DeepSeek-R1's block-scaled FP8 rows put it at about +0.35 per byte,
  // docs/model.md, Known limits.)
  const f = corpusFit();
  const mean = (n: string) => f.params.find((p) => p.name === n)!.posterior.mean;
  // The day-one gap of SGLang × DeepSeek-V3 at u ≈ 1 (shared, engine and engine × family maturity) and its release
  // month: together well above zero.
  const dayOne = mean("mat") + mean("mat/sglang") + mean("matf/sglang/deepseek-v3") + mean("rel/sglang/2024-12");
  assert.ok(dayOne > 0.4, String(dayOne));
  const c = shippedCorpus();
  const bench = (id: string) => c.benchmarks.find((r) => r.id === id)!;
  const step = (id: string) => predict(bench(id).input).decode.stepMs;
  // Qwen3-8B FP8 vs BF16 on SGLang v0.5.3 (measured 5.65 vs 7.19 ms at concurrency 4): FP8 predicted faster.
  assert.ok(step("B1-qwen3-8b-fp8-sglang-c4").mid < step("B1-qwen3-8b-sglang-c4").mid);
  // It is one of the two benchmark rows outside their intervals (SGLang's; +40 % on 126 rows): the claim here is the
  // format's, not the release's, so it is bounded, not pinned inside.
  const fp8 = step("B1-qwen3-8b-fp8-sglang-c4");
  assert.ok(fp8.mid < 5.65 * 1.5, JSON.stringify(fp8));
});

test("the checked-in out-of-support inflations are stamped with this corpus and code", () => {
  // The grouped cross-validation behind them refits the corpus some 80 times (tens of minutes on the 2-core host):
  // bench:model computes and writes them (`npx tsx bench/model.ts --write-inflations`) and prints every fold's figures;
  // the suite holds the file to the corpus and code it was computed from, and to its shape.
  const file = JSON.parse(readFileSync(INFLATIONS_FILE, "utf8"));
  assert.equal(
    file.stamp,
    inflationsStamp(),
    "src/model/corpus/cv-inflations.json is stale: run `npx tsx bench/model.ts --write-inflations`",
  );
  for (const s of [file.inflations.scale.dense, file.inflations.scale.moe]) assert.ok(s >= 0.5 && s <= 2, String(s));
  for (const k of Object.values(file.inflations.kinds) as { kind: string; a: number }[])
    assert.ok(k.a >= 0 && Number.isFinite(k.a), k.kind);
});

test("in sample, no configuration group's median misfit exceeds the spread its sources show", () => {
  // A configuration group: one deployment (model, format, GPU, parallelism, engine, lengths, concurrency) measured by
  // several runs or sources. Their spread (releases, flags, harnesses) is what an interval must cover; a group whose
  // median misfit (with its source offsets) exceeds both that spread and the fit's residual σ has a structural error.
  const c = shippedCorpus();
  const f = corpusFit();
  const groups = new Map<string, { y: number; p: number }[]>();
  for (const row of evidenceRows(c)) {
    const steps = rowPredictSteps(c, row, f.support);
    const p = steps.length > 1 ? predictiveSteps(f, steps, true, 0, true) : predictive(f, steps[0].sp);
    const off = f.index.get(`src/${row.sourceKey}`);
    const k = configKey(row);
    const g = groups.get(k) ?? [];
    g.push({ y: Math.log(row.measuredMs), p: Math.log(p.ms) + (off === undefined ? 0 : f.theta[off]) });
    groups.set(k, g);
  }
  const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const bad: string[] = [];
  let checked = 0;
  for (const [k, g] of groups) {
    if (g.length < 2) continue;
    checked++;
    // As bench:model counts it: the median misfit beyond both the group's own max/min spread and 10 %.
    const ys = g.map((x) => x.y);
    const spread = Math.max(...ys) - Math.min(...ys);
    const misfit = Math.abs(med(g.map((x) => x.p - x.y)));
    if (misfit > spread && misfit > Math.log(1.1)) bad.push(`${k}: ${misfit.toFixed(3)} vs ${spread.toFixed(3)}`);
  }
  assert.ok(checked >= 100, String(checked));
  // Measured 2026-12-07: 27 of 133 groups (InferenceX TensorRT-LLM B200 at EP 8 predicted 21–24 % fast and at TP 4
  // 15–19 % slow; GPUStack's all-at-once runs). The target is none: this holds the line, docs/model.md lists them.
  assert.ok(bad.length <= Math.ceil(0.22 * checked), `${bad.length} of ${checked}:\n${bad.join("\n")}`);
});

test("the fitted per-kernel cost under graph replay agrees with the H200 trace's", () => {
  // TR-h200-dense8b-graph (../shared/traces/h200): 1,613 kernels, 1.704 µs each outside streaming and host waits. The
  // trace rows are in the fit (Gaussian: never down-weighted as outliers), but ~1,000 serving rows pull on the same
  // parameters: measured 2026-12-07, the fit's Hopper graph-replay cost is 1.47 µs (80 % 1.42–1.52), 14 % under the
  // trace — the serving rows on Hopper want less kernel time than the other generations' for the same engines. The
  // claim held here is agreement within 20 %, and that the MI300X-class cost lies between its two traces' (vLLM
  // 1.99 µs, SGLang 3.53 µs). Without the trace rows the rows alone put Hopper's at 3.2 µs (docs/model.md).
  const f = corpusFit();
  const us = (dev: string) => 3 * fittedFactor(f, kernelCostCoef("cuda-graphs", dev)).mean; // REF_GRAPH_KERNEL_US
  const hopper = us("hopper-hbm");
  assert.ok(Math.abs(Math.log(hopper / 1.704)) < Math.log(1.2), `Hopper ${hopper.toFixed(2)} µs vs the trace's 1.704`);
  const cdna3 = us("cdna3-hbm");
  assert.ok(cdna3 > 1.988 && cdna3 < 3.53, `MI300X-class ${cdna3.toFixed(2)} µs`);
});

test("the trace rows are what src/trace reads from the shipped traces", async () => {
  const { analyzeTrace } = await import("../../src/trace/analyze.ts");
  const { traceStepEvidence } = await import("../../src/model/trace-evidence.ts");
  const row = shippedTraceRows().find((r) => r.id === "TR-h200-dense8b-graph")!;
  const a = await analyzeTrace([fileURLToPath(new URL(`../../../shared/traces/${row.trace}`, import.meta.url))]);
  const e = traceStepEvidence(a)!;
  assert.equal(Math.round(e.kernels), row.measured.kernels);
  assert.ok(Math.abs(e.perKernelUs - row.measured.perKernelUs) < 0.01, String(e.perKernelUs));
  assert.ok(Math.abs(e.fixedMs - row.measured.fixedMs) < 0.01, String(e.fixedMs));
});

test("the seed example and the H200 figures lie inside their intervals", () => {
  const seed = predict(SEED_DEPLOYMENT).decode.stepMs;
  assert.ok(seed.low <= 17.4 && 17.4 <= seed.high, JSON.stringify(seed));
  for (const [batch, ms] of [
    [1, 5.05],
    [64, 7.13],
  ] as const) {
    const p = predict({ model: "llama-3.1-8b", quant: "bf16", gpu: "h200", engine: "gptfast", batch }).decode.stepMs;
    assert.ok(p.low <= ms && ms <= p.high, `batch ${batch}: ${JSON.stringify(p)}`);
  }
});

test("the in-sample fit reproduces the corpus trends: TP scaling, CUDA graphs, a latency-bound V6", () => {
  const c = shippedCorpus();
  const p = (id: string) => predict(c.rows.find((r) => r.id === id)!.input);
  const ms = (id: string) => p(id).decode.stepMs.mid;
  assert.ok(ms("V2-TP2") < ms("V2-TP1") && ms("V2-TP8") < ms("V2-TP4"));
  assert.ok(ms("V2-TP1") / ms("V2-TP8") < 4);
  // V4: graphs save on the order of the measured 0.87 ms per token.
  const saved = ms("V4-eager") - ms("V4-graphs");
  assert.ok(saved > 0.4 && saved < 1.6, String(saved));
  // V6: fixed and collective terms, not bandwidth, dominate.
  const v6 = p("V6").decode.terms;
  const share = (names: string[]) => v6.filter((t) => names.includes(t.name)).reduce((s, t) => s + t.share, 0);
  assert.ok(share(["kernels", "moe-routing", "allreduce", "extra-collectives", "engine"]) > 0.6);
  // Every spread the fit estimated is a real spread, and every corpus parameter moved off or stayed near its prior.
  const f = corpusFit();
  assert.ok(f.hyper.sigma > 0.01 && f.hyper.sigma < 0.3);
  for (const q of f.params) assert.ok(Number.isFinite(q.posterior.mean) && q.posterior.sd > 0, q.name);
});
