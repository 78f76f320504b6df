// Two runs for the export and push tests: a bench run (7 completed requests, TTFT 10…70 ms, and one
// failed; 2e9 prompt tokens each, so the totals need 64 bits) and an A/B run with two blocks of 4.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after } from "node:test";
import { openStore } from "../../src/store/index.ts";

/** A temporary folder (removed after the file's tests) with a store holding the two runs. */
export function exportRunsFixture(prefix: string): { dir: string; db: string; ids: { bench: string; ab: string } } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const db = join(dir, "runs.db");
  return { dir, db, ids: fillExportRuns(db) };
}

const TTFT = [10, 20, 30, 40, 50, 60, 70];

export function fillExportRuns(db: string): { bench: string; ab: string } {
  const s = openStore(db);
  const bench = s.saveRun({ kind: "bench", config: { baseUrl: "http://127.0.0.1:1" } }).id;
  s.addRequests(bench, null, [
    ...TTFT.map((t, i) => ({
      index: i,
      ok: true,
      ttftMs: t,
      e2elMs: t + 1000 + i / 3, // not a short binary fraction: a float that must survive as written
      tpotMs: 7.25 + i * 0.1,
      outputTokens: 100 + i,
      promptTokens: 2_000_000_000, // the totals need 64 bits
    })),
    {
      index: 7,
      ok: false,
      ttftMs: null,
      e2elMs: 5.5,
      tpotMs: null,
      outputTokens: 0,
      promptTokens: 12,
      error: 'http: 500 "overloaded", retry\nlater — ünïcode',
    },
  ]);
  s.setSummary(bench, "bench", { setup: { model_id: "meta/llama-3-8b", backend: "vllm" } });
  s.finishRun(bench);
  const ab = s.saveRun({ kind: "ab", config: { model: "m2", variants: [{ name: "base" }, { name: "ll" }] } }).id;
  for (const [index, variant] of [
    [0, "base"],
    [1, "ll"],
  ] as const) {
    const blk = s.addBlock(ab, { index, variant });
    s.addRequests(
      ab,
      blk,
      Array.from({ length: 4 }, (_, i) => ({
        index: i,
        ok: true,
        ttftMs: 50 + index * 10 + i,
        e2elMs: 900 + i,
        tpotMs: 20 - index,
        outputTokens: 32,
        promptTokens: 16,
      })),
    );
    s.updateBlock(blk, { status: "complete" });
  }
  s.finishRun(ab);
  s.close();
  return { bench, ab };
}
