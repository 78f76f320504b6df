// The figures derived from a capture over a window: energy, J/token, power, clocks, throttling, DRAM bandwidth,
// interconnect bytes. Every definition is in docs/telemetry.md; nothing unmeasured becomes a zero. Pure.

import { powerBoundW, screenCapture } from "./sanity.ts";
import { CLOCK_EVENT_BITS } from "./smi.ts";
import type { TelemetryCapture, TelemetrySample, TelemetrySummary } from "./types.ts";

export interface SummaryOptions {
  /** `edgeErrorJ`: what a detected window's edge placement can move energy by; added to the ±. */
  window: { startS: number; endS: number; how: "given" | "detected" | "measured-run"; edgeErrorJ?: number };
  tokens?: number;
  /** Peak DRAM bandwidth of one device in GB/s (for achieved bandwidth = DRAM active × peak). */
  peakBandwidthGBs?: number;
  /** The embedded sim's time scale: its power and byte rates are per wall second of a faster clock (sanity.ts). */
  rateScale?: number;
}

/** Reasons that lower clocks because of a limit (power, heat, a hardware slowdown); idle and settings are not. */
const LIMITING = ["SwPowerCap", "HwSlowdown", "SwThermalSlowdown", "HwThermalSlowdown", "HwPowerBrakeSlowdown"];
const POWER_CAP = ["SwPowerCap", "HwPowerBrakeSlowdown"];
/** Power-capped when a power-limit reason covers at least this share of the window. */
export const POWER_CAPPED_SHARE = 0.1;
/** With only clocks to go by, a clock this far under the reference maximum counts as lowered. */
const CLOCK_LOWERED = 0.97;

type Pt = { t: number; v: number };

function pts(samples: TelemetrySample[], pick: (s: TelemetrySample) => number | undefined): Pt[] {
  const out: Pt[] = [];
  for (const s of samples) {
    const v = pick(s);
    if (v !== undefined && Number.isFinite(v)) out.push({ t: s.t, v });
  }
  return out;
}

// Loops, not Math.max(...xs): an hour of 100 ms readings on eight GPUs is past the argument limit.
function maxOf(xs: number[]): number {
  let m = Number.NEGATIVE_INFINITY;
  for (const x of xs) if (x > m) m = x;
  return m;
}
function rangeOf(p: Pt[]): number {
  let lo = Number.POSITIVE_INFINITY;
  let hi = Number.NEGATIVE_INFINITY;
  for (const x of p) {
    if (x.v < lo) lo = x.v;
    if (x.v > hi) hi = x.v;
  }
  return hi - lo;
}

/** Linear interpolation, clamped to the end values outside the range. */
function at(p: Pt[], t: number): number {
  if (t <= p[0]!.t) return p[0]!.v;
  if (t >= p.at(-1)!.t) return p.at(-1)!.v;
  let lo = 0;
  let hi = p.length - 1;
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (p[mid]!.t <= t) lo = mid;
    else hi = mid;
  }
  const a = p[lo]!;
  const b = p[hi]!;
  return b.t === a.t ? b.v : a.v + ((b.v - a.v) * (t - a.t)) / (b.t - a.t);
}

/** Index of the bracketing interval's left sample for t (clamped). */
function bracket(p: Pt[], t: number): number {
  let lo = 0;
  let hi = p.length - 1;
  if (t <= p[0]!.t) return 0;
  if (t >= p[hi]!.t) return Math.max(0, hi - 1);
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (p[mid]!.t <= t) lo = mid;
    else hi = mid;
  }
  return lo;
}

/** Trapezoid ∫ over [a, b] of a linearly interpolated series, with the sampling bound described in the docs. */
export function integrateTrapezoid(p: Pt[], a: number, b: number): { value: number; errorBound: number } {
  const xs = [a, ...p.filter((x) => x.t > a && x.t < b).map((x) => x.t), b];
  let value = 0;
  for (let i = 1; i < xs.length; i++) value += ((xs[i]! - xs[i - 1]!) * (at(p, xs[i]!) + at(p, xs[i - 1]!))) / 2;
  // Noise of point readings: σ from successive differences (robust to slow trends), the standard error of a
  // mean of n readings, times the span, doubled (≈ 95 %).
  const inside = p.filter((x) => x.t >= a && x.t <= b);
  let sq = 0;
  for (let i = 1; i < inside.length; i++) sq += (inside[i]!.v - inside[i - 1]!.v) ** 2;
  const n = inside.length;
  const sigma = n > 1 ? Math.sqrt(sq / (2 * (n - 1))) : 0;
  // Clamped ends (the window reaches past the samples) are guesses: add their whole span at the observed range.
  const range = rangeOf(p);
  // With one reading or none inside, the window rests on interpolation between readings outside it: half the
  // range over the span.
  let err = n > 1 ? (2 * (b - a) * sigma) / Math.sqrt(n) : (range * (b - a)) / 2;
  if (a < p[0]!.t) err += (p[0]!.t - a) * range;
  if (b > p.at(-1)!.t) err += (b - p.at(-1)!.t) * range;
  return { value, errorBound: err };
}

/**
 * ∫ P dt over [a, b] from a trailing W-second average A(t) = (E(t) − E(t − W)) / W: E(b) − E(a) is exactly
 * W·ΣA(b − kW) for whole steps, plus the remainder r·A(a + r/2 + W/2) (the W-window centred on it). Removes the
 * averaging lag that a plain trapezoid of A keeps at every edge of the load.
 */
