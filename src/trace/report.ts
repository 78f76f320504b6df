// Turns analyses into terminal text and into the study report's trace section (pure).
import Table from "cli-table3";
import type { TraceSection } from "../report/types.ts";
import type { TraceAnalysis } from "./analyze.ts";
import { headSteps, type StepBreakdown } from "./breakdown.ts";
import { KERNEL_CLASSES } from "./classify.ts";
import type { LayerAnalysis } from "./layers.ts";
import type { NcclTestsResult } from "./nccl.ts";
import { type RooflineAnalysis, rooflineLine } from "./roofline.ts";
import { layersSection, rooflineSection } from "./section.ts";
import type { Diagnosis, Topology } from "./topo.ts";

const COMPACT = { mid: "", "left-mid": "", "mid-mid": "", "right-mid": "" };

function table(head: string[], colAligns?: Array<"left" | "right">): Table.Table {
  return new Table({ head, chars: COMPACT, style: { head: [], border: [] }, ...(colAligns ? { colAligns } : {}) });
}

const ms = (us: number, d = 3) => (us / 1000).toFixed(d);
const pct = (x: number) => `${(x * 100).toFixed(1)} %`;

/** The study report's trace section: mean decode step (or all steps when none are decode). */
export function toReportSection(a: TraceAnalysis): TraceSection {
  const ss = headSteps(a.steps);
  const n = Math.max(1, ss.length);
  const mean = (f: (s: StepBreakdown) => number) => ss.reduce((x, s) => x + f(s), 0) / n;
  const durs = ss.map((s) => s.durUs).sort((x, y) => x - y);
  const q = (p: number) => (durs.length ? durs[Math.min(durs.length - 1, Math.floor(p * (durs.length - 1)))]! : 0);
  const stepUs = mean((s) => s.durUs);
  const perClass = KERNEL_CLASSES.map((cls) => {
    const us = mean((s) => s.busyByClass[cls] ?? 0);
    return {
      cls,
      msPerStep: us / 1000,
      share: stepUs > 0 ? us / stepUs : 0,
      kernelsPerStep: mean((s) => s.kernelsByClass[cls] ?? 0),
    };
  }).filter((c) => c.msPerStep > 0);
  const arCalls = mean((s) => s.allReduceCalls);
  const arUs = mean((s) => s.allReduceUs);
  const kind = ss.some((s) => s.kind === "decode") ? "decode" : "all";
  const arNames = Object.entries(a.kernelClasses)
    .filter(([name, c]) => c.class === "communication" && !/AllGather|all_gather|ReduceScatter|AllToAll/i.test(name))
    .map(([name]) => name);
  return {
    steps: a.steps.length,
    decodeSteps: a.steps.filter((s) => s.kind === "decode" && !s.clipped).length,
    stepMs: {
      value: stepUs / 1000,
      low: q(0.1) / 1000,
      high: q(0.9) / 1000,
      unit: "ms",
      method: "measured",
      how:
        a.stepMode === "none"
          ? "the whole trace's GPU time line: its steps cannot be told apart, so this is a total, not a step"
          : `mean GPU-timeline window of ${ss.length} ${kind} steps in the profiler trace (p10–p90 range; steps by ${a.stepMode})`,
    },
    perClass,
    idleMsPerStep: mean((s) => s.idleUs) / 1000,
    allReduceCallsPerStep: arCalls,
    allReducePerCallUs: {
      value: arCalls > 0 ? arUs / arCalls : 0,
      unit: "µs",
      method: "measured",
      how: "Σ all-reduce kernel time / all-reduce kernels per step (kernel time includes waiting for other ranks)",
    },
    allReduceShare: {
      value: stepUs > 0 ? arUs / stepUs : 0,
      unit: "ratio",
      method: "measured",
      how: "all-reduce kernel time / step time",
    },
    kernelNames: arNames,
    files: a.files,
    notes: [...a.notes, ...a.warnings.slice(0, 5)],
    stepMode: a.stepMode,
    ...(a.layers ? { layers: layersSection(a.layers) } : {}),
    ...(a.roofline ? { roofline: rooflineSection(a.roofline) } : {}),
  };
}

