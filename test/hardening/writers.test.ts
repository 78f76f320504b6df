// One writer per output, with two real processes at once: a second study naming the same --out, and a
// second `ab --resume` of the same run, are refused at start with the first one's pid; the first is
// untouched. A lock left by a dead process is taken over.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { openStore } from "../../src/store/index.ts";
import { ROOT, runCli, STACK } from "../helpers/cli.ts";

const dir = mkdtempSync(join(tmpdir(), "inferscope-writers-"));
const PROGRESS = { INFERSCOPE_PROGRESS: "1" };
// The sim through its library entry, restarted per A/B block.
const SIM_CMD = `${process.execPath} --import tsx ${join(ROOT, "test", "experiment", "fixtures", "sim-server.ts")} --time-scale 4`;

/** A pid that surely belongs to no process: one that has just exited. */
async function deadPid(): Promise<number> {
  const p = spawn(process.execPath, ["-e", ""]);
  await new Promise((r) => p.once("close", r));
  return p.pid!;
}

/** Resolves when `match` appears on the run's stderr (the `when` hook of runCli). */
function signalOn(match: RegExp) {
  let seen: () => void = () => {};
  const p = new Promise<void>((r) => (seen = r));
  // biome-ignore lint/suspicious/noThenProperty: runCli's hook is named `then`
  return { when: { match, then: () => seen() }, seen: p };
}

test("two studies with one --out: the second is refused with the first's pid; a dead run's lock is taken over", async () => {
  const out = join(dir, "report");
  const db = join(dir, "study.db");
  let pid = 0;
  const s = signalOn(/bench: started/);
  const first = runCli(["study", "--quick", "--out", out, "--db", db], {
    limitMs: 120_000,
    cwd: dir,
    env: PROGRESS,
    onStart: (p) => (pid = p),
    when: s.when,
  });
  await Promise.race([s.seen, first]);
  const second = await runCli(["study", "--quick", "--out", out, "--no-store"], { cwd: dir, limitMs: 60_000 });
  assert.equal(second.code, 2, second.stderr);
  assert.match(
    second.stderr,
    new RegExp(
      `--out .*report: another inferscope run \\(pid ${pid}\\) is writing a report there; refusing to overwrite it`,
    ),
  );
  assert.doesNotMatch(second.stderr, STACK);
  assert.deepEqual(second.leftovers, []);
  // The first goes on and writes its (partial) report.
  process.kill(pid, "SIGINT");
  const r = await first;
  assert.equal(r.code, 130, r.stderr);
  const id = /saved in run (study-\S+?),/.exec(r.stderr)?.[1];
  assert.ok(id, r.stderr);
  assert.equal(JSON.parse(readFileSync(join(out, "results.json"), "utf8")).meta.runId, id);
  assert.ok(!existsSync(join(out, ".inferscope-lock")), "the lock is released");

  // A lock whose process is gone is stale: `report ID --out` takes it over and writes.
  const other = join(dir, "rebuilt");
  mkdirSync(other);
  writeFileSync(join(other, ".inferscope-lock"), `${await deadPid()} ${hostname()}`);
  const rb = await runCli(["report", id!, "--out", other, "--db", db], { cwd: dir, limitMs: 60_000 });
  assert.equal(rb.code, 0, rb.stderr);
  assert.ok(existsSync(join(other, "results.json")));
  assert.ok(!existsSync(join(other, ".inferscope-lock")));
});

