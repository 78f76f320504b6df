// Runs every test/**/*.test.ts with node:test. Node 20 does not expand quoted globs, so list files here.
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

const filters = process.argv.slice(2);
let files = walk("test").sort();
if (filters.length) files = files.filter((f) => filters.some((x) => f.includes(x)));
if (files.length === 0) {
  console.error("no test files found");
  process.exit(1);
}
const args = ["--import", "tsx", "--test", "--test-reporter=spec", ...files.map((f) => relative(".", f))];
const concurrency = process.env.TEST_CONCURRENCY;
if (concurrency) args.splice(3, 0, `--test-concurrency=${concurrency}`);
const r = spawnSync(process.execPath, args, { stdio: "inherit", env: { ...process.env, INFERSCOPE_TEST: "1" } });
process.exit(r.status ?? 1);
