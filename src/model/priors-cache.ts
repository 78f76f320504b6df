// The corpus fit, precomputed at build time. Fitting the shipped corpus (priors.ts) takes 0.2–0.8 s and parsing its
// YAML another 0.1–0.2 s, paid by every process that predicts; scripts/build.mjs writes the result beside the compiled
// priors module as priors-fit.json. The file is used only when its stamp — a SHA-256 of the corpus file and of every
// module the fit runs (the fit code's version) — matches the files beside it now; anything else (tsx runs from src/,
// a changed corpus or model code, a missing or damaged file) falls back to fitting on the fly.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { dirname, relative, resolve as resolvePath } from "node:path";
import type { CorpusFit } from "./priors.ts";

export const FIT_CACHE_KIND = "inferscope.priors-fit";
/** Bumped when the file's layout changes. */
export const FIT_CACHE_FORMAT = 2;
export const FIT_CACHE_NAME = "priors-fit.json";

export interface FitCacheFile {
  kind: typeof FIT_CACHE_KIND;
  format: number;
  stamp: string;
  /** The files the stamp covers, relative to the fit module (for whoever wonders why a cache was refused). */
  hashed: string[];
  fit: Omit<CorpusFit, "index">;
  /** supportDates() of the corpus: "engine|model" → first supported (the maturity clock). */
  supportDates: [string, string][];
  /** Variance inflations per extrapolation kind, estimated by the grouped cross-validation (cv.ts). */
  inflations?: unknown;
}

export interface CachedFit {
  fit: CorpusFit;
  supportDates: Map<string, string>;
  inflations?: unknown;
}

export type FitCacheRead =
  | { ok: true; value: CachedFit }
  | { ok: false; reason: "missing" | "invalid" | "stale"; detail: string };

// Static relative imports and re-exports at the start of a line, in compiled JS or TypeScript (the fit code has no
// dynamic relative imports).
const RELATIVE_IMPORT = /^[ \t]*(?:import|export)\b[^;]*?["'](\.{1,2}\/[^"'\n]+\.(?:[cm]?js|ts))["']/gm;

/** The fit module and every module it reaches through relative imports, sorted (the code the fit runs). */
export function fitCodeFiles(entry: string): string[] {
  const seen = new Set<string>();
  const todo = [resolvePath(entry)];
  while (todo.length) {
    const f = todo.pop()!;
    if (seen.has(f)) continue;
    seen.add(f);
    const text = readFileSync(f, "utf8");
    for (const m of text.matchAll(RELATIVE_IMPORT)) {
      const dep = resolvePath(dirname(f), m[1]);
      if (!seen.has(dep)) todo.push(dep);
    }
  }
  return [...seen].sort();
}

/** SHA-256 over the cache format, the corpus files and the fit's code (names relative to the entry, and contents). */
export function fitStamp(entry: string, corpusFiles: string | readonly string[]): { stamp: string; hashed: string[] } {
  const files = typeof corpusFiles === "string" ? [corpusFiles] : corpusFiles;
  const h = createHash("sha256");
  h.update(`${FIT_CACHE_KIND}/${FIT_CACHE_FORMAT}\0`);
  const base = dirname(resolvePath(entry));
  const hashed: string[] = [];
  for (const cf of files) {
    h.update("corpus\0").update(relative(base, cf)).update("\0").update(readFileSync(cf)).update("\0");
    hashed.push(relative(base, cf));
  }
  for (const f of fitCodeFiles(entry)) {
    const name = relative(base, f);
    hashed.push(name);
    h.update(`${name}\0`).update(readFileSync(f)).update("\0");
  }
  return { stamp: h.digest("hex"), hashed };
}

/** The cache file's content for a fit; every number must survive JSON exactly (finite doubles do). */
export function fitCacheFile(
  fit: CorpusFit,
  supportDates: Map<string, string>,
  stamp: { stamp: string; hashed: string[] },
  inflations?: unknown,
): FitCacheFile {
  const finite = (xs: number[], what: string) => {
    for (const x of xs) if (!Number.isFinite(x)) throw new Error(`internal: corpus fit ${what} is not finite (${x})`);
  };
  finite(fit.theta, "θ");
  for (const row of fit.cov) finite(row, "covariance");
  const { index: _index, ...rest } = fit;
  return {
    kind: FIT_CACHE_KIND,
    format: FIT_CACHE_FORMAT,
    stamp: stamp.stamp,
    hashed: stamp.hashed,
    fit: rest,
    supportDates: [...supportDates],
    ...(inflations ? { inflations } : {}),
  };
}

/** Reads a cache file and checks it against the fit code and corpus it claims to come from. */
export function readFitCache(cacheFile: string, entry: string, corpusFile: string | readonly string[]): FitCacheRead {
  let raw: string;
  try {
    raw = readFileSync(cacheFile, "utf8");
  } catch {
    return { ok: false, reason: "missing", detail: `${cacheFile} not found` };
  }
  let j: FitCacheFile;
  try {
    j = JSON.parse(raw) as FitCacheFile;
  } catch (e) {
    return { ok: false, reason: "invalid", detail: `${cacheFile}: ${(e as Error).message}` };
  }
  if (j?.kind !== FIT_CACHE_KIND || j.format !== FIT_CACHE_FORMAT)
    return { ok: false, reason: "invalid", detail: `${cacheFile} is not a format-${FIT_CACHE_FORMAT} priors cache` };
  let now: string;
  try {
    now = fitStamp(entry, corpusFile).stamp;
  } catch (e) {
    return { ok: false, reason: "stale", detail: `fit code or corpus unreadable: ${(e as Error).message}` };
  }
  if (j.stamp !== now)
    return { ok: false, reason: "stale", detail: `${cacheFile} was fitted from another corpus or fit code` };
  const f = j.fit;
  const shapeOk =
    Array.isArray(f?.names) &&
    Array.isArray(f.theta) &&
    f.theta.length === f.names.length &&
    Array.isArray(f.cov) &&
    f.cov.length === f.names.length &&
    f.cov.every((r) => Array.isArray(r) && r.length === f.names.length) &&
    Array.isArray(f.params) &&
    typeof f.support === "object" &&
    f.support !== null &&
    Array.isArray(j.supportDates);
  if (!shapeOk) return { ok: false, reason: "invalid", detail: `${cacheFile}: fit arrays of the wrong shape` };
  const fit: CorpusFit = {
    names: f.names,
    index: new Map(f.names.map((n, i) => [n, i])),
    theta: f.theta,
    cov: f.cov,
    hyper: f.hyper,
    // JSON drops `hyper: undefined`; restore the key so the object is the fit's own shape.
    params: f.params.map((p) => ({ ...p, hyper: p.hyper })),
    rowsUsed: f.rowsUsed,
    logEvidence: f.logEvidence,
    support: f.support,
  };
  return { ok: true, value: { fit, supportDates: new Map(j.supportDates), inflations: j.inflations } };
}
