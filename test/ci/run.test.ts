// CI's own script (.ci/run) and the runner it calls (scripts/run-tests.mjs): the Node 20 subset is the files
// it names (a renamed file cannot drop out of it unseen), and the whole suite runs through the README's
// `npm test` on the pinned Node 24.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { test } from "node:test";

const runTests = (args: string[]) =>
  spawnSync(process.execPath, ["scripts/run-tests.mjs", ...args], { encoding: "utf8" });
// The script's logical lines (backslash continuations joined), comments dropped.
const lines = readFileSync(".ci/run", "utf8")
  .replace(/\\\n\s*/g, "")
  .split("\n")
  .filter((l) => l.trim() && !l.trim().startsWith("#"));

test("run-tests: a filter that matches no file is an error, even beside one that does", () => {
  const r = runTests(["test/cli/main.test.ts", "test/no-such-file", "--list"]);
  assert.equal(r.status, 1);
  assert.match(r.stderr, /no test file matches test\/no-such-file/);
  assert.equal(r.stdout, "");
});

test(".ci/run: Node 20 runs the store on better-sqlite3, the package, the CLI's process behaviour and one e2e run", () => {
  const line = lines.find((l) => l.includes("scripts/run-tests.mjs") && !l.startsWith("npm"));
  assert.ok(line, "a Node 20 subset");
  assert.match(line, /^INFERSCOPE_EXPECT_SQLITE=better-sqlite3 node scripts\/run-tests\.mjs /);
  const filters = line.split("run-tests.mjs ")[1]!.trim().split(/\s+/);
  const r = runTests([...filters, "--list"]);
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(r.stdout.trim().split("\n"), [
    "test/cli/launch.test.ts",
    "test/cli/main.test.ts",
    "test/experiment/sweep-resume.e2e.test.ts",
    "test/package/pack.test.ts",
    "test/store/capacity-store.test.ts",
    "test/store/concurrent-open.test.ts",
    "test/store/export.test.ts",
    "test/store/push.test.ts",
    "test/store/runs-cli.test.ts",
    "test/store/sqlite.test.ts",
    "test/store/store.test.ts",
  ]);
});

test(".ci/run: then the README's npm test, whole, with the pinned Node 24 first on PATH and node:sqlite expected", () => {
  const i = lines.findIndex((l) => l.startsWith('export PATH="$n24/package/bin:$PATH"'));
  assert.ok(i >= 0 && lines[i]!.includes("INFERSCOPE_EXPECT_SQLITE=node:sqlite"), "Node 24 first on PATH");
  assert.equal(lines.at(-1), "npm test");
  assert.match(lines.find((l) => l.startsWith("NODE24_VERSION=")) ?? "", /^NODE24_VERSION=24\.\d+\.\d+$/);
  // npm test is the whole suite: typecheck, lint, and the runner with no filter.
  const scripts = JSON.parse(readFileSync("package.json", "utf8")).scripts;
  assert.equal(scripts.test, "npm run typecheck && npm run lint && node scripts/run-tests.mjs");
});
