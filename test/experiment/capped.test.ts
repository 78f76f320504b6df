// The capped-arms finding: said only when a block was power-capped, naming what was compared.
import assert from "node:assert/strict";
import { test } from "node:test";
import { cappedFinding, type VariantTelemetry } from "../../src/experiment/blocks.ts";

const arm = (variant: string, powerCappedBlocks: number): VariantTelemetry => ({
  variant,
  blocks: 2,
  joulesPerToken: 0.08,
  avgPowerW: 690,
  limitedShare: powerCappedBlocks ? 0.78 : 0,
  powerCappedBlocks,
  smClockMedianMHz: powerCappedBlocks ? 1695 : 1980,
  smClockMaxMHz: 1980,
  gpuBusy: null,
});

test("cappedFinding: none without a capped block; every arm capped vs some; the compared things named", () => {
  assert.equal(cappedFinding([arm("a", 0), arm("b", 0)]), null);
  const all = cappedFinding([arm("a", 2), arm("b", 1)])!;
  assert.match(
    all,
    /^power-capped arms \(a: clock-limited for 78 % of its windows, 2 of 2 blocks power-capped, SM clock median 1695 of 1980 MHz; b: /,
  );
  assert.match(all, /the A\/B compares capped arms, so the difference includes the cap$/);
  const some = cappedFinding([arm("c=1", 0), arm("c=8", 2)], {
    plural: "levels",
    allCapped: "every level ran capped",
  })!;
  assert.match(some, /^power-capped levels \(c=8: /);
  assert.match(some, /the levels ran under different power conditions/);
});
