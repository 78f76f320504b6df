// bench's own sweep (--concurrency LIST) names the binding limit per point, as `inferscope sweep` does: the
// sim's /metrics are scraped through each point's measured window and read by the same diagnosis.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { sweepTable } from "../../src/cli/commands/bench.ts";
import { type SimProcess, spawnSimProcess } from "../../src/load/selftest.ts";
import { runSweep } from "../../src/load/sweep.ts";

let sim: SimProcess;
before(async () => {
  sim = await spawnSimProcess(["--max-num-seqs", "2", "--time-scale", "4"]);
});
after(() => sim?.stop());
const base = () => ({ baseUrl: sim.url, numPrompts: 24, randomInputLen: 16, randomOutputLen: 32, ignoreEos: true });

test("bench --concurrency 1,8 against a server that runs 2 at a time: max-num-seqs at 8 users only, the knee there", async () => {
  const s = await runSweep({ ...base(), warmup: 1 }, { concurrency: [1, 8] }, {}, { serverSampleMs: 50 });
  const [one, eight] = s.points;
  assert.ok(one!.server && one!.server.samples.length >= 2, "no samples at 1 user");
  assert.deepEqual(one!.diagnosis!.binding, [], JSON.stringify(one!.diagnosis));
  assert.deepEqual(
    eight!.diagnosis!.binding.map((b) => b.limit),
    ["max-num-seqs"],
    JSON.stringify(eight!.diagnosis),
  );
  assert.equal(eight!.diagnosis!.server.running!.max, 2);
  assert.equal(s.knee?.level, 8);
  assert.deepEqual(s.knee?.limits, ["max-num-seqs"]);
  assert.deepEqual(
    s.frontier.map((p) => [p.level, p.limit]),
    [
      [1, null],
      [8, "max-num-seqs"],
    ],
  );
  const table = sweepTable(s);
  assert.match(table, /max-num-seqs/);
  assert.match(table, /knee: max-num-seqs: running pinned at 2/);
});

test("without server metrics nothing is sampled and no limit is named", async () => {
  const s = await runSweep({ ...base(), numPrompts: 6, noServerMetrics: true }, { concurrency: [1, 4] });
  assert.ok(s.points.every((p) => p.server === null && p.diagnosis!.binding.length === 0));
  assert.equal(s.knee, null);
});
