// The figures derived from a capture over a window: energy, J/token, power, clocks, throttling, DRAM bandwidth,
// interconnect bytes. Every definition is in docs/telemetry.md; nothing unmeasured becomes a zero. Pure.

import { CLOCK_EVENT_BITS } from "./smi.ts";
import type { TelemetryCapture, TelemetrySample, TelemetrySummary } from "./types.ts";

export interface SummaryOptions {
  window: { startS: number; endS: number; how: "given" | "detected" | "measured-run" };
  tokens?: number;
  /** Peak DRAM bandwidth of one device in GB/s (for achieved bandwidth = DRAM active × peak). */
  peakBandwidthGBs?: number;
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
    err += r * interpErr(tc);
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

/**
 * Delta of a cumulative counter over [a, b]: pieces between readings, clipped linearly at the window's edges. A
 * decrease is a reset (a driver reload, an exporter restart): the piece after it counts from zero, and it is said.
 */
export function counterDelta(
  p: Pt[],
  a: number,
  b: number,
): { value: number; resets: number; errorBound: number; covered: boolean } {
  let value = 0;
  let resets = 0;
  let err = 0;
  for (let i = 1; i < p.length; i++) {
    const t0 = p[i - 1]!.t;
    const t1 = p[i]!.t;
    if (t1 <= a || t0 >= b || t1 <= t0) continue;
    let d = p[i]!.v - p[i - 1]!.v;
    if (d < 0) {
      resets++;
      d = p[i]!.v;
    }
    const lo = Math.max(a, t0);
    const hi = Math.min(b, t1);
    const frac = (hi - lo) / (t1 - t0);
    value += d * frac;
    // A clipped piece assumes even use over its interval; the rest of the piece bounds what that can misplace.
    if (frac < 1) err += d * Math.min(frac, 1 - frac);
  }
  const covered = p.length >= 2 && p[0]!.t <= a + 1e-6 && p.at(-1)!.t >= b - 1e-6;
  return { value, resets, errorBound: err, covered };
}

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

const isCpu = (d: string) => d === "cpu" || d.startsWith("cpu") || d.startsWith("package");

/** Derives the summary over opts.window. */
export function summarizeTelemetry(capture: TelemetryCapture, opts: SummaryOptions): TelemetrySummary {
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
  const energyDevs = gpuDevs.length ? gpuDevs : cpuDevs;
  const avgS = capture.powerAveragingS ?? 0;

  // Energy per device: the counter where there is one, else integrated power.
  let energy = 0;
  let energyErr = 0;
  let method: "counter" | "integrated-power" | null = null;
  let devsWithEnergy = 0;
  const powerSeriesForPeak: Pt[][] = [];
  for (const d of energyDevs) {
    const ss = byDev.get(d)!;
    const counter = pts(ss, (s) => s.energyJ);
    const avg = pts(ss, (s) => s.powerW);
    const inst = pts(ss, (s) => s.powerInstantW);
    powerSeriesForPeak.push(avg.length ? avg : inst);
    if (counter.length >= 2) {
      const c = counterDelta(counter, a, b);
      if (c.resets) notes.push(`${d}: the energy counter went down ${c.resets}× (a reset); the pieces are summed`);
      if (!c.covered) notes.push(`${d}: the energy counter's readings do not span the whole window`);
      energy += c.value;
      energyErr += c.errorBound;
      method = method === "integrated-power" ? method : "counter";
      devsWithEnergy++;
      continue;
    }
    const byAvg =
      avg.length >= 2
        ? avgS > 0
          ? integrateTrailingAverage(avg, a, b, avgS)
          : integrateTrapezoid(avg, a, b)
        : undefined;
    const byInst = inst.length >= 2 ? integrateTrapezoid(inst, a, b) : undefined;
    const primary = byAvg ?? byInst;
    if (!primary) continue;
    let err = primary.errorBound;
    if (byAvg && byInst) {
      // Two independent readings of one quantity: their disagreement is part of the uncertainty.
      const diff = Math.abs(byAvg.value - byInst.value);
      err = Math.max(err, diff);
      notes.push(
        `${d}: power.draw${avgS > 0 ? ` (${avgS} s average, lag removed)` : ""} integrates to ${byAvg.value.toFixed(1)} J, power.draw.instant to ${byInst.value.toFixed(1)} J (${((100 * (byInst.value - byAvg.value)) / byAvg.value).toFixed(2)} %)`,
      );
    }
    // The readings' own stated accuracy, held over the whole window (a calibration offset does not average out).
    if (capture.powerAccuracyW) err += capture.powerAccuracyW * span;
    // Coarse sample times (dmon's whole seconds) can shift every change of power by up to that much.
    const res = capture.timeResolutionS ?? 0;
    if (res > 0) {
      const series = avg.length >= 2 ? avg : inst;
      let moved = 0;
      for (let i = 1; i < series.length; i++)
        if (series[i]!.t >= a - res && series[i - 1]!.t <= b + res) moved += Math.abs(series[i]!.v - series[i - 1]!.v);
      err += (res * moved) / 2;
    }
    energy += primary.value;
    energyErr += err;
    method = "integrated-power";
    devsWithEnergy++;
  }
  const haveEnergy = devsWithEnergy > 0 && span > 0;
  if (!haveEnergy)
    unavailable.push({
      field: "energyJ",
      why:
        span <= 0
          ? "one reading per device (a single scrape): energy needs a window, i.e. two readings of the counter or of power"
          : "no energy counter and fewer than two power readings per device",
    });
  else if (devsWithEnergy < energyDevs.length)
    notes.push(`energy covers ${devsWithEnergy} of ${energyDevs.length} devices (the rest have no power readings)`);
  if (method === "integrated-power")
    notes.push(
      `energy integrated from power (${avgS > 0 ? `power.draw as a ${avgS} s trailing average, lag removed` : "trapezoid"}); ± is the sampling bound${capture.powerAccuracyW ? ` plus the readings' stated ±${capture.powerAccuracyW} W over the window` : ""}`,
    );

  // Peak power: the highest sum over devices at any reading time (averaged power.draw where present).
  let peak: number | null = null;
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
  if (tokens === null) unavailable.push({ field: "joulesPerToken", why: "no token count given (--tokens)" });

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
    let cpuEnergy: number | null = null;
    for (const d of cpuDevs) {
      const c = pts(byDev.get(d)!, (s) => s.energyJ);
      if (c.length >= 2) cpuEnergy = (cpuEnergy ?? 0) + counterDelta(c, a, b).value;
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
      if (run.covered && run.value + wait.value > 0)
        cpu.server = {
          name,
          cpuCores: run.value / span,
          runQueueShare: wait.value / (run.value + wait.value),
          runQueueS: wait.value,
        };
      else
        unavailable.push({
          field: "serverRunQueue",
          why: run.covered ? `${name} did not run in the window` : `${name}: readings do not cover the window`,
        });
    }
  }

