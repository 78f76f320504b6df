// Heavy CommonJS dependencies, loaded on first use instead of at import: a command, or a library
// import, that never speaks HTTP or opens the run store skips undici (~90 ms to load) and SQLite.
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
let undiciModule: typeof import("undici") | undefined;
let sqliteModule: typeof import("better-sqlite3") | undefined;

export function undici(): typeof import("undici") {
  undiciModule ??= require("undici") as typeof import("undici");
  return undiciModule;
}

/** better-sqlite3's Database constructor. */
export function sqlite(): typeof import("better-sqlite3") {
  sqliteModule ??= require("better-sqlite3") as typeof import("better-sqlite3");
  return sqliteModule;
}
