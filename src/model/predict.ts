// predict(): decode step, its named terms, the collectives, a prefill/TTFT estimate and the assumptions. Pure.
import { paramBreakdown } from "./architecture.ts";
import type { AllReduceChoice, NcclCandidate, SearchFallback } from "./collectives.ts";
import { chooseAllReduce, SKEW_US } from "./collectives.ts";
import type { SupportCheck } from "./cv.ts";
import { supportCheck, supportInflation } from "./cv.ts";
import type { MoePhysicsTerm } from "./moe.ts";
import { attachPhysics, moePhysics } from "./moe.ts";
import type { TermName } from "./priors.ts";
import {
  corpusFit,
  etaCoefOf,
  expertM,
  expertSmallMShape,
  fittedFactor,
  formatFactorOf,
  formatFamily,
  kernelCoefOf,
  linkArFactor,
  matFamilyKey,
  predictive,
  referenceKernelUs,
  stepParts,
  Z80,
} from "./priors.ts";
import type { Range } from "./range.ts";
import { rateFromMs, round, roundRange, scaleRange } from "./range.ts";
import type { CalibParam, ModelInput, Resolved } from "./resolve.ts";
import { resolve } from "./resolve.ts";
import type { KernelCount, ParamSet, StepEval } from "./step.ts";
import {
  A2A_US,
  allReduceFor,
  collectiveCounts,
  decodeLoads,
  ENGINE_CONSTANTS,
  ETA_C,
  ETA_M_MEASURED,
  ETA_M_SPEC,
  evalDecode,
  expertsOnBusiestDevice,
  expertsTouched,
  GGUF_KERNEL_EFF,
  kernelCount,
  kvReadPerGpu,
  P2P_US,
  peakTflops,
  referenceBandwidthGBs,
} from "./step.ts";
import type { WorkloadPrediction } from "./workload.ts";

export interface Term {
  name: string;
  label: string;
  ms: Range;
  /** Share of the central step time. */
  share: number;
  formula: string;
  inputs: Record<string, unknown>;
  source: string;
}

export interface CollectivesReport {
  implementation: string;
  countPerToken: number;
  extra: { name: string; count: number; bytes: number; note: string }[];
  bytesEach: number;
  algorithm: string;
  protocol: string | null;
  protocolMenu: string[];
  algorithmMenu: string[];
  latencyUsEach: Range;
  isolatedUsEach: Range;
  isolatedSource: string;
  /** NCCL's ring search on this node: whether it falls back to one channel (and then picks Simple), and why. */
  searchFallback?: SearchFallback;
  /** Part of latencyUsEach that is Simple's bounded cost over LL (after the fallback, or forced), at the same scale. */
  simpleExtraUsEach: Range;
  skewUsEach: Range;
  launchUsEach: Range;
  msPerToken: Range;
  reason: string[];
  customAllReduce: {
    eligible: boolean;
    used: boolean;
    reason: string;
    engineMessage?: string;
    forcedHypothetical?: boolean;
  };
  ncclModel?: { algorithm: string; protocol: string; latencyUs: number; timeUs: number; enabled: boolean }[];
  allToAllPerToken: number;
}

export interface Prediction {
  kind: "inferscope.model.prediction";
  input: {
    model: string;
    quant: string;
    kvDtype: string;
    gpu: string;
    gpus: number;
    tp: number;
    ep: number;
    pp: number;
    dp: number;
    interconnect: string;
    engine: string;
    cudaGraphs: boolean;
    ncclProto?: string;
    ncclAlgo?: string;
    customAllReduce?: boolean;
    batch: number;
    contextLen: number;
    inputLen: number;
    outputLen: number;
    zeroComm?: boolean;
  };
  architecture: {
    name: string;
    source: string;
    layers: number;
    hidden: number;
    attention: string;
    moe?: { experts: number; topk: number; shared: number; denseLayers: number };
    totalParamsB: number;
    activeParamsB: number;
  };
  quantization: {
    recipe: string;
    description: string;
    groups: Record<string, { format: string; bpw: number }>;
    kv: { dtype: string; source: string };
  };
  hardware: {
    gpu: {
      id: string;
      name: string;
      bandwidthGBs: number;
      referenceBandwidthGBs: number;
      bandwidthIsMeasured: boolean;
      tflopsBf16: number;
      memoryGB: number;
      source: string;
    };
    interconnect: { kind: string; label: string; allPairsNvlink: boolean; ncclBusBwGBs: number; source: string };
  };
  decode: {
    stepMs: Range;
    tokensPerSecond: Range;
    tokensPerSecondTotal: Range;
    terms: Term[];
    weightBytesPerGpu: number;
    kvBytesPerGpu: number;
    flopsPerGpu: number;
    kernels: KernelCount;
    /** MoE / MLA / FP8-block physics behind the terms (moe.ts), each with formula, inputs and source. */
    physics?: MoePhysicsTerm[];
    /**
     * Which regime the step is in: the device's work (weights, KV, compute, kernels, collectives) or the engine's host
     * work per step (scheduling, input preparation, sampling), when the engine overlaps the two and the host's is the
     * longer. Uncalibrated predictions only.
     */
    regime?: {
      bound: "device" | "host";
      deviceMs: number;
      hostMs: number;
      overlap: boolean;
      why: string;
      text: string;
    };
  };
  collectives: CollectivesReport;
  prefill: { inputLen: number; ttftMs: Range; terms: Term[] };
  request: { outputLen: number; totalMs: Range; tokensPerSecond: Range; formula: string };
  memory: { weightsGBPerGpu: number; kvGBPerGpuAtContext: number; capacityGB: number; fits: boolean; note: string };
  calibrated: boolean;
  /** Where the inputs lie outside the corpus (uncalibrated predictions): kind, sentence, factor on the interval. */
  extrapolations?: { kind: string; detail: string; inflation: number }[];
  /** The uncalibrated range is an 80 % prediction interval from the corpus fit (priors.ts). */
  interval?: {
    level: number;
    logSd: number;
    basis: string;
    maturity: string;
    /** Parameters this configuration uses that no corpus row informed (their prior spread stands). */
    unseen: string[];
    /** How the inputs lie outside the corpus; each widens the interval by its CV-estimated factor (cv.ts). */
    extrapolations?: { kind: string; detail: string; inflation: number }[];
    /** The interval's total widening factor on its log-width (1 = inside the corpus's support). */
    widening?: number;
    notes?: string[];
  };
  /** The MoE accounting behind the moe-* terms (MoE models only). */
  moe?: {
    experts: number;
    topk: number;
    shared: number;
    denseLayers: number;
    moeLayers: number;
    expertsTouchedPerLayer: number;
    expertsOnBusiestDevice: Range;
    tokensPerExpert: number;
    smallMFactor: number;
    maturityFactor: number;
    parallel: string;
    /** EP all-to-all vs TP all-reduce for the MoE blocks, ms per step. */
    communication: { tpAllReduceMs: number; epAllToAllMs: number; used: "tp-allreduce" | "ep-alltoall" | "none" };
  };
  assumptions: string[];
  /** What a benchmark measures under a workload (workload.ts), when --concurrency or --request-rate is given. */
  workload?: WorkloadPrediction;
}

