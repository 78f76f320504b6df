// The reader's fast path (fields given: one pass over the bytes, no JSON.parse) must hand the
// builder exactly what the general path (JSON.parse of each event) hands it, with the same counts,
// warnings and line/column positions — on the real traces in ../shared/traces and on random ones.
import assert from "node:assert/strict";
import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import fc from "fast-check";
import { EVENT_FIELDS, MODULE_PREFIX } from "../../src/trace/events.ts";
import type { EventFields } from "../../src/trace/fastevent.ts";
import { type RawEvent, type ReadOptions, readTraceFile, TraceScanner } from "../../src/trace/reader.ts";

const SKIP = new Set(["python_function", "ac2g", "fwdbwd", "trace", "cpu_instant_event", "overhead", "python"]);
const KEEP = { python_function: MODULE_PREFIX };

/** What the fast path keeps of a JSON.parse'd event. A kept field the event lacks may be present
 * as undefined on the fast path (JSON has no undefined): both count as absent. */
function project(ev: RawEvent, fields: EventFields): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const e = ev as Record<string, unknown>;
  for (const k of fields.event) {
    if (!Object.hasOwn(e, k) || e[k] === undefined) continue;
    const v = e[k];
    if (k === "args" && v !== null && typeof v === "object" && !Array.isArray(v)) {
      const a: Record<string, unknown> = {};
      for (const ak of fields.args) {
        const av = (v as Record<string, unknown>)[ak];
        if (Object.hasOwn(v, ak) && av !== undefined) a[ak] = av;
      }
      out[k] = a;
    } else out[k] = v;
  }
  return out;
}

function scan(buf: Buffer, sizes: number[], opts: ReadOptions) {
  const events: RawEvent[] = [];
  const s = new TraceScanner((e) => events.push(e), opts, "t.json");
  let i = 0;
  let k = 0;
  let error: string | undefined;
  try {
    while (i < buf.length) {
      const n = Math.max(1, sizes[k++ % sizes.length]!);
      s.push(buf.subarray(i, i + n));
      i += n;
    }
    s.end();
  } catch (e) {
    error = (e as Error).message;
  }
  return { events, stats: s.stats, error };
}

function same(buf: Buffer, sizes: number[], fields = EVENT_FIELDS, label = ""): void {
  const slow = scan(buf, sizes, { skipCategories: SKIP, keepNamePrefix: KEEP });
  const fast = scan(buf, sizes, { skipCategories: SKIP, keepNamePrefix: KEEP, fields });
  assert.equal(fast.error, slow.error, label);
  assert.deepEqual(fast.stats, slow.stats, label);
  // Events the fast path gave up on come whole from JSON.parse: compare what the builder reads.
  assert.deepEqual(
    fast.events.map((e) => project(e, fields)),
    slow.events.map((e) => project(e, fields)),
    label,
  );
}

function sharedTraces(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...sharedTraces(p));
    else if (/\.json(\.gz)?$/.test(name) && !name.startsWith("execution_details")) out.push(p);
  }
  return out;
}

test("real traces: the fast path gives the builder the same events, counts and metadata as JSON.parse", async () => {
  const files = sharedTraces("../shared/traces");
  assert.ok(files.length >= 10, `traces found: ${files.length}`);
  const opts = { skipCategories: SKIP, keepNamePrefix: KEEP };
  for (const file of files) {
    const slow: Record<string, unknown>[] = [];
    const a = await readTraceFile(file, (e) => slow.push(project(e, EVENT_FIELDS)), opts);
    assert.ok(a.parsed > 0, file);
    // Default chunks, and odd small ones that put chunk ends inside events, numbers and strings.
    for (const chunkBytes of [undefined, 4093]) {
      const fast: RawEvent[] = [];
      const b = await readTraceFile(file, (e) => fast.push(e), { ...opts, fields: EVENT_FIELDS, chunkBytes });
      assert.deepEqual(b, a, file);
      assert.deepEqual(
        fast.map((e) => project(e, EVENT_FIELDS)),
        slow,
        file,
      );
      if (chunkBytes) continue;
      // Nearly all events are read by the fast path (those it built carry only the kept fields).
      const built = fast.filter(
        (e) =>
          Object.keys(e).every((k) => EVENT_FIELDS.event.includes(k)) &&
          Object.keys(e.args ?? {}).every((k) => EVENT_FIELDS.args.includes(k)),
      ).length;
      assert.ok(built >= 0.98 * fast.length, `${file}: ${built} of ${fast.length} by the fast path`);
    }
  }
});

