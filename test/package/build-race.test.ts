// Two builds at once into one output (two `npm run bench:client` that find dist/ stale together), and a
// process reading the output while a third build replaces it: both builds succeed and only one compiles
// (the second waits, then finds the output fresh), the output is whole, and the reader never finds a
// file missing (before: the build emptied dist/ first, and a bench running from it got ENOENT).
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, rmSync } from "node:fs";
import { join, resolve } from "node:path";
import { after, test } from "node:test";
import { fileURLToPath } from "node:url";

const root = resolve(fileURLToPath(new URL("../..", import.meta.url)));
// Inside the checkout (git-ignored /dist.tmp-*/) so the compiled code resolves its dependencies.
const out = join(root, `dist.tmp-race-test-${process.pid}`);
after(() => rmSync(out, { recursive: true, force: true }));

function run(
  args: string[],
  stdin = false,
): { exit: Promise<{ code: number | null; stdout: string; stderr: string }>; end: () => void } {
  const c = spawn(process.execPath, args, { cwd: root, stdio: [stdin ? "pipe" : "ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  c.stdout!.setEncoding("utf8").on("data", (d: string) => (stdout += d));
  c.stderr!.setEncoding("utf8").on("data", (d: string) => (stderr += d));
  return {
    exit: new Promise((r) => c.on("close", (code) => r({ code, stdout, stderr }))),
    end: () => c.stdin?.end(),
  };
}

const build = (...a: string[]) => run(["scripts/build.mjs", "--out", out, ...a]);

// Reads a few of the output's files over and over (every 2 ms) until its stdin closes; prints passes and
// how many reads found a file missing.
const READER = `
const { readFileSync } = require("node:fs");
const files = JSON.parse(process.argv[1]);
let passes = 0, missing = 0, open = true;
process.stdin.on("end", () => (open = false)).resume();
const tick = () => {
  for (const f of files) try { readFileSync(f); } catch (e) { if (e.code === "ENOENT") missing++; else throw e; }
  passes++;
  if (open) setTimeout(tick, 2); else console.log(JSON.stringify({ passes, missing }));
};
tick();`;

test("two builds at once: one compiles, the other waits and finds it fresh; a reader during a rebuild never misses a file", async () => {
  const [a, b] = await Promise.all([build("--if-stale").exit, build("--if-stale").exit]);
  assert.equal(a.code, 0, a.stderr);
  assert.equal(b.code, 0, b.stderr);
  const compiled = [a, b].filter((x) => /build: .*\(tsc \+ \d+ asset files/.test(x.stderr));
  assert.equal(compiled.length, 1, `both compiled:\n${a.stderr}\n${b.stderr}`);
  const files = ["errors.js", "index.js", join("cli", "main.js"), join("load", "runner.js")].map((f) => join(out, f));
  for (const f of [...files, join(out, ".build-stamp")]) assert.ok(existsSync(f), `${f} missing`);

  // A forced rebuild while another process reads from the output.
  const reader = run(["-e", READER, JSON.stringify(files)], true);
  const c = await build().exit;
  reader.end();
  const r = await reader.exit;
  assert.equal(c.code, 0, c.stderr);
  const seen = JSON.parse(r.stdout) as { passes: number; missing: number };
  assert.ok(seen.passes > 10, `the reader barely ran: ${r.stdout}`);
  assert.equal(seen.missing, 0, `a file was missing ${seen.missing} times in ${seen.passes} passes`);
  assert.ok(existsSync(join(out, ".build-stamp")));
  assert.ok(!existsSync(`${out}.build-lock`), "the build lock is released");
  const v = await run([join(out, "cli", "main.js"), "--version"]).exit;
  assert.equal(v.code, 0, v.stderr);
});
