// `runs push`: a run's summary into a real Prometheus (remote-write receiver, read back with PromQL)
// and into a loopback OTLP/HTTP collector that decodes with the OpenTelemetry project's generated codec.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { createRequire } from "node:module";
import { test } from "node:test";
import {
  type ExportTables,
  exportTables,
  openStore,
  PROM_SERIES,
  pushOtlpMetrics,
  pushRemoteWrite,
} from "../../src/store/index.ts";
import { exportRunsFixture } from "../helpers/export-runs.ts";
import { freePort, prometheusSkipReason, startPrometheus } from "../helpers/prometheus.ts";

const { db, ids } = exportRunsFixture("inferscope-push-");
const tables = (id: string): ExportTables => {
  const s = openStore(db);
  try {
    return exportTables(s, id);
  } finally {
    s.close();
  }
};

/** The dashboard's PromQL: each panel target's expression and each variable's label_values query. */
function dashboard(): { targets: Array<{ panel: string; expr: string }>; variables: string[] } {
  const d = JSON.parse(readFileSync("grafana/inferscope-runs.json", "utf8"));
  const targets = d.panels.flatMap((p: any) => {
    assert.ok(p.targets?.length, `panel ${p.title} has a query`);
    return p.targets.map((t: any) => ({ panel: p.title, expr: t.expr as string }));
  });
  const variables = d.templating.list.filter((v: any) => v.type === "query").map((v: any) => v.query.query as string);
  return { targets, variables };
}
/** Grafana's variables as one run id, every kind and a 1 h range. */
const substitute = (expr: string, run: string) =>
  expr.replaceAll("$run", run).replaceAll("$kind", ".*").replaceAll("$__range", "1h");

const cli = (args: string[]) =>
  spawnSync(process.execPath, ["bin/inferscope.mjs", "runs", "push", ...args, "--db", db], { encoding: "utf8" });

/** The summary column a series carries, and its scale: written out here, apart from the code's table. */
function columnOf(name: string, stat: string | undefined): { column: string; scale: number } {
  const plain: Record<string, string> = {
    inferscope_run_requests: "requests",
    inferscope_run_requests_ok: "ok",
    inferscope_run_requests_failed: "failed",
    inferscope_run_output_tokens: "output_tokens",
    inferscope_run_prompt_tokens: "prompt_tokens",
  };
  if (plain[name]) return { column: plain[name], scale: 1 };
  const m = /^inferscope_run_(ttft|tpot|e2el)_seconds$/.exec(name);
  assert.ok(m && stat, `unexpected series ${name}`);
  return { column: `${m[1]}_ms_${stat}`, scale: 1e-3 };
}

