import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import type { ValidationRow } from "../../src/model/validate.ts";
import { validateRows } from "../../src/model/validate.ts";

const rows: ValidationRow[] = JSON.parse(
  readFileSync(new URL("./fixtures/validation-public.json", import.meta.url), "utf8"),
).rows;

test("validation-public.md rows predicted from catalog inputs alone: median |error| ≤ 20 %, each inside its range", () => {
  const v = validateRows(rows);
  assert.equal(v.results.length, 17);
  assert.ok(v.medianAbsError <= 0.2, `median ${v.medianAbsError}`);
  for (const r of v.results)
    assert.ok(
      r.inside,
      `${r.id}: measured ${r.measuredMs.toFixed(2)} ms outside ${r.predictedMs.low.toFixed(2)}–${r.predictedMs.high.toFixed(2)}`,
    );
});

test("validation trends: TP scaling, CUDA graphs and latency-bound V6", () => {
  const v = validateRows(rows);
  const ms = (id: string) => v.results.find((r) => r.id === id)!.predictedMs.mid;
  // V2: TP speeds up less than linearly (per-collective + fixed costs).
  assert.ok(ms("V2-TP2") < ms("V2-TP1") && ms("V2-TP8") < ms("V2-TP4"));
  assert.ok(ms("V2-TP1") / ms("V2-TP8") < 4);
  // V4: graphs save on the order of the measured 0.87 ms per token.
  const saved = ms("V4-eager") - ms("V4-graphs");
  assert.ok(saved > 0.4 && saved < 1.6, String(saved));
  // V6: dominated by fixed + collective terms, not bandwidth.
  assert.match(v.results.find((r) => r.id === "V6")!.dominant, /^kernels/);
});
