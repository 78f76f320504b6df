// tune on the simulator with hidden parameters drawn at random: the acceptance rate, the protocol
// costs, NCCL's default protocol and the eager penalty decide which of 12 candidates is best. The
// chosen candidate is scored against the sim's own truth for every candidate.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { Rng } from "../../src/sim/rng.ts";
import { openStore } from "../../src/store/index.ts";
import { runTune } from "../../src/tune/run.ts";
import { type Hidden, simStarter, trueTpotMs } from "../helpers/tune-sim.ts";

const dir = mkdtempSync(join(tmpdir(), "inferscope-tune-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const KNOBS = ["NCCL_PROTO=,LL,Simple", "--spec-tokens=0,2", "--enforce-eager"];
const TIME_SCALE = 20;
const WORKLOAD = { numPrompts: 4, randomInputLen: 32, randomOutputLen: 48, warmup: 1 };
const CTX = 32 + 24;

function draw(rng: Rng): Hidden {
  const u = (a: number, b: number) => a + (b - a) * rng.next();
  return {
    acceptance: u(0.15, 0.9),
    overrides: {
      "collectives.perCallUs.LL": u(30, 100),
      "collectives.perCallUs.Simple": u(30, 100),
      "collectives.defaultProtocol": rng.next() < 0.5 ? "LL" : "Simple",
      "collectives.eagerCallUs": u(5, 40),
      "cost.launchUs.eager": u(4, 30),
      "cost.draftUsPerToken": u(300, 3000),
    },
  };
}

test("tune picks a candidate within 2 % of the true best in ≥ 90 % of draws, with ≤ half a grid's server starts", async (t) => {
  const rng = new Rng(20261203);
  const draws = 10;
  let within = 0;
  let starts = 0;
  let grid = 0;
  const store = openStore(join(dir, "tune.db"));
  try {
    for (let d = 0; d < draws; d++) {
      const hidden = draw(rng);
      const r = await runTune(
        { knobs: KNOBS, timeScale: TIME_SCALE, workload: WORKLOAD, seed: d, db: store, budget: { starts: 24 } },
        { startServer: simStarter(hidden, TIME_SCALE, d * 100) },
      );
      assert.equal(r.candidates.length, 12);
      assert.ok(r.best, "a best candidate");
      // The sim's truth for every candidate, from the run's own candidate list (env/args).
      const stored = store.getRun(r.runId).run.config as {
        candidates: Array<{ env: Record<string, string>; args: string[] }>;
      };
      const tpot = stored.candidates.map((c) => trueTpotMs(hidden, c.args, c.env, CTX));
      const bestTrue = Math.min(...tpot);
      const chosen = tpot[Number(r.best.id.slice(1))]!;
      const gap = chosen / bestTrue - 1;
      if (gap <= 0.02) within++;
      starts += r.restarts;
      grid += r.gridStarts;
      t.diagnostic(
        `draw ${d}: acceptance ${hidden.acceptance.toFixed(2)}, best ${r.best.id} (${r.best.name}) ${gap >= 0 ? "+" : ""}${(gap * 100).toFixed(1)} % from the true best (${tpot.indexOf(bestTrue) >= 0 ? `c${tpot.indexOf(bestTrue)}` : "?"}); ${r.restarts} starts vs grid ${r.gridStarts}; stop: ${r.stop.reason}`,
      );
    }
  } finally {
    store.close();
  }
  t.diagnostic(
    `${within}/${draws} within 2 %; ${starts} server starts vs ${grid} for full grids at the same precision`,
  );
  assert.ok(within >= Math.ceil(0.9 * draws), `${within}/${draws} draws within 2 % of the true best`);
  assert.ok(starts <= 0.5 * grid, `${starts} starts vs ${grid} for the grid`);
});
