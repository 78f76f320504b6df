// Transformer layers inside a step (pure): the kernel subsequence that repeats once per layer,
// found with the same marker method as steps (repeats.ts). Per-op times are taken position by
// position across the layers (their spread says how alike the layers are); what lies before the
// first layer (embedding) and after the last (final norm, LM head, sampling) is the head and tail.
import { KERNEL_CLASSES, type KernelClass } from "./classify.ts";
import type { TraceModel } from "./events.ts";
import { findRepeats } from "./repeats.ts";
import { kernelRowsByStep, type Segmentation } from "./steps.ts";

export interface Spread {
  mean: number;
  min: number;
  max: number;
  /** Coefficient of variation (stdev / mean). */
  cv: number;
}

export interface LayerOp {
  /** Position in the layer. */
  index: number;
  /** The commonest kernel name at this position. */
  name: string;
  /** Distinct kernel names seen at this position, where more than one. */
  variants?: number;
  class: KernelClass;
  /** Kernel time at this position, across every layer of every step analysed (µs). */
  us: Spread;
}

export interface HeadTailKernel {
  name: string;
  class: KernelClass;
  meanUs: number;
}

export interface LayerAnalysis {
  /** Layers per step (the same in every step analysed). */
  layers: number;
  kernelsPerLayer: number;
  /** Steps whose layers were found. */
  steps: number;
  /** Σ kernel time of one layer (µs), across layers and steps. */
  layerKernelUs: Spread;
  /** One layer's GPU time line, first kernel start to the next layer's first start (µs). */
  layerSpanUs: Spread;
  /** Mean kernel time per layer by class (µs). */
  layerByClass: Partial<Record<KernelClass, number>>;
  /** Per position in the layer, where every layer has the same kernel sequence. */
  ops: LayerOp[];
  head: { kernels: number; kernelUs: number; byClass: Partial<Record<KernelClass, number>>; list: HeadTailKernel[] };
  tail: { kernels: number; kernelUs: number; byClass: Partial<Record<KernelClass, number>>; list: HeadTailKernel[] };
  /** Marker kernel names (once per layer) that found the layers. */
  markers: string[];
  notes: string[];
}

/** Streaming mean, min, max and variance (Welford): per-op times need no arrays of every layer. */
class Acc {
  n = 0;
  mean = 0;
  m2 = 0;
  min = Number.POSITIVE_INFINITY;
  max = Number.NEGATIVE_INFINITY;
  add(x: number): void {
    this.n++;
    const d = x - this.mean;
    this.mean += d / this.n;
    this.m2 += d * (x - this.mean);
    if (x < this.min) this.min = x;
    if (x > this.max) this.max = x;
  }
  spread(): Spread {
    if (!this.n) return { mean: 0, min: 0, max: 0, cv: 0 };
    const sd = Math.sqrt(this.m2 / this.n);
    return { mean: r3(this.mean), min: r3(this.min), max: r3(this.max), cv: this.mean > 0 ? r4(sd / this.mean) : 0 };
  }
}

