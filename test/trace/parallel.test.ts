// The segmented reader (parallel.ts) must give exactly what one pass gives: the same model, the
// same counts, the same warnings with the same line numbers, on files built to mislead its guesses
// of where events start.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { gunzipSync, gzipSync } from "node:zlib";
import { generateTrace } from "../../bench/gen-trace.ts";
import { KERNEL_CLASSES } from "../../src/trace/classify.ts";
import { EVENT_FIELDS, MODULE_PREFIX, ModelBuilder } from "../../src/trace/events.ts";
import { analyzeTrace } from "../../src/trace/index.ts";
import { readTraceModel } from "../../src/trace/parallel.ts";
import { type ReadOptions, readTraceFile } from "../../src/trace/reader.ts";
import { isStepAnnotation } from "../../src/trace/steps.ts";

const dir = mkdtempSync(join(tmpdir(), "inferscope-trace-parallel-"));
const SKIP = new Set(["python_function", "ac2g", "cpu_instant_event"]);
const opts = (): ReadOptions => ({
  skipCategories: SKIP,
  keepNamePrefix: { python_function: MODULE_PREFIX },
  fields: EVENT_FIELDS,
  chunkBytes: 4096,
});

async function both(file: string, segmentBytes: number, threads = 3) {
  const b1 = new ModelBuilder(undefined, KERNEL_CLASSES, isStepAnnotation);
  const one = await readTraceFile(file, (ev) => b1.add(ev), opts());
  const b2 = new ModelBuilder(undefined, KERNEL_CLASSES, isStepAnnotation);
  const par = await readTraceModel(file, b2, opts(), { threads, segmentBytes, minBytes: 0 });
  return { one, par, m1: b1.finish(), m2: b2.finish() };
}

function assertSame(r: Awaited<ReturnType<typeof both>>, o: { someKept?: boolean } = {}): void {
  const { threads, segments, ...stats } = r.par;
  assert.ok(threads > 1, "read on several threads");
  assert.ok(segments && segments.count > 2, "in several segments");
  if (o.someKept !== false) assert.ok(segments.kept >= 2, "segments read by other threads kept");
  assert.deepEqual(stats, r.one);
  assert.deepEqual(r.m2, r.m1);
}

/** A Kineto-like file whose events carry arrays of objects, and strings with "},\n  {" in them:
 * places where a '{' follows "}," inside an event. */
function awkward(n: number, o: { bad?: number[]; topArray?: boolean; cut?: number } = {}): string {
  const evs: string[] = [];
  for (let i = 0; i < n; i++) {
    const ts = 1000 + i * 10;
    if (o.bad?.includes(i)) {
      evs.push(`{"ph": "X", "cat": "kernel", "name": "broken ${i}", "ts": ${ts}, "dur": 1,, "pid": 0}`);
      continue;
    }
    switch (i % 5) {
      case 0:
        evs.push(
          `{\n    "ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 100,\n    "ts": ${ts}, "dur": 2,\n    "args": {"correlation": ${i}, "External id": ${i}}\n  }`,
        );
        break;
      case 1:
        // Nested objects in an array: "}, {" inside the event.
        evs.push(
          `{\n    "ph": "X", "cat": "kernel", "name": "gemm_${i % 7}", "pid": 0, "tid": 7,\n    "ts": ${ts + 3}, "dur": 4,\n    "args": {"correlation": ${i - 1}, "device": 0, "stream": 7,\n      "shapes": [\n        {"a": [1, 2]},\n        {"b": {"c": 3}},\n        {"d": "x"}\n      ]}\n  }`,
        );
        break;
      case 2:
        // A skipped Python frame whose name holds the event separator.
        evs.push(
          `{\n    "ph": "X", "cat": "python_function", "name": "f.py(1): g },\\n  { h", "pid": 1, "tid": 100,\n    "ts": ${ts}, "dur": 1,\n    "args": {"Python id": ${i}}\n  }`,
        );
        break;
      case 3:
        // A kept string value with the separator in it ("}, {" inside a string of a kept event).
        evs.push(
          `{\n    "ph": "X", "cat": "cpu_op", "name": "aten::mm }, { x", "pid": 1, "tid": 100,\n    "ts": ${ts}, "dur": 3,\n    "args": {"External id": ${i}, "note": "}, {\\"ph\\": \\"X\\"}"}\n  }`,
        );
        break;
      default:
        evs.push(
          `{\n    "ph": "X", "cat": "user_annotation", "name": "execute_context_0(0)_generation_${i % 9}(${i % 9})", "pid": 1, "tid": 100,\n    "ts": ${ts}, "dur": 9\n  }`,
        );
    }
  }
  const events = evs.join(",\n  ");
  const text = o.topArray
    ? `[\n  ${events}\n]\n`
    : `{\n  "schemaVersion": 1,\n  "deviceProperties": [{"id": 0}, {"id": 1}],\n  "traceEvents": [\n  ${events}\n  ],\n  "devices": [{"a": 1}, {"b": {"c": 2}}],\n  "traceName": "x"\n}\n`;
  return o.cut ? text.slice(0, o.cut) : text;
}

