// Step segmentation (pure), in order of evidence: the engines' own step annotations (vLLM
// execute_*, SGLang step[...]), ProfilerStep#N, one step per CUDA/HIP graph replay (kernels tied to
// their launch by correlation id), a repeating kernel-name sequence, and last GPU idle gaps. Where
// none of them tells steps apart, one segment holds everything and says so.
import { KIND_KERNEL, type TraceModel } from "./events.ts";
import { findRepeats } from "./repeats.ts";

export type StepMode = "auto" | "annotation" | "profiler-step" | "graph" | "period" | "gap" | "none";
export type StepKind = "prefill" | "decode" | "mixed" | "unknown";
/** Which annotation format a step came from. */
export type StepSource = "vllm" | "sglang" | "profiler-step" | "graph" | "period" | "gap" | "none";

export interface StepDef {
  name: string;
  kind: StepKind;
  source?: StepSource;
  /** CPU-side span of the step annotation (µs), when steps come from annotations. */
  cpuStartUs?: number;
  cpuEndUs?: number;
  contextRequests?: number;
  contextTokens?: number;
  generationRequests?: number;
  generationTokens?: number;
  /** Requests in the batch and tokens scheduled in the step, from the annotation. */
  batch?: { requests?: number; tokens?: number };
  /** Σ KV (context) lengths over the batch, where the annotation says (vLLM's sk). */
  kvTokens?: number;
  /** SGLang forward mode (DECODE, EXTEND, MIXED, …). */
  forwardMode?: string;
}

export interface Segmentation {
  mode: Exclude<StepMode, "auto">;
  steps: StepDef[];
  /** Per GPU row: the step that launched it, or -1. */
  stepOf: Int32Array;
  /** Per runtime row: the step whose annotation contains the call, or -1. */
  runtimeStep: Int32Array;
  /** Gap threshold used in gap mode (µs). */
  gapUs?: number;
  notes: string[];
}

/** vLLM step markers: execute_context_<Rc>(<Nc>[_<Σq²>])_generation_<Rg>(<Ng>[_<Σq²>]), the detailed
 * execute_<tokens>_context_<Rc>(sq…sk…sqsq…sqsk…)_generation_<Rg>(…) form, and execute_new_<n>_cached_<m>. */
export const VLLM_STEP_RE = /^execute_(?:\d+_)?(?:context_\d+\([^)]*\)|new_\d+_cached_\d+)/;
/** SGLang scheduler steps: step[DECODE bs=32], step[EXTEND bs=15 toks=15360], step[MIXED …]. */
export const SGLANG_STEP_RE = /^step\[([A-Z_]+)(?:\s[^\]]*)?\]$/;
export const PROFILER_STEP_RE = /^ProfilerStep#\d+$/;
const ENGINE_STEP_RE = new RegExp(`${VLLM_STEP_RE.source}|${SGLANG_STEP_RE.source}`);

export function isStepAnnotation(name: string): boolean {
  return VLLM_STEP_RE.test(name) || SGLANG_STEP_RE.test(name) || PROFILER_STEP_RE.test(name);
}

const kindOf = (ctx: number, gen: number): StepKind =>
  ctx > 0 && gen > 0 ? "mixed" : ctx > 0 ? "prefill" : gen > 0 ? "decode" : "unknown";

/** The counts inside vLLM's parentheses: "888" / "888_788544" (tokens, Σq²) or "sq8155sk8430sqsq…sqsk…". */
function vllmCounts(inner: string): { tokens: number; kv?: number } {
  const sq = /^sq(\d+)sk(\d+)/.exec(inner);
  if (sq) return { tokens: Number(sq[1]), kv: Number(sq[2]) };
  const n = /^(\d+)/.exec(inner);
  return { tokens: n ? Number(n[1]) : 0 };
}

const SGLANG_KIND: Record<string, StepKind> = {
  DECODE: "decode",
  TARGET_VERIFY: "decode",
  DRAFT_EXTEND: "decode",
  EXTEND: "prefill",
  PREFILL: "prefill",
  MIXED: "mixed",
};

