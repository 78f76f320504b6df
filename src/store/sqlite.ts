// One SQLite interface over two drivers: Node's built-in node:sqlite (Node ≥ 22.13, no native build,
// nothing for npm's install-script policy to block) and better-sqlite3, an optional dependency kept
// for Node 20, which has no node:sqlite. The surface is the subset of better-sqlite3's API the store
// uses, so store code reads the same on either driver.
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { InputError, UsageError } from "../errors.ts";

export type SqliteDriverName = "node:sqlite" | "better-sqlite3";
export const SQLITE_DRIVERS: readonly SqliteDriverName[] = ["node:sqlite", "better-sqlite3"];

export interface SqlRunResult {
  changes: number;
  lastInsertRowid: number | bigint;
}

export interface SqlStatement {
  run(...params: unknown[]): SqlRunResult;
  /** The first row, or undefined when there is none. */
  get(...params: unknown[]): unknown;
  all(...params: unknown[]): unknown[];
}

/** A function that runs inside BEGIN … COMMIT (a savepoint when nested), rolled back if it throws. */
export interface SqlTransaction<A extends unknown[], R> {
  (...args: A): R;
  /** BEGIN IMMEDIATE: takes the write lock up front (waits up to busy_timeout for it). */
  immediate(...args: A): R;
}

export interface SqlDatabase {
  readonly driver: SqliteDriverName;
  readonly open: boolean;
  readonly inTransaction: boolean;
  prepare(sql: string): SqlStatement;
  exec(sql: string): void;
  /** `PRAGMA source`: every row, or with simple the first column of the first row. */
  pragma(source: string, opts?: { simple?: boolean }): unknown;
  transaction<A extends unknown[], R>(fn: (...args: A) => R): SqlTransaction<A, R>;
  close(): void;
}

export interface OpenOptions {
  readonly?: boolean;
  /** Fail instead of creating the file (implied by readonly). */
  fileMustExist?: boolean;
}

/** INFERSCOPE_SQLITE picks a driver; unset, node:sqlite where this Node has it, else better-sqlite3. */
export function sqliteDriver(): SqliteDriverName {
  return loadDriver().name;
}

export function openDatabase(path: string, opts: OpenOptions = {}): SqlDatabase {
  const d = loadDriver();
  return d.name === "node:sqlite" ? openNode(d.module, path, opts) : openBetter(d.module, path, opts);
}

/** The SQLite result code's name ("SQLITE_BUSY") of an error from either driver, or undefined. */
export function sqliteErrorCode(err: unknown): string | undefined {
  const e = err as { code?: unknown; errcode?: unknown };
  // better-sqlite3: the extended code's name (SQLITE_CONSTRAINT_PRIMARYKEY); the primary name is its first word.
  const named = typeof e?.code === "string" ? /^SQLITE_[A-Z]+/.exec(e.code) : null;
  if (named) return named[0];
  // node:sqlite: code ERR_SQLITE_ERROR and the (extended) result code as errcode; the low byte is the primary code.
  if (typeof e?.errcode === "number") return PRIMARY_CODES[e.errcode & 0xff] ?? `SQLITE_${e.errcode}`;
  return undefined;
}

const PRIMARY_CODES: Record<number, string> = {
  1: "SQLITE_ERROR",
  5: "SQLITE_BUSY",
  6: "SQLITE_LOCKED",
  8: "SQLITE_READONLY",
  10: "SQLITE_IOERR",
  11: "SQLITE_CORRUPT",
  13: "SQLITE_FULL",
  14: "SQLITE_CANTOPEN",
  19: "SQLITE_CONSTRAINT",
  26: "SQLITE_NOTADB",
};

// ---- driver loading ----

