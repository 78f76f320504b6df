// What-ifs and ceilings: the same model re-run under changed assumptions, and the seed's §3.8 ceiling table as
// ranges tied to named assumptions. Pure.
import { UsageError } from "../errors.ts";
import type { FitResult } from "./fit.ts";
import { findGpu } from "./hardware.ts";
import type { Prediction } from "./predict.ts";
import { predict, predictStep } from "./predict.ts";
import type { Range } from "./range.ts";
import { rateFromMs, round, roundRange } from "./range.ts";
import type { ModelInput } from "./resolve.ts";
import { resolve } from "./resolve.ts";

export interface WhatIfRow {
  scenario: string;
  description: string;
  stepMs: Range;
  tokensPerSecond: Range;
  tokensPerSecondTotal: Range;
  /** Central step time change vs the baseline, ms (negative = faster). */
  deltaMs: number;
  /**
   * The change's range, for scenarios that change only NCCL's protocol or algorithm: over Simple's bounded cost
   * over LL and, where the baseline's ring-search fallback is unknown, over both answers. Elsewhere the two rows'
   * other uncertainties do not cancel, and no range is given.
   */
  deltaMsRange?: Range;
  speedup: number;
  allReduce: { implementation: string; protocol: string | null; usEach: number; count: number };
  notes: string[];
}

export const SCENARIO_HELP = [
  "baseline",
  "zero-comm (communication costs nothing)",
  "custom-ar / no-custom-ar",
  "nvlink (NVLink instead of PCIe) / interconnect=pcie4",
  "proto=LL | proto=LL128 | proto=Simple, algo=Ring|Tree, protocols (LL vs LL128 vs Simple)",
  "tp=N, ep=N, pp=N, dp=N",
  "kv=fp8",
  "batch=1,2,4,8,16 (sweep: one row each)",
  "context=N, quant=NAME, gpu=NAME, engine=NAME, eager, graphs",
  "combine with '+': nvlink+custom-ar",
];

/** Applies one scenario term to an input; returns the changed input and a description. */
function applyTerm(input: ModelInput, term: string): { input: ModelInput; description: string } {
  const t = term.trim();
  const [k, v] = t.includes("=")
    ? [t.slice(0, t.indexOf("=")).trim().toLowerCase(), t.slice(t.indexOf("=") + 1).trim()]
    : [t.toLowerCase(), ""];
  const int = (x: string) => {
    const n = Number(x);
    if (!Number.isSafeInteger(n) || n < 1) throw new UsageError(`what-if "${term}": expected a whole number ≥ 1`);
    return n;
  };
  switch (k) {
    case "baseline":
      return { input, description: "as configured" };
    case "zero-comm":
    case "zero-cost-communication":
    case "no-comm":
      return {
        input: { ...input, zeroComm: true },
        description: "communication costs nothing (all-reduce, all-to-all, p2p = 0)",
      };
    case "custom-ar":
    case "custom-all-reduce":
      return { input: { ...input, customAllReduce: true }, description: "custom all-reduce on (one-shot kernel)" };
    case "no-custom-ar":
      return {
        input: { ...input, customAllReduce: false },
        description: "custom all-reduce off (--disable-custom-all-reduce)",
      };
    case "nvlink":
      return { input: { ...input, interconnect: "nvlink" }, description: "NVLink instead of PCIe (all pairs)" };
    case "interconnect":
      return { input: { ...input, interconnect: v }, description: `interconnect ${v}` };
    case "proto":
    case "nccl_proto":
      return { input: { ...input, ncclProto: v }, description: `NCCL_PROTO=${v}` };
    case "algo":
    case "nccl_algo":
      return { input: { ...input, ncclAlgo: v }, description: `NCCL_ALGO=${v}` };
    case "tp": {
      const tp = int(v);
      const gpus = Math.max(input.gpus ?? 1, tp * (input.pp ?? 1) * (input.dp ?? 1));
      const ep = input.ep && input.ep > 1 && tp % input.ep === 0 ? input.ep : 1;
      return { input: { ...input, tp, gpus, ep }, description: `TP ${tp}` };
    }
    case "ep":
      return { input: { ...input, ep: int(v) }, description: `EP ${v}` };
    case "pp": {
      const pp = int(v);
      return {
        input: { ...input, pp, gpus: Math.max(input.gpus ?? 1, (input.tp ?? 1) * pp * (input.dp ?? 1)) },
        description: `PP ${pp}`,
      };
    }
    case "dp": {
      const dp = int(v);
      return {
        input: { ...input, dp, gpus: Math.max(input.gpus ?? 1, (input.tp ?? 1) * (input.pp ?? 1) * dp) },
        description: `DP ${dp}`,
      };
    }
    case "kv":
    case "kv-dtype":
      return { input: { ...input, kvDtype: v }, description: `KV cache ${v}` };
    case "fp8-kv":
      return { input: { ...input, kvDtype: "fp8" }, description: "KV cache FP8" };
    case "batch":
      return { input: { ...input, batch: int(v) }, description: `batch ${v}` };
    case "context":
      return { input: { ...input, contextLen: Number(v) }, description: `context ${v}` };
    case "quant":
      return { input: { ...input, quant: v }, description: `quantization ${v}` };
    case "gpu":
      if (!findGpu(v)) resolve({ ...input, gpu: v });
      return { input: { ...input, gpu: v, interconnect: undefined }, description: `GPU ${v}` };
    case "engine":
      return { input: { ...input, engine: v as ModelInput["engine"] }, description: `engine ${v}` };
    case "eager":
      return { input: { ...input, cudaGraphs: false }, description: "eager (no CUDA graphs)" };
    case "graphs":
      return { input: { ...input, cudaGraphs: true }, description: "CUDA graphs" };
    default:
      throw new UsageError(`unknown what-if "${term}"`, { hint: `scenarios: ${SCENARIO_HELP.join("; ")}` });
  }
}

