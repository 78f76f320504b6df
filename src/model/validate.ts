// Scores the model against published measurements (validation-public.md rows): predicted range vs measured. Pure.
import { predict } from "./predict.ts";
import type { Range } from "./range.ts";
import type { ModelInput } from "./resolve.ts";

export interface ValidationRow {
  id: string;
  label: string;
  measured: { msPerToken?: number; tokensPerSecond?: number };
  input: ModelInput;
  note?: string;
}

export interface ValidationResult {
  id: string;
  label: string;
  measuredMs: number;
  predictedMs: Range;
  /** (predicted mid − measured) / measured. */
  error: number;
  inside: boolean;
  dominant: string;
  note?: string;
}

export function validateRows(rows: ValidationRow[]): {
  results: ValidationResult[];
  medianAbsError: number;
  inside: number;
} {
  const results = rows.map((row) => {
    const p = predict(row.input);
    const measuredMs = row.measured.msPerToken ?? 1000 / row.measured.tokensPerSecond!;
    const mid = p.decode.stepMs.mid;
    const top = [...p.decode.terms].sort((a, b) => b.ms.mid - a.ms.mid)[0];
    return {
      id: row.id,
      label: row.label,
      measuredMs,
      predictedMs: p.decode.stepMs,
      error: (mid - measuredMs) / measuredMs,
      inside: measuredMs >= p.decode.stepMs.low && measuredMs <= p.decode.stepMs.high,
      dominant: `${top.name} ${(100 * top.share).toFixed(0)} %`,
      note: row.note,
    };
  });
  const errs = results.map((r) => Math.abs(r.error)).sort((a, b) => a - b);
  const m = errs.length;
  const medianAbsError = m % 2 ? errs[(m - 1) / 2] : (errs[m / 2 - 1] + errs[m / 2]) / 2;
  return { results, medianAbsError, inside: results.filter((r) => r.inside).length };
}