/** Parses a step annotation name (vLLM, SGLang or ProfilerStep#N) into its kind and batch. */
export function parseStepName(name: string): Omit<StepDef, "cpuStartUs" | "cpuEndUs"> {
  const ctx = /context_(\d+)\(([^)]*)\)/.exec(name);
  const gen = /generation_(\d+)\(([^)]*)\)/.exec(name);
  if (name.startsWith("execute_") && (ctx || gen)) {
    const rc = ctx ? Number(ctx[1]) : 0;
    const rg = gen ? Number(gen[1]) : 0;
    const c = ctx ? vllmCounts(ctx[2]!) : { tokens: 0 };
    const g = gen ? vllmCounts(gen[2]!) : { tokens: 0 };
    const lead = /^execute_(\d+)_/.exec(name);
    const kv = c.kv !== undefined || g.kv !== undefined ? (c.kv ?? 0) + (g.kv ?? 0) : undefined;
    return {
      name,
      kind: kindOf(rc, rg),
      source: "vllm",
      contextRequests: rc,
      contextTokens: c.tokens,
      generationRequests: rg,
      generationTokens: g.tokens,
      batch: { requests: rc + rg, tokens: lead ? Number(lead[1]) : c.tokens + g.tokens },
      ...(kv !== undefined ? { kvTokens: kv } : {}),
    };
  }
  const nc = /^execute_new_(\d+)_cached_(\d+)/.exec(name);
  if (nc) {
    const n = Number(nc[1]);
    const m = Number(nc[2]);
    // New requests prefill; cached ones mostly decode (a chunked prefill continues as "cached").
    return {
      name,
      kind: kindOf(n, m),
      source: "vllm",
      contextRequests: n,
      generationRequests: m,
      batch: { requests: n + m },
    };
  }
  const sg = SGLANG_STEP_RE.exec(name);
  if (sg) {
    const mode = sg[1]!;
    const kind = SGLANG_KIND[mode] ?? "unknown";
    const bs = /\bbs=(\d+)/.exec(name);
    const toks = /\btoks=(\d+)/.exec(name);
    const requests = bs ? Number(bs[1]) : undefined;
    const tokens = toks ? Number(toks[1]) : kind === "decode" ? requests : undefined;
    return {
      name,
      kind,
      source: "sglang",
      forwardMode: mode,
      ...(kind === "prefill" ? { contextRequests: requests, contextTokens: tokens } : {}),
      ...(kind === "decode" ? { generationRequests: requests, generationTokens: tokens } : {}),
      batch: {
        ...(requests !== undefined ? { requests } : {}),
        ...(tokens !== undefined ? { tokens } : {}),
      },
    };
  }
  if (PROFILER_STEP_RE.test(name)) return { name, kind: "unknown", source: "profiler-step" };
  return { name, kind: "unknown" };
}

/** Maps each GPU row to the runtime call that launched it (by correlation id), or -1. */
export function linkLaunches(model: TraceModel): Int32Array {
  const { gpu, runtime } = model;
  const out = new Int32Array(gpu.n).fill(-1);
  if (runtime.n === 0 || gpu.n === 0) return out;
  let lo = Number.POSITIVE_INFINITY;
  let hi = Number.NEGATIVE_INFINITY;
  let valid = 0;
  for (let i = 0; i < runtime.n; i++) {
    const c = runtime.corr[i]!;
    if (Number.isNaN(c) || !Number.isInteger(c)) continue;
    valid++;
    if (c < lo) lo = c;
    if (c > hi) hi = c;
  }
  if (valid === 0) return out;
  const range = hi - lo + 1;
  if (range <= 8 * valid + 1_000_000) {
    // Correlation ids are a dense counter: direct addressing.
    const table = new Int32Array(range).fill(-1);
    for (let i = 0; i < runtime.n; i++) {
      const c = runtime.corr[i]!;
      if (Number.isInteger(c)) table[c - lo] = i;
    }
    for (let k = 0; k < gpu.n; k++) {
      const c = gpu.corr[k]!;
      if (c >= lo && c <= hi && Number.isInteger(c)) out[k] = table[c - lo]!;
    }
  } else {
    const map = new Map<number, number>();
    for (let i = 0; i < runtime.n; i++) if (!Number.isNaN(runtime.corr[i]!)) map.set(runtime.corr[i]!, i);
    for (let k = 0; k < gpu.n; k++) out[k] = map.get(gpu.corr[k]!) ?? -1;
  }
  return out;
}