test("segmented read of a generated decode trace equals one pass, model and analysis", async () => {
  const p = join(dir, "gen.pt.trace.json");
  await generateTrace(p, { targetBytes: 3e6, layers: 8, seed: 5 });
  for (const seg of [64 * 1024, 300 * 1024]) assertSame(await both(p, seg));
  const a1 = await analyzeTrace([p], { threads: 1 });
  const a2 = await analyzeTrace([p], { threads: 2, segmentBytes: 256 * 1024, parallelMinBytes: 0 });
  assert.equal(a1.ranks[0]!.info.readThreads, 1);
  assert.equal(a2.ranks[0]!.info.readThreads, 2);
  for (const r of [...a1.ranks, ...a2.ranks]) (r.info as { readThreads?: number }).readThreads = 0;
  assert.deepEqual(a2, a1);
});

test("real traces (vLLM eager on B200, HF Qwen on MI300X, an SGLang capture), decompressed: a segmented read equals one pass", async () => {
  const shared = new URL("../../../shared/traces/tracelens/", import.meta.url).pathname;
  for (const f of [
    "b200/eager_trace.json.gz",
    "mi300/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
    "inference/sglang_decode/capture_traces/bs_32_rank0.json.gz",
  ]) {
    const p = join(dir, "real.json");
    writeFileSync(p, gunzipSync(readFileSync(join(shared, f))));
    const r = await both(p, 1024 * 1024);
    assertSame(r);
    const a1 = await analyzeTrace([p], { threads: 1 });
    const a2 = await analyzeTrace([p], { threads: 2, segmentBytes: 1024 * 1024, parallelMinBytes: 0 });
    assert.equal(a2.ranks[0]!.info.readThreads, 2, f);
    for (const x of [...a1.ranks, ...a2.ranks]) (x.info as { readThreads?: number }).readThreads = 0;
    assert.deepEqual(a2, a1, f);
  }
});

test("segment starts guessed inside events (nested objects, separators in strings) are caught and read again", async () => {
  const p = join(dir, "awkward.json");
  writeFileSync(p, awkward(4000));
  let reread = 0;
  for (const seg of [64 * 1024, 90 * 1024, 150 * 1024]) {
    const r = await both(p, seg);
    assertSame(r);
    reread += r.par.segments!.reread;
  }
  // Some guesses must have landed inside an event for this test to test anything.
  assert.ok(reread > 0, "some segments were read again");
});

test("bad events, a truncated file and the top-level array form: same warnings and line numbers", async () => {
  const bad = join(dir, "bad.json");
  writeFileSync(bad, awkward(4000, { bad: [5, 1500, 1501, 2999, 3998] }));
  const r = await both(bad, 64 * 1024);
  assertSame(r);
  assert.equal(r.one.badEvents, 5);
  assert.match(r.one.warnings.join("\n"), /bad\.json:\d+:\d+: event is not valid JSON/);

  const many = join(dir, "many-bad.json");
  writeFileSync(many, awkward(4000, { bad: Array.from({ length: 40 }, (_, k) => 7 + k * 97) }));
  const m = await both(many, 64 * 1024);
  assertSame(m, { someKept: false }); // a bad event in every segment: each is read again for its line numbers
  assert.equal(m.one.warnings.at(-1), "(further warnings not shown)");

  const full = awkward(4000);
  const cut = join(dir, "cut.json");
  writeFileSync(cut, full.slice(0, Math.floor(full.length * 0.77)));
  const c = await both(cut, 64 * 1024);
  assertSame(c);
  assert.equal(c.one.truncated, true);

  const arr = join(dir, "array.json");
  writeFileSync(arr, awkward(4000, { topArray: true }));
  assertSame(await both(arr, 64 * 1024));
});

test("a gzip file, a small file or one thread: read in one pass", async () => {
  const p = join(dir, "small.json");
  writeFileSync(p, awkward(50));
  const b = new ModelBuilder(undefined, KERNEL_CLASSES);
  assert.equal((await readTraceModel(p, b, opts(), { threads: 4 })).threads, 1);
  assert.equal((await readTraceModel(p, b, opts(), { threads: 1, minBytes: 0 })).threads, 1);
  const gz = join(dir, "big.json.gz");
  writeFileSync(gz, gzipSync(awkward(4000)));
  assert.equal((await readTraceModel(gz, b, opts(), { threads: 4, minBytes: 0, segmentBytes: 65536 })).threads, 1);
});
