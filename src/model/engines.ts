// Engine releases → dates (releases.ts), and the engine-maturity clock: how long an engine had supported a model family when it
// ran. Pure. Dates are ISO strings; ages are in months (30.44 days).
import type { Architecture } from "./architecture.ts";
import type { Engine } from "./collectives.ts";
import { isoDate, parseIsoDate as parseDate, resolveRelease } from "./releases.ts";

/** Half-life of the maturity gap, months: an engine's shortfall on a newly supported family halves every 3 months. */
export const MATURITY_HALF_LIFE_MONTHS = 3;

const DAY = 86400000;
const MONTH_DAYS = 30.44;

export { isoDate };

/** A release name or a date → its date (releases.ts: the release tables; unknown names get a "did you mean"). */
export function engineDate(engine: Engine, version: string): { date: string; how: string; approx: boolean } {
  return resolveRelease(engine, version);
}

/** Model family, for the maturity clock (which engines support which family since when). */
export function modelFamily(a: Architecture): string {
  const n = a.name.toLowerCase();
  const rules: [RegExp, string][] = [
    [/mixtral/, "mixtral"],
    [/gpt-oss/, "gpt-oss"],
    [/deepseek-(v3|r1)/, "deepseek-v3"],
    [/glm-?5/, "glm-5"],
    [/qwen3.*a\d+b|qwen3-(30b|235b)/, "qwen3-moe"],
    [/qwen3/, "qwen3"],
    [/qwen2/, "qwen2"],
    [/llama/, "llama"],
  ];
  for (const [re, f] of rules) if (re.test(n)) return f;
  return a.hfArchitecture ?? n;
}

export interface SupportDate {
  engine: Engine;
  family: string;
  since: string;
  source: string;
}

/** Age in months of the engine's support for the family at the engine's date (≥ 0). */
export function supportAgeMonths(engineIso: string, sinceIso: string): number {
  const a = parseDate(engineIso);
  const b = parseDate(sinceIso);
  if (a === undefined || b === undefined) return Number.NaN;
  return Math.max(0, (a - b) / DAY / MONTH_DAYS);
}

/** Weight of the maturity gap still left at an age: 2^(−age / half-life); 1 on day one, → 0 when mature. */
export function maturityWeight(ageMonths: number): number {
  return 2 ** (-ageMonths / MATURITY_HALF_LIFE_MONTHS);
}
