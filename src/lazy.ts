// Heavy CommonJS dependencies, loaded on first use instead of at import: a command, or a library
// import, that never speaks HTTP or reads YAML skips undici (~80 ms to load) and yaml (~40 ms). The
// SQLite driver loads on first open, in src/store/sqlite.ts.
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
let undiciModule: typeof import("undici") | undefined;
let yamlModule: typeof import("yaml") | undefined;
let zodModule: typeof import("zod") | undefined;

export function undici(): typeof import("undici") {
  undiciModule ??= require("undici") as typeof import("undici");
  return undiciModule;
}

/** The yaml package (its CommonJS build, the one Node's ESM import of "yaml" wraps too). */
export function yaml(): typeof import("yaml") {
  yamlModule ??= require("yaml") as typeof import("yaml");
  return yamlModule;
}

/** zod, for the schemas only some inputs need (a --rules file: `trace` skips ~60–110 ms without it). */
export function zod(): typeof import("zod") {
  zodModule ??= require("zod") as typeof import("zod");
  return zodModule;
}
