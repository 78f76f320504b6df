// Prometheus 3 UTF-8 names: quoted metric names inside the braces, quoted label names, quoted
// names in HELP/TYPE/UNIT, in both formats; the errors Prometheus' parsers give for malformed ones;
// and the writer quoting such names so they read back.
import assert from "node:assert/strict";
import { test } from "node:test";
import { ParseError } from "../../src/errors.ts";
import { histogramSeries } from "../../src/metrics/histogram.ts";
import { findFamily, parseExposition, setParserFastPaths } from "../../src/metrics/parse.ts";
import type { ExpositionFormat, MetricFamily } from "../../src/metrics/types.ts";
import { formatExposition, formatLabelName, formatMetricName, formatSeries } from "../../src/metrics/write.ts";

function parseError(fn: () => unknown): ParseError {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof ParseError, `expected ParseError, got ${String(err)}`);
    return err;
  }
  assert.fail("expected a ParseError");
}

const rows = (fams: MetricFamily[]) =>
  fams.flatMap((f) => f.samples.map((s) => [f.name, f.type, s.name, { ...s.labels }, s.value]));

test("Prometheus text: quoted metric names in braces and in HELP/TYPE, quoted and plain label names mixed", () => {
  const text = [
    '# HELP "http.server.request.duration" Duration of "HTTP" requests.',
    '# TYPE "http.server.request.duration" histogram',
    '{"http.server.request.duration_bucket","http.method"="GET",le="0.1"} 3',
    '{"http.server.request.duration_bucket", "http.method" = "GET" , le="+Inf"} 5',
    '{"http.server.request.duration_count","http.method"="GET"} 5',
    '{"http.server.request.duration_sum","http.method"="GET"} 1.25',
    '# TYPE "requests.total_total" counter',
    '{"requests.total_total",code="200"} 7',
    "# TYPE my_metric gauge",
    'my_metric{"label.with.dots"="v",plain="p"} 1',
    '{"my_metric"} 2',
    '{"my.metric"} 3',
    "",
  ].join("\n");
  for (const fast of [true, false]) {
    setParserFastPaths(fast);
    try {
      const e = parseExposition(text, { format: "prometheus-0.0.4", strict: true });
      assert.deepEqual(e.warnings, []);
      assert.deepEqual(rows(e.families), [
        [
          "http.server.request.duration",
          "histogram",
          "http.server.request.duration_bucket",
          { "http.method": "GET", le: "0.1" },
          3,
        ],
        [
          "http.server.request.duration",
          "histogram",
          "http.server.request.duration_bucket",
          { "http.method": "GET", le: "+Inf" },
          5,
        ],
        [
          "http.server.request.duration",
          "histogram",
          "http.server.request.duration_count",
          { "http.method": "GET" },
          5,
        ],
        [
          "http.server.request.duration",
          "histogram",
          "http.server.request.duration_sum",
          { "http.method": "GET" },
          1.25,
        ],
        // A 0.0.4 counter's TYPE name loses its _total, quoted or not.
        ["requests.total", "counter", "requests.total_total", { code: "200" }, 7],
        ["my_metric", "gauge", "my_metric", { "label.with.dots": "v", plain: "p" }, 1],
        // A legacy name written quoted is the same name.
        ["my_metric", "gauge", "my_metric", {}, 2],
        ["my.metric", "untyped", "my.metric", {}, 3],
      ]);
      const h = e.families[0];
      assert.equal(h.help, 'Duration of "HTTP" requests.');
      const [series] = histogramSeries(h);
      assert.deepEqual(series.labels, { "http.method": "GET" });
      assert.equal(series.count, 5);
      assert.equal(series.sum, 1.25);
      assert.equal(findFamily(e, "requests.total_total")?.name, "requests.total");
    } finally {
      setParserFastPaths(true);
    }
  }
});

// The names of Prometheus' own UTF-8 parser test (model/textparse), as an OpenMetrics body.
const omBody = [
  '# HELP "go.gc_duration_seconds" A summary of the GC invocation durations.',
  '# TYPE "go.gc_duration_seconds" summary',
  '# UNIT "go.gc_duration_seconds" seconds',
  '{"go.gc_duration_seconds",quantile="0"} 4.9351e-05',
  '{"go.gc_duration_seconds",quantile="0.25"} 7.424100000000001e-05',
  '{"go.gc_duration_seconds_sum"} 0.004304266',
  '{"go.gc_duration_seconds_count"} 12',
  '{"go.gc_duration_seconds_created"} 1520872607.123',
  '# TYPE "quoted.exemplar" counter',
  '{"quoted.exemplar_total"} 1 # {"id.thing"="histogram-count-test",other="hello"} 4',
  '{"Heizölrückstoßabdämpfung 10€ metric with \\"interesting\\" {character\\nchoices}","strange©™\\n\'quoted\' \\"name\\""="6"} 10.0',
  "# EOF",
  "",
].join("\n");

