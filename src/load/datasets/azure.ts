// Azure LLM inference trace 2023 (Azure/AzurePublicDataset): CSV with the header
// `TIMESTAMP,ContextTokens,GeneratedTokens`, CRLF line ends, no final newline, and timestamps
// `YYYY-MM-DD HH:MM:SS.fffffff` (7 fractional digits = 100 ns; no zone, read as UTC: only differences matter).
import { InputError } from "../../errors.ts";
import { MAX_TOKENS } from "../limits.ts";
import { normalizeTimes, readText, type Trace, type TraceRow } from "./trace.ts";

const HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens";
const STAMP = /^(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,7}))?$/;

/** Seconds since the epoch (whole) and the fraction in 100 ns units, kept apart so no precision is lost. */
function parseStamp(s: string): { sec: number; frac: number } | null {
  const m = STAMP.exec(s);
  if (!m) return null;
  const [y, mo, d, h, mi, se] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60) return null;
  const ms = Date.UTC(y, mo - 1, d, h, mi, se);
  if (new Date(ms).getUTCDate() !== d) return null;
  return { sec: ms / 1000, frac: Number((m[7] ?? "").padEnd(7, "0")) };
}

export function readAzure(path: string, text = readText(path)): Trace {
  const lines = text.split("\n");
  const strip = (s: string) => (s.endsWith("\r") ? s.slice(0, -1) : s);
  const head = strip(lines[0] ?? "").replace(/^\uFEFF/, "");
  if (head !== HEADER)
    throw new InputError(`expected the header ${HEADER}, got ${JSON.stringify(head.slice(0, 80))}`, {
      position: { file: path, line: 1, column: 1 },
    });
  const rows: TraceRow[] = [];
  let first: { sec: number; frac: number } | null = null;
  for (let i = 1; i < lines.length; i++) {
    const raw = strip(lines[i]!);
    if (raw === "") {
      // Only a trailing newline may leave an empty line.
      if (i === lines.length - 1) continue;
      throw new InputError("empty line inside the CSV", { position: { file: path, line: i + 1, column: 1 } });
    }
    const line = i + 1;
    const cells = raw.split(",");
    if (cells.length !== 3)
      throw new InputError(`expected 3 comma-separated fields (${HEADER}), got ${cells.length}`, {
        position: { file: path, line, column: 1 },
      });
    const st = parseStamp(cells[0]!);
    if (!st)
      throw new InputError(`TIMESTAMP must be YYYY-MM-DD HH:MM:SS.fffffff, got ${JSON.stringify(cells[0])}`, {
        position: { file: path, line, column: 1 },
      });
    const nums: number[] = [];
    let col = cells[0]!.length + 2;
    for (const [k, name] of [
      [1, "ContextTokens"],
      [2, "GeneratedTokens"],
    ] as const) {
      const c = cells[k]!;
      const n = /^\d+$/.test(c) ? Number(c) : Number.NaN;
      if (!(n >= 1 && n <= MAX_TOKENS))
        throw new InputError(`${name} must be an integer in [1, ${MAX_TOKENS}], got ${JSON.stringify(c)}`, {
          position: { file: path, line, column: col },
        });
      nums.push(n);
      col += c.length + 1;
    }
    first ??= st;
    const timestampMs = (st.sec - first.sec) * 1000 + (st.frac - first.frac) / 10_000;
    rows.push({ timestampMs, inputLen: nums[0]!, outputLen: nums[1]!, hashIds: null, sessionId: null, line });
  }
  if (rows.length === 0) throw new InputError(`${path}: no requests in this Azure trace (only a header)`);
  normalizeTimes(rows);
  return { format: "azure", path, rows, timed: true };
}
