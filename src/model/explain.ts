// One plain sentence per term of a prediction (and per finding of a fit). Pure.
import type { FitResult } from "./fit.ts";
import { physicsSentence } from "./moe.ts";
import type { Prediction, Term } from "./predict.ts";
import type { Range } from "./range.ts";
import { fmtRange } from "./range.ts";
import type { CeilingRow } from "./whatif.ts";

const ms = (r: Range) => fmtRange(r, 2, " ms");
const pct = (x: number) => `${(100 * x).toFixed(0)} %`;

function termSentence(p: Prediction, t: Term): string {
  const i = t.inputs as Record<string, any>;
  switch (t.name) {
    case "weights": {
      const eta = i.etaM as Range;
      const fitted = i.deviceClass !== undefined;
      const groups = (i.groups as any[]).filter(
        (g) => !fitted || !p.architecture.moe || g.group === "attention" || g.group === "lmHead",
      );
      const fmts = Object.entries((i.formatFactors ?? {}) as Record<string, number>);
      return `Weight reads: each GPU streams ${i.bytesPerGpuGB.toFixed(2)} GB of ${p.architecture.moe && fitted ? "attention and LM-head " : ""}weights per step (${groups
        .map((g) => `${g.label} ${g.GB.toFixed(2)} GB${g.bpw ? ` at ${g.bpw} bpw` : ""}`)
        .join(
          ", ",
        )}) at ${i.bandwidthGBs} GB/s ${i.bandwidthIs} × η ${eta.low}–${eta.high}${fitted ? ` (fitted for ${i.deviceClass})` : ""}${fmts.length ? `, format factor ${fmts.map(([k, v]) => `${k} ×${v}`).join(", ")}` : ""} → ${ms(t.ms)} (${pct(t.share)} of the step).`;
    }
    case "moe-experts":
      return `MoE routed experts: at batch ${p.input.batch} the ${i.topk}-of-${i.experts} router touches ${i.expertsTouchedPerLayer} distinct experts per layer (E·(1 − (1 − k/E)^B)); the busiest device reads ${fmtRange(i.expertsOnBusiestDevice, 1)} of them${i.ep > 1 ? ` (EP ${i.ep})` : ""}${i.expertTp > 1 ? `, each split TP ${i.expertTp}` : ""}, ${i.GB.toFixed(2)} GB per step. Expert GEMMs at M = ${i.tokensPerExpert} token(s) per expert take ×${i.smallMFactor} the streaming time (small-M efficiency, fitted per engine), engine maturity ×${i.maturityFactor} → ${ms(t.ms)} (${pct(t.share)}).`;
    case "moe-shared":
      return `MoE shared experts: ${i.shared} per layer run for every token, ${i.GB.toFixed(2)} GB per step → ${ms(t.ms)}.`;
    case "moe-dense-layers":
      return `MoE leading dense layers: ${i.denseLayers} dense MLP layers before the MoE layers, ${i.GB.toFixed(2)} GB per step → ${ms(t.ms)}.`;
    case "moe-routing":
      return `MoE router, top-k and permute: ${i.kernels} kernels per step (${i.perLayer} per MoE layer: router GEMM, top-k, align/permute, combine) × ${fmtRange(i.cKernelUs, 1, " µs")} + router weights ${(i.routerGB * 1000).toFixed(1)} MB → ${ms(t.ms)} (${pct(t.share)}).`;
    case "kv":
      return `KV-cache reads: ${i.bytesPerGpuMB.toFixed(1)} MB per GPU at context ${i.contextLen} × batch ${i.batch} (${i.kvDtype}; ${t.formula}) → ${ms(t.ms)}.`;
    case "compute":
      return `Compute beyond bandwidth: ${i.flopsPerGpuG.toFixed(1)} GFLOP per GPU per step at ${i.peakTflops} TFLOPS × η_c ${i.etaC.low}–${i.etaC.high} exceeds the weight-read time by ${ms(t.ms)}.`;
    case "kernels":
      return `Fixed per-kernel cost: ${i.kernels} kernels per step (${i.basis}) × ${fmtRange(i.cKernelUs, 1, " µs")} ${i.cudaGraphs ? "under CUDA graphs" : "launched eagerly"}${i.group ? ` (fitted for ${i.group})` : ""} → ${ms(t.ms)} (${pct(t.share)}).`;
    case "allreduce": {
      const c = p.collectives;
      const menu = c.protocolMenu.length
        ? ` NCCL's protocol menu here is ${c.protocolMenu.join("/")}${c.protocolMenu.includes("LL128") ? "" : " (no LL128)"}.`
        : "";
      return `All-reduces: ${i.count} per token of ${i.bytesEach} B (${(i.bytesEach / 1024).toFixed(0)} KiB) via ${i.implementation}${i.protocol ? ` ${i.algorithm}/${i.protocol}` : ` ${i.algorithm}`}, ${fmtRange(i.usEach, 1, " µs")} each (isolated ${fmtRange(i.isolatedUs, 1, " µs")} + in-loop skew ${i.skewUs.low}–${i.skewUs.high} µs) → ${ms(t.ms)} (${pct(t.share)} of the step).${menu}`;
    }
    case "extra-collectives":
      return `Extra collectives, stated separately: ${i.embeddingAllReduce} vocabulary-parallel embedding all-reduce and ${i.logitsGather} logits gather (${i.logitsBytesPerRank} B per rank) → ${ms(t.ms)}.`;
    case "alltoall":
      return `Expert-parallel all-to-all: ${i.calls} dispatch/combine calls per step at ${i.usEach.low}–${i.usEach.high} µs → ${ms(t.ms)}.`;
    case "pp-p2p":
      return `Pipeline hand-offs: ${i.pp - 1} stage boundaries × ${i.usEach.low}–${i.usEach.high} µs → ${ms(t.ms)}.`;
    case "engine":
      return `Engine overhead (scheduler, sampling, detokenize, host gaps): ${ms(t.ms)}.`;
    default:
      return `${t.label}: ${ms(t.ms)} (${t.formula}).`;
  }
}

