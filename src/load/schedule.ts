// Arrival schedules (pure, seeded): absolute send times in ms from the start of the measured run.
// The open-loop rule follows vLLM bench serve: gaps ~ Gamma(shape = b, scale = 1/(r·b)), the first
// request also waits one gap, and the cumulative times are rescaled so the last lands at N/r.
import { xoroshiro128plus } from "pure-rand";
import { mix32, next53 } from "../rng.ts";

/** A seeded PRNG with the few distributions the load generator needs. */
export class Rng {
  private readonly g;
  private spare: number | null = null;
  constructor(seed: number) {
    this.g = xoroshiro128plus(mix32(seed | 0) | 0);
  }
  /** Uniform in [0, 1) with 53 random bits. */
  next(): number {
    return next53(this.g);
  }
  /** Uniform integer in [lo, hi]. */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }
  normal(): number {
    if (this.spare !== null) {
      const s = this.spare;
      this.spare = null;
      return s;
    }
    let u = 0;
    while (u === 0) u = this.next();
    const v = this.next();
    const r = Math.sqrt(-2 * Math.log(u));
    this.spare = r * Math.sin(2 * Math.PI * v);
    return r * Math.cos(2 * Math.PI * v);
  }
  exponential(mean: number): number {
    return -Math.log(1 - this.next()) * mean;
  }
  /** Gamma(shape k, scale θ) by Marsaglia–Tsang; shape < 1 via the k+1 boost. */
  gamma(k: number, theta: number): number {
    if (k < 1) {
      const u = this.next();
      return this.gamma(k + 1, theta) * u ** (1 / k);
    }
    const d = k - 1 / 3;
    const c = 1 / Math.sqrt(9 * d);
    for (;;) {
      let x: number;
      let v: number;
      do {
        x = this.normal();
        v = 1 + c * x;
      } while (v <= 0);
      v = v * v * v;
      const u = this.next();
      if (u < 1 - 0.0331 * x * x * x * x) return d * v * theta;
      if (Math.log(u) < 0.5 * x * x + d * (1 - v + Math.log(v))) return d * v * theta;
    }
  }
}

export interface ArrivalOptions {
  /** Requests per second; Infinity sends everything at t = 0. */
  rate: number;
  /** Gamma shape: 1 Poisson, < 1 burstier, > 1 smoother, Infinity constant gaps. */
  burstiness?: number;
  seed?: number;
  /** vLLM rescales so the last arrival lands exactly at N/rate. Default true. */
  rescale?: boolean;
}

/** Absolute send times (ms) for n requests. */
export function arrivalTimesMs(n: number, opts: ArrivalOptions): Float64Array {
  const out = new Float64Array(n);
  const rate = opts.rate;
  if (!(rate > 0)) throw new RangeError(`request rate must be > 0, got ${rate}`);
  if (rate === Number.POSITIVE_INFINITY || n === 0) return out;
  const b = opts.burstiness ?? 1;
  if (!(b > 0)) throw new RangeError(`burstiness must be > 0, got ${b}`);
  const rng = new Rng(opts.seed ?? 0);
  let t = 0;
  for (let i = 0; i < n; i++) {
    t += b === Number.POSITIVE_INFINITY ? 1 / rate : rng.gamma(b, 1 / (rate * b));
    out[i] = t;
  }
  if ((opts.rescale ?? true) && out[n - 1]! > 0) {
    const f = n / rate / out[n - 1]!;
    for (let i = 0; i < n; i++) out[i] = out[i]! * f;
  }
  for (let i = 0; i < n; i++) out[i] = out[i]! * 1000;
  return out;
}

/** How many requests an open-loop run of `durationMs` at `rate` sends (the schedule then runs to N/rate). */
export function requestsForDuration(durationMs: number, rate: number): number {
  return Math.max(1, Math.round((durationMs / 1000) * rate));
}

/** Rates for an automatic sweep: `count` evenly spaced between the synchronous and maximum rates. */
export function sweepRates(syncRate: number, maxRate: number, count: number): number[] {
  if (!(maxRate > syncRate) || count <= 0) return [];
  const out: number[] = [];
  for (let i = 1; i <= count; i++) out.push(syncRate + ((maxRate - syncRate) * i) / (count + 1));
  return out;
}
