import assert from "node:assert/strict";
import { test } from "node:test";
import { attributePerOp } from "../../src/experiment/attribute.ts";
import { planBlocks } from "../../src/experiment/design.ts";

test("ABBA design: every variant once per round, odd rounds mirror even ones, seeded", () => {
  const p = planBlocks(["base", "ll"], 4, 7);
  assert.equal(p.length, 8);
  const rounds = [0, 1, 2, 3].map((r) => p.filter((b) => b.round === r).map((b) => b.variant));
  for (const r of rounds) assert.deepEqual([...r].sort(), ["base", "ll"]);
  assert.deepEqual(rounds[1], [...rounds[0]].reverse());
  assert.deepEqual(rounds[3], [...rounds[2]].reverse());
  assert.deepEqual(planBlocks(["base", "ll"], 4, 7), p);
  assert.deepEqual(
    p.map((b) => b.index),
    [0, 1, 2, 3, 4, 5, 6, 7],
  );
});

test("balance: with an even number of rounds every variant has the same mean position (drift cancels)", () => {
  for (let seed = 0; seed < 50; seed++)
    for (const variants of [
      ["a", "b"],
      ["a", "b", "c"],
      ["a", "b", "c", "d"],
    ]) {
      const p = planBlocks(variants, 6, seed);
      const meanPos = variants.map((v) => {
        const idx = p.filter((b) => b.variant === v).map((b) => b.index);
        assert.equal(idx.length, 6);
        return idx.reduce((s, x) => s + x, 0) / idx.length;
      });
      for (const m of meanPos) assert.equal(m, meanPos[0]);
    }
});

test("the first round's order is randomized across seeds", () => {
  const firsts = new Set<string>();
  for (let seed = 0; seed < 40; seed++) firsts.add(planBlocks(["a", "b", "c"], 2, seed)[0].variant);
  assert.equal(firsts.size, 3);
  assert.throws(() => planBlocks(["a"], 0, 1), /repeats/);
});

test("attribution divides Δ per token by ops per token (seed scenario: 3.83 ms / 156 = 24.5 µs)", () => {
  const a = attributePerOp({ estimate: 3.83, lo: 3.5, hi: 4.1, level: 0.95 }, 156);
  assert.equal(a.perOpUs.estimate.toFixed(1), "24.6");
  assert.equal(a.perOpUs.lo.toFixed(1), "22.4");
  assert.equal(a.perOpUs.hi.toFixed(1), "26.3");
  assert.throws(() => attributePerOp({ estimate: 1, lo: 0, hi: 2, level: 0.95 }, 0), /positive/);
});
