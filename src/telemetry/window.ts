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
  /** Detected: the energy the placement of the edges can move (half a sampling interval × the power step at each). */
  edgeErrorJ?: number;
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

/** The most kink positions a cut ramp's fit tries (a grid of 1.5 ms over the 1.5 s bracket of a 1 s average). */
const KINK_CANDIDATES = 1000;

/**
 * Idle and loaded levels of a signal, whatever share of the capture each holds (an idle tail of any length, a
 * load of any length): the two classes of Otsu's split of its values (the cut that maximizes the variance
 * between them). The idle level is the low class's 10th percentile (a hot die's slow cool-down sits above it),
 * the loaded level the high class's median. Undefined when the high class has fewer than 3 readings.
 */
function levels(values: number[]): { base: number; top: number } | undefined {
  const v = Float64Array.from(values).sort();
  const n = v.length;
  if (n < 4) return undefined;
  let total = 0;
  for (const x of v) total += x;
  let left = 0;
  let bestK = -1;
  let bestVar = -1;
  for (let k = 1; k < n; k++) {
    left += v[k - 1]!;
    if (v[k] === v[k - 1]) continue;
    const m0 = left / k;
    const m1 = (total - left) / (n - k);
    const between = k * (n - k) * (m1 - m0) ** 2;
    if (between > bestVar) {
      bestVar = between;
      bestK = k;
    }
  }
  if (bestK < 0 || n - bestK < 3) return undefined;
  const low = Array.from(v.subarray(0, bestK));
  const high = Array.from(v.subarray(bestK));
  return { base: quantile(low, 0.1), top: quantile(high, 0.5) };
}

/** Noise of a signal's idle readings: σ from successive differences (a slow drift, a cooling die, adds little). */
function idleNoise(pts: Series, under: number): number {
  const d: number[] = [];
  for (let i = 1; i < pts.length; i++)
    if (pts[i]!.v <= under && pts[i - 1]!.v <= under) d.push(Math.abs(pts[i]!.v - pts[i - 1]!.v));
  if (!d.length) return 0;
  d.sort((x, y) => x - y);
  // MAD of differences of independent readings: σ·√2·0.6745.
  return (1.4826 * quantile(d, 0.5)) / Math.SQRT2;
}

/** The device's own word on whether it worked: utilization.gpu (a kernel ran), else SM active. */
function workSeries(samples: TelemetrySample[]): Series {
  const w = series(samples, (x) => x.gpuBusy);
  return w.length >= 2 ? w : series(samples, (x) => x.smActive);
}

/**
 * Whether a device worked at each reading of a power signal: a work reading above zero in the span the power
 * reading describes ([t − lag, t] for a trailing average). Null without work readings.
 */