interface NodeSqliteDb {
  prepare(sql: string): {
    run(...p: unknown[]): SqlRunResult;
    get(...p: unknown[]): unknown;
    all(...p: unknown[]): unknown[];
  };
  exec(sql: string): void;
  close(): void;
}
interface NodeSqliteModule {
  DatabaseSync: new (path: string, opts?: Record<string, unknown>) => NodeSqliteDb;
}
interface BetterDb {
  readonly open: boolean;
  readonly inTransaction: boolean;
  prepare(sql: string): SqlStatement;
  exec(sql: string): unknown;
  pragma(source: string, opts?: { simple?: boolean }): unknown;
  transaction<F extends (...a: any[]) => any>(fn: F): F & { immediate: F };
  close(): unknown;
}
type BetterModule = new (path: string, opts?: Record<string, unknown>) => BetterDb;

type Loaded = { name: "node:sqlite"; module: NodeSqliteModule } | { name: "better-sqlite3"; module: BetterModule };
let loaded: Loaded | undefined;

function loadDriver(): Loaded {
  if (loaded) return loaded;
  const want = process.env.INFERSCOPE_SQLITE || undefined;
  if (want !== undefined && !SQLITE_DRIVERS.includes(want as SqliteDriverName))
    throw new UsageError(`INFERSCOPE_SQLITE=${want}: not a SQLite driver (node:sqlite or better-sqlite3)`);
  const node = want === "better-sqlite3" ? undefined : loadNodeSqlite();
  if (node) return (loaded = { name: "node:sqlite", module: node });
  if (want === "node:sqlite")
    throw new InputError(`INFERSCOPE_SQLITE=node:sqlite, but Node ${process.version} has no node:sqlite`, {
      code: "E_NO_SQLITE",
      hint: "node:sqlite is built into Node 22.13 and later; unset INFERSCOPE_SQLITE to use better-sqlite3",
    });
  const better = loadBetter();
  if (better.ok) return (loaded = { name: "better-sqlite3", module: better.module });
  throw new InputError(`the run store needs SQLite, and ${better.why}`, {
    code: "E_NO_SQLITE",
    hint: better.hint,
  });
}

function loadNodeSqlite(): NodeSqliteModule | undefined {
  // process.getBuiltinModule answers undefined where the module does not exist (Node 20) or still sits
  // behind --experimental-sqlite (22.5–22.12), instead of throwing as an import would.
  if (typeof process.getBuiltinModule !== "function") return undefined;
  // Node 22.13–22.x print an ExperimentalWarning on load, which would land in every CLI's stderr.
  const emit = process.emitWarning;
  process.emitWarning = function (this: unknown, warning: string | Error, ...rest: any[]) {
    const type = typeof rest[0] === "string" ? rest[0] : rest[0]?.type;
    if (type === "ExperimentalWarning" && /\bSQLite\b/.test(String(warning))) return;
    return (emit as (...a: unknown[]) => void).call(process, warning, ...rest);
  } as typeof process.emitWarning;
  try {
    const m = process.getBuiltinModule("node:sqlite") as NodeSqliteModule | undefined;
    return typeof m?.DatabaseSync === "function" ? m : undefined;
  } catch {
    return undefined;
  } finally {
    process.emitWarning = emit;
  }
}

function loadBetter(): { ok: true; module: BetterModule } | { ok: false; why: string; hint: string } {
  const require = createRequire(import.meta.url);
  const nodeHint = `use Node 22.13 or later (24 is tested), whose built-in node:sqlite needs no native module`;
  try {
    const Better = require("better-sqlite3") as BetterModule;
    // The native addon loads on the first open, not on require: open one in memory so a missing or
    // foreign-ABI build is told apart here, not as a store that "cannot open".
    new Better(":memory:").close();
    return { ok: true, module: Better };
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    if (e?.code === "MODULE_NOT_FOUND" && /better-sqlite3/.test(e.message) && !/bindings/.test(e.message))
      return {
        ok: false,
        why: `Node ${process.version} has no node:sqlite and the optional better-sqlite3 is not installed`,
        hint: `${nodeHint}, or install better-sqlite3 beside inferscope`,
      };
    // Installed but unusable: its native build was skipped (npm 12 blocks unreviewed install scripts) or was
    // made for another Node version.
    const msg = String(e?.message ?? err);
    const what = /Could not locate the bindings file/.test(msg)
      ? "its native addon was never built: its install script did not run"
      : /NODE_MODULE_VERSION|compiled against a different Node/.test(msg)
        ? "its native addon was built for another Node version"
        : msg.split("\n")[0];
    return {
      ok: false,
      why: `Node ${process.version} has no node:sqlite and better-sqlite3 does not load (${what})`,
      hint: `${nodeHint}, or reinstall with its install script allowed (npm install -g … --allow-scripts=better-sqlite3; in a project, allowScripts in package.json)`,
    };
  }
}