  return {
    source: capture.source,
    window: { startS: a, endS: b, how: opts.window.how },
    devices: [...byDev.keys()],
    samples: inWin.length,
    energyJ,
    energyMethod: haveEnergy ? method : null,
    energyErrorJ: haveEnergy ? energyErr : null,
    avgPowerW: haveEnergy ? energy / span : null,
    peakPowerW: peak,
    tokens,
    joulesPerToken: energyJ !== null && tokens ? energyJ / tokens : null,
    tokensPerJoule: energyJ !== null && tokens && energyJ > 0 ? tokens / energyJ : null,
    smClockMHz,
    memClockMHz: mem.length ? { median: median(mem) } : null,
    throttle,
    utilization: anyUtil ? utilization : null,
    dram,
    interconnect,
    cpu,
    unavailable: dedupe([...capture.unavailable.filter((u) => !(u.field === "energyJ" && haveEnergy)), ...unavailable]),
    notes: [...capture.notes, ...notes],
  };
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
    const pShare = pv.length
      ? backwardMean(pv, a, b)
      : pvUs.length >= 2
        ? counterDelta(pvUs, a, b).value / 1e6 / (b - a)
        : Number.NaN;
    const tShare = tv.length
      ? backwardMean(tv, a, b)
      : tvUs.length >= 2
        ? counterDelta(tvUs, a, b).value / 1e6 / (b - a)
        : Number.NaN;
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
