// results.json: the StudyResult itself, with non-finite numbers made JSON-safe.
import type { StudyResult } from "./types.ts";

export function renderJson(r: StudyResult): string {
  return `${JSON.stringify(r, (_k, v) => (typeof v === "number" && !Number.isFinite(v) ? null : v), 2)}\n`;
}

/** Reads a results.json back; throws if it is not a study result. */
export function parseStudyResult(text: string, source = "results.json"): StudyResult {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (err) {
    throw new Error(`${source}: not JSON (${(err as Error).message})`);
  }
  if (!data || typeof data !== "object" || (data as { schema?: unknown }).schema !== "inferscope.study/1")
    throw new Error(`${source}: not an inferscope study result (schema "inferscope.study/1" expected)`);
  return data as StudyResult;
}
