// Request traces: one row per request with its arrival time, token lengths, prefix blocks and session.
// Readers (mooncake, azure, jsonl) return this shape; prompts are synthesized from it (synth.ts).
import { readFileSync } from "node:fs";
import { InputError, type SourcePosition } from "../../errors.ts";

/** Tokens per `hash_ids` block (Mooncake's: every id stands for 512 prompt tokens). */
export const BLOCK_TOKENS = 512;

export interface TraceRow {
  /** Arrival in ms from the trace's first row; null when the source has no times. */
  timestampMs: number | null;
  /** Prompt tokens the request should have (the server's count, BOS and template included). */
  inputLen: number;
  /** Tokens to generate (max_tokens). */
  outputLen: number;
  /** One id per BLOCK_TOKENS of prompt, leading blocks first; equal ids → byte-identical text. */
  hashIds: number[] | null;
  sessionId: string | null;
  /** Text given by the file itself (jsonl `prompt` / `messages`): sent as is, not synthesized. */
  prompt?: string;
  messages?: Array<{ role: string; content: string }>;
  /** 1-based source line, for messages about this row. */
  line: number;
}

export interface Trace {
  format: "mooncake" | "azure" | "jsonl";
  path: string;
  rows: TraceRow[];
  /** Every row has a timestamp: replayed on its own schedule by default. */
  timed: boolean;
}

export function readText(path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch (e: any) {
    throw new InputError(`${path}: ${e?.code === "ENOENT" ? "no such file" : (e?.message ?? String(e))}`);
  }
}

/** Column (1-based) of `"key"` in a raw JSON line, else 1. */
export function keyColumn(raw: string, key: string): number {
  const k = raw.indexOf(`"${key}"`);
  return k >= 0 ? k + 1 : 1;
}

/** Parses one JSON-lines row; a syntax error names its line and column. */
export function parseJsonLine(path: string, raw: string, line: number): Record<string, unknown> {
  let o: unknown;
  try {
    o = JSON.parse(raw);
  } catch (e) {
    const m = /position (\d+)/.exec((e as Error).message);
    throw new InputError(`not valid JSON: ${(e as Error).message}`, {
      position: { file: path, line, column: m ? Number(m[1]) + 1 : 1 },
    });
  }
  if (!o || typeof o !== "object" || Array.isArray(o))
    throw new InputError("expected a JSON object", { position: { file: path, line, column: 1 } });
  return o as Record<string, unknown>;
}

/** A whole number in [min, max] or an error at the key's column. */
export function intField(
  path: string,
  raw: string,
  line: number,
  o: Record<string, unknown>,
  key: string,
  min: number,
  max = Number.MAX_SAFE_INTEGER,
): number {
  const v = o[key];
  const pos: SourcePosition = { file: path, line, column: keyColumn(raw, key) };
  if (v === undefined) throw new InputError(`missing \`${key}\``, { position: pos });
  if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > max)
    throw new InputError(`\`${key}\` must be an integer in [${min}, ${max}], got ${JSON.stringify(v)}`, {
      position: pos,
    });
  return v;
}

/** `hash_ids`: non-negative integers, no more blocks than the prompt has, no id twice. */
export function hashIdsField(
  path: string,
  raw: string,
  line: number,
  o: Record<string, unknown>,
  inputLen: number,
): number[] {
  const v = o.hash_ids;
  const pos: SourcePosition = { file: path, line, column: keyColumn(raw, "hash_ids") };
  if (!Array.isArray(v)) throw new InputError("`hash_ids` must be an array of integers", { position: pos });
  const need = Math.ceil(inputLen / BLOCK_TOKENS);
  if (v.length > need)
    throw new InputError(
      `\`hash_ids\` has ${v.length} blocks, but input_length ${inputLen} fills only ${need} blocks of ${BLOCK_TOKENS} tokens`,
      { position: pos },
    );
  const seen = new Set<number>();
  for (const id of v) {
    if (typeof id !== "number" || !Number.isInteger(id) || id < 0 || id > 0xffffffff)
      throw new InputError(`\`hash_ids\` entries must be integers in [0, 2^32), got ${JSON.stringify(id)}`, {
        position: pos,
      });
    // A repeated id would make a block's text equal to an earlier block of the same prompt.
    if (seen.has(id)) throw new InputError(`\`hash_ids\` repeats id ${id} within one request`, { position: pos });
    seen.add(id);
  }
  return v as number[];
}

/** Rows sorted by arrival (stable: ties keep file order); times shifted so the first is 0. */
export function normalizeTimes(rows: TraceRow[]): void {
  if (rows.length === 0 || rows.some((r) => r.timestampMs === null)) return;
  rows.sort((a, b) => a.timestampMs! - b.timestampMs! || a.line - b.line);
  const t0 = rows[0]!.timestampMs!;
  if (t0 !== 0) for (const r of rows) r.timestampMs = r.timestampMs! - t0;
}