/** The class table per step: mean over the head steps (headSteps), with the step's own row. */
function perStepTable(a: TraceAnalysis, ss: ReturnType<typeof headSteps>): ReturnType<typeof table> {
  const n = ss.length;
  const stepUs = ss.reduce((x, s) => x + s.durUs, 0) / n;
  const t = table(
    ["class", "ms/step", "share", "kernels/step", "total ms", "kernels"],
    ["left", "right", "right", "right", "right", "right"],
  );
  for (const cls of KERNEL_CLASSES) {
    const per = ss.reduce((x, s) => x + (s.busyByClass[cls] ?? 0), 0) / n;
    const tot = a.overall.kernelUsByClass[cls] ?? 0;
    if (!per && !tot) continue;
    t.push([
      cls,
      ms(per),
      stepUs ? pct(per / stepUs) : "",
      (ss.reduce((x, s) => x + (s.kernelsByClass[cls] ?? 0), 0) / n).toFixed(1),
      ms(tot, 1),
      String(a.overall.kernelCountByClass[cls] ?? 0),
    ]);
  }
  const idle = ss.reduce((x, s) => x + s.idleUs, 0) / n;
  const idleHost = ss.reduce((x, s) => x + s.idleHostUs, 0) / n;
  t.push([
    "idle (host-bound)",
    ms(idleHost),
    stepUs ? pct(idleHost / stepUs) : "",
    "",
    ms(a.overall.idleHostUs, 1),
    "",
  ]);
  t.push([
    "idle (other)",
    ms(idle - idleHost),
    stepUs ? pct((idle - idleHost) / stepUs) : "",
    "",
    ms(a.overall.idleOtherUs, 1),
    "",
  ]);
  t.push(["step", ms(stepUs), "100 %", "", "", ""]);
  return t;
}

/** The class table when steps cannot be told apart: totals over the whole time line, shares of it; null when empty. */
function totalsTable(a: TraceAnalysis): ReturnType<typeof table> | null {
  const o = a.overall;
  const spanUs = o.timeline.spanUs;
  const t = table(["class", "total ms", "share", "kernels"], ["left", "right", "right", "right"]);
  let rows = 0;
  for (const cls of KERNEL_CLASSES) {
    const tot = o.kernelUsByClass[cls] ?? 0;
    if (!tot && !o.kernelCountByClass[cls]) continue;
    rows++;
    t.push([cls, ms(tot), spanUs ? pct(tot / spanUs) : "", String(o.kernelCountByClass[cls] ?? 0)]);
  }
  if (rows === 0 && !spanUs) return null;
  t.push(["idle (host-bound)", ms(o.idleHostUs), spanUs ? pct(o.idleHostUs / spanUs) : "", ""]);
  t.push(["idle (other)", ms(o.idleOtherUs), spanUs ? pct(o.idleOtherUs / spanUs) : "", ""]);
  t.push(["whole time line", ms(spanUs), "100 %", ""]);
  return t;
}

