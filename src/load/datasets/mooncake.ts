// Mooncake FAST'25 traces (kvcache-ai/Mooncake, FAST25-release/traces): JSON lines with exactly
// `timestamp` (ms from the trace start), `input_length`, `output_length` and `hash_ids` (one id per
// 512-token block). See ../shared/workloads/README.md for the format and its checked properties.
import { InputError } from "../../errors.ts";
import { MAX_TOKENS } from "../limits.ts";
import {
  hashIdsField,
  intField,
  keyColumn,
  normalizeTimes,
  parseJsonLine,
  readText,
  type Trace,
  type TraceRow,
} from "./trace.ts";

const KEYS = new Set(["timestamp", "input_length", "output_length", "hash_ids"]);

export function readMooncake(path: string, text = readText(path)): Trace {
  const rows: TraceRow[] = [];
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i]!.endsWith("\r") ? lines[i]!.slice(0, -1) : lines[i]!;
    if (!raw.trim()) continue;
    const line = i + 1;
    const o = parseJsonLine(path, raw, line);
    for (const k of Object.keys(o))
      if (!KEYS.has(k))
        throw new InputError(
          `unknown field \`${k}\` (a Mooncake row has timestamp, input_length, output_length, hash_ids; use --dataset-name jsonl for other fields)`,
          { position: { file: path, line, column: keyColumn(raw, k) } },
        );
    const timestampMs = intField(path, raw, line, o, "timestamp", 0);
    const inputLen = intField(path, raw, line, o, "input_length", 1, MAX_TOKENS);
    const outputLen = intField(path, raw, line, o, "output_length", 1, MAX_TOKENS);
    const hashIds = hashIdsField(path, raw, line, o, inputLen);
    rows.push({ timestampMs, inputLen, outputLen, hashIds, sessionId: null, line });
  }
  if (rows.length === 0) throw new InputError(`${path}: no requests in this Mooncake trace`);
  normalizeTimes(rows);
  return { format: "mooncake", path, rows, timed: true };
}
