import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import {
  type Bucket,
  bucketContaining,
  bucketQuantileDetail,
  histogramMean,
  histogramQuantile,
  histogramSeries,
  summarySeries,
} from "../../src/metrics/histogram.ts";
import { parseExposition } from "../../src/metrics/parse.ts";

const B = (pairs: Array<[number, number]>): Bucket[] => pairs.map(([le, count]) => ({ le, count }));

test("check values of engine-metrics.md §10", () => {
  const h = B([
    [0.3, 1],
    [0.5, 3],
    [Infinity, 4],
  ]);
  assert.equal(histogramQuantile(0.5, h), 0.4);
  assert.ok(Math.abs(histogramQuantile(0.1, h) - 0.12) < 1e-15);
  assert.equal(histogramQuantile(0.99, h), 0.5); // capped at the largest finite bound
  assert.equal(bucketQuantileDetail(0.99, h).capped, true);
  // First bucket empty, q = 0: rank 0 is found in bucket 0 with count 0 → 0/0.
  assert.ok(
    Number.isNaN(
      histogramQuantile(
        0,
        B([
          [1, 0],
          [2, 5],
          [Infinity, 5],
        ]),
      ),
    ),
  );
  // First bucket non-empty, positive bound, q = 0 → 0.
  assert.equal(
    histogramQuantile(
      0,
      B([
        [1, 3],
        [2, 5],
        [Infinity, 5],
      ]),
    ),
    0,
  );
  // All N observations in (0.01, 0.025]: p50 is the midpoint whatever the true values.
  const itl = B([
    [0.01, 0],
    [0.025, 1000],
    [0.05, 1000],
    [Infinity, 1000],
  ]);
  assert.equal(histogramQuantile(0.5, itl), 0.0175);
});

test("edge cases of Prometheus' bucketQuantile", () => {
  const h = B([
    [1, 1],
    [Infinity, 2],
  ]);
  assert.ok(Number.isNaN(histogramQuantile(Number.NaN, h)));
  assert.equal(histogramQuantile(-0.1, h), -Infinity);
  assert.equal(histogramQuantile(1.1, h), Infinity);
  // q<0 and q>1 win even over empty or invalid buckets.
  assert.equal(histogramQuantile(-1, []), -Infinity);
  assert.equal(histogramQuantile(2, []), Infinity);
  assert.ok(Number.isNaN(histogramQuantile(0.5, [])));
  // No +Inf bucket.
  assert.ok(
    Number.isNaN(
      histogramQuantile(
        0.5,
        B([
          [1, 1],
          [2, 2],
        ]),
      ),
    ),
  );
  // Fewer than 2 buckets.
  assert.ok(Number.isNaN(histogramQuantile(0.5, B([[Infinity, 10]]))));
  // Zero observations.
  assert.ok(
    Number.isNaN(
      histogramQuantile(
        0.5,
        B([
          [1, 0],
          [Infinity, 0],
        ]),
      ),
    ),
  );
  // Unsorted input, and equal bounds merged by adding (le="1" and le="1.0" both given).
  // Merged: le=1 holds 4 of 8, so the median is its upper bound (unmerged it would be 1.33…).
  assert.equal(
    histogramQuantile(
      0.5,
      B([
        [Infinity, 8],
        [2, 8],
        [1, 2],
        [1, 2],
      ]),
    ),
    1,
  );
  // Lowest bucket with bound ≤ 0 returns that bound.
  assert.equal(
    histogramQuantile(
      0.1,
      B([
        [-1, 5],
        [0, 6],
        [Infinity, 10],
      ]),
    ),
    -1,
  );
  assert.equal(
    histogramQuantile(
      0.1,
      B([
        [0, 5],
        [1, 6],
        [Infinity, 10],
      ]),
    ),
    0,
  );
  // Negative bounds interpolate between neighbours.
  assert.equal(
    histogramQuantile(
      0.75,
      B([
        [-2, 0],
        [-1, 10],
        [Infinity, 20],
      ]),
    ),
    -1,
  );
  assert.equal(
    histogramQuantile(
      0.25,
      B([
        [-2, 0],
        [-1, 10],
        [Infinity, 20],
      ]),
    ),
    -1.5,
  );
  // The +Inf bucket returns the second-highest bound.
  assert.equal(
    histogramQuantile(
      1,
      B([
        [1, 1],
        [5, 2],
        [Infinity, 3],
      ]),
    ),
    5,
  );
  // Does not modify its input.
  const input = B([
    [2, 1],
    [1, 3],
    [Infinity, 3],
  ]);
  const copy = structuredClone(input);
  histogramQuantile(0.5, input);
  assert.deepEqual(input, copy);
});

