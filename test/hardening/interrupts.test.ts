// Ctrl-C, as users press it: once (stop, keep what finished, say what was kept) and twice (stop now,
// but still say where the finished work is). Against the real simulator, streaming slowly enough that
// the signal lands mid-run; the moment is taken from the sim's own count of open streams.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { type SimHandle, startSim } from "../../src/sim/index.ts";
import { ROOT, runCli, STACK, waitFor } from "../helpers/cli.ts";

const dir = mkdtempSync(join(tmpdir(), "inferscope-interrupts-"));
const TINY = join(ROOT, "test", "experiment", "fixtures", "tiny-server.mjs");
let sim: SimHandle;

before(async () => {
  // Real time: a 256-token answer takes seconds, so every run below is mid-stream when signalled.
  sim = await startSim({ port: 0, seed: 3 });
});
after(async () => {
  await sim.close(0);
});

/** Starts the CLI and sends `signals` once the sim serves one of its streams. */
async function interruptMidRun(args: string[], signals: NodeJS.Signals[]) {
  let pid = 0;
  const run = runCli(args, { limitMs: 90_000, cwd: dir, onStart: (p) => (pid = p) });
  await waitFor(() => (sim.openStreams() > 0 ? true : undefined), 60_000, "a stream through the sim");
  for (const s of signals) process.kill(pid, s);
  return run;
}

test("ab, Ctrl-C twice while a server ignores SIGTERM: exits 130 at once and still prints the run id", async () => {
  // The case a second Ctrl-C is for: a server that takes its grace period to stop. The fixture ignores
  // SIGTERM and logs each one, so the test knows when each Ctrl-C has been handled.
  const db = join(dir, "ab.db");
  const logDir = join(dir, "ab-logs");
  const terms = () => {
    let n = 0;
    for (const f of existsSync(logDir) ? readdirSync(logDir) : [])
      n += (readFileSync(join(logDir, f), "utf8").match(/ignoring SIGTERM/g) ?? []).length;
    return n;
  };
  let pid = 0;
  const run = runCli(
    [
      "ab",
      ...["--server-cmd", `${process.execPath} ${TINY} --ignore-term`, "--variant", "a:", "--variant", "b:"],
      ...["--repeats", "1", "--num-prompts", "1", "--warmup", "0", "--grace", "60s", "--ready-timeout", "20s"],
      ...["--log-dir", logDir, "--db", db],
    ],
    { limitMs: 60_000, cwd: dir, onStart: (p) => (pid = p) },
  );
  // The first block's server is being stopped (and ignores it): the run is stored, ab waits out the grace.
  await waitFor(() => (terms() >= 1 ? true : undefined), 40_000, "ab to stop the first server");
  process.kill(pid, "SIGINT");
  await waitFor(() => (terms() >= 2 ? true : undefined), 10_000, "the first Ctrl-C to reach the server");
  process.kill(pid, "SIGINT");
  const r = await run;
  assert.equal(r.code, 130, r.stderr);
  assert.match(
    r.stderr,
    /interrupted again \(SIGINT\): servers killed; finished blocks are saved in run (ab-\S+) \(.*ab\.db\); continue with --resume \1/,
  );
  assert.ok(r.ms < 50_000, `took ${Math.round(r.ms)} ms: the second Ctrl-C did not cut the grace period`);
  assert.doesNotMatch(r.stderr, STACK);
  assert.deepEqual(r.leftovers, [], "the server that ignored SIGTERM was killed");
  const id = /--resume (ab-\S+)/.exec(r.stderr)![1]!;
  const l = await runCli(["runs", "list", "--db", db, "--json"]);
  assert.ok(
    (JSON.parse(l.stdout) as Array<{ id: string }>).some((x) => x.id === id),
    l.stdout,
  );
});

test("bench, Ctrl-C without an output file: exit 130, says the partial results were printed, not written", async () => {
  const r = await interruptMidRun(
    ["bench", "--base-url", sim.url, "--num-prompts", "40", "--random-output-len", "256", "--concurrency", "2"],
    ["SIGINT"],
  );
  assert.equal(r.code, 130, r.stderr);
  assert.match(r.stderr, /interrupted by SIGINT: partial results printed above \(no output file was asked for\)/);
  assert.doesNotMatch(r.stderr, /written to/);
  assert.match(r.stdout, /Serving Benchmark Result|Successful requests/);
  assert.doesNotMatch(r.stderr, STACK);
  // Nothing was written where it runs (no result file, no lock).
  assert.deepEqual(
    readdirSync(dir).filter((f) => /\.json$|inferscope-lock/.test(f)),
    [],
  );
});

test("bench, Ctrl-C with --records: exit 130, names the file it wrote", async () => {
  const records = join(dir, "partial.jsonl");
  const r = await interruptMidRun(
    ["bench", "--base-url", sim.url, "--num-prompts", "40", "--random-output-len", "256", "--records", records],
    ["SIGINT"],
  );
  assert.equal(r.code, 130, r.stderr);
  assert.match(r.stderr, new RegExp(`partial results written to ${records.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")}`));
  assert.ok(existsSync(records));
});

