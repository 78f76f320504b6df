// Per-kernel classification from its evidence (pure): the kernel name (the rule table), the CPU op
// that launched it (External id of the kernel, or of its launch call, and the ops enclosing that
// one), and the nn.Module frames around the launch. A specific name rule decides; where the name is
// unknown or only a weak hint, the innermost launching op that maps to a class decides, then the
// innermost module. Kernels replayed from a CUDA/HIP graph have no op of their own: their launch in
// a graph-capture trace, where given, supplies it; else names decide.
// Each kernel records what decided it.
import { classifyModule, classifyOp, decideClass, type KernelClass } from "./classify.ts";
import { findSorted, KIND_KERNEL, MODULE_PREFIX, type TraceModel } from "./events.ts";

export interface KernelEvidence {
  /** Per GPU row: index into `by` ("rule gemm.tensile", "op aten::addmm", "default"). */
  evidence: Uint32Array;
  by: string[];
  /** Kernels whose class the launching op or module decided. */
  decidedByOp: number;
  /** Per name: each (class, evidence) it was given, with kernel count and time; dominant first. */
  perName: Map<number, Array<{ class: KernelClass; by: string; count: number; us: number }>>;
}

const MAX_DEPTH = 12;

/** Where a graph-replayed kernel was launched at capture time: its op and module chains, innermost first. */
export interface ReplayOrigin {
  ops: readonly string[];
  modules: readonly string[];
}

/**
 * Decides each kernel's class; rewrites `model.gpu.cls` and `model.nameClass` (dominant per name).
 * `replayOrigin` (GPU row → its launch in a graph-capture trace) gives graph-replayed kernels the
 * op and module evidence the replay itself lacks.
 */
