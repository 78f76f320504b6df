// JSON lines as a trace: each row has a `prompt` (string), `messages` ([{role, content}]) or an
// `input_length` (tokens, synthesized), and optionally `timestamp` (ms), `output_length` (or
// max_tokens / output_len / output_tokens), `hash_ids` (512-token blocks) and `session_id`.
import { InputError } from "../../errors.ts";
import { MAX_TOKENS } from "../limits.ts";
import { estimateTokens } from "../workload.ts";
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

/** Fields that make a JSONL file a trace rather than a bag of prompts. */
export const TRACE_FIELDS = ["timestamp", "input_length", "output_length", "hash_ids", "session_id"] as const;

/** True when some row of the file carries a trace field (cheap: a text search, then a parse of the hits). */
export function isJsonlTrace(text: string): boolean {
  return TRACE_FIELDS.some((k) => text.includes(`"${k}"`));
}

export function readJsonlTrace(path: string, defaultOutputLen: number, text = readText(path)): Trace {
  const rows: TraceRow[] = [];
  const lines = text.split("\n");
  let timedRows = 0;
  let untimedLine = 0;
  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i]!.endsWith("\r") ? lines[i]!.slice(0, -1) : lines[i]!;
    if (!raw.trim()) continue;
    const line = i + 1;
    const o = parseJsonLine(path, raw, line);
    const at = (k: string) => ({ file: path, line, column: keyColumn(raw, k) });
    let timestampMs: number | null = null;
    if (o.timestamp !== undefined) {
      const t = o.timestamp;
      if (typeof t !== "number" || !Number.isFinite(t) || t < 0)
        throw new InputError(`\`timestamp\` must be a number of ms ≥ 0, got ${JSON.stringify(t)}`, {
          position: at("timestamp"),
        });
      timestampMs = t;
      timedRows++;
    } else untimedLine ||= line;
    const outKey = ["output_length", "max_tokens", "output_len", "output_tokens"].find((k) => o[k] !== undefined);
    const outputLen = outKey ? intField(path, raw, line, o, outKey, 1, MAX_TOKENS) : defaultOutputLen;
    let sessionId: string | null = null;
    if (o.session_id !== undefined) {
      const s = o.session_id;
      if (typeof s !== "string" && !(typeof s === "number" && Number.isFinite(s)))
        throw new InputError(`\`session_id\` must be a string or a number, got ${JSON.stringify(s)}`, {
          position: at("session_id"),
        });
      sessionId = String(s);
    }
    const row: TraceRow = { timestampMs, inputLen: 0, outputLen, hashIds: null, sessionId, line };
    if (typeof o.prompt === "string") {
      row.prompt = o.prompt;
      row.inputLen = estimateTokens(o.prompt);
    } else if (o.prompt === undefined && Array.isArray(o.messages)) {
      if (!o.messages.every((m: any) => m && typeof m === "object" && typeof m.content === "string"))
        throw new InputError("`messages` must be an array of {role, content} with string content", {
          position: at("messages"),
        });
      row.messages = o.messages.map((m: any) => ({ role: String(m.role ?? "user"), content: m.content }));
      row.inputLen = estimateTokens(row.messages.map((m) => m.content).join(" "));
    } else if (o.prompt === undefined && o.messages === undefined) {
      if (o.input_length === undefined)
        throw new InputError("expected a string `prompt`, a `messages` array or an `input_length`", {
          position: { file: path, line, column: 1 },
        });
    } else
      throw new InputError("expected a string `prompt` or a `messages` array of {role, content}", {
        position: at(o.prompt !== undefined ? "prompt" : "messages"),
      });
    if (o.input_length !== undefined) {
      // Given text keeps its own length; input_length then only states what the server should count.
      row.inputLen = intField(path, raw, line, o, "input_length", 1, MAX_TOKENS);
    }
    if (o.hash_ids !== undefined) {
      if (row.prompt !== undefined || row.messages !== undefined)
        throw new InputError("`hash_ids` describes synthesized text: give it with `input_length`, not with a prompt", {
          position: at("hash_ids"),
        });
      row.hashIds = hashIdsField(path, raw, line, o, row.inputLen);
    }
    rows.push(row);
  }
  if (rows.length === 0) throw new InputError(`${path}: no requests in this JSONL file`);
  if (timedRows > 0 && timedRows < rows.length)
    throw new InputError(`\`timestamp\` is on ${timedRows} rows but not on all: give it on every row or none`, {
      position: { file: path, line: untimedLine, column: 1 },
    });
  normalizeTimes(rows);
  return { format: "jsonl", path, rows, timed: timedRows === rows.length };
}