function workGate(samples: TelemetrySample[], lagS: number): ((t: number) => boolean) | null {
  const w = workSeries(samples);
  if (w.length < 2) return null;
  // The last reading of work above zero at or before each index (−1: none): one lookup per question, not a scan
  // of every reading in the lag (work read every few µs would make that quadratic).
  const lastPos = new Int32Array(w.length);
  for (let i = 0, last = -1; i < w.length; i++) lastPos[i] = last = w[i]!.v > 0 ? i : last;
  const firstAfter = (x: number, strict: boolean) => {
    let lo = 0;
    let hi = w.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (strict ? w[mid]!.t <= x : w[mid]!.t < x) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
  return (t: number) => {
    // Readings of work in [t − lag, t], or the last one at or before t when none lies inside.
    const lo = firstAfter(t - lagS, false);
    const hi = firstAfter(t, true) - 1;
    if (hi >= lo) return lastPos[hi]! >= lo;
    const prev = lo > 0 ? w[lo - 1] : undefined;
    return prev === undefined || prev.v > 0;
  };
}

/** One device's loaded span, or undefined when its readings never rise clearly above their baseline. */
function detectDevice(
  samples: TelemetrySample[],
  opts: DetectOptions,
):
  | {
      start: number;
      end: number;
      basis: string;
      baseline: number;
      threshold: number;
      notes: string[];
      edgeErrorJ: number;
    }
  | undefined {
  const avgS = opts.powerAveragingS ?? 0;
  const candidates: { basis: string; s: Series; lagS: number; minRise: (base: number) => number; gated: boolean }[] = [
    // Instant power has no lag; it is the sharpest edge there is.
    {
      basis: "power.draw.instant",
      s: series(samples, (x) => x.powerInstantW),
      lagS: 0,
      minRise: (b) => Math.max(20, 0.15 * b),
      gated: true,
    },
    {
      basis: avgS > 0 ? `power.draw (${avgS} s average, lag removed)` : "power",
      s: series(samples, (x) => x.powerW),
      lagS: avgS,
      minRise: (b) => Math.max(20, 0.15 * b),
      gated: true,
    },
    { basis: "utilization.gpu", s: series(samples, (x) => x.gpuBusy), lagS: 0, minRise: () => 0.2, gated: false },
    { basis: "SM active", s: series(samples, (x) => x.smActive), lagS: 0, minRise: () => 0.1, gated: false },
    { basis: "CPU busy", s: series(samples, (x) => x.cpuBusy), lagS: 0, minRise: () => 0.2, gated: false },
  ];
  for (const c of candidates) {
    if (c.s.length < 3) continue;
    const lv = levels(c.s.map((p) => p.v));
    if (!lv) continue;
    const { base, top } = lv;
    if (top - base < c.minRise(base)) continue;
    // 30 % of the way from idle to load: clear of idle noise, below any plateau a real load reaches.
    const thr = base + 0.3 * (top - base);
    const pts = c.s;
    const typical = medianGap(pts);
    // Where the device says whether it worked (utilization.gpu, SM active), a reading of no work is no load,
    // however high the power: a hot die idles above its cold level for seconds (leakage falls as it cools).
    const works = c.gated ? workGate(samples, c.lagS) : null;
    const working = (i: number) => works === null || works(pts[i]!.t);
    // Loaded runs, bridged over short dips (a sampling glitch, a pause between phases under a second).
    const bridge = Math.max(1, 3 * typical);
    const runs: { i0: number; i1: number }[] = [];
    for (let i = 0; i < pts.length; i++) {
      if (pts[i]!.v <= thr || !working(i)) continue;
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
    // idle noise (3 σ, at least 5 % of the rise), so the low start of a ramp or a light phase stays in; never
    // over a reading of no work.
    const low = base + Math.max(3 * idleNoise(pts, thr), 0.05 * (top - base));
    const inLoad = (i: number) => pts[i]!.v > low && working(i);
    let i0 = best.i0;
    let i1 = best.i1;
    while (i0 > 0 && inLoad(i0 - 1)) i0--;
    while (i1 < pts.length - 1 && inLoad(i1 + 1)) i1++;
    // The level the load held at each edge: the median of the core's readings in the second inward from where
    // it crossed the entry threshold, past the averaging lag.
    const levelNear = (edgeT: number, inward: 1 | -1) => {
      const near: number[] = [];
      for (let i = best.i0; i <= best.i1; i++) {
        const dt = inward * (pts[i]!.t - edgeT);
        if (dt >= c.lagS && dt <= c.lagS + 1) near.push(pts[i]!.v);
      }
      return near.length
        ? quantile(
            near.sort((x, y) => x - y),
            0.5,
          )
        : top;
    };
    const level = { start: levelNear(pts[best.i0]!.t, 1), end: levelNear(pts[best.i1]!.t, -1) };
    const cross = (i: number, j: number, y: number) => {
      const a = pts[i]!;
      const b = pts[j]!;
      if (b.v === a.v) return (a.t + b.t) / 2;
      return a.t + ((y - a.v) / (b.v - a.v)) * (b.t - a.t);
    };
    // The work reading at a time (the last at or before it), against the load's full level: work readings are
    // themselves averages over a period (NVML: 1/6 s to 1 s), so after a load stops they decay for that long.
    const work = c.gated ? workSeries(samples) : [];
    // The load's full level of work: its upper readings (a load's own periods ramp and decay around it).
    const full = quantile(
      work
        .filter((p) => p.v > 0)
        .map((p) => p.v)
        .sort((x, y) => x - y),
      0.9,
    );
    const fullAt = (t: number) => {
      let lo = 0;
      let hi = work.length;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (work[mid]!.t <= t) lo = mid + 1;
        else hi = mid;
      }
      return lo > 0 && work[lo - 1]!.v >= full;
    };
    // Each edge lies between the outermost reading of the load and the one outside it. First, at the end, readings
    // the work readings kept only by their own lag are given back: going inward, those under half-way between the load's
    // level and the outside level, whose work reading is below the load's full level (a light phase of the load
    // works at its full level and stays). Then:
    // - a reading with no lag stepped at an unknown instant between the two: the middle of the interval;
    // - a trailing average crosses half-way between two levels half the averaging span after the step.
    const edge = (edgeIdx: number, dir: 1 | -1): { t: number; f: number; atCaptureEdge: boolean } => {
      const lvl = dir === 1 ? level.end : level.start;
      const outer = edgeIdx + dir;
      const hasOuter = outer >= 0 && outer < pts.length;
      const out = hasOuter ? pts[outer]!.v : pts[edgeIdx]!.v;
      const mid = (lvl + out) / 2;
      let inner = edgeIdx;
      const stop = dir === 1 ? best.i0 : best.i1;
      // Only after a load: work readings rise with the load at once (a partial first period is work), but they
      // decay for a period after it stops.
      // (Not where a trailing average runs off the capture's end: its readings hold the ramp, not the outside.)
      if (work.length >= 2 && dir === 1 && (hasOuter || c.lagS === 0))
        while (inner !== stop && pts[inner]!.v < mid && !fullAt(pts[inner]!.t)) inner -= dir;
      if (inner === edgeIdx && !hasOuter) return { t: pts[inner]!.t, f: -1, atCaptureEdge: true };
      const o = inner + dir;
      if (c.lagS === 0) return { t: (pts[inner]!.t + pts[o]!.t) / 2, f: -1, atCaptureEdge: false };
      if (inner === edgeIdx && out <= low) {
        // Outside in idle noise: where the average leaves it (the exit threshold), a fraction f of the way up.
        const f = lvl > base ? Math.min(1, Math.max(0, (low - base) / (lvl - base))) : 0;
        return { t: cross(o, inner, low), f, atCaptureEdge: false };
      }
      // Half-way between the outside and the level inside: the load's, or a light phase's where one was kept.
      const y = pts[inner]!.v >= mid ? mid : (pts[inner]!.v + out) / 2;
      return { t: cross(inner, o, y), f: 0.5, atCaptureEdge: false };
    };
    // A capture cut inside a trailing average's ramp (it ends less than the averaging span after the load
    // stopped, so the average never got back down) still shows where the ramp began: the average holds the load's
    // level, then runs linearly away from it for one span. A hinge (level, a line from the kink, level) fitted by least squares to
    // the readings of the last span shows the kink: the edge. The work readings bracket it: one at the load's full
    // level means work up to its time, one of zero none in the period before it (a wandering average alone can
    // look like the start of a ramp). Taken only where the work readings say the load was stopping there.
    const cutRamp = (dir: 1 | -1): number | undefined => {
      if (c.lagS <= 0 || work.length < 2) return undefined;
      const last = dir === 1 ? pts.length - 1 : 0;
      const tl = pts[last]!.t;
      const edgeWork = work.reduce((x, p) => (dir * (p.t - x.t) > 0 && dir * (p.t - tl) <= 0 ? p : x), work[0]!);
      if (edgeWork.v >= full) return undefined;
      const xs = pts.filter((p) => dir * (tl - p.t) <= c.lagS + 0.5 && dir * (tl - p.t) >= 0);
      if (xs.length < 5) return undefined;
      let lo = tl - dir * (c.lagS + 0.5);
      let hi = tl;
      for (const p of dir === 1 ? work : [...work].reverse()) {
        if (dir * (p.t - (tl - dir * (c.lagS + 0.5))) < 0) continue;
        if (p.v >= full && dir * (p.t - lo) > 0) lo = p.t;
        if (p.v === 0 && dir * (p.t - lo) > 0) {
          hi = p.t;
          break;
        }
      }
      let bestK: number | undefined;
      let bestSq = Number.POSITIVE_INFINITY;
      // Candidate kinks on a grid of a tenth of the sampling interval, within that bracket. The model is exact for
      // a step: v = L·(1 − g) + L'·g, g = the share of the averaging span past the kink (0 before it, 1 after the
      // ramp's whole span), so the ramp's slope is tied to the two levels and the span. Least squares in L, L'.
      // At most KINK_CANDIDATES of them: power read far faster than work (µs apart) would make the fit quadratic.
      const step = Math.max(typical / 10, Math.abs(hi - lo) / KINK_CANDIDATES);
      for (let kink = lo; dir * (hi - kink) >= 0; kink += dir * step) {
        let s00 = 0;
        let s01 = 0;
        let s11 = 0;
        let s0v = 0;
        let s1v = 0;
        for (const p of xs) {
          const g = Math.min(1, Math.max(0, (dir * (p.t - kink)) / c.lagS));
          s00 += (1 - g) ** 2;
          s01 += (1 - g) * g;
          s11 += g * g;
          s0v += (1 - g) * p.v;
          s1v += g * p.v;
        }
        const det = s00 * s11 - s01 * s01;
        if (det <= 1e-12) continue;
        const L = (s0v * s11 - s1v * s01) / det;
        const L1 = (s1v * s00 - s0v * s01) / det;
        if (L1 >= L) continue;
        let sq = 0;
        for (const p of xs) {
          const g = Math.min(1, Math.max(0, (dir * (p.t - kink)) / c.lagS));
          sq += (p.v - L * (1 - g) - L1 * g) ** 2;
        }
        if (sq < bestSq) {
          bestSq = sq;
          bestK = kink;
        }
      }
      return bestK;
    };
    const s0 = edge(i0, -1);
    const s1 = edge(i1, 1);
    let start = s0.t;
    let end = s1.t;
    const cut0 = s0.atCaptureEdge ? cutRamp(-1) : undefined;
    const cut1 = s1.atCaptureEdge ? cutRamp(1) : undefined;
    if (cut0 !== undefined) {
      start = cut0;
      notes.push(`the capture starts inside ${c.basis}'s averaging ramp: the start is the ramp's kink`);
    } else if (s0.atCaptureEdge) notes.push("the capture starts under load: the window starts at its first sample");
    if (cut1 !== undefined) {
      end = cut1;
      notes.push(`the capture ends inside ${c.basis}'s averaging ramp: the end is the ramp's kink`);
    } else if (s1.atCaptureEdge) notes.push("the capture ends under load: the window ends at its last sample");
    if (c.lagS > 0) {
      if (s0.f >= 0) start -= s0.f * c.lagS;
      if (s1.f >= 0) end -= (1 - s1.f) * c.lagS;
    }
    // Each edge is placed to within about half a sampling interval: the energy that can move is that long at the
    // step in power there (power signals only; the summary adds it to its ±).
    let edgeErrorJ = 0;
    if (c.gated)
      for (const [e, lvl, dir] of [
        [s0, level.start, -1],
        [s1, level.end, 1],
      ] as const) {
        if (e.atCaptureEdge) continue;
        const o = (dir === 1 ? i1 : i0) + dir;
        const out = o >= 0 && o < pts.length ? pts[o]!.v : base;
        edgeErrorJ += (typical / 2) * Math.abs(lvl - out);
      }
    return { start, end, basis: c.basis, baseline: base, threshold: low, notes, edgeErrorJ };
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
  let edgeErrorJ = 0;
  for (const [dev, ss] of byDev) {
    const d = detectDevice(ss, opts);
    if (!d) continue;
    start = Math.min(start, d.start);
    end = Math.max(end, d.end);
    edgeErrorJ += d.edgeErrorJ;
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
  return { startS: start, endS: end, how: "detected", basis, baseline, threshold, notes, edgeErrorJ };
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
