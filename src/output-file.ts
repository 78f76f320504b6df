// Output files claimed atomically: a run writes a temporary file beside the target and renames it into
// place when done, so a reader never sees half a file; and a lock beside the target (created with
// O_EXCL) makes a second run that names the same file refuse to start instead of overwriting the first.
import {
  accessSync,
  closeSync,
  constants,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  statSync,
  unlinkSync,
  writeSync,
} from "node:fs";
import { hostname } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import { InputError, plainReason, UsageError } from "./errors.ts";
import { processStart, sameProcessAlive } from "./process-id.ts";

export interface OutputClaim {
  /** Where the result ends up. */
  path: string;
  /** Where to write meanwhile (same directory, so the rename is atomic). */
  tempPath: string;
  /** Moves the temporary file into place (if one was written) and releases the lock. */
  commit(): void;
  /** Drops the temporary file and releases the lock. */
  abort(): void;
}

const claimed = new Set<OutputClaim>();
let exitHook = false;

/**
 * Claims `path` for this run. Refuses (UsageError, naming the flag) when it is a directory, when its
 * directory is missing, or when another live inferscope process holds it; a lock left by a dead
 * process is taken over.
 */
export function claimOutput(path: string, flag: string): OutputClaim {
  const file = resolve(path);
  if (existsSync(file) && statSync(file).isDirectory())
    throw new UsageError(`${flag} ${path}: is a directory; give a file name`);
  const dir = dirname(file);
  if (!existsSync(dir)) throw new UsageError(`${flag} ${path}: no such directory ${dir}`);
  const lock = takeLock(
    join(dir, `.${basename(file)}.inferscope-lock`),
    (h) =>
      new UsageError(
        `${flag} ${path}: another inferscope run (${h.who}) is writing this file; refusing to overwrite it`,
        { hint: `give ${flag} another file name, or wait for that run to finish; ${h.remove}` },
      ),
    (code) => new InputError(`${flag} ${path}: cannot write here (${code === "EACCES" ? "permission denied" : code})`),
  );
  const tempPath = join(dir, `.${basename(file)}.${process.pid}.tmp`);
  removeStaleTemps(dir, basename(file), tempPath);
  const release = () => {
    claimed.delete(claim);
    lock.release();
  };
  const claim: OutputClaim = {
    path,
    tempPath,
    commit() {
      if (!claimed.has(claim)) return;
      try {
        if (existsSync(tempPath)) renameSync(tempPath, file);
      } catch (e) {
        release();
        throw new InputError(`${flag} ${path}: cannot move the finished file into place (${(e as Error).message})`, {
          hint: `the data is in ${tempPath}`,
        });
      }
      release();
    },
    abort() {
      if (!claimed.has(claim)) return;
      try {
        unlinkSync(tempPath);
      } catch {}
      release();
    },
  };
  claimed.add(claim);
  if (!exitHook) {
    exitHook = true;
    // A run that exits without committing (an error, a second Ctrl-C) leaves neither lock nor temp file
    // behind; whatever it wrote so far is kept under the final name.
    process.on("exit", () => {
      for (const c of [...claimed])
        try {
          c.commit();
        } catch {}
    });
  }
  return claim;
}

/**
 * Removes the temporary files earlier runs left for this output (`.F.PID.tmp`: killed before they could
 * rename it). Called with the output's lock held: no other run is writing one, so every one but ours is a
 * dead run's, whatever its pid names now.
 */
function removeStaleTemps(dir: string, name: string, ours: string): void {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return;
  }
  const prefix = `.${name}.`;
  for (const n of names) {
    if (!n.startsWith(prefix) || !/^\d+\.tmp$/.test(n.slice(prefix.length))) continue;
    const p = join(dir, n);
    if (p === ours) continue;
    try {
      unlinkSync(p);
    } catch {}
  }
}

// ---------------------------------------------------------------- locks

/** A held lock file; `release` is idempotent, and a process that exits without releasing drops it too. */
export interface HeldLock {
  path: string;
  release(): void;
}

/** Who holds a lock another process wants: for its refusal message. */
export interface LockHolder {
  pid: string;
  /** The holder's host, when the lock names one. */
  host: string | null;
  /** `pid 123`, or `pid 123 on host gpu-2` for a lock taken on another host (shared storage). */
  who: string;
  /** How to free it by hand, naming the lock file: for the refusal's hint. */
  remove: string;
}

const held = new Set<HeldLock>();
let lockExitHook = false;
// An empty lock is one being written this instant; one older than this was left by a crash there.
const FRESH_EMPTY_LOCK_MS = 5000;

