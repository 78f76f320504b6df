// npm run bench:corpus — what the serving corpus (src/model/corpus/serving/*.yaml) holds: rows per source, engine, GPU
// and engine × GPU generation, the MoE share, the concurrency and publication ranges, and the rows each source's header
// comment says were left out, by reason. Reads the shipped files only; `--json` prints the same figures as JSON.
import { readFileSync } from "node:fs";
import Table from "cli-table3";
import { requireModel } from "../src/model/architecture.ts";
import type { CorpusRow } from "../src/model/corpus.ts";
import { shippedCorpus } from "../src/model/corpus.ts";
import { requireGpu } from "../src/model/hardware.ts";

const AMD = new Set(["mi300x", "mi325x", "mi355x"]);

function count<T>(xs: T[], key: (x: T) => string): Record<string, number> {
  const m: Record<string, number> = {};
  for (const x of xs) m[key(x)] = (m[key(x)] ?? 0) + 1;
  return Object.fromEntries(Object.entries(m).sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0])));
}

/** "Left out (N …):" in a source file's header comment, then one "#   - <count> <reason>" line per reason. */
function leftOut(file: string): Record<string, number> {
  const reasons: [string, number][] = [];
  let inside = false;
  for (const line of readFileSync(file, "utf8").split("\n")) {
    if (!line.startsWith("#")) break;
    if (/^#\s*Left out/i.test(line)) inside = true;
    else if (inside) {
      const m = /^#\s+- (\d+) (.*)$/.exec(line);
      const more = /^#\s{5,}(\S.*)$/.exec(line);
      if (m) reasons.push([m[2], Number(m[1])]);
      else if (more && reasons.length) reasons[reasons.length - 1][0] += ` ${more[1]}`;
      else inside = false;
    }
  }
  const out: Record<string, number> = {};
  for (const [why, n] of reasons) out[why] = (out[why] ?? 0) + n;
  return out;
}

const c = shippedCorpus();
const rows: CorpusRow[] = c.serving;
const moe = rows.filter((r) => requireModel(r.model).moe).length;
const conc = rows.map((r) => r.workload.concurrency ?? 1);
const pub = rows
  .map((r) => r.published ?? "")
  .filter(Boolean)
  .sort();
const stats = {
  rows: rows.length,
  bySource: count(rows, (r) => r.sourceKey),
  byEngine: count(rows, (r) => r.engine.name),
  byGpu: count(rows, (r) => r.hardware.device),
  byEngineArch: count(rows, (r) => `${r.engine.name} ${requireGpu(r.hardware.device).arch}`),
  amd: rows.filter((r) => AMD.has(r.hardware.device)).length,
  moe,
  moeShare: rows.length ? moe / rows.length : 0,
  byModel: count(rows, (r) => r.model),
  byDefinition: count(rows, (r) => r.measured.definition),
  concurrency: { min: Math.min(...conc), max: Math.max(...conc), atLeast64: conc.filter((x) => x >= 64).length },
  concurrencyBands: count(rows, (r) => {
    const x = r.workload.concurrency ?? 1;
    return x === 1 ? "1" : x <= 8 ? "2–8" : x <= 32 ? "9–32" : x <= 128 ? "33–128" : "> 128";
  }),
  published: { first: pub[0], last: pub[pub.length - 1] },
  leftOut: Object.fromEntries(c.sources.map((s) => [s.key, leftOut(s.file)])),
};

if (process.argv.includes("--json")) {
  console.log(JSON.stringify(stats, null, 2));
} else {
  const pct = (x: number) => `${(100 * x).toFixed(1)} %`;
  console.log(
    `serving corpus: ${stats.rows} rows from ${c.sources.length} sources; MoE ${stats.moe} (${pct(stats.moeShare)}); AMD ${stats.amd}; concurrency ${stats.concurrency.min}–${stats.concurrency.max} (${stats.concurrency.atLeast64} rows at ≥ 64); published ${stats.published.first} … ${stats.published.last}`,
  );
  for (const [title, m] of [
    ["source", stats.bySource],
    ["engine", stats.byEngine],
    ["GPU", stats.byGpu],
    ["engine × GPU generation", stats.byEngineArch],
    ["model", stats.byModel],
    ["concurrency", stats.concurrencyBands],
    ["measured.definition", stats.byDefinition],
  ] as const) {
    const t = new Table({ head: [title, "rows"], style: { head: [], border: [] } });
    for (const [k, v] of Object.entries(m)) t.push([k, v]);
    console.log(t.toString());
  }
  for (const [key, reasons] of Object.entries(stats.leftOut)) {
    const total = Object.values(reasons).reduce((a, b) => a + b, 0);
    console.log(`left out of ${key}: ${total}`);
    for (const [why, n] of Object.entries(reasons)) console.log(`  ${String(n).padStart(4)}  ${why}`);
  }
}