export function formatAnalysis(a: TraceAnalysis): string {
  const out: string[] = [];
  for (const r of a.ranks) {
    const i = r.info;
    out.push(
      `${r.file}${a.ranks.length > 1 ? ` (rank ${r.rank})` : ""}: ${(i.jsonBytes / 1e6).toFixed(1)} MB JSON, ${i.events} events, ${r.overall.kernels} GPU activities on ${r.overall.streams} stream(s), ${r.stepMode === "none" ? "steps cannot be told apart" : `${r.steps.length} steps (${r.stepMode})`}${i.truncated ? " — TRUNCATED, partial results" : ""}`,
    );
  }
  // Without steps, a "step" headline and line would restate the whole trace's totals as one step.
  if (a.stepMode !== "none") for (const k of a.overall.byKind) out.push(k.headline);
  if (a.stepMode !== "none" && a.steps.length <= 12)
    for (const s of a.steps) {
      const b = s.batch;
      const label = [
        s.kind,
        b?.requests !== undefined ? `${b.requests} req` : "",
        b?.tokens !== undefined ? `${b.tokens} tok` : "",
        s.forwardMode ?? "",
      ]
        .filter(Boolean)
        .join(", ");
      const tl = s.timeline;
      out.push(
        `step ${s.index} (${label}; ${s.source ?? a.stepMode}): ${ms(tl.spanUs)} ms of GPU time line, busy ${ms(tl.busyUs)}, idle ${ms(tl.idleUs)}, ${s.kernels} activities${s.graphKernels ? ` (${s.graphKernels} from graph replays)` : ""}${s.clipped ? ` — CLIPPED: ${s.clipReason}` : ""}`,
      );
    }
  out.push("");
  const ss = headSteps(a.steps);
  // Without steps there is no per-step figure: the table holds the whole trace's totals, no ms/step column.
  const whole = a.stepMode === "none" || ss.length === 0;
  const t = whole ? totalsTable(a) : perStepTable(a, ss);
  out.push(
    t === null
      ? "no GPU activity to break down"
      : whole
        ? `totals over the whole trace, no ms/step column: steps cannot be told apart (${ss.length === 0 ? "every step was clipped" : "no step annotations, graph launches, repeating kernel sequence or idle gap"})`
        : `per step (mean of ${ss.length} ${ss[0]?.kind ?? ""} steps, clipped steps excluded):`,
  );
  if (t) out.push(t.toString());
  const o = a.overall;
  out.push(
    `communication: ${ms(o.commExposedUs, 1)} ms exposed, ${ms(o.commOverlappedUs, 1)} ms overlapped with compute; launches: ${o.launch.calls} (${o.launch.graphLaunches} CUDA-graph), ${ms(o.launch.cpuUs, 1)} ms CPU in launch calls${o.launch.medianLatencyUs !== undefined ? `, median launch→start ${o.launch.medianLatencyUs.toFixed(1)} µs` : ""}`,
  );
  out.push("");
  const top = table(
    ["top kernels", "class (decided by)", "count", "total ms", "mean µs", "share"],
    ["left", "left", "right", "right", "right", "right"],
  );
  for (const k of o.topKernels.slice(0, 10))
    top.push([
      k.name.length > 70 ? `${k.name.slice(0, 67)}...` : k.name,
      `${k.class} (${k.decidedBy ?? `rule ${k.rule}`})`,
      String(k.count),
      ms(k.totalUs, 1),
      k.meanUs.toFixed(1),
      pct(k.share),
    ]);
  out.push(top.toString());
  if (a.layers) out.push("", ...formatLayers(a.layers, whole));
  if (a.roofline) out.push("", ...formatRoofline(a.roofline));
  if (a.skew) {
    const sk = table(["rank", "steps", "mean step ms", "p50 ms", "comm µs/step"]);
    for (const p of a.skew.perRank)
      sk.push([String(p.rank), String(p.steps), ms(p.meanStepUs), ms(p.p50StepUs), p.meanCommUs.toFixed(1)]);
    out.push("");
    out.push(sk.toString());
    out.push(
      `rank skew over ${a.skew.alignedSteps} aligned steps: mean ${a.skew.meanSkewUs.toFixed(1)} µs, max ${a.skew.maxSkewUs.toFixed(1)} µs${a.skew.slowestRank !== undefined ? `; slowest most often: rank ${a.skew.slowestRank}` : ""}${a.skew.stragglerRank !== undefined ? `; least time in collectives (likely straggler): rank ${a.skew.stragglerRank}` : ""}`,
    );
  }
  for (const note of a.notes) out.push(`note: ${note}`);
  for (const w of a.warnings) out.push(`warning: ${w}`);
  return out.join("\n");
}