test("OpenMetrics (strict): quoted names in HELP/TYPE/UNIT, samples, exemplar label names, escapes", () => {
  const e = parseExposition(omBody, { strict: true });
  assert.equal(e.format, "openmetrics-1.0");
  assert.deepEqual(e.warnings, []);
  const [gc, ex, odd] = e.families;
  assert.equal(gc.name, "go.gc_duration_seconds");
  assert.equal(gc.type, "summary");
  assert.equal(gc.unit, "seconds");
  assert.equal(gc.help, "A summary of the GC invocation durations.");
  assert.deepEqual(
    gc.samples.map((s) => s.name),
    [
      "go.gc_duration_seconds",
      "go.gc_duration_seconds",
      "go.gc_duration_seconds_sum",
      "go.gc_duration_seconds_count",
      "go.gc_duration_seconds_created",
    ],
  );
  assert.equal(ex.type, "counter");
  assert.deepEqual(ex.samples[0].exemplar, {
    labels: { "id.thing": "histogram-count-test", other: "hello" },
    value: 4,
  });
  assert.equal(odd.name, 'Heizölrückstoßabdämpfung 10€ metric with "interesting" {character\nchoices}');
  assert.deepEqual(odd.samples[0].labels, { "strange©™\n'quoted' \"name\"": "6" });
  assert.equal(odd.samples[0].value, 10);
});

test('escapes in quoted names: \\\\, \\" and \\n decoded; any other backslash kept as written (as in label values)', () => {
  const e = parseExposition('{"a\\\\b\\"c\\nd\\te", "x\\\\y"="1", "}{,="="2"} 1\n');
  const s = e.families[0].samples[0];
  assert.equal(s.name, 'a\\b"c\nd\\te');
  assert.deepEqual({ ...s.labels }, { "x\\y": "1", "}{,=": "2" });
});

test("the quoted metric name after labels: accepted with a warning (as Prometheus does), an error in strict mode", () => {
  const text = '{q="0.9","http.status",a="b"} 1\n# EOF\n';
  const e = parseExposition(text);
  assert.deepEqual(rows(e.families), [["http.status", "untyped", "http.status", { q: "0.9", a: "b" }, 1]]);
  assert.equal(e.warnings.length, 1);
  assert.match(e.warnings[0].message, /quoted metric name "http.status" after labels; expected it first/);
  assert.deepEqual([e.warnings[0].line, e.warnings[0].column], [1, 10]);
  assert.match(
    parseError(() => parseExposition(text, { strict: true })).message,
    /^1:10: quoted metric name "http.status" after labels/,
  );
  // A trailing comma after the name: Prometheus text allows it, OpenMetrics warns (strict: error).
  assert.deepEqual(parseExposition('{"a.b",} 1\n').warnings, []);
  assert.match(parseExposition('{"a.b",} 1\n# EOF\n').warnings[0].message, /^trailing comma/);
});