type Which = "low" | "mid" | "high";

/**
 * The step's 80 % range with the spread of Simple's cost over LL (collectives.ts: NCCL's search fallback, unknown or
 * bounded) added in quadrature: the fit's per-call factor sees the mid only. `scale` is that factor.
 */
function withSimpleSpread(step: Range, r: Resolved, ar: AllReduceChoice | null, scale: number): Range {
  const x = ar?.simpleExtraUs;
  if (!x || r.input.zeroComm || (x.low === x.mid && x.mid === x.high)) return step;
  const cc = collectiveCounts(r);
  const k = ((cc.perToken + cc.embedding + cc.logitsGather) * scale) / 1000;
  return {
    low: Math.max(0, step.mid - Math.hypot(step.mid - step.low, k * (x.mid - x.low))),
    mid: step.mid,
    high: step.mid + Math.hypot(step.high - step.mid, k * (x.high - x.mid)),
  };
}
const WHICH: Which[] = ["low", "mid", "high"];

/** Parameter set for a time bound: "low" = optimistic (short step), "high" = pessimistic. */
function paramSet(r: Resolved, which: Which, ar: AllReduceChoice | null, a2a: Range, expertsRange: Range): ParamSet {
  const opp = (w: Which): Which => (w === "low" ? "high" : w === "high" ? "low" : "mid");
  const ec = ENGINE_CONSTANTS[r.engine];
  const eta = referenceBandwidthGBs(r).measured ? ETA_M_MEASURED : ETA_M_SPEC;
  const P: ParamSet = {
    etaM: eta[opp(which)],
    etaC: ETA_C[opp(which)],
    ggufEff: GGUF_KERNEL_EFF[opp(which)],
    kernelUs: (r.cudaGraphs ? ec.kernelGraphUs : ec.kernelEagerUs)[which],
    engineMs: ec.engineMs[which],
    arUs: ar ? ar.latencyUs[which] : 0,
    a2aUs: a2a[which],
    p2pUs: P2P_US[which],
    expertsLocal: expertsRange[which],
  };
  const cal = r.input.calibration?.params;
  if (cal) {
    const k = which === "low" ? -2 : which === "high" ? 2 : 0;
    const v = (name: CalibParam) => {
      const c = cal[name];
      return c ? c.mean + k * c.sd : undefined;
    };
    const invEta = v("invEta");
    // Against a measured copy bandwidth, streaming cannot beat the probe: cap η at 1.
    if (invEta !== undefined) {
      P.etaM = Math.min(referenceBandwidthGBs(r).measured ? 1 : 1.2, 1 / Math.max(0.2, invEta));
      // The fit's bytes carry the corpus format factors; routed experts their own fitted 1/η.
      const f = corpusFit();
      P.loadScale = (l) => formatFactorOf(r, l, f);
      const ie = v("invEtaExperts");
      // The fitted factor at one token per expert, carried to this batch by the corpus fit's small-M shape.
      if (ie !== undefined) P.expertScale = Math.max(0.2, ie) * P.etaM * expertSmallMShape(r, f);
    }
    const fixed = v("fixedMs");
    if (fixed !== undefined) P.fixedMs = Math.max(0, fixed);
    // A measured host part (engine spans, fit.ts hostMs): the fixed time splits into it and the kernels, not in the
    // reference ratio (evalDecode keeps kernels : engine, so the kernels get fixed − host).
    const host = (r.input.calibration as { hostMs?: { mean: number; sd: number } }).hostMs;
    const perStep = kernelCount(r).perStep;
    if (host && P.fixedMs !== undefined && perStep > 0) {
      P.engineMs = Math.min(P.fixedMs, Math.max(0, host.mean + k * host.sd));
      P.kernelUs = ((P.fixedMs - P.engineMs) * 1000) / perStep;
    }
  }
  return P;
}

/** Calibrated per-call all-reduce cost: fitted baseline, shifted by the model's difference for another configuration. */
function calibratedAr(r: Resolved, ar: AllReduceChoice, which: Which): number | undefined {
  const cal = r.input.calibration as
    | (ModelInput["calibration"] & {
        baseline?: { arModelUs: number; arKey: string };
        arVariants?: { key: string; deltaUs: { mean: number; sd: number } }[];
      })
    | undefined;
  if (!cal?.params.arLatUs) return undefined;
  const k = which === "low" ? -2 : which === "high" ? 2 : 0;
  const sd = Math.sqrt(
    (cal.params.arLatUs.sd ?? 0) ** 2 + (cal.params.skewUs?.sd ?? 0) ** 2 + (cal.params.arUsPerKB?.sd ?? 0) ** 2,
  );
  const bytes = r.batch * r.arch.hidden * 2;
  const base =
    cal.params.arLatUs.mean + (cal.params.skewUs?.mean ?? 0) + ((cal.params.arUsPerKB?.mean ?? 0) * bytes) / 1024;
  const key = arKey(r);
  let shift = 0;
  const variant = cal.arVariants?.find((x) => x.key === key);
  if (cal.baseline && key !== cal.baseline.arKey) {
    if (variant) shift = variant.deltaUs.mean + k * variant.deltaUs.sd;
    else shift = ar.latencyUs.mid - cal.baseline.arModelUs;
  }
  return Math.max(0, base + shift + k * sd);
}

/** Identifies an all-reduce configuration (for calibrated A/B deltas). */
export function arKey(r: Resolved | ModelInput): string {
  const i = "input" in r ? r.input : r;
  return JSON.stringify({
    p: i.ncclProto ?? null,
    a: i.ncclAlgo ?? null,
    c: i.customAllReduce ?? null,
    g: i.cudaGraphs ?? true,
    l: typeof i.interconnect === "string" ? i.interconnect : (i.interconnect?.label ?? null),
  });
}

function zip(evals: StepEval[], f: (e: StepEval) => number): Range {
  const [a, b, c] = evals.map(f);
  return { low: Math.min(a, c), mid: b, high: Math.max(a, c) };
}

const GB = 1e9;

export function predict(input: ModelInput): Prediction {
  const r = resolve(input);
  return predictResolved(r);
}