export function integrateTrailingAverage(
  p: Pt[],
  a: number,
  b: number,
  w: number,
): { value: number; errorBound: number } {
  let value = 0;
  let err = 0;
  const interpErr = (t: number) => {
    const i = bracket(p, t);
    return Math.abs(p[Math.min(i + 1, p.length - 1)]!.v - p[i]!.v) / 2;
  };
  let t = b;
  while (t - w >= a - 1e-9) {
    value += w * at(p, t);
    err += w * interpErr(t);
    t -= w;
  }
  const r = t - a;
  if (r > 1e-9) {
    const tc = a + r / 2 + w / 2;
    value += r * at(p, tc);
    // The centred window stands for the remainder: power that moves within it (a step at the edge) moves the
    // figure by up to half that range.
    let mn = at(p, tc);
    let mx = mn;
    for (const x of p)
      if (x.t > tc - w / 2 && x.t < tc + w / 2) {
        mn = Math.min(mn, x.v);
        mx = Math.max(mx, x.v);
      }
    err += r * (interpErr(tc) + (mx - mn) / 2);
  }
  const range = rangeOf(p);
  if (a - w < p[0]!.t) err += Math.min(w, p[0]!.t - (a - w)) * range;
  if (b > p.at(-1)!.t) err += (b - p.at(-1)!.t) * range;
  return { value, errorBound: err };
}

/** The readings at which `key` changes (the first of each run of equal values), in order. */
export function valueChanges<T>(xs: readonly T[], key: (x: T) => unknown): T[] {
  const out: T[] = [];
  let last: unknown;
  for (const x of xs) {
    const k = key(x);
    if (!out.length || k !== last) out.push(x);
    last = k;
  }
  return out;
}

/** Median spacing (s) of readings' times: of value changes, an exporter's collection interval. Null under 4. */
export function medianSpacing(xs: readonly { t: number }[]): number | null {
  if (xs.length < 4) return null;
  const gaps = xs.slice(1).map((x, i) => x.t - xs[i]!.t);
  gaps.sort((x, y) => x - y);
  return gaps[Math.floor(gaps.length / 2)]!;
}

/**
 * ∫ over [a, b] of a gauge that holds per-collection averages (dcgm-exporter's rate fields: each value is the
 * mean over the exporter's last closed collection interval, and stays until the next collection). A new value
 * first read at f covers the collection interval D before it, read about half a polling interval late, so the
 * series is a step function shifted back by D + poll/2; D is the median spacing of value changes. A plain
 * trapezoid of the readings smears each step over the polling gaps and misplaces whole collections at the edges.
 */
export function integrateCollections(
  p: Pt[],
  a: number,
  b: number,
  pollS: number,
): { value: number; errorBound: number } {
  const first = valueChanges(p, (x) => x.v);
  const d = medianSpacing(first);
  if (d === null) return integrateTrapezoid(p, a, b);
  const shift = d + pollS / 2;
  let value = 0;
  let err = 0;
  for (let i = 0; i < first.length; i++) {
    const lo = first[i]!.t - shift;
    const hi = i + 1 < first.length ? first[i + 1]!.t - shift : p.at(-1)!.t - pollS / 2;
    if (hi <= a || lo >= b) continue;
    // A collection that straddles an edge is counted whole: its average is all that is known of it, and a
    // measured window starts and ends on its own requests, so the traffic in it is theirs. What lies outside
    // the window is the bound. Its length is a whole number of collection intervals: the exporter collects
    // on a clock, while the times the reader first saw each value jitter by up to a polling interval.
    const whole = first[i]!.v * Math.max(1, Math.round((hi - lo) / d)) * d;
    value += whole;
    err += Math.abs(first[i]!.v) * (Math.max(0, a - lo) + Math.max(0, hi - b));
    // A gap of k collections between value changes may hide k − 1 collections that were never read (the
    // reader stalled): their rate is unknown, so each is bounded by the larger neighbour.
    const k = Math.round((hi - lo) / d);
    if (k >= 2 && i + 1 < first.length) err += (k - 1) * d * Math.max(Math.abs(first[i]!.v), Math.abs(first[i + 1]!.v));
  }
  return { value, errorBound: err };
}

export interface CounterDelta {
  value: number;
  /** Drops to near zero (a driver reload, an exporter restart): the piece after one counts from zero. */
  resets: number;
  errorBound: number;
  /** The readings reach both edges of [a, b]. */
  covered: boolean;
  /** Seconds of [a, b] between the first and the last reading (a counter's delta is exact between any two). */
  coveredS: number;
  /** Steps down that are no reset (the counter decreases, or its samples are out of order): not a cumulative counter. */
  decreases: number;
  /** Steps up faster than `maxRate`: not what the device can have counted. */
  jumps: number;
  /** The first step that is neither, for the note: "1,000,000 → 999,940 at t". */
  firstBad?: { t: number; from: number; to: number };
}

/**
 * Delta of a cumulative counter over [a, b]: pieces between readings, clipped linearly at the window's edges.
 * A step down is a reset only where the counter fell to what it can have counted since restarting at zero
 * inside that interval (at most `maxRate` × Δt, and under half of where it was): the piece then counts from
 * zero, and the part of the interval before the restart is estimated at the neighbouring pieces' rate, with
 * the whole unknown part in the bound. Any other step down, or a step up faster than `maxRate`, means the
 * readings are not a counter of energy (`decreases`, `jumps`): the caller must not use the delta.
 */
