// Reference values were computed with SciPy 1.17 (scipy.stats.ttest_ind(equal_var=False),
// mannwhitneyu(method="asymptotic", use_continuity=True), t.cdf, norm.ppf, theilslopes) and by hand.
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  bootstrapCI,
  bootstrapDiffCI,
  compareSamples,
  makeRng,
  mannWhitneyU,
  mean,
  minimumDetectableEffect,
  normalCdf,
  normalQuantile,
  quantile,
  studentTCdf,
  studentTQuantile,
  theilSen,
  theilSenBootstrap,
  variance,
  welchT,
} from "../../src/experiment/stats.ts";

const close = (actual: number, expected: number, rel = 1e-9, what = "") =>
  assert.ok(
    Math.abs(actual - expected) <= rel * Math.max(1, Math.abs(expected)),
    `${what} ${actual} != ${expected} (rel ${rel})`,
  );

test("Student t CDF matches t tables and SciPy, including fractional df", () => {
  close(studentTCdf(2.228, 10), 0.9749941140914443, 1e-12);
  close(studentTCdf(2.570582, 5), 0.97500000498643, 1e-12);
  close(studentTCdf(-1.3, 3.7), 0.13433336208631375, 1e-12);
  close(studentTCdf(0.5, 1), 0.6475836176504333, 1e-12); // Cauchy: 1/2 + atan(0.5)/π
  close(studentTCdf(0.5, 1), 0.5 + Math.atan(0.5) / Math.PI, 1e-12);
  close(studentTCdf(0, 7), 0.5, 1e-15);
  close(studentTQuantile(0.975, 30), 2.042272456301238, 1e-9);
  close(normalCdf(1.959963984540054), 0.975, 1e-14);
  close(normalQuantile(0.8), 0.8416212335729143, 1e-14);
  close(normalQuantile(0.001), -3.090232306167813, 1e-13);
});

test("Welch's t, df and p-value match SciPy", () => {
  const a = [27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0, 21.7, 21.4];
  const b = [27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9, 20.5, 24.4];
  const r = welchT(a, b);
  close(r.t, -2.455356398286006, 1e-12, "t");
  close(r.df, 24.988529290231416, 1e-12, "df");
  close(r.p, 0.021378001462866992, 1e-10, "p");
  const r2 = welchT([17.2, 20.9, 19.5, 18.0], [30.1, 28.8, 35.2, 27.0, 26.5, 29.9, 31.0]);
  close(r2.t, -7.955432017029571, 1e-12);
  close(r2.df, 8.973953859552685, 1e-12);
  close(r2.p, 2.3539927592348448e-5, 1e-9);
});

test("Welch df by hand: equal variances and sizes give df = 2n − 2", () => {
  // a = {1,2,3}, b = {4,5,6}: both variances 1, se = √(2/3), t = −3/√(2/3) = −3.674…, df = 4.
  const r = welchT([1, 2, 3], [4, 5, 6]);
  close(r.df, 4, 1e-12);
  close(r.t, -3 / Math.sqrt(2 / 3), 1e-12);
  // two-sided p for t = 3.6742, df 4 from the closed form for even df: I = …; SciPy gives 0.021311641128756713
  close(r.p, 0.021311641128756713, 1e-9);
});

test("Mann–Whitney U with ties and continuity correction matches SciPy", () => {
  const x = [1, 2, 2, 3, 4, 4, 4, 5, 7, 9];
  const y = [3, 4, 4, 5, 6, 6, 8, 9, 9, 10, 11];
  const r = mannWhitneyU(x, y);
  assert.equal(r.u, 24);
  close(r.p, 0.030193656185616997, 1e-10);
  const rev = mannWhitneyU(y, x);
  assert.equal(rev.u, 86); // U1 + U2 = n1·n2
  close(rev.p, r.p, 1e-14);
  const r2 = mannWhitneyU([0.8, 0.83, 1.89, 1.04, 1.45, 1.38, 1.91, 1.64, 0.73, 1.46], [1.15, 0.88, 0.9, 0.74, 1.21]);
  assert.equal(r2.u, 35);
  close(r2.p, 0.24462360512698333, 1e-10);
  // Hand check: complete separation of 3 vs 3 → U = 0 for the lower sample, U = 9 for the upper.
  assert.equal(mannWhitneyU([1, 2, 3], [4, 5, 6]).u, 0);
  assert.equal(mannWhitneyU([4, 5, 6], [1, 2, 3]).u, 9);
});

