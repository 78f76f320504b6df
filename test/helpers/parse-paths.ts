// Runs the metrics parser with its fast paths on or off and compares: what the parse-fastpath and
// parse-differential tests check (families, warnings, or the error with its line:column).
import assert from "node:assert/strict";
import { parseExposition, setParserFastPaths } from "../../src/metrics/parse.ts";
import type { ExpositionFormat } from "../../src/metrics/types.ts";

/** The exposition, or the error's name and message, with the fast paths on (fast) or off. */
export function outcome(text: string, format: ExpositionFormat, strict: boolean, fast: boolean): unknown {
  setParserFastPaths(fast);
  try {
    return parseExposition(text, { format, strict, file: "x.prom" });
  } catch (err) {
    return `${(err as Error).name}: ${(err as Error).message}`;
  } finally {
    setParserFastPaths(true);
  }
}

/** Both formats, both modes: the same outcome either way (deepStrictEqual tells NaN, -0 and 0 apart). */
export function agree(text: string, what = text): void {
  for (const format of ["prometheus-0.0.4", "openmetrics-1.0"] as const) {
    for (const strict of [false, true]) {
      assert.deepStrictEqual(
        outcome(text, format, strict, true),
        outcome(text, format, strict, false),
        `${what} (${format}, ${strict ? "strict" : "lenient"})`,
      );
    }
  }
}
