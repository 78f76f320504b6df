// Shared plumbing for the thin CLI commands: --json/--debug, printing, progress on a TTY only.

import type { Command } from "@commander-js/extra-typings";
import { UsageError } from "../errors.ts";

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

/** Prints a result: JSON when asked, otherwise the command's own text rendering. */
export function emit<T>(result: T, opts: CommonOptions, text: (r: T) => string): void {
  if (opts.json) process.stdout.write(`${JSON.stringify(result, jsonReplacer, 2)}\n`);
  else {
    const s = text(result);
    if (s) process.stdout.write(s.endsWith("\n") ? s : `${s}\n`);
  }
}

/** JSON for results that may hold bigint, Map, ±Infinity or NaN. */
export function jsonReplacer(_key: string, value: unknown): unknown {
  if (typeof value === "bigint") return value.toString();
  if (value instanceof Map) return Object.fromEntries(value);
  if (typeof value === "number" && !Number.isFinite(value))
    return Number.isNaN(value) ? "NaN" : value > 0 ? "+Inf" : "-Inf";
  return value;
}

/** Progress goes to stderr, only on a TTY and never with --json. */
export function progressEnabled(opts: CommonOptions): boolean {
  return !opts.json && Boolean(process.stderr.isTTY);
}

/** Parses "10s", "500ms", "2m", or a bare number of seconds, into milliseconds. */
export function parseDurationMs(text: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(text.trim());
  if (!m) throw new Error(`not a duration: "${text}" (examples: 500ms, 10s, 2m)`);
  const n = Number(m[1]);
  const unit = m[2] ?? "s";
  return n * { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[unit]!;
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
      (o.integer === true && !Number.isInteger(n)) ||
      (o.min !== undefined && n < o.min) ||
      (o.max !== undefined && n > o.max) ||
      (o.above !== undefined && n <= o.above);
    if (bad) throw new UsageError(`${name} expects ${o.integer ? "an integer" : "a number"}${range}, got "${v}"`);
    return n;
  };
}