test("monotonicity fix-ups: forced monotonicity and the 1e-12 relative tolerance", () => {
  // Counts that dip are raised to the previous one (after rate() on racy scrapes).
  const dip = bucketQuantileDetail(
    0.5,
    B([
      [1, 5],
      [2, 3],
      [3, 8],
      [Infinity, 10],
    ]),
  );
  assert.equal(dip.forcedMonotonic, true);
  assert.equal(dip.fixedPrecision, false);
  assert.equal(dip.value, 1); // rank 5 reached in bucket 0 (count 5)
  // Float noise in either direction is absorbed silently, measured against the last kept count.
  const noisy = B([
    [1, 10],
    [2, 10 * (1 + 4e-13)],
    [4, 10 * (1 - 4e-13)],
    [Infinity, 20],
  ]);
  const d = bucketQuantileDetail(0.5, noisy);
  assert.equal(d.fixedPrecision, true);
  assert.equal(d.forcedMonotonic, false);
  assert.equal(d.value, 1);
  // Just above the tolerance is a real difference (and a real dip is forced).
  const real = bucketQuantileDetail(
    0.5,
    B([
      [1, 10],
      [2, 10 * (1 - 1e-9)],
      [Infinity, 20],
    ]),
  );
  assert.equal(real.forcedMonotonic, true);
  assert.equal(real.fixedPrecision, false);
  // Flags are cleared on the early NaN exits, as in Prometheus.
  const empty = bucketQuantileDetail(
    0.5,
    B([
      [1, 0],
      [2, -1],
      [Infinity, 0],
    ]),
  );
  assert.ok(Number.isNaN(empty.value));
  assert.equal(empty.forcedMonotonic, false);
});

test("histogramSeries: grouping per label set, _sum first, le not first, le spellings compared as numbers", () => {
  const text = [
    "# TYPE lat histogram",
    'lat_sum{model="m",engine="0"} 3.5',
    'lat_bucket{engine="0",le="1.0",model="m"} 2',
    'lat_bucket{le="0.5",engine="0",model="m"} 1',
    'lat_bucket{engine="1",le="1e0",model="m"} 7',
    'lat_bucket{engine="0",le="+Inf",model="m"} 4',
    'lat_count{engine="0",model="m"} 4',
    'lat_bucket{engine="1",le="+Inf",model="m"} 9',
    'lat_created{engine="0",model="m"} 1700000000',
    "",
  ].join("\n");
  const fam = parseExposition(text).families[0];
  const series = histogramSeries(fam);
  assert.equal(series.length, 2);
  assert.deepEqual(series[0], {
    family: "lat",
    labels: { model: "m", engine: "0" },
    buckets: B([
      [0.5, 1],
      [1, 2],
      [Infinity, 4],
    ]),
    sum: 3.5,
    count: 4,
    created: 1700000000,
  });
  assert.deepEqual(series[1].labels, { engine: "1", model: "m" });
  assert.deepEqual(
    series[1].buckets,
    B([
      [1, 7],
      [Infinity, 9],
    ]),
  );
  assert.equal(series[1].count, 9); // no _count: the +Inf bucket
  assert.ok(Number.isNaN(series[1].sum));
  assert.equal(histogramMean(series[0]), 0.875);
  assert.ok(Number.isNaN(histogramMean({ sum: 0, count: 0 })));
});

test("summarySeries groups quantiles, sum and count per label set", () => {
  const text = [
    "# TYPE rpc summary",
    'rpc{service="a",quantile="0.9"} 2',
    'rpc{service="a",quantile="0.5"} 1',
    'rpc_sum{service="a"} 30',
    'rpc_count{service="a"} 20',
    'rpc{service="b",quantile="0.5"} NaN',
    "",
  ].join("\n");
  const s = summarySeries(parseExposition(text).families[0]);
  assert.equal(s.length, 2);
  assert.deepEqual(s[0], {
    family: "rpc",
    labels: { service: "a" },
    quantiles: [
      { quantile: 0.5, value: 1 },
      { quantile: 0.9, value: 2 },
    ],
    sum: 30,
    count: 20,
  });
  assert.ok(Number.isNaN(s[1].quantiles[0].value));
});

