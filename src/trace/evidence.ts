// Per-kernel classification from two kinds of evidence (pure): the kernel name (the rule table) and
// the CPU op that launched it (External id of the kernel, or of its launch call, and the ops
// enclosing that one). A specific name rule decides; where the name is unknown or only a weak hint,
// the innermost launching op that maps to a class decides. Each kernel records what decided it.
import { classifyOp, decideClass, type KernelClass } from "./classify.ts";
import { findSorted, KIND_KERNEL, type TraceModel } from "./events.ts";

export interface KernelEvidence {
  /** Per GPU row: index into `by` ("rule gemm.tensile", "op aten::addmm", "default"). */
  evidence: Uint32Array;
  by: string[];
  /** Kernels whose class the launching op decided. */
  decidedByOp: number;
  /** Per name: each (class, evidence) it was given, with kernel count and time; dominant first. */
  perName: Map<number, Array<{ class: KernelClass; by: string; count: number; us: number }>>;
}

const MAX_DEPTH = 12;

/** Decides each kernel's class; rewrites `model.gpu.cls` and `model.nameClass` (dominant per name). */
export function attributeClasses(
  model: TraceModel,
  launchIdx: Int32Array,
  classNames: readonly KernelClass[],
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
    let ext = gpu.ext[k]!;
    const li = launchIdx[k]!;
    if (Number.isNaN(ext) && li >= 0) ext = runtime.ext[li]!;
    const row = Number.isNaN(ext) ? -1 : findSorted(model.cpuOpExt, ext);
    const d = row >= 0 ? opDecision(row) : null;
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
  const n = model.cpuOpExt.length;
  const { cpuOpTs: ts, cpuOpEnd: end, cpuOpTid: tid } = model;
  const idx = new Uint32Array(n);
  for (let i = 0; i < n; i++) idx[i] = i;
  // Thread, then start; an enclosing op (same start, later end) sorts first.
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
    // Not an ancestor: it ended before this op starts, or before this op ends (ns rounding allowed).
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