/** Decode step only (no prefill, report or assumptions): the fast path for large what-if grids. */
export function predictStep(input: ModelInput): { stepMs: Range; tokensPerSecond: Range } {
  const r = resolve(input);
  if (!r.input.calibration) {
    const a = r.arch;
    const ex = a.moe ? expertsOnBusiestDevice(a.moe.experts, a.moe.topk, r.batch, r.ep).mid : 0;
    const f = corpusFit();
    // Out-of-support widening as in predict() (cv.ts), so a what-if grid's ranges are predict()'s.
    const sp = stepParts(r, { loads: decodeLoads(r, ex) });
    const pr = predictive(f, sp, true, supportInflation(r, f));
    const ar = allReduceFor(r);
    const arF = linkArFactor(f, r, sp.groups.link).mean;
    const stepMs = withSimpleSpread({ low: pr.low80, mid: pr.ms, high: pr.high80 }, r, ar, arF);
    return { stepMs, tokensPerSecond: rateFromMs(stepMs, r.tokensPerStep) };
  }
  const kernels = kernelCount(r);
  const ar = allReduceFor(r);
  const a = r.arch;
  const expertsRange = a.moe
    ? expertsOnBusiestDevice(a.moe.experts, a.moe.topk, r.batch, r.ep)
    : { low: 0, mid: 0, high: 0 };
  // Without EP the experts read do not vary across the three parameter sets: build the loads once.
  const shared = expertsRange.low === expertsRange.high ? decodeLoads(r, expertsRange.mid) : undefined;
  const evals = WHICH.map((w) => {
    const P = paramSet(r, w, ar, A2A_US, expertsRange);
    if (ar) {
      const c = calibratedAr(r, ar, w);
      if (c !== undefined) P.arUs = c;
    }
    return evalDecode(r, P, ar, kernels, shared);
  });
  const stepMs = zip(evals, (e) => e.totalMs);
  return { stepMs, tokensPerSecond: rateFromMs(stepMs, r.tokensPerStep) };
}

export function predictResolved(r: Resolved): Prediction {
  const a = r.arch;
  const pb = paramBreakdown(a);
  const kernels = kernelCount(r);
  const ar = allReduceFor(r);
  const a2aRange = A2A_US;
  const expertsRange = a.moe
    ? expertsOnBusiestDevice(a.moe.experts, a.moe.topk, r.batch, r.moeAllToAll ? r.ep : r.ep)
    : { low: 0, mid: 0, high: 0 };
  const cc = collectiveCounts(r);
  const ref = referenceBandwidthGBs(r);
  const calibrated = Boolean(r.input.calibration);
  const dec = calibrated
    ? calibratedDecode(r, kernels, ar, a2aRange, expertsRange)
    : fittedDecode(r, kernels, ar, expertsRange);
  const { sets, stepMs, terms, mid } = dec;
  const collectives = collectivesReport(r, ar, cc, sets);
  const physics = moePhysics(r, mid.loads, kernels, collectives.latencyUsEach.mid, A2A_US.mid);
  attachPhysics(terms, physics);
  const prefill = prefillEstimate(r, sets);
  const itl = stepMs;
  const N = r.outputLen;
  const totalMs: Range = {
    low: prefill.ttftMs.low + (N - 1) * itl.low,
    mid: prefill.ttftMs.mid + (N - 1) * itl.mid,
    high: prefill.ttftMs.high + (N - 1) * itl.high,
  };
  const memory = memoryCheck(r);
  const perUser = rateFromMs(stepMs, r.tokensPerStep);
  const assumptions = buildAssumptions(r, ar, kernels, mid, memory);
  return {
    kind: "inferscope.model.prediction",
    input: {
      model: a.name,
      quant: r.recipe.name,
      kvDtype: r.kv.id,
      gpu: r.gpu.id,
      gpus: r.gpus,
      tp: r.tp,
      ep: r.ep,
      pp: r.pp,
      dp: r.dp,
      interconnect: r.link.label,
      engine: r.engine,
      cudaGraphs: r.cudaGraphs,
      ncclProto: r.input.ncclProto,
      ncclAlgo: r.input.ncclAlgo,
      customAllReduce: r.input.customAllReduce,
      batch: r.batch,
      contextLen: r.contextLen,
      inputLen: r.inputLen,
      outputLen: r.outputLen,
      ...(r.input.zeroComm ? { zeroComm: true } : {}),
    },
    architecture: {
      name: a.name,
      source: a.source,
      layers: a.layers,
      hidden: a.hidden,
      attention:
        a.attention +
        (a.indexer ? " + DSA indexer" : "") +
        (a.slidingWindow ? ` + sliding window ${a.slidingWindow.window}` : ""),
      moe: a.moe
        ? { experts: a.moe.experts, topk: a.moe.topk, shared: a.moe.shared, denseLayers: a.moe.denseLayers }
        : undefined,
      totalParamsB: round(pb.total / 1e9, 2),
      activeParamsB: round(pb.active / 1e9, 2),
    },
    quantization: {
      recipe: r.recipe.name,
      description: r.recipe.description,
      groups: Object.fromEntries(
        Object.entries(r.recipe.groups).map(([k, f]) => [k, { format: f.id, bpw: round(f.bpw, 4) }]),
      ),
      kv: { dtype: r.kv.id, source: r.kv.source },
    },
    hardware: {
      gpu: {
        id: r.gpu.id,
        name: r.gpu.name,
        bandwidthGBs: r.gpu.bandwidthGBs,
        referenceBandwidthGBs: ref.gbs,
        bandwidthIsMeasured: ref.measured,
        tflopsBf16: r.gpu.tflops.bf16,
        memoryGB: r.gpu.memoryGB,
        source: r.gpu.source,
      },
      interconnect: {
        kind: r.link.kind,
        label: r.link.label,
        allPairsNvlink: r.link.allPairsNvlink,
        ncclBusBwGBs: r.link.ncclBusBwGBs,
        source: r.link.source,
      },
    },
    decode: {
      stepMs: roundRange(stepMs, 4),
      tokensPerSecond: roundRange(perUser, 3),
      tokensPerSecondTotal: roundRange(
        { low: perUser.low * r.batch * r.dp, mid: perUser.mid * r.batch * r.dp, high: perUser.high * r.batch * r.dp },
        3,
      ),
      terms,
      weightBytesPerGpu: Math.round(mid.weightBytes),
      kvBytesPerGpu: Math.round(mid.kvBytes),
      flopsPerGpu: Math.round(mid.flops),
      kernels,
      ...(physics.length ? { physics } : {}),
      ...(dec.regime ? { regime: dec.regime } : {}),
    },
    collectives,
    prefill,
    request: {
      outputLen: N,
      totalMs: roundRange(totalMs, 3),
      tokensPerSecond: roundRange(
        { low: (1000 * N) / totalMs.high, mid: (1000 * N) / totalMs.mid, high: (1000 * N) / totalMs.low },
        3,
      ),
      formula: "T(N) = TTFT + (N − 1)·ITL; rate = N / T(N)",
    },
    memory,
    calibrated,
    ...(dec.interval ? { interval: dec.interval, extrapolations: dec.interval.extrapolations ?? [] } : {}),
    ...(dec.moe ? { moe: dec.moe } : {}),
    assumptions,
  };
}

interface DecodeResult {
  sets: ParamSet[];
  stepMs: Range;
  terms: Term[];
  mid: StepEval;
  interval?: Prediction["interval"];
  moe?: Prediction["moe"];
  regime?: Prediction["decode"]["regime"];
}

