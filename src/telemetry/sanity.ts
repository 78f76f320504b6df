// Readings that cannot be true are dropped before anything is derived from them, each field said once in a note:
// power and energy are finite and ≥ 0, shares lie in [0, 1], clocks and rates are ≥ 0, and nothing exceeds a
// bound no real device reaches. The bounds are physical, not fitted to any capture (docs/telemetry.md). Pure.

import type { TelemetryCapture, TelemetrySample } from "./types.ts";

/**
 * No single accelerator or CPU package draws this: the highest board powers shipped are ~1.4 kW (MI355X) and
 * ~1.2 kW (B300); a whole 8-GPU node is ~10 kW. Used where the device's power limit is unknown.
 */
export const MAX_DEVICE_POWER_W = 5000;
/**
 * Above this multiple of the device's own power limit a reading is impossible. Instant power overshoots the
 * limit for milliseconds (the H200 captures here reach ~1.07×; NVIDIA's excursion figures are under 2×).
 */
export const POWER_LIMIT_FACTOR = 3;
/** A counter of J since boot: 5 kW for 60 years is 9.5e12 J. Past this a float also loses the mJ a counter counts. */
export const MAX_ENERGY_COUNTER_J = 1e13;
/** No clock in any GPU or memory reaches 100 GHz (GDDR7's effective rates are ~30 GHz). */
export const MAX_CLOCK_MHZ = 100_000;
/** Link rates: NVLink 5 moves 1.8 TB/s per GPU; 10 TB/s is past any link. */
export const MAX_LINK_BPS = 1e13;
/** Sample times in unix seconds run to 2100-01-01; times under 1e8 s count from a capture's start (relative). */
export const LATEST_TIME_S = 4_102_444_800;

export interface ScreenOptions {
  /**
   * The embedded sim exports power and byte rates per wall second of a clock running this many times faster
   * than real time (its --time-scale): the rate bounds scale with it. Default 1.
   */
  rateScale?: number;
}

type Field = Exclude<keyof TelemetrySample, "t" | "device">;
type Bound = { lo: number; hi: number; unit: string; why: string };

const RATIO: Bound = { lo: 0, hi: 1, unit: "", why: "a share of time lies in [0, 100 %]" };
const COUNT: Bound = { lo: 0, hi: Number.POSITIVE_INFINITY, unit: "", why: "a count or amount is ≥ 0" };

function bounds(powerHiW: number, rateScale: number): Partial<Record<Field, Bound>> {
  const power: Bound = { lo: 0, hi: powerHiW, unit: "W", why: `power is finite, ≥ 0 and at most ${powerHiW} W` };
  const clock: Bound = { lo: 0, hi: MAX_CLOCK_MHZ, unit: "MHz", why: `a clock is ≥ 0 and under ${MAX_CLOCK_MHZ} MHz` };
  const link: Bound = {
    lo: 0,
    hi: MAX_LINK_BPS * rateScale,
    unit: "B/s",
    why: `a link rate is ≥ 0 and under ${MAX_LINK_BPS * rateScale} B/s`,
  };
  return {
    powerW: power,
    powerInstantW: power,
    powerLimitW: {
      lo: 0,
      hi: MAX_DEVICE_POWER_W,
      unit: "W",
      why: `a power limit is ≥ 0 and under ${MAX_DEVICE_POWER_W} W`,
    },
    energyJ: {
      lo: 0,
      hi: MAX_ENERGY_COUNTER_J,
      unit: "J",
      why: `an energy counter is ≥ 0 and under ${MAX_ENERGY_COUNTER_J} J (5 kW for 60 years)`,
    },
    smClockMHz: clock,
    smClockMaxMHz: clock,
    memClockMHz: clock,
    gpuBusy: RATIO,
    memBusy: RATIO,
    dramActive: RATIO,
    smActive: RATIO,
    tensorActive: RATIO,
    cpuBusy: RATIO,
    powerViolation: RATIO,
    thermalViolation: RATIO,
    pcieTxBps: link,
    pcieRxBps: link,
    nvlinkTxBps: link,
    nvlinkRxBps: link,
    clockEventReasons: { lo: 0, hi: 0xffffffff, unit: "", why: "a clock event reason mask is a 32-bit integer" },
    powerViolationUs: COUNT,
    thermalViolationUs: COUNT,
    temperatureC: { lo: -60, hi: 200, unit: "°C", why: "a GPU sensor reads between −60 and 200 °C" },
    memoryUsedMiB: COUNT,
    memoryTotalMiB: COUNT,
    serverCpuS: COUNT,
    serverRunQueueS: COUNT,
  };
}

/** The highest power a device's reading may show: a multiple of its own limit where known, else the absolute bound. */
export function powerBoundW(limitW: number | undefined, rateScale = 1): number {
  const sane = limitW !== undefined && Number.isFinite(limitW) && limitW > 0 && limitW <= MAX_DEVICE_POWER_W;
  return (sane ? POWER_LIMIT_FACTOR * limitW : MAX_DEVICE_POWER_W) * rateScale;
}

/** A sample time is usable: finite, ≥ 0 and before 2100 (relative times are small positive numbers). */
export function saneTime(t: number): boolean {
  return Number.isFinite(t) && t >= 0 && t <= LATEST_TIME_S;
}

interface Dropped {
  n: number;
  first: string;
  why: string;
}

