// A budget spent before two candidates were measured chooses nothing (issue 34: `tune --budget 1ms`
// called the baseline "best" at P(best) 0.5 %). Real sim servers on loopback, a real store.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { InterruptedError } from "../../src/errors.ts";
import { renderTune } from "../../src/tune/render.ts";
import { runTune } from "../../src/tune/run.ts";
import { simStarter } from "../helpers/tune-sim.ts";

const dir = mkdtempSync(join(tmpdir(), "inferscope-tune-budget-"));
after(() => rmSync(dir, { recursive: true, force: true }));

test("tune with a budget spent on the baseline's first block names no best and says the budget is too small", async () => {
  const r = await runTune(
    {
      knobs: ["NCCL_PROTO=,LL,Simple"],
      timeScale: 20,
      workload: { numPrompts: 2, randomInputLen: 16, randomOutputLen: 16, warmup: 0 },
      seed: 1,
      db: join(dir, "runs.db"),
      budget: { timeMs: 1 },
    },
    { startServer: simStarter({ overrides: {}, acceptance: 0.5 }, 20, 0) },
  );
  assert.equal(r.restarts, 1, "one block, then the budget is over");
  assert.equal(r.best, null);
  assert.equal(r.stop.reason, "budget");
  assert.match(
    r.stop.message,
    /only one candidate was measured, so none is chosen \(the budget is too small to choose/,
  );
  // Over, yet nothing chosen: not "complete" (issue 42; the CLI exits 2 on it, test/hardening/low-findings).
  assert.equal(r.status, "inconclusive");
  const text = renderTune(r);
  assert.match(text, /^tune run tune-\S+ \(inconclusive\)/);
  assert.doesNotMatch(text, /\(complete\)/);
  assert.doesNotMatch(text, /^Best:/m);
  assert.doesNotMatch(text, /run it:/);
  // The baseline's measurement is still reported.
  assert.ok(r.baseline.measured);
});

test("an interrupted tune counts its one saved block in the singular (was: '1 blocks are saved')", async () => {
  const ac = new AbortController();
  await assert.rejects(
    runTune(
      {
        knobs: ["NCCL_PROTO=,LL"],
        timeScale: 20,
        workload: { numPrompts: 2, randomInputLen: 16, randomOutputLen: 16, warmup: 0 },
        seed: 1,
        db: join(dir, "interrupted.db"),
        signal: ac.signal,
        onProgress: (e) => {
          if (e.phase === "block-done") ac.abort(new InterruptedError("interrupted (SIGINT)"));
        },
      },
      { startServer: simStarter({ overrides: {}, acceptance: 0.5 }, 20, 0) },
    ),
    (e: unknown) =>
      e instanceof InterruptedError &&
      /; 1 block is saved in run tune-\S+ /.test(e.message) &&
      !/blocks are/.test(e.message),
  );
});