const TERM_LABEL: Record<TermName, string> = {
  weights: "weight reads",
  "moe-dense-layers": "MoE: leading dense layers",
  "moe-shared": "MoE: shared experts",
  "moe-experts": "MoE: routed experts",
  "moe-routing": "MoE: router, top-k and permute",
  kv: "KV-cache reads",
  compute: "compute beyond bandwidth",
  kernels: "fixed per-kernel cost",
  engine: "engine overhead",
  allreduce: "tensor-parallel all-reduces",
  "extra-collectives": "embedding all-reduce + logits gather",
  alltoall: "EP dispatch + combine",
  "pp-p2p": "pipeline hand-offs",
};
const TERM_ORDER: TermName[] = [
  "weights",
  "moe-dense-layers",
  "moe-shared",
  "moe-experts",
  "moe-routing",
  "kv",
  "compute",
  "kernels",
  "allreduce",
  "extra-collectives",
  "alltoall",
  "pp-p2p",
  "engine",
];
const ALWAYS: TermName[] = ["weights", "kernels", "engine"];

const r80 = (mid: number, logSd: number): Range => ({
  low: mid * Math.exp(-Z80 * logSd),
  mid,
  high: mid * Math.exp(Z80 * logSd),
});

/** Sentences for the interval: each extrapolation and its widening, and what rests on a single corpus row. */
function supportNotes(s: SupportCheck): string[] {
  const out = s.extrapolations.map(
    (e) => `extrapolating: ${e.detail}; interval ×${e.inflation.toFixed(2)} (${e.kind}, inflation from the grouped CV)`,
  );
  if (s.singleRow.length)
    out.push(
      `rests on a single corpus row: ${s.singleRow.join(", ")} (each informed by one measurement, shrunk toward its parent)`,
    );
  return out;
}