// Random events: values the fast path reads (strings, numbers of every shape), values it must give
// up on (escapes, non-ASCII, containers where a scalar is kept), and skipped nested values.
const strArb = fc.oneof(
  fc.constantFrom("kernel", "cpu_op", "cuda_runtime", "python_function", "X", "M", "nn.Module: Foo_0", "cat", ""),
  fc.string({ unit: fc.constantFrom("a", "b", " ", "{", "}", "[", "]", ",", ":", '"', "\\", "é", "\u0001", "\u007f") }),
);
const numArb = fc.oneof(
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.constantFrom(0, -0, 1e21, 123456789012345, 1234567890123456, 2 ** 53 + 1, 1000385.533, 5e-324, 0.1),
);
const scalarArb = fc.oneof(strArb, numArb, fc.constantFrom(true, false, null));
const valueArb = fc.letrec((tie) => ({
  v: fc.oneof(
    { depthSize: "small" },
    scalarArb,
    fc.array(tie("v"), { maxLength: 3 }),
    fc.dictionary(strArb, tie("v"), { maxKeys: 3 }),
  ),
})).v;
const keyArb = fc.constantFrom(...EVENT_FIELDS.event, "bp", "id", "ph", "cat");
const argKeyArb = fc.constantFrom(...EVENT_FIELDS.args, "grid", "queued", "Input Dims", "name");
const eventArb = fc.array(
  fc.oneof(
    fc.tuple(keyArb, valueArb),
    fc.tuple(fc.constant("args"), fc.array(fc.tuple(argKeyArb, valueArb), { maxLength: 6 })),
  ),
  { maxLength: 9 },
);
const wsArb = fc.constantFrom("", " ", "\n", "\r\n  ", "\t");

function render(members: Array<[string, unknown]>, ws: string): string {
  const parts = members.map(([k, v]) => {
    const val =
      Array.isArray(v) && k === "args" && v.every((x) => Array.isArray(x) && x.length === 2)
        ? `{${ws}${(v as Array<[string, unknown]>).map(([ak, av]) => `${JSON.stringify(ak)}${ws}:${ws}${JSON.stringify(av)}`).join(`,${ws}`)}${ws}}`
        : JSON.stringify(v);
    return `${JSON.stringify(k)}${ws}:${ws}${val}`;
  });
  return `{${ws}${parts.join(`,${ws}`)}${ws}}`;
}

test("property: random events, whitespace, chunkings and corrupted bytes read the same on both paths", () => {
  fc.assert(
    fc.property(
      fc.array(fc.tuple(eventArb, wsArb), { minLength: 1, maxLength: 8 }),
      fc.array(fc.integer({ min: 1, max: 97 }), { minLength: 1, maxLength: 4 }),
      fc.option(fc.tuple(fc.nat(), fc.constantFrom("x", "}", "{", '"', "\\", ",", ":", "-", ".", "e", "\u00e9", "\n"))),
      (events, sizes, corrupt) => {
        const body = events.map(([m, ws]) => render(m as Array<[string, unknown]>, ws)).join(",\n");
        let text = `{"schemaVersion": 1,\n"traceEvents": [\n${body}\n],\n"traceName": "x"}\n`;
        if (corrupt) {
          const at = corrupt[0] % text.length;
          text = text.slice(0, at) + corrupt[1] + text.slice(at + 1);
        }
        const buf = Buffer.from(text);
        same(buf, sizes);
        same(buf, [buf.length]);
      },
    ),
    { numRuns: Number(process.env.FC_RUNS ?? 400) },
  );
});

test("numbers: every shape JSON allows reads to the double JSON.parse gives", () => {
  const nums = [
    "0",
    "-0",
    "1",
    "-1",
    "0.5",
    "-0.0",
    "1000385.533",
    "123456789012345",
    "1234567890123456",
    "9007199254740993",
    "0.1",
    "0.30000000000000004",
    "1e5",
    "1E-7",
    "-2.5e+3",
    "5e-324",
    "1e400",
    "0.000001234",
    "12345678901234567890",
    "1.7976931348623157e308",
    "100000000000000000000000",
    "0.0000000000000000000000001",
    "3.141592653589793",
    // Kineto's 16-digit timestamps, and mantissas at 2^53 (sums at or past it take Number()).
    "5545607812504.549",
    "1365627862757.064",
    "9007199254740.991",
    "9007199254740.992",
    "9007199254740.993",
    "900719925474099.3",
    "1234567890123456.7",
    "0.00000000000000001234",
    "0.000000000000000000001",
  ];
  for (const n of nums) {
    const text = `{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": ${n}, "dur": ${n}, "args": {"correlation": ${n}, "grid": [${n}]}}]}`;
    const buf = Buffer.from(text);
    const fast = scan(buf, [buf.length], { fields: EVENT_FIELDS });
    assert.equal(fast.stats.parsed, 1, n);
    assert.ok(Object.is(fast.events[0]!.ts, JSON.parse(n)), `${n}: ${fast.events[0]!.ts}`);
    assert.ok(Object.is(fast.events[0]!.args!.correlation, JSON.parse(n)), n);
    assert.equal(fast.events[0]!.args!.grid, undefined, `${n}: read by the fast path`);
    same(buf, [buf.length], EVENT_FIELDS, n);
    same(buf, [3, 5], EVENT_FIELDS, n);
  }
});