export function counterDelta(p: Pt[], a: number, b: number, o: { maxRate?: number } = {}): CounterDelta {
  const maxRate = o.maxRate ?? Number.POSITIVE_INFINITY;
  let value = 0;
  let resets = 0;
  let err = 0;
  let decreases = 0;
  let jumps = 0;
  let firstBad: CounterDelta["firstBad"];
  const rate = (i: number): number | undefined => {
    // The rate of piece i (from reading i − 1 to i), when it is an ordinary step.
    if (i < 1 || i >= p.length) return undefined;
    const d = p[i]!.v - p[i - 1]!.v;
    const dt = p[i]!.t - p[i - 1]!.t;
    return dt > 0 && d >= 0 && d / dt <= maxRate ? d / dt : undefined;
  };
  for (let i = 1; i < p.length; i++) {
    const t0 = p[i - 1]!.t;
    const t1 = p[i]!.t;
    if (t1 <= t0) continue;
    const v0 = p[i - 1]!.v;
    const v1 = p[i]!.v;
    let d = v1 - v0;
    let pieceErr = 0;
    if (d < 0) {
      if (v1 <= maxRate * (t1 - t0) && v1 < v0 - v1) {
        if (t1 > a && t0 < b) resets++;
        // What ran before the restart is unknown: the neighbours' rate estimates it, their highest rate bounds it.
        const near = [rate(i - 1), rate(i + 1)].filter((r): r is number => r !== undefined);
        const est = near.length ? (near.reduce((x, y) => x + y, 0) / near.length) * (t1 - t0) : v1;
        const top = near.length ? Math.max(...near) : Number.isFinite(maxRate) ? maxRate : v1 / (t1 - t0);
        const hi = v1 + top * (t1 - t0);
        d = Math.max(v1, est);
        pieceErr = Math.max(d - v1, hi - d);
      } else {
        if (t1 > a && t0 < b) {
          decreases++;
          firstBad ??= { t: t1, from: v0, to: v1 };
        }
        continue;
      }
    } else if (d / (t1 - t0) > maxRate) {
      if (t1 > a && t0 < b) {
        jumps++;
        firstBad ??= { t: t1, from: v0, to: v1 };
      }
      continue;
    }
    if (t1 <= a || t0 >= b) continue;
    const lo = Math.max(a, t0);
    const hi = Math.min(b, t1);
    const frac = (hi - lo) / (t1 - t0);
    value += d * frac;
    err += pieceErr * frac;
    // A clipped piece assumes even use over its interval; the rest of the piece bounds what that can misplace.
    if (frac < 1) err += d * Math.min(frac, 1 - frac);
  }
  const covered = p.length >= 2 && p[0]!.t <= a + 1e-6 && p.at(-1)!.t >= b - 1e-6;
  const coveredS = p.length >= 2 ? Math.max(0, Math.min(b, p.at(-1)!.t) - Math.max(a, p[0]!.t)) : 0;
  return { value, resets, errorBound: err, covered, coveredS, decreases, jumps, ...(firstBad ? { firstBad } : {}) };
}

/** Readings further apart than this many typical spacings leave the time between them uncovered (a source down). */
export const COVERAGE_GAP_FACTOR = 3;
/** Energy over a window needs readings over at least this share of it; under it, energy is unavailable. */
export const ENERGY_MIN_COVERAGE = 0.9;

/** The median spacing of positive gaps between readings, or null with fewer than two distinct times. */
function typicalGap(p: Pt[]): number | null {
  const g: number[] = [];
  for (let i = 1; i < p.length; i++) if (p[i]!.t > p[i - 1]!.t) g.push(p[i]!.t - p[i - 1]!.t);
  if (!g.length) return null;
  g.sort((x, y) => x - y);
  return g[g.length >> 1]!;
}

/**
 * The parts of [a, b] that readings cover: between consecutive readings no more than COVERAGE_GAP_FACTOR typical
 * spacings apart. Nothing before the first reading or after the last is covered: a figure is never extrapolated.
 */
export function coveredSpans(p: Pt[], a: number, b: number): Array<[number, number]> {
  const gap = typicalGap(p);
  if (gap === null) return [];
  const out: Array<[number, number]> = [];
  for (let i = 1; i < p.length; i++) {
    const t0 = p[i - 1]!.t;
    const t1 = p[i]!.t;
    if (t1 <= t0 || t1 - t0 > COVERAGE_GAP_FACTOR * gap) continue;
    const lo = Math.max(a, t0);
    const hi = Math.min(b, t1);
    if (hi <= lo) continue;
    const last = out.at(-1);
    if (last && last[1] >= lo) last[1] = Math.max(last[1], hi);
    else out.push([lo, hi]);
  }
  return out;
}

const spanOf = (xs: Array<[number, number]>) => xs.reduce((s, [lo, hi]) => s + (hi - lo), 0);

/** Share of [a, b] where pred holds, each reading holding until the next (the one before a covers the start). */
function holdShare(p: { t: number; on: boolean }[], a: number, b: number): number {
  if (!p.length || b <= a) return Number.NaN;
  let on = 0;
  for (let i = 0; i < p.length; i++) {
    const t0 = i === 0 ? Math.min(p[0]!.t, a) : p[i]!.t;
    const t1 = i + 1 < p.length ? p[i + 1]!.t : Math.max(b, p[i]!.t);
    const lo = Math.max(a, t0);
    const hi = Math.min(b, t1);
    if (hi > lo && p[i]!.on) on += hi - lo;
  }
  return on / (b - a);
}

