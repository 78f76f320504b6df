import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { test } from "node:test";
import { describeError, ExitCode, ParseError, TargetError } from "../../src/errors.ts";

const cli = (args: string[]) => spawnSync(process.execPath, ["bin/inferscope.mjs", ...args], { encoding: "utf8" });

test("--help lists the commands and exits 0", () => {
  const r = cli(["--help"]);
  assert.equal(r.status, 0);
  for (const c of ["study", "metrics", "bench", "model", "trace", "sim"])
    assert.match(r.stdout, new RegExp(`\\b${c}\\b`));
});

test("an unknown command is a usage error (exit 2) without a stack trace", () => {
  const r = cli(["no-such-command"]);
  assert.equal(r.status, ExitCode.usage);
  assert.match(r.stderr, /unknown command/);
  assert.doesNotMatch(r.stderr, /\n\s+at /);
});

test("errors carry positions and exit codes", () => {
  const e = new ParseError("expected a value", { file: "m.txt", line: 3, column: 7 });
  assert.equal(e.message, "m.txt:3:7: expected a value");
  assert.equal(describeError(e).exitCode, ExitCode.usage);
  assert.equal(describeError(new TargetError("refused")).exitCode, ExitCode.unreachable);
  const sys = Object.assign(new Error("x"), { code: "ENOENT", path: "/nope" });
  assert.equal(describeError(sys).message, "/nope: no such file or directory");
});
