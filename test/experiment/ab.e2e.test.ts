// End-to-end A/B against the real simulator (restarted per block), compared with its hidden truth.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { runAB } from "../../src/experiment/ab.ts";
import { processGroupMembers } from "../../src/experiment/variants.ts";
import { explainSim } from "../../src/sim/explain.ts";
import { openDatabase, openStore } from "../../src/store/index.ts";
import { spawnSim } from "../helpers/sim.ts";

const TIME_SCALE = 2;
const dir = mkdtempSync(join(tmpdir(), "inferscope-ab-"));
after(() => rmSync(dir, { recursive: true, force: true }));
// The CLI's sim (`inferscope sim`) where one start is enough; the library launcher (the same sim,
// fewer modules to load) where a test restarts it per block.
const simCmd = `${process.execPath} bin/inferscope.mjs sim --port {port} --time-scale ${TIME_SCALE}`;
const libSimCmd = `${process.execPath} --import tsx test/experiment/fixtures/sim-server.ts --time-scale ${TIME_SCALE}`;
const KEY = "sk-e2e-TOPSECRETKEY-0123456789";

function filesUnder(d: string): string[] {
  return readdirSync(d).flatMap((n) => {
    const p = join(d, n);
    return statSync(p).isDirectory() ? filesUnder(p) : [p];
  });
}

test("A/B with restarts: NCCL_PROTO=LL is faster, the CI excludes 0 and contains the sim's true Δ", async () => {
  const truthBase = explainSim({ env: {} }).decode.stepMs / TIME_SCALE;
  const truthLL = explainSim({ env: { NCCL_PROTO: "LL" } }).decode.stepMs / TIME_SCALE;
  const truth = truthBase - truthLL; // ≈ 1.9 ms/token at time-scale 2
  const db = join(dir, "ab.db");
  const logDir = join(dir, "logs");
  const r = await runAB({
    serverCmd: libSimCmd,
    variants: ["base:", "ll:NCCL_PROTO=LL"],
    repeats: 2,
    workload: { numPrompts: 5, randomInputLen: 16, randomOutputLen: 24, warmup: 1, seed: 3 },
    opsPerToken: 157,
    // 99 % intervals: a 95 % one misses the truth in 1 run of 20 by construction, too flaky for CI.
    level: 0.99,
    apiKey: KEY,
    db,
    logDir,
    graceMs: 3000,
    readyTimeoutMs: 60_000,
  });
  assert.equal(r.status, "complete");
  assert.deepEqual(
    r.blocks.map((b) => b.status),
    ["complete", "complete", "complete", "complete"],
  );
  // ABBA: the two rounds mirror each other.
  assert.deepEqual(
    r.blocks.slice(2).map((b) => b.variant),
    r.blocks
      .slice(0, 2)
      .map((b) => b.variant)
      .reverse(),
  );
  const d = r.diffs.find((x) => x.variant === "ll" && x.metric === "tpot_ms")!;
  assert.ok(d.comparison.detected, `CI [${d.comparison.diff.lo}, ${d.comparison.diff.hi}] should exclude 0`);
  assert.ok(
    d.comparison.diff.lo <= truth && truth <= d.comparison.diff.hi,
    `true Δ ${truth.toFixed(3)} ms/token outside [${d.comparison.diff.lo.toFixed(3)}, ${d.comparison.diff.hi.toFixed(3)}]`,
  );
  assert.ok(
    d.comparison.welch.p < 0.05 && d.comparison.mannWhitney.p < 0.05,
    `p-values ${d.comparison.welch.p}, ${d.comparison.mannWhitney.p}`,
  );
  assert.match(r.verdicts[0], /^ll is faster by \d+\.\d+ ms\/token \[\d+\.\d+, \d+\.\d+\] than base/);
  // Each arm's mean TPOT is near its own truth (client overhead is small next to the step).
  const base = r.variants.find((v) => v.name === "base")!.metrics.tpot_ms;
  const ll = r.variants.find((v) => v.name === "ll")!.metrics.tpot_ms;
  assert.ok(Math.abs(base.mean - truthBase) / truthBase < 0.15, `base ${base.mean} vs ${truthBase}`);
  assert.ok(Math.abs(ll.mean - truthLL) / truthLL < 0.15, `ll ${ll.mean} vs ${truthLL}`);
  assert.equal(r.attribution[0].opsPerToken, 157);
  assert.ok(
    Math.abs(r.attribution[0].perOpUs.estimate - (d.comparison.diff.estimate * 1000) / 157) < 1e-9,
    "attribution",
  );

  // Everything is in the store, and the key is nowhere on disk.
  const s = openStore(db);
  const stored = s.getRun(r.runId);
  assert.equal(stored.run.status, "complete");
  assert.equal(stored.requestCount, 20);
  assert.ok(stored.summaries.ab, "the analysis is stored");
  s.close();
  for (const f of [...filesUnder(dir)])
    assert.ok(!readFileSync(f).toString("latin1").includes("TOPSECRETKEY"), `${f} contains the API key`);
  // No server outlived the run.
  for (const b of r.blocks) assert.deepEqual(processGroupMembers(Number(b.server?.pid)), []);
});

