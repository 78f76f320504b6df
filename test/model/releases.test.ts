// Release tables (releases.ts), the corpus support and its extrapolations (support.ts), and the grouped-CV helpers
// (cv.ts): grouping keys, the inflation estimate, and what a prediction says when it leaves the corpus.
import assert from "node:assert/strict";
import { test } from "node:test";
import { UsageError } from "../../src/errors.ts";
import { shippedCorpus } from "../../src/model/corpus.ts";
import type { CvRow } from "../../src/model/cv.ts";
import { estimateInflations, familyKey, inflationFor, sourceKey } from "../../src/model/cv.ts";
import { predict, predictStep } from "../../src/model/predict.ts";
import { corpusFit } from "../../src/model/priors.ts";
import { resolveRelease } from "../../src/model/releases.ts";
import { corpusSupport, extrapolations, type RowFacts } from "../../src/model/support.ts";

test("any release name resolves to its date: v0.4.1, 0.4.1, post releases, llama.cpp builds, plain dates", () => {
  assert.equal(resolveRelease("sglang", "v0.4.1").date, resolveRelease("sglang", "0.4.1").date);
  assert.equal(resolveRelease("vllm", "v0.11.0").date, "2025-10-02");
  assert.equal(resolveRelease("sglang", "v0.5.1.post3").date, "2025-08-27");
  // A post release missing from the table is dated as its base release.
  assert.equal(resolveRelease("vllm", "0.10.1.1").date, resolveRelease("vllm", "v0.10.1").date);
  assert.equal(resolveRelease("llamacpp", "b1631").date, "2023-12-16");
  // A build between two sampled ones is interpolated by number, so it lies between their dates.
  const mid = resolveRelease("llamacpp", "b2250").date;
  assert.ok(mid > resolveRelease("llamacpp", "b2000").date && mid < resolveRelease("llamacpp", "b2500").date, mid);
  assert.equal(resolveRelease("llamacpp", "6918").date, resolveRelease("llamacpp", "b6918").date);
  assert.equal(resolveRelease("tgi", "v3.0.0").date, "2024-12-09");
  assert.equal(resolveRelease("trtllm", "2025-08").date, "2025-08-15");
  // A release the table does not list is dated by version order: midway between its listed neighbours, or at the
  // newest listed one when it sorts after all of them (and the note says so).
  const v051 = resolveRelease("sglang", "v0.5.1");
  assert.ok(v051.date >= "2025-08-23" && v051.date <= "2025-08-27" && v051.approx, JSON.stringify(v051));
  assert.match(v051.how, /midway between v0\.5\.0 .* and v0\.5\.1\.post3/);
  assert.equal(resolveRelease("vllm", "v0.2.3").date > resolveRelease("vllm", "v0.2.0").date, true);
  const newer = resolveRelease("vllm", "v0.99.0");
  assert.equal(newer.date, "2026-07-12");
  assert.match(newer.how, /sorts after its newest release v0\.25\.0: dated no earlier/);
  assert.throws(
    () => resolveRelease("sglang", "v0.4.1x"),
    (e: unknown) => e instanceof UsageError && /did you mean .*v0\.4\.1/.test(e.message),
  );
  assert.throws(() => resolveRelease("vllm", "banana"), UsageError);
});

test("grouping keys are the corpus rows' sourceKey and family", () => {
  const c = shippedCorpus();
  const row = (id: string) => c.rows.find((r) => r.id === id)!;
  // Two sections of one README are one source (gpt-fast's Benchmarks and Tensor Parallelism tables); two documents
  // are two sources.
  assert.equal(sourceKey(row("V2-TP1")), sourceKey(row("V3-TP2")));
  assert.equal(sourceKey(row("V4-eager")), sourceKey(row("V4-graphs")));
  assert.notEqual(sourceKey(row("V2-TP1")), sourceKey(row("V5-F16")));
  assert.equal(sourceKey({ ...row("V1"), sourceKey: "gpustack-perf-lab" } as never), "gpustack-perf-lab");
  assert.equal(familyKey(row("V7-d0")), familyKey(row("V10-qwen3")));
  assert.equal(familyKey({ ...row("V1"), family: "qwen3-dense" } as never), "qwen3-dense");
});

test("inflations: a kind whose held-out errors exceed their predicted spread widens; one within it does not", () => {
  const mk = (i: number, z: number, kinds: string[]): CvRow => ({
    id: `r${i}`,
    label: "",
    group: "g",
    moe: false,
    serving: false,
    datacenter: false,
    measuredMs: Math.exp(z * 0.1),
    centreMs: 1,
    logSd: 0.1,
    low: 0,
    high: 0,
    inside: true,
    error: 0,
    ratio: 1,
    extrapolations: kinds.map((k) => ({ kind: k as never, detail: "" })),
  });
  // Standard-normal quantiles: calibrated rows; "hardware" rows have errors twice their spread.
  const q = [-1.5, -1, -0.6, -0.3, 0, 0.3, 0.6, 1, 1.5];
  const rows = [...q.map((z, i) => mk(i, z, ["quant"])), ...q.map((z, i) => mk(100 + i, 2 * z, ["hardware"]))];
  const inf = estimateInflations(rows, ["source"]);
  assert.ok(inf.kinds.quant.a < 0.2, String(inf.kinds.quant.a));
  assert.ok(inf.kinds.hardware.a > 2 && inf.kinds.hardware.a < 4, String(inf.kinds.hardware.a));
  assert.equal(inf.kinds.layout.basis, "pooled");
  const f = inflationFor(
    [
      { kind: "hardware", detail: "x" },
      { kind: "quant", detail: "y" },
    ],
    inf,
  );
  const sc = inf.scale.dense;
  assert.ok(Math.abs(1 + f.a - sc * sc * (1 + inf.kinds.hardware.a + inf.kinds.quant.a)) < 1e-12);
});