/** Expands sweeps ("batch=1,2,4", "protocols") into single scenarios. */
export function expandScenarios(scenarios: string[]): string[] {
  const out: string[] = [];
  for (const s of scenarios) {
    const t = s.trim();
    if (t === "protocols" || t === "ll-vs-ll128-vs-simple") out.push("proto=LL", "proto=LL128", "proto=Simple");
    else if (/^(batch|tp|ep|context|pp|dp)=[\d,]+$/.test(t) && t.includes(",")) {
      const [k, v] = t.split("=");
      for (const x of v.split(",").filter(Boolean)) out.push(`${k}=${x}`);
    } else out.push(t);
  }
  return out;
}

function rowFrom(scenario: string, description: string, p: Prediction, base: Prediction | null): WhatIfRow {
  const notes: string[] = [];
  const car = p.collectives.customAllReduce;
  if (car.forcedHypothetical) notes.push(`hypothetical: ${car.reason}`);
  if (!p.memory.fits) notes.push(p.memory.note);
  if (p.input.zeroComm) notes.push("collectives zeroed");
  if (p.collectives.protocol === "LL128" && !p.collectives.protocolMenu.includes("LL128")) notes.push("LL128 forced");
  const fb = p.collectives.searchFallback;
  if (fb && fb.state !== "no" && p.collectives.simpleExtraUsEach.high > 0 && !p.input.ncclProto)
    notes.push(
      fb.state === "yes"
        ? "NCCL's ring search falls back: Simple where LL would run"
        : "NCCL may run Simple: whether its ring search falls back depends on the host (counted at equal odds)",
    );
  if (p.input.ncclProto && p.collectives.implementation !== "nccl")
    notes.push(`NCCL_PROTO has no effect: ${p.collectives.implementation} carries the all-reduces`);
  const d = base ? p.decode.stepMs.mid - base.decode.stepMs.mid : 0;
  return {
    scenario,
    description,
    stepMs: p.decode.stepMs,
    tokensPerSecond: p.decode.tokensPerSecond,
    tokensPerSecondTotal: p.decode.tokensPerSecondTotal,
    deltaMs: round(d, 4),
    speedup: base ? round(base.decode.stepMs.mid / p.decode.stepMs.mid, 4) : 1,
    allReduce: {
      implementation: p.collectives.implementation,
      protocol: p.collectives.protocol,
      usEach: p.input.zeroComm ? 0 : p.collectives.latencyUsEach.mid,
      count: p.collectives.countPerToken,
    },
    notes,
  };
}

