// Property tests: our writer's output parses back to the same families (both formats, strict
// OpenMetrics included); random mutations of valid inputs only ever produce a ParseError.
import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { ParseError } from "../../src/errors.ts";
import { parseExposition } from "../../src/metrics/parse.ts";
import type { ExpositionFormat, Labels, MetricFamily, Sample } from "../../src/metrics/types.ts";
import { formatExposition } from "../../src/metrics/write.ts";

const labelChar = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom('"', "\\", "\n", "#", "{", "}", " ", ",", "=", "\t", "n", "/", ":") },
  { weight: 5, arbitrary: fc.string({ minLength: 1, maxLength: 1 }) },
  { weight: 1, arbitrary: fc.constantFrom("☃", "😀", "é", "\u0000", "\r") },
);
const labelValue = fc.string({ unit: labelChar, maxLength: 12 });
// Names: legacy ones, and Prometheus 3 UTF-8 ones (any characters) that the writer must quote.
const utf8Name = fc.string({ unit: labelChar, minLength: 1, maxLength: 8 });
const labelName = fc
  .oneof(
    { weight: 3, arbitrary: fc.stringMatching(/^[a-zA-Z_][a-zA-Z0-9_]{0,6}$/) },
    { weight: 1, arbitrary: fc.constantFrom("label.with.dots", "http.status", "a:b", "é") },
    { weight: 1, arbitrary: utf8Name },
  )
  .filter((n) => n !== "le" && n !== "quantile" && n !== "__proto__");
const labelSet = fc.dictionary(labelName, labelValue, { maxKeys: 3, noNullPrototype: true });
const baseName = fc.oneof(
  { weight: 3, arbitrary: fc.stringMatching(/^[a-zA-Z_:][a-zA-Z0-9_:]{0,8}$/) },
  { weight: 1, arbitrary: fc.constantFrom("my.metric", "go.gc_duration_seconds", "Heizöl 10€", "0starts_with_digit") },
  { weight: 1, arbitrary: utf8Name },
);
const help = fc.option(
  fc.string({ unit: labelChar, maxLength: 20 }).filter((h) => !/^[ \t]/.test(h) && !h.endsWith("\r")),
  { nil: undefined },
);