/** Time-weighted mean over [a, b] of readings that each describe the interval before them (dmon pviol). */
function backwardMean(p: Pt[], a: number, b: number): number {
  if (!p.length) return Number.NaN;
  let sum = 0;
  let span = 0;
  for (let i = 0; i < p.length; i++) {
    const t1 = p[i]!.t;
    const t0 = i > 0 ? p[i - 1]!.t : t1 - (p.length > 1 ? p[1]!.t - p[0]!.t : 1);
    const lo = Math.max(a, t0);
    const hi = Math.min(b, t1);
    if (hi > lo) {
      sum += p[i]!.v * (hi - lo);
      span += hi - lo;
    }
  }
  // Past the last reading nothing is known: the mean is over the covered part.
  return span > 0 ? sum / span : Number.NaN;
}

function median(xs: number[]): number | null {
  if (!xs.length) return null;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}
function quantile(xs: number[], q: number): number | null {
  if (!xs.length) return null;
  const s = [...xs].sort((a, b) => a - b);
  const pos = (s.length - 1) * q;
  const lo = Math.floor(pos);
  return s[lo]! + (s[Math.ceil(pos)]! - s[lo]!) * (pos - lo);
}
function mean(xs: number[]): number | null {
  return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : null;
}

/** One line per field: the first reason given wins (the source's own, before the summarizer's). */
function dedupe(us: TelemetrySummary["unavailable"]): TelemetrySummary["unavailable"] {
  const seen = new Set<string>();
  return us.filter((u) => {
    if (seen.has(u.field)) return false;
    seen.add(u.field);
    return true;
  });
}

/** A device key's own part: a host or file prefix (`node-a:gpu0`, `a.csv:gpu0`) says nothing of its kind. */
const localKey = (d: string) => d.slice(d.lastIndexOf(":") + 1);
const isCpu = (d: string) => {
  const k = localKey(d);
  return k.startsWith("cpu") || k.startsWith("package");
};

/** The smallest energy a counter resolves (DCGM counts mJ): tokens per J needs energy above it. */
const ENERGY_RESOLUTION_J = 1e-3;

type DeviceEnergy =
  | { value: number; err: number; method: "counter" | "integrated-power"; coveredS: number }
  | { why: string };

/** The highest power (W) a device's counter or readings can show: see sanity.ts. */
function devicePowerBound(cap: TelemetryCapture, d: string, ss: TelemetrySample[], rateScale: number): number {
  let limit = cap.devices.find((x) => x.key === d)?.powerLimitW;
  for (const s of ss) if (s.powerLimitW !== undefined) limit = Math.max(limit ?? 0, s.powerLimitW);
  return powerBoundW(limit, rateScale);
}

/** One device's energy over [a, b]: its counter where that is a counter of energy, else its integrated power. */
function deviceEnergy(
  d: string,
  ss: TelemetrySample[],
  a: number,
  b: number,
  cap: TelemetryCapture,
  rateScale: number,
  notes: string[],
): DeviceEnergy {
  const counter = pts(ss, (s) => s.energyJ);
  const avg = pts(ss, (s) => s.powerW);
  const inst = pts(ss, (s) => s.powerInstantW);
  const avgS = cap.powerAveragingS ?? 0;
  let counterWhy: string | undefined;
  if (counter.length >= 2) {
    const maxW = devicePowerBound(cap, d, ss, rateScale);
    const c = counterDelta(counter, a, b, { maxRate: maxW });
    if (!c.decreases && !c.jumps && c.resets <= 1) {
      if (c.resets)
        notes.push(
          `${d}: the energy counter reset once (fell to near zero); the interval around it is estimated at its neighbours' rate, its whole unknown part in the ±`,
        );
      return { value: c.value, err: c.errorBound, method: "counter", coveredS: c.coveredS };
    }
    const bad = c.firstBad ? ` (first: ${c.firstBad.from} J → ${c.firstBad.to} J)` : "";
    counterWhy = [
      c.decreases
        ? `goes down ${c.decreases}× without falling to zero${bad}: samples out of order, or not a cumulative counter`
        : "",
      c.jumps ? `rises faster than ${maxW} W ${c.jumps}×${c.decreases ? "" : bad}` : "",
      c.resets > 1 ? `falls to zero ${c.resets}×` : "",
    ]
      .filter(Boolean)
      .join("; ");
    counterWhy = `the energy counter is not energy: it ${counterWhy}`;
    notes.push(
      `${d}: ${counterWhy}; ${avg.length >= 2 || inst.length >= 2 ? "energy is integrated from power instead" : "no power readings to integrate instead"}`,
    );
  }
  const primary = avg.length >= 2 ? avg : inst.length >= 2 ? inst : null;
  if (!primary)
    return {
      why:
        counterWhy ??
        (counter.length || avg.length || inst.length
          ? "one reading: energy needs two readings of the counter or of power"
          : "no energy counter or power readings"),
    };
  const lagged = primary === avg && avgS > 0;
  const spans = coveredSpans(primary, a, b);
  const coveredS = spanOf(spans);
  if (coveredS <= 0) return { why: "no two readings of power inside the window" };
  let value = 0;
  let err = 0;
  for (const [lo, hi] of spans) {
    const r = lagged ? integrateTrailingAverage(primary, lo, hi, avgS) : integrateTrapezoid(primary, lo, hi);
    value += r.value;
    err += r.errorBound;
  }
  if (primary === avg && inst.length >= 2 && spanOf(coveredSpans(inst, a, b)) >= coveredS - 1e-9) {
    // Two independent readings of one quantity: their disagreement is part of the uncertainty.
    let byInst = 0;
    for (const [lo, hi] of spans) byInst += integrateTrapezoid(inst, lo, hi).value;
    err = Math.max(err, Math.abs(value - byInst));
    if (value > 0)
      notes.push(
        `${d}: power.draw${avgS > 0 ? ` (${avgS} s average, lag removed)` : ""} integrates to ${value.toFixed(1)} J, power.draw.instant to ${byInst.toFixed(1)} J (${((100 * (byInst - value)) / value).toFixed(2)} %)`,
      );
  }
  // The readings' own stated accuracy, held over the span (a calibration offset does not average out).
  if (cap.powerAccuracyW) err += cap.powerAccuracyW * coveredS;
  // Coarse sample times (dmon's whole seconds) can shift every change of power by up to that much.
  const res = cap.timeResolutionS ?? 0;
  if (res > 0) {
    let moved = 0;
    for (let i = 1; i < primary.length; i++)
      if (primary[i]!.t >= a - res && primary[i - 1]!.t <= b + res)
        moved += Math.abs(primary[i]!.v - primary[i - 1]!.v);
    err += (res * moved) / 2;
  }
  return { value, err, method: "integrated-power", coveredS };
}

