// bench:client and bench:client-attribution measure the client as the package ships it: the compiled
// dist/ (their npm scripts build it when stale). Run from the sources, tsx's transform (keepNames) wraps
// closures made per request in a defineProperty call, garbage the package does not have. BENCH_SRC=1
// loads src/ instead, for a quick before/after while editing.
import { existsSync, readFileSync } from "node:fs";

export const fromSources = process.env.BENCH_SRC === "1";

/** One module of src/load, compiled (dist/load/NAME.js) or, with BENCH_SRC=1, from its source. */
export async function loadModule<M>(name: string): Promise<M> {
  const url = fromSources
    ? new URL(`../src/load/${name}.ts`, import.meta.url)
    : new URL(`../dist/load/${name}.js`, import.meta.url);
  if (!existsSync(url))
    throw new Error(`${url.pathname} is missing: run \`npm run build\` (the bench's npm script does)`);
  return (await import(url.href)) as M;
}

/** Which code was measured, for the bench's header. */
export function codeMeasured(): string {
  if (fromSources) return "the sources through tsx (BENCH_SRC=1)";
  const stamp = new URL("../dist/.build-stamp", import.meta.url);
  const at = existsSync(stamp) ? readFileSync(stamp, "utf8").trim() : "";
  return `the compiled package (dist/${at ? `, built ${at}` : ""})`;
}