/** Indices of GPU rows sorted by start time. */
export function orderByStart(start: Float64Array): Uint32Array {
  const n = start.length;
  const idx = new Uint32Array(n);
  let sorted = true;
  for (let i = 0; i < n; i++) {
    idx[i] = i;
    if (i > 0 && start[i]! < start[i - 1]!) sorted = false;
  }
  if (!sorted) idx.sort((a, b) => start[a]! - start[b]! || a - b);
  return idx;
}

interface Span {
  name: string;
  ts: number;
  end: number;
}

/** Outermost, time-sorted spans (spans nested in an earlier one dropped): starts and ends ascend. */
function outermost(spans: Span[], nested?: Array<[Span, number]>): Span[] {
  spans.sort((a, b) => a.ts - b.ts || b.end - a.end);
  const out: Span[] = [];
  let lastEnd = Number.NEGATIVE_INFINITY;
  for (const s of spans) {
    // Nested inside the previous span (ns tolerance on the end: ts and dur are each rounded in the
    // file). A span that merely overlaps the previous one's last ns is the next step: kept.
    if (s.ts < lastEnd && s.end <= lastEnd + 1e-3) {
      nested?.push([s, out.length - 1]);
      continue;
    }
    out.push(s);
    lastEnd = s.end;
  }
  return out;
}

/**
 * Index of the step span a host-side call at t belongs to, or -1. Spans are outermost, so both
 * starts and ends ascend; where two touch or overlap (Kineto rounds ts and dur to the ns, so
 * back-to-back annotations can share a nanosecond), the call belongs to the step that began
 * last: the host thread had already entered it.
 */
