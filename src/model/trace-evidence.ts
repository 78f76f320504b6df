// What a profiler trace says about the model's fixed per-step costs: how many kernels a decode step runs, how much of
// the step is not weight, KV or collective traffic (the per-kernel cost the model counts as n_kernels · c), and how
// long the GPU waited on the host. Pure: it reads a trace analysis (src/trace), never a file.
import type { TraceAnalysis } from "../trace/analyze.ts";
import type { StepKindSummary } from "../trace/breakdown.ts";

export interface TraceStepEvidence {
  /** Which steps of the trace: the kind summarised (decode where the trace has decode steps). */
  kind: string;
  steps: number;
  /** Mean step window, ms. */
  stepMs: number;
  /** GPU busy time per step, ms. */
  busyMs: number;
  /** GEMM, MoE and attention kernels per step, ms (the weight and KV streaming the bandwidth terms cover). */
  streamingMs: number;
  /** Collective time per step, ms (busy, exposed or not). */
  communicationMs: number;
  /** The GPU idle while nothing was submitted: the step waited on the host, ms. */
  hostGapMs: number;
  /** Kernels launched per step. */
  kernels: number;
  /** Time per step outside streaming, collectives and host waits: the fixed per-kernel work and the gaps between
   * kernels, ms. */
  fixedMs: number;
  /** fixedMs / kernels, µs. */
  perKernelUs: number;
  formula: string;
}

const STREAMING = ["gemm", "moe", "attention"] as const;

/** The decode steps' fixed costs (or the most frequent step kind's when the trace has no decode step). */
export function traceStepEvidence(a: TraceAnalysis): TraceStepEvidence | undefined {
  const kinds = a.overall.byKind;
  if (!kinds.length) return undefined;
  const pick: StepKindSummary =
    kinds.find((k) => k.kind === "decode") ?? [...kinds].sort((x, y) => y.count - x.count)[0];
  const busy = pick.meanBusyByClass as Record<string, number | undefined>;
  const cls = (k: string) => busy[k] ?? 0;
  const stepUs = pick.durUs.mean;
  const streamingUs = STREAMING.reduce((s, k) => s + cls(k), 0);
  const commUs = cls("communication");
  const hostUs = pick.meanIdleHostUs;
  const fixedUs = Math.max(0, stepUs - streamingUs - commUs - hostUs);
  const kernels = pick.meanKernels;
  return {
    kind: pick.kind,
    steps: pick.count,
    stepMs: stepUs / 1000,
    busyMs: Object.values(busy).reduce((s: number, v) => s + (v ?? 0), 0) / 1000,
    streamingMs: streamingUs / 1000,
    communicationMs: commUs / 1000,
    hostGapMs: hostUs / 1000,
    kernels,
    fixedMs: fixedUs / 1000,
    perKernelUs: kernels > 0 ? fixedUs / kernels : 0,
    formula:
      "fixed = step − (GEMM + MoE + attention kernels) − collectives − host-bound idle; per kernel = fixed / kernels per step",
  };
}
