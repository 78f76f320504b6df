import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import fc from "fast-check";
import { ParseError } from "../../src/errors.ts";
import {
  findFamily,
  formatFromContentType,
  parseBytes,
  parseExposition,
  sniffFormat,
} from "../../src/metrics/parse.ts";

const fixture = (name: string): string => readFileSync(new URL(`./fixtures/${name}`, import.meta.url), "utf8");

function parseError(fn: () => unknown): ParseError {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof ParseError, `expected ParseError, got ${String(err)}`);
    return err;
  }
  assert.fail("expected a ParseError");
}

test("vLLM V1 0.0.4 body: colons, counters named x_total, _created gauges, histogram sample order, empty families", () => {
  const e = parseExposition(fixture("parse-vllm-v1.prom"), { contentType: "text/plain; version=0.0.4; charset=utf-8" });
  assert.equal(e.format, "prometheus-0.0.4");
  assert.deepEqual(e.warnings, []);
  const names = e.families.map((f) => `${f.name}:${f.type}`);
  assert.deepEqual(names, [
    "vllm:num_requests_running:gauge",
    "vllm:kv_cache_usage_perc:gauge",
    "vllm:prompt_tokens:counter",
    "vllm:prompt_tokens_created:gauge",
    "vllm:request_success:counter",
    "vllm:iteration_tokens_total:histogram",
    "vllm:iteration_tokens_total_created:gauge",
    "vllm:inter_token_latency_seconds:histogram",
    "vllm:lora_requests_info:gauge",
    "tgi_request_count:counter",
    "python_info:gauge",
  ]);
  const prompt = findFamily(e, "vllm:prompt_tokens_total");
  assert.equal(prompt?.name, "vllm:prompt_tokens");
  assert.equal(prompt?.help, "Number of prefill tokens processed.");
  assert.deepEqual(prompt?.samples[0], {
    name: "vllm:prompt_tokens_total",
    labels: { engine: "0", model_name: "meta-llama/Llama-3.1-8B-Instruct" },
    value: 13251,
    line: 11,
  });
  assert.equal(findFamily(e, "vllm:prompt_tokens_created")?.samples[0].value, 1753795326.9352946);
  const iter = findFamily(e, "vllm:iteration_tokens_total");
  assert.equal(iter?.samples[0].name, "vllm:iteration_tokens_total_sum");
  assert.equal(iter?.samples.length, 6);
  // Declared with no samples: still a family.
  assert.deepEqual(findFamily(e, "vllm:lora_requests_info")?.samples, []);
  // TGI: a counter without _total.
  const tgi = findFamily(e, "tgi_request_count");
  assert.equal(tgi?.type, "counter");
  assert.equal(tgi?.samples[0].name, "tgi_request_count");
});

test("OpenMetrics: family names, units, exemplars, timestamps in seconds become milliseconds", () => {
  const text = [
    "# TYPE vllm:prompt_tokens counter",
    "# HELP vllm:prompt_tokens Prefill tokens.",
    'vllm:prompt_tokens_total{engine="0"} 10.0 1700000000.123 # {trace_id="abc"} 1.0 1700000000.5',
    'vllm:prompt_tokens_created{engine="0"} 1.7e+09 1700000000.123',
    "# TYPE req_seconds histogram",
    "# UNIT req_seconds seconds",
    'req_seconds_bucket{le="0.5"} 1',
    'req_seconds_bucket{le="+Inf"} 2 # {} 3',
    "req_seconds_count 2",
    "req_seconds_sum 3.25",
    "# EOF",
  ].join("\n");
  const e = parseExposition(text, { strict: true });
  assert.equal(e.format, "openmetrics-1.0");
  const c = e.families[0];
  assert.equal(c.name, "vllm:prompt_tokens");
  assert.equal(c.samples[0].timestampMs, 1700000000123);
  assert.deepEqual(c.samples[0].exemplar, { labels: { trace_id: "abc" }, value: 1, timestamp: 1700000000.5 });
  assert.equal(c.samples[1].name, "vllm:prompt_tokens_created");
  const h = e.families[1];
  assert.equal(h.unit, "seconds");
  assert.deepEqual(h.samples[1].exemplar, { labels: {}, value: 3 });
});

