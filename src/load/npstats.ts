// NumPy-exact statistics, so our numbers match `vllm bench serve` (which uses numpy) to the last digit:
// pairwise summation as np.add.reduce does it, population std, np.median, np.percentile "linear".

const PW_BLOCKSIZE = 128;

function pairwise(a: ArrayLike<number>, off: number, n: number): number {
  if (n < 8) {
    // numpy starts from -0.0 so that an all-(-0.0) sum stays -0.0; irrelevant for timings.
    let res = 0;
    for (let i = 0; i < n; i++) res += a[off + i]!;
    return res;
  }
  if (n <= PW_BLOCKSIZE) {
    let r0 = a[off]!;
    let r1 = a[off + 1]!;
    let r2 = a[off + 2]!;
    let r3 = a[off + 3]!;
    let r4 = a[off + 4]!;
    let r5 = a[off + 5]!;
    let r6 = a[off + 6]!;
    let r7 = a[off + 7]!;
    let i = 8;
    for (; i < n - (n % 8); i += 8) {
      r0 += a[off + i]!;
      r1 += a[off + i + 1]!;
      r2 += a[off + i + 2]!;
      r3 += a[off + i + 3]!;
      r4 += a[off + i + 4]!;
      r5 += a[off + i + 5]!;
      r6 += a[off + i + 6]!;
      r7 += a[off + i + 7]!;
    }
    let res = r0 + r1 + (r2 + r3) + (r4 + r5 + (r6 + r7));
    for (; i < n; i++) res += a[off + i]!;
    return res;
  }
  let n2 = Math.floor(n / 2);
  n2 -= n2 % 8;
  return pairwise(a, off, n2) + pairwise(a, off + n2, n - n2);
}

/** np.sum of a float64 array. */
export function npSum(a: ArrayLike<number>): number {
  return pairwise(a, 0, a.length);
}

/** np.mean; vLLM passes `list or 0`, so an empty list gives 0. */
export function npMean(a: ArrayLike<number>): number {
  if (a.length === 0) return 0;
  return npSum(a) / a.length;
}

/** np.std (ddof = 0). */
export function npStd(a: ArrayLike<number>): number {
  const n = a.length;
  if (n === 0) return 0;
  const m = npSum(a) / n;
  const sq = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const d = a[i]! - m;
    sq[i] = d * d;
  }
  return Math.sqrt(npSum(sq) / n);
}

function sorted(a: ArrayLike<number>): Float64Array {
  const s = Float64Array.from(a as ArrayLike<number>);
  s.sort();
  return s;
}

/** np.median: the middle element, or the np.mean of the two middle ones. */
export function npMedian(a: ArrayLike<number>, isSorted = false): number {
  const n = a.length;
  if (n === 0) return 0;
  const s = isSorted ? a : sorted(a);
  const h = n >> 1;
  if (n % 2 === 1) return s[h]!;
  return (s[h - 1]! + s[h]!) / 2;
}

/** numpy's _lerp: a + (b-a)·t, computed from the b side when t ≥ 0.5 (as numpy does). */
function lerp(a: number, b: number, t: number): number {
  const diff = b - a;
  if (t >= 0.5) return b - diff * (1 - t);
  return a + diff * t;
}

/** np.percentile(a, p) with the default "linear" method; p in [0, 100]. Empty input gives 0 (vLLM's `or 0`). */
export function npPercentile(a: ArrayLike<number>, p: number, isSorted = false): number {
  const n = a.length;
  if (n === 0) return 0;
  const s = isSorted ? a : sorted(a);
  const q = p / 100;
  const virtual = (n - 1) * q;
  const prev = Math.floor(virtual);
  const next = Math.min(prev + 1, n - 1);
  const gamma = virtual - prev;
  const lo = s[Math.max(0, Math.min(prev, n - 1))]!;
  const hi = s[next]!;
  return lerp(lo, hi, gamma);
}

/** vLLM's key for a percentile: "99" for whole numbers, else as given ("99.9"). */
export function percentileKey(p: number): string {
  return Number.isInteger(p) ? String(p) : String(p);
}