const NCCL_ONLY = /^(proto|nccl_proto|algo|nccl_algo)=/;

function arCalls(p: Prediction): number {
  return p.collectives.countPerToken + p.collectives.extra.reduce((a, e) => a + e.count, 0);
}

/**
 * Range of an NCCL-only change: per fallback answer (both when unknown), the central change, then Simple's cost over
 * LL at its bounds in both rows at once (one unknown, so they move together).
 */
function ncclDeltaRange(
  base: ModelInput,
  scen: ModelInput,
  b0: Prediction,
): { range: { low: number; high: number }; notes: string[] } {
  const unknown = b0.collectives.searchFallback?.state === "unknown";
  const answers: (boolean | undefined)[] = unknown ? [true, false] : [undefined];
  let lo = Number.POSITIVE_INFINITY;
  let hi = Number.NEGATIVE_INFINITY;
  const notes: string[] = [];
  for (const f of answers) {
    const b = f === undefined ? b0 : predict({ ...base, ncclFallback: f });
    const s = predict({ ...scen, ncclFallback: f ?? scen.ncclFallback });
    const d = s.decode.stepMs.mid - b.decode.stepMs.mid;
    const at = (w: "low" | "high") =>
      d +
      (arCalls(s) * (s.collectives.simpleExtraUsEach[w] - s.collectives.simpleExtraUsEach.mid)) / 1000 -
      (arCalls(b) * (b.collectives.simpleExtraUsEach[w] - b.collectives.simpleExtraUsEach.mid)) / 1000;
    const ends = [d, at("low"), at("high")];
    const l = Math.min(...ends);
    const h = Math.max(...ends);
    lo = Math.min(lo, l);
    hi = Math.max(hi, h);
    if (unknown)
      notes.push(
        `if NCCL's ring search ${f ? "falls back" : "does not fall back"}: ${d >= 0 ? "+" : ""}${d.toFixed(2)} ms [${l.toFixed(2)}, ${h.toFixed(2)}]`,
      );
  }
  return { range: { low: round(lo, 4), high: round(hi, 4) }, notes };
}

/** Re-runs the model under each scenario; the first row is always the baseline. */
export function whatif(input: ModelInput, scenarios: string[]): WhatIfRow[] {
  // Every term is applied before any prediction: a bad one (batch=0) is refused before the model runs.
  const applied: Array<{ s: string; input: ModelInput; description: string }> = [];
  for (const s of expandScenarios(scenarios)) {
    if (s === "baseline") continue;
    let cur = input;
    const desc: string[] = [];
    for (const term of s.split("+")) {
      const r = applyTerm(cur, term);
      cur = r.input;
      desc.push(r.description);
    }
    applied.push({ s, input: cur, description: desc.join(" + ") });
  }
  const base = predict(input);
  const rows: WhatIfRow[] = [rowFrom("baseline", "as configured", base, null)];
  for (const a of applied) {
    const row = rowFrom(a.s, a.description, predict(a.input), base);
    if (a.s.split("+").every((t) => NCCL_ONLY.test(t.trim().toLowerCase()))) {
      const r = ncclDeltaRange(input, a.input, base);
      row.deltaMsRange = { low: r.range.low, mid: row.deltaMs, high: r.range.high };
      row.notes.push(...r.notes);
    }
    rows.push(row);
  }
  return rows;
}

