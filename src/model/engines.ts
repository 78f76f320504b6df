// Engine releases → dates, and the engine-maturity clock: how long an engine had supported a model family when it
// ran. Pure. Dates are ISO strings; ages are in months (30.44 days).
import { UsageError } from "../errors.ts";
import type { Architecture } from "./architecture.ts";
import type { Engine } from "./collectives.ts";

export interface EngineRelease {
  engine: Engine;
  version: string;
  date: string;
  source: string;
}

/** Releases with a known date (validation-public.md rows and their sources). */
export const RELEASES: EngineRelease[] = [
  { engine: "vllm", version: "v0.11.0", date: "2025-10-02", source: "vLLM release v0.11.0 (validation-public.md V1)" },
  {
    engine: "sglang",
    version: "v0.5.1.post3",
    date: "2025-08-27",
    source: "LMSYS gpt-oss blog of 2025-08-27 (validation-public.md V12/V13)",
  },
  { engine: "mlx", version: "0.28.2", date: "2025-10-15", source: "mlx-lm 0.28.2, Oct 2025 (validation-public.md V9)" },
  {
    engine: "llamacpp",
    version: "b1631",
    date: "2023-12-16",
    source: "validation-public.md V11 (build 1631, 9fb13f9)",
  },
  {
    engine: "llamacpp",
    version: "b6918",
    date: "2025-11-01",
    source: "validation-public.md V7 (build 6918, late 2025)",
  },
];

/** Half-life of the maturity gap, months: an engine's shortfall on a newly supported family halves every 3 months. */
export const MATURITY_HALF_LIFE_MONTHS = 3;

const DAY = 86400000;
const MONTH_DAYS = 30.44;

function parseDate(s: string): number | undefined {
  const m = /^(\d{4})-(\d{2})(?:-(\d{2}))?$/.exec(s.trim());
  if (!m) return undefined;
  const t = Date.UTC(Number(m[1]), Number(m[2]) - 1, m[3] ? Number(m[3]) : 15);
  return Number.isFinite(t) ? t : undefined;
}

export function isoDate(t: number): string {
  return new Date(t).toISOString().slice(0, 10);
}

/** A release or date → its date. llama.cpp build numbers are interpolated between the two dated builds. */
export function engineDate(engine: Engine, version: string): { date: string; how: string } {
  const v = version.trim();
  const t = parseDate(v);
  if (t !== undefined) return { date: isoDate(t), how: `date given (${v})` };
  const norm = (x: string) => x.toLowerCase().replace(/^v/, "");
  const hit = RELEASES.find((r) => r.engine === engine && norm(r.version) === norm(v));
  if (hit) return { date: hit.date, how: hit.source };
  if (engine === "llamacpp") {
    const m = /^(?:b|build\s*)?(\d{3,5})$/i.exec(v);
    if (m) {
      const n = Number(m[1]);
      const [a, b] = RELEASES.filter((r) => r.engine === "llamacpp").map((r) => ({
        n: Number(r.version.slice(1)),
        t: parseDate(r.date)!,
      }));
      const tt = a.t + ((n - a.n) * (b.t - a.t)) / (b.n - a.n);
      return {
        date: isoDate(tt),
        how: `build ${n}: date interpolated between b${a.n} (${isoDate(a.t)}) and b${b.n} (${isoDate(b.t)})`,
      };
    }
  }
  const known = RELEASES.filter((r) => r.engine === engine).map((r) => r.version);
  throw new UsageError(
    `--engine-version "${version}": unknown ${engine} release${known.length ? ` (known: ${known.join(", ")})` : ""}`,
    { hint: "give the release date instead, e.g. --engine-version 2025-08 or 2025-08-27" },
  );
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
