// A study of the real llama.cpp server, interrupted in each phase: as the server starts, in discovery,
// mid-bench (the audit's scrape pending beside it: the case that once ended in an unhandled rejection,
// exit 1 and an empty --out), mid-sweep and mid-A/B. Each moment is taken from the study's own
// "PHASE: started" progress lines (INFERSCOPE_PROGRESS=1) or the server's request counter, never a
// fixed sleep. Every run must exit 130 without a stack trace, print its run id, write the partial report
// with every phase's status, and leave no llama-server behind.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import type { StudyResult } from "../../src/report/types.ts";
import { PHASES } from "../../src/study/plan.ts";
import { runCli, STACK } from "../helpers/cli.ts";
import { LLAMA_SERVER, LLAMA_SMALL, llamaSkipReason, startLlamaServer } from "../helpers/llamacpp.ts";

const SKIP = llamaSkipReason();
const dir = mkdtempSync(join(tmpdir(), "inferscope-llama-interrupt-"));

/** Live processes whose command line holds `marker` (the server's unique --alias). */
function serversWith(marker: string): number[] {
  const out: number[] = [];
  for (const n of readdirSync("/proc")) {
    if (!/^\d+$/.test(n)) continue;
    try {
      if (readFileSync(`/proc/${n}/cmdline`, "utf8").includes(marker)) out.push(Number(n));
    } catch {}
  }
  return out;
}

/** llama.cpp's own count of requests in progress, from the started server's /metrics (port from its command line). */
async function processing(marker: string): Promise<number> {
  for (const pid of serversWith(marker)) {
    const argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
    const port = argv[argv.indexOf("--port") + 1];
    if (!argv[0]?.endsWith("llama-server") || !port) continue;
    try {
      const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      return Number(/^llamacpp:requests_processing\s+(\S+)/m.exec(text)?.[1] ?? 0);
    } catch {
      return 0;
    }
  }
  return 0;
}

interface Case {
  name: string;
  /** The progress line that starts the moment. */
  at: RegExp;
  /** Then, optionally, wait for this too (a request in flight). */
  inFlight?: boolean;
  signal: NodeJS.Signals;
  /** The phase the signal lands in: its status must say so. */
  phase?: string;
}

const CASES: Case[] = [
  { name: "server start", at: /server: starting the server/, signal: "SIGINT" },
  { name: "discovery", at: /discover: started/, signal: "SIGTERM", phase: "discover" },
  { name: "mid-bench, audit pending", at: /bench: started/, inFlight: true, signal: "SIGINT", phase: "bench" },
  { name: "mid-sweep", at: /sweep: N = 32/, signal: "SIGTERM", phase: "sweep" },
  { name: "mid-A/B", at: /ab: block 1\/4: /, inFlight: true, signal: "SIGINT", phase: "ab" },
];

test("study --url llama-server, SIGINT in discovery (the audit and bench never started): exit 130, partial report, server untouched", {
  skip: SKIP,
  timeout: 240_000,
}, async () => {
  // The reported crash: a --url study interrupted while discovery measured the host; the audit and the
  // bench were then both rejected, and the audit's rejection went unhandled (exit 1, stack, empty --out).
  const marker = `interrupt-url-${process.pid}`;
  const llama = await startLlamaServer(marker, 60_000);
  const server = llama.child;
  try {
    const url = llama.url;
    const out = join(dir, "out-url");
    let pid = 0;
    let seen: () => void = () => {};
    const reached = new Promise<void>((r) => (seen = r));
    const run = runCli(["study", "--url", url, "--quick", "--out", out, "--db", join(dir, "s-url.db")], {
      limitMs: 200_000,
      cwd: dir,
      env: { INFERSCOPE_PROGRESS: "1" },
      onStart: (p) => (pid = p),
      // biome-ignore lint/suspicious/noThenProperty: runCli's hook is named `then`
      when: { match: /discover: started/, then: () => seen() },
    });
    await Promise.race([reached, run]);
    process.kill(pid, "SIGINT");
    const r = await run;
    assert.equal(r.code, 130, r.stderr);
    assert.doesNotMatch(r.stderr, STACK);
    assert.match(r.stderr, /saved in run study-\S+, partial report in /);
    const result = JSON.parse(readFileSync(join(out, "results.json"), "utf8")) as StudyResult;
    const status = Object.fromEntries(result.meta.phases.map((p) => [p.name, p.status]));
    for (const p of PHASES) assert.ok(status[p], `phase ${p} has a status: ${JSON.stringify(status)}`);
    // A --url server is the user's: the study leaves it running.
    assert.equal(server.exitCode, null, "the user's server still runs");
  } finally {
    llama.stop();
  }
});