const secs = (x: number) => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));

/** Derives the summary over opts.window. Impossible readings are dropped first (sanity.ts), each said in a note. */
export function summarizeTelemetry(captureIn: TelemetryCapture, opts: SummaryOptions): TelemetrySummary {
  const rateScale = opts.rateScale ?? 1;
  const capture = screenCapture(captureIn, { rateScale });
  const { startS: a, endS: b } = opts.window;
  const span = b - a;
  const unavailable: TelemetrySummary["unavailable"] = [];
  const notes: string[] = [];
  const byDev = new Map<string, TelemetrySample[]>();
  for (const s of capture.samples) {
    const arr = byDev.get(s.device) ?? [];
    arr.push(s);
    byDev.set(s.device, arr);
  }
  const inWin = capture.samples.filter((s) => s.t >= a && s.t <= b);
  const gpuDevs = [...byDev.keys()].filter((d) => !isCpu(d));
  const cpuDevs = [...byDev.keys()].filter(isCpu);
  // The devices whose energy makes the total: whole GPUs (a MIG instance is a slice of one), else the CPU
  // packages with an energy counter or power.
  const wholeGpus = gpuDevs.filter((d) => !d.includes("/mig"));
  const energyDevs = gpuDevs.length
    ? wholeGpus.length
      ? wholeGpus
      : gpuDevs
    : cpuDevs.filter((d) =>
        byDev.get(d)!.some((s) => s.energyJ !== undefined || s.powerW !== undefined || s.powerInstantW !== undefined),
      );
  const avgS = capture.powerAveragingS ?? 0;

  // Energy per device, only over the time its readings cover: never extrapolated, never a 0 for "unknown".
  let energy = 0;
  let energyErr = 0;
  let avgPower = 0;
  let method: "counter" | "integrated-power" | null = null;
  let devsWithEnergy = 0;
  let minCovered = Number.POSITIVE_INFINITY;
  const missing: string[] = [];
  if (span > 0)
    for (const d of energyDevs) {
      const e = deviceEnergy(d, byDev.get(d)!, a, b, capture, rateScale, notes);
      if ("why" in e) {
        missing.push(`${d}: ${e.why}`);
        continue;
      }
      if (e.coveredS < ENERGY_MIN_COVERAGE * span) {
        missing.push(
          `${d}: its readings cover ${secs(e.coveredS)} of ${secs(span)} s (${((100 * e.coveredS) / span).toFixed(0)} %); energy needs ${100 * ENERGY_MIN_COVERAGE} %`,
        );
        continue;
      }
      energy += e.value;
      energyErr += e.err;
      avgPower += e.value / e.coveredS;
      minCovered = Math.min(minCovered, e.coveredS);
      method = method === "integrated-power" ? method : e.method;
      devsWithEnergy++;
    }
  const haveEnergy = devsWithEnergy > 0;
  if (haveEnergy && opts.window.edgeErrorJ) {
    energyErr += opts.window.edgeErrorJ;
    notes.push(
      `the detected edges fall between readings: ${opts.window.edgeErrorJ.toFixed(1)} J of the ± is where (half an interval at each step in power)`,
    );
  }
  const complete = haveEnergy && devsWithEnergy === energyDevs.length && minCovered >= span * (1 - 1e-9);
  if (!haveEnergy)
    unavailable.push({
      field: "energyJ",
      why:
        span <= 0
          ? "one reading per device (a single scrape, or equal timestamps): energy needs a window, i.e. two readings of the counter or of power"
          : missing.length
            ? missing.join("; ")
            : "no energy counter and fewer than two power readings per device",
    });
  else {
    if (devsWithEnergy < energyDevs.length)
      notes.push(`energy covers ${devsWithEnergy} of ${energyDevs.length} devices (${missing.join("; ")})`);
    if (minCovered < span * (1 - 1e-9))
      notes.push(
        `energy is over the ${secs(minCovered)} of ${secs(span)} s its readings cover (${((100 * minCovered) / span).toFixed(0)} %), not extrapolated; average power is over that span`,
      );
  }
  if (haveEnergy && method === "integrated-power")
    notes.push(
      `energy integrated from power (${avgS > 0 ? `power.draw as a ${avgS} s trailing average, lag removed` : "trapezoid"}); ± is the sampling bound${capture.powerAccuracyW ? ` plus the readings' stated ±${capture.powerAccuracyW} W over the window` : ""}`,
    );

  // Peak power: the highest sum over devices at any reading time inside the window (averaged power.draw where
  // present).
  let peak: number | null = null;
  const powerSeriesForPeak = energyDevs.map((d) => {
    const ss = byDev.get(d)!;
    const avg = pts(ss, (s) => s.powerW);
    return avg.length ? avg : pts(ss, (s) => s.powerInstantW);
  });
  const peakSeries = powerSeriesForPeak.filter((p) => p.length >= 2);
  if (peakSeries.length) {
    const times = [...new Set(peakSeries.flatMap((p) => p.filter((x) => x.t >= a && x.t <= b).map((x) => x.t)))];
    for (const t of times) {
      const sum = peakSeries.reduce((acc, p) => acc + at(p, t), 0);
      peak = peak === null ? sum : Math.max(peak, sum);
    }
  }
  if (peak === null && span <= 0) {
    // A snapshot: the one reading is the figure.
    const ps = powerSeriesForPeak.filter((p) => p.length === 1);
    if (ps.length) peak = ps.reduce((acc, p) => acc + p[0]!.v, 0);
  }
  if (peak === null) unavailable.push({ field: "peakPowerW", why: "no power readings inside the window" });

  const tokens = opts.tokens ?? null;
  const energyJ = haveEnergy ? energy : null;
  let joulesPerToken: number | null = null;
  let tokensPerJoule: number | null = null;
  if (tokens === null) unavailable.push({ field: "joulesPerToken", why: "no token count given (--tokens)" });
  else if (haveEnergy && !complete)
    unavailable.push({
      field: "joulesPerToken",
      why: "the energy readings do not cover the whole window (see notes): the tokens of the uncovered part have no energy",
    });
  else if (energyJ !== null) {
    joulesPerToken = energyJ / tokens;
    if (energyJ > Math.max(energyErr, ENERGY_RESOLUTION_J)) tokensPerJoule = tokens / energyJ;
    else
      unavailable.push({
        field: "tokensPerJoule",
        why: `the energy (${energyJ.toPrecision(3)} J ± ${energyErr.toPrecision(3)} J) cannot be told from zero`,
      });
  }

  // Clocks.
  const sm = inWin.map((s) => s.smClockMHz).filter((v): v is number => v !== undefined);
  const deviceMaxes = [
    ...capture.devices.map((d) => d.smClockMaxMHz),
    ...capture.samples.map((s) => s.smClockMaxMHz),
  ].filter((v): v is number => v !== undefined);
  const deviceMax = deviceMaxes.length ? maxOf(deviceMaxes) : null;
  const smClockMHz = sm.length ? { max: maxOf(sm), median: median(sm), p10: quantile(sm, 0.1), deviceMax } : null;
  if (!sm.length) unavailable.push({ field: "smClockMHz", why: "no SM clock readings inside the window" });
  const mem = inWin.map((s) => s.memClockMHz).filter((v): v is number => v !== undefined);

  let throttle: TelemetrySummary["throttle"] = null;
  if (span > 0) throttle = summarizeThrottle(byDev, a, b, deviceMax, unavailable, notes);
  else unavailable.push({ field: "throttle", why: "one reading per device: a share of a window needs a window" });

  // Utilization means over the readings inside the window.
  // A MIG instance's figures are its slice of the GPU: when the GPU itself reports a field, instances are left
  // out of the mean rather than counted twice.
  const m = (pick: (s: TelemetrySample) => number | undefined) => {
    const whole = inWin.filter((s) => !s.device.includes("/mig")).map(pick);
    const vals = whole.some((v) => v !== undefined) ? whole : inWin.map(pick);
    return mean(vals.filter((v): v is number => v !== undefined));
  };
  const utilization = {
    gpuBusy: m((s) => s.gpuBusy),
    memBusy: m((s) => s.memBusy),
    dramActive: m((s) => s.dramActive),
    smActive: m((s) => s.smActive),
  };
  const anyUtil = Object.values(utilization).some((v) => v !== null);

  let dram: TelemetrySummary["dram"] = null;
  if (utilization.dramActive !== null) {
    const peakGBs = opts.peakBandwidthGBs ?? null;
    dram = {
      activeMean: utilization.dramActive,
      peakGBs,
      achievedGBs: peakGBs === null ? null : utilization.dramActive * peakGBs,
    };
    if (peakGBs === null)
      unavailable.push({
        field: "dram.achievedGBs",
        why: "no peak bandwidth known for this device (telemetry read takes --peak-bandwidth)",
      });
  } else
    unavailable.push({
      field: "dram",
      why: "no DRAM-active readings (DCGM_FI_PROF_DRAM_ACTIVE / NVML GPM); utilization.memory is busy time, not bandwidth",
    });

  // Interconnect bytes: ∫ rate dt per device, summed. An exporter's rates are per-collection averages.
  const perCollection = ["dcgm", "sim", "prometheus"].includes(capture.source.kind);
  const pollS = (capture.intervalMs ?? 1000) / 1000;
  let txErr = 0;
  const integ = (pick: (s: TelemetrySample) => number | undefined, tx = false): number | null => {
    let total = 0;
    let any = false;
    for (const d of gpuDevs) {
      const p = pts(byDev.get(d)!, pick);
      if (p.length < 2) continue;
      const r = perCollection ? integrateCollections(p, a, b, pollS) : integrateTrapezoid(p, a, b);
      total += r.value;
      if (tx) txErr += r.errorBound;
      any = true;
    }
    return any ? total : null;
  };
  const pcieTxBytes = integ((s) => s.pcieTxBps, true);
  const pcieRxBytes = integ((s) => s.pcieRxBps);
  const nvlinkTxBytes = integ((s) => s.nvlinkTxBps, true);
  const nvlinkRxBytes = integ((s) => s.nvlinkRxBps);
  let interconnect: TelemetrySummary["interconnect"] = null;
  if ([pcieTxBytes, pcieRxBytes, nvlinkTxBytes, nvlinkRxBytes].some((x) => x !== null)) {
    const tx = (pcieTxBytes ?? 0) + (nvlinkTxBytes ?? 0);
    interconnect = {
      pcieTxBytes,
      pcieRxBytes,
      nvlinkTxBytes,
      nvlinkRxBytes,
      bytesPerToken: tokens && (pcieTxBytes !== null || nvlinkTxBytes !== null) ? tx / tokens : null,
      bytesPerTokenError: tokens && (pcieTxBytes !== null || nvlinkTxBytes !== null) ? txErr / tokens : null,
    };
  } else
    unavailable.push({
      field: "interconnect",
      why:
        span <= 0 && inWin.some((s) => s.pcieTxBps !== undefined || s.nvlinkTxBps !== undefined)
          ? "one reading of the PCIe/NVLink rates: bytes need a window (two readings or more)"
          : "no PCIe or NVLink rate readings",
    });

  // CPU hosts.
  let cpu: TelemetrySummary["cpu"] = null;
  const cpuBusy = m((s) => s.cpuBusy);
  if (cpuDevs.length || cpuBusy !== null) {
    // The packages' energy, by the same rules as the GPUs' (a counter that is a counter, readings that cover).
    let cpuEnergy: number | null = null;
    const scratch: string[] = [];
    for (const d of cpuDevs) {
      if (!byDev.get(d)!.some((s) => s.energyJ !== undefined) || span <= 0) continue;
      const e = deviceEnergy(d, byDev.get(d)!, a, b, capture, rateScale, scratch);
      if ("why" in e || e.coveredS < span * (1 - 1e-9)) {
        cpuEnergy = null;
        break;
      }
      cpuEnergy = (cpuEnergy ?? 0) + e.value;
    }
    cpu = { busyMean: cpuBusy, energyJ: cpuEnergy };
    const srv = byDev.get("cpu/server");
    if (srv && span > 0) {
      const run = counterDelta(
        pts(srv, (s) => s.serverCpuS),
        a,
        b,
      );
      const wait = counterDelta(
        pts(srv, (s) => s.serverRunQueueS),
        a,
        b,
      );
      const name = capture.devices.find((d) => d.key === "cpu/server")?.name ?? "server";
      // CPU seconds only grow: a step down means the readings are not the thread sums they should be.
      const monotone = !run.decreases && !wait.decreases && !run.resets && !wait.resets;
      if (run.covered && monotone && run.value + wait.value > 0)
        cpu.server = {
          name,
          cpuCores: run.value / span,
          runQueueShare: wait.value / (run.value + wait.value),
          runQueueS: wait.value,
        };
      else
        unavailable.push({
          field: "serverRunQueue",
          why: !run.covered
            ? `${name}: readings do not cover the window`
            : monotone
              ? `${name} did not run in the window`
              : `${name}: its CPU-time counters went down (not cumulative)`,
        });
    }
  }

  return guardSummary({
    source: capture.source,
    window: { startS: a, endS: b, how: opts.window.how },
    devices: [...byDev.keys()],
    samples: inWin.length,
    energyJ,
    energyMethod: haveEnergy ? method : null,
    energyErrorJ: haveEnergy ? energyErr : null,
    energyCoverage: haveEnergy ? { coveredS: minCovered, windowS: span } : null,
    avgPowerW: haveEnergy ? avgPower : null,
    peakPowerW: peak,
    tokens,
    joulesPerToken,
    tokensPerJoule,
    smClockMHz,
    memClockMHz: mem.length ? { median: median(mem) } : null,
    throttle,
    utilization: anyUtil ? utilization : null,
    dram,
    interconnect,
    cpu,
    // The summarizer's word on energy is the specific one (coverage, a counter that is not energy).
    unavailable: dedupe([...capture.unavailable.filter((u) => u.field !== "energyJ"), ...unavailable]),
    notes: [...capture.notes, ...notes],
  });
}

