// Small seeded PRNG for the hot path (pure-rand's generators allocate per draw).
import { mix32 } from "../rng.ts";

export { mix32 };

/** mulberry32: fast, seedable, good enough for simulation noise (not crypto). */
export class Rng {
  private s: number;
  private spare = Number.NaN;
  constructor(seed: number) {
    this.s = mix32(seed >>> 0) | 0;
  }
  /** Uniform 32-bit unsigned integer. */
  u32(): number {
    let t = (this.s = (this.s + 0x6d2b79f5) | 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  }
  /** Uniform in [0, 1). */
  next(): number {
    return this.u32() / 4294967296;
  }
  /** Standard normal (Box–Muller, caching the second value). */
  normal(): number {
    if (!Number.isNaN(this.spare)) {
      const v = this.spare;
      this.spare = Number.NaN;
      return v;
    }
    let u = 0;
    while (u === 0) u = this.next();
    const v = this.next();
    const r = Math.sqrt(-2 * Math.log(u));
    this.spare = r * Math.sin(2 * Math.PI * v);
    return r * Math.cos(2 * Math.PI * v);
  }
  /** Lognormal factor with mean exactly 1: exp(σZ − σ²/2). */
  lognormalUnitMean(sigma: number): number {
    if (sigma <= 0) return 1;
    return Math.exp(sigma * this.normal() - (sigma * sigma) / 2);
  }
}
