// Terminal text for model results (tables via cli-table3). Pure: data in, string out.
import Table from "cli-table3";
import type { CatalogListing } from "./catalog.ts";
import { explain } from "./explain.ts";
import type { FitResult } from "./fit.ts";
import type { Prediction } from "./predict.ts";
import { fmtRange } from "./range.ts";
import type { CeilingRow, WhatIfRow } from "./whatif.ts";

const plain = { style: { head: [], border: [] } };

export function renderPrediction(p: Prediction): string {
  const out: string[] = [];
  const inp = p.input;
  out.push(
    `${p.architecture.name} · ${inp.quant} · ${inp.gpus}× ${p.hardware.gpu.name} · TP ${inp.tp}${inp.ep > 1 ? ` EP ${inp.ep}` : ""}${inp.pp > 1 ? ` PP ${inp.pp}` : ""}${inp.dp > 1 ? ` DP ${inp.dp}` : ""} · ${inp.interconnect} · ${inp.engine}${inp.cudaGraphs ? "" : " (eager)"} · batch ${inp.batch}, context ${inp.contextLen}`,
  );
  out.push(
    `decode step ${fmtRange(p.decode.stepMs, 2, " ms")} → ${fmtRange(p.decode.tokensPerSecond, 1, " tok/s")} per sequence${p.calibrated ? " (calibrated)" : ""}`,
  );
  const t = new Table({
    head: ["term", "ms (low–high)", "share", "formula"],
    ...plain,
    wordWrap: true,
    colWidths: [30, 24, 7, 60],
  });
  for (const term of p.decode.terms)
    t.push([term.label, fmtRange(term.ms, 3), `${(100 * term.share).toFixed(0)} %`, term.formula]);
  out.push(t.toString());
  const c = p.collectives;
  if (c.countPerToken > 0) {
    out.push(
      `collectives: ${c.countPerToken} all-reduces per token of ${c.bytesEach} B (${(c.bytesEach / 1024).toFixed(1)} KiB) + ${c.extra
        .filter((e) => e.count > 0)
        .map((e) => `${e.count} ${e.name}`)
        .join(", ")} stated separately`,
    );
    out.push(
      `  implementation ${c.implementation}, ${c.algorithm}${c.protocol ? `/${c.protocol}` : ""}; ${fmtRange(c.latencyUsEach, 1, " µs")} per call; ${fmtRange(c.msPerToken, 2, " ms")} per token`,
    );
    if (c.protocolMenu.length)
      out.push(`  NCCL protocol menu: ${c.protocolMenu.join("/")}; algorithms ${c.algorithmMenu.join("/")}`);
    out.push(`  custom all-reduce: ${c.customAllReduce.used ? "used" : "disabled"} — ${c.customAllReduce.reason}`);
    if (c.customAllReduce.engineMessage) out.push(`  engine log: "${c.customAllReduce.engineMessage}"`);
  }
  out.push(
    `prefill (${p.prefill.inputLen} tokens): TTFT ${fmtRange(p.prefill.ttftMs, 1, " ms")}; ${p.request.outputLen}-token request ${fmtRange(p.request.totalMs, 0, " ms")}`,
  );
  out.push(`memory: ${p.memory.note}`);
  for (const n of p.interval?.notes ?? []) out.push(n);
  if (p.decode.regime) out.push(`regime: ${p.decode.regime.text}`);
  if (p.workload) out.push(...renderWorkload(p.workload));
  out.push("assumptions:");
  for (const a of p.assumptions) out.push(`  - ${a}`);
  return out.join("\n");
}

export function renderExplain(p: Prediction, fit?: FitResult): string {
  return explain(p, fit)
    .map((s) => `• ${s}`)
    .join("\n");
}

export function renderWhatIf(rows: WhatIfRow[]): string {
  const t = new Table({
    head: ["scenario", "step ms", "tok/s", "Δ ms", "speed-up", "all-reduce", "notes"],
    ...plain,
    wordWrap: true,
    colWidths: [26, 22, 22, 12, 9, 22, 30],
  });
  for (const r of rows)
    t.push([
      r.description,
      fmtRange(r.stepMs, 2),
      fmtRange(r.tokensPerSecond, 1),
      r.deltaMsRange && r.deltaMsRange.low !== r.deltaMsRange.high
        ? `${r.deltaMs.toFixed(2)} [${r.deltaMsRange.low.toFixed(2)}, ${r.deltaMsRange.high.toFixed(2)}]`
        : r.deltaMs.toFixed(2),
      `${r.speedup.toFixed(2)}×`,
      r.allReduce.count
        ? `${r.allReduce.count} × ${r.allReduce.usEach.toFixed(1)} µs ${r.allReduce.implementation}${r.allReduce.protocol ? `/${r.allReduce.protocol}` : ""}`
        : "—",
      r.notes.join("; "),
    ]);
  return t.toString();
}

