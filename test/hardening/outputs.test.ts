// Output safety and the outcome rule: output files claimed atomically, secrets and control characters
// kept off the terminal, --resume refusing contradicting options, the exit-code rule.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { escapeControl, terminalSafe } from "../../src/cli/common.ts";
import { ExitCode, outcomeExitCode, UsageError } from "../../src/errors.ts";
import { abResumeConflicts, resolveABConfig } from "../../src/experiment/ab.ts";
import { parseVariant } from "../../src/experiment/variants.ts";
import { claimOutput } from "../../src/output-file.ts";
import { redactString } from "../../src/store/redact.ts";
import { runCli } from "../helpers/cli.ts";
import { startFaultServer } from "../helpers/faults.ts";

const dir = mkdtempSync(join(tmpdir(), "inferscope-outputs-"));

test("an output file is written beside its name and renamed into place; a second claim is refused", () => {
  const path = join(dir, "result.json");
  const a = claimOutput(path, "--save-result");
  assert.throws(
    () => claimOutput(path, "--save-result"),
    (e: unknown) => {
      assert.ok(e instanceof UsageError);
      assert.match((e as Error).message, /--save-result .*another inferscope run \(pid \d+\) is writing this file/);
      return true;
    },
  );
  writeFileSync(a.tempPath, "{}\n");
  assert.equal(existsSync(path), false, "nothing under the final name before commit");
  a.commit();
  assert.equal(readFileSync(path, "utf8"), "{}\n");
  // Released: the next run may claim it.
  claimOutput(path, "--save-result").abort();
});

test("a stale lock (its process gone) is taken over; a directory is refused with the flag", () => {
  const path = join(dir, "records.jsonl");
  writeFileSync(join(dir, ".records.jsonl.inferscope-lock"), `999999999 ${hostname()}`);
  claimOutput(path, "--records").abort();
  assert.throws(() => claimOutput(dir, "--records"), /--records .*: is a directory; give a file name/);
});

test("a secret in a variant's environment is redacted on stdout; control characters are escaped", () => {
  parseVariant("tok:HF_TOKEN=hf_abcdefgh1234");
  assert.equal(redactString("env HF_TOKEN value hf_abcdefgh1234"), "env HF_TOKEN value [redacted]");
  assert.equal(escapeControl("a\x1b[2Jb\x07\nc"), "a\\x1b[2Jb\\x07\nc");
  assert.deepEqual(terminalSafe({ m: ["x\x1b]0;t\x07"], n: 1 }), { m: ["x\\x1b]0;t\\x07"], n: 1 });
});

test("ab --resume with a contradicting option is refused, naming the flag", () => {
  const stored = resolveABConfig({
    serverCmd: "serve --port {port}",
    variants: ["base:", "ll:NCCL_PROTO=LL"],
    workload: { numPrompts: 20 },
  });
  assert.deepEqual(abResumeConflicts({ workload: { numPrompts: 20 } }, stored), []);
  const c = abResumeConflicts({ workload: { numPrompts: 99 }, repeats: 5 }, stored);
  assert.equal(c.length, 2, c.join("; "));
  assert.match(c.join("; "), /--num-prompts is 20 in the run, 99 now/);
  assert.match(c.join("; "), /--repeats is 2 in the run, 5 now/);
  assert.throws(
    () => resolveABConfig({ serverCmd: "x", variants: ["a:", "b:"], resamples: 0 }),
    /--resamples must be an integer ≥ 10/,
  );
});

test("the outcome rule: interrupted 130, bad input 2, nothing measured 3, findings 1, else 0", () => {
  assert.equal(outcomeExitCode({ interrupted: true, measured: 3 }), ExitCode.interrupted);
  assert.equal(outcomeExitCode({ badInput: true, measured: 0 }), ExitCode.usage);
  assert.equal(outcomeExitCode({ measured: 0 }), ExitCode.unreachable);
  assert.equal(outcomeExitCode({ measured: 2, findings: 1 }), ExitCode.findings);
  assert.equal(outcomeExitCode({ measured: 2 }), ExitCode.ok);
});

test("bad duration flags are usage errors naming the flag, not internal errors", async () => {
  for (const flag of ["--grace", "--ready-timeout"]) {
    const r = await runCli([
      "ab",
      "--variant",
      "a=http://127.0.0.1:1",
      "--variant",
      "b=http://127.0.0.1:1",
      flag,
      "abc",
    ]);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, new RegExp(`${flag}: not a duration: "abc"`));
    assert.doesNotMatch(r.stderr, /internal error/);
  }
});

test("bench --db saves the run (kind bench) and --records lands under its name with no lock left", async () => {
  const s = await startFaultServer("sse-cut");
  try {
    const db = join(dir, "bench.db");
    const records = join(dir, "r.jsonl");
    const r = await runCli(["bench", "--base-url", s.url, "--num-prompts", "2", "--db", db, "--records", records]);
    assert.equal(r.code, 3, r.stderr);
    assert.match(r.stderr, /run bench-\S+ saved in/);
    assert.ok(readFileSync(records, "utf8").trim().split("\n").length >= 2);
    assert.equal(existsSync(join(dir, ".r.jsonl.inferscope-lock")), false);
    const l = await runCli(["runs", "list", "--db", db, "--json"]);
    const rows = JSON.parse(l.stdout) as Array<{ kind: string; status: string; requests: number }>;
    assert.deepEqual(
      rows.map((x) => [x.kind, x.status, x.requests]),
      [["bench", "failed", 2]],
    );
  } finally {
    await s.close();
  }
});
