// `inferscope runs …` on a store filled through the library: list, show, export, compare.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { UsageError } from "../../src/errors.ts";
import { compareRuns, listRunsView, openStore } from "../../src/store/index.ts";

const dir = mkdtempSync(join(tmpdir(), "inferscope-runs-"));
after(() => rmSync(dir, { recursive: true, force: true }));
const db = join(dir, "runs.db");

function fill(): { a: string; b: string } {
  const s = openStore(db);
  const ids: string[] = [];
  for (const [kind, tpot] of [
    ["ab", 20.9],
    ["sweep-lengths", 17.2],
  ] as const) {
    const run = s.saveRun({ kind, config: { variants: [{ name: "base" }, { name: "ll" }], outLens: [16, 32] } });
    const blk = s.addBlock(run.id, { index: 0, variant: "base" });
    s.addRequests(
      run.id,
      blk,
      Array.from({ length: 10 }, (_, i) => ({
        index: i,
        ok: true,
        ttftMs: 52 + (i % 3),
        e2elMs: 52 + 127 * (tpot + (i % 5) * 0.05),
        tpotMs: tpot + (i % 5) * 0.05,
        outputTokens: 128,
        promptTokens: 16,
      })),
    );
    s.updateBlock(blk, { status: "complete", summary: { requests: 10, meanTpotMs: tpot + 0.1 } });
    s.finishRun(run.id);
    ids.push(run.id);
  }
  s.close();
  return { a: ids[0], b: ids[1] };
}

test("runs compare (library): TPOT difference with CI; runs list view", () => {
  const { a, b } = fill();
  const s = openStore(db);
  const c = compareRuns(s, a, b);
  assert.ok(c.metrics.tpot_ms);
  assert.ok(Math.abs(c.metrics.tpot_ms.diff.estimate - 3.7) < 1e-9);
  assert.ok(c.metrics.tpot_ms.detected);
  assert.equal(c.metrics.ttft_ms?.detected, false);
  // Two arms of one run: a − b on the same blocks is exactly zero.
  const same = compareRuns(s, a, a, { variantA: "base", variantB: "base" });
  assert.equal(same.metrics.tpot_ms?.diff.estimate, 0);
  assert.throws(() => compareRuns(s, a, b, { variantA: "nope" }), /no complete blocks of variant "nope"/);
  assert.throws(
    () => compareRuns(s, "no-such-run", b),
    (e: Error) => e instanceof UsageError && /no run "no-such-run"/.test(e.message),
  );
  const rows = listRunsView(s);
  assert.equal(rows.length, 2);
  assert.deepEqual(rows.map((r) => r.label).sort(), ["base vs ll", "out 16,32"]);
  s.close();
});

test("runs list --json and runs export --format csv from the CLI", () => {
  const cli = (args: string[]) =>
    spawnSync(process.execPath, ["bin/inferscope.mjs", "runs", ...args, "--db", db], { encoding: "utf8" });
  const list = cli(["list", "--json"]);
  assert.equal(list.status, 0, list.stderr);
  const rows = JSON.parse(list.stdout) as Array<{ id: string; kind: string; requests: number }>;
  assert.ok(rows.length >= 2);
  const ab = rows.find((r) => r.kind === "ab")!;
  assert.equal(ab.requests, 10);
  const csv = cli(["export", ab.id, "--format", "csv"]);
  assert.equal(csv.status, 0, csv.stderr);
  const lines = csv.stdout.trim().split("\n");
  assert.equal(lines.length, 11);
  assert.match(lines[1], new RegExp(`^${ab.id},0,base,0,1,52,`));
});