// ---- node:sqlite ----

function openNode(m: NodeSqliteModule, path: string, opts: OpenOptions): SqlDatabase {
  if (opts.fileMustExist && !opts.readonly && path !== ":memory:" && !existsSync(path))
    throw new Error(`unable to open database file ${path}: it does not exist`);
  // Foreign keys off at open, as SQLite's default and better-sqlite3 have it: the store turns them on.
  const raw = new m.DatabaseSync(path, { readOnly: opts.readonly === true, enableForeignKeyConstraints: false });
  let isOpen = true;
  let depth = 0;
  // better-sqlite3 binds undefined as NULL; node:sqlite refuses it.
  const bind = (p: unknown[]) => p.map((v) => (v === undefined ? null : v));
  const db: SqlDatabase = {
    driver: "node:sqlite",
    get open() {
      return isOpen;
    },
    get inTransaction() {
      return depth > 0;
    },
    prepare(sql) {
      const st = raw.prepare(sql);
      return {
        run: (...p) => st.run(...bind(p)),
        get: (...p) => st.get(...bind(p)),
        all: (...p) => st.all(...bind(p)),
      };
    },
    exec(sql) {
      raw.exec(sql);
    },
    pragma(source, o = {}) {
      const rows = raw.prepare(`PRAGMA ${source}`).all() as Record<string, unknown>[];
      if (!o.simple) return rows;
      return rows.length ? Object.values(rows[0])[0] : undefined;
    },
    transaction<A extends unknown[], R>(fn: (...args: A) => R): SqlTransaction<A, R> {
      const wrap =
        (begin: string) =>
        (...args: A): R => {
          const nested = depth > 0;
          const sp = `inferscope_tx_${depth}`;
          raw.exec(nested ? `SAVEPOINT ${sp}` : begin);
          depth++;
          try {
            const r = fn(...args);
            if (r && typeof (r as { then?: unknown }).then === "function")
              throw new TypeError("a transaction function cannot return a promise");
            raw.exec(nested ? `RELEASE ${sp}` : "COMMIT");
            return r;
          } catch (err) {
            // A failed COMMIT can leave the transaction open; a statement error inside fn always does.
            try {
              raw.exec(nested ? `ROLLBACK TO ${sp}; RELEASE ${sp}` : "ROLLBACK");
            } catch {
              // Already rolled back by SQLite itself (some errors end the transaction).
            }
            throw err;
          } finally {
            depth--;
          }
        };
      const tx = wrap("BEGIN") as SqlTransaction<A, R>;
      tx.immediate = wrap("BEGIN IMMEDIATE");
      return tx;
    },
    close() {
      if (!isOpen) return;
      raw.close();
      isOpen = false;
    },
  };
  return db;
}

// ---- better-sqlite3 ----

function openBetter(Better: BetterModule, path: string, opts: OpenOptions): SqlDatabase {
  const raw = new Better(path, { readonly: opts.readonly === true, fileMustExist: opts.fileMustExist === true });
  return {
    driver: "better-sqlite3",
    get open() {
      return raw.open;
    },
    get inTransaction() {
      return raw.inTransaction;
    },
    prepare: (sql) => raw.prepare(sql),
    exec(sql) {
      raw.exec(sql);
    },
    pragma: (source, o) => raw.pragma(source, o),
    transaction: (fn) => raw.transaction(fn),
    close() {
      if (raw.open) raw.close();
    },
  };
}