test("a prediction names each extrapolation; --engine-version moves an MoE prediction across the corpus's releases", () => {
  const base = { model: "mixtral-8x7b", quant: "q4_k_m", gpu: "rtx-4090", engine: "llamacpp" as const };
  const early = predict({ ...base, engineVersion: "2023-12" });
  const late = predict({ ...base, engineVersion: "b6918" });
  assert.ok(early.decode.stepMs.mid > late.decode.stepMs.mid * 1.05, "a day-one release is slower");
  const none = predict(base);
  assert.match(none.interval!.maturity, /mixture over the \d+ llamacpp release dates/);
  // Outside the releases the corpus spans for an engine: named, with its factor.
  const gptoss = { model: "gpt-oss-120b", quant: "mxfp4", gpu: "h100-sxm", gpus: 8, tp: 8, engine: "sglang" as const };
  // (The corpus's SGLang rows start at v0.4.1.post2, 2024-12.)
  const old = predict({ ...gptoss, engineVersion: "v0.3.0" });
  const rel = old.extrapolations!.find((e) => e.kind === "release");
  assert.ok(rel && /no sglang row before 2024-12/.test(rel.detail), JSON.stringify(old.extrapolations));
  assert.ok(rel.inflation >= 1);
  // …and wider than a release the corpus ran (its release month carries no row: 0 ± τ_rel).
  const inSpan = predict({ ...gptoss, engineVersion: "v0.5.1.post3" });
  const w = (p: typeof old) => p.decode.stepMs.high / p.decode.stepMs.low;
  assert.ok(w(old) > w(inSpan), `${w(old)} vs ${w(inSpan)}`);
  assert.deepEqual(inSpan.extrapolations, []);
  // The what-if grid's fast path widens alike.
  const st = predictStep({ ...gptoss, engineVersion: "v0.3.0" }).stepMs;
  assert.ok(Math.abs(st.high / st.low - w(old)) < 1e-3, `${st.high / st.low} vs ${w(old)}`);
  assert.ok(old.interval!.notes!.some((n) => /^extrapolating: no sglang row before 2024-12; interval ×\d/.test(n)));
  // Inside the support nothing is named.
  const v1 = shippedCorpus().rows.find((r) => r.id === "V2-TP2")!;
  assert.deepEqual(predict(v1.input).extrapolations, []);
});

test("an engine and a GPU generation each measured, never together, is named engine-hardware", () => {
  const row = (id: string, engine: string, device: string): RowFacts => ({
    id,
    engine,
    date: "2025-06-01",
    family: "llama",
    since: "2024-07-01",
    device,
    formats: ["bf16"],
    tp: 1,
    ep: 1,
    link: "none",
    u: 1,
  });
  const s = corpusSupport([
    row("a", "vllm", "hopper-hbm"),
    row("b", "sglang", "blackwell-hbm"),
    row("c", "vllm", "probe"),
  ]);
  const q = (engine: string, device: string) =>
    extrapolations({ engine, family: "llama", device, formats: ["bf16"], tp: 1, ep: 1, link: "none" }, s);
  assert.deepEqual(q("vllm", "hopper-hbm"), []);
  assert.deepEqual(q("vllm", "blackwell-hbm"), [{ kind: "engine-hardware", detail: "no vllm row on blackwell-hbm" }]);
  // A device class no row measured is "hardware"; an engine no row ran is "engine": neither is named twice.
  assert.deepEqual(
    q("vllm", "cdna3-hbm").map((e) => e.kind),
    ["hardware"],
  );
  assert.deepEqual(
    q("trtllm", "hopper-hbm").map((e) => e.kind),
    ["engine"],
  );
  // A measured device (a bandwidth probe) is not a generation: another engine on it is not named.
  assert.deepEqual(q("sglang", "probe"), []);
  // On the shipped corpus (no engine has rows on every device class): every pair it lacks is named.
  const sup = corpusFit().support;
  const missing = Object.entries(sup.engineDevices).flatMap(([eng, ds]) =>
    sup.devices.filter((d) => d !== "probe" && !ds.includes(d)).map((d) => [eng, d] as const),
  );
  assert.ok(missing.length > 0, JSON.stringify(sup.engineDevices));
  for (const [eng, dev] of missing) {
    const ex = extrapolations(
      { engine: eng, family: "llama", device: dev, formats: ["bf16"], tp: 1, ep: 1, link: "none" },
      sup,
    );
    assert.ok(
      ex.some((e) => e.kind === "engine-hardware" && e.detail === `no ${eng} row on ${dev}`),
      JSON.stringify(ex),
    );
  }
});
