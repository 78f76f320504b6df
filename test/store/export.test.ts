// `runs export --format parquet|csv|jsonl`: the two tables (docs/export.md) read back, Parquet through
// DuckDB (an independent reader: the writer is hyparquet-writer), every value equal to the store's.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { DuckDBInstance } from "@duckdb/node-api";
import {
  exportTables,
  openStore,
  REQUEST_COLUMNS,
  SUMMARY_COLUMNS,
  tablesToJsonl,
  tableToCsv,
} from "../../src/store/index.ts";
import { exportRunsFixture } from "../helpers/export-runs.ts";

const { dir, db, ids } = exportRunsFixture("inferscope-export-");

const cli = (args: string[]) =>
  spawnSync(process.execPath, ["bin/inferscope.mjs", "runs", "export", ...args, "--db", db], { encoding: "utf8" });

async function duckRows(file: string): Promise<{ rows: Record<string, unknown>[]; types: Record<string, string> }> {
  const inst = await DuckDBInstance.create(":memory:");
  const con = await inst.connect();
  try {
    const lit = `'${file.replace(/'/g, "''")}'`;
    const rows = (await con.runAndReadAll(`SELECT * FROM read_parquet(${lit})`)).getRowObjectsJS();
    const desc = (await con.runAndReadAll(`DESCRIBE SELECT * FROM read_parquet(${lit})`)).getRowObjectsJS();
    return { rows, types: Object.fromEntries(desc.map((d) => [String(d.column_name), String(d.column_type)])) };
  } finally {
    con.closeSync();
    inst.closeSync();
  }
}

const DUCK_TYPE = { string: "VARCHAR", int32: "INTEGER", int64: "BIGINT", double: "DOUBLE", boolean: "BOOLEAN" };

test("the summary table: counts, means and numpy-linear percentiles over ok requests, per run and per block", () => {
  const s = openStore(db);
  try {
    const t = exportTables(s, ids.bench);
    assert.equal(t.summary.length, 1);
    const r = t.summary[0]!;
    assert.equal(r.scope, "run");
    assert.equal(r.model, "meta/llama-3-8b");
    assert.equal(r.engine, "vllm");
    assert.equal(r.requests, 8);
    assert.equal(r.ok, 7);
    assert.equal(r.failed, 1);
    assert.equal(r.ttft_ms_mean, 40);
    assert.equal(r.ttft_ms_p50, 40);
    assert.ok(Math.abs((r.ttft_ms_p90 as number) - 64) < 1e-9); // (7 − 1) · 0.9 = 5.4: 60 + 0.4 · 10
    assert.ok(Math.abs((r.ttft_ms_p99 as number) - 69.4) < 1e-9);
    assert.equal(r.output_tokens, 7 * 100 + 21);
    assert.equal(r.prompt_tokens, 7 * 2_000_000_000 + 12);
    const ab = exportTables(s, ids.ab);
    assert.deepEqual(
      ab.summary.map((x) => [x.scope, x.block, x.variant, x.requests, x.ttft_ms_mean, x.model, x.engine]),
      [
        ["run", null, null, 8, 56.5, "m2", null],
        ["block", 0, "base", 4, 51.5, "m2", null],
        ["block", 1, "ll", 4, 61.5, "m2", null],
      ],
    );
    // The request table is the store's records, one for one.
    const stored = s.getRequests(ids.bench);
    assert.equal(t.requests.length, stored.length);
    for (const [i, q] of stored.entries()) {
      const row = t.requests[i]!;
      assert.deepEqual(
        [row.request, row.ok, row.ttft_ms, row.e2el_ms, row.tpot_ms, row.output_tokens, row.prompt_tokens, row.error],
        [q.index, q.ok, q.ttftMs, q.e2elMs, q.tpotMs, q.outputTokens, q.promptTokens, q.error ?? null],
      );
    }
  } finally {
    s.close();
  }
});

