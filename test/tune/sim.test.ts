// tune on the simulator with hidden parameters drawn at random: the acceptance rate, the protocol costs,
// NCCL's default protocol and the eager penalty decide which of 12 candidates is best, and the chosen one
// is scored against the sim's own truth. Here one draw whose best is clear (the runner-up 22 % slower, the
// baseline 2.3×): a tune that measures, compares or restarts wrongly misses it, on a budget of one start per
// candidate. How often tune lands within 2 % over ten draws, and its server starts against a grid's, is a
// statistical check: `npm run bench:tune`.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { Rng } from "../../src/sim/rng.ts";
import { openStore } from "../../src/store/index.ts";
import { drawHidden, TUNE_DRAW_SEED, tuneOnDraw } from "../helpers/tune-sim.ts";

const dir = mkdtempSync(join(tmpdir(), "inferscope-tune-"));
after(() => rmSync(dir, { recursive: true, force: true }));

test("tune finds the clear best of 12 candidates (draw 4) within 12 server starts", async (t) => {
  const rng = new Rng(TUNE_DRAW_SEED);
  const D = 4;
  for (let d = 0; d < D; d++) drawHidden(rng);
  const hidden = drawHidden(rng);
  const store = openStore(join(dir, "tune.db"));
  try {
    const s = await tuneOnDraw(hidden, D, store, 12);
    t.diagnostic(
      `draw ${D}: best ${s.chosen} (${s.chosenName}), true best ${s.trueBest}, ${(s.gap * 100).toFixed(1)} % off; ${s.restarts} starts vs grid ${s.gridStarts}; stop: ${s.stop}`,
    );
    assert.equal(s.candidates, 12);
    assert.equal(s.chosen, s.trueBest, `chose ${s.chosen}, ${(s.gap * 100).toFixed(1)} % slower than ${s.trueBest}`);
    assert.ok(s.restarts <= 12, `${s.restarts} starts`);
  } finally {
    store.close();
  }
});