/** The uncalibrated prediction: every efficiency from the corpus fit; the range is the 80 % prediction interval. */
function fittedDecode(
  r: Resolved,
  kernels: KernelCount,
  ar: AllReduceChoice | null,
  expertsRange: Range,
): DecodeResult {
  const a = r.arch;
  const f = corpusFit();
  const loads = decodeLoads(r, expertsRange.mid);
  const sp = stepParts(r, { loads, kernels, ar });
  // Out-of-support widening and single-row notes (cv.ts): the interval grows by the CV-estimated inflations.
  const sup = supportCheck(r, sp, f);
  const pr = predictive(f, sp, true, sup.a);
  const ref = referenceBandwidthGBs(r);
  const g = sp.groups;
  const etaCoef = etaCoefOf(r);
  const eta = fittedFactor(f, etaCoef);
  const etaR80 = r80(1 / eta.mean, eta.logSd);
  const etaRange: Range = { low: etaR80.low, mid: etaR80.mid, high: etaR80.high };
  const kf = fittedFactor(f, kernelCoefOf(r));
  const c0 = referenceKernelUs(r);
  const arF = linkArFactor(f, r, g.link);
  const u = sp.maturityU ?? sp.maturityMix?.mean ?? 0.5;
  const fk = matFamilyKey(r);
  const matF = fittedFactor(f, sp.matCoef);
  // The engine × family day-one gap: fitted where corpus rows ran the pair, else its prior spread stands.
  const fkInfo = f.params.find((p) => p.name === fk);
  const famGap = fkInfo
    ? `${r.engine} × ${fk.slice(fk.lastIndexOf("/") + 1)} day-one gap e^${fkInfo.posterior.mean.toFixed(2)} ± ${fkInfo.posterior.sd.toFixed(2)} (${fkInfo.rows} corpus row${fkInfo.rows === 1 ? "" : "s"})`
    : `no corpus row ran ${r.engine} on ${fk.slice(fk.lastIndexOf("/") + 1)}: its day-one gap is 0 ± ${f.hyper.tau.matf.toFixed(2)} (τ_matf), weighted by u = ${u.toFixed(2)}`;
  const sM = 1 / Math.sqrt(expertM(r));
  const moeF = g.moe ? fittedFactor(f, { moe: sM, [`moe/${g.moe}`]: sM }) : { mean: 1, logSd: 0 };
  const stepMs = roundRange(withSimpleSpread({ low: pr.low80, mid: pr.ms, high: pr.high80 }, r, ar, arF.mean), 4);
  // Parameter sets at the interval ends, for prefill and the collectives report (their η and per-call cost).
  const ec = ENGINE_CONSTANTS[r.engine];
  const arEach = ar ? r80(ar.latencyUs.mid * arF.mean, arF.logSd) : { low: 0, mid: 0, high: 0 };
  const sets: ParamSet[] = WHICH.map((w) => ({
    etaM: w === "low" ? etaRange.high : w === "high" ? etaRange.low : etaRange.mid,
    etaC: ETA_C[w === "low" ? "high" : w === "high" ? "low" : "mid"],
    ggufEff: 1,
    kernelUs: c0 * kf.mean * matF.mean,
    engineMs: ec.engineMs.mid * kf.mean * matF.mean,
    arUs: arEach[w],
    a2aUs: A2A_US[w],
    p2pUs: P2P_US[w],
    expertsLocal: expertsRange[w],
  }));
  const mid = evalDecode(r, sets[1], ar, kernels, loads);
  // Terms: the parts grouped by name; each term's own 80 % range from its parameters' posterior.
  const byTerm = new Map<TermName, { ms: number; sdw: number }>();
  for (const pv of pr.parts) {
    const t = byTerm.get(pv.term) ?? { ms: 0, sdw: 0 };
    t.ms += pv.ms;
    t.sdw += pv.ms * pv.logSd;
    byTerm.set(pv.term, t);
  }
  const cc = collectiveCounts(r);
  const pb = paramBreakdown(a);
  const GBf = (grp: string[]) => loads.filter((l) => grp.includes(l.group)).reduce((s2, l) => s2 + l.bytes, 0) / GB;
  const fmtFactors: Record<string, number> = {};
  for (const k of g.formats) {
    const fam = formatFamily(k);
    if (fam) fmtFactors[k] = round(fittedFactor(f, { [fam]: 1, [`fmt/${k}`]: 1 }).mean, 3);
  }
  const kernelCUs = r80(c0 * kf.mean * matF.mean, Math.hypot(kf.logSd, matF.logSd));
  const touched = a.moe ? expertsTouched(a.moe.experts, a.moe.topk, r.batch) : 0;
  const basisSrc = `corpus fit (priors.ts) to ${f.rowsUsed.length} public decode measurements (src/model/corpus/)`;
  const info: Record<TermName, { formula: string; inputs: Record<string, unknown>; source: string }> = {
    weights: {
      formula: "Σ_groups params_per_GPU · bpw / 8 ÷ BW · (1/η_device) · q_format",
      inputs: {
        bytesPerGpuGB: round(GBf(a.moe ? ["attention", "lmHead"] : ["attention", "lmHead", "denseMlp"]), 4),
        bandwidthGBs: ref.gbs,
        bandwidthIs: ref.measured ? "measured" : "spec",
        etaM: roundRange(etaRange, 3),
        deviceClass: g.device,
        formatFactors: fmtFactors,
        groups: loads
          .filter((l) => l.group !== "kv" && l.group !== "attentionCore")
          .map((l) => ({
            group: l.group,
            label: l.label,
            GB: round(l.bytes / GB, 4),
            bpw: l.format ? round(l.format.bpw, 4) : undefined,
            paramsB: l.params ? round(l.params / 1e9, 4) : undefined,
          })),
      },
      source: `models.md §2 (bytes), hardware.md §2 (bpw); η per device class and q per format fitted: ${basisSrc}`,
    },
    "moe-dense-layers": {
      formula: "dense_layers · 3·h·ffn / TP · bpw/8 ÷ (η·BW)",
      inputs: { denseLayers: pb.denseLayerCount, GB: round(GBf(["denseMlp"]), 4), ffn: a.ffn },
      source: "models.md §1.1 (first_k_dense_replace)",
    },
    "moe-shared": {
      formula: "MoE layers · shared · 3·h·ffn_shared / TP · bpw/8 ÷ (η·BW)",
      inputs: { shared: a.moe?.shared ?? 0, GB: round(GBf(["shared"]), 4) },
      source: "models.md §1.1 (shared experts run for every token)",
    },
    "moe-experts": {
      formula:
        "MoE layers · E_busiest(B) · 3·h·ffn_e / TP_e · bpw/8 ÷ (η·BW) · q · e^(g_engine/√M) · maturity; E_touched(B) = E·(1 − (1 − k/E)^B)",
      inputs: {
        experts: a.moe?.experts,
        topk: a.moe?.topk,
        expertsTouchedPerLayer: round(touched, 2),
        expertsOnBusiestDevice: roundRange(expertsRange, 2),
        tokensPerExpert: round(expertM(r), 3),
        smallMFactor: round(moeF.mean, 3),
        maturityFactor: round(matF.mean, 3),
        GB: round(GBf(["experts"]), 4),
        expertTp: r.moeTp,
        ep: r.ep,
      },
      source: `models.md §2.1 (experts touched); expert-GEMM efficiency at small M (${g.moe}) and engine maturity fitted: ${basisSrc}`,
    },
    "moe-routing": {
      formula: "MoE layers · (router GEMM + top-k + align/permute + combine kernels) · c_kernel + router weights",
      inputs: {
        kernels: kernels.moeRoutingPerStep,
        perLayer: kernels.moeRoutingPerLayer,
        cKernelUs: roundRange(kernelCUs, 2),
        routerGB: round(GBf(["router"]), 5),
      },
      source: `kernel counts from each engine's op sequence; c_kernel fitted (${g.kernels}): ${basisSrc}`,
    },
    kv: {
      formula: kvReadPerGpu(r, r.contextLen).formula,
      inputs: {
        contextLen: r.contextLen,
        batch: r.batch,
        bytesPerGpuMB: round(mid.kvBytes / 1e6, 3),
        kvDtype: r.kv.id,
        bytesPerTokenAllLayers: kvReadPerGpu(r, r.contextLen).bytesPerTokenAllLayers,
      },
      source: "models.md §3",
    },
    compute: {
      formula: "Σ_ops max(0, FLOPs/(η_c·F_peak) − bytes/(η_m·BW)); FLOPs ≈ 2·B·params + attention 4·B·ctx·H·d",
      inputs: {
        flopsPerGpuG: round(mid.flops / 1e9, 3),
        peakTflops: peakTflops(r, r.recipe.groups.experts),
        etaC: ETA_C,
        batch: r.batch,
      },
      source: "models.md §4–5 (η_c not fitted: the corpus is batch 1)",
    },
    kernels: {
      formula: "n_kernels · c_kernel (c fitted per engine, backend and graph mode, and per device class)",
      inputs: {
        kernels: kernels.perStep - kernels.moeRoutingPerStep,
        basis: kernels.basis,
        cKernelUs: roundRange(kernelCUs, 2),
        referenceUs: c0,
        group: g.kernels,
        cudaGraphs: r.cudaGraphs,
      },
      source: `${ec.source}; fitted: ${basisSrc}`,
    },
    engine: {
      formula: "t_engine (scheduler, sampling, detokenize, host gaps) · fixed-cost factor",
      inputs: { ms: round(ec.engineMs.mid * kf.mean * matF.mean, 4), reference: ec.engineMs },
      source: ec.source,
    },
    allreduce: {
      formula: "n_AR · (t_isolated + t_skew + t_launch) · e^(ρ_link)",
      inputs: {
        count: cc.perToken,
        bytesEach: cc.bytesEach,
        implementation: ar?.implementation,
        algorithm: ar?.algorithm,
        protocol: ar?.protocol,
        isolatedUs: ar ? roundRange(ar.isolatedUs, 2) : undefined,
        skewUs: ar?.skewUs,
        launchUs: ar?.launchUs,
        linkFactor: round(arF.mean, 3),
        link: g.link,
        usEach: roundRange(arEach, 2),
      },
      source: `collectives.md §1, §3, §5 (${ar?.isolatedSource ?? ""}); per-link factor fitted: ${basisSrc}`,
    },
    "extra-collectives": {
      formula: "(1 vocab-parallel embedding all-reduce + 1 logits gather) · t_AR",
      inputs: { embeddingAllReduce: cc.embedding, logitsGather: cc.logitsGather, logitsBytesPerRank: cc.logitsBytes },
      source: "collectives.md §1 (a vLLM TP=4 trace shows 2L + 1 all-reduces and one AllGather per step)",
    },
    alltoall: {
      formula: "2 · MoE layers · t_A2A",
      inputs: { calls: cc.moeAllToAll, usEach: A2A_US },
      source: "collectives.md §1 (EP replaces the MoE all-reduce by all-to-all); latency assumed, not fitted",
    },
    "pp-p2p": {
      formula: "(PP − 1) · t_p2p",
      inputs: { pp: r.pp, usEach: P2P_US },
      source: "models.md §5 (aiconfigurator 10 µs)",
    },
  };
  const terms: Term[] = [];
  for (const name of TERM_ORDER) {
    const t = byTerm.get(name);
    if (!t && !ALWAYS.includes(name) && !(name === "allreduce" && ar)) continue;
    const ms = t?.ms ?? 0;
    const sd = t && t.ms > 0 ? t.sdw / t.ms : 0;
    terms.push({
      name,
      label: TERM_LABEL[name],
      ms: roundRange(r80(ms, sd), 4),
      share: round(pr.ms > 0 ? ms / pr.ms : 0, 4),
      ...info[name],
    });
  }
  let moe: Prediction["moe"];
  if (a.moe) {
    const L = pb.moeLayerCount;
    const perCall = ar ? ar.latencyUs.mid * arF.mean : 0;
    moe = {
      experts: a.moe.experts,
      topk: a.moe.topk,
      shared: a.moe.shared,
      denseLayers: pb.denseLayerCount,
      moeLayers: L,
      expertsTouchedPerLayer: round(touched, 2),
      expertsOnBusiestDevice: roundRange(expertsRange, 2),
      tokensPerExpert: round(expertM(r), 3),
      smallMFactor: round(moeF.mean, 3),
      maturityFactor: round(matF.mean, 3),
      parallel: r.moeAllToAll
        ? `EP ${r.ep} beyond the TP group: dispatch/combine all-to-all`
        : r.ep > 1
          ? `experts TP ${r.moeTp} × EP ${r.ep} inside the TP group: the MoE block ends in the TP all-reduce`
          : r.tp > 1
            ? `experts sharded TP ${r.tp}: the MoE block ends in the TP all-reduce`
            : "one device: no MoE communication",
      communication: {
        tpAllReduceMs: round((L * (perCall || (ar ? ar.latencyUs.mid : 0))) / 1000, 4),
        epAllToAllMs: round((2 * L * A2A_US.mid) / 1000, 4),
        used: r.moeAllToAll ? "ep-alltoall" : r.tp > 1 ? "tp-allreduce" : "none",
      },
    };
  }
  const L = pr.lanes;
  const hostMs = round(L.host, 4);
  const deviceMs = round(L.device, 4);
  const bound: "device" | "host" = L.hostBound ? "host" : "device";
  const regime = {
    bound,
    deviceMs,
    hostMs,
    overlap: L.overlap,
    why: r.hostOverlap.why,
    text: L.overlap
      ? bound === "host"
        ? `host-bound: the engine's host work per step (${hostMs.toFixed(2)} ms) outlasts the device's (${deviceMs.toFixed(2)} ms) it overlaps (${r.hostOverlap.why}); a faster GPU does not shorten this step`
        : `device-bound: the device's ${deviceMs.toFixed(2)} ms hide the engine's ${hostMs.toFixed(2)} ms of host work (${r.hostOverlap.why})`
      : `host work adds to the device's: ${hostMs.toFixed(2)} ms + ${deviceMs.toFixed(2)} ms (${r.hostOverlap.why})`,
  };
  return {
    sets,
    stepMs,
    terms,
    mid,
    moe,
    regime,
    interval: {
      level: 0.8,
      logSd: round(pr.logSd, 4),
      basis: `80 % posterior-predictive interval of a hierarchical fit to ${f.rowsUsed.length} public measurements (residual σ ${(100 * f.hyper.sigma).toFixed(1)} % in log time)`,
      maturity: `${sp.maturityNote}; ${famGap}`,
      unseen: pr.unseen,
      extrapolations: sup.extrapolations.map((e) => ({ ...e, inflation: round(e.inflation, 3) })),
      widening: round(Math.sqrt(1 + sup.a), 3),
      notes: supportNotes(sup),
    },
  };
}