/**
 * Takes the lock file `lock` (O_EXCL, holding "pid host start": the pid, this host's name, and the
 * process's start where the platform gives one). Refused with `refuse(holder)`: a live process on this
 * host, and any process on another host (a store on shared storage: we cannot tell whether it lives, so
 * it is never taken over silently). A lock of this host whose process is gone — or whose pid now names
 * another process, as its start tells — is taken over. One primitive for every "one writer" rule:
 * output files, report directories, stored runs.
 */
export function takeLock(
  lock: string,
  refuse: (holder: LockHolder) => Error,
  cannot: (code: string | undefined) => Error = (code) => new InputError(`${lock}: cannot create a lock (${code})`),
): HeldLock {
  const here = hostname();
  const me = `${process.pid} ${here} ${processStart(process.pid) ?? "-"}`;
  for (let attempt = 0; ; attempt++) {
    try {
      const fd = openSync(lock, "wx");
      writeSync(fd, me);
      closeSync(fd);
      break;
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code !== "EEXIST") throw cannot(code);
      let owner = "";
      try {
        owner = readFileSync(lock, "utf8").trim();
      } catch {}
      const [pid = "", host = "", start = "-"] = owner.split(/\s+/);
      let fresh = false;
      if (!owner)
        try {
          fresh = Date.now() - statSync(lock).mtimeMs < FRESH_EMPTY_LOCK_MS;
        } catch {}
      const elsewhere = host !== "" && host !== here;
      const live = fresh || elsewhere || (host === here && sameProcessAlive(Number(pid), start === "-" ? null : start));
      if (live || attempt > 0) {
        const by = elsewhere ? `on host ${host}` : "on this host";
        throw refuse({
          pid: pid || "?",
          host: host || null,
          who: `pid ${pid || "?"}${elsewhere ? ` on host ${host}` : ""}`,
          remove: `the lock is ${lock} (pid ${pid || "?"} ${by}); if no inferscope process ${elsewhere ? `on ${host} ` : ""}is using it, remove that file`,
        });
      }
      // A dead run's lock: take it over.
      try {
        unlinkSync(lock);
      } catch {}
    }
  }
  const h: HeldLock = {
    path: lock,
    release() {
      if (!held.delete(h)) return;
      try {
        // Only our own: a lock taken over after a crash belongs to its new holder.
        if (readFileSync(lock, "utf8") === me) unlinkSync(lock);
      } catch {}
    },
  };
  held.add(h);
  if (!lockExitHook) {
    lockExitHook = true;
    process.on("exit", () => {
      for (const l of [...held]) l.release();
    });
  }
  return h;
}

/**
 * Claims a report directory (`--out DIR`) for this run: made if missing, then locked (`DIR/.inferscope-lock`)
 * until `release`. A second run naming the same directory is refused with the holder's pid instead of
 * silently overwriting the first one's report.
 */
export function claimOutputDir(dir: string, flag: string): HeldLock {
  try {
    mkdirSync(dir, { recursive: true });
    accessSync(dir, constants.W_OK);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "EEXIST")
      throw new UsageError(`${flag} ${dir}: is a file, not a directory; give a directory for the report`);
    throw new InputError(`${flag} ${dir}: cannot write the report there: ${plainReason(e)}`);
  }
  if (!statSync(dir).isDirectory())
    throw new UsageError(`${flag} ${dir}: is a file, not a directory; give a directory for the report`);
  return takeLock(
    join(resolve(dir), ".inferscope-lock"),
    (h) =>
      new UsageError(
        `${flag} ${dir}: another inferscope run (${h.who}) is writing a report there; refusing to overwrite it`,
        { hint: `give ${flag} another directory, or wait for that run to finish; ${h.remove}` },
      ),
    (code) => new InputError(`${flag} ${dir}: cannot write the report there (${code})`),
  );
}

/**
 * Claims a stored run (`ab`, `sweep`, `tune`, new or `--resume ID`) for this process: a lock beside the
 * store, taken before the run's state is read, so two resumes of one run cannot both run its remaining
 * blocks. The second is refused with the holder's pid.
 */
export function claimRun(storePath: string, runId: string): HeldLock {
  const db = resolve(storePath);
  return takeLock(
    join(dirname(db), `.${basename(db)}.${runId.replace(/[^A-Za-z0-9_.-]/g, "_")}.inferscope-lock`),
    (h) =>
      new UsageError(`run ${runId} is being written by another inferscope process (${h.who}); one writer at a time`, {
        hint: `wait for that process to finish (or stop it with Ctrl-C), then continue with --resume ${runId}; ${h.remove}`,
      }),
    (code) => new InputError(`${storePath}: cannot lock run ${runId} beside the store (${code})`),
  );
}