export function attributeClasses(
  model: TraceModel,
  launchIdx: Int32Array,
  classNames: readonly KernelClass[],
  replayOrigin?: ReadonlyMap<number, ReplayOrigin>,
): KernelEvidence {
  const { gpu, runtime } = model;
  const classIndex = new Map(classNames.map((c, i) => [c as string, i]));
  const by: string[] = [];
  const byId = new Map<string, number>();
  const intern = (s: string): number => {
    let i = byId.get(s);
    if (i === undefined) {
      i = by.length;
      by.push(s);
      byId.set(s, i);
    }
    return i;
  };
  const evidence = new Uint32Array(gpu.n);
  // Name-only evidence per name id: >= 0 when the name rule decides alone.
  const nameEv = new Int32Array(model.names.length).fill(-2);
  let parent: Int32Array | undefined;
  const opMemo = new Map<number, { cls: number; ev: number } | null>();
  let decidedByOp = 0;
  const perName = new Map<number, Map<number, { cls: number; count: number; us: number }>>();

  let modIndex: ModuleIndex | undefined;
  const modMemo = new Map<number, { cls: number; ev: number } | null>();
  const moduleDecision = (tid: number, t: number): { cls: number; ev: number } | null => {
    if (model.modules.name.length === 0) return null;
    modIndex ??= indexModules(model);
    const start = modIndex.innermost(tid, t);
    if (start < 0) return null;
    const hit = modMemo.get(start);
    if (hit !== undefined) return hit;
    let out: { cls: number; ev: number } | null = null;
    for (let r = start, d = 0; r >= 0 && d < MAX_DEPTH; r = modIndex.parent[r]!, d++) {
      const m = moduleName(model.names[model.modules.name[r]!]!);
      const c = classifyModule(m);
      if (c) {
        out = { cls: classIndex.get(c.class) ?? 0, ev: intern(`module ${m}`) };
        break;
      }
    }
    modMemo.set(start, out);
    return out;
  };
  const graphRuntime = new Map<number, boolean>();
  const isGraphLaunch = (li: number): boolean => {
    const nm = runtime.name[li]!;
    let g = graphRuntime.get(nm);
    if (g === undefined) {
      g = /GraphLaunch/i.test(model.names[nm]!);
      graphRuntime.set(nm, g);
    }
    return g;
  };

  const opDecision = (row: number): { cls: number; ev: number } | null => {
    const hit = opMemo.get(row);
    if (hit !== undefined) return hit;
    parent ??= enclosingOps(model);
    let out: { cls: number; ev: number } | null = null;
    for (let r = row, d = 0; r >= 0 && d < MAX_DEPTH; r = parent[r]!, d++) {
      const op = model.names[model.cpuOpName[r]!]!;
      const c = classifyOp(op);
      if (c) {
        out = { cls: classIndex.get(c.class) ?? 0, ev: intern(`op ${op}`) };
        break;
      }
    }
    opMemo.set(row, out);
    return out;
  };

  for (let k = 0; k < gpu.n; k++) {
    const nm = gpu.name[k]!;
    let ne = nameEv[nm]!;
    if (ne === -2) {
      const c = model.nameClass[nm]!;
      const strong = gpu.kind[k] !== KIND_KERNEL || (c.rule !== "default" && !c.weak);
      ne = strong ? intern(decideClass({ class: c.class as KernelClass, rule: c.rule }, []).by) : -1;
      nameEv[nm] = ne;
    }
    if (ne >= 0) {
      evidence[k] = ne;
      continue;
    }
    const li = launchIdx[k]!;
    let d: { cls: number; ev: number } | null = null;
    const origin = replayOrigin?.get(k);
    if (origin) {
      const c = model.nameClass[nm]!;
      const r = decideClass(
        { class: c.class as KernelClass, rule: c.rule, ...(c.weak ? { weak: true } : {}) },
        origin.ops,
        origin.modules,
      );
      if (r.by.startsWith("op ") || r.by.startsWith("module "))
        d = { cls: classIndex.get(r.class) ?? 0, ev: intern(`${r.by} (graph capture)`) };
    } else if (li < 0 || !isGraphLaunch(li)) {
      let ext = gpu.ext[k]!;
      if (Number.isNaN(ext) && li >= 0) ext = runtime.ext[li]!;
      const row = Number.isNaN(ext) ? -1 : findSorted(model.cpuOpExt, ext);
      if (row >= 0) d = opDecision(row);
      if (!d && li >= 0) d = moduleDecision(runtime.tid[li]!, runtime.ts[li]!);
    }
    if (d) {
      gpu.cls[k] = d.cls;
      evidence[k] = d.ev;
      decidedByOp++;
    } else {
      const c = model.nameClass[nm]!;
      evidence[k] = intern(c.rule === "default" ? "default" : `rule ${c.rule}`);
    }
    let m = perName.get(nm);
    if (!m) {
      m = new Map();
      perName.set(nm, m);
    }
    const e = m.get(evidence[k]!) ?? { cls: gpu.cls[k]!, count: 0, us: 0 };
    e.count++;
    e.us += gpu.dur[k]!;
    m.set(evidence[k]!, e);
  }

  const out = new Map<number, Array<{ class: KernelClass; by: string; count: number; us: number }>>();
  for (const [nm, m] of perName) {
    const list = [...m.entries()]
      .map(([ev, e]) => ({ class: classNames[e.cls]!, by: by[ev]!, count: e.count, us: e.us }))
      .sort((a, b) => b.us - a.us);
    out.set(nm, list);
    const top = list[0]!;
    const nc = model.nameClass[nm]!;
    nc.class = top.class;
    nc.decidedBy = top.by;
  }
  for (let nm = 0; nm < model.names.length; nm++) {
    const ne = nameEv[nm]!;
    if (ne >= 0) model.nameClass[nm]!.decidedBy = by[ne]!;
  }
  return { evidence, by, decidedByOp, perName: out };
}