test("runs push --prometheus-remote-write: a real Prometheus holds the run's summary, read back with PromQL", async (t) => {
  const skip = prometheusSkipReason();
  if (skip) return t.skip(skip);
  const prom = await startPrometheus({ targets: [], extraArgs: ["--web.enable-remote-write-receiver"] });
  try {
    const url = `${prom.url}/api/v1/write`;
    const r = cli([ids.ab, "--prometheus-remote-write", url, "--json"]);
    assert.equal(r.status, 0, `${r.stderr}\n${prom.log()}`);
    const sentAb = JSON.parse(r.stdout).prometheusRemoteWrite as { series: number; timestampMs: number };
    const sentBench = await pushRemoteWrite(url, tables(ids.bench));
    for (const [id, sent] of [
      [ids.ab, sentAb],
      [ids.bench, sentBench],
    ] as const) {
      const q = new URL(`${prom.url}/api/v1/query`);
      q.searchParams.set("query", `{run_id="${id}"}`);
      q.searchParams.set("time", String(sent.timestampMs / 1000));
      const body = (await (await fetch(q)).json()) as {
        data: { result: Array<{ metric: Record<string, string>; value: [number, string] }> };
      };
      const got = body.data.result;
      assert.equal(got.length, sent.series, `${id}: every series sent is there`);
      const want = tables(id);
      let checked = 0;
      for (const s of got) {
        const { __name__: name, stat, ...labels } = s.metric;
        const row = want.summary.find(
          (x) => x.scope === labels.scope && String(x.block ?? "") === (labels.block ?? ""),
        )!;
        assert.ok(row, JSON.stringify(s.metric));
        assert.equal(labels.kind, want.summary[0]!.kind);
        assert.equal(labels.status, "complete");
        assert.equal(labels.model, (row.model as string | null) ?? undefined);
        assert.equal(labels.engine, (row.engine as string | null) ?? undefined);
        assert.equal(labels.variant, (row.variant as string | null) ?? undefined);
        const v = Number(s.value[1]);
        if (name === "inferscope_run_start_timestamp_seconds")
          assert.equal(v, Date.parse(String(row.created_at)) / 1000);
        else if (name === "inferscope_run_end_timestamp_seconds")
          assert.equal(v, Date.parse(String(row.finished_at)) / 1000);
        else {
          const { column, scale } = columnOf(name!, stat);
          assert.equal(v, (row[column] as number) * scale, `${name}${stat ? ` ${stat}` : ""} ${labels.scope}`);
          checked++;
        }
      }
      // Every summary column of every row arrived: 3 counts, 3 latencies × 4 stats, 2 token totals (none null here).
      assert.equal(checked, want.summary.length * (3 + 3 * 4 + 2), id);
    }
    // The shipped Grafana dashboard: every panel's query, and every variable's, finds the pushed series.
    const query = async (expr: string, at: number) => {
      const q = new URL(`${prom.url}/api/v1/query`);
      q.searchParams.set("query", expr);
      q.searchParams.set("time", String(at / 1000));
      const body = (await (await fetch(q)).json()) as { status: string; error?: string; data?: { result: unknown[] } };
      assert.equal(body.status, "success", `${expr}: ${body.error}`);
      return body.data!.result;
    };
    const d = dashboard();
    for (const { panel, expr } of d.targets) {
      const want = /scope="block"/.test(expr) ? [ids.ab] : [ids.ab, ids.bench];
      for (const id of want)
        assert.ok((await query(substitute(expr, id), sentBench.timestampMs)).length > 0, `${panel}: ${expr} for ${id}`);
    }
    for (const v of d.variables) {
      const m = /^label_values\((.+), (\w+)\)$/.exec(v);
      assert.ok(m, v);
      const got = (await query(substitute(m[1]!, ".*"), sentBench.timestampMs)) as Array<{
        metric: Record<string, string>;
      }>;
      assert.ok(
        got.some((x) => x.metric[m[2]!] === (m[2] === "run_id" ? ids.ab : "ab")),
        v,
      );
    }
  } finally {
    await prom.stop();
  }
});