function spread(xs: number[]): Spread {
  if (!xs.length) return { mean: 0, min: 0, max: 0, cv: 0 };
  const mean = xs.reduce((a, b) => a + b, 0) / xs.length;
  const v = xs.reduce((a, b) => a + (b - mean) ** 2, 0) / xs.length;
  return {
    mean: r3(mean),
    min: r3(Math.min(...xs)),
    max: r3(Math.max(...xs)),
    cv: mean > 0 ? r4(Math.sqrt(v) / mean) : 0,
  };
}
function sameSeq(a: Uint32Array, b: Uint32Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

const r3 = (x: number) => Math.round(x * 1000) / 1000;
const r4 = (x: number) => Math.round(x * 10000) / 10000;

/** Finds the layers in each whole step and aggregates them; undefined where no step has a layer period. */
export function analyzeLayers(
  model: TraceModel,
  seg: Segmentation,
  order: Uint32Array,
  usable: (step: number) => boolean = () => true,
  byStep = kernelRowsByStep(seg, order, model.gpu.kind),
): LayerAnalysis | undefined {
  const { gpu } = model;
  const S = seg.steps.length;
  const found: Array<{ rows: Uint32Array; units: Array<[number, number]>; markers: number[] }> = [];
  // Steps of one kind repeat the same kernel sequence (every decode step of a trace, as a rule):
  // each distinct sequence is searched once, and a step whose names equal it takes its result.
  const seen = new Map<number, Array<{ seq: Uint32Array; r: ReturnType<typeof findRepeats> }>>();
  for (let s = 0; s < S; s++) {
    const rows = byStep.rows.subarray(byStep.from[s]!, byStep.from[s + 1]!);
    if (!usable(s) || rows.length < 8) continue;
    const seq = new Uint32Array(rows.length);
    let h = rows.length;
    for (let i = 0; i < rows.length; i++) {
      const nm = gpu.name[rows[i]!]!;
      seq[i] = nm;
      h = (Math.imul(h, 31) + nm) | 0;
    }
    let bucket = seen.get(h);
    if (bucket === undefined) seen.set(h, (bucket = []));
    let hit = bucket.find((b) => sameSeq(b.seq, seq));
    if (hit === undefined) {
      hit = { seq, r: findRepeats(seq, { pick: "most", minCoverage: 0.5, tol: 0.05 }) };
      bucket.push(hit);
    }
    const r = hit.r;
    if (!r || r.count < 2 || r.period < 3) continue;
    found.push({ rows, units: r.units, markers: r.markers });
  }
  if (!found.length) return undefined;
  const notes: string[] = [];
  // The layer count most steps agree on; steps that disagree are left out and said so.
  const counts = new Map<number, number>();
  for (const f of found) counts.set(f.units.length, (counts.get(f.units.length) ?? 0) + 1);
  const L = [...counts.entries()].sort((a, b) => b[1] - a[1] || b[0] - a[0])[0]![0];
  const agree = found.filter((f) => f.units.length === L);
  if (agree.length < found.length)
    notes.push(
      `${found.length - agree.length} step(s) with another layer count (${[...counts.keys()].join(", ")}) left out`,
    );
  const skipped = seg.steps.length - found.length;
  if (skipped > 0) notes.push(`${skipped} step(s) without a layer period (or clipped) left out`);
  const lens = agree.flatMap((f) => f.units.map(([a, b]) => b - a));
  const P = lens[0]!;
  // Per-op times need the layers to run the same classes in the same order; names may vary a little
  // (cuBLAS and cuDNN pick another kernel as the KV cache grows): each position shows its commonest.
  const ref = agree[0]!;
  const refClasses = ref.rows.slice(ref.units[0]![0], ref.units[0]![0] + P).map((k) => gpu.cls[k]!);
  const sameShape =
    lens.every((x) => x === P) &&
    agree.every((f) => f.units.every(([a]) => refClasses.every((c, i) => gpu.cls[f.rows[a + i]!] === c)));
  // Per position, the names seen there and their counts (one or two names, as a rule: a short list).
  const posIds: number[][] = sameShape ? Array.from({ length: P }, () => []) : [];
  const posCounts: number[][] = sameShape ? Array.from({ length: P }, () => []) : [];
  const layerUs: number[] = [];
  const spanUs: number[] = [];
  const byClass = new Float64Array(KERNEL_CLASSES.length);
  const opUs: Acc[] = sameShape ? Array.from({ length: P }, () => new Acc()) : [];
  const headT = new Map<string, { cls: number; us: number }>();
  const tailT = new Map<string, { cls: number; us: number }>();
  const headCls = new Float64Array(KERNEL_CLASSES.length);
  const tailCls = new Float64Array(KERNEL_CLASSES.length);
  let headN = 0;
  let tailN = 0;
  for (const f of agree) {
    f.units.forEach(([a, b], u) => {
      let t = 0;
      for (let i = a; i < b; i++) {
        const k = f.rows[i]!;
        t += gpu.dur[k]!;
        byClass[gpu.cls[k]!]! += gpu.dur[k]!;
        if (sameShape) {
          opUs[i - a]!.add(gpu.dur[k]!);
          const ids = posIds[i - a]!;
          const j = ids.indexOf(gpu.name[k]!);
          if (j >= 0) posCounts[i - a]![j]!++;
          else {
            ids.push(gpu.name[k]!);
            posCounts[i - a]!.push(1);
          }
        }
      }
      layerUs.push(t);
      const next = u + 1 < f.units.length ? f.rows[f.units[u + 1]![0]] : f.rows[b];
      const endUs = next !== undefined ? gpu.start[next]! : gpu.start[f.rows[b - 1]!]! + gpu.dur[f.rows[b - 1]!]!;
      spanUs.push(endUs - gpu.start[f.rows[a]!]!);
    });
    const first = f.units[0]![0];
    const last = f.units[f.units.length - 1]![1];
    const add = (i: number, m: Map<string, { cls: number; us: number }>, cls: Float64Array) => {
      const k = f.rows[i]!;
      const nm = `${i < first ? i : i - last}\u0000${model.names[gpu.name[k]!]!}`;
      const e = m.get(nm) ?? { cls: gpu.cls[k]!, us: 0 };
      e.us += gpu.dur[k]!;
      m.set(nm, e);
      cls[gpu.cls[k]!]! += gpu.dur[k]!;
    };
    for (let i = 0; i < first; i++) add(i, headT, headCls);
    for (let i = last; i < f.rows.length; i++) add(i, tailT, tailCls);
    headN += first;
    tailN += f.rows.length - last;
  }
  const nSteps = agree.length;
  const nLayers = nSteps * L;
  const perClass = (a: Float64Array, n: number) => {
    const o: Partial<Record<KernelClass, number>> = {};
    a.forEach((v, c) => {
      if (v > 0) o[KERNEL_CLASSES[c]!] = r3(v / n);
    });
    return o;
  };
  const list = (m: Map<string, { cls: number; us: number }>) =>
    [...m.entries()].map(([key, e]) => ({
      name: key.slice(key.indexOf("\u0000") + 1),
      class: KERNEL_CLASSES[e.cls]!,
      meanUs: r3(e.us / nSteps),
    }));
  const ops: LayerOp[] = sameShape
    ? opUs.map((acc, i) => {
        const ids = posIds[i]!;
        const counts = posCounts[i]!;
        // The commonest name; among equal counts the first seen (as a stable sort of the map did).
        let best = 0;
        for (let j = 1; j < ids.length; j++) if (counts[j]! > counts[best]!) best = j;
        return {
          index: i,
          name: model.names[ids[best]!]!,
          ...(ids.length > 1 ? { variants: ids.length } : {}),
          class: KERNEL_CLASSES[refClasses[i]!]!,
          us: acc.spread(),
        };
      })
    : [];
  if (!sameShape) notes.push("the layers' kernel sequences differ: per-op times omitted, per-layer totals kept");
  const sum = (a: Float64Array) => a.reduce((x, y) => x + y, 0);
  return {
    layers: L,
    kernelsPerLayer: Math.round(lens.reduce((a, b) => a + b, 0) / lens.length),
    steps: nSteps,
    layerKernelUs: spread(layerUs),
    layerSpanUs: spread(spanUs),
    layerByClass: perClass(byClass, nLayers),
    ops,
    head: {
      kernels: Math.round(headN / nSteps),
      kernelUs: r3(sum(headCls) / nSteps),
      byClass: perClass(headCls, nSteps),
      list: list(headT),
    },
    tail: {
      kernels: Math.round(tailN / nSteps),
      kernelUs: r3(sum(tailCls) / nSteps),
      byClass: perClass(tailCls, nSteps),
      list: list(tailT),
    },
    markers: ref.markers.slice(0, 5).map((m) => model.names[m]!),
    notes,
  };
}