test("runs export --format parquet: two files that DuckDB reads back with every value and type as stored", async () => {
  const base = join(dir, "ab.parquet");
  const r = cli([ids.ab, "--format", "parquet", "--out", base, "--json"]);
  assert.equal(r.status, 0, r.stderr);
  const files = JSON.parse(r.stdout).files as string[];
  assert.deepEqual(files, [join(dir, "ab.requests.parquet"), join(dir, "ab.summary.parquet")]);
  const r2 = cli([ids.bench, "--format", "parquet", "--out", join(dir, "bench")]);
  assert.equal(r2.status, 0, r2.stderr);
  const s = openStore(db);
  try {
    for (const [id, stem] of [
      [ids.ab, "ab"],
      [ids.bench, "bench"],
    ] as const) {
      const want = exportTables(s, id);
      for (const [table, columns] of [
        ["requests", REQUEST_COLUMNS],
        ["summary", SUMMARY_COLUMNS],
      ] as const) {
        const got = await duckRows(join(dir, `${stem}.${table}.parquet`));
        assert.deepEqual(
          got.types,
          Object.fromEntries(columns.map((c) => [c.name, DUCK_TYPE[c.type]])),
          `${stem} ${table} column types`,
        );
        const expected = want[table].map((row) =>
          Object.fromEntries(
            columns.map((c) => {
              const v = row[c.name] ?? null;
              return [c.name, c.type === "int64" && v !== null ? BigInt(v as number) : v];
            }),
          ),
        );
        assert.deepEqual(got.rows, expected, `${stem} ${table} values`);
      }
    }
  } finally {
    s.close();
  }
});

test("runs export --format jsonl and csv: one record per line with its type; two CSV files with --out", () => {
  const s = openStore(db);
  const want = exportTables(s, ids.bench);
  s.close();
  const r = cli([ids.bench, "--format", "jsonl"]);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout, tablesToJsonl(want));
  const lines = r.stdout
    .trimEnd()
    .split("\n")
    .map((l) => JSON.parse(l));
  assert.deepEqual(
    lines.map((l) => l.type),
    ["summary", ...Array(8).fill("request")],
  );
  const { type: _t, ...first } = lines[0];
  assert.deepEqual(first, want.summary[0]);
  assert.equal(lines[8].error, want.requests[7]!.error);
  const c = cli([ids.bench, "--format", "csv", "--out", join(dir, "bench.csv")]);
  assert.equal(c.status, 0, c.stderr);
  assert.equal(readFileSync(join(dir, "bench.requests.csv"), "utf8"), tableToCsv(REQUEST_COLUMNS, want.requests));
  const summary = readFileSync(join(dir, "bench.summary.csv"), "utf8").split("\n");
  assert.equal(summary[0], SUMMARY_COLUMNS.map((x) => x.name).join(","));
  assert.match(summary[1]!, new RegExp(`^${want.runId},bench,complete,meta/llama-3-8b,vllm,`));
  // The quoted error cell holds its comma, quotes and newline.
  assert.match(readFileSync(join(dir, "bench.requests.csv"), "utf8"), /"http: 500 ""overloaded"", retry\nlater/);
});

test("runs export: an unknown id, an unknown format and an unwritable path are clear errors", () => {
  const cases: Array<[string[], RegExp]> = [
    [["no-such-run", "--format", "parquet", "--out", join(dir, "x")], /no run "no-such-run"/],
    [[ids.bench, "--format", "xlsx"], /--format must be one of json, csv, jsonl, parquet, got "xlsx"/],
    [[ids.bench, "--format", "parquet", "--out", join(dir, "missing", "x")], /--out .*: no such directory/],
  ];
  for (const [args, msg] of cases) {
    const r = cli(args);
    assert.notEqual(r.status, 0, args.join(" "));
    assert.match(r.stderr, msg);
    assert.doesNotMatch(r.stderr, /\n\s+at /, "no stack trace");
  }
});

test("docs/export.md lists every column of both tables with its type and unit, in order", () => {
  const doc = readFileSync("docs/export.md", "utf8");
  for (const [table, columns] of [
    ["requests", REQUEST_COLUMNS],
    ["summary", SUMMARY_COLUMNS],
  ] as const) {
    const section = doc.split(`### ${table}\n`)[1]!.trim().split("\n\n")[0]!;
    const rows = section
      .split("\n")
      .slice(2)
      .map((l) => l.split("|").map((c) => c.trim()));
    assert.deepEqual(
      rows.map((r) => [r[1], r[2], r[3], r[4]]),
      columns.map((c) => [`\`${c.name}\``, c.type, c.unit, c.meaning]),
      table,
    );
  }
});