test("property: decimals of up to 19 digits read to the double JSON.parse gives", () => {
  fc.assert(
    fc.property(
      // Mantissas around 2^53 (where the exact sum ends) as often as any others; integers often.
      fc.oneof(fc.bigInt({ min: 0n, max: 10n ** 19n }), fc.bigInt({ min: 2n ** 52n, max: 2n ** 56n })),
      fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 24 })),
      (m, f) => {
        const digits = m.toString().padStart(f + 1, "0");
        const n = f ? `${digits.slice(0, -f)}.${digits.slice(-f)}` : digits;
        const text = `{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": ${n}, "dur": -${n}}]}`;
        const ev = scan(Buffer.from(text), [text.length], { fields: EVENT_FIELDS }).events[0]!;
        return Object.is(ev.ts, JSON.parse(n)) && Object.is(ev.dur, -JSON.parse(n));
      },
    ),
    { numRuns: 3000 },
  );
});

test("invalid events found on the fast path get the general path's warning, line and column", () => {
  const text = `{"traceEvents": [\n  {"ph": "X", "cat": "kernel", "name": "a", "ts": 1},\n  {"ph": "X", "cat": "kernel", "name": "b", "ts": 01},\n  {"ph": "X", "cat": "kernel",\n "name": "c", "ts": 2,}\n]}`;
  const buf = Buffer.from(text);
  const fast = scan(buf, [buf.length], { fields: EVENT_FIELDS });
  assert.equal(fast.stats.parsed, 1);
  assert.equal(fast.stats.badEvents, 2);
  assert.match(fast.stats.warnings[0]!, /^t\.json:3:3: event is not valid JSON/);
  assert.match(fast.stats.warnings[1]!, /^t\.json:4:3: event is not valid JSON/);
  same(buf, [buf.length]);
});

test("an event whose first bytes peek into the next event's category, and kept fields holding containers", () => {
  // The category peek of a short event reaches the next one ("python_function": a skip candidate),
  // so it is first only checked; kept after all, its "ph" holds an object: the general path reads it.
  const body = ['{"ph":{}}', '{"args":{"name":{"cat":"python_function"}}}', '{"name": ["k"], "args": 3}', "{}"];
  const buf = Buffer.from(`{"traceEvents": [\n${body.join(",\n")}\n]}`);
  same(buf, [buf.length]);
  same(buf, [1]);
});

test("fast-path events all have one shape: every kept field, in one order, absent ones undefined", () => {
  // The builder reads them in a hot loop: objects built key by key in each event's own order took
  // several hidden classes there, and each new one deoptimised it.
  const text = `{"traceEvents": [
    {"ph": "X", "cat": "kernel", "name": "k", "pid": 1, "tid": 7, "ts": 1, "dur": 2, "args": {"correlation": 5, "stream": 7}},
    {"name": "m", "ph": "i", "ts": 3, "s": "g"},
    {"cat": "cpu_op", "ts": 4, "ph": "X", "dur": 1, "name": "aten::mm", "args": {"External id": 9}},
    {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "main"}}
  ]}`;
  const buf = Buffer.from(text);
  const fast = scan(buf, [buf.length], { fields: EVENT_FIELDS });
  assert.equal(fast.stats.parsed, 4);
  for (const e of fast.events) {
    assert.deepEqual(Object.keys(e), [...EVENT_FIELDS.event]);
    if (e.args !== undefined) assert.deepEqual(Object.keys(e.args), [...EVENT_FIELDS.args]);
  }
  assert.equal(fast.events[1]!.args, undefined);
  same(buf, [buf.length]);
  same(buf, [7, 3]);
});
