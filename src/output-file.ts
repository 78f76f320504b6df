// Output files claimed atomically: a run writes a temporary file beside the target and renames it into
// place when done, so a reader never sees half a file; and a lock beside the target (created with
// O_EXCL) makes a second run that names the same file refuse to start instead of overwriting the first.
import { closeSync, existsSync, openSync, readFileSync, renameSync, statSync, unlinkSync, writeSync } from "node:fs";
import { hostname } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import { InputError, UsageError } from "./errors.ts";

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
  const lock = join(dir, `.${basename(file)}.inferscope-lock`);
  const me = `${process.pid} ${hostname()}`;
  for (let attempt = 0; ; attempt++) {
    try {
      const fd = openSync(lock, "wx");
      writeSync(fd, me);
      closeSync(fd);
      break;
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code !== "EEXIST")
        throw new InputError(`${flag} ${path}: cannot write here (${code === "EACCES" ? "permission denied" : code})`);
      let owner = "";
      try {
        owner = readFileSync(lock, "utf8");
      } catch {}
      const [pid, host] = owner.split(" ");
      const live = host === hostname() && Number(pid) > 0 && pidAlive(Number(pid));
      if (live || attempt > 0)
        throw new UsageError(
          `${flag} ${path}: another inferscope run (pid ${pid || "?"}) is writing this file; refusing to overwrite it`,
          { hint: `give ${flag} another file name, or wait for that run to finish` },
        );
      // A dead run's lock: take it over.
      try {
        unlinkSync(lock);
      } catch {}
    }
  }
  const tempPath = join(dir, `.${basename(file)}.${process.pid}.tmp`);
  const release = () => {
    claimed.delete(claim);
    try {
      unlinkSync(lock);
    } catch {}
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
