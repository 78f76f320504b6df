// Files the user names on the command line, checked before any work: a directory, a missing file or an
// unreadable one is refused with the flag and the path (exit 2), never a raw EISDIR from deep inside a reader.
import { closeSync, constants, accessSync as fsAccess, openSync, readSync, statSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { InputError, plainReason } from "./errors.ts";

const label = (flag: string | undefined, path: string) => (flag ? `${flag} ${path}` : path);

/**
 * A file to read: it must exist, be readable and not be a directory. `flag` names where it came from
 * ("--dataset-path", or a positional's name); "-" (stdin) passes.
 */
export function checkInputFile(flag: string | undefined, path: string, what = "file"): void {
  if (path === "-") return;
  let st: ReturnType<typeof statSync>;
  try {
    st = statSync(path);
  } catch (e) {
    throw new InputError(`${label(flag, path)}: ${plainReason(e)}`, { cause: e });
  }
  if (st.isDirectory()) throw new InputError(`${label(flag, path)}: is a directory; give a ${what}`);
  try {
    fsAccess(path, constants.R_OK);
  } catch (e) {
    throw new InputError(`${label(flag, path)}: ${plainReason(e)}`, { cause: e });
  }
}

/** Each of a list of files (repeatable flags, variadic positionals). */
export function checkInputFiles(flag: string | undefined, paths: readonly string[] | undefined, what = "file"): void {
  for (const p of paths ?? []) checkInputFile(flag, p, what);
}

const SQLITE_MAGIC = "SQLite format 3\0";

function head16(path: string): string {
  const buf = Buffer.alloc(16);
  const fd = openSync(path, "r");
  try {
    return buf.subarray(0, readSync(fd, buf, 0, 16, 0)).toString("latin1");
  } finally {
    closeSync(fd);
  }
}

/**
 * A run store (`--db`). Readers (`mustExist`) never create one, nor turn another file (even an empty
 * one) into one. Writers may create it, but not in place of a directory or of a file that is not SQLite.
 */
export function checkRunStore(flag: string, path: string | undefined, o: { mustExist?: boolean } = {}): void {
  if (path === undefined) return;
  let st: ReturnType<typeof statSync> | undefined;
  try {
    st = statSync(path);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code !== "ENOENT") throw new InputError(`${flag} ${path}: ${plainReason(e)}`, { cause: e });
  }
  if (!st) {
    if (o.mustExist) throw new InputError(`${flag} ${path}: no run store here (no such file)`);
    // The store makes missing parent directories; a parent that is a file cannot hold it.
    const parent = dirname(resolve(path));
    try {
      if (!statSync(parent).isDirectory()) throw new InputError(`${flag} ${path}: ${parent} is not a directory`);
    } catch (e) {
      if (e instanceof InputError) throw e;
      if ((e as NodeJS.ErrnoException).code !== "ENOENT")
        throw new InputError(`${flag} ${path}: ${plainReason(e)}`, { cause: e });
    }
    return;
  }
  if (st.isDirectory()) throw new InputError(`${flag} ${path}: is a directory; give the run store file`);
  if (st.size === 0 && !o.mustExist) return;
  let magic: string;
  try {
    magic = head16(path);
  } catch (e) {
    throw new InputError(`${flag} ${path}: ${plainReason(e)}`, { cause: e });
  }
  if (magic !== SQLITE_MAGIC)
    throw new InputError(
      `${flag} ${path}: not a run store (${st.size === 0 ? "an empty file" : "not an SQLite database"})`,
    );
}

/** A directory to read from (e.g. a profiler directory): it may be missing (made later), not a file. */
export function checkNotFile(flag: string, path: string): void {
  try {
    if (!statSync(path).isDirectory()) throw new InputError(`${flag} ${path}: is a file, not a directory`);
  } catch (e) {
    if (e instanceof InputError) throw e;
    const code = (e as NodeJS.ErrnoException).code;
    if (code !== "ENOENT") throw new InputError(`${flag} ${path}: ${plainReason(e)}`, { cause: e });
  }
}
