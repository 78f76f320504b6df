// The precomputed corpus fit (priors-cache.ts): a cache file round-trips to exactly the fit a fresh run computes, and
// any change to the corpus or to the fit's code makes it stale, so a process never predicts from an outdated fit.
// (test/package/priors-cache.test.ts checks the file the real build writes into dist/.)
import assert from "node:assert/strict";
import { appendFileSync, cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { servingFiles, shippedCorpus, supportDates } from "../../src/model/corpus.ts";
import { INFLATIONS_FILE } from "../../src/model/cv.ts";
import { corpusFiles, corpusFit, PRIORS_CACHE_FILE, shippedCacheStatus } from "../../src/model/priors.ts";
import { fitCacheFile, fitCodeFiles, fitStamp, readFitCache } from "../../src/model/priors-cache.ts";
import { TRACES_FILE } from "../../src/model/trace-rows.ts";

const ENTRY = fileURLToPath(new URL("../../src/model/priors.ts", import.meta.url));
const INFL = JSON.parse(readFileSync(INFLATIONS_FILE, "utf8")).inflations;

// One fit of the shipped corpus for every test here (a fit of ~1,200 rows takes tens of seconds; the fit's
// determinism is not this file's claim, the cache's faithfulness and staleness are).
const FILES = corpusFiles();

test("the fit's code is every module priors.ts reaches: step, resolve, hardware, architecture, corpus, …", () => {
  const names = fitCodeFiles(ENTRY).map((f) => relative(dirname(ENTRY), f));
  for (const n of ["priors.ts", "step.ts", "resolve.ts", "hardware.ts", "architecture.ts", "corpus.ts", "engines.ts"])
    assert.ok(names.includes(n), `${n} missing from ${names.join(", ")}`);
  // Modules the fit never runs stay out, so editing them does not throw the cache away.
  for (const n of ["predict.ts", "whatif.ts", "fit.ts"]) assert.ok(!names.includes(n), n);
});

test("a cache file loads back to exactly a fresh fit (θ, covariance, spreads, parameters, support dates)", () => {
  const dir = mkdtempSync(join(tmpdir(), "inferscope-priors-"));
  try {
    const file = join(dir, "priors-fit.json");
    // The file precomputedPriors() writes, with the checked-in inflations (test/model/validation.test.ts checks they
    // are the grouped CV's; test/package/priors-cache.test.ts checks the real build's file end to end).
    const fit = corpusFit();
    writeFileSync(file, JSON.stringify(fitCacheFile(fit, supportDates(), fitStamp(ENTRY, FILES), INFL)));
    const r = readFitCache(file, ENTRY, FILES);
    assert.ok(r.ok, r.ok ? "" : r.detail);
    assert.deepStrictEqual(r.value.fit, fit);
    assert.deepStrictEqual(r.value.supportDates, supportDates());
    // Every kind of evidence is in the fit: decode rows, serving benchmarks and profiler-trace rows.
    const c = shippedCorpus();
    const used = new Set(r.value.fit.rowsUsed);
    for (const row of [...c.rows, ...c.benchmarks, ...c.serving]) assert.ok(used.has(row.id), row.id);
    assert.ok(
      [...used].some((id) => id.endsWith("/per-kernel")),
      "trace rows",
    );
    assert.ok(r.value.fit.names.length > 20);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a changed corpus or fit code makes the cache stale; missing or damaged files are refused, never thrown", () => {
  const dir = mkdtempSync(join(tmpdir(), "inferscope-priors-"));
  try {
    // A copy of the fit's code and corpus in the same layout: the stamp does not depend on where dist/ lives.
    const srcRoot = join(dirname(ENTRY), "..");
    const copyRoot = join(dir, "src");
    for (const f of [...fitCodeFiles(ENTRY), ...FILES]) {
      const to = join(copyRoot, relative(srcRoot, f));
      mkdirSync(dirname(to), { recursive: true });
      cpSync(f, to);
    }
    const entry = join(copyRoot, "model", "priors.ts");
    const copies = FILES.map((f) => join(copyRoot, relative(srcRoot, f)));
    const corpus = copies[0];
    const file = join(dir, "priors-fit.json");
    const fresh = { fit: corpusFit(), supportDates: supportDates() };
    writeFileSync(file, JSON.stringify(fitCacheFile(fresh.fit, fresh.supportDates, fitStamp(ENTRY, FILES))));
    assert.ok(readFitCache(file, entry, copies).ok, "same content elsewhere: same stamp");

    const text = readFileSync(corpus, "utf8");
    writeFileSync(corpus, text.replace("value: 7.28", "value: 7.29"));
    assert.notEqual(readFileSync(corpus, "utf8"), text, "the corpus edit took");
    const c = readFitCache(file, entry, copies);
    assert.ok(!c.ok && c.reason === "stale", JSON.stringify(c));
    writeFileSync(corpus, text);
    assert.ok(readFitCache(file, entry, copies).ok);
    // A serving source file and the trace rows are the fit's inputs too.
    for (const f of [copies[FILES.indexOf(servingFiles()[0])], copies[FILES.indexOf(TRACES_FILE)]]) {
      const before = readFileSync(f, "utf8");
      appendFileSync(f, "\n# an edit\n");
      const e = readFitCache(file, entry, copies);
      assert.ok(!e.ok && e.reason === "stale", `${f}: ${JSON.stringify(e)}`);
      writeFileSync(f, before);
    }
    assert.ok(readFitCache(file, entry, copies).ok);

    appendFileSync(join(copyRoot, "model", "step.ts"), "\n// a change to the step model\n");
    const s = readFitCache(file, entry, copies);
    assert.ok(!s.ok && s.reason === "stale", JSON.stringify(s));

    const m = readFitCache(join(dir, "none.json"), ENTRY, FILES);
    assert.ok(!m.ok && m.reason === "missing");
    writeFileSync(file, '{"kind":"inferscope.priors-fit",');
    const d = readFitCache(file, ENTRY, FILES);
    assert.ok(!d.ok && d.reason === "invalid", JSON.stringify(d));
    writeFileSync(
      file,
      JSON.stringify({ ...fitCacheFile(fresh.fit, fresh.supportDates, fitStamp(ENTRY, FILES), INFL), format: 0 }),
    );
    const v = readFitCache(file, ENTRY, FILES);
    assert.ok(!v.ok && v.reason === "invalid", JSON.stringify(v));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("from src/ (tsx) there is no cache: the shipped fit is computed on the fly", () => {
  assert.equal(dirname(PRIORS_CACHE_FILE), dirname(ENTRY));
  const s = shippedCacheStatus();
  assert.ok(!s.ok && s.reason === "missing", JSON.stringify(s));
});
