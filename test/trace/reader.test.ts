import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { gzipSync } from "node:zlib";
import fc from "fast-check";
import { InputError } from "../../src/errors.ts";
import { type RawEvent, readTraceFile, TraceScanner } from "../../src/trace/reader.ts";
import { TraceBuilder } from "./helpers.ts";

const dir = mkdtempSync(join(tmpdir(), "inferscope-trace-reader-"));

function scanInChunks(text: string | Buffer, sizes: number[]) {
  const events: RawEvent[] = [];
  const s = new TraceScanner((e) => events.push(e));
  const buf = Buffer.isBuffer(text) ? text : Buffer.from(text);
  let i = 0;
  let k = 0;
  while (i < buf.length) {
    const n = Math.max(1, sizes[k++ % sizes.length]!);
    s.push(buf.subarray(i, i + n));
    i += n;
  }
  const complete = s.end();
  return { events, stats: s.stats, complete };
}

function sample(): TraceBuilder {
  const b = new TraceBuilder();
  b.leading.deviceProperties = [{ id: 0, name: 'NVIDIA H100 "SXM" \\ 80GB', props: { a: [1, { b: "}" }] } }];
  b.annotation("execute_context_0(0)_generation_4(4)", 100, 50);
  const c = b.launch(110);
  b.kernel('void k<"q\\\\">(char const*) {brace} [x]', 120, 5, { corr: c });
  b.python("x.py(1): f{", 100, 1);
  b.trailing.distributedInfo = { backend: "nccl", rank: 3, world_size: 4 };
  b.trailing.ERROR = ['CUPTI error "x"'];
  return b;
}

test("events and metadata are identical however the bytes are chunked (escapes, braces in strings, trailing metadata)", () => {
  const text = sample().json();
  const truth = JSON.parse(text);
  for (const sizes of [[1], [2], [3], [7], [64], [5, 1, 13, 2], [text.length]]) {
    const r = scanInChunks(text, sizes);
    assert.ok(r.complete);
    assert.deepEqual(r.events, truth.traceEvents, `chunks ${sizes}`);
    assert.deepEqual(r.stats.metadata.distributedInfo, truth.distributedInfo);
    assert.deepEqual(r.stats.metadata.deviceProperties, truth.deviceProperties);
    assert.deepEqual(r.stats.metadata.ERROR, truth.ERROR);
    assert.equal(r.stats.metadata.traceName, truth.traceName);
    assert.equal(r.stats.metadata.schemaVersion, 1);
  }
});

test("property: random chunkings of random traces give the events JSON.parse gives", () => {
  const str = fc.string({ unit: fc.constantFrom("a", '"', "\\", "{", "}", "[", "]", ",", ":", "é", "\u2028", " ") });
  fc.assert(
    fc.property(
      fc.array(fc.record({ name: str, ts: fc.double({ min: 0, max: 1e12, noNaN: true }), n: fc.integer() }), {
        maxLength: 6,
      }),
      fc.array(fc.integer({ min: 1, max: 40 }), { minLength: 1, maxLength: 8 }),
      (evs, sizes) => {
        const doc = {
          schemaVersion: 1,
          traceEvents: evs.map((e) => ({ ph: "X", cat: "kernel", name: e.name, ts: e.ts, args: { n: e.n } })),
          tail: evs.map((e) => e.name),
        };
        const text = JSON.stringify(doc, null, 1);
        const r = scanInChunks(text, sizes);
        assert.deepEqual(r.events, doc.traceEvents);
        assert.deepEqual(r.stats.metadata.tail, doc.tail);
      },
    ),
    { numRuns: 150 },
  );
});

test("property: arbitrary bytes never hang the scanner: it either finishes or throws an InputError", () => {
  const token = fc.constantFrom(
    "{",
    "}",
    "[",
    "]",
    '"',
    "\\",
    ",",
    ":",
    " ",
    "\n",
    "a",
    "1",
    '"traceEvents"',
    "\u00ff",
  );
  fc.assert(
    fc.property(fc.array(token, { maxLength: 60 }), fc.integer({ min: 1, max: 7 }), (toks, size) => {
      try {
        scanInChunks(toks.join(""), [size]);
      } catch (e) {
        assert.ok(e instanceof InputError, String(e));
      }
    }),
    { numRuns: 400 },
  );
});

test("huge integers, invalid UTF-8 and broken events are tolerated and counted", () => {
  const good =
    '{"ph":"X","cat":"kernel","name":"ok","ts":1,"dur":2,"args":{"Python id":123456789012345678901234567890,"correlation":18446744073709551615}}';
  const badUtf8 = Buffer.concat([
    Buffer.from('{"ph":"X","cat":"kernel","name":"bad'),
    Buffer.from([0xff, 0xfe]),
    Buffer.from('","ts":3,"dur":1}'),
  ]);
  const broken = '{"ph":"X","cat":"kernel","name":"x","ts":01}';
  const text = Buffer.concat([
    Buffer.from(`{"traceEvents":[${good},`),
    badUtf8,
    Buffer.from(`,${broken},42,{"ph":"M","name":"process_name"}]}`),
  ]);
  const r = scanInChunks(text, [9]);
  assert.equal(r.stats.events, 4);
  assert.equal(r.stats.invalidUtf8, 1);
  assert.equal(r.stats.badEvents, 1);
  assert.equal(r.events.length, 3);
  assert.equal(r.events[0]!.args!.correlation, 2 ** 64); // 18446744073709551615 rounds to 2^64
  assert.equal(r.events[1]!.name, "bad\ufffd\ufffd");
  assert.ok(
    r.stats.warnings.some((w) => /1:\d+: event is not valid JSON/.test(w)),
    r.stats.warnings.join("\n"),
  );
  assert.ok(r.stats.warnings.some((w) => /not an object/.test(w)));
});

