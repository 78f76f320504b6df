// Many processes opening one new store at once (benches started together against a fresh --db): the
// schema is created once, by whichever gets there first, and every process saves its run; none fails
// with "table runs already exists" or "database is locked".
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { openStore } from "../../src/store/index.ts";

const dir = mkdtempSync(join(tmpdir(), "inferscope-concurrent-open-"));
after(() => rmSync(dir, { recursive: true, force: true }));
const CHILD = join("test", "store", "fixtures", "open-new-store.ts");
const PROCESSES = 10;
const ROUNDS = 4;

interface Exit {
  code: number | null;
  stderr: string;
}

/** Starts a child and resolves once it said "ready" (everything it needs is loaded). */
function start(db: string): Promise<{ child: ChildProcess; exit: Promise<Exit> }> {
  const child = spawn(process.execPath, ["--import", "tsx", CHILD, db], { stdio: ["pipe", "pipe", "pipe"] });
  let stderr = "";
  child.stderr!.setEncoding("utf8").on("data", (d: string) => {
    stderr += d;
  });
  const exit = new Promise<Exit>((resolve) => child.on("exit", (code) => resolve({ code, stderr })));
  return new Promise((resolve, reject) => {
    child.stdout!.setEncoding("utf8").once("data", () => resolve({ child, exit }));
    child.once("exit", (code) => reject(new Error(`child exited (${code}) before it was ready: ${stderr}`)));
  });
}

test(`${PROCESSES} processes open one new store at the same instant: one schema, every run saved (${ROUNDS} rounds)`, async () => {
  for (let round = 0; round < ROUNDS; round++) {
    const db = join(dir, `round${round}.db`);
    const children = await Promise.all(Array.from({ length: PROCESSES }, () => start(db)));
    // All loaded and waiting: released together.
    for (const c of children) c.child.stdin!.end("go\n");
    const exits = await Promise.all(children.map((c) => c.exit));
    const failed = exits.filter((e) => e.code !== 0);
    assert.deepEqual(failed, [], `round ${round}: ${failed.map((e) => e.stderr.trim()).join(" | ")}`);
    const s = openStore(db);
    assert.equal(s.listRuns({ kind: "race" }).length, PROCESSES);
    s.close();
  }
});
