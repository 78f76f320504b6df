// Per-kernel roofline (pure): each weight GEMM of a layer gets the bytes of the weight matrix it
// reads, from the model's shapes; its measured time gives achieved bandwidth and a share of the
// ceiling. The step is then set beside the decode-step model's prediction, term by term.
// At decode batch sizes a weight GEMM reads its whole matrix once and little else, so
// bytes / time is its bandwidth; activations (batch × width) are counted too, they are tiny.
import type { Architecture } from "../model/architecture.ts";
import type { Gpu } from "../model/hardware.ts";
import type { Prediction } from "../model/predict.ts";
import type { StepBreakdown } from "./breakdown.ts";
import type { LayerAnalysis, Spread } from "./layers.ts";

export interface GemmRoofline {
  /** The projection: qkv_proj, o_proj, gate_up_proj, down_proj, lm_head, … */
  name: string;
  /** Kernels of one call (a split-K GEMM and its reduce are one matrix multiply). */
  kernels: string[];
  /** Calls per step (layers, or 1 for the LM head). */
  callsPerStep: number;
  /** Weight matrix: input and output features. */
  shape: { in: number; out: number };
  bitsPerWeight: number;
  /** Weight bytes plus the activations read and written. */
  bytes: number;
  bytesFrom: string;
  /** Kernel time of one call (µs): mean, and spread across layers and steps. */
  us: Spread;
  achievedGBs: number;
  /** achieved / ceiling. */
  ceilingShare: number;
}

export interface TermComparison {
  term: string;
  label: string;
  predictedMs: { low: number; mid: number; high: number };
  /** Measured per step, or null where the trace has nothing to set beside it. */
  measuredMs: number | null;
  measuredIs: string;
}

export interface RooflineAnalysis {
  model: string;
  gpu: string;
  ceilingGBs: number;
  ceilingIs: string;
  batch: number;
  contextLen: number;
  gemms: GemmRoofline[];
  /** All weight GEMMs of one step together. */
  weightGemms?: { bytes: number; us: number; achievedGBs: number; ceilingShare: number };
  predictedStepMs: { low: number; mid: number; high: number };
  measuredStepMs: number;
  terms: TermComparison[];
  notes: string[];
}

export interface RooflineInput {
  arch: Architecture;
  gpu: Gpu;
  ceilingGBs: number;
  ceilingIs: string;
  prediction: Prediction;
  layers?: LayerAnalysis;
  /** The steps compared (whole, of one kind). */
  steps: StepBreakdown[];
}

// cuBLAS split-K: the GEMM writes partial sums, this kernel adds them.
const SPLITK_REDUCE_RE = /splitK_?reduce|splitk_reduce|reduce_splitk/i;

