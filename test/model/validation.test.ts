// The corpus (src/model/corpus/*.yaml, validation-public.md as data) and the grouped cross-validation figures that pin
// the fitted model (cv.ts): a change that makes the left-out error, the 80 % coverage or the sharpness worse fails here.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { InputError } from "../../src/errors.ts";
import { requireModel } from "../../src/model/architecture.ts";
import { parseCorpus, shippedCorpus } from "../../src/model/corpus.ts";
import type { CvReport } from "../../src/model/cv.ts";
import { crossValidate, INFLATIONS_FILE, inflationsStamp } from "../../src/model/cv.ts";
import { SEED_DEPLOYMENT } from "../../src/model/examples.ts";
import { requireGpu } from "../../src/model/hardware.ts";
import { predict } from "../../src/model/predict.ts";
import { corpusFit, leaveOneOut } from "../../src/model/priors.ts";

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

// One grouped cross-validation for the tests below (the grouped folds only: 32 refits).
let report: CvReport | undefined;
const cv = () => (report ??= crossValidate(shippedCorpus(), { rowLoo: false }));

test("grouped cross-validation: leave-one-source-out, -family-out and -engine-out figures pinned", () => {
  const r = cv();
  const s = r.widened.source;
  // Measured 2026-12-05 (126 decode rows, 25 sources; one offset per source, an MoE residual term, a maturity gap
  // per engine × family, the 80 % calibration per class): median |error| 10.7 %, coverage 105/126 = 83.3 % (MoE
  // 84.1 %, dense 82.5 %), median high/low 1.59× (dense 1.44×, MoE 1.66×). Targets: ≤ 12 %, 75–90 % overall and for
  // MoE, ≤ 1.6× (all met; the width narrowly). The pins are the targets, so a regression past one fails.
  assert.equal(s.folds, 25);
  assert.equal(s.all.n, 126);
  assert.ok(s.all.medianAbsError <= 0.12, `LOSO median |error| ${s.all.medianAbsError}`);
  assert.ok(s.all.coverage >= 0.75 && s.all.coverage <= 0.9, `LOSO coverage ${s.all.coverage}`);
  assert.ok(s.moe.coverage >= 0.75 && s.moe.coverage <= 0.9, `LOSO MoE coverage ${s.moe.coverage}`);
  assert.ok(s.all.medianRatio <= 1.6, `LOSO median high/low ${s.all.medianRatio}`);
  // Family (9 folds): 10.5 %, 79.4 %, 1.56×; engine (6 folds): 15.4 %, 74.6 %, 1.80×.
  const fam = r.widened.family;
  assert.ok(fam.all.medianAbsError <= 0.12 && fam.all.coverage >= 0.75, JSON.stringify(fam.all));
  const eng = r.widened.engine;
  assert.ok(eng.all.medianAbsError <= 0.16 && eng.all.coverage >= 0.72, JSON.stringify(eng.all));
  for (const g of ["source", "family", "engine"] as const)
    for (const row of r.widened[g].rows) assert.ok(row.low < row.centreMs && row.centreMs < row.high, `${g} ${row.id}`);
  // An extrapolation never narrows: a widened fold row's log-width is at least its plain one times the calibration
  // scale of its class (the only factor that may be below 1), cross-fitted like the kinds.
  for (const row of r.widened.engine.rows) {
    const p = r.plain.engine.rows.find((x) => x.id === row.id)!;
    assert.ok(row.logSd >= p.logSd * 0.5 - 1e-12, row.id);
  }
  for (const s of [r.inflations.scale.dense, r.inflations.scale.moe]) assert.ok(s >= 0.5 && s <= 2, String(s));
  // The effective number of parameters is well below the parameter count (shrinkage at work): 43.5 of 164.
  assert.ok(r.effectiveParameters > 5 && r.effectiveParameters < r.parameters * 0.6, String(r.effectiveParameters));
});

test("an early release's slowness sits in the release and maturity terms, not in the format it ran", () => {
  // P5: SGLang v0.4.1.post2 ran DeepSeek-V3 (FP8 block-scaled) days after support landed, 3.6× slower than the later
  // releases' rows would predict. In the full fit that excess belongs to the maturity terms — SGLang × DeepSeek-V3's
  // day-one gap, well above gpt-oss's on the same engine (its launch shipped tuned kernels) — and its release month;
  // the FP8 family stays near the 16-bit reference, so a dense FP8 model on a current SGLang is not predicted slow.
  const f = corpusFit();
  const mean = (n: string) => f.params.find((p) => p.name === n)!.posterior.mean;
  assert.ok(
    mean("matf/sglang/deepseek-v3") + mean("rel/sglang/2024-12") > 0.4,
    String(mean("matf/sglang/deepseek-v3")),
  );
  assert.ok(mean("matf/sglang/deepseek-v3") - mean("matf/sglang/gpt-oss") > 1, String(mean("matf/sglang/gpt-oss")));
  assert.ok(Math.abs(mean("fmt:fp8") + mean("fmt/fp8-block")) < 0.15, String(mean("fmt:fp8")));
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

test("the checked-in out-of-support inflations are the grouped CV's, for this corpus and code", () => {
  const file = JSON.parse(readFileSync(INFLATIONS_FILE, "utf8"));
  assert.equal(
    file.stamp,
    inflationsStamp(),
    "src/model/corpus/cv-inflations.json is stale: run `npx tsx bench/model.ts --write-inflations`",
  );
  assert.deepStrictEqual(file.inflations, cv().inflations);
  for (const k of Object.values(cv().inflations.kinds)) assert.ok(k.a >= 0 && Number.isFinite(k.a), k.kind);
});

test("row-level leave-one-out stays as a fourth line (it leaks siblings: far sharper than the grouped folds)", () => {
  // Every third row (42 of 126 refits, not 126: the line is bench:model's, the test keeps its shape).
  const ids = shippedCorpus().rows.map((r) => r.id);
  const l = leaveOneOut(undefined, (r) => ids.indexOf(r.id) % 3 === 0);
  assert.equal(l.rows.length, Math.ceil(ids.length / 3));
  // Measured 2026-12-05 (89 rows): median |error| 6.9 %, coverage 80/89 = 89.9 %, median high/low 1.56× (the held-out
  // row's own source offset is not used: its siblings still inform every shared parameter).
  assert.ok(l.medianAbsError <= 0.08, `median |error| ${l.medianAbsError}`);
  assert.ok(l.coverage >= 0.8 && l.coverage <= 0.93, `coverage ${l.coverage}`);
  assert.ok(l.medianRatio <= 1.65, `median high/low ${l.medianRatio}`);
  assert.ok(l.medianAbsError < cv().widened.source.all.medianAbsError);
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
