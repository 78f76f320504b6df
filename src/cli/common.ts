// Shared plumbing for the thin CLI commands: --json/--debug, printing, progress on a TTY only.

import { readFileSync } from "node:fs";
import type { Command } from "@commander-js/extra-typings";
import { escapeControl, escapeControlKeepColor } from "../control.ts";
import { UsageError } from "../errors.ts";
import { interruptSignal, setInterruptNote } from "../interrupt.ts";
import { addSecret, isSecretName, redact, redactString } from "../secrets.ts";
import { MAX_TIMER_MS } from "../sleep.ts";
import { argvSecretsHidden } from "./argv-secrets.ts";

export { escapeControl };

export interface CommonOptions {
  json?: boolean;
  debug?: boolean;
}

/** Every command gets --json and --debug. */
export function withCommon<C extends Command<any, any, any>>(cmd: C) {
  return cmd
    .option("--json", "print machine-readable JSON instead of tables")
    .option("--debug", "show stack traces and internal detail on errors");
}

/**
 * Prints a result: JSON when asked, otherwise the command's own text rendering. Secrets are redacted
 * on stdout as in the store and the logs, and text from a server (model ids, HELP text, labels, error
 * bodies) is rendered with its control characters escaped, so a server cannot clear or spoof the
 * terminal; JSON escapes them by itself.
 */
export function emit<T>(result: T, opts: CommonOptions, text: (r: T) => string): void {
  // JSON: each string is redacted on its own; redacting the serialised text let a pattern such as
  // `HF_TOKEN=\S+` swallow the closing quote and print invalid JSON.
  if (opts.json) process.stdout.write(`${JSON.stringify(redact(result), redactingReplacer, 2)}\n`);
  else {
    // The rendered text once more as a whole (a renderer may add server text from objects terminalSafe leaves
    // alone); our own colour sequences stay.
    const s = escapeControlKeepColor(redactString(text(terminalSafe(result))));
    if (s) process.stdout.write(s.endsWith("\n") ? s : `${s}\n`);
  }
}

/** A copy of plain objects and arrays with every string's control characters escaped; other objects as they are. */
export function terminalSafe<T>(value: T): T {
  const walk = (v: unknown, depth: number): unknown => {
    if (typeof v === "string") return escapeControl(v);
    if (depth > 64 || v === null || typeof v !== "object") return v;
    if (Array.isArray(v)) {
      // Numeric columns need no copy.
      if (!v.some((x) => typeof x === "string" || (x !== null && typeof x === "object"))) return v;
      return v.map((x) => walk(x, depth + 1));
    }
    const proto = Object.getPrototypeOf(v);
    if (proto !== Object.prototype && proto !== null) return v;
    const o: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) o[k] = walk(x, depth + 1);
    return o;
  };
  return walk(value, 0) as T;
}

/** One line for the terminal from text that may hold a server's words: escaped and redacted. */
export function safeLine(s: string): string {
  return redactString(escapeControl(s));
}

function redactingReplacer(key: string, value: unknown): unknown {
  return typeof value === "string" ? redactString(value) : jsonReplacer(key, value);
}

/** JSON for results that may hold bigint, Map, ±Infinity or NaN. */
export function jsonReplacer(_key: string, value: unknown): unknown {
  if (typeof value === "bigint") return value.toString();
  if (value instanceof Map) return Object.fromEntries(value);
  if (typeof value === "number" && !Number.isFinite(value))
    return Number.isNaN(value) ? "NaN" : value > 0 ? "+Inf" : "-Inf";
  return value;
}

/**
 * Progress goes to stderr, on a TTY and never with --json; INFERSCOPE_PROGRESS=1 asks for it on a pipe
 * too (a script or test that acts on "PHASE: started" lines).
 */
export function progressEnabled(opts: CommonOptions): boolean {
  return !opts.json && (Boolean(process.stderr.isTTY) || process.env.INFERSCOPE_PROGRESS === "1");
}