/** A calibrated prediction (model fit on the user's measurements): the three parameter sets at posterior ± 2 sd. */
function calibratedDecode(
  r: Resolved,
  kernels: KernelCount,
  ar: AllReduceChoice | null,
  a2aRange: Range,
  expertsRange: Range,
): DecodeResult {
  const sets = WHICH.map((w) => {
    const P = paramSet(r, w, ar, a2aRange, expertsRange);
    if (ar) {
      const c = calibratedAr(r, ar, w);
      if (c !== undefined) P.arUs = c;
    }
    return P;
  });
  const evals = sets.map((P) => evalDecode(r, P, ar, kernels));
  const stepMs = zip(evals, (e) => e.totalMs);
  const mid = evals[1];
  const ref = referenceBandwidthGBs(r);
  const etaR = ref.measured ? ETA_M_MEASURED : ETA_M_SPEC;
  const ec = ENGINE_CONSTANTS[r.engine];
  const cc = collectiveCounts(r);
  const calibrated = Boolean(r.input.calibration);
  const calNote = calibrated ? `calibrated: ${r.input.calibration!.source}` : "";
  const share = (x: number) => (stepMs.mid > 0 ? x / stepMs.mid : 0);
  const terms: Term[] = [];
  const push = (
    name: string,
    label: string,
    f: (e: StepEval) => number,
    formula: string,
    inputs: Record<string, unknown>,
    source: string,
    always = false,
  ) => {
    const ms = zip(evals, f);
    if (!always && ms.high === 0) return;
    terms.push({
      name,
      label,
      ms: roundRange(ms, 4),
      share: round(share(ms.mid), 4),
      formula,
      inputs,
      source: calibrated ? `${source}; ${calNote}` : source,
    });
  };
  const loadsMid = mid.loads.filter((l) => l.group !== "kv" && l.group !== "attentionCore");
  push(
    "weights",
    "weight reads",
    (e) => e.weightsMs,
    "Σ_groups params_per_GPU · bpw / 8 ÷ (η_m · BW)",
    {
      bytesPerGpuGB: round(mid.weightBytes / GB, 4),
      bandwidthGBs: ref.gbs,
      bandwidthIs: ref.measured ? "measured" : "spec",
      etaM:
        calibrated && r.input.calibration?.params.invEta
          ? { mid: round(sets[1].etaM, 3), low: round(sets[2].etaM, 3), high: round(sets[0].etaM, 3) }
          : etaR,
      groups: loadsMid.map((l) => ({
        group: l.group,
        label: l.label,
        GB: round(l.bytes / GB, 4),
        bpw: l.format ? round(l.format.bpw, 4) : undefined,
        paramsB: l.params ? round(l.params / 1e9, 4) : undefined,
      })),
      ...(r.recipe.gguf && r.recipe.groups.attention.bpw < 16 ? { ggufKernelEfficiency: GGUF_KERNEL_EFF } : {}),
    },
    `models.md §2 (bytes), hardware.md §2 (bpw), η_m ${ref.measured ? "vs measured bandwidth" : "0.6–0.85 of spec, aiconfigurator 0.8"} (models.md §5, §7)`,
    true,
  );
  const kvf = kvReadPerGpu(r, r.contextLen);
  push(
    "kv",
    "KV-cache reads",
    (e) => e.kvMs,
    kvf.formula,
    {
      contextLen: r.contextLen,
      batch: r.batch,
      bytesPerGpuMB: round(mid.kvBytes / 1e6, 3),
      kvDtype: r.kv.id,
      bytesPerTokenAllLayers: kvf.bytesPerTokenAllLayers,
    },
    "models.md §3",
  );
  push(
    "compute",
    "compute beyond bandwidth",
    (e) => e.computeMs,
    "Σ_ops max(0, FLOPs/(η_c·F_peak) − bytes/(η_m·BW)); FLOPs ≈ 2·B·params + attention 4·B·ctx·H·d",
    {
      flopsPerGpuG: round(mid.flops / 1e9, 3),
      peakTflops: peakTflops(r, r.recipe.groups.experts),
      etaC: ETA_C,
      batch: r.batch,
    },
    "models.md §4–5",
  );
  push(
    "kernels",
    "fixed per-kernel cost",
    (e) => e.kernelsMs,
    "n_kernels · c_kernel",
    {
      kernels: kernels.perStep,
      basis: kernels.basis,
      cKernelUs: r.cudaGraphs ? ec.kernelGraphUs : ec.kernelEagerUs,
      cudaGraphs: r.cudaGraphs,
    },
    ec.source,
    true,
  );
  if (ar) {
    push(
      "allreduce",
      "tensor-parallel all-reduces",
      (e) => e.allReduceMs,
      "n_AR · (t_isolated + t_skew + t_launch)",
      {
        count: cc.perToken,
        bytesEach: cc.bytesEach,
        implementation: ar.implementation,
        algorithm: ar.algorithm,
        protocol: ar.protocol,
        isolatedUs: roundRange(ar.isolatedUs, 2),
        skewUs: ar.skewUs,
        launchUs: ar.launchUs,
        usEach: { low: round(sets[0].arUs, 2), mid: round(sets[1].arUs, 2), high: round(sets[2].arUs, 2) },
      },
      `collectives.md §1, §3, §5 (${ar.isolatedSource})`,
      true,
    );
    push(
      "extra-collectives",
      "embedding all-reduce + logits gather",
      (e) => e.extraCollectivesMs,
      "(1 vocab-parallel embedding all-reduce + 1 logits gather) · t_AR",
      { embeddingAllReduce: cc.embedding, logitsGather: cc.logitsGather, logitsBytesPerRank: cc.logitsBytes },
      "collectives.md §1 (a vLLM TP=4 trace shows 2L + 1 all-reduces and one AllGather per step)",
    );
  }
  push(
    "alltoall",
    "EP dispatch + combine",
    (e) => e.allToAllMs,
    "2 · MoE layers · t_A2A",
    { calls: cc.moeAllToAll, usEach: A2A_US },
    "collectives.md §1 (EP replaces the MoE all-reduce by all-to-all); latency assumed",
  );
  push(
    "pp-p2p",
    "pipeline hand-offs",
    (e) => e.p2pMs,
    "(PP − 1) · t_p2p",
    { pp: r.pp, usEach: P2P_US },
    "models.md §5 (aiconfigurator 10 µs)",
  );
  push(
    "engine",
    "engine overhead",
    (e) => e.engineMs,
    "t_engine (scheduler, sampling, detokenize, host gaps)",
    { ms: ec.engineMs },
    ec.source,
    true,
  );

  return { sets, stepMs, terms, mid };
}

