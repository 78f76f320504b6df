// The server process behind a loopback port, read from this machine's real /proc: found by its
// listening socket, and its threads' CPU time and run-queue wait. Contention is made for real: the
// server and a busy loop are pinned to one CPU with taskset, so the scheduler must share it.
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { contentionMsPerToken } from "../../src/study/phases.ts";
import { cpuSource } from "../../src/telemetry/sources/cpu.ts";
import {
  findListeningProcess,
  listeningInodes,
  ProcessSchedstat,
  parseSchedstat,
  runQueueShare,
} from "../../src/telemetry/sources/proc.ts";
import { summarizeTelemetry } from "../../src/telemetry/summary.ts";

const dir = mkdtempSync(join(tmpdir(), "inferscope-proc-"));
const children: ChildProcess[] = [];
after(() => {
  for (const c of children) c.kill("SIGKILL");
  rmSync(dir, { recursive: true, force: true });
});

/** A node process pinned to CPU 0 that listens on a loopback port and keeps that CPU busy. */
async function spinningServer(): Promise<{ pid: number; port: number }> {
  const code = `const s=require("http").createServer(()=>{}).listen(0,"127.0.0.1",()=>{console.log(s.address().port);const spin=()=>{const t=Date.now();while(Date.now()-t<20){}setImmediate(spin)};spin()})`;
  const c = spawn("taskset", ["-c", "0", process.execPath, "-e", code], { stdio: ["ignore", "pipe", "inherit"] });
  children.push(c);
  const port = await new Promise<number>((resolve, reject) => {
    c.once("error", reject);
    c.stdout!.once("data", (b: Buffer) => resolve(Number(b.toString().trim())));
  });
  return { pid: c.pid!, port };
}

function hogOnCpu0(): ChildProcess {
  const c = spawn("taskset", ["-c", "0", process.execPath, "-e", "for(;;){}"], { stdio: "ignore" });
  children.push(c);
  return c;
}

test("/proc layouts: LISTEN sockets by port in tcp and tcp6, schedstat lines, and a process not found says why", () => {
  const root = join(dir, "proc");
  mkdirSync(join(root, "net"), { recursive: true });
  const head = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n";
  writeFileSync(
    join(root, "net", "tcp"),
    `${head}   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0 100 0 0 10 0\n   1: 0100007F:1F90 0100007F:C350 01 00000000:00000000 00:00000000 00000000  1000        0 4343 1 0 20 4 30 10 -1\n`,
  );
  writeFileSync(
    join(root, "net", "tcp6"),
    `${head}   0: 00000000000000000000000001000000:1F91 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 5151 1 0 100 0 0 10 0\n`,
  );
  // Only the listening socket counts, not the established connection on the same port.
  assert.deepEqual([...listeningInodes(8080, root)], ["4242"]);
  assert.deepEqual([...listeningInodes(8081, root)], ["5151"]);
  assert.equal(listeningInodes(9999, root).size, 0);
  mkdirSync(join(root, "77", "fd"), { recursive: true });
  symlinkSync("socket:[4242]", join(root, "77", "fd", "3"));
  writeFileSync(join(root, "77", "comm"), "llama-server\n");
  mkdirSync(join(root, "77", "task", "77"), { recursive: true });
  mkdirSync(join(root, "77", "task", "78"), { recursive: true });
  writeFileSync(join(root, "77", "task", "77", "schedstat"), "2000000000 500000000 40\n");
  writeFileSync(join(root, "77", "task", "78", "schedstat"), "1000000000 250000000 9\n");
  assert.deepEqual(findListeningProcess(8080, root), { pid: 77, command: "llama-server" });
  const none = findListeningProcess(9999, root);
  assert.equal(none.pid, null);
  assert.match((none as { why: string }).why, /no listening socket on port 9999/);
  const other = findListeningProcess(8081, root);
  assert.match((other as { why: string }).why, /another user/);
  assert.deepEqual(parseSchedstat("12 34 5"), { runNs: 12, waitNs: 34 });
  assert.equal(parseSchedstat("garbage"), null);
  const ps = new ProcessSchedstat(77, root);
  const a = ps.read()!;
  assert.deepEqual(a, { runS: 3, waitS: 0.75, threads: 2 });
  // A thread that exits keeps its last reading: the total never goes back.
  rmSync(join(root, "77", "task", "78"), { recursive: true });
  writeFileSync(join(root, "77", "task", "77", "schedstat"), "3000000000 1500000000 60\n");
  const b = ps.read()!;
  assert.deepEqual(b, { runS: 4, waitS: 1.75, threads: 1 });
  assert.equal(runQueueShare(a, b), 0.5);
  assert.equal(runQueueShare(a, a), null);
});

test("contention per token: the token time × the wait share, never more than the waited seconds ÷ tokens", () => {
  // One CPU-bound thread: both bounds agree.
  assert.deepEqual(contentionMsPerToken(10, { runQueueShare: 0.5, runQueueS: 1 }, 200), { ms: 5, share: 0.5 });
  // A mostly sleeping server (the share is of runnable time, which is little): the waited seconds bound it.
  assert.equal(contentionMsPerToken(10, { runQueueShare: 0.5, runQueueS: 0.02 }, 200)!.ms, 0.1);
  assert.equal(contentionMsPerToken(10, { runQueueShare: 0.005, runQueueS: 1 }, 200), null);
  assert.equal(contentionMsPerToken(10, null, 200), null);
});

test("a server sharing its CPU with two busy loops: the cpu source sees it wait about two thirds of its runnable time, and run + wait fill the window", {
  timeout: 30_000,
}, async () => {
  const { pid, port } = await spinningServer();
  // The command is the kernel's name for the process: "node", or "MainThread" where Node (24) names its main thread.
  const comm = readFileSync(`/proc/${pid}/comm`, "utf8").trim();
  assert.ok(["node", "MainThread"].includes(comm), comm);
  assert.deepEqual(findListeningProcess(port), { pid, command: comm });
  const record = async () => {
    const h = await cpuSource({ serverPort: port }).start({ intervalMs: 100 });
    const t0 = Date.now() / 1000;
    await new Promise((r) => setTimeout(r, 1200));
    const cap = await h.stop();
    const t1 = Date.now() / 1000;
    assert.ok(cap.devices.some((d) => d.key === "cpu/server" && d.name === `${comm} (pid ${pid})`));
    const s = summarizeTelemetry(cap, { window: { startS: t0 + 0.1, endS: t1 - 0.1, how: "given" } });
    return { server: s.cpu!.server!, span: t1 - t0 - 0.2 };
  };
  const alone = await record();
  const hogs = [hogOnCpu0(), hogOnCpu0()];
  const shared = await record();
  for (const h of hogs) h.kill("SIGKILL");
  // Three runnable threads on one CPU: the fair scheduler gives each about a third, so the server waits ≥ half of its
  // runnable time whatever else the host runs; and runnable time (run + wait) fills the window for a thread that never sleeps.
  assert.ok(shared.server.runQueueShare >= 0.5, `shared: waited ${shared.server.runQueueShare}`);
  assert.ok(shared.server.cpuCores <= 0.5, `shared: ${shared.server.cpuCores} cores`);
  for (const r of [alone, shared]) {
    const runnable = r.server.cpuCores * r.span + r.server.runQueueS;
    assert.ok(Math.abs(runnable - r.span) < 0.2 * r.span, `runnable ${runnable} s of ${r.span} s`);
  }
});