test("escapes in label values and HELP; NaN and infinities; label values with #, { and }", () => {
  const text = [
    '# HELP a he said \\"hi\\"\\nand \\\\ left \\t alone',
    "# TYPE a gauge",
    'a{x="q\\"uote",y="back\\\\slash",z="new\\nline",w="keep\\d"} NaN',
    'a{x="} # {"} +Inf',
    'a{x="2"} -Inf',
    'a{x="3"} -0',
    "",
  ].join("\n");
  const e = parseExposition(text);
  const f = e.families[0];
  assert.equal(f.help, 'he said \\"hi\\"\nand \\ left \\t alone'); // 0.0.4 HELP does not unescape quotes
  assert.deepEqual(f.samples[0].labels, { x: 'q"uote', y: "back\\slash", z: "new\nline", w: "keep\\d" });
  assert.ok(Number.isNaN(f.samples[0].value));
  assert.equal(f.samples[1].labels.x, "} # {");
  assert.equal(f.samples[1].value, Infinity);
  assert.equal(f.samples[2].value, -Infinity);
  assert.ok(Object.is(f.samples[3].value, -0));
  const om = parseExposition('# HELP a x\\"y\n# TYPE a gauge\na 1\n# EOF\n', { strict: true });
  assert.equal(om.families[0].help, 'x"y');
});

test("a label named __proto__ is an ordinary label", () => {
  const e = parseExposition('a{__proto__="x",b="y"} 1\n');
  const labels = e.families[0].samples[0].labels;
  assert.deepEqual(Object.keys(labels), ["__proto__", "b"]);
  assert.equal(Object.getPrototypeOf(labels), Object.prototype);
  assert.equal(Object.getOwnPropertyDescriptor(labels, "__proto__")?.value, "x");
});

test("numbers: Go/OpenMetrics spellings, exactness of the fast path", () => {
  const vals = [
    "1",
    "-2",
    "1.5",
    "0.1",
    "1e-05",
    "1.7537953269352946e+09",
    "0000001.2e-1",
    "9223372036854775808",
    ".5",
    "5.",
    "+3",
    "Inf",
    "-inf",
    "nan",
    "123456789012345678",
    "0.013300656000000001",
  ];
  const text = vals.map((v, i) => `m{i="${i}"} ${v}`).join("\n");
  const got = parseExposition(`${text}\n`).families[0].samples.map((s) => s.value);
  const want = vals.map((v) =>
    /^[+-]?inf$/i.test(v) ? (v.startsWith("-") ? -Infinity : Infinity) : /^nan$/i.test(v) ? Number.NaN : Number(v),
  );
  assert.deepEqual(got, want);
  for (const bad of ["0x1", "1_000", "1e", "--1", "1.2.3", "infinit", "0b1"]) {
    const err = parseError(() => parseExposition(`m ${bad}\n`));
    assert.match(err.message, /^1:3: invalid value/);
  }
});

test("property: decimals with up to 19 digits and an exponent read to the double Number() gives", () => {
  // The fast path sums digits exactly while below 2^53; a mutation that trusts longer sums fails here.
  fc.assert(
    fc.property(
      // Mantissas around 2^53 (where the exact sum ends) as often as any others; integers often.
      fc.oneof(fc.bigInt({ min: 0n, max: 10n ** 19n }), fc.bigInt({ min: 2n ** 52n, max: 2n ** 56n })),
      fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 24 })),
      fc.option(fc.integer({ min: -30, max: 30 }), { nil: undefined }),
      (m, f, e) => {
        const digits = m.toString().padStart(f + 1, "0");
        const v = `${f ? `${digits.slice(0, -f)}.${digits.slice(-f)}` : digits}${e === undefined ? "" : `e${e}`}`;
        const got = parseExposition(`m ${v}\nm2 -${v}\n`).families.map((x) => x.samples[0]!.value);
        return Object.is(got[0], Number(v)) && Object.is(got[1], -Number(v));
      },
    ),
    { numRuns: 3000 },
  );
});