/** A full factorial grid (for sweeps and the benchmark): every combination of the axes' values. */
export function whatifGrid(
  input: ModelInput,
  axes: Record<string, (string | number)[]>,
): { point: Record<string, string | number>; stepMs: number; tokensPerSecond: number }[] {
  const keys = Object.keys(axes);
  const out: { point: Record<string, string | number>; stepMs: number; tokensPerSecond: number }[] = [];
  const idx = new Array(keys.length).fill(0);
  for (;;) {
    let cur = input;
    const point: Record<string, string | number> = {};
    for (let i = 0; i < keys.length; i++) {
      const v = axes[keys[i]][idx[i]];
      point[keys[i]] = v;
      cur = applyTerm(cur, `${keys[i]}=${v}`).input;
    }
    const p = predictStep(cur);
    out.push({ point, stepMs: p.stepMs.mid, tokensPerSecond: p.tokensPerSecond.mid });
    let i = keys.length - 1;
    while (i >= 0 && ++idx[i] >= axes[keys[i]].length) idx[i--] = 0;
    if (i < 0) break;
  }
  return out;
}

// ---------------------------------------------------------------- ceilings (seed-scenario.md §3.8)

export interface CeilingRow {
  name: string;
  assumption: string;
  stepMs: { low: number; high: number };
  tokensPerSecond: { low: number; high: number };
  basis: string;
}

function row(name: string, assumption: string, lo: number, hi: number, basis: string): CeilingRow {
  const a = Math.min(lo, hi);
  const b = Math.max(lo, hi);
  return {
    name,
    assumption,
    stepMs: { low: round(a, 3), high: round(b, 3) },
    tokensPerSecond: { low: round(1000 / b, 3), high: round(1000 / a, 3) },
    basis,
  };
}