/**
 * The last net: a figure that is not a finite number ≥ 0 (a share: in [0, 1]) is never printed as measured. It
 * becomes null (a share: left out) with the reason in `unavailable`. Readings are screened before this (sanity.ts),
 * so what it catches comes from arithmetic at the edges of float (a token count near 1e308).
 */
export function guardSummary(s: TelemetrySummary): TelemetrySummary {
  const bad: string[] = [];
  const ok = (v: number | null | undefined) => v === null || v === undefined || (Number.isFinite(v) && v >= 0);
  const num = <T extends object>(o: T | null, path: string, keys: (keyof T)[], share = false) => {
    if (!o) return;
    for (const k of keys) {
      const v = o[k] as unknown as number | null | undefined;
      if (ok(v) && (!share || v == null || v <= 1)) continue;
      bad.push(`${path}${String(k)}`);
      (o as Record<string, unknown>)[k as string] = null;
    }
  };
  num(s, "", ["energyJ", "energyErrorJ", "avgPowerW", "peakPowerW", "tokens", "joulesPerToken", "tokensPerJoule"]);
  if (s.energyJ === null) {
    s.energyErrorJ = null;
    s.energyMethod = null;
    s.energyCoverage = null;
  }
  num(s.smClockMHz, "smClockMHz.", ["max", "median", "p10", "deviceMax"]);
  num(s.memClockMHz, "memClockMHz.", ["median"]);
  num(s.utilization, "utilization.", ["gpuBusy", "memBusy", "dramActive", "smActive"], true);
  num(s.dram, "dram.", ["peakGBs", "achievedGBs"]);
  num(s.interconnect, "interconnect.", [
    "pcieTxBytes",
    "pcieRxBytes",
    "nvlinkTxBytes",
    "nvlinkRxBytes",
    "bytesPerToken",
    "bytesPerTokenError",
  ]);
  num(s.cpu, "cpu.", ["busyMean", "energyJ"]);
  if (s.throttle) {
    const t = s.throttle;
    if (!ok(t.shareOfWindow) || t.shareOfWindow > 1) {
      bad.push("throttle.shareOfWindow");
      t.shareOfWindow = Math.min(1, Math.max(0, Number.isFinite(t.shareOfWindow) ? t.shareOfWindow : 0));
    }
    const kept = t.reasons.filter((r) => ok(r.share) && r.share <= 1);
    if (kept.length < t.reasons.length) bad.push("throttle.reasons");
    t.reasons = kept;
  }
  for (const b of bad)
    s.unavailable.push({
      field: b,
      why: "the figure came out as no finite number ≥ 0 (or a share outside 0–100 %): left out",
    });
  return s;
}