test("bucketContaining gives the (lower, upper] bucket and its width", () => {
  const itl = B([
    [0.01, 0],
    [0.025, 900],
    [0.05, 1000],
    [Infinity, 1000],
  ]);
  const b = bucketContaining(itl, 0.017);
  assert.deepEqual(
    { ...b, width: Number(b?.width.toFixed(12)) },
    { index: 1, lower: 0.01, upper: 0.025, width: 0.015, count: 900 },
  );
  assert.deepEqual(bucketContaining(itl, 0.005), { index: 0, lower: 0, upper: 0.01, width: 0.01, count: 0 });
  assert.equal(bucketContaining(itl, 100)?.upper, Infinity);
  assert.equal(bucketContaining(itl, 0.025)?.index, 1); // upper bound inclusive
  assert.equal(bucketContaining(itl, Number.NaN), undefined);
});

// Cross-check against the real PromQL engine: promtool evaluates histogram_quantile on the same
// buckets; it fails the test file unless every expected value equals what Prometheus computes.
const promtool = "/usr/bin/promtool";
const requireE2E = !!process.env.INFERSCOPE_REQUIRE_E2E;
test("histogramQuantile equals Prometheus' histogram_quantile (promtool test rules)", {
  skip: !existsSync(promtool) && !requireE2E ? `${promtool} not installed` : undefined,
}, () => {
  let seed = 42;
  const rnd = (): number => {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    return seed / 2 ** 32;
  };
  const vllmBounds = [
    [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560],
    [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80],
    [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384],
    [-5, -1, 0, 0.5, 2],
    [0, 1],
  ];
  const cases: Array<{ labels: Array<[string, number]>; q: number }> = [];
  for (let i = 0; i < 40; i++) {
    const bounds = vllmBounds[i % vllmBounds.length];
    let cum = 0;
    const labels: Array<[string, number]> = [];
    for (const b of bounds) {
      // Some empty buckets, some non-monotonic dips.
      const r = rnd();
      cum += r < 0.3 ? 0 : Math.floor(r * 50);
      const dip = rnd() < 0.05 ? -Math.min(cum, 3) : 0;
      labels.push([String(b), cum + dip]);
    }
    cum += Math.floor(rnd() * 5);
    labels.push(["+Inf", cum]);
    if (i % 7 === 3)
      labels.push([String(bounds[0].toFixed(1)) === String(bounds[0]) ? `${bounds[0]}.0` : `${bounds[0]}e0`, 2]);
    if (cum === 0) continue;
    for (const q of [0, 0.01, 0.5, 0.9, 0.99, 1]) cases.push({ labels, q });
  }
  const seriesLines: string[] = [];
  const exprLines: string[] = [];
  const seenCase = new Map<Array<[string, number]>, number>();
  for (const c of cases) {
    let id = seenCase.get(c.labels);
    if (id === undefined) {
      id = seenCase.size;
      seenCase.set(c.labels, id);
      for (const [le, n] of c.labels)
        seriesLines.push(`      - series: 'h_bucket{case="${id}",le="${le}"}'\n        values: '${n}'`);
    }
    const ours = histogramQuantile(
      c.q,
      c.labels.map(([le, n]) => ({ le: le === "+Inf" ? Infinity : Number(le), count: n })),
    );
    if (Number.isNaN(ours)) continue;
    exprLines.push(
      `      - expr: histogram_quantile(${c.q}, h_bucket{case="${id}"})\n        eval_time: 0m\n        exp_samples:\n          - labels: '{case="${id}"}'\n            value: ${ours === Infinity ? "+Inf" : ours === -Infinity ? "-Inf" : ours}`,
    );
  }
  assert.ok(exprLines.length > 150, `only ${exprLines.length} comparable cases`);
  const yml = `evaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n${seriesLines.join("\n")}\n    promql_expr_test:\n${exprLines.join("\n")}\n`;
  const dir = mkdtempSync(join(tmpdir(), "inferscope-quantile-"));
  try {
    const file = join(dir, "quantile.yml");
    writeFileSync(file, yml);
    const r = spawnSync(promtool, ["test", "rules", file], { encoding: "utf8", timeout: 30_000 });
    assert.equal(r.status, 0, `promtool disagrees:\n${r.stdout}\n${r.stderr}`.slice(0, 4000));
    console.log(`histogram_quantile: ${exprLines.length} values identical to promtool's PromQL engine`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
