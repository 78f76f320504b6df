// Every long-running command × {SIGINT, SIGTERM}, signalled mid-run against the real simulator: each
// exits 130 through the one interrupt path, prints where its partial results are (the run id to resume
// for stored runs), shows no stack trace and leaves no process behind. The moment comes from the
// command's own progress lines (INFERSCOPE_PROGRESS=1) or the sim's count of open streams.
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { type SimHandle, startSim } from "../../src/sim/index.ts";
import { type CliRun, ROOT, runCli, STACK, waitFor } from "../helpers/cli.ts";

const dir = mkdtempSync(join(tmpdir(), "inferscope-interrupt-table-"));
const SIM_CMD = `${process.execPath} --import tsx ${join(ROOT, "test", "experiment", "fixtures", "sim-server.ts")} --time-scale 4`;
let sim: SimHandle;
before(async () => {
  sim = await startSim({ port: 0, seed: 5 });
});
after(async () => {
  await sim.close(0);
});

interface Row {
  args: (n: number) => string[];
  /** A progress line that means "mid-run"; without one, the sim's open streams. */
  at?: RegExp;
  /** What the closing line says was kept. */
  kept: RegExp;
}

let n = 0;
const db = () => join(dir, `${n++}.db`);
const TABLE: Record<string, Row> = {
  bench: {
    args: () => ["bench", "--base-url", sim.url, "--num-prompts", "40", "--random-output-len", "256"],
    kept: /interrupted by SIG(INT|TERM): partial results printed above/,
  },
  ab: {
    args: (i) =>
      ["ab", "--server-cmd", SIM_CMD, "--variant", "a:", "--variant", "b:NCCL_PROTO=LL", "--repeats", "2"].concat(
        ["--num-prompts", "3", "--warmup", "0", "--random-output-len", "64", "--ready-timeout", "60s"],
        ["--grace", "5s", "--log-dir", join(dir, `ab-${i}`), "--db", db()],
      ),
    at: /\[ab\] block 1\/4: /,
    kept: /saved in run ab-\S+ .*continue with --resume ab-/,
  },
  sweep: {
    args: () =>
      ["sweep", "concurrency", "--url", sim.url, "--levels", "1,2,3", "--num-prompts", "4"].concat([
        "--random-output-len",
        "64",
        "--warmup",
        "0",
        "--db",
        db(),
      ]),
    kept: /saved in run sweep-concurrency-\S+ .*continue with --resume sweep-concurrency-/,
  },
  tune: {
    args: (i) =>
      ["tune", "--knob", "NCCL_PROTO=,LL", "--time-scale", "10", "--num-prompts", "4"].concat([
        "--random-output-len",
        "48",
        "--log-dir",
        join(dir, `tune-${i}`),
        "--db",
        db(),
        "--out",
        join(dir, `t-${i}`),
      ]),
    at: /\[tune\] block 1: c0/,
    kept: /saved in run tune-\S+ .*partial report in .*continue with --resume tune-/,
  },
  study: {
    args: (i) => ["study", "--quick", "--out", join(dir, `s-${i}`), "--db", db()],
    at: /bench: started/,
    kept: /saved in run study-\S+, partial report in /,
  },
};

describe("every command, SIGINT and SIGTERM mid-run", { concurrency: 1 }, () => {
  for (const [name, row] of Object.entries(TABLE))
    for (const sig of ["SIGINT", "SIGTERM"] as const)
      test(`${name} × ${sig}`, { timeout: 180_000 }, async () => {
        const i = n++;
        let pid = 0;
        let seen: () => void = () => {};
        const reached = new Promise<void>((r) => (seen = r));
        const run: Promise<CliRun> = runCli(row.args(i), {
          limitMs: 150_000,
          env: { INFERSCOPE_PROGRESS: "1" },
          onStart: (p) => (pid = p),
          // biome-ignore lint/suspicious/noThenProperty: runCli's hook is named `then`
          when: row.at ? { match: row.at, then: () => seen() } : undefined,
        });
        if (row.at) await Promise.race([reached, run]);
        else await waitFor(() => (sim.openStreams() > 0 ? true : undefined), 60_000, "a stream through the sim");
        process.kill(pid, sig);
        const r = await run;
        assert.equal(r.killed, false, r.stderr);
        assert.equal(r.code, 130, r.stderr);
        assert.match(r.stderr, row.kept);
        assert.doesNotMatch(r.stderr, STACK);
        assert.deepEqual(r.leftovers, []);
      });
});
