// The parser's fast paths (label sets read once per parse and shared, the set predicted from the
// previous line, the repeated-name shortcut) must give exactly what the full parse gives: the same
// families and warnings, or the same error at the same line:column.
import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { parseExposition } from "../../src/metrics/parse.ts";
import { agree } from "../helpers/parse-paths.ts";

// Label-set texts that repeat, some invalid or odd: "}" and "\"" inside values, escapes, blanks,
// trailing commas, duplicate names, a missing quote, an empty set.
const setText = fc.constantFrom(
  'engine="0",model_name="m"',
  'engine="1",model_name="m"',
  'engine="0",le="0.5",model_name="m"',
  'engine="0",le="+Inf",model_name="m"',
  'engine="0",le="1.0",model_name="m"',
  'le="0.5"',
  'le="+Inf"',
  'a="}"',
  'a="x}y",b="2"',
  'a="\\"}"',
  'a="\\\\",b="\\n"',
  'a="1",',
  ' a = "1" ',
  'a="1",a="2"',
  'a="1" ,b="2"',
  'a="1',
  "",
  'quantile="0.5"',
  'engine="0",model_name="m",extra="e"',
  // Quoted UTF-8 label names (and a quoted name alone: an error after a metric name).
  '"a.b"="1"',
  '"}"="1",b="2"',
  'a="1","x\\"y"="2"',
  '"x"',
);
const name = fc.constantFrom("x", "x_bucket", "x_count", "x_sum", "x_total", "y", "y_bucket", "x_created", "vllm:z");
const value = fc.constantFrom(
  "1",
  "0",
  "2.5",
  "1e3",
  "NaN",
  "+Inf",
  "-1",
  "17",
  "1.0 1700000000",
  '3 # {a="b"} 1',
  "z",
);
const line = fc.oneof(
  { weight: 8, arbitrary: fc.tuple(name, setText, value).map(([n, l, v]) => `${n}{${l}} ${v}`) },
  { weight: 2, arbitrary: fc.tuple(name, value).map(([n, v]) => `${n} ${v}`) },
  // Prometheus 3 syntax: the quoted metric name opens the braces (off the label-set table).
  {
    weight: 2,
    arbitrary: fc
      .tuple(fc.constantFrom('"x"', '"x_bucket"', '"x.y"', '"x}"'), setText, value)
      .map(([n, l, v]) => `{${n}${l ? `,${l}` : ""}} ${v}`),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      "# TYPE x histogram",
      "# TYPE x counter",
      "# TYPE y gauge",
      "# HELP x help",
      "",
      'x_bucket {le="1"} 1',
      'x{le="1"}1',
      '\tx{a="1"} 2',
      '{"x"} 1',
      '"x" 1',
      "{} 1",
      '# TYPE "x.y" counter',
    ),
  },
);

test("fast paths agree with the full parse on random expositions built from repeating label sets", () => {
  fc.assert(
    fc.property(fc.array(line, { minLength: 1, maxLength: 40 }), fc.boolean(), (lines, eof) => {
      agree(`${lines.join("\n")}\n${eof ? "# EOF\n" : ""}`);
    }),
    { numRuns: 600 },
  );
});

test("fast paths agree with the full parse on vLLM-shaped bodies (predictor hits and misses)", () => {
  fc.assert(
    fc.property(
      fc.array(fc.constantFrom("0", "1", "2"), { minLength: 1, maxLength: 4 }),
      fc.array(fc.constantFrom("0.1", "0.5", "1.0", "2.5"), { minLength: 1, maxLength: 3 }),
      fc.array(fc.constantFrom("h", "g", "c"), { minLength: 1, maxLength: 5 }),
      (engines, bounds, kinds) => {
        const out: string[] = [];
        kinds.forEach((k, i) => {
          const n = `f${i}`;
          if (k === "h") {
            out.push(`# TYPE ${n} histogram`);
            for (const e of engines) {
              let c = 0;
              for (const b of [...new Set(bounds)].sort((x, y) => Number(x) - Number(y))) {
                c += 1;
                out.push(`${n}_bucket{engine="${e}",le="${b}",model_name="m"} ${c}`);
              }
              out.push(`${n}_bucket{engine="${e}",le="+Inf",model_name="m"} ${c + 1}`);
              out.push(`${n}_count{engine="${e}",model_name="m"} ${c + 1}`);
              out.push(`${n}_sum{engine="${e}",model_name="m"} 1.5`);
            }
          } else {
            out.push(`# TYPE ${n}${k === "c" ? "_total" : ""} ${k === "c" ? "counter" : "gauge"}`);
            for (const e of engines) out.push(`${n}${k === "c" ? "_total" : ""}{engine="${e}",model_name="m"} 3`);
          }
        });
        agree(`${out.join("\n")}\n`);
        agree(`${out.join("\n")}\n# EOF\n`);
      },
    ),
    { numRuns: 300 },
  );
});

test("repeated label sets share one label object per parse; results of separate parses do not", () => {
  const text = 'a_bucket{le="1",m="x"} 1\na_bucket{le="+Inf",m="x"} 2\na_count{m="x"} 2\na_sum{m="x"} 3\nb{m="x"} 4\n';
  const e1 = parseExposition(text);
  const s = e1.families.flatMap((f) => f.samples);
  assert.equal(s[2].labels, s[3].labels);
  assert.equal(s[3].labels, s[4].labels);
  assert.deepEqual(s[4].labels, { m: "x" });
  const e2 = parseExposition(text);
  assert.notEqual(e2.families[0].samples[2].labels, s[2].labels);
});