const short = (name: string, n = 60) => (name.length > n ? `${name.slice(0, n - 3)}...` : name);
const us1 = (x: number) => x.toFixed(1);

/** The layer period: per-layer time and spread, per-op table, head and tail. */
/** `whole`: steps could not be told apart, so the layers repeat over the whole trace, not per step. */
export function formatLayers(l: LayerAnalysis, whole = false): string[] {
  const out: string[] = [];
  const u = l.layerKernelUs;
  const cls = (b: Partial<Record<string, number>>) =>
    Object.entries(b)
      .sort((x, y) => (y[1] ?? 0) - (x[1] ?? 0))
      .map(([c, v]) => `${c} ${us1(v ?? 0)}`)
      .join(", ");
  out.push(
    `layers: ${l.layers} ${whole ? "in the trace" : "per step"} × ${l.kernelsPerLayer} kernels${whole ? "" : ` (${l.steps} steps)`}; one layer ${us1(u.mean)} µs of kernel time (min ${us1(u.min)}, max ${us1(u.max)}, cv ${pct(u.cv)}), ${us1(l.layerSpanUs.mean)} µs of time line; per layer: ${cls(l.layerByClass)} µs`,
  );
  out.push(
    `  head (before the first layer): ${l.head.kernels} kernels, ${us1(l.head.kernelUs)} µs (${cls(l.head.byClass)})`,
  );
  out.push(
    `  tail (after the last layer: final norm, LM head, sampling): ${l.tail.kernels} kernels, ${us1(l.tail.kernelUs)} µs (${cls(l.tail.byClass)})`,
  );
  if (l.ops.length) {
    const t = table(
      ["#", "op in the layer", "class", "mean µs", "min", "max", "cv", whole ? "× layers ms" : "× layers ms/step"],
      ["right", "left", "left", "right", "right", "right", "right", "right"],
    );
    for (const o of l.ops)
      t.push([
        String(o.index),
        `${short(o.name)}${o.variants ? ` (+${o.variants - 1} variants)` : ""}`,
        o.class,
        us1(o.us.mean),
        us1(o.us.min),
        us1(o.us.max),
        pct(o.us.cv),
        ms(o.us.mean * l.layers),
      ]);
    out.push(t.toString());
  }
  for (const n of l.notes) out.push(`note: layers: ${n}`);
  return out;
}

/** Per-GEMM roofline and the step beside the model, term by term. */
export function formatRoofline(r: RooflineAnalysis): string[] {
  const out: string[] = [];
  out.push(
    `roofline: ${r.model} on ${r.gpu}, ceiling ${(r.ceilingGBs / 1000).toFixed(2)} TB/s (${r.ceilingIs}); batch ${r.batch}, context ${r.contextLen}`,
  );
  if (r.gemms.length) {
    const t = table(
      ["weight GEMM", "shape", "MB", "µs/call", "cv", "TB/s", "of ceiling", "calls/step"],
      ["left", "left", "right", "right", "right", "right", "right", "right"],
    );
    for (const g of r.gemms)
      t.push([
        g.name,
        `${g.shape.in}×${g.shape.out}`,
        (g.bytes / 1e6).toFixed(1),
        us1(g.us.mean),
        g.callsPerStep > 1 ? pct(g.us.cv) : "–",
        (g.achievedGBs / 1000).toFixed(2),
        pct(g.ceilingShare),
        String(g.callsPerStep),
      ]);
    out.push(t.toString());
    for (const g of r.gemms) out.push(`  ${rooflineLine(g, r.ceilingGBs)}`);
    if (r.weightGemms)
      out.push(
        `  all weight GEMMs: ${(r.weightGemms.bytes / 1e9).toFixed(2)} GB in ${ms(r.weightGemms.us)} ms = ${(r.weightGemms.achievedGBs / 1000).toFixed(2)} TB/s, ${pct(r.weightGemms.ceilingShare)} of the ceiling`,
      );
  }
  const t = table(
    ["model term", "predicted ms (low–high)", "measured ms", "measured as"],
    ["left", "right", "right", "left"],
  );
  for (const x of r.terms)
    t.push([
      x.label,
      `${x.predictedMs.mid.toFixed(3)} (${x.predictedMs.low.toFixed(3)}–${x.predictedMs.high.toFixed(3)})`,
      x.measuredMs === null ? "n/a" : x.measuredMs.toFixed(3),
      x.measuredIs,
    ]);
  t.push([
    "step",
    `${r.predictedStepMs.mid.toFixed(3)} (${r.predictedStepMs.low.toFixed(3)}–${r.predictedStepMs.high.toFixed(3)})`,
    r.measuredStepMs.toFixed(3),
    "mean step window",
  ]);
  out.push("step vs the model, term by term:");
  out.push(t.toString());
  for (const n of r.notes) out.push(`note: roofline: ${n}`);
  return out;
}

