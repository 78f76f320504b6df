// Upstream conformance data, read from ../shared at run time (never copied into the repo).
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { ParseError } from "../../src/errors.ts";
import { parseBytes, parseExposition } from "../../src/metrics/parse.ts";
import type { Exposition } from "../../src/metrics/types.ts";

const shared = fileURLToPath(new URL("../../../shared/conformance/", import.meta.url));
const omDir = join(shared, "openmetrics", "parsers");
const tpDir = join(shared, "prometheus-textparse");
const missing = existsSync(shared) ? undefined : `conformance data not found at ${shared}`;

function sampleCount(e: Exposition): number {
  return e.families.reduce((n, f) => n + f.samples.length, 0);
}

test("OpenMetrics conformance: every case gets its verdict in strict mode", { skip: missing }, () => {
  const cases = readdirSync(omDir).sort();
  assert.equal(cases.length, 211);
  let right = 0;
  const wrong: string[] = [];
  for (const name of cases) {
    const spec = JSON.parse(readFileSync(join(omDir, name, "test.json"), "utf8")) as {
      file: string;
      shouldParse: boolean;
    };
    const bytes = readFileSync(join(omDir, name, spec.file));
    let parsed = true;
    let why = "";
    try {
      parseBytes(bytes, { format: "openmetrics-1.0", strict: true, file: name });
    } catch (err) {
      // Only a ParseError is a verdict; anything else is a crash.
      assert.ok(err instanceof ParseError, `${name}: threw ${String(err)}`);
      assert.match(err.message, /^[^:]+:\d+:\d+: /, `${name}: error without line:column`);
      parsed = false;
      why = err.message;
    }
    if (parsed === spec.shouldParse) right++;
    else wrong.push(`${name}: expected ${spec.shouldParse ? "accept" : "reject"}, got ${parsed ? "accept" : why}`);
  }
  console.log(`OpenMetrics conformance: ${right}/${cases.length} verdicts right`);
  assert.deepEqual(wrong, []);
  assert.equal(right, 211);
});

test("OpenMetrics conformance: lenient mode accepts every valid case and never crashes on the invalid ones", {
  skip: missing,
}, () => {
  let accepted = 0;
  for (const name of readdirSync(omDir)) {
    const bytes = readFileSync(join(omDir, name, "metrics"));
    for (const format of ["openmetrics-1.0", "prometheus-0.0.4"] as const) {
      try {
        parseBytes(bytes, { format });
        if (!name.startsWith("bad_") && format === "openmetrics-1.0") accepted++;
      } catch (err) {
        assert.ok(err instanceof ParseError, `${name} (${format}): threw ${String(err)}`);
        assert.ok(
          name.startsWith("bad_") || format === "prometheus-0.0.4",
          `${name}: valid case rejected in lenient mode: ${err.message}`,
        );
      }
    }
  }
  assert.equal(accepted, 44);
});

test("Prometheus textparse inputs all parse (lenient), with the documented family and sample counts", {
  skip: missing,
}, () => {
  const expected: Record<
    string,
    { families: number; samples: number; format: "prometheus-0.0.4" | "openmetrics-1.0" }
  > = {
    "alltypes.237mfs.prom.txt": { families: 237, samples: 1857, format: "prometheus-0.0.4" },
    "alltypes.237mfs.nometa.prom.txt": { families: 237, samples: 1857, format: "prometheus-0.0.4" },
    "alltypes.5mfs.om.txt": { families: 5, samples: 53, format: "openmetrics-1.0" },
    "1histogram.om.txt": { families: 1, samples: 42, format: "openmetrics-1.0" },
  };
  const files = readdirSync(tpDir).filter((f) => f.endsWith(".txt"));
  assert.deepEqual(files.sort(), Object.keys(expected).sort());
  for (const f of files) {
    const text = readFileSync(join(tpDir, f), "utf8");
    const want = expected[f];
    // Format from the file name here; sniffing alone would call the .prom.txt files OpenMetrics (they end in # EOF).
    const e = parseExposition(text, { format: want.format, file: f });
    assert.equal(e.format, want.format);
    assert.equal(sampleCount(e), want.samples, `${f} samples`);
    assert.equal(e.families.length, want.families, `${f} families`);
    assert.deepEqual(e.warnings, [], `${f} warnings`);
  }
  // The OpenMetrics ones are also valid in strict mode except for negative buckets with _sum (5mfs).
  const one = parseExposition(readFileSync(join(tpDir, "1histogram.om.txt"), "utf8"), { strict: true });
  assert.equal(one.format, "openmetrics-1.0");
  assert.equal(one.families[0].type, "histogram");
});
