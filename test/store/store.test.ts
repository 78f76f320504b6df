import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { MIGRATIONS, migrate, openDatabase, openStore, redact, SCHEMA_VERSION } from "../../src/store/index.ts";

const dir = mkdtempSync(join(tmpdir(), "inferscope-store-"));
after(() => rmSync(dir, { recursive: true, force: true }));

test("a fresh store is WAL, at the latest schema, and round-trips runs, blocks, requests, summaries", () => {
  const path = join(dir, "a.db");
  const s = openStore(path);
  const run = s.saveRun({ kind: "ab", config: { variants: ["base", "ll"] }, environment: { node: process.version } });
  assert.equal(run.status, "running");
  assert.match(run.id, /^ab-\d{8}T\d{6}-[0-9a-f]{4}$/);
  const b = s.addBlock(run.id, { index: 0, variant: "base", server: { port: 1234 } });
  s.addRequests(run.id, b, [
    {
      index: 0,
      ok: true,
      ttftMs: 52,
      e2elMs: 2262,
      tpotMs: 17.4,
      outputTokens: 128,
      promptTokens: 10,
      data: { itlMs: [17, 18] },
    },
    {
      index: 1,
      ok: false,
      ttftMs: null,
      e2elMs: null,
      tpotMs: null,
      outputTokens: null,
      promptTokens: null,
      error: 'HTTP 500, with "quotes"',
    },
  ]);
  s.updateBlock(b, { status: "complete", finishedAt: new Date().toISOString(), summary: { n: 2 } });
  s.setSummary(run.id, "comparison", { diff: 3.8 });
  s.setSummary(run.id, "comparison", { diff: 3.9 });
  s.finishRun(run.id);
  const d = s.getRun(run.id.slice(0, -2)); // unique prefix works
  assert.equal(d.run.status, "complete");
  assert.ok(d.run.finishedAt);
  assert.equal(d.blocks.length, 1);
  assert.deepEqual(d.blocks[0].summary, { n: 2 });
  assert.deepEqual(d.summaries, { comparison: { diff: 3.9 } });
  assert.equal(d.requestCount, 2);
  const reqs = s.getRequests(run.id);
  assert.deepEqual(reqs[0].data, { itlMs: [17, 18] });
  assert.equal(reqs[1].ok, false);
  const csv = s.exportRun(run.id, "csv").trim().split("\n");
  assert.equal(csv[0], "run_id,block,variant,request,ok,ttft_ms,e2el_ms,tpot_ms,output_tokens,prompt_tokens,error");
  assert.equal(csv[1], `${run.id},0,base,0,1,52,2262,17.4,128,10,`);
  assert.equal(csv[2], `${run.id},0,base,1,0,,,,,,"HTTP 500, with ""quotes"""`);
  const exported = JSON.parse(s.exportRun(run.id, "json"));
  assert.equal(exported.requests.length, 2);
  assert.throws(() => s.getRun("nope"), /no run "nope"/);
  s.close();
  const raw = openDatabase(path, { readonly: true });
  assert.equal(raw.pragma("journal_mode", { simple: true }), "wal");
  assert.equal(raw.pragma("user_version", { simple: true }), SCHEMA_VERSION);
  raw.close();
});

test("migrations upgrade an old database in place and keep its data; a newer schema is refused", () => {
  const path = join(dir, "old.db");
  const db = openDatabase(path);
  migrate(db, 1);
  assert.equal(db.pragma("user_version", { simple: true }), 1);
  db.prepare(
    "INSERT INTO runs (id, kind, status, config, environment, created_at) VALUES ('bench-1', 'bench', 'complete', '{}', '{}', '2026-01-01T00:00:00Z')",
  ).run();
  db.close();
  const s = openStore(path);
  assert.equal(s.getRun("bench-1").run.kind, "bench");
  s.setSummary("bench-1", "x", 1); // a v2 table
  s.close();
  const db2 = openDatabase(path);
  assert.equal(db2.pragma("user_version", { simple: true }), MIGRATIONS.length);
  db2.pragma(`user_version = ${MIGRATIONS.length + 1}`);
  db2.close();
  assert.throws(() => openStore(path), new RegExp(`schema version ${MIGRATIONS.length + 1} is newer`));
});

