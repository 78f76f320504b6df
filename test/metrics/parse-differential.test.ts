// Differential test of the parser's fast paths (label-set table, its two-way predictor, the
// repeated-name shortcut, the inline read of plain decimal values) against the exact path
// (setParserFastPaths(false)): the same families, warnings and errors (line:column included), on
// the upstream conformance inputs, the engine fixtures, and generated bodies with escapes,
// exemplars, timestamps, NaN/±Inf, duplicate labels and value spellings around the fast path's limits.
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import fc from "fast-check";
import { parseExposition } from "../../src/metrics/parse.ts";
import { agree } from "../helpers/parse-paths.ts";

const shared = fileURLToPath(new URL("../../../shared/conformance/", import.meta.url));
const missing = existsSync(shared) ? undefined : `conformance data not found at ${shared}`;
const fixtures = fileURLToPath(new URL("./fixtures/", import.meta.url));

test("fast and exact paths agree on every conformance input", { skip: missing }, () => {
  let n = 0;
  const tp = join(shared, "prometheus-textparse");
  for (const f of readdirSync(tp).filter((x) => x.endsWith(".txt"))) {
    agree(readFileSync(join(tp, f), "utf8"), f);
    n++;
  }
  const om = join(shared, "openmetrics", "parsers");
  for (const d of readdirSync(om)) {
    agree(readFileSync(join(om, d, "metrics"), "utf8"), d);
    n++;
  }
  assert.ok(n >= 215, `only ${n} conformance inputs`);
});

test("fast and exact paths agree on the engine fixtures", () => {
  const files = readdirSync(fixtures).filter((f) => f.endsWith(".prom") || f.endsWith(".txt"));
  assert.ok(files.length > 5);
  for (const f of files) agree(readFileSync(join(fixtures, f), "utf8"), f);
});

// Values at and around the inline read's limits (digits, one fraction, 2^53, 22 fraction digits),
// and the spellings it leaves to number(): signs, exponents, NaN/Inf words, bad numbers.
const goodValue = fc.constantFrom(
  "0",
  "00",
  "7",
  "41.0",
  "1.",
  "0.000",
  "0.1",
  "0.3",
  "2.5",
  "123.456",
  "9007199254740991",
  "9007199254740992",
  "9007199254740993",
  "18014398509481985",
  "12345678901234567890",
  "1753795326.9352946",
  "900719925474099.3",
  "1.0000000000000000000001",
  "1.00000000000000000000001",
  "0.0000000000000000000001",
  "0.00000000000000000000001",
  "0.0000000000000000000000000001",
  "1e3",
  "1.5E-3",
  "-1",
  "-0",
  "+2.5",
  ".5",
  "NaN",
  "nan",
  "+Inf",
  "-Inf",
  "Inf",
  "infinity",
);
const badValue = fc.constantFrom("1.5.3", "1x", "0x1F", "1_000", "");
const value = fc.oneof({ weight: 150, arbitrary: goodValue }, { weight: 1, arbitrary: badValue });
const tail = fc.oneof(
  { weight: 120, arbitrary: fc.constant("") },
  {
    weight: 40,
    arbitrary: fc.constantFrom(
      " 1700000000000",
      " 1700000000.5",
      ' # {trace_id="abc"} 1.5',
      ' # {trace_id="abc"} 1.5 1700000000.123',
      ' # {"trace.id"="a\\"b"} 2',
      ' 1700000000000 # {a="b"} 0.5',
    ),
  },
  { weight: 1, arbitrary: fc.constantFrom("\t1700000000000", "  12", " ", " # {} 1", " x") },
);
// Label values with escapes and a "}" inside; duplicate and odd sets that must fail the same way.
const labelValue = fc.constantFrom(
  "0",
  "1",
  "m",
  'x\\"y',
  "\\\\",
  "a\\nb",
  "\\d",
  "}",
  "org-0/Llama-3.1-8B-Instruct-0",
);
const extraSet = fc.constantFrom('a="1",a="2"', 'a="1",', ' a = "1" ', 'a="1', "", '"a.b"="1"', 'a="1" ,b="2"');