function spanAt(spans: Span[], t: number): number {
  let lo = 0;
  let hi = spans.length - 1;
  let j = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1;
    if (spans[mid]!.ts <= t) {
      j = mid;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  return j >= 0 && t < spans[j]!.end ? j : -1;
}

export function segmentSteps(
  model: TraceModel,
  launchIdx: Int32Array,
  order: Uint32Array,
  mode: StepMode = "auto",
  opts: { gapUs?: number } = {},
): Segmentation {
  const notes: string[] = [];
  const tryAnnotations = (re: RegExp, m: "annotation" | "profiler-step"): Segmentation | undefined => {
    const nested: Array<[Span, number]> = [];
    const cpu = outermost(
      model.annotations
        .filter((a) => !a.gpu && re.test(a.name))
        .map((a) => ({ name: a.name, ts: a.ts, end: a.ts + a.dur })),
      nested,
    );
    if (cpu.length === 0) return undefined;
    const steps: StepDef[] = cpu.map((s) => ({ ...parseStepName(s.name), cpuStartUs: s.ts, cpuEndUs: s.end }));
    // A step annotation nested in another (SGLang's step[…] inside an execute_… one) fills in what
    // the outer one does not say: its kind and batch where unknown, SGLang's forward mode.
    for (const [inner, at] of nested) {
      const st = steps[at];
      if (!st) continue;
      const p = parseStepName(inner.name);
      if (st.kind === "unknown" && p.kind !== "unknown") Object.assign(st, { ...p, name: st.name, source: st.source });
      if (p.forwardMode && !st.forwardMode) st.forwardMode = p.forwardMode;
    }
    const { gpu, runtime } = model;
    const runtimeStep = new Int32Array(runtime.n).fill(-1);
    for (let i = 0; i < runtime.n; i++) runtimeStep[i] = spanAt(cpu, runtime.ts[i]!);
    const stepOf = new Int32Array(gpu.n).fill(-1);
    let linked = 0;
    for (let k = 0; k < gpu.n; k++) {
      const li = launchIdx[k]!;
      if (li >= 0) {
        stepOf[k] = runtimeStep[li]!;
        if (stepOf[k]! >= 0) linked++;
      }
    }
    if (linked === 0 && gpu.n > 0) {
      // No launch links (no cuda_runtime events): fall back to the GPU-side annotation spans.
      const gspans = outermost(
        model.annotations
          .filter((a) => a.gpu && re.test(a.name))
          .map((a) => ({ name: a.name, ts: a.ts, end: a.ts + a.dur })),
      );
      if (gspans.length) {
        const byName = new Map<string, number[]>();
        cpu.forEach((s, i) => {
          const l = byName.get(s.name) ?? [];
          l.push(i);
          byName.set(s.name, l);
        });
        // Pair the i-th GPU span of a name with the i-th CPU span of that name.
        const seen = new Map<string, number>();
        const gstep = gspans.map((g) => {
          const k = seen.get(g.name) ?? 0;
          seen.set(g.name, k + 1);
          return byName.get(g.name)?.[k] ?? -1;
        });
        for (let k = 0; k < gpu.n; k++) {
          const j = spanAt(gspans, gpu.start[k]!);
          if (j >= 0) stepOf[k] = gstep[j]!;
        }
        notes.push("kernels assigned to steps by GPU-side annotation spans (no launch correlation in the trace)");
      } else {
        for (let k = 0; k < gpu.n; k++) stepOf[k] = spanAt(cpu, gpu.start[k]!);
        notes.push("kernels assigned to steps by time (no launch correlation and no GPU-side annotations)");
      }
    }
    return { mode: m, steps, stepOf, runtimeStep, notes };
  };

  if (mode === "annotation" || mode === "auto") {
    const r = tryAnnotations(ENGINE_STEP_RE, "annotation");
    if (r) return r;
    if (mode === "annotation")
      notes.push("no vLLM execute_* or SGLang step[…] annotations found; fell back to GPU idle gaps");
  }
  if (mode === "profiler-step" || mode === "auto") {
    const r = tryAnnotations(PROFILER_STEP_RE, "profiler-step");
    if (r) {
      r.notes.push(...notes);
      return r;
    }
    if (mode === "profiler-step") notes.push("no ProfilerStep#N annotations found; fell back to GPU idle gaps");
  }
  if (mode === "graph" || mode === "auto") {
    const r = segmentByGraphs(model, launchIdx, notes);
    if (r) return r;
    if (mode === "graph")
      notes.push("graph replays do not carry most of the GPU time here; fell back to GPU idle gaps");
  }
  if (mode === "period" || mode === "auto") {
    const r = segmentByPeriod(model, order, notes);
    if (r) return r;
    if (mode === "period") notes.push("no repeating kernel sequence found; fell back to GPU idle gaps");
  }
  const g = segmentByGaps(model, order, opts.gapUs, notes);
  if (g.steps.length > 1 || mode === "gap") return g;
  // One gap segment is not a step: nothing here tells steps apart.
  g.mode = "none";
  g.steps[0] = { name: "whole trace", kind: "unknown", source: "none" };
  g.notes = [
    ...notes,
    "steps cannot be told apart (no step annotations, no graph launches, no repeating kernel sequence, no idle gap): figures are totals over the whole trace, not per step",
  ];
  return g;
}

const GRAPH_LAUNCH_RE = /GraphLaunch/i;

/**
 * One step per graph replay, when graph replays carry most of the GPU time: a replay is every
 * kernel whose correlation id is that launch's. Piecewise graphs (several launches per step, the
 * launches' kernel sequences repeating with a period) make one step per period of launches. Kernels
 * launched outside a graph belong to the step of the launch before them.
 */
function segmentByGraphs(model: TraceModel, launchIdx: Int32Array, notes: string[]): Segmentation | undefined {
  const { gpu, runtime } = model;
  const isGraph = new Map<number, boolean>();
  const graphLaunch = (li: number): boolean => {
    const nm = runtime.name[li]!;
    let g = isGraph.get(nm);
    if (g === undefined) {
      g = GRAPH_LAUNCH_RE.test(model.names[nm]!);
      isGraph.set(nm, g);
    }
    return g;
  };
  let graphUs = 0;
  let allUs = 0;
  const kernelsOf = new Map<number, number[]>();
  for (let k = 0; k < gpu.n; k++) {
    allUs += gpu.dur[k]!;
    const li = launchIdx[k]!;
    if (li < 0 || !graphLaunch(li)) continue;
    graphUs += gpu.dur[k]!;
    const l = kernelsOf.get(li);
    if (l) l.push(k);
    else kernelsOf.set(li, [k]);
  }
  if (kernelsOf.size === 0 || graphUs < 0.5 * allUs) return undefined;
  const launches = [...kernelsOf.keys()].sort((a, b) => runtime.ts[a]! - runtime.ts[b]! || a - b);
  // A launch's signature: its kernel count and first and last kernel names.
  const sig = launches.map((li) => {
    const ks = kernelsOf
      .get(li)!
      .slice()
      .sort((a, b) => gpu.start[a]! - gpu.start[b]!);
    return `${ks.length}:${gpu.name[ks[0]!]}:${gpu.name[ks[ks.length - 1]!]}`;
  });
  let per = 1;
  if (new Set(sig).size > 1)
    for (let P = 2; P <= sig.length / 2; P++) {
      let ok = true;
      for (let i = 0; i + P < sig.length && ok; i++) if (sig[i] !== sig[i + P]) ok = false;
      if (ok) {
        per = P;
        break;
      }
    }
  const S = Math.ceil(launches.length / per);
  const groupStart = Array.from({ length: S }, (_, s) => runtime.ts[launches[s * per]!]!);
  const stepAt = (t: number): number => {
    let lo = 0;
    let hi = S - 1;
    let j = -1;
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1;
      if (groupStart[mid]! <= t) {
        j = mid;
        lo = mid + 1;
      } else hi = mid - 1;
    }
    return j;
  };
  const runtimeStep = new Int32Array(runtime.n).fill(-1);
  for (let i = 0; i < runtime.n; i++) runtimeStep[i] = stepAt(runtime.ts[i]!);
  launches.forEach((li, i) => {
    runtimeStep[li] = Math.floor(i / per);
  });
  const stepOf = new Int32Array(gpu.n).fill(-1);
  for (let k = 0; k < gpu.n; k++) {
    const li = launchIdx[k]!;
    if (li >= 0) stepOf[k] = runtimeStep[li]!;
  }
  const steps: StepDef[] = Array.from({ length: S }, (_, s) => ({
    name: per === 1 ? `graph replay ${s}` : `graph replays ${s * per}–${Math.min(launches.length, (s + 1) * per) - 1}`,
    kind: "unknown",
    source: "graph",
  }));
  notes.push(
    per === 1
      ? `one step per CUDA/HIP graph launch (${launches.length} launches; kernels tied to their launch by correlation id; ${((100 * graphUs) / allUs).toFixed(1)} % of GPU time replayed)`
      : `one step per ${per} CUDA/HIP graph launches (piecewise graphs: the launches' kernel sequences repeat every ${per}; ${launches.length} launches)`,
  );
  return { mode: "graph", steps, stepOf, runtimeStep, notes };
}

