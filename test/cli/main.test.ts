import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { once } from "node:events";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
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

test("a --json document reaches a slow reader whole (the CLI waits for stdout to drain before exiting)", {
  timeout: 30_000,
}, async () => {
  const dir = mkdtempSync(join(tmpdir(), "inferscope-drain-"));
  const file = join(dir, "big.prom");
  const lines = ["# TYPE req_total counter"];
  for (let i = 0; i < 20_000; i++) lines.push(`req_total{path="/p${i}",code="200"} ${i}`);
  writeFileSync(file, `${lines.join("\n")}\n`);
  const child = spawn(process.execPath, ["bin/inferscope.mjs", "metrics", "scrape", file, "--json"], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  // Read nothing for a while: the pipe fills (64 KiB) and the rest waits in the child's queue.
  child.stdout.pause();
  await new Promise((r) => setTimeout(r, 700));
  const parts: Buffer[] = [];
  child.stdout.on("data", (d: Buffer) => parts.push(d));
  child.stdout.resume();
  const [code] = (await once(child, "close")) as [number];
  rmSync(dir, { recursive: true, force: true });
  assert.equal(code, 0);
  const out = Buffer.concat(parts).toString("utf8");
  assert.ok(out.length > 1_000_000, `got ${out.length} bytes`);
  assert.doesNotThrow(() => JSON.parse(out));
});

test("a reader that goes away (| head) ends the CLI quietly with its own exit code", async () => {
  const child = spawn(process.execPath, ["bin/inferscope.mjs", "model", "--help"], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.stdout.destroy();
  let err = "";
  child.stderr.on("data", (d) => {
    err += d;
  });
  const [code] = (await once(child, "close")) as [number];
  assert.equal(code, 0);
  assert.doesNotMatch(err, /EPIPE|\n\s+at /);
});

test("study: a report directory that cannot exist fails at once, before any phase runs (exit 2)", () => {
  const dir = mkdtempSync(join(tmpdir(), "inferscope-out-"));
  const file = join(dir, "a-file");
  writeFileSync(file, "");
  const db = join(dir, "runs.db");
  const r = cli(["study", "--quick", "--db", db, "--out", join(file, "report")]);
  assert.equal(r.status, ExitCode.usage, r.stderr);
  assert.match(r.stderr, /--out \S*a-file\/report: not a directory \(a part of the path is a file\)/);
  assert.doesNotMatch(r.stderr, /internal error|\n\s+at /);
  assert.ok(!existsSync(db), "nothing was started or stored");
  rmSync(dir, { recursive: true, force: true });
});

test("numeric flags are checked against their ranges before anything starts (exit 2, the flag named)", () => {
  for (const [args, msg] of [
    [["sim", "--port", "99999"], /--port expects an integer in \[0, 65535\], got "99999"/],
    [["sim", "--max-num-seqs", "-1"], /--max-num-seqs expects an integer ≥ 1, got "-1"/],
    [["sim", "--acceptance", "1.5"], /--acceptance expects a number in \[0, 1\]/],
    [["sim", "--time-scale", "0"], /--time-scale expects a number > 0, got "0"/],
    [["sim", "--dcgm-interval-ms", "5"], /--dcgm-interval-ms expects a number ≥ 10, got "5"/],
    [["study", "--tp", "0"], /--tp expects an integer ≥ 1/],
  ] as const) {
    const r = cli([...args]);
    assert.equal(r.status, ExitCode.usage, `${args.join(" ")}: ${r.stderr}`);
    assert.match(r.stderr, msg);
    assert.doesNotMatch(r.stderr, /internal error|\n\s+at /);
  }
});