export function explain(p: Prediction, fit?: FitResult): string[] {
  const out: string[] = [];
  const inp = p.input;
  out.push(
    `${p.architecture.name} (${p.architecture.totalParamsB} B total / ${p.architecture.activeParamsB} B active, ${p.architecture.layers} layers) as ${inp.quant} on ${inp.gpus}× ${p.hardware.gpu.name}, TP ${inp.tp}${inp.ep > 1 ? ` EP ${inp.ep}` : ""}${inp.pp > 1 ? ` PP ${inp.pp}` : ""} over ${inp.interconnect}, ${inp.engine}${inp.cudaGraphs ? " with CUDA graphs" : " eager"}, batch ${inp.batch}: decode step ${ms(p.decode.stepMs)} → ${fmtRange(p.decode.tokensPerSecond, 1, " tok/s")} per sequence${p.calibrated ? " (calibrated)" : ""}.`,
  );
  if (p.interval)
    out.push(
      `The range is an ${Math.round(100 * p.interval.level)} % prediction interval: ${p.interval.basis}. ${p.interval.maturity}.${p.interval.unseen.length ? ` Not informed by any corpus row (prior spread stands): ${p.interval.unseen.join(", ")}.` : ""}`,
    );
  for (const n of p.interval?.notes ?? []) out.push(`${n[0].toUpperCase()}${n.slice(1)}.`);
  if (p.decode.regime) out.push(`Regime: ${p.decode.regime.text}.`);
  for (const t of p.decode.terms) out.push(termSentence(p, t));
  for (const t of p.decode.physics ?? []) out.push(physicsSentence(t));
  const moe = p.moe;
  if (moe) {
    const c = moe.communication;
    out.push(
      `MoE communication (EP all-to-all vs TP all-reduce): ${moe.parallel}. The ${moe.moeLayers} MoE blocks cost ${c.tpAllReduceMs.toFixed(2)} ms per step as TP all-reduces, or ${c.epAllToAllMs.toFixed(2)} ms as EP dispatch + combine all-to-alls (2 per layer at ${(((c.epAllToAllMs / moe.moeLayers) * 1000) / 2).toFixed(0)} µs); ${c.used === "ep-alltoall" ? "this deployment uses the all-to-all" : c.used === "tp-allreduce" ? "this deployment uses the all-reduce" : "one device: neither"}.`,
    );
  }
  const c = p.collectives;
  if (c.countPerToken > 0) {
    const car = c.customAllReduce;
    out.push(
      car.used
        ? `Custom all-reduce: used (${car.reason}).`
        : `Custom all-reduce: disabled — ${car.reason}.${car.engineMessage ? ` ${inp.engine} logs: "${car.engineMessage}"` : ""}`,
    );
    if (c.implementation === "nccl") {
      const best = c.ncclModel?.filter((x) => x.enabled).sort((a, b) => a.timeUs - b.timeUs)[0];
      const off = c.ncclModel?.filter((x) => !x.enabled && x.protocol === "LL128" && x.algorithm === "Ring")[0];
      out.push(
        `NCCL cost model at ${c.bytesEach} B over ${c.countPerToken > 0 ? inp.tp : 0} ranks: ${(c.ncclModel ?? [])
          .filter((x) => x.algorithm !== "NVLS" || x.enabled)
          .map((x) => `${x.algorithm}/${x.protocol} ${x.timeUs.toFixed(1)} µs${x.enabled ? "" : " (off)"}`)
          .join(
            ", ",
          )}; it picks ${best?.algorithm}/${best?.protocol}.${off ? " LL128 is not on the menu over PCIe." : ""}`,
      );
    }
  }
  out.push(
    `Prefill of ${p.prefill.inputLen} tokens: TTFT ≈ ${ms(p.prefill.ttftMs)}; a ${p.request.outputLen}-token request takes ${fmtRange(p.request.totalMs, 0, " ms")} (${fmtRange(p.request.tokensPerSecond, 1, " tok/s")}).`,
  );
  out.push(`Memory: ${p.memory.note}.`);
  if (p.workload)
    out.push(
      `Benchmark at ${p.workload.mode === "concurrency" ? `concurrency ${p.workload.concurrency}` : `${p.workload.requestRate} req/s`}: ${p.workload.summary}; p99 TPOT ${ms(p.workload.p99TpotMs)}, mean ITL ${ms(p.workload.meanItlMs)}, p99 ITL ${ms(p.workload.p99ItlMs)}, mean TTFT ${ms(p.workload.ttftMs)} (vLLM bench serve definitions).`,
    );
  if (fit) out.push(...explainFit(fit));
  return out;
}

