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
  readFileSync,
  renameSync,
  statSync,
  unlinkSync,
  writeSync,
} from "node:fs";
import { hostname } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import { InputError, plainReason, UsageError } from "./errors.ts";

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

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

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
    (pid) =>
      new UsageError(
        `${flag} ${path}: another inferscope run (pid ${pid}) is writing this file; refusing to overwrite it`,
        { hint: `give ${flag} another file name, or wait for that run to finish` },
      ),
    (code) => new InputError(`${flag} ${path}: cannot write here (${code === "EACCES" ? "permission denied" : code})`),
  );
  const tempPath = join(dir, `.${basename(file)}.${process.pid}.tmp`);
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

// ---------------------------------------------------------------- locks

/** A held lock file; `release` is idempotent, and a process that exits without releasing drops it too. */
export interface HeldLock {
  path: string;
  release(): void;
}

const held = new Set<HeldLock>();
let lockExitHook = false;

/**
 * Takes the lock file `lock` (O_EXCL, holding "pid host"). Another live process's lock is refused with
 * `refuse(pid)`; a dead process's lock (same host, pid gone) is taken over. One primitive for every
 * "one writer" rule: output files, report directories, stored runs.
 */
export function takeLock(
  lock: string,
  refuse: (holderPid: string) => Error,
  cannot: (code: string | undefined) => Error = (code) => new InputError(`${lock}: cannot create a lock (${code})`),
): HeldLock {
  const me = `${process.pid} ${hostname()}`;
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
        owner = readFileSync(lock, "utf8");
      } catch {}
      const [pid, host] = owner.split(" ");
      // An empty lock is one being written this instant (a crash there leaves it old: then it is stale).
      let fresh = false;
      if (!owner)
        try {
          fresh = Date.now() - statSync(lock).mtimeMs < 5000;
        } catch {}
      const live = fresh || (host === hostname() && Number(pid) > 0 && pidAlive(Number(pid)));
      if (live || attempt > 0) throw refuse(pid || "?");
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
    (pid) =>
      new UsageError(
        `${flag} ${dir}: another inferscope run (pid ${pid}) is writing a report there; refusing to overwrite it`,
        { hint: `give ${flag} another directory, or wait for that run to finish` },
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
    (pid) =>
      new UsageError(`run ${runId} is being written by another inferscope process (pid ${pid}); one writer at a time`, {
        hint: `wait for that process to finish (or stop it with Ctrl-C), then continue with --resume ${runId}`,
      }),
    (code) => new InputError(`${storePath}: cannot lock run ${runId} beside the store (${code})`),
  );
}
