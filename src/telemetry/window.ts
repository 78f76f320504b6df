// The loaded window of a capture: the span where a device works, found from its own readings (power well above
// its idle baseline, else busy time), or given with --window. Pure.

import { UsageError } from "../errors.ts";
import type { TelemetryCapture, TelemetrySample } from "./types.ts";

export interface TelemetryWindow {
  startS: number;
  endS: number;
  how: "given" | "detected" | "measured-run";
  /** What the detection read ("power.draw.instant", "power.draw (1 s average, lag removed)", "utilization.gpu"). */
  basis?: string;
  baseline?: number;
  threshold?: number;
  notes: string[];
}

export interface DetectOptions {
  /** Seconds over which the source averages `powerW` (nvidia-smi power.draw on Ampere and newer: 1); 0 = instantaneous. */
  powerAveragingS?: number;
}

type Series = { t: number; v: number }[];

function quantile(sorted: number[], q: number): number {
  if (!sorted.length) return Number.NaN;
  const pos = (sorted.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (pos - lo);
}

function series(samples: TelemetrySample[], pick: (s: TelemetrySample) => number | undefined): Series {
  const out: Series = [];
  for (const s of samples) {
    const v = pick(s);
    if (v !== undefined && Number.isFinite(v)) out.push({ t: s.t, v });
  }
  return out;
}

/** One device's loaded span, or undefined when its readings never rise clearly above their baseline. */
function detectDevice(
  samples: TelemetrySample[],
  opts: DetectOptions,
): { start: number; end: number; basis: string; baseline: number; threshold: number; notes: string[] } | undefined {
  const avgS = opts.powerAveragingS ?? 0;
  const candidates: { basis: string; s: Series; lagS: number; minRise: (base: number) => number }[] = [
    // Instant power has no lag; it is the sharpest edge there is.
    {
      basis: "power.draw.instant",
      s: series(samples, (x) => x.powerInstantW),
      lagS: 0,
      minRise: (b) => Math.max(20, 0.15 * b),
    },
    {
      basis: avgS > 0 ? `power.draw (${avgS} s average, lag removed)` : "power",
      s: series(samples, (x) => x.powerW),
      lagS: avgS,
      minRise: (b) => Math.max(20, 0.15 * b),
    },
    { basis: "utilization.gpu", s: series(samples, (x) => x.gpuBusy), lagS: 0, minRise: () => 0.2 },
    { basis: "SM active", s: series(samples, (x) => x.smActive), lagS: 0, minRise: () => 0.1 },
    { basis: "CPU busy", s: series(samples, (x) => x.cpuBusy), lagS: 0, minRise: () => 0.2 },
  ];
  for (const c of candidates) {
    if (c.s.length < 3) continue;
    const sorted = c.s.map((p) => p.v).sort((a, b) => a - b);
    const base = quantile(sorted, 0.1);
    const top = quantile(sorted, 0.9);
    if (top - base < c.minRise(base)) continue;
    // 30 % of the way from idle to load: clear of idle noise, below any plateau a real load reaches.
    const thr = base + 0.3 * (top - base);
    const pts = c.s;
    // Loaded runs, bridged over short dips (a sampling glitch, a pause between phases under a second).
    const typical = medianGap(pts);
    const bridge = Math.max(1, 3 * typical);
    const runs: { i0: number; i1: number }[] = [];
    for (let i = 0; i < pts.length; i++) {
      if (pts[i]!.v <= thr) continue;
      const last = runs.at(-1);
      if (last && pts[i]!.t - pts[last.i1]!.t <= bridge) last.i1 = i;
      else runs.push({ i0: i, i1: i });
    }
    if (!runs.length) continue;
    // The run with the most work above baseline wins: a lone spike has little.
    let best = runs[0]!;
    let bestW = -1;
    for (const r of runs) {
      let w = 0;
      for (let i = r.i0; i < r.i1; i++) w += (pts[i + 1]!.t - pts[i]!.t) * (pts[i]!.v - base);
      w += typical * (pts[r.i1]!.v - base);
      if (w > bestW) {
        bestW = w;
        best = r;
      }
    }
    const notes: string[] = [];
    if (runs.length > 1) notes.push(`${runs.length} loaded spans in ${c.basis}; the one with the most work kept`);
    // Hysteresis: a load is entered at 30 % of the rise but its edges run out to where the signal is back in
    // idle noise, so the low start of a ramp (or a light phase next to a heavy one) stays in the window.
    // Idle noise: 3 robust σ (MAD) of the readings under the entry threshold, at least 5 % of the rise.
    const idle = pts.filter((p) => p.v <= thr).map((p) => p.v);
    const mid = quantile(
      [...idle].sort((a, b) => a - b),
      0.5,
    );
    const mad = quantile(
      idle.map((v) => Math.abs(v - mid)).sort((a, b) => a - b),
      0.5,
    );
    const low = base + Math.max(3 * 1.4826 * (Number.isFinite(mad) ? mad : 0), 0.05 * (top - base));
    let i0 = best.i0;
    let i1 = best.i1;
    while (i0 > 0 && pts[i0 - 1]!.v > low) i0--;
    while (i1 < pts.length - 1 && pts[i1 + 1]!.v > low) i1++;
    const inside = pts.slice(i0, i1 + 1).map((p) => p.v);
    const plateau = quantile(
      inside.sort((a, b) => a - b),
      0.5,
    );
    // Crossings of the exit threshold, interpolated between the samples either side.
    const cross = (i: number, j: number) => {
      const a = pts[i]!;
      const b = pts[j]!;
      if (b.v === a.v) return (a.t + b.t) / 2;
      return a.t + ((low - a.v) / (b.v - a.v)) * (b.t - a.t);
    };
    let start = i0 > 0 ? cross(i0 - 1, i0) : pts[i0]!.t;
    let end = i1 < pts.length - 1 ? cross(i1, i1 + 1) : pts[i1]!.t;
    if (i0 === 0) notes.push("the capture starts under load: the window starts at its first sample");
    if (i1 === pts.length - 1) notes.push("the capture ends under load: the window ends at its last sample");
    if (c.lagS > 0 && plateau > base) {
      // A trailing average of a step from idle to the plateau crosses a fraction f of the rise f × lag after
      // the step, and falls past it (1 − f) × lag after the load stops.
      const f = Math.min(1, Math.max(0, (low - base) / (plateau - base)));
      if (i0 > 0) start -= f * c.lagS;
      if (i1 < pts.length - 1) end -= (1 - f) * c.lagS;
    }
    return { start, end, basis: c.basis, baseline: base, threshold: low, notes };
  }
  return undefined;
}

function medianGap(pts: Series): number {
  const g: number[] = [];
  for (let i = 1; i < pts.length; i++) g.push(pts[i]!.t - pts[i - 1]!.t);
  g.sort((a, b) => a - b);
  return g.length ? g[Math.floor(g.length / 2)]! : 1;
}

/**
 * The loaded window over all devices: from the earliest device's load start to the latest one's end. Falls back
 * to the whole capture (with a note) when no device shows a clear rise above its baseline.
 */
export function detectWindow(capture: TelemetryCapture, opts: DetectOptions = {}): TelemetryWindow {
  const samples = capture.samples;
  if (!samples.length) throw new UsageError("the capture has no samples: there is no window to find");
  const byDev = new Map<string, TelemetrySample[]>();
  for (const s of samples) {
    const a = byDev.get(s.device) ?? [];
    a.push(s);
    byDev.set(s.device, a);
  }
  let start = Number.POSITIVE_INFINITY;
  let end = Number.NEGATIVE_INFINITY;
  const notes: string[] = [];
  let basis: string | undefined;
  let baseline: number | undefined;
  let threshold: number | undefined;
  for (const [dev, ss] of byDev) {
    const d = detectDevice(ss, opts);
    if (!d) continue;
    start = Math.min(start, d.start);
    end = Math.max(end, d.end);
    basis ??= d.basis;
    baseline ??= d.baseline;
    threshold ??= d.threshold;
    for (const n of d.notes) notes.push(byDev.size > 1 ? `${dev}: ${n}` : n);
  }
  if (!Number.isFinite(start) || end <= start) {
    return {
      startS: samples[0]!.t,
      endS: samples.at(-1)!.t,
      how: "detected",
      notes: ["no device rose clearly above its idle baseline: the whole capture is the window"],
    };
  }
  return { startS: start, endS: end, how: "detected", basis, baseline, threshold, notes };
}

/**
 * `--window START,END`. Each bound is unix seconds (≥ 1e8), an ISO 8601 time (`2026-12-04T17:46:58.8Z`; without a
 * zone it is local time), or seconds from the capture's first sample (a smaller number, e.g. `2.5,10`).
 */
export function parseWindowFlag(text: string, firstSampleS: number | undefined): { startS: number; endS: number } {
  const parts = text.split(",");
  if (parts.length !== 2)
    throw new UsageError(`--window: expected START,END, got "${text}"`, {
      hint: "unix seconds, ISO times or seconds from the first sample, e.g. --window 3.2,11.5",
    });
  const bound = (p: string): number => {
    const s = p.trim();
    if (/^[-+]?\d+(\.\d+)?$/.test(s)) {
      const n = Number(s);
      if (Math.abs(n) >= 1e8) return n;
      if (firstSampleS === undefined)
        throw new UsageError(`--window: "${s}" is seconds from the first sample, but the capture has no samples`);
      return firstSampleS + n;
    }
    const ms = Date.parse(s);
    if (!/^\d{4}-\d{2}-\d{2}/.test(s) || Number.isNaN(ms))
      throw new UsageError(`--window: "${s}" is neither seconds nor an ISO time`);
    return ms / 1000;
  };
  const startS = bound(parts[0]!);
  const endS = bound(parts[1]!);
  if (!(endS > startS)) throw new UsageError(`--window: the end must be after the start, got "${text}"`);
  return { startS, endS };
}