test("two runs naming the same --records: the second refuses at start (exit 2), the first is untouched", async () => {
  const records = join(dir, "shared.jsonl");
  let pid = 0;
  const first = runCli(
    ["bench", "--base-url", sim.url, "--num-prompts", "40", "--random-output-len", "256", "--records", records],
    { limitMs: 90_000, cwd: dir, onStart: (p) => (pid = p) },
  );
  await waitFor(() => (sim.openStreams() > 0 ? true : undefined), 60_000, "the first run to stream");
  const second = await runCli(["bench", "--base-url", sim.url, "--num-prompts", "2", "--records", records]);
  assert.equal(second.code, 2, second.stderr);
  assert.match(second.stderr, /--records .*shared\.jsonl: another inferscope run \(pid \d+\) is writing this file/);
  process.kill(pid, "SIGINT");
  const r = await first;
  assert.equal(r.code, 130, r.stderr);
  assert.match(r.stderr, /partial results written to .*shared\.jsonl/);
  assert.ok(existsSync(records), "the first run's file is in place");
});

test("metrics diff prints float deltas in plain decimals (0.00362, not 0.0036199999999999982)", async () => {
  const a = join(dir, "a.prom");
  const b = join(dir, "b.prom");
  writeFileSync(a, "# TYPE x_seconds counter\nx_seconds_total 0.1\n# TYPE g gauge\ng 1.5\n");
  writeFileSync(b, "# TYPE x_seconds counter\nx_seconds_total 0.10362\n# TYPE g gauge\ng 1.50362\n");
  const r = await runCli(["metrics", "diff", a, b]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /x_seconds_total\s*│\s*0\.00362\s*│/);
  assert.match(r.stdout, /g\s*│\s*1\.5\s*│\s*1\.50362\s*│\s*0\.00362\s*│/);
  assert.doesNotMatch(r.stdout, /\d\.\d{13,}/, "no float noise digits");
  // JSON keeps the exact double for programs.
  const j = await runCli(["metrics", "diff", a, b, "--json"]);
  assert.equal(JSON.parse(j.stdout).counters[0].delta, 0.10362 - 0.1);
});

/** Time from spawn to a bare Node's first output here and now (the slowest of three): before it, no JS of ours can run. */
async function nodeBootMs(): Promise<number> {
  let worst = 0;
  for (let i = 0; i < 3; i++) {
    const t0 = performance.now();
    await new Promise<void>((done) => {
      const p = spawn(process.execPath, ["-e", "process.stdout.write('x')"]);
      p.stdout.once("data", () => done());
      p.once("close", () => done());
    });
    worst = Math.max(worst, performance.now() - t0);
  }
  return worst;
}

test("SIGTERM and SIGINT in the first second, while the CLI is still loading: exit 130, one line, no stack", async () => {
  // Node's own start-up precedes any JS of ours, so the offsets begin past twice the boot time
  // measured now; from the launcher's first line on every signal is ours (it used to exit 143). study runs
  // a load loop: where Node can re-execute (process.execve) it starts twice (src/cli/launch.mjs), and a
  // signal in the second start gets Node's default, so there the offsets begin past three boots.
  const boot = await nodeBootMs();
  const starts = typeof (process as { execve?: unknown }).execve === "function" ? 3 : 2;
  for (const [i, extra] of [0, 150, 400, 900].entries()) {
    const sig = i % 2 ? "SIGINT" : "SIGTERM";
    let pid = 0;
    const run = runCli(["study", "--quick", "--out", join(dir, `early-${i}`), "--no-store"], {
      limitMs: 60_000,
      cwd: dir,
      onStart: (p) => (pid = p),
    });
    await new Promise((r) => setTimeout(r, starts * boot + extra));
    process.kill(pid, sig);
    const r = await run;
    assert.equal(
      r.code,
      130,
      `${sig} at ${Math.round(starts * boot + extra)} ms: signal ${r.signal ?? "-"} ${r.stderr}`,
    );
    assert.match(r.stderr, new RegExp(`interrupted by ${sig}`));
    assert.doesNotMatch(r.stderr, STACK);
    assert.deepEqual(r.leftovers, []);
  }
});

test("trace capture, Ctrl-C during the workload: exit 130, the profiler is stopped and the message says what was kept", async () => {
  const prof = mkdtempSync(join(tmpdir(), "inferscope-interrupt-prof-"));
  const traced = await startSim({ port: 0, seed: 4, profilerDir: prof });
  try {
    const r = await (async () => {
      let pid = 0;
      const run = runCli(["trace", "capture", traced.url, "--dir", prof, "--steps", "2000"], {
        limitMs: 90_000,
        cwd: dir,
        onStart: (p) => (pid = p),
      });
      await waitFor(() => (traced.openStreams() > 0 ? true : undefined), 60_000, "the capture's request");
      process.kill(pid, "SIGINT");
      return run;
    })();
    assert.equal(r.code, 130, r.stderr);
    assert.doesNotMatch(r.stderr, STACK);
    assert.match(
      r.stderr,
      /interrupted by SIGINT during the workload \(\d+ tokens finished\); the profiler was stopped; /,
    );
    const files = readdirSync(prof).filter((f) => /\.pt\.trace\.json(\.gz)?$/.test(f));
    if (files.length) assert.match(r.stderr, /its partial trace is kept: .*\.pt\.trace\.json/);
    else assert.match(r.stderr, /no trace file appeared in /);
    // Stopped: a new capture can start the profiler again.
    const again = await fetch(`${traced.url}/start_profile`, { method: "POST" });
    assert.ok(again.status < 300, `start_profile after the interrupt: HTTP ${again.status}`);
    await fetch(`${traced.url}/stop_profile`, { method: "POST" });
  } finally {
    await traced.close(0);
  }
});
