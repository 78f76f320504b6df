// The A/B analysis over a store filled by hand (no servers): verdicts, block-level check, attribution.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { analyseRun, resolveABConfig } from "../../src/experiment/ab.ts";
import { renderAB } from "../../src/experiment/render.ts";
import { openStore } from "../../src/store/index.ts";

const dir = mkdtempSync(join(tmpdir(), "inferscope-analysis-"));
after(() => rmSync(dir, { recursive: true, force: true }));

function fill(blockTpot: Record<string, number[]>, jitter: number, opsPerToken?: number) {
  const store = openStore(join(dir, `${Math.random().toString(36).slice(2)}.db`));
  const config = resolveABConfig({
    serverCmd: "serve --port {port}",
    variants: ["base:", "ll:NCCL_PROTO=LL"],
    repeats: 2,
    opsPerToken,
    workload: { numPrompts: 10, randomOutputLen: 128 },
    resamples: 500,
  });
  const runId = store.saveRun({ kind: "ab", config: config as unknown as Record<string, unknown> }).id;
  const seen: Record<string, number> = {};
  for (const p of config.design) {
    const k = (seen[p.variant] = (seen[p.variant] ?? -1) + 1);
    const tpot = blockTpot[p.variant][k];
    const id = store.addBlock(runId, { index: p.index, variant: p.variant });
    store.addRequests(
      runId,
      id,
      Array.from({ length: 10 }, (_, i) => {
        const t = tpot + jitter * (((i * 7) % 10) / 10 - 0.45);
        return {
          index: i,
          ok: true,
          ttftMs: 52,
          e2elMs: 52 + 127 * t,
          tpotMs: t,
          outputTokens: 128,
          promptTokens: 32,
        };
      }),
    );
    store.updateBlock(id, { status: "complete", summary: { requests: 10, meanTpotMs: tpot, outputThroughput: 1 } });
  }
  store.finishRun(runId);
  return { store, runId, config };
}

test("a clear effect: verdict with CI, attribution per all-reduce, block-level Welch agrees", () => {
  const { store, runId, config } = fill({ base: [20.9, 20.95], ll: [17.1, 17.15] }, 0.4, 156);
  const r = analyseRun(store, runId, config);
  store.close();
  const d = r.diffs.find((x) => x.metric === "tpot_ms")!;
  assert.ok(Math.abs(d.comparison.diff.estimate - 3.8) < 1e-9);
  assert.match(r.verdicts[0], /^ll is faster by 3\.80 ms\/token \[3\.\d+, 3\.\d+\] than base/);
  assert.ok(d.blockLevel && d.blockLevel.p < 0.05);
  assert.deepEqual(r.warnings, []);
  assert.equal(r.attribution[0].perOpUs.estimate.toFixed(1), "24.4");
  assert.ok(r.attribution[0].perOpUs.lo < 24.4 && r.attribution[0].perOpUs.hi > 24.4);
  const text = renderAB(r);
  assert.match(text, /≈ 24\.4 µs per all-reduce/);
  assert.match(text, /ll: NCCL_PROTO=LL: 2 blocks, 20 requests/);
});

test("no effect: 'no detectable difference' with the detectable effect size", () => {
  const { store, runId, config } = fill({ base: [20.9, 20.9], ll: [20.9, 20.9] }, 0.4);
  const r = analyseRun(store, runId, config);
  store.close();
  assert.match(
    r.verdicts[0],
    /^no detectable difference in per-token decode time between ll and base at this sample size .*detectable effect ≈ 0\.\d+ ms\/token$/,
  );
  assert.equal(r.attribution.length, 0);
});

test("per-request CI says 'detected' but server starts disagree: a warning asks for more repeats", () => {
  const { store, runId, config } = fill({ base: [20.0, 22.0], ll: [19.2, 21.3] }, 0.05);
  const r = analyseRun(store, runId, config);
  store.close();
  const d = r.diffs.find((x) => x.metric === "tpot_ms")!;
  assert.ok(d.comparison.detected);
  assert.ok(d.blockLevel && d.blockLevel.p > 0.05);
  assert.match(r.warnings.join("\n"), /restart-to-restart spread is large .* add --repeats/);
});
