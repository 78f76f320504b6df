// Scraping against a real HTTP server on 127.0.0.1: content negotiation, gzip, and every kind of bad
// answer a user meets (each a clear typed error, never a hang or a stack trace).
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { after, before, test } from "node:test";
import { gzipSync } from "node:zlib";
import { ExitCode, InputError, ParseError, TargetError } from "../../src/errors.ts";
import { auditMetrics } from "../../src/metrics/audit.ts";
import { ACCEPT, fetchServerInfo, metricsPath, scrape } from "../../src/metrics/scrape.ts";
import { startFaultServer } from "../helpers/faults.ts";
import {
  endlessRoute,
  type FixtureServer,
  fixture,
  hangRoute,
  OPENMETRICS,
  readFixture,
  startFixtureServer,
  VllmFixture,
} from "./fixtures/server.ts";

let server: FixtureServer;
const seen: Record<string, string | undefined> = {};
const vllm = new VllmFixture().render();
const om = "# TYPE a counter\n# HELP a An a.\na_total 1.0\na_created 1.7e9\n# EOF\n";
const dupFamilies =
  '# HELP x_total X.\n# TYPE x_total counter\nx_total{a="1"} 1\n# TYPE y gauge\ny 2\n# HELP x_total X.\n# TYPE x_total counter\nx_total{a="2"} 3\n';