test("malformed quoted names are errors with line:column, in both formats and modes", () => {
  const cases: [string, RegExp][] = [
    ['{"a.b} 1', /^2:2: unterminated quoted name; expected a closing double quote/],
    ['{"a.b\\"} 1', /^2:2: unterminated quoted name/],
    ['m{"a.b="1"} 1', /^2:9: expected "=" after label name "a.b=", got "1"/],
    ['foo{"bar"} 1', /^2:5: metric name given twice: "foo" before the braces and "bar" inside them/],
    ['foo{a="1","bar"} 1', /^2:11: metric name given twice: "foo" before the braces and "bar"/],
    ['{"a","b"} 1', /^2:6: metric name given twice in the braces: "a" and "b"/],
    ['"my.metric" 1', /^2:1: a quoted metric name goes inside the braces/],
    ['"my.metric"{a="b"} 1', /^2:1: a quoted metric name goes inside the braces/],
    ['{a="b"} 1', /^2:1: expected a metric name: a quoted name inside the braces/],
    ["{} 1", /^2:1: expected a metric name: a quoted name inside the braces/],
    ['{""} 1', /^2:2: empty quoted name/],
    ['m{""="x"} 1', /^2:3: empty quoted name/],
    // OpenMetrics stops at the space; Prometheus text skips blanks inside braces.
    [
      '{"a.b" 1',
      /^2:7: expected "=" after label name "a.b", got a space|^2:8: expected "=" after label name "a.b", got "1"/,
    ],
    ['{"a.b"="x"} 1', /^2:1: expected a metric name/],
    ['{"a.b","c"="x","c"="y"} 1', /^2:16: duplicate label name "c"/],
    ['{"a.b"}1', /^2:8: expected a space and a value after "a.b", got "1"/],
    ['{"a.b"} ', /^2:9: expected a value after "a.b", got end of line|^2:9: invalid value/],
    ['m_total 1 # {"trace.id"} 1', /^2:24: expected "=" after the exemplar label name "trace.id", got "}"/],
    ['# TYPE "a.b counter', /^2:8: unterminated quoted metric name/],
    ['# TYPE "a.b"counter', /^2:13: expected a space after the metric name in # TYPE, got "c"/],
    ['# HELP "" text', /^2:8: empty quoted metric name/],
  ];
  for (const [line, want] of cases) {
    for (const format of ["prometheus-0.0.4", "openmetrics-1.0"] as ExpositionFormat[]) {
      for (const strict of [false, true]) {
        const text = `# HELP ok fine\n${line}\n${format === "openmetrics-1.0" ? "# EOF\n" : ""}`;
        const err = parseError(() => parseExposition(text, { format, strict }));
        assert.match(err.message, want, `${format}${strict ? " strict" : ""}: ${line}`);
        assert.equal(err.exitCode, 2);
      }
    }
  }
  // Columns count characters: a non-ASCII name before the error.
  assert.match(parseError(() => parseExposition('{"€€€" 1\n')).message, /^1:8: expected "=" after label name "€€€"/);
});

test("fast paths: a line after a quoted-name line, and repeated label sets with quoted label names", () => {
  const text = [
    '{"a.b",x="1"} 1',
    'a{x="1"} 2',
    'a{x="1"} 3',
    '{"a",x="1"} 4',
    'a{"x.y"="1"} 5',
    'a{"x.y"="1"} 6',
    'b{"x.y"="1"} 7',
    'a{"}"="1"} 8',
    'a{"}"="1"} 9',
    "",
  ].join("\n");
  const results = [true, false].map((fast) => {
    setParserFastPaths(fast);
    try {
      return rows(parseExposition(text).families);
    } finally {
      setParserFastPaths(true);
    }
  });
  assert.deepEqual(results[0], results[1]);
  assert.deepEqual(
    results[0].map((r) => `${r[2]} ${JSON.stringify(r[3])} ${r[4]}`),
    [
      'a.b {"x":"1"} 1',
      'a {"x":"1"} 2',
      'a {"x":"1"} 3',
      'a {"x":"1"} 4',
      'a {"x.y":"1"} 5',
      'a {"x.y":"1"} 6',
      // Family a's later samples are merged into it (lenient), so b comes last.
      'a {"}":"1"} 8',
      'a {"}":"1"} 9',
      'b {"x.y":"1"} 7',
    ],
  );
  // A set given after a name is never confused with the same text that opens a line.
  assert.match(parseError(() => parseExposition('{"a.b"} 1\nm{"a.b"} 2\n')).message, /^2:3: metric name given twice/);
});

test("writer: names outside the legacy set are quoted and escaped; the output reads back", () => {
  assert.equal(formatMetricName("vllm:num_requests_running"), "vllm:num_requests_running");
  assert.equal(formatMetricName("my.metric"), '"my.metric"');
  assert.equal(formatMetricName('a"b\\c\nd'), '"a\\"b\\\\c\\nd"');
  assert.equal(formatMetricName("0abc"), '"0abc"');
  assert.equal(formatLabelName("a:b"), '"a:b"');
  assert.equal(formatLabelName("le"), "le");
  assert.equal(formatSeries("m", { a: "1" }), 'm{a="1"}');
  assert.equal(formatSeries("my.metric", {}), '{"my.metric"}');
  assert.equal(formatSeries("my.metric", { "a.b": "1", c: "2" }), '{"my.metric","a.b"="1",c="2"}');
  for (const format of ["openmetrics-1.0", "prometheus-0.0.4"] as ExpositionFormat[]) {
    const fams = parseExposition(omBody, { strict: true }).families;
    const text = formatExposition(fams, format);
    assert.match(text, /^# HELP "go.gc_duration_seconds" /m);
    const back = parseExposition(text, { format, strict: format === "openmetrics-1.0" });
    assert.deepEqual(back.warnings, []);
    const strip = (fs: MetricFamily[]) =>
      fs.map((f) => ({
        name: f.name,
        help: f.help,
        samples: f.samples.map((s) => [s.name, { ...s.labels }, s.value, format === "openmetrics-1.0" && s.exemplar]),
      }));
    assert.deepEqual(strip(back.families), strip(fams));
  }
});