for (const [i, c] of CASES.entries())
  test(`study --server-cmd llama-server, ${c.signal} at ${c.name}: exit 130, run id, partial report, no server left`, {
    skip: SKIP,
    timeout: 240_000,
  }, async () => {
    const marker = `interrupt-${process.pid}-${i}`;
    const cmd = `${LLAMA_SERVER} -m ${LLAMA_SMALL} --alias ${marker} --host 127.0.0.1 --port {port} --metrics --threads 1 -c 4096 -np 4`;
    const out = join(dir, `out-${i}`);
    let pid = 0;
    let seen: () => void = () => {};
    const reached = new Promise<void>((r) => (seen = r));
    const run = runCli(
      ["study", "--server-cmd", cmd, "--quick", "--variant", "a:", "--variant", "b: -np 1"].concat([
        "--out",
        out,
        "--db",
        join(dir, `s-${i}.db`),
      ]),
      {
        limitMs: 200_000,
        cwd: dir,
        env: { INFERSCOPE_PROGRESS: "1" },
        onStart: (p) => (pid = p),
        // biome-ignore lint/suspicious/noThenProperty: runCli's hook is named `then`
        when: { match: c.at, then: () => seen() },
      },
    );
    await Promise.race([reached, run]);
    if (c.inFlight)
      for (const end = performance.now() + 60_000; performance.now() < end; ) {
        if ((await processing(marker)) > 0) break;
        await new Promise((r) => setTimeout(r, 20));
      }
    process.kill(pid, c.signal);
    const r = await run;
    assert.equal(r.killed, false, "the study ended by itself");
    assert.equal(r.code, 130, r.stderr);
    assert.doesNotMatch(r.stderr, STACK);
    const id = /saved in run (study-\S+?),/.exec(r.stderr)?.[1];
    assert.ok(id, `the run id is printed: ${r.stderr.slice(-400)}`);
    assert.match(r.stderr, /partial report in /);
    for (const f of ["index.html", "report.md", "results.json"]) assert.ok(existsSync(join(out, f)), `${f} written`);
    const result = JSON.parse(readFileSync(join(out, "results.json"), "utf8")) as StudyResult;
    assert.equal(result.meta.runId, id);
    const status = Object.fromEntries(result.meta.phases.map((p) => [p.name, p.status]));
    for (const p of PHASES) assert.ok(status[p], `phase ${p} has a status: ${JSON.stringify(status)}`);
    if (c.phase) assert.equal(status[c.phase], "interrupted", JSON.stringify(result.meta.phases));
    const md = readFileSync(join(out, "report.md"), "utf8");
    const html = readFileSync(join(out, "index.html"), "utf8");
    for (const p of result.meta.phases) {
      assert.match(md, new RegExp(`\\| ${p.name} \\| ${p.status} \\|`), `report.md shows ${p.name}: ${p.status}`);
      assert.ok(html.includes(`<td>${p.name}</td><td class="`), `index.html has the ${p.name} row`);
    }
    assert.deepEqual(r.leftovers, [], "nothing left in the CLI's process group");
    assert.deepEqual(serversWith(marker), [], "no llama-server left running");
  });
