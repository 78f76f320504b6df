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
export function engineDate(
  engine: Engine,
  version: string,
): { date: string; how: string; approx: boolean; beyond?: "after" | "before" } {
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

/**
 * Whether the engine's host work (scheduling, input preparation, sampling bookkeeping) overlaps the GPU's step, so a
 * step is max(GPU, host) rather than their sum. Per engine and release:
 * - SGLang: the overlap ("zero-overhead") scheduler, default since v0.4.0 (2024-12); `--disable-overlap-schedule`
 *   turns it off.
 * - vLLM: `--async-scheduling` (experimental from v0.10.0, PR #19970, 2025-07), default from v0.12 (PR #27614,
 *   2025-12, approx); `--no-async-scheduling` turns it off.
 * - TensorRT-LLM: the C++ executor and the PyTorch backend's overlap scheduler run the host a step ahead.
 * - llama.cpp, gpt-fast, MLX: one thread does both (serial).
 */
export function hostOverlap(
  engine: Engine,
  dateIso: string | undefined,
  flags: readonly string[] = [],
): { overlap: boolean; why: string } {
  const has = (f: string) => flags.some((x) => x === f || x.startsWith(`${f}=`));
  switch (engine) {
    case "sglang":
      if (has("--disable-overlap-schedule")) return { overlap: false, why: "--disable-overlap-schedule" };
      if (dateIso && dateIso < "2024-12") return { overlap: false, why: "SGLang before v0.4.0 (no overlap scheduler)" };
      return { overlap: true, why: "SGLang overlap scheduler (default since v0.4.0)" };
    case "vllm":
      if (has("--no-async-scheduling")) return { overlap: false, why: "--no-async-scheduling" };
      if (has("--async-scheduling")) return { overlap: true, why: "--async-scheduling" };
      if (dateIso && dateIso < "2025-12")
        return { overlap: false, why: "vLLM before async scheduling became the default (v0.12, 2025-12, approx)" };
      return { overlap: true, why: "vLLM async scheduling (default from v0.12, approx)" };
    case "trtllm":
      return { overlap: true, why: "TensorRT-LLM executor / overlap scheduler runs the host a step ahead" };
    default:
      return { overlap: false, why: `${engine}: one thread schedules and launches (serial)` };
  }
}