/** Distinct label sets (by content) so no two series collide. */
function distinct(sets: Labels[]): Labels[] {
  const seen = new Set<string>();
  return sets.filter((l) => {
    const k = JSON.stringify(Object.entries(l).sort());
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}

interface Gen {
  type: MetricFamily["type"];
  base: string;
  help: string | undefined;
  sets: Labels[];
  values: number[];
  ts: number | undefined;
  bounds: number[];
}

const family = (om: boolean) =>
  fc.record({
    type: om
      ? fc.constantFrom("counter", "gauge", "histogram", "summary", "untyped", "info", "stateset", "gaugehistogram")
      : fc.constantFrom("counter", "gauge", "histogram", "summary", "untyped"),
    base: baseName,
    help,
    sets: fc.array(labelSet, { minLength: 0, maxLength: 3 }).map(distinct),
    values: fc.array(fc.double(), { minLength: 8, maxLength: 8 }),
    ts: fc.option(fc.integer({ min: -1e12, max: 4e12 }), { nil: undefined }),
    bounds: fc.uniqueArray(fc.double({ noNaN: true, noDefaultInfinity: true, min: -1e6, max: 1e9 }), { maxLength: 4 }),
  });

const nonNeg = (v: number): number => (Number.isNaN(v) ? 0 : Math.abs(v));
const int = (v: number): number => Math.floor(nonNeg(v) % 1e9);

/** Builds a family that is valid under the strict OpenMetrics rules (and 0.0.4). */
function build(g: Gen, i: number, om: boolean): MetricFamily {
  // Unique, and no family name is another's name plus a suffix; a stateset's name is also a label name.
  const name = g.type === "stateset" ? `${g.base.replace(/:/g, "_")}_${i}` : `${g.base}_${i}`;
  const samples: Sample[] = [];
  const push = (n: string, labels: Labels, value: number): void => {
    samples.push({ name: n, labels, value, timestampMs: g.ts, exemplar: undefined, line: 0 });
  };
  const sets = g.sets.length ? g.sets : [{}];
  let k = 0;
  const v = (): number => g.values[k++ % g.values.length];
  for (const l of sets) {
    switch (g.type) {
      case "gauge":
      case "untyped":
        push(name, l, v());
        break;
      case "counter":
        push(`${name}_total`, l, nonNeg(v()));
        if (om && k % 2 === 0) {
          samples[samples.length - 1].exemplar = { labels: { id: String(k) }, value: v(), timestamp: 1.5 };
        }
        break;
      case "info":
        push(`${name}_info`, l, 1);
        break;
      case "stateset":
        push(name, { ...l, [name]: "a" }, 1);
        push(name, { ...l, [name]: "b" }, 0);
        break;
      case "summary": {
        push(name, { ...l, quantile: "0.5" }, nonNeg(v()));
        push(name, { ...l, quantile: "0.99" }, Number.NaN);
        push(`${name}_sum`, l, nonNeg(v()));
        push(`${name}_count`, l, int(v()));
        break;
      }
      case "histogram":
      case "gaugehistogram": {
        const bounds = [...g.bounds].sort((a, b) => a - b);
        let cum = 0;
        for (const b of bounds) {
          cum += int(v()) % 100;
          push(`${name}_bucket`, { ...l, le: String(b) }, cum);
        }
        cum += int(v()) % 100;
        push(`${name}_bucket`, { ...l, le: "+Inf" }, cum);
        const negative = bounds.some((b) => b < 0);
        const gh = g.type === "gaugehistogram";
        if (gh && om) {
          push(`${name}_gcount`, l, cum);
          push(`${name}_gsum`, l, negative ? v() || 0 : nonNeg(v()));
        } else if (!negative) {
          push(`${name}_count`, l, cum);
          push(`${name}_sum`, l, nonNeg(v()));
        }
        break;
      }
    }
  }
  const f: MetricFamily = { name, type: g.type, samples };
  if (g.help !== undefined) f.help = g.help;
  return f;
}

function normalize(fams: MetricFamily[]): unknown {
  return fams.map((f) => ({
    name: f.name,
    type: f.type,
    help: f.help,
    unit: f.unit || undefined,
    samples: f.samples.map((s) => ({
      name: s.name,
      labels: Object.entries(s.labels),
      value: s.value,
      timestampMs: s.timestampMs,
      exemplar: s.exemplar,
    })),
  }));
}

for (const format of ["openmetrics-1.0", "prometheus-0.0.4"] as ExpositionFormat[]) {
  const om = format === "openmetrics-1.0";
  test(`writer output round-trips through the parser (${format}${om ? ", strict" : ""})`, () => {
    fc.assert(
      fc.property(fc.array(family(om), { maxLength: 5 }), (gens) => {
        const fams = gens.map((g, i) => build(g as Gen, i, om));
        const text = formatExposition(fams, format);
        const back = parseExposition(text, { format, strict: om });
        assert.deepEqual(back.warnings, []);
        assert.deepEqual(normalize(back.families), normalize(fams));
        // And the sniffed format agrees.
        assert.equal(parseExposition(text).format, format);
      }),
      { numRuns: 150, seed: 20260401 },
    );
  });
}

const seeds = [
  formatExposition(
    [
      {
        name: "vllm:ttft_seconds",
        type: "histogram",
        help: 'a "help"\n',
        samples: [
          { name: "vllm:ttft_seconds_bucket", labels: { engine: "0", le: "0.1" }, value: 1 },
          {
            name: "vllm:ttft_seconds_bucket",
            labels: { engine: "0", le: "+Inf" },
            value: 2,
            exemplar: { labels: { a: "b" }, value: 0.5 },
          },
          { name: "vllm:ttft_seconds_count", labels: { engine: "0" }, value: 2 },
          { name: "vllm:ttft_seconds_sum", labels: { engine: "0" }, value: 0.3 },
        ],
      },
      {
        name: "c",
        type: "counter",
        samples: [{ name: "c_total", labels: { x: 'q"\\' }, value: 3, timestampMs: 1500 }],
      },
    ],
    "openmetrics-1.0",
  ),
  '# HELP a x\n# TYPE a summary\na{quantile="0.5",b="}"} NaN 123\na_sum 1\na_count 2\n',
  'x_bucket{le="1",} 1\nx_bucket{le="+Inf"} 2\nx_sum 3\nx_count 2\n',
  '# TYPE "a.b" counter\n{"a.b_total","c.d"="1",e="2"} 1 # {"t.id"="x"} 1\nm{"q\\"r"="3"} 4\n# EOF\n',
];
const interesting = fc.constantFrom(
  " ",
  "\t",
  "\n",
  "\r",
  "#",
  "{",
  "}",
  '"',
  "\\",
  ",",
  "=",
  "_",
  "e",
  "+",
  "-",
  ".",
  "0",
  "9",
  "N",
  "I",
  "\u0000",
  "😀",
  "# EOF\n",
  "# TYPE ",
  "_total",
  "_bucket",
);
const mutation = fc.oneof(
  fc.record({ op: fc.constant("insert" as const), at: fc.nat(), s: interesting }),
  fc.record({ op: fc.constant("delete" as const), at: fc.nat(), n: fc.integer({ min: 1, max: 8 }) }),
  fc.record({ op: fc.constant("dupline" as const), at: fc.nat() }),
);

test("random mutations of valid inputs never crash or hang the parser: result or ParseError", () => {
  fc.assert(
    fc.property(fc.constantFrom(...seeds), fc.array(mutation, { minLength: 1, maxLength: 4 }), (seed, muts) => {
      let text = seed;
      for (const m of muts) {
        const at = m.at % (text.length + 1);
        if (m.op === "insert") text = text.slice(0, at) + m.s + text.slice(at);
        else if (m.op === "delete") text = text.slice(0, at) + text.slice(at + m.n);
        else {
          const start = text.lastIndexOf("\n", at - 1) + 1;
          const end = text.indexOf("\n", at);
          const line = text.slice(start, end === -1 ? text.length : end + 1);
          text = text.slice(0, start) + line + text.slice(start);
        }
      }
      for (const format of ["openmetrics-1.0", "prometheus-0.0.4"] as const) {
        for (const strict of [false, true]) {
          try {
            const e = parseExposition(text, { format, strict });
            for (const f of e.families) for (const s of f.samples) assert.equal(typeof s.value, "number");
          } catch (err) {
            if (!(err instanceof ParseError)) throw err;
            assert.match(err.message, /^\d+:\d+: /);
          }
        }
      }
    }),
    { numRuns: 400, seed: 7 },
  );
});