function collectivesReport(
  r: Resolved,
  ar: AllReduceChoice | null,
  cc: ReturnType<typeof collectiveCounts>,
  sets: ParamSet[],
): CollectivesReport {
  const zero = { low: 0, mid: 0, high: 0 };
  const extra = [
    {
      name: "embedding all-reduce",
      count: cc.embedding,
      bytes: cc.bytesEach,
      note: "vocabulary-parallel embedding (VocabParallelEmbedding) sums partial lookups",
    },
    {
      name: "logits gather",
      count: cc.logitsGather,
      bytes: cc.logitsBytes,
      note: "LM-head shards gathered for sampling (an AllGather/Gather, not an all-reduce)",
    },
  ].filter((x) => x.count > 0);
  if (r.arch.mtpLayers > 0 && cc.perToken > 0)
    extra.push({
      name: "MTP layer (only with speculative decoding)",
      count: 0,
      bytes: cc.bytesEach,
      note: `${r.arch.mtpLayers} MTP layer(s) would add 2 all-reduces each per draft step; not counted (speculative decoding off)`,
    });
  const perCall: Range = ar ? { low: sets[0].arUs, mid: sets[1].arUs, high: sets[2].arUs } : zero;
  const zc = r.input.zeroComm === true;
  return {
    implementation: ar?.implementation ?? "none",
    countPerToken: cc.perToken,
    extra,
    bytesEach: cc.bytesEach,
    algorithm: ar?.algorithm ?? "none",
    protocol: ar?.protocol ?? null,
    protocolMenu: ar?.menu?.protocols ?? [],
    algorithmMenu: ar?.menu?.algorithms ?? [],
    latencyUsEach: roundRange(perCall, 2),
    isolatedUsEach: roundRange(ar?.isolatedUs ?? zero, 2),
    searchFallback: ar?.searchFallback,
    simpleExtraUsEach: roundRange(
      scaleRange(ar?.simpleExtraUs ?? zero, ar ? perCall.mid / (ar.latencyUs.mid || 1) : 0),
      2,
    ),
    isolatedSource: ar?.isolatedSource ?? "no all-reduce",
    skewUsEach: ar?.skewUs ?? zero,
    launchUsEach: ar?.launchUs ?? zero,
    msPerToken: zc
      ? zero
      : roundRange(
          {
            low: (cc.perToken * perCall.low) / 1000,
            mid: (cc.perToken * perCall.mid) / 1000,
            high: (cc.perToken * perCall.high) / 1000,
          },
          4,
        ),
    reason: [
      ...(ar?.reason ?? ["no tensor-parallel all-reduce"]),
      ...(zc ? ["what-if: communication costs nothing"] : []),
    ],
    customAllReduce: ar?.customAllReduce ?? {
      eligible: false,
      used: false,
      reason: r.tp <= 1 ? "TP = 1" : "not applicable",
    },
    ncclModel: ar?.candidates?.map((c: NcclCandidate) => ({
      algorithm: c.algorithm,
      protocol: c.protocol,
      latencyUs: round(c.latencyUs, 2),
      timeUs: round(c.timeUs, 2),
      enabled: c.enabled,
    })),
    allToAllPerToken: cc.moeAllToAll,
  };
}

/** Request overhead around prefill: HTTP, tokenization, scheduling, first detokenize (assumption). */
export const REQUEST_OVERHEAD_MS: Range = { low: 1, mid: 3, high: 8 };