/** Ceiling rows, each tied to a named assumption; measurement-based rows come from a fit when given. */
export function ceilings(input: ModelInput, fitted?: FitResult): CeilingRow[] {
  const rows: CeilingRow[] = [];
  const f = fitted?.facts;
  const inp = fitted
    ? { ...input, calibration: fitted.calibration, measuredBandwidthGBs: input.measuredBandwidthGBs ?? f?.bandwidthGBs }
    : input;
  const n = f?.nAr ?? predict(input).collectives.countPerToken;
  if (f?.itlMs !== undefined)
    rows.push(row("measured baseline", "the measured inter-token latency", f.itlMs, f.itlMs, "measurement"));
  if (f?.itlMs !== undefined && f.computeLowMs !== undefined && f.computeHighMs !== undefined)
    rows.push(
      row(
        "all-reduce free, stated compute",
        `compute = the stated estimate ${f.computeLowMs}–${f.computeHighMs} ms`,
        f.computeLowMs,
        f.computeHighMs,
        "stated estimate (measurements file)",
      ),
    );
  if (f?.ceilingLowTps !== undefined && f.ceilingHighTps !== undefined)
    rows.push(
      row(
        "all-reduce free, quoted ceiling",
        `the quoted ${f.ceilingLowTps}–${f.ceilingHighTps} tok/s ⇔ compute ${(1000 / f.ceilingHighTps).toFixed(1)}–${(1000 / f.ceilingLowTps).toFixed(1)} ms per token`,
        1000 / f.ceilingHighTps,
        1000 / f.ceilingLowTps,
        "stated estimate: 1000 / tok/s",
      ),
    );
  let restLo: number | undefined;
  let restHi: number | undefined;
  if (f?.itlMs !== undefined && f.shareLow !== undefined && f.shareHigh !== undefined) {
    restLo = f.itlMs * (1 - f.shareHigh);
    restHi = f.itlMs * (1 - f.shareLow);
    rows.push(
      row(
        "all-reduce free, rest from the share estimate",
        `all-reduce = ${pctRange(f.shareLow, f.shareHigh)} of ${+f.itlMs.toFixed(2)} ms, removed`,
        restLo,
        restHi,
        "ITL × (1 − share)",
      ),
    );
  }
  if (f && n > 0 && f.isolatedModelUs !== undefined) {
    const isoLo = f.isolatedModelUs;
    const isoHi = Math.max(f.isolatedMeasuredUs ?? isoLo, isoLo);
    const cLo = restLo !== undefined ? Math.max(restLo, f.computeLowMs ?? restLo) : f.computeLowMs;
    const cHi = Math.max(restHi ?? 0, f.computeHighMs ?? 0) || undefined;
    if (cLo !== undefined && cHi !== undefined)
      rows.push(
        row(
          "all-reduce at isolated NCCL cost",
          `${n} × ${isoLo.toFixed(1)}–${isoHi.toFixed(1)} µs = ${((n * isoLo) / 1000).toFixed(1)}–${((n * isoHi) / 1000).toFixed(1)} ms (NCCL model – measured isolated) + compute ${cLo.toFixed(1)}–${cHi.toFixed(1)} ms`,
          (n * isoLo) / 1000 + cLo,
          (n * isoHi) / 1000 + cHi,
          "collectives.md §3.4, §5.1 + compute range",
        ),
      );
  }
  if (f?.floors.length) {
    const lo = Math.min(...f.floors.map((x) => x.ms));
    const hi = Math.max(...f.floors.map((x) => x.ms));
    rows.push(
      row(
        "weight-streaming floor only",
        `weights at ${f.bandwidthGBs === undefined ? "spec" : Math.round(f.bandwidthGBs).toLocaleString("en-US")} GB/s, nothing else (precision: ${f.floors.map((x) => x.recipe).join(" / ")})`,
        lo,
        hi,
        "models.md §2",
      ),
    );
  }
  // Model rows (calibrated when a fit is given).
  const label = fitted ? "fitted model" : "model";
  const base = predict(inp);
  rows.push(
    row(
      `${label}: as configured`,
      "every term of the decode model",
      base.decode.stepMs.low,
      base.decode.stepMs.high,
      base.calibrated ? "calibrated prediction" : "prediction from catalog ranges",
    ),
  );
  if (base.collectives.countPerToken > 0) {
    const zc = predict({ ...inp, zeroComm: true });
    rows.push(
      row(
        `${label}: zero-cost communication`,
        "all-reduce and other collectives cost nothing",
        zc.decode.stepMs.low,
        zc.decode.stepMs.high,
        "what-if zero-comm",
      ),
    );
    if (!base.collectives.customAllReduce.used) {
      const car = predict({ ...inp, customAllReduce: true });
      rows.push(
        row(
          `${label}: custom one-shot all-reduce`,
          `custom all-reduce forced on${car.collectives.customAllReduce.forcedHypothetical ? " (hypothetical: the engine refuses it here)" : ""}`,
          car.decode.stepMs.low,
          car.decode.stepMs.high,
          "what-if custom-ar",
        ),
      );
    }
    if (base.hardware.interconnect.kind === "pcie") {
      const nv = predict({ ...inp, interconnect: "nvlink" });
      rows.push(
        row(
          `${label}: NVLink instead of PCIe`,
          "all pairs NVLink: custom all-reduce eligible, LL128 on the menu",
          nv.decode.stepMs.low,
          nv.decode.stepMs.high,
          "what-if nvlink",
        ),
      );
    }
  }
  // Every weight-read term (the MoE model splits them into routed, shared, dense-layer reads).
  const ws = base.decode.terms.filter((t) =>
    ["weights", "moe-experts", "moe-shared", "moe-dense-layers"].includes(t.name),
  );
  if (ws.length)
    rows.push(
      row(
        `${label}: weight reads only`,
        "only the weight-read terms (η range applied)",
        ws.reduce((s, t) => s + t.ms.low, 0),
        ws.reduce((s, t) => s + t.ms.high, 0),
        "weights terms",
      ),
    );
  return rows;
}

export function rangeTps(ms: Range): Range {
  return roundRange(rateFromMs(ms), 1);
}

/** "55–65 %", or one figure when both ends round alike. */
function pctRange(lo: number, hi: number): string {
  const a = (100 * lo).toFixed(1).replace(/\.0$/, "");
  const b = (100 * hi).toFixed(1).replace(/\.0$/, "");
  return a === b ? `${a} %` : `${a}–${b} %`;
}