export function renderCeilings(rows: CeilingRow[]): string {
  const t = new Table({
    head: ["scenario", "assumption", "ms per token", "tok/s"],
    ...plain,
    wordWrap: true,
    colWidths: [34, 56, 14, 14],
  });
  for (const r of rows) {
    const ms =
      r.stepMs.low === r.stepMs.high
        ? r.stepMs.low.toFixed(1)
        : `${r.stepMs.low.toFixed(1)}–${r.stepMs.high.toFixed(1)}`;
    const tps =
      r.tokensPerSecond.low === r.tokensPerSecond.high
        ? r.tokensPerSecond.low.toFixed(1)
        : `${Math.round(r.tokensPerSecond.low)}–${Math.round(r.tokensPerSecond.high)}`;
    t.push([r.name, r.assumption, ms, tps]);
  }
  return t.toString();
}

export function renderFit(f: FitResult, ceilingRows: CeilingRow[]): string {
  const out: string[] = [];
  const t = new Table({
    head: ["parameter", "prior", "fitted", "pinned?"],
    ...plain,
    wordWrap: true,
    colWidths: [44, 18, 18, 40],
  });
  for (const p of f.parameters)
    t.push([
      p.label,
      `${p.prior.mean.toFixed(p.digits)} ± ${p.prior.sd.toFixed(p.digits)}`,
      `${p.posterior.mean.toFixed(p.digits)} ± ${p.posterior.sd.toFixed(p.digits)}`,
      p.pinned ? "yes" : `no: ${p.why}`,
    ]);
  out.push(t.toString());
  const rt = new Table({
    head: ["measurement", "measured", "prior model", "fitted", "z"],
    ...plain,
    wordWrap: true,
    colWidths: [44, 12, 12, 12, 8],
  });
  for (const r of f.residuals)
    rt.push([r.label, r.measured.toFixed(3), r.prior.toFixed(3), r.fitted.toFixed(3), r.z.toFixed(1)]);
  out.push(rt.toString());
  out.push(`• ${f.summary}`);
  for (const d of f.derived) out.push(`• ${d.label}: ${d.text}`);
  for (const c of f.consistency) out.push(`• ${c}`);
  out.push("ceilings:");
  out.push(renderCeilings(ceilingRows));
  return out.join("\n");
}

export function renderCatalog(c: CatalogListing, what: string): string {
  const out: string[] = [];
  if (what === "all" || what === "gpus") {
    const t = new Table({ head: ["id", "name", "memory GB", "BW GB/s", "BF16", "FP8", "FP4", "scale-up"], ...plain });
    for (const g of c.gpus)
      t.push([
        g.id,
        g.name,
        g.memoryGB,
        g.bandwidthGBs,
        g.tflopsBf16,
        g.tflopsFp8 ?? "–",
        g.tflopsFp4 ?? "–",
        g.scaleUp,
      ]);
    out.push(t.toString());
  }
  if (what === "all" || what === "models") {
    const t = new Table({ head: ["model", "layers", "hidden", "attention", "MoE", "total B", "active B"], ...plain });
    for (const m of c.models) t.push([m.name, m.layers, m.hidden, m.attention, m.moe, m.totalParamsB, m.activeParamsB]);
    out.push(t.toString());
  }
  if (what === "all" || what === "quant") out.push(`quantizations: ${c.quantizations.join(", ")}`);
  if (what === "all" || what === "interconnects")
    out.push(`interconnects: ${c.interconnects.join(", ")} (or --topo nvidia-smi-topo.txt)`);
  return out.join("\n");
}

/** The workload block: what a benchmark at this concurrency or rate reports. */
export function renderWorkload(w: NonNullable<Prediction["workload"]>): string[] {
  const load = w.mode === "concurrency" ? `concurrency ${w.concurrency}` : `${w.requestRate} req/s`;
  return [
    `benchmark at ${load}, input ${w.inputLen.mean}${w.inputLen.sd ? ` ± ${w.inputLen.sd}` : ""} / output ${w.outputLen.mean}${w.outputLen.sd ? ` ± ${w.outputLen.sd}` : ""} tokens, ${w.maxNumBatchedTokens} tokens per step:`,
    `  ${w.summary}`,
    `  TPOT mean ${fmtRange(w.meanTpotMs, 2, " ms")}, p99 ${fmtRange(w.p99TpotMs, 2, " ms")}; ITL mean ${fmtRange(w.meanItlMs, 2, " ms")}, p99 ${fmtRange(w.p99ItlMs, 2, " ms")}; TTFT mean ${fmtRange(w.ttftMs, 1, " ms")}, p99 ${fmtRange(w.p99TtftMs, 1, " ms")}`,
  ];
}