test("two `ab --resume ID` at once: only one writes; the second is refused with its pid; no block runs twice", async () => {
  const db = join(dir, "ab.db");
  const ab = ["ab", "--server-cmd", SIM_CMD, "--variant", "a:", "--variant", "b:NCCL_PROTO=LL"].concat(
    ["--repeats", "2", "--num-prompts", "3", "--warmup", "0", "--random-output-len", "64"],
    ["--ready-timeout", "60s", "--grace", "5s", "--log-dir", join(dir, "ab-logs"), "--db", db],
  );
  // An interrupted run: Ctrl-C once the first block is done.
  let pid = 0;
  const s = signalOn(/\[ab\] block 1\/4 \S+: /);
  // From the repository root: the server command loads tsx from there.
  const run = runCli(ab, { limitMs: 120_000, env: PROGRESS, onStart: (p) => (pid = p), when: s.when });
  await Promise.race([s.seen, run]);
  process.kill(pid, "SIGINT");
  const cut = await run;
  assert.equal(cut.code, 130, cut.stderr);
  const id = /continue with --resume (ab-\S+)/.exec(cut.stderr)?.[1];
  assert.ok(id, cut.stderr);

  // Resume #1 runs; while it does, resume #2 is refused naming #1's pid.
  let pid1 = 0;
  const s1 = signalOn(/\[ab\] block \d\/4: /);
  const one = runCli(["ab", "--resume", id!, "--db", db, "--log-dir", join(dir, "ab-logs-1")], {
    limitMs: 180_000,
    env: PROGRESS,
    onStart: (p) => (pid1 = p),
    when: s1.when,
  });
  await Promise.race([s1.seen, one]);
  const two = await runCli(["ab", "--resume", id!, "--db", db, "--log-dir", join(dir, "ab-logs-2")], {
    limitMs: 60_000,
  });
  assert.equal(two.code, 2, two.stderr);
  assert.match(two.stderr, new RegExp(`run ${id} is being written by another inferscope process \\(pid ${pid1}\\)`));
  assert.doesNotMatch(two.stderr, STACK);
  assert.deepEqual(two.leftovers, []);
  const r1 = await one;
  assert.equal(r1.code, 0, r1.stderr);
  // Every design index ran to completion exactly once.
  const store = openStore(db);
  try {
    const complete = store
      .getRun(id!)
      .blocks.filter((b) => b.status === "complete")
      .map((b) => b.index)
      .sort();
    assert.deepEqual(complete, [0, 1, 2, 3]);
  } finally {
    store.close();
  }
});

test("two `sweep --resume ID` at once: the second is refused with the first's pid", async () => {
  const sim = spawn(process.execPath, ["bin/inferscope.mjs", "sim", "--port", "0", "--time-scale", "4"], {
    cwd: ROOT,
    stdio: ["ignore", "pipe", "ignore"],
  });
  try {
    const url = await new Promise<string>((done, fail) => {
      let text = "";
      sim.stdout!.setEncoding("utf8").on("data", (d: string) => {
        text += d;
        const m = /listening on (http:\/\/\S+)/.exec(text);
        if (m) done(m[1]!);
      });
      sim.once("close", () => fail(new Error(`the sim exited: ${text}`)));
    });
    const db = join(dir, "sweep.db");
    const args = ["sweep", "concurrency", "--url", url, "--levels", "1,2,3", "--num-prompts", "4"].concat([
      "--random-output-len",
      "64",
      "--warmup",
      "0",
      "--db",
      db,
    ]);
    // Interrupted during its first level.
    let pid = 0;
    const s = signalOn(/\[sweep\] /);
    const run = runCli(args, { limitMs: 120_000, env: PROGRESS, onStart: (p) => (pid = p), when: s.when });
    await Promise.race([s.seen, run]);
    process.kill(pid, "SIGINT");
    const cut = await run;
    assert.equal(cut.code, 130, cut.stderr);
    const id = /continue with --resume (sweep-concurrency-\S+)/.exec(cut.stderr)?.[1];
    assert.ok(id, cut.stderr);
    let pid1 = 0;
    const s1 = signalOn(/\[sweep\] /);
    const one = runCli(["sweep", "concurrency", "--resume", id!, "--db", db], {
      limitMs: 120_000,
      env: PROGRESS,
      onStart: (p) => (pid1 = p),
      when: s1.when,
    });
    await Promise.race([s1.seen, one]);
    const two = await runCli(["sweep", "concurrency", "--resume", id!, "--db", db], { limitMs: 60_000 });
    assert.equal(two.code, 2, two.stderr);
    assert.match(
      two.stderr,
      new RegExp(`run ${id} is (being written by another inferscope process|still running) \\(pid ${pid1}\\)`),
    );
    const r1 = await one;
    assert.equal(r1.code, 0, r1.stderr);
  } finally {
    sim.kill("SIGTERM");
  }
});
