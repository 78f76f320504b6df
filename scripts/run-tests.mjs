// Runs test/**/*.test.ts with node:test. Node 20 does not expand quoted globs, so list files here.
//   node scripts/run-tests.mjs [FILTER…] [--exclude SUBSTR]… [--list]
// A file runs when its path contains any FILTER (every file when none is given) and no --exclude
// SUBSTR. A FILTER that matches no file is an error, so a mistyped or renamed file in a subset (CI's
// Node 20 list) cannot pass by running less; --list prints the selection instead of running it.
import { spawnSync } from "node:child_process";
import { readdirSync, statSync } from "node:fs";
import { join, relative } from "node:path";

function walk(dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) {
      if (name !== "fixtures" && name !== "node_modules") out.push(...walk(p));
    } else if (name.endsWith(".test.ts")) out.push(p);
  }
  return out;
}

const filters = [];
const excludes = [];
let list = false;
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  if (a === "--list") list = true;
  else if (a === "--exclude" || a.startsWith("--exclude=")) {
    const v = a === "--exclude" ? argv[++i] : a.slice("--exclude=".length);
    if (!v) {
      console.error("run-tests: --exclude needs a path substring");
      process.exit(2);
    }
    excludes.push(v);
  } else if (a.startsWith("--")) {
    console.error(`run-tests: unknown option ${a}`);
    process.exit(2);
  } else filters.push(a);
}
let files = walk("test").sort();
const unmatched = filters.filter((x) => !files.some((f) => f.includes(x)));
if (unmatched.length) {
  console.error(`run-tests: no test file matches ${unmatched.join(", ")}`);
  process.exit(1);
}
if (filters.length) files = files.filter((f) => filters.some((x) => f.includes(x)));
files = files.filter((f) => !excludes.some((x) => f.includes(x)));
if (files.length === 0) {
  console.error("no test files found");
  process.exit(1);
}
if (list) {
  console.log(files.join("\n"));
  process.exit(0);
}
console.error(`run-tests: ${files.length} file${files.length === 1 ? "" : "s"} on Node ${process.version}`);
const args = ["--import", "tsx", "--test", "--test-reporter=spec", ...files.map((f) => relative(".", f))];
const concurrency = process.env.TEST_CONCURRENCY;
if (concurrency) args.splice(3, 0, `--test-concurrency=${concurrency}`);
const r = spawnSync(process.execPath, args, { stdio: "inherit", env: { ...process.env, INFERSCOPE_TEST: "1" } });
process.exit(r.status ?? 1);
