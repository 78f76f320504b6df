// The serving-benchmark corpus (src/model/corpus/serving/*.yaml): every shipped row loads and describes a deployment the
// catalog can take (model, GPU, recipe, KV dtype, parallelism, engine release); a malformed file names its file, line
// and column; the decode corpus the fit reads is untouched by it.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { InputError } from "../../src/errors.ts";
import { requireModel } from "../../src/model/architecture.ts";
import {
  CORPUS_FILE,
  definitionOf,
  loadCorpus,
  parseCorpus,
  parseServingSource,
  rowInput,
  servingFiles,
  shippedCorpus,
} from "../../src/model/corpus.ts";
import { requireGpu } from "../../src/model/hardware.ts";
import { kvFormat, recipe } from "../../src/model/quantization.ts";
import { resolveRelease } from "../../src/model/releases.ts";
import { ENGINES, resolve } from "../../src/model/resolve.ts";

test("the shipped serving files load, apart from the decode corpus the fit reads", () => {
  const c = shippedCorpus();
  const files = servingFiles();
  assert.ok(files.length >= 1);
  assert.deepEqual(
    c.sources.map((s) => s.file),
    files,
  );
  assert.ok(c.serving.length > 0);
  // The decode rows and the six B1 benchmark rows are exactly the decode file's.
  const alone = parseCorpus(readFileSync(CORPUS_FILE, "utf8"), CORPUS_FILE);
  assert.deepStrictEqual(c.rows, alone.rows);
  assert.deepStrictEqual(c.benchmarks, alone.benchmarks);
  const ids = new Set([...c.rows, ...c.benchmarks].map((r) => r.id));
  const keys = new Set(c.sources.map((s) => s.key));
  for (const r of c.serving) {
    assert.ok(!ids.has(r.id), `${r.id} twice`);
    ids.add(r.id);
    assert.equal(r.kind, "benchmark", r.id);
    assert.ok(r.workload.concurrency !== undefined && r.workload.concurrency >= 1, r.id);
    assert.ok(keys.has(r.sourceKey), `${r.id}: source ${r.sourceKey}`);
    assert.ok(r.address && /^https?:\/\//.test(r.address), `${r.id}: address`);
    assert.ok(r.published && r.source && r.family, r.id);
    assert.ok(definitionOf(c, r).length >= 20, `${r.id}: definition ${r.measured.definition}`);
    assert.ok(r.measuredMs > 0 && Number.isFinite(r.measuredMs), r.id);
  }
  for (const s of c.sources) {
    assert.ok(
      c.serving.some((r) => r.sourceKey === s.key),
      `${s.key} has no rows`,
    );
    for (const t of [s.timing.tpot, s.timing.warmup]) assert.ok(t.length > 0, s.key);
  }
});

test("every serving row's model, GPU, recipe, KV dtype, parallelism, engine and release resolve", () => {
  for (const r of shippedCorpus().serving) {
    const arch = requireModel(r.model);
    requireGpu(r.hardware.device);
    recipe(r.precision, arch);
    kvFormat(r.kvDtype ?? "auto", arch);
    assert.ok(ENGINES.includes(r.engine.name), r.id);
    const res = resolve(r.input);
    assert.equal(res.gpus, r.hardware.count, `${r.id}: GPUs`);
    assert.equal(res.tp * res.dp * res.pp, r.hardware.count, `${r.id}: TP × DP × PP is the node`);
    assert.equal(res.batch, r.workload.batch, r.id);
    if (r.engine.version !== undefined) {
      const rel = resolveRelease(r.engine.name, r.engine.version);
      assert.equal(r.engine.date, rel.date, `${r.id}: ${r.engine.version} is dated ${rel.date} (${rel.how})`);
      assert.equal(r.engine.dateApprox === true, rel.approx, `${r.id}: approx`);
    }
    assert.ok(r.modelSupportSince <= r.engine.date, `${r.id}: support ${r.modelSupportSince} after the release`);
    assert.ok(!r.published || r.engine.date <= r.published, `${r.id}: released ${r.engine.date} after publication`);
  }
});

const HEADER = `kind: inferscope.model.corpus.source
version: 1
source:
  key: t
  title: "a test source"
  address: "https://example.org/t"
  published: 2026-01-02
  harness: "vllm bench serve"
  timing: { tpot: "mean over requests", warmup: "not stated", randomRangeRatio: "not stated", ignoreEos: true }
`;
const ROW = (extra = "", over: Record<string, string> = {}) => {
  const f = {
    model: "qwen3-235b-a22b",
    hardware: "{ device: h200-sxm, count: 8, interconnect: nvlink4 }",
    parallelism: "{ tp: 8 }",
    workload: "{ batch: 16, inputLen: 1024, outputLen: 1024, concurrency: 16, dataset: random }",
    kind: "benchmark",
    ...over,
  };
  return `  - id: T1
    label: "a row"
    model: ${f.model}
    precision: fp8
    hardware: ${f.hardware}
    parallelism: ${f.parallelism}
    engine: { name: vllm, version: v0.11.0, date: 2025-10-02, cudaGraphs: true }
    modelSupportSince: 2025-04-29
    kind: ${f.kind}
    workload: ${f.workload}
    measured: { value: 21.3, unit: ms/token, quantity: "mean TPOT", definition: vllm-tpot-concurrency }
    family: qwen3-moe
${extra}`;
};
let defs: Record<string, string> | undefined;
const decodeDefs = () => {
  defs ??= parseCorpus(readFileSync(CORPUS_FILE, "utf8"), CORPUS_FILE).definitions;
  return defs;
};
const bad = (text: string, pattern: RegExp, line?: number) =>
  assert.throws(
    () => parseServingSource(text, "s.yaml", { definitions: decodeDefs() }),
    (e: unknown) =>
      e instanceof InputError &&
      new RegExp(`s\\.yaml:${line ?? "\\d+"}:\\d+`).test(e.message) &&
      pattern.test(e.message),
  );

test("a serving row takes its header's defaults and the new optional fields, and its input carries dp and KV dtype", () => {
  const s = parseServingSource(
    `${HEADER}rows:\n${ROW(
      '    kvDtype: fp8\n    also: { medianTpotMs: 21.1, p99TpotMs: 23 }\n    published: 2026-01-05\n    address: "https://example.org/t#run"\n',
      {
        parallelism: "{ tp: 1, ep: 8, dp: 8 }",
        workload:
          "{ batch: 16, inputLen: 1024, outputLen: 1024, concurrency: 16, dataset: random, randomRangeRatio: 0.8, numPrompts: 160, requestRate: 4 }",
      },
    )}`,
    "s.yaml",
    { definitions: decodeDefs() },
  );
  const r = s.rows[0];
  assert.deepEqual([r.sourceKey, r.source], ["t", "a test source"]);
  assert.deepEqual([r.published, r.address], ["2026-01-05", "https://example.org/t#run"]);
  assert.deepEqual(r.also, { medianTpotMs: 21.1, p99TpotMs: 23 });
  assert.deepEqual([r.workload.randomRangeRatio, r.workload.numPrompts, r.workload.requestRate], [0.8, 160, 4]);
  assert.deepEqual([r.input.dp, r.input.ep, r.input.tp, r.input.kvDtype], [8, 8, 1, "fp8"]);
  assert.equal(resolve(r.input).moeAllToAll, true);
  assert.deepEqual([s.source.key, s.source.timing.ignoreEos, s.source.file], ["t", true, "s.yaml"]);
  // Without its own published/address a row takes the header's; rowInput leaves dp and kvDtype out when absent.
  const plain = parseServingSource(`${HEADER}rows:\n${ROW()}`, "s.yaml", { definitions: decodeDefs() }).rows[0];
  assert.deepEqual([plain.published, plain.address], ["2026-01-02", "https://example.org/t"]);
  assert.ok(!("dp" in rowInput(plain)) && !("kvDtype" in rowInput(plain)));
});

test("a malformed serving file names its file, line and column", () => {
  bad("rows: [\n", /invalid YAML/);
  bad(`${HEADER.replace("kind: inferscope.model.corpus.source", "kind: corpus")}rows:\n${ROW()}`, /kind must be/, 1);
  bad(`${HEADER.replace("  key: t\n", "")}rows:\n${ROW()}`, /source\.key must be text/);
  bad(`${HEADER.replace("https://example.org/t", "example.org")}rows:\n${ROW()}`, /source\.address .* http/, 6);
  bad(`${HEADER.replace("ignoreEos: true", "ignoreEos: 3")}rows:\n${ROW()}`, /ignoreEos must be a boolean or text/);
  bad(`${HEADER}rows: []\n`, /non-empty list/);
  bad(`${HEADER}rows:\n${ROW("", { kind: "decode" })}`, /kind must be benchmark in a serving source file/, 19);
  bad(
    `${HEADER}rows:\n${ROW("", { workload: "{ batch: 1, inputLen: 1, outputLen: 2 }" })}`,
    /benchmark needs workload\.concurrency/,
  );
  bad(`${HEADER}rows:\n${ROW("", { model: "qwen9-1t" })}`, /row T1: unknown model "qwen9-1t"/, 11);
  bad(
    `${HEADER}rows:\n${ROW("", { parallelism: "{ tp: 8, dp: 8 }" })}`,
    /row T1: TP 8 × PP 1 × DP 8 = 64 GPUs, but --gpus is 8/,
  );
  bad(`${HEADER}rows:\n${ROW("", { parallelism: "{ tp: 8, dp: 1.5 }" })}`, /parallelism\.dp must be an integer/, 16);
  bad(
    `${HEADER}rows:\n${ROW("", { workload: "{ batch: 4, inputLen: 1, outputLen: 2, concurrency: 4, randomRangeRatio: 1.5 }" })}`,
    /randomRangeRatio must be between 0 and 1/,
    20,
  );
  bad(`${HEADER}rows:\n${ROW("    also: { p99TpotMs: fast }\n")}`, /also\.p99TpotMs must be a number/, 23);
  bad(`${HEADER}rows:\n${ROW("    also: [1, 2]\n")}`, /also must be a mapping/, 23);
  bad(`${HEADER}rows:\n${ROW("    address: example.org\n")}`, /address "example\.org" must be an http\(s\) address/);
  bad(`${HEADER}rows:\n${ROW("    kvDtype: fp3\n")}`, /row T1: .*fp3/, 11);
  bad(`${HEADER}rows:\n${ROW()}${ROW()}`, /"T1" appears twice/, 23);
  bad(
    `${HEADER}definitions:\n  vllm-tpot-concurrency: "something else entirely, longer than twenty"\nrows:\n${ROW()}`,
    /definitions\.vllm-tpot-concurrency redefines a key/,
  );
  bad(`${HEADER}rows:\n${ROW().replace("vllm-tpot-concurrency", "nope")}`, /"nope" is neither a key/);
});

test("ids are unique across the decode corpus and every serving file", () => {
  const dir = mkdtempSync(join(tmpdir(), "inferscope-serving-"));
  try {
    const a = join(dir, "a.yaml");
    const b = join(dir, "b.yaml");
    writeFileSync(a, `${HEADER}rows:\n${ROW()}`);
    writeFileSync(b, `${HEADER.replace("key: t", "key: u")}rows:\n${ROW()}`);
    assert.equal(loadCorpus(CORPUS_FILE, [a]).serving.length, 1);
    assert.throws(
      () => loadCorpus(CORPUS_FILE, [a, b]),
      (e: unknown) =>
        e instanceof InputError &&
        /b\.yaml:11:\d+/.test(e.message) &&
        /"T1" appears twice \(also in .*a\.yaml\)/.test(e.message),
    );
    writeFileSync(b, `${HEADER}rows:\n${ROW().replace("id: T1", "id: V1")}`);
    assert.throws(
      () => loadCorpus(CORPUS_FILE, [b]),
      (e: unknown) =>
        e instanceof InputError && /"V1" appears twice \(also in .*validation-public\.yaml\)/.test(e.message),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