/** Accumulates what was dropped, one note per field. */
class Tally {
  private readonly byField = new Map<string, Dropped>();
  add(field: string, value: string, device: string, why: string): void {
    const d = this.byField.get(field);
    if (d) d.n++;
    else this.byField.set(field, { n: 1, first: `${value} (${device})`, why });
  }
  notes(): string[] {
    return [...this.byField].map(
      ([f, d]) =>
        `${f}: ${d.n} reading${d.n === 1 ? "" : "s"} dropped as impossible (first: ${d.first}); ${d.why}: never summed as measured`,
    );
  }
}

function show(v: number, unit: string): string {
  const n = Number.isFinite(v) ? String(v) : v > 0 ? "+Inf" : v < 0 ? "−Inf" : "NaN";
  return unit ? `${n} ${unit}` : n;
}

/** One sample with its impossible fields removed; `tally` hears of each. */
function screenOne(s: TelemetrySample, b: Partial<Record<Field, Bound>>, tally: Tally): TelemetrySample {
  let out: TelemetrySample | null = null;
  for (const k in s) {
    if (k === "t" || k === "device") continue;
    const f = k as Field;
    const v = s[f];
    if (v === undefined) continue;
    const bound = b[f];
    const ok =
      typeof v === "number" &&
      Number.isFinite(v) &&
      (!bound || (v >= bound.lo && v <= bound.hi)) &&
      (f !== "clockEventReasons" || Number.isInteger(v));
    if (ok) continue;
    out ??= { ...s };
    delete out[f];
    tally.add(f, show(v as number, bound?.unit ?? ""), s.device, bound?.why ?? "a reading is a finite number");
  }
  return out ?? s;
}

/** Each device's sane power limit (the highest it reports, from its facts or its readings). */
function deviceLimits(cap: TelemetryCapture): Map<string, number> {
  const out = new Map<string, number>();
  const take = (key: string, w: number | undefined) => {
    if (w === undefined || !Number.isFinite(w) || w <= 0 || w > MAX_DEVICE_POWER_W) return;
    out.set(key, Math.max(out.get(key) ?? 0, w));
  };
  for (const d of cap.devices) take(d.key, d.powerLimitW);
  for (const s of cap.samples) take(s.device, s.powerLimitW);
  return out;
}

/**
 * The capture without impossible readings: a sample whose time is not a time is dropped whole, a field out of
 * its bounds is removed from its sample, and readings of one device at one time after the first are dropped
 * (two values at one instant contradict each other). Returns the same capture when nothing is wrong.
 */
export function screenCapture(cap: TelemetryCapture, opts: ScreenOptions = {}): TelemetryCapture {
  const scale =
    opts.rateScale !== undefined && opts.rateScale > 0 && Number.isFinite(opts.rateScale) ? opts.rateScale : 1;
  const limits = deviceLimits(cap);
  const perDevice = new Map<string, Partial<Record<Field, Bound>>>();
  const boundsOf = (dev: string) => {
    let b = perDevice.get(dev);
    if (!b) perDevice.set(dev, (b = bounds(powerBoundW(limits.get(dev), scale), scale)));
    return b;
  };
  const tally = new Tally();
  let badTime = 0;
  let firstBadTime = "";
  let dupes = 0;
  const lastT = new Map<string, number>();
  const kept: TelemetrySample[] = [];
  let changed = false;
  // Sorted by time: a device's repeated time is its previous reading's.
  const sorted = isSorted(cap.samples) ? cap.samples : [...cap.samples].sort((x, y) => x.t - y.t);
  if (sorted !== cap.samples) changed = true;
  for (const s of sorted) {
    if (!saneTime(s.t)) {
      badTime++;
      firstBadTime ||= `${show(s.t, "s")} (${s.device})`;
      changed = true;
      continue;
    }
    if (lastT.get(s.device) === s.t) {
      dupes++;
      changed = true;
      continue;
    }
    lastT.set(s.device, s.t);
    const x = screenOne(s, boundsOf(s.device), tally);
    if (x !== s) changed = true;
    kept.push(x);
  }
  if (!changed) return cap;
  const notes = [...cap.notes];
  if (badTime)
    notes.push(
      `${badTime} reading${badTime === 1 ? "" : "s"} dropped: the time is not a time (first: ${firstBadTime}); sample times are finite, ≥ 0 and before 2100`,
    );
  if (dupes)
    notes.push(
      `${dupes} reading${dupes === 1 ? "" : "s"} dropped: a device's reading at the same time as its previous one (equal timestamps); the first of each is kept`,
    );
  notes.push(...tally.notes());
  return { ...cap, samples: kept, notes };
}

function isSorted(xs: readonly TelemetrySample[]): boolean {
  for (let i = 1; i < xs.length; i++) if (xs[i]!.t < xs[i - 1]!.t) return false;
  return true;
}

/** One live reading with impossible fields removed (telemetry watch), and the notes for what was removed. */
export function screenSample(
  s: TelemetrySample,
  limitW?: number,
  opts: ScreenOptions = {},
): { sample: TelemetrySample | null; notes: string[] } {
  if (!saneTime(s.t)) return { sample: null, notes: [`a reading of ${s.device} dropped: its time is not a time`] };
  const tally = new Tally();
  const scale = opts.rateScale ?? 1;
  const x = screenOne(s, bounds(powerBoundW(limitW ?? s.powerLimitW, scale), scale), tally);
  return { sample: x, notes: tally.notes() };
}
