// Repeating units in a kernel-name sequence (pure): decode steps issued back to back, transformer
// layers inside a step. A unit is found by its markers: names that occur exactly once per unit, so
// their occurrences are evenly spaced (within a tolerance, for small variations such as a sampling
// tail). The unit's start is found by walking back from the markers while every unit agrees.

export interface RepeatOptions {
  /** "smallest": the fewest units that several markers agree on (steps: layers also repeat, more often);
   * "most": the unit count most names agree on (layers inside a step). */
  pick: "smallest" | "most";
  /** Units × period must cover at least this share of the sequence. */
  minCoverage: number;
  /** Allowed relative deviation of a marker's spacing from its median (plus 2 kernels). */
  tol?: number;
  minCount?: number;
}

export interface Repeats {
  /** Units found. */
  count: number;
  /** Median unit length, in sequence positions. */
  period: number;
  /** Per unit: [start, end) positions in the sequence. */
  units: Array<[number, number]>;
  /** Name ids that occur once per unit at even spacing (the evidence). */
  markers: number[];
}

interface Candidate {
  name: number;
  pos: number[];
  period: number;
}

function median(xs: number[]): number {
  const s = xs.slice().sort((a, b) => a - b);
  return s.length ? s[Math.floor((s.length - 1) / 2)]! : 0;
}

export function findRepeats(seq: ArrayLike<number>, opts: RepeatOptions): Repeats | undefined {
  const L = seq.length;
  const tol = opts.tol ?? 0.1;
  const minCount = opts.minCount ?? 2;
  if (L < 2 * minCount) return undefined;
  const occ = new Map<number, number[]>();
  for (let i = 0; i < L; i++) {
    const n = seq[i]!;
    const l = occ.get(n);
    if (l) l.push(i);
    else occ.set(n, [i]);
  }
  const byCount = new Map<number, Candidate[]>();
  for (const [name, pos] of occ) {
    const c = pos.length;
    if (c < minCount || c > L / 2) continue;
    const diffs: number[] = [];
    for (let i = 1; i < c; i++) diffs.push(pos[i]! - pos[i - 1]!);
    const p = median(diffs);
    if (p < 2) continue;
    if (diffs.some((d) => Math.abs(d - p) > 2 + tol * p)) continue;
    if (c * p < opts.minCoverage * L) continue;
    const list = byCount.get(c);
    if (list) list.push({ name, pos, period: p });
    else byCount.set(c, [{ name, pos, period: p }]);
  }
  if (byCount.size === 0) return undefined;
  const counts = [...byCount.keys()].sort((a, b) => a - b);
  let count: number;
  if (opts.pick === "smallest") {
    // A lone marker could be a name that happens to occur in every k-th unit: want two that agree.
    count = counts.find((c) => byCount.get(c)!.length >= 2) ?? counts[0]!;
  } else {
    count = counts.reduce((best, c) => (byCount.get(c)!.length > byCount.get(best)!.length ? c : best), counts[0]!);
  }
  const cands = byCount.get(count)!;
  // The marker that occurs earliest in its unit: the walk back to the unit's start is shortest.
  const first = cands.reduce((a, b) => (b.pos[0]! < a.pos[0]! ? b : a));
  const p = median(cands.map((c) => c.period));
  const pos = first.pos;
  // Walk back while every unit has the same name at the same distance before its marker.
  let back = 0;
  for (let j = 1; j < p; j++) {
    if (pos[0]! - j < 0) break;
    const n = seq[pos[0]! - j]!;
    let all = true;
    for (let i = 1; i < pos.length; i++)
      if (seq[pos[i]! - j] !== n) {
        all = false;
        break;
      }
    if (!all) break;
    back = j;
  }
  const starts = pos.map((x) => x - back);
  const units: Array<[number, number]> = [];
  for (let i = 0; i < starts.length; i++) {
    const s = starts[i]!;
    const e = i + 1 < starts.length ? starts[i + 1]! : Math.min(L, s + Math.round(p));
    units.push([s, e]);
  }
  // The last unit runs to the end of the sequence where what follows is shorter than a unit's variation;
  // a last unit cut short (the recording stopped inside it) is not a unit.
  const last = units[units.length - 1]!;
  if (L - last[1] <= 2 + tol * p) last[1] = L;
  if (last[1] - last[0] < p - 2 - tol * p) units.pop();
  if (units.length < minCount) return undefined;
  return { count: units.length, period: p, units, markers: cands.map((c) => c.name) };
}
