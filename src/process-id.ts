// Which process a pid names, so a lock or a stored run can tell its writer from a later process that
// was given the same pid. Linux gives each process a start time (/proc/PID/stat field 22, clock ticks
// since boot) that, with the boot's id, names it for good; elsewhere the pid alone is all there is.
import { readFileSync } from "node:fs";

/** True when a process with this id is alive on this host (EPERM: alive, not ours). */
export function pidAlive(pid: number): boolean {
  if (!(pid > 0)) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

let bootId: string | null | undefined;

/** The process's start as `BOOT_ID/TICKS`, or null where the platform does not say (no /proc, a gone pid). */
export function processStart(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Field 2 (the command name) may hold spaces and parentheses: count from the last ")".
    const ticks = stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
    if (!ticks || !/^\d+$/.test(ticks)) return null;
    if (bootId === undefined)
      try {
        bootId = readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim();
      } catch {
        bootId = null;
      }
    return `${bootId ?? "boot"}/${ticks}`;
  } catch {
    return null;
  }
}

/**
 * Whether the process that recorded (pid, start) still runs on this host: its pid is alive and, where a
 * start was recorded and the platform gives one now, it is the same start (not a reused pid).
 */
export function sameProcessAlive(pid: number, start: string | null | undefined): boolean {
  if (!pidAlive(pid)) return false;
  if (!start) return true;
  const now = processStart(pid);
  return now === null || now === start;
}
