// Seeding and uniform draws shared by every seeded module (sim noise, load schedules, bootstrap).
import prand from "pure-rand";

/** splitmix32 step: a well-spread unsigned 32-bit hash of an integer (neighbouring seeds → unrelated). */
export function mix32(x: number): number {
  x = (x + 0x9e3779b9) | 0;
  x = Math.imul(x ^ (x >>> 16), 0x85ebca6b);
  x = Math.imul(x ^ (x >>> 13), 0xc2b2ae35);
  return (x ^ (x >>> 16)) >>> 0;
}

/** A uniform double in [0, 1) with 53 random bits from two 32-bit draws (27 + 26 bits). */
export function next53(g: { unsafeNext(): number }): number {
  const hi = g.unsafeNext() >>> 5;
  const lo = g.unsafeNext() >>> 6;
  return (hi * 67108864 + lo) / 9007199254740992;
}

/** A seeded uniform source on [0, 1). */
export type Uniform = () => number;

/** xoroshiro128+ from pure-rand, 53 random bits per draw. */
export function makeRng(seed: number): Uniform {
  // pure-rand seeds xoroshiro with (-1, ~seed, seed, 0), so neighbouring seeds start correlated:
  // fill the whole 128-bit state from splitmix32 of the seed instead.
  const s = seed | 0;
  const rng = prand.xoroshiro128plus.fromState([0, 1, 2, 3].map((k) => mix32((s + k * 0x9e3779b9) | 0) | 0));
  return () => next53(rng);
}