/**
 * Steps as a repeating kernel-name sequence: names that occur once per step at even spacing mark
 * the step, whose start is where every step still agrees walking back from them. Kernels before the
 * first whole step and after the last are outside steps.
 */
function segmentByPeriod(model: TraceModel, order: Uint32Array, notes: string[]): Segmentation | undefined {
  const { gpu, runtime } = model;
  const seq = new Uint32Array(order.length);
  for (let j = 0; j < order.length; j++) seq[j] = gpu.name[order[j]!]!;
  const r = findRepeats(seq, { pick: "smallest", minCoverage: 0.7 });
  // A handful of kernels repeating is a loop, not a step.
  if (!r || r.period < 8) return undefined;
  // A step runs the model's layers: a repeat with no layers inside is itself a layer (a trace of one
  // step), not a step.
  const [u0, u1] = r.units[0]!;
  const inner = findRepeats(seq.subarray(u0, u1), { pick: "most", minCoverage: 0.5, tol: 0.05 });
  if (!inner || inner.count < 4) return undefined;
  const stepOf = new Int32Array(gpu.n).fill(-1);
  r.units.forEach(([s, e], i) => {
    for (let j = s; j < e; j++) stepOf[order[j]!] = i;
  });
  const steps: StepDef[] = r.units.map((_, i) => ({ name: `repeat ${i}`, kind: "unknown", source: "period" }));
  const outside = order.length - r.units.reduce((a, [s, e]) => a + e - s, 0);
  notes.push(
    `steps found as a repeating kernel sequence: ${r.count} repeats of ~${Math.round(r.period)} kernels, marked by ${r.markers.length} kernel name(s) that occur once per repeat (e.g. ${model.names[r.markers[0]!]!.slice(0, 60)})${outside ? `; ${outside} kernels before the first or after the last whole repeat are outside steps` : ""}`,
  );
  return { mode: "period", steps, stepOf, runtimeStep: new Int32Array(runtime.n).fill(-1), notes };
}