type Kind = "histogram" | "gauge" | "counter" | "summary" | "none";
const family: fc.Arbitrary<Fam> = fc.record({
  kind: fc.constantFrom<Kind>("histogram", "gauge", "counter", "summary", "none"),
  bounds: fc.subarray(["0.005", "0.1", "0.5", "1.0", "2.5", "10.0"], { minLength: 1 }),
  series: fc.array(fc.tuple(labelValue, labelValue), { minLength: 1, maxLength: 4 }),
  values: fc.array(fc.tuple(value, tail), { minLength: 8, maxLength: 8 }),
  odd: fc.oneof({ weight: 12, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: extraSet }),
});

interface Fam {
  kind: Kind;
  bounds: string[];
  series: Array<[string, string]>;
  values: Array<[string, string]>;
  odd: string | null;
}

function body(fams: Fam[]): string {
  const out: string[] = [];
  fams.forEach((f, i) => {
    const n = `f${i % 3}`; // names repeat: later families merge or clash
    let k = 0;
    const v = (): string => {
      const [x, t] = f.values[k++ % f.values.length];
      return `${x}${t}`;
    };
    if (f.kind !== "none") out.push(`# HELP ${n} help \\n "quoted"`, `# TYPE ${n} ${f.kind}`);
    for (const [e, m] of f.series) {
      const set = `engine="${e}",model_name="${m}"`;
      if (f.kind === "histogram") {
        for (const b of [...f.bounds, "+Inf"])
          out.push(`${n}_bucket{engine="${e}",le="${b}",model_name="${m}"} ${v()}`);
        out.push(`${n}_count{${set}} ${v()}`, `${n}_sum{${set}} ${v()}`);
      } else if (f.kind === "summary") {
        out.push(`${n}{${set},quantile="0.5"} ${v()}`, `${n}_count{${set}} ${v()}`, `${n}_sum{${set}} ${v()}`);
      } else if (f.kind === "counter") out.push(`${n}_total{${set}} ${v()}`);
      else out.push(`${n}{${set}} ${v()}`);
    }
    if (f.odd !== null) out.push(`${n}{${f.odd}} ${v()}`);
  });
  return `${out.join("\n")}\n`;
}

test("fast and exact paths agree on generated bodies: escapes, exemplars, timestamps, NaN/±Inf, duplicate labels", () => {
  fc.assert(
    fc.property(fc.array(family, { minLength: 1, maxLength: 6 }), fc.boolean(), (fams, eof) => {
      const text = body(fams);
      agree(eof ? `${text}# EOF\n` : text, text);
    }),
    { numRuns: 400 },
  );
});

test("fast and exact paths agree when a set's follower alternates between families (second prediction)", () => {
  // _count's set is followed by the next series' first bucket in histograms and by the next
  // series' set in gauges: both followers are remembered, and each family switches between them.
  fc.assert(
    fc.property(
      fc.array(fc.constantFrom("h", "g"), { minLength: 2, maxLength: 8 }),
      fc.array(value, { minLength: 3, maxLength: 3 }),
      (kinds, vals) => {
        const out: string[] = [];
        kinds.forEach((k, i) => {
          out.push(`# TYPE f${i} ${k === "h" ? "histogram" : "gauge"}`);
          for (const e of ["0", "1", "2"]) {
            if (k === "h") {
              out.push(`f${i}_bucket{engine="${e}",le="${i % 2 ? "0.5" : "1.0"}",model_name="m"} ${vals[0]}`);
              out.push(`f${i}_bucket{engine="${e}",le="+Inf",model_name="m"} ${vals[1]}`);
              out.push(
                `f${i}_count{engine="${e}",model_name="m"} ${vals[1]}`,
                `f${i}_sum{engine="${e}",model_name="m"} ${vals[2]}`,
              );
            } else out.push(`f${i}{engine="${e}",model_name="m"} ${vals[2]}`);
          }
        });
        agree(`${out.join("\n")}\n`, out.join("\n"));
      },
    ),
    { numRuns: 300 },
  );
});

test("inline value read: the doubles Number() gives at its limits", () => {
  // 2^53 + 1 rounds; 22 fraction digits is the last exact power of ten; 23 goes through number().
  const texts = [
    "9007199254740993",
    "1.0000000000000000000001",
    "0.0000000000000000000001",
    "0.00000000000000000000001",
    "41.0",
    "1.",
    "900719925474099.3",
  ];
  const e = parseExposition(texts.map((v, i) => `m${i} ${v}`).join("\n") + "\n");
  assert.deepEqual(
    e.families.map((f) => f.samples[0].value),
    texts.map((v) => Number(v)),
  );
});
