import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { test } from "node:test";
import { npMean, npMedian, npPercentile, npStd } from "../../src/load/npstats.ts";
import { Rng } from "../../src/load/schedule.ts";

test("hand-computed values", () => {
  assert.equal(npMean([]), 0);
  assert.equal(npPercentile([], 99), 0);
  assert.equal(npMedian([3, 1, 2]), 2);
  assert.equal(npMedian([4, 1, 2, 3]), 2.5);
  assert.equal(npPercentile([1, 2, 3, 4], 50), 2.5);
  // rank 0.9·3 = 2.7 → 3 + 0.7·(4 − 3), computed from the upper side as numpy does.
  assert.equal(npPercentile([4, 3, 2, 1], 90), 4 - (4 - 3) * (1 - 0.9 * 3 + 2));
  assert.equal(npStd([2, 4, 4, 4, 5, 5, 7, 9]), 2);
});

const python = "/usr/bin/python3";
const hasNumpy = existsSync(python) && spawnSync(python, ["-c", "import numpy"]).status === 0;

test("digit-exact against numpy (mean, median, std, percentiles) on awkward arrays", (t) => {
  if (!hasNumpy) {
    if (process.env.INFERSCOPE_REQUIRE_E2E)
      assert.fail("python3 with numpy is required (INFERSCOPE_REQUIRE_E2E is set)");
    t.skip("SKIPPED: /usr/bin/python3 with numpy not found");
    return;
  }
  const rng = new Rng(7);
  const arrays: number[][] = [];
  for (const n of [1, 2, 7, 8, 9, 15, 16, 17, 127, 128, 129, 300, 1000, 4099]) {
    arrays.push(Array.from({ length: n }, () => rng.next() * 10 ** rng.int(-3, 3)));
  }
  const ps = [1, 25, 50, 90, 95, 99, 99.9];
  const script =
    "import json,sys,numpy as np\n" +
    "d=json.load(sys.stdin)\n" +
    "out=[]\n" +
    "for a in d['arrays']:\n" +
    "  x=np.array(a,dtype=np.float64)\n" +
    "  out.append([float(np.mean(x)),float(np.median(x)),float(np.std(x))]+[float(np.percentile(x,p)) for p in d['ps']])\n" +
    "print(json.dumps([[repr(v) for v in r] for r in out]))\n";
  const r = spawnSync(python, ["-c", script], { input: JSON.stringify({ arrays, ps }), encoding: "utf8" });
  assert.equal(r.status, 0, r.stderr);
  const want: string[][] = JSON.parse(r.stdout);
  arrays.forEach((a, i) => {
    const got = [npMean(a), npMedian(a), npStd(a), ...ps.map((p) => npPercentile(a, p))];
    got.forEach((g, j) => {
      assert.equal(g, Number(want[i]![j]), `array ${i} (n=${a.length}) stat ${j}`);
    });
  });
});
