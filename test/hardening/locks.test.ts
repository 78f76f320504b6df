// Locks on shared storage and after a crash: a lock taken on another host is never taken over silently
// (refused, naming the lock file, its host and pid, and how to free it); a lock or a stored run whose pid
// now names another process (its start time differs) is stale; a killed run's temporary file is removed
// on the next write to that path.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { UsageError } from "../../src/errors.ts";
import { claimOutput, claimOutputDir, claimRun } from "../../src/output-file.ts";
import { processStart } from "../../src/process-id.ts";
import { openDatabase, openStore } from "../../src/store/index.ts";
import { ROOT } from "../helpers/cli.ts";

const dir = mkdtempSync(join(tmpdir(), "inferscope-locks-"));
after(() => rmSync(dir, { recursive: true, force: true }));
const OTHER_HOST = `not-${hostname()}`;

function refused(fn: () => unknown, re: RegExp, hint: RegExp): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof UsageError, String(e));
    assert.match(e.message, re);
    assert.match(e.hint ?? "", hint);
    return true;
  });
}

test("a lock from another host is refused with its file, host and pid, for files, report directories and runs", () => {
  // Our own pid: a live process here, but the lock says it was taken elsewhere, where we cannot look.
  const lockFor = (name: string) => join(dir, `.${name}.inferscope-lock`);
  writeFileSync(lockFor("shared.jsonl"), `${process.pid} ${OTHER_HOST} -`);
  const hint = (lock: string) =>
    new RegExp(
      `the lock is ${lock.replace(/[.]/g, "\\.")} \\(pid ${process.pid} on host ${OTHER_HOST}\\); if no inferscope process on ${OTHER_HOST} is using it, remove that file`,
    );
  refused(
    () => claimOutput(join(dir, "shared.jsonl"), "--records"),
    new RegExp(`another inferscope run \\(pid ${process.pid} on host ${OTHER_HOST}\\) is writing this file`),
    hint(lockFor("shared.jsonl")),
  );
  assert.equal(
    readFileSync(lockFor("shared.jsonl"), "utf8"),
    `${process.pid} ${OTHER_HOST} -`,
    "the lock is untouched",
  );

  const report = join(dir, "report");
  claimOutputDir(report, "--out").release();
  writeFileSync(join(report, ".inferscope-lock"), `4242 ${OTHER_HOST}`);
  refused(
    () => claimOutputDir(report, "--out"),
    new RegExp(`another inferscope run \\(pid 4242 on host ${OTHER_HOST}\\) is writing a report there`),
    /the lock is .*report\/\.inferscope-lock \(pid 4242 on host/,
  );

  writeFileSync(join(dir, ".runs.db.ab-1.inferscope-lock"), `4242 ${OTHER_HOST}`);
  refused(
    () => claimRun(join(dir, "runs.db"), "ab-1"),
    new RegExp(`run ab-1 is being written by another inferscope process \\(pid 4242 on host ${OTHER_HOST}\\)`),
    /the lock is .*\.runs\.db\.ab-1\.inferscope-lock/,
  );
});

test("a lock whose pid now names another process (its start differs) is stale; an unknown start is refused, naming the file", () => {
  const path = join(dir, "reused.json");
  const lock = join(dir, ".reused.json.inferscope-lock");
  const start = processStart(process.pid);
  // Where the platform gives no start time there is nothing to tell a reused pid by.
  if (start !== null) {
    writeFileSync(lock, `${process.pid} ${hostname()} ${start.replace(/\d+$/, (t) => String(Number(t) + 1))}`);
    const c = claimOutput(path, "--save-result");
    assert.match(readFileSync(lock, "utf8"), new RegExp(`^${process.pid} ${hostname()} ${start}$`));
    c.abort();
  }
  // A lock from before starts were recorded, naming a live pid: refused, and the message says which file.
  writeFileSync(lock, `${process.pid} ${hostname()}`);
  refused(
    () => claimOutput(path, "--save-result"),
    new RegExp(`another inferscope run \\(pid ${process.pid}\\) is writing this file`),
    new RegExp(`the lock is ${lock.replace(/[.]/g, "\\.")} \\(pid ${process.pid} on this host\\)`),
  );
});

test("a run killed mid-write leaves .F.PID.tmp and its lock; the next write to F removes the temp file", async () => {
  const path = join(dir, "killed.jsonl");
  // A real process claims the file, writes its temporary file and is killed before it can rename it.
  const script = `
    import { writeFileSync } from "node:fs";
    import { claimOutput } from ${JSON.stringify(join(ROOT, "src", "output-file.ts"))};
    const c = claimOutput(${JSON.stringify(path)}, "--records");
    writeFileSync(c.tempPath, "half a file");
    process.kill(process.pid, "SIGKILL");`;
  const child = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], { cwd: ROOT });
  const [, signal] = await new Promise<[number | null, string | null]>((r) => child.on("exit", (c, s) => r([c, s])));
  assert.equal(signal, "SIGKILL");
  const left = readdirSync(dir).filter((n) => n.startsWith(".killed.jsonl."));
  assert.deepEqual(left.sort(), [`.killed.jsonl.${child.pid}.tmp`, ".killed.jsonl.inferscope-lock"]);

  const c = claimOutput(path, "--records");
  assert.ok(!existsSync(join(dir, `.killed.jsonl.${child.pid}.tmp`)), "the dead run's temporary file is removed");
  writeFileSync(c.tempPath, "whole\n");
  c.commit();
  assert.equal(readFileSync(path, "utf8"), "whole\n");
  assert.deepEqual(
    readdirSync(dir).filter((n) => n.startsWith(".killed.jsonl.")),
    [],
  );
});

test("a stored run left 'running' by a writer whose pid now names another process reads as partial", () => {
  const db = join(dir, "reused.db");
  const s = openStore(db);
  const run = s.saveRun({ kind: "ab", config: {} });
  s.close();
  // The writer was killed and its pid given to a live process (the test runner, our parent): same pid
  // alive, another start.
  const raw = openDatabase(db);
  raw.prepare("UPDATE runs SET pid = ?, pid_start = ? WHERE id = ?").run(process.ppid, "another-boot/1", run.id);
  raw.close();
  const again = openStore(db);
  const r = again.getRun(run.id).run;
  again.close();
  assert.equal(r.status, "partial");
  assert.match(r.error ?? "", /writer process ended/);
});
