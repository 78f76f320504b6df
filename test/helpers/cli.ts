// Runs the real CLI as a child in its own process group, with a hard time limit, and reports what a
// user would see: exit code, stdout, stderr, wall time, and whether anything it started is still alive.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
export const BIN = join(ROOT, "bin", "inferscope.mjs");

export interface CliRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  ms: number;
  pid: number;
  /** Members of the child's process group still alive shortly after it exited (should be none). */
  leftovers: number[];
  /** True when the hard limit killed it. */
  killed: boolean;
}

/** Live members of a process group, from /proc. */
export function groupMembers(pgid: number): number[] {
  const out: number[] = [];
  for (const n of readdirSync("/proc")) {
    if (!/^\d+$/.test(n)) continue;
    try {
      const stat = readFileSync(`/proc/${n}/stat`, "utf8");
      const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(f[2]) === pgid && f[0] !== "Z" && f[0] !== "X") out.push(Number(n));
    } catch {}
  }
  return out;
}

export function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const s = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
    return s !== "Z" && s !== "X";
  } catch {
    return false;
  }
}

export interface CliOptions {
  /** Hard limit (ms): the group is SIGKILLed past it and `killed` is set. Default 30 s. */
  limitMs?: number;
  env?: Record<string, string>;
  cwd?: string;
  /** Called once the child's stderr or stdout matches, e.g. to send it a signal at the right moment. */
  when?: { match: RegExp; then: (pid: number) => void };
  /** Called with the child's pid right after it starts. */
  onStart?: (pid: number) => void;
}

/** `node bin/inferscope.mjs …args` in its own process group. */
export function runCli(args: string[], o: CliOptions = {}): Promise<CliRun> {
  const t0 = performance.now();
  const child = spawn(process.execPath, [BIN, ...args], {
    cwd: o.cwd ?? ROOT,
    env: { ...process.env, FORCE_COLOR: "0", ...o.env },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  const pid = child.pid!;
  o.onStart?.(pid);
  let stdout = "";
  let stderr = "";
  let fired = false;
  const check = () => {
    if (o.when && !fired && (o.when.match.test(stderr) || o.when.match.test(stdout))) {
      fired = true;
      o.when.then(pid);
    }
  };
  child.stdout.setEncoding("utf8").on("data", (d: string) => {
    stdout += d;
    check();
  });
  child.stderr.setEncoding("utf8").on("data", (d: string) => {
    stderr += d;
    check();
  });
  let killed = false;
  const limit = setTimeout(() => {
    killed = true;
    try {
      process.kill(-pid, "SIGKILL");
    } catch {}
  }, o.limitMs ?? 30_000);
  return new Promise((resolve) => {
    child.once("close", (code, signal) => {
      clearTimeout(limit);
      const ms = performance.now() - t0;
      const leftovers = groupMembers(pid);
      // Nothing may outlive the test either way.
      if (leftovers.length)
        try {
          process.kill(-pid, "SIGKILL");
        } catch {}
      resolve({ code, signal, stdout, stderr, ms, pid, leftovers, killed });
    });
  });
}

/** A stack trace line ("    at fn (file:1:2)"). */
export const STACK = /^\s+at .+[(:]\d+/m;

/** A usage refusal: exit 2 with exactly one `inferscope: error:` line, matching `msg`, and no stack. */
export function assertRefused(r: { code: number | null; stderr: string }, msg: RegExp, detail: string): void {
  assert.equal(r.code, 2, detail);
  const lines = r.stderr.split("\n").filter((l) => l.startsWith("inferscope: error: "));
  assert.equal(lines.length, 1, detail);
  assert.match(lines[0]!, msg, detail);
  assert.doesNotMatch(r.stderr, STACK, detail);
}

/** Children of `ppid` whose command line matches, from /proc. */
export function childrenMatching(ppid: number, re: RegExp): number[] {
  const out: number[] = [];
  for (const n of readdirSync("/proc")) {
    if (!/^\d+$/.test(n)) continue;
    try {
      const stat = readFileSync(`/proc/${n}/stat`, "utf8");
      const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(f[1]) !== ppid) continue;
      const cmd = readFileSync(`/proc/${n}/cmdline`, "utf8").replaceAll("\0", " ");
      if (re.test(cmd)) out.push(Number(n));
    } catch {}
  }
  return out;
}

/** Resolves once `probe` returns a value other than undefined (polled every 20 ms), or rejects after `ms`. */
export async function waitFor<T>(probe: () => T | undefined, ms: number, what: string): Promise<T> {
  const end = performance.now() + ms;
  for (;;) {
    const v = probe();
    if (v !== undefined) return v;
    if (performance.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
