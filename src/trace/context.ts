// Classes by context (pure): where a kernel sits in its step decides what a name cannot.
// - A softmax between two GEMMs, with no other GEMM between them, turns attention scores into
//   weights: that softmax, everything between the two GEMMs and the two GEMMs themselves (Q·Kᵀ and
//   P·V, activation × activation, no weights) are attention — what one fused kernel (cuDNN SDPA,
//   FlashAttention) does on other stacks, so the classes agree across stacks.
// - Sampling follows the LM-head GEMM, the step's last GEMM: a sampling-named kernel before it is
//   not sampling.
import { CLASS_INDEX } from "./classify.ts";
import type { TraceModel } from "./events.ts";
import type { KernelEvidence } from "./evidence.ts";
import { kernelRowsByStep, type Segmentation } from "./steps.ts";

const GEMM = CLASS_INDEX.gemm;
const SAMPLING = CLASS_INDEX.sampling;
const ATTENTION = CLASS_INDEX.attention;
const ELEMENTWISE = CLASS_INDEX.elementwise;
const SOFTMAX_RE = /softmax/i;
// A softmax feeding a choice (MoE routing, sampling) is followed by one of these, not by a GEMM.
const CHOICE_RE = /topk|top_k|argmax|multinomial|sort|gating|router|log_?softmax/i;

export const CONTEXT_ATTENTION = "context attention.softmax-between-gemms";
export const CONTEXT_NOT_SAMPLING = "context not-sampling.before-lm-head";

/** Reclassifies kernels by their place in the step; updates gpu.cls, the evidence and the per-name classes. */
export function applyContext(
  model: TraceModel,
  seg: Segmentation,
  order: Uint32Array,
  ev: KernelEvidence,
  byStep = kernelRowsByStep(seg, order, model.gpu.kind),
): number {
  const { gpu } = model;
  // Per name, tested once: 1 softmax, 2 a choice (top-k, argmax, sort, routing), 3 neither.
  const nameKind = new Uint8Array(model.names.length);
  const kindOf = (k: number): number => {
    const nm = gpu.name[k]!;
    let v = nameKind[nm]!;
    if (v === 0) {
      const n = model.names[nm]!;
      v = SOFTMAX_RE.test(n) && !CHOICE_RE.test(n) ? 1 : CHOICE_RE.test(n) ? 2 : 3;
      nameKind[nm] = v;
    }
    return v;
  };
  const isSoftmax = (k: number) => gpu.cls[k] === SAMPLING && kindOf(k) === 1;
  const isChoice = (k: number) => kindOf(k) === 2;
  const changed = new Map<number, string>();
  for (let st = 0; st < seg.steps.length; st++) {
    const rows = byStep.rows.subarray(byStep.from[st]!, byStep.from[st + 1]!);
    const gemms: number[] = [];
    rows.forEach((k, i) => {
      if (gpu.cls[k] === GEMM) gemms.push(i);
    });
    if (gemms.length === 0) continue;
    const lmHead = gemms[gemms.length - 1]!;
    for (let g = 0; g + 1 < gemms.length; g++) {
      const a = gemms[g]!;
      const b = gemms[g + 1]!;
      if (b - a < 2) continue;
      let soft = false;
      let choice = false;
      for (let i = a + 1; i < b; i++) {
        const k = rows[i]!;
        if (isSoftmax(k)) soft = true;
        else if (isChoice(k)) choice = true;
      }
      if (!soft || choice) continue;
      for (let i = a; i <= b; i++) changed.set(rows[i]!, CONTEXT_ATTENTION);
    }
    for (let i = 0; i < lmHead; i++) {
      const k = rows[i]!;
      if (gpu.cls[k] === SAMPLING && !changed.has(k)) changed.set(k, CONTEXT_NOT_SAMPLING);
    }
  }
  if (changed.size === 0) return 0;
  const byIdx = new Map<string, number>();
  const intern = (s: string): number => {
    let i = byIdx.get(s);
    if (i === undefined) {
      i = ev.by.indexOf(s);
      if (i < 0) {
        i = ev.by.length;
        ev.by.push(s);
      }
      byIdx.set(s, i);
    }
    return i;
  };
  const names = new Set<number>();
  for (const [k, why] of changed) {
    gpu.cls[k] = why === CONTEXT_ATTENTION ? ATTENTION : ELEMENTWISE;
    ev.evidence[k] = intern(why);
    names.add(gpu.name[k]!);
  }
  // Each changed name's classes, by evidence, dominant first.
  const per = new Map<number, Map<number, { cls: number; count: number; us: number }>>();
  for (let k = 0; k < gpu.n; k++) {
    const nm = gpu.name[k]!;
    if (!names.has(nm)) continue;
    let m = per.get(nm);
    if (!m) {
      m = new Map();
      per.set(nm, m);
    }
    const e = m.get(ev.evidence[k]!) ?? { cls: gpu.cls[k]!, count: 0, us: 0 };
    e.count++;
    e.us += gpu.dur[k]!;
    m.set(ev.evidence[k]!, e);
  }
  const classNames = Object.keys(CLASS_INDEX);
  for (const [nm, m] of per) {
    const list = [...m.entries()]
      .map(([e, x]) => ({ class: classNames[x.cls] as never, by: ev.by[e]!, count: x.count, us: x.us }))
      .sort((a, b) => b.us - a.us);
    ev.perName.set(nm, list);
    const nc = model.nameClass[nm]!;
    nc.class = list[0]!.class;
    nc.decidedBy = list[0]!.by;
  }
  return changed.size;
}
