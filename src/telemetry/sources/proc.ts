// The server process on this host, from Linux's /proc: which process listens on the target's port, and
// how its threads spent their runnable time — on a CPU, or waiting on a run queue for one
// (/proc/PID/task/TID/schedstat: ns on CPU, ns waiting, timeslices; kept by CONFIG_SCHED_INFO, on in
// every distribution kernel). A CPU server's step time is work plus that wait, so a contended host
// shows here and not in the server's own timings.
import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { join } from "node:path";
import { isLocalUrl } from "../../discover/host.ts";

/** Socket inodes listening on `port` from /proc/net/tcp and tcp6 (state 0A = LISTEN). */
export function listeningInodes(port: number, procRoot = "/proc"): Set<string> {
  const out = new Set<string>();
  const hex = port.toString(16).toUpperCase().padStart(4, "0");
  for (const f of ["net/tcp", "net/tcp6"]) {
    let text: string;
    try {
      text = readFileSync(join(procRoot, f), "utf8");
    } catch {
      continue;
    }
    for (const line of text.split("\n").slice(1)) {
      const c = line.trim().split(/\s+/);
      if (c.length < 10 || c[3] !== "0A") continue;
      if (c[1]!.slice(c[1]!.lastIndexOf(":") + 1) === hex && c[9] !== "0") out.add(c[9]!);
    }
  }
  return out;
}

/** Processes holding one of these socket inodes (only processes this user may inspect are seen). */
export function pidsHoldingSockets(inodes: Set<string>, procRoot = "/proc"): number[] {
  if (inodes.size === 0) return [];
  const pids: number[] = [];
  let entries: string[];
  try {
    entries = readdirSync(procRoot);
  } catch {
    return [];
  }
  for (const name of entries) {
    if (!/^\d+$/.test(name)) continue;
    let fds: string[];
    try {
      fds = readdirSync(join(procRoot, name, "fd"));
    } catch {
      continue; // another user's process, or gone
    }
    for (const fd of fds) {
      let target: string;
      try {
        target = readlinkSync(join(procRoot, name, "fd", fd));
      } catch {
        continue;
      }
      const m = /^socket:\[(\d+)\]$/.exec(target);
      if (m && inodes.has(m[1]!)) {
        pids.push(Number(name));
        break;
      }
    }
  }
  return pids.sort((a, b) => a - b);
}

/** The process listening on `port` on this host, or null with why. */
export function findListeningProcess(
  port: number,
  procRoot = "/proc",
): { pid: number; command: string } | { pid: null; why: string } {
  const inodes = listeningInodes(port, procRoot);
  if (inodes.size === 0) return { pid: null, why: `no listening socket on port ${port} in ${procRoot}/net/tcp{,6}` };
  const pids = pidsHoldingSockets(inodes, procRoot);
  if (pids.length === 0)
    return {
      pid: null,
      why: `the process listening on port ${port} belongs to another user (its /proc is unreadable)`,
    };
  const pid = pids[0]!;
  let command = "";
  try {
    command = readFileSync(join(procRoot, String(pid), "comm"), "utf8").trim();
  } catch {
    command = "";
  }
  return { pid, command: command || `pid ${pid}` };
}

/** One schedstat line: ns on CPU, ns waiting on a run queue. */
export function parseSchedstat(text: string): { runNs: number; waitNs: number } | null {
  const f = text.trim().split(/\s+/).map(Number);
  if (f.length < 2 || !Number.isFinite(f[0]) || !Number.isFinite(f[1])) return null;
  return { runNs: f[0]!, waitNs: f[1]! };
}

/**
 * Cumulative run and wait time of a process's threads. Threads come and go (llama.cpp's thread pool, an
 * HTTP worker): each thread's last reading is kept, so one that exits does not take its time with it.
 */
export class ProcessSchedstat {
  private readonly last = new Map<string, { runNs: number; waitNs: number }>();
  constructor(
    readonly pid: number,
    private readonly procRoot = "/proc",
  ) {}

  /** Seconds on CPU and waiting, summed over every thread seen so far; null once the process is gone. */
  read(): { runS: number; waitS: number; threads: number } | null {
    const dir = join(this.procRoot, String(this.pid), "task");
    let tids: string[];
    try {
      tids = readdirSync(dir);
    } catch {
      return null;
    }
    for (const tid of tids) {
      try {
        const s = parseSchedstat(readFileSync(join(dir, tid, "schedstat"), "utf8"));
        if (s) this.last.set(tid, s);
      } catch {
        // the thread exited between the listing and the read: its last reading stands
      }
    }
    let run = 0;
    let wait = 0;
    for (const s of this.last.values()) {
      run += s.runNs;
      wait += s.waitNs;
    }
    return { runS: run / 1e9, waitS: wait / 1e9, threads: tids.length };
  }
}

/** The schedstat reader for the server behind a loopback URL, or null (remote, not found, unreadable). */
export function serverSchedstatFor(baseUrl: string, procRoot = "/proc"): ProcessSchedstat | null {
  if (!isLocalUrl(baseUrl)) return null;
  const u = new URL(baseUrl);
  const found = findListeningProcess(Number(u.port || (u.protocol === "https:" ? 443 : 80)), procRoot);
  return found.pid === null ? null : new ProcessSchedstat(found.pid, procRoot);
}

/** Share of runnable time spent waiting between two readings; null when the server did not run. */
export function runQueueShare(
  a: { runS: number; waitS: number } | null,
  b: { runS: number; waitS: number } | null,
): number | null {
  if (!a || !b) return null;
  const run = b.runS - a.runS;
  const wait = b.waitS - a.waitS;
  return run + wait > 0 && run >= 0 && wait >= 0 ? wait / (run + wait) : null;
}