before(async () => {
  server = await startFixtureServer({
    "/metrics": (req) => {
      seen.accept = req.headers.accept;
      seen.encoding = req.headers["accept-encoding"];
      return { body: vllm };
    },
    "/utf8": () => ({
      headers: { "content-type": "text/plain; version=1.0.0; escaping=allow-utf-8; charset=utf-8" },
      body: '# HELP "vllm.ttft.count" Requests.\n# TYPE "vllm.ttft.count" counter\n{"vllm.ttft.count", "model.name"="m"} 7\n',
    }),
    "/gz": () => ({ headers: { "content-encoding": "gzip" }, body: vllm }),
    "/om": () => ({ headers: { "content-type": OPENMETRICS }, body: om }),
    "/hang": hangRoute,
    "/huge": endlessRoute,
    "/bomb": () => ({
      headers: { "content-encoding": "gzip" },
      body: gzipSync(Buffer.alloc(8 * 1024 * 1024, "a")),
    }),
    "/llamacpp-off": () => ({
      status: 501,
      headers: { "content-type": "application/json; charset=utf-8" },
      body: JSON.stringify({
        error: { code: 501, message: "This server does not support metrics endpoint.", type: "not_supported_error" },
      }),
    }),
    "/boom": () => ({ status: 500, headers: { "content-type": "text/plain" }, body: "engine core died\nTraceback…" }),
    "/html": () => ({
      headers: { "content-type": "text/html" },
      body: "<!DOCTYPE html><html><head><title>Grafana</title></head></html>",
    }),
    "/empty": () => ({ body: "" }),
    "/json": () => ({ headers: { "content-type": "application/json" }, body: '{"iterationStats": []}' }),
    "/latin1": () => ({ body: Buffer.from('# TYPE a gauge\na{x="caf\xe9"} 1\n', "latin1") }),
    "/dup": () => ({ body: dupFamilies }),
    "/dup-types": () => ({
      body: dupFamilies.replace(/# TYPE x_total counter\nx_total\{a="2"\} 3/, '# TYPE x gauge\nx{a="2"} 3'),
    }),
  });
});
after(() => server.close());

const rejectsWith = async (p: Promise<unknown>, type: new (...a: any[]) => Error, re: RegExp, code: number) =>
  assert.rejects(p, (e: Error & { exitCode?: number }) => {
    assert.ok(e instanceof type, `${e.constructor.name}: ${e.message}`);
    assert.match(e.message, re);
    assert.equal(e.exitCode, code);
    return true;
  });

test("sends the OpenMetrics-first Accept header and gzip; parses 0.0.4 by Content-Type", async () => {
  const s = await scrape(`${server.url}/metrics`);
  assert.equal(seen.accept, ACCEPT);
  // Prometheus 3's negotiation: UTF-8 names unescaped where the server supports it, 0.0.4 text last.
  assert.equal(
    seen.accept,
    "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2",
  );
  assert.equal(seen.encoding, "gzip");
  assert.equal(s.exposition.format, "prometheus-0.0.4");
  assert.ok(s.exposition.families.some((f) => f.name === "vllm:inter_token_latency_seconds"));
});

test("a Prometheus 3 body with escaping=allow-utf-8: quoted names read as the names themselves", async () => {
  const s = await scrape(`${server.url}/utf8`);
  assert.equal(s.exposition.format, "prometheus-0.0.4");
  const f = s.exposition.families.find((x) => x.name === "vllm.ttft.count");
  assert.ok(f, s.exposition.families.map((x) => x.name).join(","));
  assert.equal(f.type, "counter");
  assert.deepEqual(
    f.samples.map((x) => [x.labels, x.value]),
    [[{ "model.name": "m" }, 7]],
  );
});

test("a gzipped body decodes to the same exposition", async () => {
  const [plain, gz] = await Promise.all([scrape(`${server.url}/metrics`), scrape(`${server.url}/gz`)]);
  assert.deepEqual(gz.exposition, plain.exposition);
});

test("an OpenMetrics Content-Type selects the OpenMetrics parser", async () => {
  const s = await scrape(`${server.url}/om`);
  assert.equal(s.exposition.format, "openmetrics-1.0");
  assert.equal(s.exposition.families[0]?.name, "a");
});

test("unreachable target: TargetError, exit 3, in plain words", async () => {
  const closed = await startFixtureServer({});
  const url = `${closed.url}/metrics`;
  await closed.close();
  await rejectsWith(scrape(url), TargetError, /cannot scrape .*: connection refused/, ExitCode.unreachable);
});

test("a server that never answers times out at the given limit", async () => {
  const t0 = Date.now();
  await rejectsWith(
    scrape(`${server.url}/hang`, { timeoutMs: 300 }),
    TargetError,
    /no complete response within 0.3 s \(--timeout\); no body received/,
    ExitCode.unreachable,
  );
  assert.ok(Date.now() - t0 < 3000);
});

test("a server that sends headers, then a byte a second, times out at the limit (the whole scrape)", async () => {
  const slow = await startFaultServer("trickle");
  try {
    for (const run of [
      () => scrape(slow.url, { timeoutMs: 1500 }),
      () => auditMetrics(slow.url, { timeoutMs: 1500, windowMs: 100 }),
    ]) {
      const t0 = Date.now();
      await rejectsWith(
        run(),
        TargetError,
        /no complete response within 1.5 s \(--timeout\); \d+ bytes of body received/,
        ExitCode.unreachable,
      );
      assert.ok(Date.now() - t0 < 4000, `took ${Date.now() - t0} ms`);
    }
  } finally {
    await slow.close();
  }
});

test("extra headers (a bearer token) reach the metrics endpoint and the info endpoints", async () => {
  const seen: Array<string | undefined> = [];
  const s = await startFixtureServer({
    "/metrics": (req) => {
      seen.push(req.headers.authorization);
      return { body: "# TYPE x_total counter\nx_total 1\n" };
    },
    "/v1/models": (req) => {
      seen.push(req.headers.authorization);
      return { headers: { "content-type": "application/json" }, body: '{"data":[{"id":"m"}]}' };
    },
  });
  try {
    await auditMetrics(`${s.url}/metrics`, { windowMs: 50, headers: { authorization: "Bearer k-123" } });
    assert.ok(seen.length >= 3, String(seen.length));
    assert.ok(
      seen.every((h) => h === "Bearer k-123"),
      JSON.stringify(seen),
    );
  } finally {
    await s.close();
  }
});

test("a redirect is named with its target, not parsed as an empty or broken body", async () => {
  const r = await startFaultServer("redirect");
  try {
    await rejectsWith(
      scrape(`${r.url}/metrics`),
      TargetError,
      /HTTP 301 redirect to http:\/\/127\.0\.0\.1:1\/elsewhere; scrapes do not follow redirects/,
      ExitCode.unreachable,
    );
  } finally {
    await r.close();
  }
});

test("HTTP errors carry the status and the server's own message", async () => {
  await rejectsWith(
    scrape(`${server.url}/llamacpp-off`),
    TargetError,
    /HTTP 501: This server does not support metrics endpoint\.$/,
    ExitCode.unreachable,
  );
  await rejectsWith(scrape(`${server.url}/boom`), TargetError, /HTTP 500: engine core died$/, ExitCode.unreachable);
  await rejectsWith(scrape(`${server.url}/nope`), TargetError, /HTTP 404: Not Found/, ExitCode.unreachable);
});

test("HTML, JSON and empty bodies are input errors that say what came back", async () => {
  await rejectsWith(scrape(`${server.url}/html`), InputError, /returned HTML, not metrics/, ExitCode.usage);
  await rejectsWith(scrape(`${server.url}/json`), InputError, /returned JSON, not Prometheus text/, ExitCode.usage);
  await rejectsWith(scrape(`${server.url}/empty`), InputError, /empty body/, ExitCode.usage);
});

test("invalid UTF-8 is a parse error at its line:column", async () => {
  await assert.rejects(scrape(`${server.url}/latin1`), (e: ParseError) => {
    assert.ok(e instanceof ParseError);
    assert.deepEqual({ line: e.position?.line, column: e.position?.column }, { line: 2, column: 9 });
    assert.match(e.message, /:2:9: .*UTF-8/);
    return true;
  });
});

test("a runaway body stops at the 64 MiB cap; a gzip bomb stops at the cap too", async () => {
  await rejectsWith(scrape(`${server.url}/huge`), InputError, /larger than the 64 MiB limit/, ExitCode.usage);
  await rejectsWith(
    scrape(`${server.url}/bomb`, { maxBytes: 1024 * 1024 }),
    InputError,
    /larger than the 1 MiB limit/,
    ExitCode.usage,
  );
});

test("duplicate families: merged with a warning when lenient, a line:column error when strict", async () => {
  const s = await scrape(`${server.url}/dup`);
  const x = s.exposition.families.filter((f) => f.name === "x");
  assert.equal(x.length, 1);
  assert.equal(x[0]!.samples.length, 2);
  assert.ok(
    s.exposition.warnings.some(
      (w) => w.line === 8 && /family "x" appears twice \(first at line 3\); merged/.test(w.message),
    ),
  );
  assert.ok(s.exposition.warnings.every((w) => w.line > 0 && w.column > 0));
  await assert.rejects(scrape(`${server.url}/dup`, { strict: true }), (e: ParseError) => {
    assert.ok(e instanceof ParseError);
    assert.ok((e.position?.line ?? 0) > 0 && (e.position?.column ?? 0) > 0);
    return true;
  });
  // A second, conflicting TYPE further down: the parser keeps the first and says so.
  const conflict = await scrape(`${server.url}/dup-types`);
  assert.ok(conflict.exposition.warnings.some((w) => w.line === 7 && /second # TYPE for "x"/.test(w.message)));
});

test("files, gzipped files, stdin, and file errors", async () => {
  const f = await scrape(fixture("engine-tgi.prom"));
  assert.equal(f.source, fixture("engine-tgi.prom"));
  assert.ok(f.exposition.families.some((x) => x.name === "tgi_request_count"));

  const dir = mkdtempSync(join(tmpdir(), "inferscope-scrape-"));
  writeFileSync(join(dir, "m.prom.gz"), gzipSync(readFixture("engine-tgi.prom")));
  const gz = await scrape(join(dir, "m.prom.gz"));
  assert.deepEqual(gz.exposition, f.exposition);

  const stdin = Readable.from([Buffer.from(readFixture("engine-llamacpp.prom"))]);
  const s = await scrape("-", { stdin });
  assert.equal(s.source, "stdin");
  assert.equal(s.exposition.families.length, 11);

  await rejectsWith(scrape(join(dir, "missing.prom")), InputError, /no such file or directory/, ExitCode.usage);
  await rejectsWith(scrape(dir), InputError, /is a directory/, ExitCode.usage);
  await rejectsWith(scrape("ftp://example.com/metrics"), InputError, /unsupported URL scheme/, ExitCode.usage);
});

test("strict mode applies OpenMetrics rules to 0.0.4 text: line:column error", async () => {
  await assert.rejects(scrape(fixture("engine-llamacpp.prom"), { strict: true }), (e: ParseError) => {
    assert.ok(e instanceof ParseError);
    assert.match(e.message, /engine-llamacpp\.prom:\d+:\d+: /);
    return true;
  });
});

test("server info: /v1/models and /version when present, nothing (and no error) when absent", async () => {
  const none = await fetchServerInfo(`${server.url}/metrics`);
  assert.deepEqual(none, { models: [] });
});

test("a server root means its /metrics; any other path is taken as given", async () => {
  for (const root of [server.url, `${server.url}/`]) {
    const snap = await scrape(root);
    assert.equal(snap.source, `${server.url}/metrics`);
    assert.ok(snap.exposition.families.length > 0);
  }
  assert.equal(metricsPath("http://h:8000/prometheus/metrics"), "http://h:8000/prometheus/metrics");
  assert.equal(metricsPath("http://h:8000/?x=1"), "http://h:8000/?x=1");
  assert.equal(metricsPath("m.prom"), "m.prom");
});