export function formatNccl(r: NcclTestsResult): string {
  const t = table(
    ["size (B)", "count", "type", "redop", "oop time µs", "oop busbw", "ip time µs", "ip busbw", "#wrong"],
    ["right", "right", "left", "left", "right", "right", "right", "right", "right"],
  );
  for (const row of r.rows)
    t.push([
      String(row.sizeBytes),
      String(row.count),
      row.type,
      row.redop,
      row.outOfPlace ? String(row.outOfPlace.timeUs) : "",
      row.outOfPlace ? String(row.outOfPlace.busbwGBs) : "",
      row.inPlace ? String(row.inPlace.timeUs) : "",
      row.inPlace ? String(row.inPlace.busbwGBs) : "",
      String(row.inPlace?.wrong ?? row.outOfPlace?.wrong ?? "N/A"),
    ]);
  const head = `${r.collective ?? "nccl-tests"} (${r.layout} layout${r.version ? `, nccl-tests ${r.version}` : ""}, ${r.timeKind}), ${r.devices.length} ranks${r.devices[0] ? ` on ${r.devices[0].name}` : ""}${r.avgBusBwGBs !== undefined ? `, avg bus bandwidth ${r.avgBusBwGBs} GB/s` : ""}`;
  return [head, t.toString(), ...r.warnings.map((w) => `warning: ${w}`)].join("\n");
}

export function formatTopology(topo: Topology, d?: Diagnosis): string {
  const t = table(["", ...topo.gpus]);
  topo.matrix.forEach((row, i) => {
    t.push([topo.gpus[i]!, ...row]);
  });
  const out = [t.toString()];
  const classes = new Map<string, number>();
  for (const l of topo.links) classes.set(l.class, (classes.get(l.class) ?? 0) + 1);
  out.push(`GPU pairs: ${[...classes.entries()].map(([c, n]) => `${n} ${c}`).join(", ")}`);
  if (d) {
    out.push(
      `TP ${d.tp} on ${d.gpus.join(", ")}: ${d.fullyNvlinked ? "every pair NVLink-connected" : `weakest link ${d.worstLink}`}`,
    );
    for (const [eng, v] of [
      ["vLLM", d.customAllReduce.vllm],
      ["SGLang", d.customAllReduce.sglang],
    ] as const)
      out.push(`  ${eng} custom all-reduce: ${v.enabled ? "ENABLED" : "disabled"} — ${v.reasons.join("; ")}`);
    out.push(`  NCCL transport: ${d.nccl.transport}; protocols by default: ${d.nccl.protocols.join(", ") || "-"}`);
    for (const r of d.nccl.reasons) out.push(`    ${r}`);
    for (const f of d.findings) out.push(`  finding: ${f}`);
  }
  for (const w of topo.warnings) out.push(`warning: ${w}`);
  return out.join("\n");
}