test("a variant whose server fails to start: the error names it with its log lines; the other variant's blocks are kept", async () => {
  const sim = await spawnSim(["--time-scale", "20"]);
  const db = join(dir, "fail.db");
  try {
    await assert.rejects(
      runAB({
        serverCmd: simCmd,
        variants: [`base=${sim.url}`, "broken:--no-such-flag"],
        repeats: 2,
        workload: { numPrompts: 3, randomInputLen: 8, randomOutputLen: 8, warmup: 0 },
        db,
        logDir: join(dir, "logs-fail"),
        graceMs: 2000,
        readyTimeoutMs: 60_000,
      }),
      (e: Error) => {
        assert.match(e.message, /variant "broken": server exited \(code \d+\) before it was ready/);
        assert.match(e.message, /last log lines:[\s\S]*no-such-flag/);
        assert.match(e.message, /the other variants' blocks are saved in run ab-/);
        return true;
      },
    );
  } finally {
    await sim.stop();
  }
  const s = openStore(db);
  const run = s.listRuns()[0];
  const d = s.getRun(run.id);
  assert.equal(d.run.status, "partial");
  assert.equal(d.blocks.filter((b) => b.variant === "base" && b.status === "complete").length, 2);
  assert.equal(d.requestCount, 6);
  s.close();
});

test("SIGINT mid-experiment: no server survives, finished blocks are saved, --resume completes the run", async () => {
  const db = join(dir, "int.db");
  const child = spawn(
    process.execPath,
    [
      "bin/inferscope.mjs",
      "ab",
      "--server-cmd",
      libSimCmd,
      "--variant",
      "base:",
      "--variant",
      "ll:NCCL_PROTO=LL",
      "--repeats",
      "1",
      "--num-prompts",
      "3",
      "--random-input-len",
      "8",
      "--random-output-len",
      "60",
      "--warmup",
      "0",
      "--grace",
      "3s",
      "--db",
      db,
      "--log-dir",
      join(dir, "logs-int"),
    ],
    { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, OPENAI_API_KEY: KEY } },
  );
  let stderr = "";
  child.stderr.on("data", (c) => (stderr += c));
  const exited = new Promise<number | null>((res) => child.on("exit", (code) => res(code)));
  // Wait (bounded) until block 0 is complete and block 1's server is up, by reading the store.
  let serverPid = 0;
  let runId = "";
  const deadline = Date.now() + 120_000;
  while (!serverPid && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 200));
    try {
      const raw = openDatabase(db, { readonly: true, fileMustExist: true });
      const rows = raw.prepare("SELECT run_id, idx, status, server FROM blocks ORDER BY idx").all() as any[];
      raw.close();
      const b1 = rows.find((b) => b.idx === 1 && b.server);
      if (rows.find((b) => b.idx === 0 && b.status === "complete") && b1) {
        serverPid = JSON.parse(b1.server).pid;
        runId = b1.run_id;
      }
    } catch {
      // Not created yet.
    }
  }
  assert.ok(serverPid, `block 1's server never started; stderr: ${stderr}`);
  assert.ok((processGroupMembers(serverPid) ?? []).length > 0);
  child.kill("SIGINT");
  const code = await exited;
  assert.equal(code, 130, stderr);
  assert.match(stderr, /continue with --resume ab-/);
  assert.deepEqual(processGroupMembers(serverPid), [], "the server's process group is empty");

  const s = openStore(db);
  const d = s.getRun(runId);
  assert.equal(d.run.status, "partial");
  assert.equal(d.blocks.find((b) => b.index === 0)?.status, "complete");
  const block0Id = d.blocks.find((b) => b.index === 0)!.id;
  const r = await runAB({ resume: runId, db: s, graceMs: 3000, readyTimeoutMs: 60_000, logDir: join(dir, "logs-int") });
  assert.equal(r.status, "complete");
  const after = s.getRun(runId);
  assert.equal(after.run.status, "complete");
  assert.equal(after.blocks.find((b) => b.index === 0 && b.status === "complete")?.id, block0Id, "block 0 kept");
  assert.equal(after.blocks.filter((b) => b.status === "complete").length, 2);
  assert.equal(
    r.variants.every((v) => v.requests === 3),
    true,
  );
  s.close();
  for (const f of filesUnder(dir))
    assert.ok(!readFileSync(f).toString("latin1").includes("TOPSECRETKEY"), `${f} contains the API key`);
});
