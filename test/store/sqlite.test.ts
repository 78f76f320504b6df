// The SQLite layer under the store: which driver a Node gets, that both drivers keep the semantics the
// store relies on, and what a user sees when there is no driver at all.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { openDatabase, openStore, sqliteDriver, sqliteErrorCode } from "../../src/store/index.ts";
import { expectedSqliteDriver } from "../helpers/sqlite.ts";

const dir = mkdtempSync(join(tmpdir(), "inferscope-sqlite-"));
after(() => rmSync(dir, { recursive: true, force: true }));
const NO_BETTER = join("test", "store", "fixtures", "no-better-sqlite3.cjs");

function cli(args: string[], env: Record<string, string> = {}, preload: string[] = []) {
  return spawnSync(process.execPath, [...preload, "bin/inferscope.mjs", ...args], {
    encoding: "utf8",
    env: { ...process.env, ...env },
    timeout: 60_000,
  });
}

test("the store runs on node:sqlite wherever this Node has it, else on better-sqlite3", () => {
  const want = expectedSqliteDriver();
  // CI names the driver each Node must use, so a silent fallback fails there.
  if (process.env.INFERSCOPE_EXPECT_SQLITE) assert.equal(process.env.INFERSCOPE_EXPECT_SQLITE, want);
  assert.equal(sqliteDriver(), want);
  const s = openStore(join(dir, "driver.db"));
  assert.equal(s.driver, want);
  s.close();
});

test(`${sqliteDriver()}: transactions commit, roll back whole, nest as savepoints, and refuse promises`, () => {
  const db = openDatabase(join(dir, "tx.db"));
  db.pragma("journal_mode = WAL");
  assert.equal(db.pragma("journal_mode", { simple: true }), "wal");
  db.exec("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)");
  const ins = db.prepare("INSERT INTO t (k, v) VALUES (?, ?)");
  const r = ins.run(1, undefined); // undefined binds as NULL on both drivers
  assert.equal(r.changes, 1);
  assert.equal(Number(r.lastInsertRowid), 1);
  assert.deepEqual({ ...(db.prepare("SELECT v FROM t WHERE k = 1").get() as object) }, { v: null });
  assert.equal(db.prepare("SELECT v FROM t WHERE k = 99").get(), undefined);

  const many = db.transaction((from: number, n: number) => {
    assert.equal(db.inTransaction, true);
    for (let k = from; k < from + n; k++) ins.run(k, `v${k}`);
    return n;
  });
  assert.equal(many(2, 3), 3);
  assert.equal(db.inTransaction, false);
  const count = (where: string) => (db.prepare(`SELECT count(*) AS n FROM t WHERE ${where}`).get() as { n: number }).n;
  // A failure part-way leaves nothing of the batch (k 3 exists: the 3rd insert fails).
  const dup = db.transaction(() => {
    ins.run(20, "a");
    ins.run(21, "b");
    ins.run(3, "dup");
  });
  assert.throws(dup, (e) => sqliteErrorCode(e) === "SQLITE_CONSTRAINT");
  assert.equal(count("k >= 20"), 0);
  assert.equal(db.inTransaction, false);

  // Nested: the inner failure rolls back only the inner part.
  db.transaction(() => {
    ins.run(30, "outer");
    assert.throws(() =>
      db.transaction(() => {
        ins.run(31, "inner");
        throw new Error("inner fails");
      })(),
    );
    ins.run(32, "outer again");
  }).immediate();
  const ks = (db.prepare("SELECT k FROM t WHERE k >= 30 ORDER BY k").all() as Array<{ k: number }>).map((x) => x.k);
  assert.deepEqual(ks, [30, 32]);

  assert.throws(() => db.transaction(async () => ins.run(40, "x"))(), /promise/);
  assert.equal(count("k = 40"), 0);

  try {
    db.prepare("INSERT INTO t (k, v) VALUES (1, 'dup')").run();
    assert.fail("a duplicate key was accepted");
  } catch (err) {
    assert.equal(sqliteErrorCode(err), "SQLITE_CONSTRAINT");
  }
  db.close();
  assert.equal(db.open, false);
  db.close(); // a second close is harmless
});

test(`${sqliteDriver()}: a read-only open sees committed data, refuses writes, and needs the file`, () => {
  const path = join(dir, "ro.db");
  const w = openDatabase(path);
  w.exec("CREATE TABLE t (v INTEGER); INSERT INTO t VALUES (7)");
  const ro = openDatabase(path, { readonly: true });
  assert.equal((ro.prepare("SELECT v FROM t").get() as { v: number }).v, 7);
  assert.throws(
    () => ro.exec("INSERT INTO t VALUES (8)"),
    (e) => sqliteErrorCode(e) === "SQLITE_READONLY",
  );
  ro.close();
  w.close();
  assert.throws(() => openDatabase(join(dir, "missing.db"), { readonly: true }));
  assert.throws(() => openDatabase(join(dir, "missing.db"), { fileMustExist: true }));
});

test("no SQLite driver at all: the store fails with exit 2 and what to do; commands without the store still run", () => {
  const db = join(dir, "none.db");
  openStore(db).close();
  // Forcing better-sqlite3 skips node:sqlite on every Node; the preload makes better-sqlite3 absent.
  const none = { INFERSCOPE_SQLITE: "better-sqlite3" };
  const r = cli(["runs", "list", "--db", db], none, ["--require", `./${NO_BETTER}`]);
  assert.equal(r.status, 2, r.stderr);
  assert.match(r.stderr, /run store needs SQLite/);
  assert.match(r.stderr, /better-sqlite3 is not installed/);
  assert.match(r.stderr, /Node 22\.13 or later/);
  assert.doesNotMatch(r.stderr, /^\s+at /m, "no stack trace");

  const prom = (f: string) => join("test", "metrics", "fixtures", f);
  const p = cli(["metrics", "diff", prom("engine-sglang.prom"), prom("engine-sglang.b.prom"), "--json"], none, [
    "--require",
    `./${NO_BETTER}`,
  ]);
  assert.equal(p.status, 0, p.stderr);
  assert.ok(JSON.parse(p.stdout).counters.length > 0);

  const bad = cli(["runs", "list", "--db", db], { INFERSCOPE_SQLITE: "sqlite4" });
  assert.equal(bad.status, 2, bad.stderr);
  assert.match(bad.stderr, /INFERSCOPE_SQLITE=sqlite4: not a SQLite driver/);
});

test("opening a store prints no ExperimentalWarning (Node 22 emits one when node:sqlite loads)", () => {
  // A child that loads the driver for the first time and then lets the event loop run out, as a
  // command does: Node writes warnings on a later tick, so a process that exits at once would hide one.
  const script = `const { openStore } = await import("./src/store/index.ts");
    openStore(${JSON.stringify(join(dir, "quiet.db"))}).close();
    await new Promise((r) => setTimeout(r, 50));
    console.log("opened");`;
  const r = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
    encoding: "utf8",
    timeout: 60_000,
  });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout.trim(), "opened");
  assert.doesNotMatch(r.stderr, /ExperimentalWarning|experimental feature/);
});