/** Projection layouts by the number of weight GEMMs a layer runs (fused or not). */
const LAYOUTS: Record<number, string[]> = {
  4: ["qkv_proj", "o_proj", "gate_up_proj", "down_proj"],
  5: ["qkv_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
  6: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_up_proj", "down_proj"],
  7: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
};

function shapeOf(
  a: Architecture,
  name: string,
): { in: number; out: number; group: "attention" | "denseMlp" | "lmHead" } {
  const q = a.heads * a.headDim;
  const kv = a.kvHeads * a.headDim;
  switch (name) {
    case "qkv_proj":
      return { in: a.hidden, out: q + 2 * kv, group: "attention" };
    case "q_proj":
      return { in: a.hidden, out: q, group: "attention" };
    case "k_proj":
    case "v_proj":
      return { in: a.hidden, out: kv, group: "attention" };
    case "o_proj":
      return { in: q, out: a.hidden, group: "attention" };
    case "gate_up_proj":
      return { in: a.hidden, out: 2 * a.ffn, group: "denseMlp" };
    case "gate_proj":
    case "up_proj":
      return { in: a.hidden, out: a.ffn, group: "denseMlp" };
    case "down_proj":
      return { in: a.ffn, out: a.hidden, group: "denseMlp" };
    default:
      return { in: a.hidden, out: a.vocab, group: "lmHead" };
  }
}

function mergeSpread(xs: Spread[]): Spread {
  // Sum of positions (a GEMM and its reduce): means add; the spread is the larger one's.
  const mean = xs.reduce((a, s) => a + s.mean, 0);
  return {
    mean,
    min: xs.reduce((a, s) => a + s.min, 0),
    max: xs.reduce((a, s) => a + s.max, 0),
    cv: Math.max(...xs.map((s) => s.cv)),
  };
}

const r3 = (x: number) => Math.round(x * 1000) / 1000;

export function roofline(x: RooflineInput): RooflineAnalysis {
  const { arch, prediction: p, layers, steps } = x;
  const notes: string[] = [];
  const batch = p.input.batch;
  const bpw = (g: string) => (p.quantization.groups as Record<string, { bpw: number }>)[g]?.bpw ?? 16;
  const gemms: GemmRoofline[] = [];
  const make = (name: string, kernels: string[], us: Spread, calls: number): GemmRoofline => {
    const s = shapeOf(arch, name);
    const bits = bpw(s.group);
    // Activations in and out at 16 bits: small beside the weights at decode batch sizes.
    const bytes = (s.in * s.out * bits) / 8 + batch * (s.in + s.out) * 2;
    const gbs = us.mean > 0 ? bytes / (us.mean * 1e3) : 0;
    return {
      name,
      kernels,
      callsPerStep: calls,
      shape: { in: s.in, out: s.out },
      bitsPerWeight: bits,
      bytes,
      bytesFrom: `${arch.name} weight shapes (${s.in} × ${s.out} at ${bits} bits) + batch ${batch} activations`,
      us: { mean: r3(us.mean), min: r3(us.min), max: r3(us.max), cv: us.cv },
      achievedGBs: r3(gbs),
      ceilingShare: x.ceilingGBs > 0 ? Math.round((gbs / x.ceilingGBs) * 10000) / 10000 : 0,
    };
  };
  if (!layers) notes.push("no layer period found in the steps: per-GEMM figures unavailable");
  else if (arch.moe) notes.push("MoE model: expert GEMM bytes depend on routing; per-GEMM figures not assigned");
  else if (!layers.ops.length) notes.push("the layers' kernel sequences differ: per-GEMM figures unavailable");
  else {
    // One call = a GEMM kernel and the split-K reduce kernels right after it.
    const calls: Array<{ kernels: string[]; us: Spread[] }> = [];
    for (const op of layers.ops) {
      if (op.class !== "gemm") continue;
      const last = calls[calls.length - 1];
      if (SPLITK_REDUCE_RE.test(op.name) && last) {
        last.kernels.push(op.name);
        last.us.push(op.us);
      } else calls.push({ kernels: [op.name], us: [op.us] });
    }
    const layout = LAYOUTS[calls.length];
    if (!layout)
      notes.push(
        `${calls.length} weight GEMMs per layer match no known projection layout (4: fused qkv and gate_up … 7: all separate): bytes unassigned`,
      );
    else
      calls.forEach((c, i) => {
        gemms.push(make(layout[i]!, c.kernels, mergeSpread(c.us), layers.layers));
      });
    // The LM head: the last GEMM call of the tail.
    const tail = layers.tail.list;
    let at = -1;
    for (let i = tail.length - 1; i >= 0; i--)
      if (tail[i]!.class === "gemm" && !SPLITK_REDUCE_RE.test(tail[i]!.name)) {
        at = i;
        break;
      }
    if (at >= 0) {
      const ks = [tail[at]!];
      for (let i = at + 1; i < tail.length && SPLITK_REDUCE_RE.test(tail[i]!.name); i++) ks.push(tail[i]!);
      const us = ks.reduce((a, k) => a + k.meanUs, 0);
      gemms.push(
        make(
          "lm_head",
          ks.map((k) => k.name),
          { mean: us, min: us, max: us, cv: 0 },
          1,
        ),
      );
    } else notes.push("no GEMM after the last layer: the LM head was not found");
    const over = gemms.filter((g) => g.ceilingShare > 1.05);
    if (over.length)
      notes.push(
        `${over.map((g) => g.name).join(", ")} above the ceiling: the projection layout guessed from the GEMM count, or the ceiling, is wrong here`,
      );
  }
  let weightGemms: RooflineAnalysis["weightGemms"];
  if (gemms.length) {
    const bytes = gemms.reduce((a, g) => a + g.bytes * g.callsPerStep, 0);
    const us = gemms.reduce((a, g) => a + g.us.mean * g.callsPerStep, 0);
    const gbs = us > 0 ? bytes / (us * 1e3) : 0;
    weightGemms = {
      bytes,
      us: r3(us),
      achievedGBs: r3(gbs),
      ceilingShare: Math.round((gbs / x.ceilingGBs) * 10000) / 10000,
    };
  }
  // The step, measured, beside the model's terms.
  const n = Math.max(1, steps.length);
  const mean = (f: (s: StepBreakdown) => number) => steps.reduce((a, s) => a + f(s), 0) / n / 1000;
  const cls = (c: string) => mean((s) => (s.kernelUsByClass as Record<string, number>)[c] ?? 0);
  const measuredStepMs = mean((s) => s.durUs);
  const other = mean((s) => {
    const k = s.kernelUsByClass as Record<string, number>;
    return Object.entries(k)
      .filter(([c]) => c !== "gemm" && c !== "attention" && c !== "communication" && c !== "moe")
      .reduce((a, [, v]) => a + v, 0);
  });
  const measured: Record<string, [number | null, string]> = {
    weights: [
      weightGemms ? weightGemms.us / 1000 : cls("gemm") + cls("moe"),
      weightGemms ? "Σ weight-GEMM kernel time (the GEMMs above)" : "GEMM and MoE kernel time",
    ],
    kv: [cls("attention"), "attention kernel time (KV reads, scores, softmax)"],
    kernels: [other, "all other kernel time (norms, activations, elementwise, sampling, copies)"],
    engine: [mean((s) => s.idleUs), "GPU idle time in the step (host: scheduler, sampling, launches)"],
  };
  const terms: TermComparison[] = p.decode.terms.map((t) => {
    const m =
      measured[t.name] ??
      (/comm|allreduce|all_reduce|collective/i.test(t.name)
        ? ([cls("communication"), "communication kernel time"] as [number, string])
        : ([null, "no matching measurement in the trace"] as [null, string]));
    return {
      term: t.name,
      label: t.label,
      predictedMs: { low: r3(t.ms.low), mid: r3(t.ms.mid), high: r3(t.ms.high) },
      measuredMs: m[0] === null ? null : r3(m[0]),
      measuredIs: m[1],
    };
  });
  return {
    model: arch.name,
    gpu: x.gpu.name,
    ceilingGBs: x.ceilingGBs,
    ceilingIs: x.ceilingIs,
    batch,
    contextLen: p.input.contextLen,
    gemms,
    ...(weightGemms ? { weightGemms } : {}),
    predictedStepMs: { low: r3(p.decode.stepMs.low), mid: r3(p.decode.stepMs.mid), high: r3(p.decode.stepMs.high) },
    measuredStepMs: r3(measuredStepMs),
    terms,
    notes,
  };
}

/** "qkv_proj: 50.3 MB in 15.7 µs = 3.20 TB/s, 75 % of 4.25 TB/s" */
export function rooflineLine(g: GemmRoofline, ceilingGBs: number): string {
  return `${g.name}: ${(g.bytes / 1e6).toFixed(1)} MB in ${g.us.mean.toFixed(1)} µs = ${(g.achievedGBs / 1000).toFixed(2)} TB/s, ${(g.ceilingShare * 100).toFixed(0)} % of ${(ceilingGBs / 1000).toFixed(2)} TB/s`;
}
