// A value known only within bounds: every efficiency and every prediction is one of these.

export interface Range {
  low: number;
  mid: number;
  high: number;
}

export function range(low: number, mid: number, high: number): Range {
  return { low, mid, high };
}

export function point(v: number): Range {
  return { low: v, mid: v, high: v };
}

/** Sum of ranges: bounds add (worst case both ways), mids add. */
export function sumRanges(rs: Range[]): Range {
  let low = 0;
  let mid = 0;
  let high = 0;
  for (const r of rs) {
    low += r.low;
    mid += r.mid;
    high += r.high;
  }
  return { low, mid, high };
}

export function scaleRange(r: Range, k: number): Range {
  return k >= 0
    ? { low: r.low * k, mid: r.mid * k, high: r.high * k }
    : { low: r.high * k, mid: r.mid * k, high: r.low * k };
}

/** x / r with bounds swapped (time = bytes / bandwidth). */
export function divideBy(x: number, r: Range): Range {
  return { low: x / r.high, mid: x / r.mid, high: x / r.low };
}

/** Rate from a time range: 1000·n / ms, bounds swapped. */
export function rateFromMs(ms: Range, n = 1): Range {
  return { low: (1000 * n) / ms.high, mid: (1000 * n) / ms.mid, high: (1000 * n) / ms.low };
}

export function addRange(a: Range, b: Range): Range {
  return { low: a.low + b.low, mid: a.mid + b.mid, high: a.high + b.high };
}

export function mapRange(r: Range, f: (x: number) => number): Range {
  const a = f(r.low);
  const b = f(r.high);
  return { low: Math.min(a, b), mid: f(r.mid), high: Math.max(a, b) };
}

export function round(x: number, digits = 3): number {
  if (!Number.isFinite(x)) return x;
  const k = 10 ** digits;
  return Math.round(x * k) / k;
}

export function roundRange(r: Range, digits = 3): Range {
  return { low: round(r.low, digits), mid: round(r.mid, digits), high: round(r.high, digits) };
}

/** "12.3 (10.1–15.0)" */
export function fmtRange(r: Range, digits = 1, unit = ""): string {
  const f = (x: number) => x.toFixed(digits);
  if (Math.abs(r.high - r.low) < 10 ** -digits) return `${f(r.mid)}${unit}`;
  return `${f(r.mid)}${unit} (${f(r.low)}–${f(r.high)})`;
}