/** Parses "10s", "500ms", "2m", or a bare number of seconds, into milliseconds. */
export function parseDurationMs(text: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(text.trim());
  if (!m) throw new Error(`not a duration: "${text}" (examples: 500ms, 10s, 2m)`);
  const n = Number(m[1]);
  const unit = m[2] ?? "s";
  return n * { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[unit]!;
}

// RFC 9110 field names are tokens; values may not hold CR, LF, NUL or other controls (tab allowed).
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const HEADER_VALUE_BAD = /[\u0000-\u0008\u000a-\u001f\u007f]/;

/** A header value from a flag (--api-key, --header): a line break would split the request, so refuse it here. */
export function headerValueFlag(flag: string, value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  const bad = HEADER_VALUE_BAD.exec(value)?.[0];
  if (bad) {
    const shown = bad === "\r" ? "\\r" : bad === "\n" ? "\\n" : escapeControl(bad);
    const what = bad === "\r" || bad === "\n" ? "a line break" : "a control character";
    throw new UsageError(`${flag}: the value holds ${what} (${shown}), which cannot go in an HTTP header`, {
      hint: "check for a pasted newline or a quoting slip",
    });
  }
  return value;
}

/** The help of the three ways to give a server's API key, for every command that sends one. */
export const API_KEY_HELP = {
  key: "API key for the server (default $OPENAI_API_KEY); visible to other users in ps until inferscope starts: prefer --api-key-file or --api-key-env",
  file: "read the API key from this file's first line",
  env: "read the API key from this environment variable",
} as const;

let psNoted = false;

/**
 * The API key from --api-key, --api-key-file or --api-key-env (at most one), else $OPENAI_API_KEY (unless
 * `envDefault` is false: the library reads it then). Registered as a secret; a line break in it, an
 * empty file or an unset variable is refused naming the flag. A key given as --api-key is visible in
 * `ps` until the process hides it: said once on stderr.
 */
export function resolveApiKey(
  o: { apiKey?: string; apiKeyFile?: string; apiKeyEnv?: string },
  opts: { envDefault?: boolean } = {},
): string | undefined {
  const given = (["apiKey", "apiKeyFile", "apiKeyEnv"] as const).filter((k) => o[k] !== undefined);
  if (given.length > 1)
    throw new UsageError(
      // The flags last: a word after `--api-key` would read as its value and be redacted.
      `give the API key one way, not ${given.length} at once: ${given.map((k) => `--${k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`).join(", ")}`,
    );
  let flag: string;
  let value: string | undefined;
  if (o.apiKeyFile !== undefined) {
    flag = `--api-key-file ${o.apiKeyFile}`;
    let text: string;
    try {
      text = readFileSync(o.apiKeyFile, "utf8");
    } catch (e) {
      throw new UsageError(`${flag}: cannot read it (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
    }
    value = text.split(/\r?\n/)[0]!.trim();
    if (!value) throw new UsageError(`${flag}: its first line is empty; it should hold the key`);
  } else if (o.apiKeyEnv !== undefined) {
    flag = `--api-key-env ${o.apiKeyEnv}`;
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(o.apiKeyEnv))
      throw new UsageError(`${flag}: not an environment variable's name`);
    value = process.env[o.apiKeyEnv];
    if (!value) throw new UsageError(`${flag}: ${o.apiKeyEnv} is not set in the environment (or is empty)`);
  } else if (o.apiKey !== undefined) {
    flag = "--api-key";
    value = headerValueFlag(flag, o.apiKey);
    if (!psNoted) {
      psNoted = true;
      const hidden = argvSecretsHidden();
      process.stderr.write(
        `note: --api-key on the command line can be read by other local users (ps, /proc/PID/cmdline)${hidden ? " until inferscope hid it, once started" : " while inferscope runs"}, and stays in your shell's history; --api-key-file FILE, --api-key-env NAME or $OPENAI_API_KEY keep it off the command line\n`,
      );
    }
  } else {
    if (opts.envDefault === false) return undefined;
    flag = "$OPENAI_API_KEY";
    value = process.env.OPENAI_API_KEY;
  }
  addSecret(value);
  return headerValueFlag(flag, value);
}

/** Repeatable `--header 'Name: value'` flags as a header record; a bad name or a line break is refused naming the flag. */
export function headerFlags(flag: string, list: string[] | undefined): Record<string, string> | undefined {
  if (!list?.length) return undefined;
  const out: Record<string, string> = {};
  for (const h of list) {
    const i = h.indexOf(":");
    if (i <= 0) throw new UsageError(`${flag}: expected "Name: value", got "${escapeControl(h)}"`);
    const name = h.slice(0, i).trim();
    if (!HEADER_NAME.test(name))
      throw new UsageError(
        `${flag}: "${escapeControl(name)}" is not a header name (letters, digits and !#$%&'*+.^_\`|~-)`,
      );
    out[name.toLowerCase()] = headerValueFlag(flag, h.slice(i + 1).trim())!;
    // Authorization, X-Api-Key …: the value is kept out of every output.
    if (isSecretName(name)) addSecret(out[name.toLowerCase()]!.replace(/^(?:bearer|basic|token)\s+/i, ""));
  }
  return out;
}

/** An optional duration flag's value in ms; a bad one is a usage error naming the flag (not an "internal error"). */
export function durationFlag(flag: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  let ms: number;
  try {
    ms = parseDurationMs(text);
  } catch {
    throw new UsageError(`${flag}: not a duration: "${text}" (examples: 500ms, 10s, 2m)`);
  }
  if (!(ms > 0)) throw new UsageError(`${flag} must be longer than 0, got "${text}"`);
  // Node's timers wrap past 2^31 − 1 ms and fire at once: a longer wait would be no wait at all.
  if (ms > MAX_DURATION_MS)
    throw new UsageError(
      `${flag} must be at most ${(MAX_DURATION_MS / 3_600_000) | 0}h (the longest timer Node sets), got "${text}"`,
    );
  return ms;
}

/** The longest duration a flag takes, in ms: Node's timer limit (24.86 days). */
export const MAX_DURATION_MS = MAX_TIMER_MS;

/** A commander parser for a duration flag: in ms, > 0 and within MAX_DURATION_MS, else a usage error naming the flag. */
export function durationArg(flag: string) {
  return (v: string): number => durationFlag(flag, v)!;
}

/**
 * A commander parser for a numeric flag, with its range: `--port expects an integer in [0, 65535], got
 * "99999"` instead of whatever the code behind it would throw.
 */
export function numberArg(name: string, o: { integer?: boolean; min?: number; max?: number; above?: number } = {}) {
  const range =
    o.min !== undefined && o.max !== undefined
      ? ` in [${o.min}, ${o.max}]`
      : o.min !== undefined
        ? ` ≥ ${o.min}`
        : o.above !== undefined
          ? ` > ${o.above}`
          : "";
  return (v: string): number => {
    const n = Number(v);
    const bad =
      v.trim() === "" ||
      !Number.isFinite(n) ||
      // 1e99 is an integer to JavaScript, but not one a count or a seed can hold exactly.
      (o.integer === true && !Number.isSafeInteger(n)) ||
      (o.min !== undefined && n < o.min) ||
      (o.max !== undefined && n > o.max) ||
      (o.above !== undefined && n <= o.above);
    if (bad) throw new UsageError(`${name} expects ${o.integer ? "an integer" : "a number"}${range}, got "${v}"`);
    return n;
  };
}

/**
 * SIGINT or SIGTERM for a command that saves partial results: the process's one interrupt signal
 * (src/interrupt.ts), armed. The first signal aborts it (reason: an InterruptedError naming the signal),
 * the command stops its work, saves and exits 130; a second exits 130 at once, printing `note` (exit
 * hooks still kill child process groups). `dispose` drops the note.
 */
export function interruptOnSignals(note?: () => string | undefined): { signal: AbortSignal; dispose: () => void } {
  if (note) setInterruptNote(note);
  return { signal: interruptSignal(), dispose: () => (note ? setInterruptNote(null) : undefined) };
}

/** Ctrl-C (or SIGTERM) stops a live view; the command then returns normally (exit 0). */
function stopSignal(): { signal: AbortSignal; dispose: () => void } {
  return { signal: interruptSignal({ stopIsSuccess: true }), dispose: () => {} };
}

/**
 * Runs a live view (`metrics watch`, `telemetry watch`) until it ends or Ctrl-C stops it. Frames print as JSON
 * lines with --json, as a redrawn panel on a terminal, else one line each; server text is made terminal-safe.
 */
export async function liveView<F>(
  opts: CommonOptions,
  format: { panel: (f: F) => string; line: (f: F) => string },
  run: (signal: AbortSignal, onFrame: (frame: F) => void) => Promise<unknown>,
): Promise<void> {
  const tty = Boolean(process.stdout.isTTY) && !opts.json;
  // log-update (~60 ms to load) only for the live panel: other commands never pay for it.
  const logUpdate = tty ? (await import("log-update")).default : null;
  // Frames name their source (a URL that may carry a password): redacted like every other output.
  const onFrame = (frame: F) => {
    const f = terminalSafe(frame);
    if (opts.json) process.stdout.write(`${JSON.stringify(redact(frame))}\n`);
    else if (logUpdate) logUpdate(redactString(format.panel(f)));
    else process.stdout.write(`${redactString(format.line(f))}\n`);
  };
  const { signal, dispose } = stopSignal();
  try {
    await run(signal, onFrame);
  } finally {
    dispose();
    logUpdate?.done();
  }
}