test("errors name line and column and say what was expected", () => {
  const text = '# TYPE a gauge\na 1\na{b="c" 2\n';
  const err = parseError(() => parseExposition(text, { file: "scrape.txt" }));
  assert.equal(err.message, 'scrape.txt:3:9: expected "," or "}" after the value of label "b", got "2"');
  assert.deepEqual(err.position, { file: "scrape.txt", line: 3, column: 9 });
  assert.equal(err.exitCode, 2);
  assert.match(
    parseError(() => parseExposition("a{b=c} 1\n")).message,
    /^1:5: expected a double-quoted value for label "b", got "c"/,
  );
  assert.match(parseError(() => parseExposition("a b\n")).message, /^1:3: invalid value "b"/);
  assert.match(
    parseError(() => parseExposition("a\n")).message,
    /^1:2: expected a space and a value after "a", got end of line/,
  );
  assert.match(parseError(() => parseExposition("a.b 1\n")).message, /^1:2: /);
  assert.match(parseError(() => parseExposition('a{b="x",b="y"} 1\n')).message, /duplicate label name "b"/);
  assert.match(parseError(() => parseExposition('a{b="x} 1\n')).message, /^1:5: unterminated value for label "b"/);
});

test("lenient mode accepts what servers emit and warns; strict mode rejects the same input", () => {
  const text = [
    "# TYPE a counter",
    'a_total{le="1.0",} 1',
    "",
    "# a plain comment",
    'a_total{le="2"}  2',
    "# EOF",
  ].join("\n");
  const lenient = parseExposition(text, { format: "openmetrics-1.0" });
  assert.equal(lenient.families[0].samples.length, 2);
  const msgs = lenient.warnings.map((w) => `${w.line}:${w.column} ${w.message}`);
  assert.equal(msgs.length, 4, msgs.join("\n"));
  assert.match(msgs[0], /^2:18 trailing comma/);
  assert.match(msgs[1], /^3:1 blank lines/);
  assert.match(msgs[2], /^4:1 plain comment/);
  assert.match(msgs[3], /^5:17 expected exactly one space/);
  assert.match(
    parseError(() => parseExposition(text, { format: "openmetrics-1.0", strict: true })).message,
    /^2:18: trailing comma/,
  );
  // Prometheus text allows all of that silently.
  assert.deepEqual(parseExposition(text.replace("# EOF", ""), { format: "prometheus-0.0.4" }).warnings, []);
  // Missing # EOF: warning when lenient, error when strict.
  const noEof = "# TYPE a gauge\na 1\n";
  assert.match(parseExposition(noEof, { format: "openmetrics-1.0" }).warnings[0].message, /missing # EOF/);
  assert.match(
    parseError(() => parseExposition(noEof, { format: "openmetrics-1.0", strict: true })).message,
    /^3:1: missing # EOF/,
  );
  // CRLF line endings.
  const crlf = parseExposition("a 1\r\nb 2\r\n");
  assert.deepEqual(
    crlf.families.map((f) => f.samples[0].value),
    [1, 2],
  );
  assert.match(crlf.warnings[0].message, /CRLF/);
});

test("non-contiguous families are merged with one warning in lenient mode and rejected in strict mode", () => {
  const text = '# TYPE a gauge\na{x="1"} 1\n# TYPE b gauge\nb 1\na{x="2"} 2\n';
  const e = parseExposition(text);
  assert.deepEqual(
    e.families.map((f) => [f.name, f.samples.length]),
    [
      ["a", 2],
      ["b", 1],
    ],
  );
  assert.equal(e.warnings.length, 1);
  assert.match(e.warnings[0].message, /samples of family "a" are not contiguous/);
  assert.match(parseError(() => parseExposition(`${text}# EOF\n`, { strict: true })).message, /clashes/);
});

test("without metadata, x_bucket/x_sum/x_count in a row form one untyped family x", () => {
  const text = 'x_bucket{le="1"} 1\nx_bucket{le="+Inf"} 2\nx_sum 3\nx_count 2\ny 5\n';
  const e = parseExposition(text);
  assert.deepEqual(
    e.families.map((f) => [f.name, f.type, f.samples.length]),
    [
      ["x", "untyped", 4],
      ["y", "untyped", 1],
    ],
  );
});

test("timestamps: Prometheus text is int64 ms; OpenMetrics seconds are shifted exactly", () => {
  assert.equal(parseExposition("a 1 1700000000123\n").families[0].samples[0].timestampMs, 1700000000123);
  const om = parseExposition("a 1 1.1\nb 1 1700000000.001\nc 1 1.5e3\n# EOF\n");
  assert.deepEqual(
    om.families.map((f) => f.samples[0].timestampMs),
    [1100, 1700000000001, 1500000],
  );
  assert.match(parseExposition("a 1 1.5\n").warnings[0].message, /not an integer/);
});

test("format from Content-Type, else sniffed from # EOF", () => {
  assert.equal(formatFromContentType("application/openmetrics-text; version=1.0.0; charset=utf-8"), "openmetrics-1.0");
  assert.equal(formatFromContentType("text/plain; version=0.0.4; charset=utf-8"), "prometheus-0.0.4");
  assert.equal(formatFromContentType(undefined), "prometheus-0.0.4");
  assert.equal(sniffFormat("a 1\n# EOF\n"), "openmetrics-1.0");
  assert.equal(sniffFormat("a 1\n# EOF"), "openmetrics-1.0");
  assert.equal(sniffFormat("a 1\n"), "prometheus-0.0.4");
  // Content-Type wins over the sniff: 0.0.4 treats # EOF as a comment.
  assert.equal(
    parseExposition("a 1\n# EOF\n", { contentType: "text/plain; version=0.0.4" }).format,
    "prometheus-0.0.4",
  );
});

test("parseBytes: invalid UTF-8 is a ParseError at its line and column; BOM dropped", () => {
  const bytes = Buffer.concat([Buffer.from('a 1\nb{x="ok'), Buffer.from([0xc3, 0x28]), Buffer.from('"} 2\n')]);
  const err = parseError(() => parseBytes(bytes, { file: "body" }));
  assert.equal(err.message, "body:2:8: invalid UTF-8 byte sequence; expected UTF-8 text");
  const bom = parseBytes(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from("a 1\n")]));
  assert.equal(bom.families[0].name, "a");
  const wide = parseBytes(Buffer.from('a{x="☃ é 😀"} 1\n'));
  assert.equal(wide.families[0].samples[0].labels.x, "☃ é 😀");
});

test("engine fixtures of the whole metrics module parse without warnings", () => {
  for (const f of [
    "engine-vllm-v0.prom",
    "engine-sglang.prom",
    "engine-tgi.prom",
    "engine-llamacpp.prom",
    "engine-trtllm.prom",
    "engine-triton.prom",
    "engine-dynamo.prom",
  ]) {
    let text: string;
    try {
      text = fixture(f);
    } catch {
      continue; // owned by another module; may not exist yet
    }
    const e = parseExposition(text, { file: f });
    assert.ok(e.families.length > 0, f);
    assert.deepEqual(e.warnings, [], f);
  }
});

test("warnings are capped", () => {
  const lines: string[] = [];
  for (let i = 0; i < 50; i++) lines.push(`# TYPE f${i} bogus`, `f${i} 1`);
  const e = parseExposition(lines.join("\n") + "\n", { maxWarnings: 10 });
  assert.equal(e.warnings.length, 11);
  assert.match(e.warnings[10].message, /^40 more warnings not shown/);
});
