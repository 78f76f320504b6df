// POSIX-shell word splitting and quoting (quotes and backslashes; no expansion), shared by the
// variant parser, command discovery and secret redaction.
import { UsageError } from "./errors.ts";

/** One word and where its raw text sits in the source string ([start, end)). */
export interface ShellWord {
  text: string;
  start: number;
  end: number;
}

/** Splits like shellSplit, keeping each word's span in the source. */
export function shellWords(text: string): ShellWord[] {
  const out: ShellWord[] = [];
  let cur = "";
  let start = -1;
  let quote: '"' | "'" | null = null;
  const begin = (i: number) => {
    if (start < 0) start = i;
  };
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quote) {
      if (c === quote) quote = null;
      else if (c === "\\" && quote === '"' && i + 1 < text.length && '"\\$`'.includes(text[i + 1]!)) cur += text[++i];
      else cur += c;
    } else if (c === "'" || c === '"') {
      begin(i);
      quote = c;
    } else if (c === "\\" && i + 1 < text.length) {
      begin(i);
      cur += text[++i];
    } else if (/\s/.test(c)) {
      if (start >= 0) out.push({ text: cur, start, end: i });
      cur = "";
      start = -1;
    } else {
      begin(i);
      cur += c;
    }
  }
  if (quote) throw new UsageError(`unterminated ${quote} quote in "${text}"`);
  if (start >= 0) out.push({ text: cur, start, end: text.length });
  return out;
}

/** Splits a flag string the way a POSIX shell splits words (quotes and backslashes; no expansion). */
export function shellSplit(text: string): string[] {
  return shellWords(text).map((w) => w.text);
}

/** A word as a shell reads it back; control characters (from a server's model id …) as `$'\x1b'`, inert and exact. */
export function shellQuote(word: string): string {
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(word)) return word;
  if (/[\u0000-\u001f\u007f-\u009f]/.test(word))
    return `$'${word.replace(/[\\']/g, (c) => `\\${c}`).replace(/[\u0000-\u001f\u007f-\u009f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, "0")}`)}'`;
  return `'${word.replace(/'/g, `'\\''`)}'`;
}