test("category pre-filter skips events without decoding them", () => {
  const b = sample();
  const events: RawEvent[] = [];
  const s = new TraceScanner((e) => events.push(e), { skipCategories: new Set(["python_function", "ac2g"]) });
  s.push(Buffer.from(b.json()));
  assert.ok(s.end());
  assert.equal(s.stats.skippedByCategory, 2);
  assert.ok(events.every((e) => e.cat !== "python_function" && e.cat !== "ac2g"));
  assert.equal(events.length, b.events.length - 2);
});

test("Chrome's bare-array format is read too", () => {
  const r = scanInChunks(
    '[{"ph":"X","cat":"kernel","name":"a","ts":1,"dur":1},\n{"ph":"X","cat":"kernel","name":"b","ts":2,"dur":1}]',
    [4],
  );
  assert.equal(r.events.length, 2);
  assert.ok(r.stats.sawTraceEvents);
});

test("not JSON: a clear error with file, line and column", async () => {
  const p = join(dir, "notjson.json");
  writeFileSync(p, "\n\n  hello world");
  await assert.rejects(
    readTraceFile(p, () => {}),
    (e: unknown) => {
      assert.ok(e instanceof InputError);
      assert.match((e as Error).message, /notjson\.json:3:3: not JSON: the file starts with "hello world"/);
      return true;
    },
  );
});

test("truncated JSON: partial results up to the cut, with the position", async () => {
  const text = sample().json();
  const p = join(dir, "cut.json");
  writeFileSync(p, text.slice(0, text.indexOf('"cat": "kernel"') + 20));
  const events: RawEvent[] = [];
  const st = await readTraceFile(p, (e) => events.push(e));
  assert.ok(st.truncated);
  assert.equal(events.length, 3); // annotation, runtime, flow; the kernel was cut
  assert.match(st.warnings.join("\n"), /cut\.json:\d+:\d+: the file ends inside an event; results cover the 3 events/);
});

test("gzip is detected by content; a truncated gzip gives partial results and says so", async () => {
  const b = new TraceBuilder();
  for (let i = 0; i < 3000; i++) b.kernel(`kernel_${i % 7}`, i * 10, 5, { corr: i });
  const gz = gzipSync(b.json());
  const whole = join(dir, "whole.trace.bin");
  writeFileSync(whole, gz);
  const all: RawEvent[] = [];
  const st = await readTraceFile(whole, (e) => all.push(e), { chunkBytes: 4096 });
  assert.ok(st.gzip);
  assert.equal(all.length, 3000);
  assert.ok(!st.truncated);
  const cut = join(dir, "cut.json.gz");
  writeFileSync(cut, gz.subarray(0, Math.floor(gz.length / 2)));
  const part: RawEvent[] = [];
  const st2 = await readTraceFile(cut, (e) => part.push(e), { chunkBytes: 4096 });
  assert.ok(st2.truncated);
  assert.ok(part.length > 100 && part.length < 3000, String(part.length));
  assert.match(st2.warnings.join("\n"), /truncated gzip after \d+ uncompressed bytes/);
});

test("an uncompressed file is read into three buffers in turn, events across their edges intact", async () => {
  // A fresh buffer per chunk costs a page fault per 4 KiB (reader.ts): the chunks the scanner gets
  // must come from a few buffers reused, while events cut by a chunk edge still read whole.
  const b = new TraceBuilder();
  for (let i = 0; i < 3000; i++) b.kernel(`kernel_${i % 7}`, i * 10, 5, { corr: i });
  const p = join(dir, "reuse.json");
  writeFileSync(p, b.json());
  const seen = new Set<ArrayBufferLike>();
  const push = TraceScanner.prototype.push;
  TraceScanner.prototype.push = function (chunk: Buffer) {
    seen.add(chunk.buffer);
    return push.call(this, chunk);
  };
  try {
    const events: RawEvent[] = [];
    const st = await readTraceFile(p, (e) => events.push(e), { chunkBytes: 4096 });
    assert.ok(st.bytes > 40 * 4096, String(st.bytes));
    assert.equal(events.length, 3000);
    assert.deepEqual(
      events.map((e) => [e.name, e.ts]),
      Array.from({ length: 3000 }, (_, i) => [`kernel_${i % 7}`, i * 10]),
    );
    assert.ok(seen.size <= 3, `${seen.size} distinct buffers`);
  } finally {
    TraceScanner.prototype.push = push;
  }
});