/** Prefill of inputLen tokens for one request: per group max(compute, bytes) + collectives + kernels + request overhead. */
export function prefillEstimate(r: Resolved, sets: ParamSet[]): { inputLen: number; ttftMs: Range; terms: Term[] } {
  const T = Math.max(1, r.inputLen);
  const a = r.arch;
  const touched = a.moe ? Math.min(a.moe.experts / r.ep, expertsTouched(a.moe.experts, a.moe.topk, T) / r.ep) : 0;
  const loads = decodeLoads(r, touched, T, T / 2).filter((l) => l.group !== "kv");
  const ref = referenceBandwidthGBs(r).gbs;
  const ar =
    r.tp > 1 && r.engine !== "llamacpp"
      ? chooseAllReduce({
          engine: r.engine,
          gpu: r.gpu,
          link: r.link,
          n: r.tp,
          bytes: T * a.hidden * 2,
          cudaGraphs: true,
          ncclProto: r.input.ncclProto,
          ncclAlgo: r.input.ncclAlgo,
          ncclFallback: r.input.ncclFallback,
          customAllReduce: r.input.customAllReduce,
        })
      : null;
  const nAr = r.tp > 1 && r.engine !== "llamacpp" ? 2 * a.layers + 1 : 0;
  const kernels = kernelCount(r);
  const ec = ENGINE_CONSTANTS[r.engine];
  const per = WHICH.map((w, i) => {
    const P = sets[i];
    let mem = 0;
    let comp = 0;
    let body = 0;
    for (const l of loads) {
      const m = l.bytes / (ref * P.etaM * 1e6);
      const c = l.flops / (peakTflops(r, l.format) * 1e9 * P.etaC);
      mem += m;
      comp += c;
      body += Math.max(m, c);
    }
    const scale = r.input.calibration?.params.prefillScale;
    const s = scale ? scale.mean + (w === "low" ? -2 : w === "high" ? 2 : 0) * scale.sd : 1;
    const k = Math.max(0.05, s);
    body *= k;
    const arMs = (k * (r.input.zeroComm || !ar ? 0 : nAr * (ar.isolatedUs[w] + SKEW_US[w]))) / 1000;
    const kMs = (k * kernels.perStep * ec.kernelGraphUs[w]) / 1000;
    const reqMs = REQUEST_OVERHEAD_MS[w];
    return { mem, comp, body, arMs, kMs, reqMs, total: body + arMs + kMs + reqMs };
  });
  const rr = (f: (x: (typeof per)[number]) => number): Range => {
    const [l, m, h] = per.map(f);
    return roundRange({ low: Math.min(l, h), mid: m, high: Math.max(l, h) }, 4);
  };
  const ttft = rr((x) => x.total);
  const terms: Term[] = [
    {
      name: "prefill-matmuls",
      label: "prefill matmuls (max of compute and weight reads per tensor group)",
      ms: rr((x) => x.body),
      share: 0,
      formula: "Σ_groups max(2·T·params/(η_c·F), bytes/(η_m·BW)) + attention 4·T·(T/2)·H·d",
      inputs: {
        inputLen: T,
        expertsTouchedPerLayer: round(touched, 1),
        computeMs: rr((x) => x.comp),
        weightReadMs: rr((x) => x.mem),
      },
      source: "models.md §2.1, §4",
    },
    {
      name: "prefill-allreduce",
      label: "prefill all-reduces",
      ms: rr((x) => x.arMs),
      share: 0,
      formula: "(2L + 1) · t_AR(S = T·h·2 B)",
      inputs: { count: nAr, bytesEach: T * a.hidden * 2, algorithm: ar?.algorithm, protocol: ar?.protocol },
      source: "collectives.md §3, §5",
    },
    {
      name: "prefill-kernels",
      label: "fixed per-kernel cost",
      ms: rr((x) => x.kMs),
      share: 0,
      formula: "n_kernels · c_kernel",
      inputs: { kernels: kernels.perStep },
      source: ec.source,
    },
    {
      name: "request-overhead",
      label: "request overhead (HTTP, tokenize, schedule)",
      ms: rr((x) => x.reqMs),
      share: 0,
      formula: "t_request",
      inputs: { ms: REQUEST_OVERHEAD_MS },
      source: "assumption",
    },
  ];
  for (const t of terms) t.share = ttft.mid > 0 ? round(t.ms.mid / ttft.mid, 4) : 0;
  return { inputLen: T, ttftMs: ttft, terms };
}

function memoryCheck(r: Resolved): Prediction["memory"] {
  const a = r.arch;
  const all = a.moe ? a.moe.experts / r.ep : 0;
  const loads = decodeLoads(r, all, 1, 0).filter((l) => l.group !== "kv" && l.group !== "attentionCore");
  const embed = (a.vocab * a.hidden * r.recipe.groups.embedding.bpw) / 8 / r.tp;
  const weights = (loads.reduce((s, l) => s + l.bytes, 0) + embed) / r.pp;
  const kv =
    (kvReadPerGpu(r, r.contextLen).bytesPerTokenAllLayers * r.contextLen * r.batch) /
    (a.attention === "mla" ? 1 : Math.min(r.tp, a.kvHeads)) /
    r.pp;
  const cap = r.gpu.memoryGB * GB;
  const fits = weights + kv < 0.92 * cap;
  return {
    weightsGBPerGpu: round(weights / GB, 3),
    kvGBPerGpuAtContext: round(kv / GB, 3),
    capacityGB: r.gpu.memoryGB,
    fits,
    note: fits
      ? `weights ${(weights / GB).toFixed(1)} GB + KV ${(kv / GB).toFixed(2)} GB per GPU fit in ${r.gpu.memoryGB} GB`
      : `weights ${(weights / GB).toFixed(1)} GB + KV ${(kv / GB).toFixed(2)} GB per GPU do NOT fit in ${r.gpu.memoryGB} GB (92 % usable assumed)`,
  };
}

function buildAssumptions(
  r: Resolved,
  ar: AllReduceChoice | null,
  k: KernelCount,
  mid: StepEval,
  mem: Prediction["memory"],
): string[] {
  const a = r.arch;
  const out: string[] = [];
  out.push(`architecture from ${a.source}`);
  out.push(
    `quantization "${r.recipe.name}": ${r.recipe.description}${
      r.input.quant !== undefined
        ? ""
        : a.declaredQuant
          ? ` (--quant not given: the checkpoint declares ${a.declaredQuant.detail})`
          : a.ggufBytes
            ? ""
            : " (--quant not given and the checkpoint declares none: BF16 assumed)"
    }`,
  );
  const ref = referenceBandwidthGBs(r);
  out.push(
    ref.measured
      ? `bandwidth: measured ${ref.gbs} GB/s × η 0.85–1.0 (weights stream at close to the copy-probe rate)`
      : `bandwidth: spec ${ref.gbs} GB/s × η_m 0.6–0.85 (mid 0.8, aiconfigurator's default; models.md §7)`,
  );
  out.push(
    `${k.perStep} kernels per step (${k.basis}) at ${r.cudaGraphs ? "2–5 µs each under CUDA graphs" : "eager launch cost"}`,
  );
  if (a.moe)
    out.push(
      `MoE: uniform independent routing, ${expertsTouched(a.moe.experts, a.moe.topk, r.batch).toFixed(1)} distinct experts touched per layer at batch ${r.batch} (models.md §2.1); real routing is skewed`,
    );
  if (a.moe && paramBreakdown(a).routerPerLayer > 0)
    out.push(
      "router weights counted as BF16 divided by TP, as in models.md §2 (vLLM replicates the gate: slightly more bytes)",
    );
  if (a.attention === "mla")
    out.push(
      "MLA attention weights divided evenly by TP (models.md §2); the latent KV cache is replicated on every TP rank",
    );
  if (a.mtpLayers > 0) out.push(`MTP layer(s) (${a.mtpLayers}) not run: speculative decoding off`);
  out.push("input embedding not streamed (only B rows are read)");
  if (ar) {
    out.push(`all-reduce: ${ar.reason.join("; ")}`);
    out.push(
      `per-call cost = isolated (${ar.isolatedSource}) + in-loop skew/sync ${SKEW_US.low}–${SKEW_US.high} µs (collectives.md §5.2–5.3)${r.cudaGraphs ? "" : " + eager launch 12–25 µs"}`,
    );
  }
  if (r.engine === "llamacpp" && (r.input.tp ?? 1) > 1)
    out.push(
      `llama.cpp splits layers across the ${r.input.tp} GPUs (--split-mode layer): modelled as PP ${r.pp}, TP 1`,
    );
  if (r.pp > 1)
    out.push(
      `pipeline parallel: one token passes all ${r.pp} stages in sequence, so per-token time covers every layer`,
    );
  if (r.dp > 1) out.push(`data parallel ×${r.dp}: per-user latency unchanged, total throughput × ${r.dp}`);
  if (!mem.fits) out.push(`memory: ${mem.note}`);
  out.push(`KV read at context ${r.contextLen} (${(mid.kvBytes / 1e6).toFixed(1)} MB per GPU per step)`);
  if (r.input.calibration) out.push(`calibrated on measurements: ${r.input.calibration.source}`);
  return out;
}