test("telemetry is kept per run and per block, and exported with the run", () => {
  const s = openStore(join(dir, "telemetry.db"));
  const run = s.saveRun({ kind: "ab", config: {} });
  const block = s.addBlock(run.id, { index: 0, variant: "A" });
  const samples = [
    { t: 1, device: "gpu0", powerW: 500 },
    { t: 2, device: "gpu0", powerW: 510 },
  ];
  s.addTelemetry(run.id, null, { source: "nvidia-smi", summary: { energyJ: 505 }, samples });
  s.addTelemetry(run.id, block, { source: "dcgm http://127.0.0.1:9400/metrics", summary: { energyJ: 1 }, samples: [] });
  const all = s.getTelemetry(run.id);
  assert.equal(all.length, 2);
  assert.deepEqual(all.find((t) => t.blockId === null)?.samples, samples);
  assert.equal(s.getTelemetry(run.id, { blockId: block })[0]?.source, "dcgm http://127.0.0.1:9400/metrics");
  assert.equal(JSON.parse(s.exportRun(run.id, "json")).telemetry.length, 2);
  s.close();
});

test("secrets never reach the database file", () => {
  const path = join(dir, "secret.db");
  const key = "sk-test-SECRETSECRET-12345";
  const s = openStore(path);
  const run = s.saveRun({
    kind: "ab",
    config: {
      apiKey: key,
      serverCmd: `vllm serve m --api-key ${key}`,
      headers: { Authorization: `Bearer ${key}` },
      env: { OPENAI_API_KEY: key, NCCL_PROTO: "LL" },
      note: `the key is ${key}`,
    },
  });
  const b = s.addBlock(run.id, { index: 0, variant: "x", server: { logTail: [`started with --api-key=${key}`] } });
  s.updateBlock(b, { error: `server said: bad key ${key}` });
  s.finishRun(run.id, "failed", `failed: ${key}`);
  const cfg = s.getRun(run.id).run.config as any;
  assert.equal(cfg.apiKey, "[redacted]");
  assert.equal(cfg.env.NCCL_PROTO, "LL");
  s.close();
  for (const f of readdirSync(dir).filter((n) => n.startsWith("secret.db"))) {
    const bytes = readFileSync(join(dir, f)).toString("latin1");
    assert.ok(!bytes.includes("SECRETSECRET"), `${f} contains the key`);
  }
  assert.equal(redact("x OPENAI_API_KEY=abcd1234 y"), "x OPENAI_API_KEY=[redacted] y");
});

test("a writer killed with SIGKILL mid-run leaves an intact database; the run reads as partial", async () => {
  const path = join(dir, "crash.db");
  const child = spawn(process.execPath, ["--import", "tsx", "test/store/fixtures/writer.ts", path], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  const runId = await new Promise<string>((res, rej) => {
    let out = "";
    child.stdout.on("data", (c) => {
      out += c;
      if (out.includes("\n")) res(out.trim());
    });
    child.on("exit", (code) => rej(new Error(`writer exited early (${code})`)));
  });
  // Let it write a little more, then kill it mid-transaction.
  await new Promise((r) => setTimeout(r, 150));
  const exited = new Promise((r) => child.on("exit", r));
  child.kill("SIGKILL");
  await exited;
  const raw = openDatabase(path);
  assert.equal(raw.pragma("integrity_check", { simple: true }), "ok");
  raw.close();
  const s = openStore(path);
  const d = s.getRun(runId);
  assert.equal(d.run.status, "partial");
  assert.equal(d.blocks[0].status, "failed");
  assert.ok(d.requestCount >= 50);
  assert.equal(d.requestCount % 50, 0, "batches are atomic");
  s.close();
});