test("quantile is numpy's linear interpolation; mean/variance by hand", () => {
  assert.equal(quantile([1, 2, 3, 4], 0.5), 2.5);
  assert.equal(quantile([10, 0, 5], 0.25), 2.5);
  assert.equal(mean([1, 2, 3, 4]), 2.5);
  close(variance([1, 2, 3, 4]), 5 / 3, 1e-15);
});

test("the seeded PRNG is deterministic and uniform enough", () => {
  const u1 = makeRng(42);
  const u2 = makeRng(42);
  const xs = Array.from({ length: 20000 }, () => u1());
  assert.deepEqual(
    xs.slice(0, 5),
    Array.from({ length: 5 }, () => u2()),
  );
  assert.ok(xs.every((x) => x >= 0 && x < 1));
  close(mean(xs), 0.5, 0.01);
  close(variance(xs), 1 / 12, 0.01);
});

test("bootstrap CIs are seeded, contain the estimate, and cover the truth at about the nominal rate", () => {
  const u = makeRng(7);
  const sample = Array.from({ length: 50 }, () => 10 + normalQuantile(u()));
  const c1 = bootstrapCI(sample, { seed: 3 });
  const c2 = bootstrapCI(sample, { seed: 3 });
  assert.deepEqual(c1, c2);
  assert.ok(c1.lo < c1.estimate && c1.estimate < c1.hi);
  // Width ≈ 2·1.96·s/√n (the normal-theory interval) within 15 %.
  const expected = (2 * 1.959964 * Math.sqrt(variance(sample))) / Math.sqrt(50);
  close(c1.hi - c1.lo, expected, 0.15, "width");
  // Coverage over 200 draws of a known difference (true Δ = 1): expect ≈ 95 %.
  let covered = 0;
  for (let k = 0; k < 200; k++) {
    const a = Array.from({ length: 30 }, () => 11 + normalQuantile(u()));
    const b = Array.from({ length: 30 }, () => 10 + 2 * normalQuantile(u()));
    const d = bootstrapDiffCI(a, b, { seed: k, resamples: 500 });
    if (d.lo <= 1 && 1 <= d.hi) covered++;
  }
  assert.ok(covered >= 178 && covered <= 198, `coverage ${covered}/200`);
});

test("compareSamples detects a real shift and reports no detection without one", () => {
  const u = makeRng(11);
  const base = Array.from({ length: 40 }, () => 20.9 + 0.4 * normalQuantile(u()));
  const ll = Array.from({ length: 40 }, () => 17.2 + 0.4 * normalQuantile(u()));
  const c = compareSamples(base, ll, { seed: 5 });
  assert.ok(c.detected);
  assert.ok(c.diff.lo < 3.7 && 3.7 < c.diff.hi, `${c.diff.lo}..${c.diff.hi}`);
  assert.ok(c.welch.p < 1e-10 && c.mannWhitney.p < 1e-10);
  const same = compareSamples(
    base,
    Array.from({ length: 40 }, () => 20.9 + 0.4 * normalQuantile(u())),
    { seed: 5 },
  );
  assert.equal(same.detected, same.diff.lo > 0 || same.diff.hi < 0);
  // MDE = (1.95996 + 0.84162)·se; with σ = 0.4, n = 40 each, se ≈ 0.0894 → ≈ 0.25.
  close(minimumDetectableEffect(base, ll), 2.801585218 * Math.sqrt(variance(base) / 40 + variance(ll) / 40), 1e-8);
  assert.ok(same.mde > 0.15 && same.mde < 0.4, `mde ${same.mde}`);
});

test("Theil–Sen slope matches SciPy and resists an outlier; bootstrap CIs bracket the slope", () => {
  assert.equal(theilSen([1, 2, 3, 4, 5], [3, 5, 1, 9, 4]).slope, 0.875);
  const xs: number[] = [];
  const ys: number[] = [];
  const u = makeRng(2);
  for (const n of [16, 32, 64, 128, 256])
    for (let r = 0; r < 6; r++) {
      xs.push(n - 1);
      ys.push(52 + 17.4 * (n - 1) + 3 * normalQuantile(u()));
    }
  ys[3] += 5000; // one wild request
  const f = theilSenBootstrap(xs, ys, { seed: 1, resamples: 300 });
  close(f.fit.slope, 17.4, 0.01);
  close(f.fit.intercept, 52, 0.1);
  assert.ok(f.slope.lo <= 17.4 && 17.4 <= f.slope.hi);
  assert.ok(f.intercept.lo <= 52 && 52 <= f.intercept.hi, `${f.intercept.lo}..${f.intercept.hi}`);
});