async function collector(status = 200): Promise<{ server: Server; url: string; bodies: Buffer[]; paths: string[] }> {
  const bodies: Buffer[] = [];
  const paths: string[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      bodies.push(Buffer.concat(chunks));
      paths.push(`${req.method} ${req.url} ${req.headers["content-type"]}`);
      res.writeHead(status, { "content-type": "application/x-protobuf" }).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { server, url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, bodies, paths };
}

test("runs push --otlp-metrics: GenAI semantic-convention histograms whose count, sum, min and max are the run's", async () => {
  const c = await collector();
  try {
    await pushOtlpMetrics(c.url, tables(ids.bench));
    await pushOtlpMetrics(c.url, tables(ids.ab));
    assert.deepEqual(c.paths, Array(2).fill("POST /v1/metrics application/x-protobuf"));
    const require = createRequire(import.meta.url);
    const root = require("@opentelemetry/otlp-transformer/build/src/generated/root.js");
    const codec = root.opentelemetry.proto.collector.metrics.v1.ExportMetricsServiceRequest;
    for (const [i, id] of [ids.bench, ids.ab].entries()) {
      const msg = codec.toObject(codec.decode(c.bodies[i]), { longs: Number });
      const want = tables(id);
      const rm = msg.resourceMetrics[0];
      const res = Object.fromEntries(rm.resource.attributes.map((a: any) => [a.key, a.value.stringValue]));
      assert.equal(res["inferscope.run.id"], id);
      const metrics = rm.scopeMetrics.flatMap((s: any) => s.metrics);
      assert.deepEqual(metrics.map((m: any) => m.name).sort(), [
        "gen_ai.client.operation.duration",
        "gen_ai.client.token.usage",
        "gen_ai.server.time_per_output_token",
        "gen_ai.server.time_to_first_token",
      ]);
      const attrs = (p: any) =>
        Object.fromEntries(
          p.attributes.map((a: any) => [a.key, a.value.stringValue ?? a.value.intValue ?? a.value.doubleValue]),
        );
      for (const [name, col, field] of [
        ["gen_ai.server.time_to_first_token", "ttft", "ttft_ms"],
        ["gen_ai.server.time_per_output_token", "tpot", "tpot_ms"],
      ] as const) {
        const m = metrics.find((x: any) => x.name === name);
        assert.equal(m.unit, "s");
        const rows = want.summary.filter((r) => (want.summary.length === 1 ? true : r.scope === "block"));
        assert.equal(m.histogram.dataPoints.length, rows.length, name);
        for (const row of rows) {
          const p = m.histogram.dataPoints.find((d: any) => (attrs(d)["inferscope.block"] ?? null) === row.block);
          assert.ok(p, `${name} block ${row.block}`);
          const a = attrs(p);
          assert.equal(a["inferscope.run.id"], id);
          assert.equal(a["gen_ai.request.model"], (row.model as string | null) ?? undefined);
          const xs = want.requests.filter((r) => r.ok && r.block === row.block).map((r) => (r[field] as number) / 1000);
          assert.equal(p.count, row.ok);
          assert.equal(p.min, Math.min(...xs));
          assert.equal(p.max, Math.max(...xs));
          assert.ok(Math.abs((p.sum / p.count) * 1000 - (row[`${col}_ms_mean`] as number)) < 1e-9, `${name} mean`);
          assert.equal(
            p.bucketCounts.reduce((s: number, n: number) => s + n, 0),
            row.ok,
          );
        }
      }
      const usage = metrics.find((x: any) => x.name === "gen_ai.client.token.usage");
      const out = usage.histogram.dataPoints.filter((d: any) => attrs(d)["gen_ai.token.type"] === "output");
      assert.equal(
        out.reduce((s: number, d: any) => s + d.sum, 0),
        want.summary[0]!.output_tokens,
      );
    }
  } finally {
    c.server.close();
  }
});

test("runs push: no target, a bad URL, a closed port and a receiver's error are clear errors", async () => {
  const c = await collector(500);
  const closed = await freePort();
  try {
    await assert.rejects(
      pushOtlpMetrics(c.url, tables(ids.bench)),
      /--otlp-metrics http:\/\/127\.0\.0\.1:\d+\/v1\/metrics: HTTP 500/,
    );
    await assert.rejects(
      pushRemoteWrite(`http://127.0.0.1:${closed}/api/v1/write`, tables(ids.bench), { timeoutMs: 2000 }),
      /--prometheus-remote-write http:\/\/127\.0\.0\.1:\d+\/api\/v1\/write: ECONNREFUSED/,
    );
    await assert.rejects(pushRemoteWrite("ftp://x", tables(ids.bench)), /is not an http\(s\) URL/);
  } finally {
    c.server.close();
  }
  for (const [args, msg] of [
    [[ids.bench], /needs --prometheus-remote-write URL, --otlp-metrics URL, or both/],
    [[ids.bench, "--otlp-metrics", `http://127.0.0.1:${closed}`], /--otlp-metrics .*: ECONNREFUSED/],
  ] as const) {
    const r = cli([...args]);
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, msg);
    assert.doesNotMatch(r.stderr, /\n\s+at /, "no stack trace");
  }
});

test("the Grafana dashboard ships in the package and its PromQL names only series and labels the push writes", () => {
  const files = JSON.parse(readFileSync("package.json", "utf8")).files as string[];
  assert.ok(files.includes("grafana"), "package.json files lists grafana/");
  const series = new Set([
    ...PROM_SERIES.map((s) => s.name),
    "inferscope_run_start_timestamp_seconds",
    "inferscope_run_end_timestamp_seconds",
  ]);
  const labels = new Set(["run_id", "kind", "status", "model", "engine", "scope", "block", "variant", "stat"]);
  const { targets, variables } = dashboard();
  assert.ok(targets.length >= 6);
  for (const expr of [...targets.map((t) => t.expr), ...variables]) {
    const names = [...expr.matchAll(/\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{/g)].map((m) => m[1]!);
    assert.ok(names.length > 0 || /^label_values\(inferscope_run_requests,/.test(expr), `${expr} names a series`);
    for (const n of names) assert.ok(series.has(n), `${expr}: ${n} is not a series the push writes`);
    for (const sel of expr.matchAll(/\{([^}]*)\}/g))
      for (const m of sel[1]!.matchAll(/(\w+)\s*(?:=~|!~|!=|=)/g))
        assert.ok(labels.has(m[1]!), `${expr}: label ${m[1]} is not one the push writes`);
  }
});
