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
  // A writer adds its tables to whatever it opens: another program's database must stay as it is.
  let kind: "empty" | "store" | "foreign";
  try {
    kind = sqliteContents(path, Number(st.size));
  } catch (e) {
    throw new InputError(`${flag} ${path}: ${plainReason(e)}`, { cause: e });
  }
  if (kind === "foreign")
    throw new InputError(`${flag} ${path}: an SQLite database that is not an inferscope run store`, {
      hint: "give a new file name (the store is created there), or an existing run store",
    });
}

// The store's first migration, as SQLite keeps it in sqlite_master (the SQL text is stored as written).
const STORE_TABLES = [/CREATE TABLE runs\s*\(/, /CREATE TABLE blocks\s*\(/];

/**
 * What an SQLite file holds, read from its bytes (no driver, nothing written): "empty" when its schema
 * table has no entry (a fresh file, or a store whose schema is still in its WAL), "store" when it has
 * the run store's tables, else "foreign". The schema's SQL text is searched for in the file's pages.
 */
export function sqliteContents(path: string, size: number): "empty" | "store" | "foreign" {
  const fd = openSync(path, "r");
  try {
    const head = Buffer.alloc(108);
    const n = readSync(fd, head, 0, 108, 0);
    if (n < 108) return "empty";
    // Page 1 holds sqlite_master's root after the 100-byte header: a leaf (0x0d) with no cells is no table.
    if (head[100] === 0x0d && head.readUInt16BE(103) === 0) return "empty";
    // Schema pages sit near the start unless a later migration moved them: read on when the file says it
    // was migrated (user_version ≥ 1) before calling it foreign.
    const migrated = head.readUInt32BE(60) >= 1;
    const limit = migrated ? size : Math.min(size, 4 << 20);
    const chunk = Buffer.alloc(1 << 20);
    const found = STORE_TABLES.map(() => false);
    let tail = "";
    for (let pos = 0; pos < limit; pos += chunk.length) {
      const got = readSync(fd, chunk, 0, Math.min(chunk.length, limit - pos), pos);
      if (got <= 0) break;
      // Overlap by a little, so a statement cut between two chunks is still seen.
      const text = tail + chunk.toString("latin1", 0, got);
      STORE_TABLES.forEach((re, i) => {
        if (re.test(text)) found[i] = true;
      });
      if (found.every(Boolean)) return "store";
      tail = text.slice(-64);
    }
    return "foreign";
  } finally {
    closeSync(fd);
  }
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
