// Block order for an A/B experiment: randomized, balanced interleaving (ABBA…), seeded.
// Each round runs every variant once; odd rounds mirror the round before, so a linear drift over
// time adds the same amount to every variant and cannot masquerade as an effect.
import { makeRng } from "./stats.ts";

export interface PlannedBlock {
  /** Position in the run, 0-based. */
  index: number;
  /** Round (repeat) number, 0-based. */
  round: number;
  variant: string;
}

/** Fisher–Yates with a seeded source. */
export function shuffle<T>(items: readonly T[], u: () => number): T[] {
  const out = items.slice();
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(u() * (i + 1));
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}

/**
 * `repeats` rounds over `variants`. Rounds come in mirrored pairs: a random order, then its reverse
 * (AB BA, BA AB, …). With two variants and an even number of rounds every variant sits at every
 * position equally often and the mean block index of each variant is identical.
 */
export function planBlocks(variants: readonly string[], repeats: number, seed: number): PlannedBlock[] {
  if (variants.length === 0) return [];
  if (!Number.isInteger(repeats) || repeats < 1)
    throw new RangeError(`repeats must be a positive integer, got ${repeats}`);
  const u = makeRng(seed);
  const out: PlannedBlock[] = [];
  let prev: string[] = [];
  for (let round = 0; round < repeats; round++) {
    const order = round % 2 === 0 ? shuffle(variants, u) : prev.slice().reverse();
    for (const variant of order) out.push({ index: out.length, round, variant });
    prev = order;
  }
  return out;
}