function segmentByGaps(
  model: TraceModel,
  order: Uint32Array,
  gapUs: number | undefined,
  notes: string[],
): Segmentation {
  const { gpu, runtime } = model;
  const gaps: number[] = [];
  let end = Number.NEGATIVE_INFINITY;
  for (let j = 0; j < order.length; j++) {
    const k = order[j]!;
    const s = gpu.start[k]!;
    if (j > 0 && s > end) gaps.push(s - end);
    end = Math.max(end, s + gpu.dur[k]!);
  }
  let threshold = gapUs;
  if (threshold === undefined) {
    const sorted = gaps.slice().sort((a, b) => a - b);
    const median = sorted.length ? sorted[Math.floor(sorted.length / 2)]! : 0;
    threshold = Math.max(100, 10 * median);
  }
  const stepOf = new Int32Array(gpu.n).fill(-1);
  let step = -1;
  end = Number.NEGATIVE_INFINITY;
  for (let j = 0; j < order.length; j++) {
    const k = order[j]!;
    const s = gpu.start[k]!;
    if (step < 0 || s - end >= threshold) step++;
    stepOf[k] = step;
    end = Math.max(end, s + gpu.dur[k]!);
  }
  const steps: StepDef[] = Array.from({ length: step + 1 }, (_, i) => ({
    name: `segment ${i}`,
    kind: "unknown",
    source: "gap",
  }));
  notes.push(`steps split at GPU idle gaps ≥ ${round3(threshold)} µs`);
  return { mode: "gap", steps, stepOf, runtimeStep: new Int32Array(runtime.n).fill(-1), gapUs: threshold, notes };
}

function round3(x: number): number {
  return Math.round(x * 1000) / 1000;
}

/** Kernel rows (not memcpy/memset) of each step in start order, as one array sliced by `from` (CSR). */
export function kernelRowsByStep(
  seg: Segmentation,
  order: Uint32Array,
  kind: Uint8Array,
): { rows: Uint32Array; from: Int32Array } {
  const S = seg.steps.length;
  const from = new Int32Array(S + 1);
  for (let j = 0; j < order.length; j++) {
    const k = order[j]!;
    const s = seg.stepOf[k]!;
    if (s >= 0 && kind[k] === KIND_KERNEL) from[s + 1]!++;
  }
  for (let s = 0; s < S; s++) from[s + 1]! += from[s]!;
  const rows = new Uint32Array(from[S]!);
  const fill = from.slice(0, S);
  for (let j = 0; j < order.length; j++) {
    const k = order[j]!;
    const s = seg.stepOf[k]!;
    if (s >= 0 && kind[k] === KIND_KERNEL) rows[fill[s]!++] = k;
  }
  return { rows, from };
}