/** For each CPU op row, the row of the innermost op on the same thread that encloses it, or -1. */
export function enclosingOps(model: TraceModel): Int32Array {
  return nestingParents(model.cpuOpTs, model.cpuOpEnd, model.cpuOpTid);
}

/** Parent (innermost enclosing span on the same thread) of each span, or -1. */
function nestingParents(ts: Float64Array, end: Float64Array, tid: ArrayLike<number>): Int32Array {
  const n = ts.length;
  const idx = new Uint32Array(n);
  for (let i = 0; i < n; i++) idx[i] = i;
  // Thread, then start; an enclosing span (same start, later end) sorts first.
  idx.sort((a, b) => tid[a]! - tid[b]! || ts[a]! - ts[b]! || end[b]! - end[a]! || a - b);
  const parent = new Int32Array(n).fill(-1);
  const stack: number[] = [];
  let curTid = Number.NaN;
  for (let j = 0; j < n; j++) {
    const i = idx[j]!;
    if (tid[i] !== curTid) {
      stack.length = 0;
      curTid = tid[i]!;
    }
    // Not an ancestor: it ended before this span starts, or before this span ends (ns rounding allowed).
    while (stack.length) {
      const e = end[stack[stack.length - 1]!]!;
      if (e <= ts[i]! || e < end[i]! - 1e-3) stack.pop();
      else break;
    }
    if (stack.length) parent[i] = stack[stack.length - 1]!;
    stack.push(i);
  }
  return parent;
}

/** "nn.Module: Qwen3Attention_0" → "Qwen3Attention". */
function moduleName(full: string): string {
  return full.slice(full.startsWith(MODULE_PREFIX) ? MODULE_PREFIX.length : 0).replace(/_\d+$/, "");
}

export interface ModuleIndex {
  parent: Int32Array;
  /** The innermost module on thread `tid` whose span contains t, or -1. */
  innermost(tid: number, t: number): number;
}

export function indexModules(model: TraceModel): ModuleIndex {
  const { ts, end, tid } = model.modules;
  const parent = nestingParents(ts, end, tid);
  const n = ts.length;
  const idx = new Uint32Array(n);
  for (let i = 0; i < n; i++) idx[i] = i;
  idx.sort((a, b) => tid[a]! - tid[b]! || ts[a]! - ts[b]! || end[b]! - end[a]! || a - b);
  return {
    parent,
    innermost(th: number, t: number): number {
      // The last module (thread, then start order) on this thread starting at or before t.
      let lo = 0;
      let hi = n - 1;
      let p = -1;
      while (lo <= hi) {
        const mid = (lo + hi) >>> 1;
        const i = idx[mid]!;
        if (tid[i]! < th || (tid[i] === th && ts[i]! <= t)) {
          p = mid;
          lo = mid + 1;
        } else hi = mid - 1;
      }
      if (p < 0 || tid[idx[p]!] !== th) return -1;
      let r = idx[p]!;
      while (r >= 0 && end[r]! < t) r = parent[r]!;
      return r;
    },
  };
}

/** Names of a CPU op row and the ops enclosing it, innermost first (`parent` from enclosingOps). */
export function opChain(model: TraceModel, parent: Int32Array, row: number): string[] {
  const out: string[] = [];
  for (let r = row, d = 0; r >= 0 && d < MAX_DEPTH; r = parent[r]!, d++) out.push(model.names[model.cpuOpName[r]!]!);
  return out;
}

/** The nn.Module names around time t on thread tid, innermost first, without "nn.Module: " and _N. */
export function moduleChain(model: TraceModel, tid: number, t: number, index?: ModuleIndex): string[] {
  if (model.modules.name.length === 0) return [];
  const ix = index ?? indexModules(model);
  const out: string[] = [];
  for (let r = ix.innermost(tid, t), d = 0; r >= 0 && d < MAX_DEPTH; r = ix.parent[r]!, d++)
    out.push(moduleName(model.names[model.modules.name[r]!]!));
  return out;
}
