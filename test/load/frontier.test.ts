// The throughput–interactivity frontier (pure): per-GPU and per-user rates, and the Pareto set.
import assert from "node:assert/strict";
import { test } from "node:test";
import { frontierPoints, overlayFrontiers, paretoIndexes } from "../../src/load/frontier.ts";

test("Pareto set: points no other point beats on both axes; exact ties both kept", () => {
  const xy = [
    { x: 10, y: 1 },
    { x: 8, y: 3 },
    { x: 7, y: 2 }, // beaten by (8, 3)
    { x: 2, y: 9 },
    { x: 2, y: 9 }, // a tie: both stay
    { x: 1, y: 9 }, // beaten by (2, 9) on x alone
  ];
  assert.deepEqual([...paretoIndexes(xy)].sort(), [0, 1, 3, 4]);
  assert.deepEqual([...paretoIndexes([])], []);
});

test("frontier points: tok/s/GPU = output tok/s ÷ GPUs, tok/s/user = 1000 ÷ TPOT p50; no TPOT, no point", () => {
  const pts = frontierPoints(
    [
      { level: 1, outputThroughput: 100, tpotP50Ms: 10, limit: null },
      { level: 4, outputThroughput: 360, tpotP50Ms: 12.5, limit: null },
      { level: 8, outputThroughput: 400, tpotP50Ms: 25, limit: "max-num-seqs" },
      { level: 16, outputThroughput: 380, tpotP50Ms: 40, limit: "max-num-seqs" },
      { level: 32, outputThroughput: 300, tpotP50Ms: Number.NaN, limit: null },
    ],
    4,
  );
  assert.deepEqual(
    pts.map((p) => [p.level, p.tokPerSecPerGpu, p.tokPerSecPerUser, p.pareto]),
    [
      [1, 25, 100, true],
      [4, 90, 80, true],
      [8, 100, 40, true],
      [16, 95, 25, false],
    ],
  );
  assert.throws(() => frontierPoints([], 0), /gpus must be > 0/);
});

test("overlaid runs: each point tagged with its run, the Pareto set over all of them", () => {
  const a = frontierPoints(
    [
      { level: 1, outputThroughput: 100, tpotP50Ms: 10, limit: null },
      { level: 8, outputThroughput: 400, tpotP50Ms: 25, limit: "max-num-seqs" },
    ],
    1,
  );
  const b = frontierPoints([{ level: 8, outputThroughput: 500, tpotP50Ms: 20, limit: null }], 1);
  const all = overlayFrontiers([
    { run: "A", points: a },
    { run: "B", points: b },
  ]);
  // B's point beats A's level 8 on both axes; A's level 1 stays (the most per user).
  assert.deepEqual(
    all.map((p) => [p.run, p.level, p.pareto]),
    [
      ["A", 1, true],
      ["A", 8, false],
      ["B", 8, true],
    ],
  );
  assert.equal(a[1]!.pareto, true, "the runs' own points are left as they were");
});