export function explainFit(f: FitResult): string[] {
  const out: string[] = [];
  out.push(`Fit on ${f.measurementsUsed} measurement(s): ${f.summary}`);
  for (const pr of f.parameters) {
    out.push(
      `${pr.label}: prior ${pr.prior.mean.toFixed(pr.digits)} ± ${pr.prior.sd.toFixed(pr.digits)}${pr.priorFrom ? ` (${pr.priorFrom})` : ""} → posterior ${pr.posterior.mean.toFixed(pr.digits)} ± ${pr.posterior.sd.toFixed(pr.digits)} ${pr.unit} — ${pr.pinned ? "pinned down by the data" : `NOT pinned down (${pr.why})`}.`,
    );
  }
  for (const d of f.derived) out.push(`${d.label}: ${d.text}`);
  for (const c of f.consistency) out.push(c);
  for (const r of f.residuals)
    out.push(
      `Residual — ${r.label}: measured ${r.measured.toFixed(3)}, fitted ${r.fitted.toFixed(3)} ${r.unit} (${r.z >= 0 ? "+" : ""}${r.z.toFixed(1)} σ).`,
    );
  return out;
}

/** "Ceiling — name: assumption → 7.1–10.0 ms, 100–140 tok/s." */
export function ceilingSentence(r: CeilingRow): string {
  const one = r.stepMs.low === r.stepMs.high;
  const ms = one ? `${r.stepMs.low.toFixed(1)} ms` : `${r.stepMs.low.toFixed(1)}–${r.stepMs.high.toFixed(1)} ms`;
  const tps = one
    ? `${r.tokensPerSecond.low.toFixed(1)} tok/s`
    : `${Math.round(r.tokensPerSecond.low)}–${Math.round(r.tokensPerSecond.high)} tok/s`;
  return `Ceiling — ${r.name}: ${r.assumption} → ${ms}, ${tps}.`;
}