/** Share of the covered part of [a, b] a violation counter (µs) counted; NaN where the counter is not one. */
function violationShare(p: Pt[], a: number, b: number): number {
  // A second of wall time holds at most a second of violation (1 % slack for the readings' own timing).
  const c = counterDelta(p, a, b, { maxRate: 1.01e6 });
  if (c.decreases || c.jumps || c.coveredS <= 0) return Number.NaN;
  return Math.min(1, c.value / 1e6 / c.coveredS);
}

function summarizeThrottle(
  byDev: Map<string, TelemetrySample[]>,
  a: number,
  b: number,
  deviceMax: number | null,
  unavailable: TelemetrySummary["unavailable"],
  notes: string[],
): TelemetrySummary["throttle"] {
  const reasonShares = new Map<string, number>();
  let limitShare = 0;
  let capShare = 0;
  let basis: "clock-event-reasons" | "violation-counters" | "sm-clock" | undefined;
  for (const [, ss] of byDev) {
    const masks = ss.filter((s) => s.clockEventReasons !== undefined);
    if (masks.length) {
      basis = "clock-event-reasons";
      const share = (bits: number) =>
        holdShare(
          masks.map((s) => ({ t: s.t, on: (s.clockEventReasons! & bits) !== 0 })),
          a,
          b,
        );
      for (const [name, bit] of Object.entries(CLOCK_EVENT_BITS)) {
        const sh = share(bit);
        if (sh > 0) reasonShares.set(name, Math.max(reasonShares.get(name) ?? 0, sh));
      }
      const bitsOf = (names: string[]) => names.reduce((m, n) => m | CLOCK_EVENT_BITS[n]!, 0);
      limitShare = Math.max(limitShare, share(bitsOf(LIMITING)));
      capShare = Math.max(capShare, share(bitsOf(POWER_CAP)));
      continue;
    }
    // Violation time: dmon's per-row share, or DCGM's cumulative µs counters.
    const pv = pts(ss, (s) => s.powerViolation);
    const tv = pts(ss, (s) => s.thermalViolation);
    const pvUs = pts(ss, (s) => s.powerViolationUs);
    const tvUs = pts(ss, (s) => s.thermalViolationUs);
    const pShare = pv.length ? backwardMean(pv, a, b) : pvUs.length >= 2 ? violationShare(pvUs, a, b) : Number.NaN;
    const tShare = tv.length ? backwardMean(tv, a, b) : tvUs.length >= 2 ? violationShare(tvUs, a, b) : Number.NaN;
    if (Number.isFinite(pShare) || Number.isFinite(tShare)) {
      basis ??= "violation-counters";
      if (Number.isFinite(pShare)) {
        capShare = Math.max(capShare, Math.min(1, pShare));
        if (pShare > 0) reasonShares.set("PowerViolation", Math.max(reasonShares.get("PowerViolation") ?? 0, pShare));
      }
      if (Number.isFinite(tShare) && tShare > 0)
        reasonShares.set("ThermalViolation", Math.max(reasonShares.get("ThermalViolation") ?? 0, tShare));
      limitShare = Math.max(limitShare, Math.min(1, Math.max(pShare || 0, tShare || 0)));
    }
  }
  if (!basis) {
    // Only clocks: a clock under its maximum says the GPU was held back, not why.
    const sm: { t: number; v: number }[] = [];
    let ref = deviceMax;
    for (const [, ss] of byDev) {
      for (const s of ss) if (s.smClockMHz !== undefined) sm.push({ t: s.t, v: s.smClockMHz });
    }
    if (!sm.length) {
      unavailable.push({
        field: "throttle",
        why: "no clocks_event_reasons, violation counters or SM clock readings in the capture",
      });
      return null;
    }
    if (ref === null) {
      ref = maxOf(sm.map((x) => x.v));
      notes.push(`no device maximum SM clock known: the highest clock seen (${ref} MHz) is the reference`);
    }
    const r = ref;
    sm.sort((x, y) => x.t - y.t);
    const lowered = holdShare(
      sm.map((x) => ({ t: x.t, on: x.v < CLOCK_LOWERED * r })),
      a,
      b,
    );
    notes.push(
      "throttling judged from the SM clock alone (no clocks_event_reasons or pviol in the capture): the cause of any lowering is unknown",
    );
    return {
      powerCapped: false,
      shareOfWindow: lowered,
      reasons: lowered > 0 ? [{ reason: "ClockBelowMax", share: lowered }] : [],
      basis: "sm-clock",
    };
  }
  return {
    powerCapped: capShare >= POWER_CAPPED_SHARE,
    shareOfWindow: limitShare,
    reasons: [...reasonShares].map(([reason, share]) => ({ reason, share })).sort((x, y) => y.share - x.share),
    basis,
  };
}
