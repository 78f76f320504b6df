// Fitted efficiencies: a hierarchical (empirical-Bayes) fit of the decode model's free parameters to the measurement
// corpus, and the posterior-predictive distribution of a new configuration's step time. Pure (the corpus is data).
//
// Every decode step is a sum of parts, each a physical base time (bytes ÷ spec bandwidth, kernels × a reference
// per-kernel cost, calls × the collectives model's per-call latency) times exp(a linear combination of log-scale
// parameters):
//   weights  ×  e^(η_device + q_format)             bandwidth efficiency per device class and quantization format
//   experts  ×  e^(η + q + g_engine·s(M) + m·u)     + MoE expert-GEMM efficiency at small M, + engine maturity
//   kernels  ×  e^(κ_engine/backend/mode + m·u)     fixed cost per kernel per engine and graph mode
//   all-reduce × e^(ρ_link/implementation)          per-collective latency per link
// Each family of parameters is hierarchical: a shared mean plus one deviation per group (device class, format,
// engine, link) with spread τ. The measured log step time is the log of the sum plus noise σ. σ and the τs are
// estimated by maximising the Laplace-approximated marginal likelihood (empirical Bayes, with a weak hyperprior), and
// the parameters by Gauss–Newton MAP; the posterior covariance gives each prediction its 80 % interval. A group the
// corpus never saw keeps its deviation at 0 ± τ, so its interval widens by the spread of the groups that were seen.

import { readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { AllReduceChoice, Engine } from "./collectives.ts";
import type { Corpus, CorpusRow } from "./corpus.ts";
import { CORPUS_FILE, servingFiles, shippedCorpus, supportDates } from "./corpus.ts";
// cv.ts imports this module too; only precomputedPriors() (the build) calls into it.
import { shippedInflations } from "./cv.ts";
import { engineDate, maturityWeight, modelFamily, supportAgeMonths } from "./engines.ts";
import type { Gpu } from "./hardware.ts";
import type { CachedFit, FitCacheFile, FitCacheRead } from "./priors-cache.ts";
import { FIT_CACHE_NAME, fitCacheFile, fitStamp, readFitCache } from "./priors-cache.ts";
import { releasesBetween } from "./releases.ts";
import type { Resolved } from "./resolve.ts";
import { ENGINES, resolve } from "./resolve.ts";
import type { RepStep } from "./serving.ts";
import { mixedStepParts, servingRowSteps } from "./serving.ts";
import type { GroupLoad, KernelCount } from "./step.ts";
import {
  A2A_US,
  allReduceFor,
  collectiveCounts,
  decodeLoads,
  ENGINE_CONSTANTS,
  ETA_C,
  evalDecode,
  expertsOnBusiestDevice,
  expertsTouched,
  kernelCount,
  P2P_US,
  referenceBandwidthGBs,
} from "./step.ts";
import type { CorpusSupport, RowFacts } from "./support.ts";
import { corpusSupport, linkKind } from "./support.ts";
import type { TraceRow } from "./trace-rows.ts";
import { shippedTraceRows, TRACES_FILE } from "./trace-rows.ts";

/** z of the two-sided 80 % interval. */
export const Z80 = 1.2815515655446004;

/** Metal kernel dispatch (llama.cpp / MLX on Apple GPUs), µs per kernel: prior centre (assumption). */
export const METAL_KERNEL_US = 6;

export type TermName =
  | "weights"
  | "moe-dense-layers"
  | "moe-shared"
  | "moe-experts"
  | "moe-routing"
  | "kv"
  | "compute"
  | "kernels"
  | "engine"
  | "allreduce"
  | "extra-collectives"
  | "alltoall"
  | "pp-p2p";

/**
 * Where a part's time runs: on the GPU ("gpu", the default), in eager kernel launches the CPU issues while the GPU
 * works ("launch"), in the engine's host work per step ("host": overlapped with the device when the engine schedules a
 * step ahead, else serial), or always serial ("serial").
 */
export type Lane = "gpu" | "launch" | "host" | "serial";

/** One additive part of the step: base ms × exp(Σ coef·θ) (× a fixed, unfitted log-normal spread). */
export interface Part {
  term: TermName;
  baseMs: number;
  coef: Record<string, number>;
  /** Unfitted log-sd of this part (all-to-all, p2p, EP imbalance). */
  fixedLogSd?: number;
  lane?: Lane;
}

/**
 * Smooth maximum of two non-negative times, (a^q + b^q)^(1/q): a step whose host work overlaps the GPU takes the
 * longer of the two, plus a little where they are close (pipelining jitter; ×2^(1/q) at equality). Homogeneous of
 * degree 1, so Σ v·∂t/∂v = t and each part's share of the step is v·∂t/∂v.
 */
export const SMAX_Q = 4; // smax() and cube() are written out for this value

function smax(a: number, b: number): number {
  const hi = a > b ? a : b;
  if (hi <= 0) return 0;
  const x = (a > b ? b : a) / hi;
  const x2 = x * x;
  // (1 + x^4)^(1/4) for SMAX_Q = 4, without Math.pow (the fit evaluates this per step per iteration).
  return hi * Math.sqrt(Math.sqrt(1 + x2 * x2));
}

/** (x)^(SMAX_Q − 1) = x³: the smooth maximum's derivative against one argument over it. */
function cube(x: number): number {
  return x * x * x;
}

const LANE_CODE: Record<Lane, number> = { gpu: 0, launch: 1, host: 2, serial: 3 };

/**
 * One step's time from its parts' values (ms) and lanes: device = smax(GPU, launches); step = smax(device, host) +
 * serial when the host overlaps, else device + host + serial. Fills d with ∂t/∂v per part; returns t and the lanes'
 * sums.
 */
function combineStep(
  vals: ArrayLike<number>,
  lanes: ArrayLike<number>,
  overlap: boolean,
  d: Float64Array | number[],
  from = 0,
  to = vals.length,
): { t: number; gpu: number; launch: number; host: number; serial: number } {
  let G = 0;
  let L = 0;
  let H = 0;
  let S = 0;
  for (let i = from; i < to; i++) {
    const v = vals[i];
    const l = lanes[i];
    if (l === 0) G += v;
    else if (l === 1) L += v;
    else if (l === 2) H += v;
    else S += v;
  }
  let dev = G;
  let dG = 1;
  let dL = 1;
  if (L > 0) {
    dev = smax(G, L);
    dG = dev > 0 ? cube(G / dev) : 0;
    dL = dev > 0 ? cube(L / dev) : 0;
  }
  let t: number;
  let dDev = 1;
  let dH = 1;
  if (overlap && H > 0) {
    const m = smax(dev, H);
    dDev = m > 0 ? cube(dev / m) : 0;
    dH = m > 0 ? cube(H / m) : 0;
    t = m + S;
  } else t = dev + H + S;
  for (let i = from; i < to; i++) {
    const l = lanes[i];
    d[i] = l === 0 ? dDev * dG : l === 1 ? dDev * dL : l === 2 ? dH : 1;
  }
  return { t, gpu: G, launch: L, host: H, serial: S };
}

export interface StepParts {
  parts: Part[];
  /** The host lane overlaps the device (engines.ts hostOverlap): step = smax(device, host) + serial. */
  overlap: boolean;
  /** Maturity weight u ∈ [0, 1] (1 on the day the engine first supported the family), null when unknown. */
  maturityU: number | null;
  /** When u is unknown: the mixture it is drawn from (its mean is the coefficient; its variance widens the interval). */
  maturityMix: { mean: number; var: number; over: string } | null;
  /** The release-month parameter this step uses (rel/engine/YYYY-MM), null when no engine version was given. */
  releaseKey: string | null;
  /** The maturity terms' coefficients (shared, engine, engine × family at u; the release month at 1). */
  matCoef: Record<string, number>;
  maturityNote: string;
  groups: { device: string; kernels: string; moe?: string; link?: string; engine: string; formats: string[] };
}

// etak: memory kind (the device class's parent); ffam: format family (a format's parent; formerly a fixed 0.3); keng: engine (the kernel group's parent); rel: engine release (a
// release month's deviation from its engine's maturity curve).
// src: a source's offset; rmoe: an MoE row's residual beyond σ (routing, kernels and releases vary more than the
// dense path), so the dense rows' residual is not set by the MoE rows'.
type HyperGroup =
  | "eta"
  | "etak"
  | "ffam"
  | "fmt"
  | "moe"
  | "kern"
  | "keng"
  | "kdev"
  | "ar"
  | "mat"
  | "rel"
  | "matf"
  | "src"
  | "rmoe"
  | "etac"
  | "hosteng"
  | "host"
  | "hseq"
  | "rsrv"
  | "kmode"
  | "kfam"
  | "rbst";
const HYPERS: HyperGroup[] = [
  "eta",
  "etak",
  "ffam",
  "fmt",
  "moe",
  "kern",
  "keng",
  "kdev",
  "ar",
  "mat",
  "rel",
  "matf",
  "src",
  "rmoe",
  "etac",
  "hosteng",
  "host",
  "hseq",
  "rsrv",
  "kmode",
  "kfam",
  "rbst",
];

/** Shared means: prior centre and sd (log scale), what each multiplies. */
const MU: Record<string, { mean: number; sd: number; label: string }> = {
  eta: { mean: Math.log(1 / 0.8), sd: 0.25, label: "1/η_m, bandwidth shortfall vs spec (all devices)" },
  etaProbe: { mean: Math.log(1 / 0.95), sd: 0.05, label: "1/η vs a measured copy bandwidth" },
  "fmt:gguf-k": { mean: 0, sd: 0.3, label: "GGUF k-quant dequantising kernels" },
  "fmt:gguf-legacy": { mean: 0, sd: 0.3, label: "GGUF legacy quants (Q4_0/Q5_0/Q8_0)" },
  "fmt:int8": { mean: 0, sd: 0.3, label: "weight-only INT8" },
  "fmt:fp8": { mean: 0, sd: 0.3, label: "FP8" },
  "fmt:mxfp4": { mean: 0, sd: 0.3, label: "MXFP4" },
  "fmt:nvfp4": { mean: 0, sd: 0.3, label: "NVFP4" },
  "fmt:mlx": { mean: 0, sd: 0.3, label: "MLX affine" },
  "fmt:int4": { mean: 0, sd: 0.3, label: "INT4 AWQ/GPTQ" },
  moe: { mean: 0.2, sd: 0.4, label: "expert-GEMM shortfall at M = 1 (all engines)" },
  kern: { mean: 0, sd: 0.5, label: "fixed per-kernel cost vs the reference c_kernel (all engines)" },
  ar: { mean: 0, sd: 0.5, label: "in-loop all-reduce cost vs the collectives model (all links)" },
  mat: { mean: 0.3, sd: 0.5, label: "engine-maturity gap on day one of a family's support (all engines)" },
  etac: { mean: 0, sd: 0.25, label: "1/η_c, compute shortfall vs 60 % of peak (all devices)" },
  host: { mean: 0, sd: 0.7, label: "host work per step vs the engine's reference (all engines)" },
  hseq: { mean: 0, sd: 0.7, label: "host work per running sequence vs the engine's reference (all engines)" },
};

/** Starting spreads (log scale) and the weak hyperprior's centre. A two-level family splits its one-level centre's
 * variance evenly between the levels (η: 0.14 → 0.1 + 0.1 for memory kind and device class; kernels: 0.28 → 0.2 + 0.2
 * for engine and engine/backend/mode); a release's deviation from its engine's curve starts at 0.1. */
const TAU0: Record<HyperGroup | "sigma", number> = {
  eta: 0.1,
  etak: 0.1,
  ffam: 0.28,
  fmt: 0.14,
  moe: 0.28,
  kern: 0.2,
  keng: 0.2,
  kdev: 0.2,
  ar: 0.28,
  mat: 0.28,
  rel: 0.1,
  matf: 0.28,
  src: 0.1,
  rmoe: 0.07,
  etac: 0.1,
  hosteng: 0.3,
  host: 0.3,
  hseq: 0.3,
  rsrv: 0.07,
  kmode: 0.2,
  kfam: 0.2,
  rbst: 0.6,
  sigma: 0.07,
};
/** Measurement noise of a published figure (log scale, ≈ 2 %). */
const MEAS_LOG_SD = 0.02;

// ---------------------------------------------------------------- groups

export function deviceClass(g: Gpu): string {
  if (/^m\d/.test(g.id)) return "apple-unified";
  if (g.id === "gb10") return "gb10-lpddr5x";
  if (g.kind === "cpu") return "cpu-dram";
  switch (g.arch) {
    case "blackwell":
      return g.scaleUp ? "blackwell-hbm" : "blackwell-gddr7";
    case "hopper":
      return "hopper-hbm";
    case "ampere":
      return g.scaleUp || /^a100/.test(g.id) ? "ampere-hbm" : "ampere-gddr6x";
    case "ada":
      return "ada-gddr";
    case "cdna3":
      return "cdna3-hbm";
    // MI355X (HBM3E) and V100 (HBM2): named by their memory, so the memory kind's prior and the datacenter subset
    // (isDatacenter: an HBM class) take them; a bare arch name had neither.
    case "cdna4":
      return "cdna4-hbm";
    case "volta":
      return "volta-hbm";
    default:
      return `${g.arch}`;
  }
}

/** The device class's parent: its memory kind (HBM, GDDR, LPDDR/unified, DRAM). */
export function memoryKind(device: string): string {
  if (/hbm/.test(device)) return "hbm";
  if (/gddr/.test(device)) return "gddr";
  if (/lpddr|unified/.test(device)) return "lpddr";
  if (/dram/.test(device)) return "dram";
  return device;
}

/**
 * Bandwidth-efficiency coefficients: shared mean + memory kind + device class + engine (or the measured-probe factor).
 * The engine's own GEMV/GEMM kernels reach different fractions of a device's bandwidth (gpt-fast's Triton GEMV vs
 * the serving engines' CUTLASS/DeepGEMM/Marlin); without it the serving engines' Hopper rows set every stack's Hopper
 * efficiency, past the spec for gpt-fast on H200.
 */
export function etaCoefOf(r: Resolved): Record<string, number> {
  if (referenceBandwidthGBs(r).measured) return { etaProbe: 1 };
  const dev = deviceClass(r.gpu);
  return { eta: 1, [`etak/${memoryKind(dev)}`]: 1, [`eta/${dev}`]: 1, [`etak/eng/${r.engine}`]: 1 };
}

/**
 * Kernel-term coefficients (without maturity). Two factors multiply the op-sequence count × the reference cost: the
 * per-kernel cost of the device under its launch mode (shared mean + graph mode + device class), which profiler traces
 * measure for any stack; and the engine's own kernels against the op-sequence count (engine + engine/backend/mode +
 * engine × model family), which an engine's trace measures.
 */
export function kernelCoefOf(r: Resolved): Record<string, number> {
  return {
    ...kernelCostCoef(kernelMode(r), deviceClass(r.gpu)),
    ...kernelCountCoef(r.engine, kernelGroup(r), modelFamily(r.arch)),
  };
}

/** The device's per-kernel cost under a launch mode: what a trace's non-streaming time per kernel measures. */
export function kernelCostCoef(mode: string, device: string): Record<string, number> {
  return { kern: 1, [`kmode/${mode}`]: 1, [`kdev/${device}`]: 1 };
}

/** The engine's kernels per step against its op-sequence count. */
function kernelCountCoef(engine: string, group: string, family: string): Record<string, number> {
  return { [`keng/${engine}`]: 1, [`kern/${group}`]: 1, [`kfam/${engine}/${family}`]: 1 };
}

/** Launch mode: CUDA graphs, eager CUDA launches, Metal command buffers, or a CPU. */
export function kernelMode(r: Resolved): string {
  const b = backend(r);
  return b === "cuda" ? (r.cudaGraphs ? "cuda-graphs" : "cuda-eager") : b;
}

function backend(r: Resolved): "metal" | "cpu" | "cuda" {
  if (/^m\d/.test(r.gpu.id)) return "metal";
  if (r.gpu.kind === "cpu") return "cpu";
  return "cuda";
}

export function kernelGroup(r: Resolved): string {
  const b = backend(r);
  return b === "cuda" ? `${r.engine}/cuda/${r.cudaGraphs ? "graphs" : "eager"}` : `${r.engine}/${b}`;
}

/** Reference cost of one kernel for the group, µs (the prior centre κ = 0 means this). */
export function referenceKernelUs(r: Resolved): number {
  const b = backend(r);
  if (b === "metal") return METAL_KERNEL_US;
  const ec = ENGINE_CONSTANTS[r.engine];
  return (r.cudaGraphs ? ec.kernelGraphUs : ec.kernelEagerUs).mid;
}

/** Format key of a tensor group: the GGUF mix as a whole, else the group's own format. */
function formatKey(r: Resolved, l: GroupLoad): string {
  const id = l.format?.id ?? "bf16";
  if (r.recipe.gguf && r.recipe.name !== "gguf" && !/^(f16|bf16|f32)$/.test(id)) {
    if (r.recipe.name === "mxfp4-q8_0") return id === "mxfp4" ? "mxfp4" : "q8_0";
    return r.recipe.name;
  }
  if (id.startsWith("gguf:")) return id;
  return id;
}

/** Format family (its shared mean) or null for the 16-bit reference. */
export function formatFamily(key: string): string | null {
  if (/^(bf16|f16|fp16|f32)$/.test(key)) return null;
  if (/^mlx-/.test(key)) return "fmt:mlx";
  if (/^(q4_0|q4_1|q5_0|q5_1|q8_0|iq4_nl)$/.test(key)) return "fmt:gguf-legacy";
  if (/^(q\d_k|q\d_k_[msl]|iq|ud-|tq|gguf:)/.test(key) || key.includes("/")) return "fmt:gguf-k";
  if (key === "int8") return "fmt:int8";
  if (key.startsWith("fp8")) return "fmt:fp8";
  if (key === "mxfp4") return "fmt:mxfp4";
  if (key === "nvfp4") return "fmt:nvfp4";
  if (key.startsWith("int4")) return "fmt:int4";
  return "fmt:gguf-k";
}

function linkGroup(r: Resolved, ar: AllReduceChoice): string {
  const l = r.link;
  const gen = l.kind === "pcie" ? l.pcie.gen : (l.nvlinkGen ?? "");
  return `${l.kind}${gen}/${ar.implementation}`;
}

// ---------------------------------------------------------------- maturity

/** The engine×family maturity deviation's parameter name. */
export function matFamilyKey(r: Resolved): string {
  return `matf/${r.engine}/${modelFamily(r.arch)}`;
}

/** Support of the shipped corpus (the fit's own when the build's cache holds it). */
export function shippedSupport(): CorpusSupport {
  return corpusFit().support;
}

/** When the engine first supported the model's family (from the corpus), or undefined. */
export function familySupportSince(r: Resolved, s: CorpusSupport = shippedSupport()): string | undefined {
  return s.familySince[`${r.engine}|${modelFamily(r.arch)}`];
}

function mixOf(us: number[], over: string): { mean: number; var: number; over: string } {
  const n = us.length;
  const mean = us.reduce((a, b) => a + b, 0) / n;
  const v = us.reduce((a, b) => a + (b - mean) ** 2, 0) / n;
  return { mean, var: v, over };
}

/** Maturity weights of the engine's corpus rows, or u ~ U(0, 1) for an engine the corpus never ran. */
function engineRowsMix(r: Resolved, s: CorpusSupport, why: string) {
  const e = s.engines[r.engine];
  if (!e) {
    const m = { mean: 0.5, var: 1 / 12, over: "uniform 0–1" };
    return { u: null, mix: m, note: `${why}; no ${r.engine} row in the corpus: maturity weight uniform on 0–1` };
  }
  const m = mixOf(e.u, `the ${e.rows} ${r.engine} rows`);
  return {
    u: null,
    mix: m,
    note: `${why}: maturity weight drawn from the ${e.rows} ${r.engine} corpus rows' (mean ${m.mean.toFixed(2)}, sd ${Math.sqrt(m.var).toFixed(2)})`,
  };
}

export function maturity(
  r: Resolved,
  s: CorpusSupport = shippedSupport(),
): {
  u: number | null;
  mix: { mean: number; var: number; over: string } | null;
  note: string;
  date?: string;
  /** The version sorts outside the release table (its date is a bound). */
  beyond?: "after" | "before";
  /** The release predates the engine's first run of the family in the corpus. */
  predates?: boolean;
} {
  const since = familySupportSince(r, s);
  const fam = modelFamily(r.arch);
  const v = r.input.engineVersion;
  if (!v) {
    const e = s.engines[r.engine];
    if (!since || !e)
      return engineRowsMix(r, s, `engine version not given and ${r.engine} on ${fam} not in the corpus`);
    // The releases the corpus spans for this engine (from the family's first support on): a mixture over their dates.
    const from = [since, e.first].sort()[1];
    const dates = [...new Set([from, e.last, ...releasesBetween(r.engine, from, e.last).map((x) => x.date)])];
    const us = dates.map((d) => maturityWeight(supportAgeMonths(d, since)));
    const m = mixOf(us, `${dates.length} ${r.engine} release dates ${from.slice(0, 7)}–${e.last.slice(0, 7)}`);
    return {
      u: null,
      mix: m,
      note: `engine version not given: the maturity weight is a mixture over the ${m.over} the corpus spans (mean ${m.mean.toFixed(2)}, sd ${Math.sqrt(m.var).toFixed(2)}; ${fam} supported since ${since})`,
    };
  }
  const d = engineDate(r.engine, v);
  if (!since)
    return engineRowsMix(r, s, `${r.engine} ${v} (${d.date}); when ${r.engine} first ran ${fam} is not in the corpus`);
  const age = supportAgeMonths(d.date, since);
  const u = maturityWeight(age);
  const predates = d.date < since;
  const beyond =
    d.beyond === "after"
      ? `; ${v} sorts after every listed ${r.engine} release, so its date is a lower bound and its own speed unknown: an extrapolation`
      : "";
  return {
    u,
    mix: null,
    date: d.date,
    beyond: d.beyond,
    predates,
    note: predates
      ? `${r.engine} ${v} (${d.date}; ${d.how}) predates ${r.engine}'s first run of ${fam} in the corpus (${since}): this build may not run the family at all; maturity weight 1 (day one)${beyond}`
      : `${r.engine} ${v} (${d.date}; ${d.how}) is ${age.toFixed(1)} months after ${r.engine} first ran ${fam} (${since}): maturity weight 2^(−${age.toFixed(1)}/3) = ${u.toFixed(2)}${beyond}`,
  };
}

// ---------------------------------------------------------------- the parts of one step

/** Tokens per touched expert at batch B (M of the expert GEMMs); s(M) = 1/√M scales the small-M shortfall. */
export function expertM(r: Resolved): number {
  const m = r.arch.moe;
  if (!m) return 1;
  return Math.max(1, (r.batch * m.topk) / expertsTouched(m.experts, m.topk, r.batch));
}

export interface PartsContext {
  loads: GroupLoad[];
  kernels: KernelCount;
  ar: AllReduceChoice | null;
  /** Sequences the engine handles this step (decodes + prefilling requests); default the batch. */
  seqs: number;
}

/** Engines whose host and device run in separate threads or processes (a step's host work can overlap it). */
const SERVING_ENGINES = new Set(["vllm", "sglang", "trtllm"]);

/** The host-work group: engine, graph mode and whether host work overlaps the device. */
export function hostGroup(r: Resolved): string {
  const b = backend(r);
  const mode = b === "cuda" ? (r.cudaGraphs ? "graphs" : "eager") : b;
  return `${r.engine}/${mode}/${r.hostOverlap.overlap ? "overlap" : "serial"}`;
}

/** Splits one decode step into parts (see the header). */
export function stepParts(r: Resolved, pre?: Partial<PartsContext>, support?: CorpusSupport): StepParts {
  const a = r.arch;
  const kernels = pre?.kernels ?? kernelCount(r);
  const ar = pre?.ar !== undefined ? pre.ar : allReduceFor(r);
  const exR = a.moe ? expertsOnBusiestDevice(a.moe.experts, a.moe.topk, r.batch, r.ep) : { low: 0, mid: 0, high: 0 };
  const loads = pre?.loads ?? decodeLoads(r, exR.mid);
  const ref = referenceBandwidthGBs(r);
  const dev = ref.measured ? "probe" : deviceClass(r.gpu);
  const etaCoef = etaCoefOf(r);
  const mat = maturity(r, support);
  const u = mat.u ?? mat.mix?.mean ?? 0.5;
  // A release's own deviation from its engine's maturity curve (0 ± τ_rel for a release month no row ran).
  // A version after the table's newest has no month of its own: a deviation no row ever informs (0 ± τ_rel).
  const relKey = mat.date
    ? mat.beyond === "after"
      ? `rel/${r.engine}/after-table`
      : `rel/${r.engine}/${mat.date.slice(0, 7)}`
    : null;
  // The day-one gap also differs by family on one engine (DeepSeek-V3's first SGLang releases ran ~4× slow,
  // gpt-oss shipped with tuned kernels): a per engine×family deviation, 0 ± τ_matf for a pair no row ran.
  const matCoef: Record<string, number> = {
    mat: u,
    [`mat/${r.engine}`]: u,
    [matFamilyKey(r)]: u,
    ...(relKey ? { [relKey]: 1 } : {}),
  };
  const kg = kernelGroup(r);
  // Small kernels run for a few µs on their own: the per-kernel cost also depends on the device.
  const kCoef = { ...kernelCoefOf(r), ...matCoef };
  const moeG = `${r.engine}/${backend(r)}`;
  const sM = 1 / Math.sqrt(expertM(r));
  const parts: Part[] = [];
  const formats = new Set<string>();
  const msOf = (bytes: number) => bytes / (ref.gbs * 1e6);
  for (const l of loads) {
    if (l.group === "attentionCore") continue;
    if (l.group === "kv") {
      if (l.bytes > 0) parts.push({ term: "kv", baseMs: msOf(l.bytes), coef: { ...etaCoef } });
      continue;
    }
    const key = formatKey(r, l);
    const fam = formatFamily(key);
    const coef: Record<string, number> = { ...etaCoef };
    if (fam) {
      coef[fam] = 1;
      coef[`fmt/${key}`] = 1;
      formats.add(key);
    }
    let term: TermName = "weights";
    let fixedLogSd: number | undefined;
    if (l.group === "denseMlp" && a.moe) term = "moe-dense-layers";
    else if (l.group === "router") term = "moe-routing";
    else if (l.group === "shared") term = "moe-shared";
    else if (l.group === "experts") {
      term = "moe-experts";
      coef.moe = sM;
      coef[`moe/${moeG}`] = sM;
      Object.assign(coef, matCoef);
      // Uneven routing across EP groups: the busiest device's expert count is known only within a range.
      if (exR.high > exR.low && exR.mid > 0) fixedLogSd = Math.log(exR.high / exR.low) / (2 * Z80);
    }
    parts.push({ term, baseMs: msOf(l.bytes), coef, fixedLogSd });
  }
  // Compute beyond bandwidth (zero at small batch): η_c not fitted, its range carried as spread.
  const computeMs = evalDecode(
    r,
    {
      etaM: 0.8,
      etaC: ETA_C.mid,
      ggufEff: 1,
      kernelUs: 0,
      engineMs: 0,
      arUs: 0,
      a2aUs: 0,
      p2pUs: 0,
      expertsLocal: exR.mid,
    },
    null,
    kernels,
    loads,
  ).computeMs;
  // Compute beyond bandwidth (zero at small batch; the prefill chunks of a serving step): 1/η_c fitted per device class
  // where serving rows reach it, else its prior (η_c 0.4–0.75).
  if (computeMs > 0)
    parts.push({ term: "compute", baseMs: computeMs, coef: { etac: 1, [`etac/${deviceClass(r.gpu)}`]: 1 } });
  const c0 = referenceKernelUs(r);
  const routing = kernels.moeRoutingPerStep;
  // Under CUDA graphs the per-kernel cost is the GPU's own (gaps between graph nodes, tiny kernels' floor); eager, a
  // serving engine's CPU issues each launch while the GPU works, so launches bound the step only when they outrun it.
  const kLane: Lane = !r.cudaGraphs && backend(r) === "cuda" && SERVING_ENGINES.has(r.engine) ? "launch" : "gpu";
  parts.push({ term: "kernels", baseMs: ((kernels.perStep - routing) * c0) / 1000, coef: { ...kCoef }, lane: kLane });
  if (routing > 0) parts.push({ term: "moe-routing", baseMs: (routing * c0) / 1000, coef: { ...kCoef }, lane: kLane });
  // The engine's host work per step: a fixed part and a part per running sequence, overlapped with the device when the
  // engine schedules a step ahead (hostOverlap), else added to it.
  const ec = ENGINE_CONSTANTS[r.engine];
  const hCoef = { host: 1, [`hosteng/${r.engine}`]: 1, [`host/${hostGroup(r)}`]: 1 };
  parts.push({ term: "engine", baseMs: ec.engineMs.mid, coef: hCoef, lane: "host" });
  const seqs = pre?.seqs ?? r.batch;
  if (seqs > 0)
    parts.push({
      term: "engine",
      baseMs: (seqs * ec.hostSeqUs.mid) / 1000,
      coef: { hseq: 1, [`hseq/${r.engine}`]: 1 },
      lane: "host",
    });
  const cc = collectiveCounts(r);
  const zero = r.input.zeroComm === true;
  let link: string | undefined;
  if (ar && !zero) {
    link = linkGroup(r, ar);
    const arCoef = { ar: 1, [`arkind/${r.link.kind}`]: 1, [`ar/${link}`]: 1 };
    if (cc.perToken > 0)
      parts.push({ term: "allreduce", baseMs: (cc.perToken * ar.latencyUs.mid) / 1000, coef: { ...arCoef } });
    const extra = cc.embedding + cc.logitsGather;
    if (extra > 0)
      parts.push({ term: "extra-collectives", baseMs: (extra * ar.latencyUs.mid) / 1000, coef: { ...arCoef } });
  }
  if (!zero && cc.moeAllToAll > 0)
    parts.push({
      term: "alltoall",
      baseMs: (cc.moeAllToAll * A2A_US.mid) / 1000,
      coef: {},
      fixedLogSd: Math.log(A2A_US.high / A2A_US.low) / (2 * Z80),
    });
  if (!zero && r.pp > 1)
    parts.push({
      term: "pp-p2p",
      baseMs: ((r.pp - 1) * P2P_US.mid) / 1000,
      coef: {},
      fixedLogSd: Math.log(P2P_US.high / P2P_US.low) / (2 * Z80),
    });
  return {
    parts,
    overlap: r.hostOverlap.overlap,
    maturityU: mat.u,
    maturityMix: mat.mix,
    releaseKey: relKey,
    matCoef,
    maturityNote: mat.note,
    groups: {
      device: dev,
      kernels: kg,
      moe: a.moe ? moeG : undefined,
      link,
      engine: r.engine,
      formats: [...formats],
    },
  };
}

// ---------------------------------------------------------------- the fit

export interface Hyper {
  sigma: number;
  tau: Record<HyperGroup, number>;
}

export interface ParamInfo {
  name: string;
  /** Shared mean (μ) or a group's deviation (δ). */
  kind: "mean" | "group";
  hyper?: HyperGroup;
  label: string;
  prior: { mean: number; sd: number };
  posterior: { mean: number; sd: number };
  rows: number;
}

export interface CorpusFit {
  names: string[];
  index: Map<string, number>;
  theta: number[];
  cov: number[][];
  hyper: Hyper;
  params: ParamInfo[];
  rowsUsed: string[];
  logEvidence: number;
  /** What the fitted rows measured (support.ts): the yardstick for extrapolation and the maturity clock. */
  support: CorpusSupport;
}

/** One step of a row: its parts, whether its host lane overlaps the device, and its weight in the row's time. */
export interface RowStep {
  w: number;
  parts: Part[];
  overlap: boolean;
}

interface FitRow {
  id: string;
  y: number;
  /** A decode row is one step of weight 1; a serving row is its schedule's representative steps (serving.ts). */
  steps: RowStep[];
  maturityU: number | null;
  /** An MoE row: its residual carries τ_rmoe² beyond σ². */
  moe?: boolean;
  /** A serving row (TPOT under load): its residual carries τ_rsrv² beyond σ² (the schedule is modelled). */
  serving?: boolean;
  /** A direct measurement of parameters (a profiler trace): Gaussian, never down-weighted as an outlier by the
   * Student-t reweighting (the rows it disagrees with are the ones to doubt). */
  exact?: boolean;
  /** A burst row (every request sent at once): its TPOT is the engine's admission of a draining queue (KV capacity,
   * max-num-seqs, prefill chunking), which the schedule only approximates: its residual adds τ_rbst². */
  burst?: boolean;
  /** Rows of one source that measured the same configuration (daily reruns, release after release): their errors
   * against the model move together, so k of them count as one row (each residual variance × k). */
  repeats?: number;
}

function hyperOf(name: string): HyperGroup | undefined {
  // A format family (fmt:nvfp4, …) is itself a deviation from the 16-bit reference, spread τ_ffam.
  if (name.startsWith("fmt:")) return "ffam";
  const i = name.indexOf("/");
  if (i < 0) return undefined;
  const h = name.slice(0, i) as HyperGroup;
  return HYPERS.includes(h) ? h : undefined;
}

/** Spread between link kinds (PCIe vs NVLink vs xGMI), log scale. Not estimable from one kind (the corpus is all
 * NVLink): set from collectives.md §5.2–5.3, where in-loop per-call costs run 2–5× the isolated minima. */
export const TAU_LINK_KIND = 0.6;

function priorOf(name: string, hyper: Hyper): { mean: number; sd: number } {
  if (name.startsWith("arkind/")) return { mean: 0, sd: TAU_LINK_KIND };
  const h = hyperOf(name);
  if (h) return { mean: 0, sd: hyper.tau[h] };
  const m = MU[name];
  if (!m) throw new Error(`internal: no prior for ${name}`);
  return { mean: m.mean, sd: m.sd };
}

function partExtraVar(p: Part): number {
  return p.fixedLogSd ? p.fixedLogSd ** 2 : 0;
}

/** Mean of a parameter outside the fit: group deviations 0, shared means their prior. */
function priorMeanDefault(name: string): number {
  return hyperOf(name) || name.startsWith("arkind/") ? 0 : (MU[name]?.mean ?? 0);
}

/**
 * A row compiled against a parameter index: flat arrays over all its steps' parts, so one Gauss–Newton pass allocates
 * nothing. Parts that share their coefficients (the same term at every representative step of a serving row) share
 * one exponential: a signature.
 */
interface Compiled {
  y: number;
  /** 1 for an MoE row (its residual adds τ_rmoe²), else 0. */
  moe: number;
  /** 1 for a serving row (its residual adds τ_rsrv²), else 0. */
  serving: number;
  /** 1 for a burst row (its residual adds τ_rbst²), else 0. */
  burst: number;
  /** A Gaussian row (FitRow.exact). */
  exact: boolean;
  /** Residual variance multiplier (rows repeating one configuration of one source). */
  rep: number;
  base: Float64Array;
  extraVar: Float64Array;
  lane: Uint8Array;
  /** Per part: its signature. */
  sig: Int32Array;
  /** Per signature: offsets into idx/cf, and the constant exponent from parameters outside the fit. */
  start: Int32Array;
  idx: Int32Array;
  cf: Float64Array;
  konst: Float64Array;
  /** Per step: first part, weight, overlap. */
  stepStart: Int32Array;
  stepW: Float64Array;
  stepOverlap: Uint8Array;
  sigExp: Float64Array;
  vals: Float64Array;
  /** ∂t/∂v per part, then (after evalCompiled) each part's share of log t: W_k·∂t_k/∂v·v / t. */
  wts: Float64Array;
  /** Per signature: the summed shares of its parts (the gradient's weight on its coefficients). */
  sigW: Float64Array;
}

function compile(row: FitRow, index: Map<string, number>): Compiled {
  const parts = row.steps.flatMap((st) => st.parts);
  const n = parts.length;
  const sigOf = new Map<string, number>();
  const sig = new Int32Array(n);
  const sigCoef: Record<string, number>[] = [];
  parts.forEach((p, i) => {
    const key = Object.keys(p.coef)
      .sort()
      .map((k) => `${k}=${p.coef[k]}`)
      .join(",");
    let k = sigOf.get(key);
    if (k === undefined) {
      k = sigCoef.length;
      sigOf.set(key, k);
      sigCoef.push(p.coef);
    }
    sig[i] = k;
  });
  const S = sigCoef.length;
  const start = new Int32Array(S + 1);
  const idx: number[] = [];
  const cf: number[] = [];
  const konst = new Float64Array(S);
  sigCoef.forEach((coef, s) => {
    start[s] = idx.length;
    for (const k in coef) {
      const j = index.get(k);
      if (j === undefined) konst[s] += coef[k] * priorMeanDefault(k);
      else {
        idx.push(j);
        cf.push(coef[k]);
      }
    }
  });
  start[S] = idx.length;
  const stepStart = new Int32Array(row.steps.length + 1);
  let at = 0;
  row.steps.forEach((st, k) => {
    stepStart[k] = at;
    at += st.parts.length;
  });
  stepStart[row.steps.length] = at;
  return {
    y: row.y,
    moe: row.moe ? 1 : 0,
    serving: row.serving ? 1 : 0,
    burst: row.burst ? 1 : 0,
    exact: !!row.exact,
    rep: row.repeats ?? 1,
    base: Float64Array.from(parts.map((p) => p.baseMs)),
    extraVar: Float64Array.from(parts.map(partExtraVar)),
    lane: Uint8Array.from(parts.map((p) => LANE_CODE[p.lane ?? "gpu"])),
    sig,
    start,
    idx: Int32Array.from(idx),
    cf: Float64Array.from(cf),
    konst,
    stepStart,
    stepW: Float64Array.from(row.steps.map((st) => st.w)),
    stepOverlap: Uint8Array.from(row.steps.map((st) => (st.overlap ? 1 : 0))),
    sigExp: new Float64Array(S),
    vals: new Float64Array(n),
    wts: new Float64Array(n),
    sigW: new Float64Array(S),
  };
}

/** Fills c.vals, c.wts and c.sigW at θ; returns the row's time and the unfitted variance of log t. */
function evalCompiled(c: Compiled, theta: ArrayLike<number>): { t: number; extraVar: number } {
  const S = c.sigExp.length;
  for (let s = 0; s < S; s++) {
    let e = c.konst[s];
    for (let q = c.start[s]; q < c.start[s + 1]; q++) e += c.cf[q] * theta[c.idx[q]];
    c.sigExp[s] = Math.exp(e);
    c.sigW[s] = 0;
  }
  const n = c.base.length;
  for (let i = 0; i < n; i++) c.vals[i] = c.base[i] * c.sigExp[c.sig[i]];
  let t = 0;
  const K = c.stepW.length;
  for (let k = 0; k < K; k++) {
    const w = c.stepW[k];
    const st = combineStep(c.vals, c.lane, c.stepOverlap[k] === 1, c.wts, c.stepStart[k], c.stepStart[k + 1]);
    t += w * st.t;
    for (let i = c.stepStart[k]; i < c.stepStart[k + 1]; i++) c.wts[i] *= w * c.vals[i];
  }
  let extraVar = 0;
  for (let i = 0; i < n; i++) {
    const wi = c.wts[i] / t;
    c.wts[i] = wi;
    c.sigW[c.sig[i]] += wi;
    extraVar += wi * wi * c.extraVar[i];
  }
  return { t, extraVar };
}

/** Degrees of freedom of the rows' residuals: Student-t, so a row the model cannot express (a server saturated by
 * a thousand requests at once, a stack's pathological path on one GPU) is down-weighted instead of bending every
 * shared parameter toward it. */
const RESIDUAL_NU = 4;

function solveMap(
  rowsIn: Compiled[],
  K: number,
  pri: { mean: number; sd: number }[],
  sigma: number,
  rmoe: number,
  rsrv: number,
  start?: number[],
  conv: { maxIt: number; tol: number; cov: boolean } = { maxIt: 25, tol: 1e-5, cov: true },
  rbst = 0,
) {
  const rows = rowsIn;
  const s2base = sigma ** 2 + MEAS_LOG_SD ** 2;
  const r2 = rmoe ** 2;
  const v2 = rsrv ** 2;
  const b2 = rbst ** 2;
  const nu = RESIDUAL_NU;
  const varOf = (row: Compiled, extraVar: number) =>
    row.rep * (s2base + row.moe * r2 + row.serving * v2 + row.burst * b2) + extraVar;
  let theta = start ? Float64Array.from(start) : Float64Array.from(pri.map((p) => p.mean));
  // −2 log posterior (up to constants): Student-t residuals, Gaussian priors.
  const objective = (th: Float64Array) => {
    let s = 0;
    for (const row of rows) {
      const e = evalCompiled(row, th);
      const r = row.y - Math.log(e.t);
      const v = varOf(row, e.extraVar);
      s += row.exact ? (r * r) / v : (nu + 1) * Math.log1p((r * r) / (nu * v));
    }
    for (let j = 0; j < K; j++) s += (th[j] - pri[j].mean) ** 2 / pri[j].sd ** 2;
    return s;
  };
  const H: number[][] = Array.from({ length: K }, () => new Array(K).fill(0));
  const b = new Array(K).fill(0);
  const g = new Float64Array(K);
  const touched: number[] = [];
  let obj = objective(theta);
  for (let it = 0; it < conv.maxIt; it++) {
    for (let i = 0; i < K; i++) {
      H[i].fill(0);
      b[i] = 0;
    }
    for (const row of rows) {
      const e = evalCompiled(row, theta);
      const v0 = varOf(row, e.extraVar);
      const r = row.y - Math.log(e.t);
      // Iteratively reweighted: the t likelihood as a Gaussian of variance v/w at the current residual.
      const v = row.exact ? v0 : v0 / ((nu + 1) / (nu + (r * r) / v0));
      touched.length = 0;
      const S = row.sigW.length;
      for (let s = 0; s < S; s++) {
        const w = row.sigW[s];
        for (let q = row.start[s]; q < row.start[s + 1]; q++) {
          const j = row.idx[q];
          if (g[j] === 0) touched.push(j);
          g[j] += w * row.cf[q];
        }
      }
      for (const i of touched) {
        b[i] += (g[i] * r) / v;
        const Hi = H[i];
        for (const j of touched) Hi[j] += (g[i] * g[j]) / v;
      }
      for (const j of touched) g[j] = 0;
    }
    for (let j = 0; j < K; j++) {
      H[j][j] += 1 / pri[j].sd ** 2;
      b[j] -= (theta[j] - pri[j].mean) / pri[j].sd ** 2;
    }
    const step = solve(H, b);
    let lambda = 1;
    let next = theta.map((x, j) => x + step[j]);
    let o = objective(next);
    while (o > obj && lambda > 1e-3) {
      lambda /= 2;
      next = theta.map((x, j) => x + lambda * step[j]);
      o = objective(next);
    }
    let moved = 0;
    for (const x of step) moved = Math.max(moved, Math.abs(x * lambda));
    if (o <= obj) {
      theta = next;
      obj = o;
    }
    if (moved < conv.tol) break;
  }
  // Laplace evidence (up to a constant): −½·objective − ½Σ log v − ½ log|H| + ½ log|P|, H the last IRLS curvature
  // (hyperparameter trials need its determinant only; the chosen spreads also get its inverse, the covariance).
  let logV = 0;
  for (const row of rows) logV += Math.log(varOf(row, evalCompiled(row, theta).extraVar));
  const logDetP = pri.reduce((s, p) => s - 2 * Math.log(p.sd), 0);
  const L = cholesky(H)!; // clamped, never null
  let logDet = 0;
  for (let i = 0; i < K; i++) logDet += 2 * Math.log(L[i * K + i]);
  const logEvidence = -0.5 * obj - 0.5 * logV - 0.5 * logDet + 0.5 * logDetP;
  return { theta: [...theta], cov: conv.cov ? inverseFromCholesky(L, K) : [], logEvidence };
}

/** Cholesky factor of a symmetric positive-definite matrix, row-major lower triangle (tiny pivots floored). */
/** L with A = L Lᵀ (row-major n × n); `strict`: null where A is not positive definite, else pivots clamped. */
function cholesky(A: number[][], strict = false): Float64Array | null {
  const n = A.length;
  const L = new Float64Array(n * n);
  for (let i = 0; i < n; i++) {
    const Ai = A[i];
    const ri = i * n;
    for (let j = 0; j <= i; j++) {
      const rj = j * n;
      let sum = Ai[j];
      for (let k = 0; k < j; k++) sum -= L[ri + k] * L[rj + k];
      if (i !== j) L[ri + j] = sum / L[rj + j];
      else if (strict && !(sum > 0)) return null;
      else L[ri + i] = Math.sqrt(Math.max(sum, 1e-300));
    }
  }
  return L;
}

/** (L Lᵀ)⁻¹ from the factor: L⁻¹ column by column, then L⁻ᵀ L⁻¹. */
function inverseFromCholesky(L: Float64Array, n: number): number[][] {
  const Li = new Float64Array(n * n);
  for (let i = 0; i < n; i++) {
    Li[i * n + i] = 1 / L[i * n + i];
    for (let j = 0; j < i; j++) {
      let s = 0;
      for (let k = j; k < i; k++) s -= L[i * n + k] * Li[k * n + j];
      Li[i * n + j] = s / L[i * n + i];
    }
  }
  const inv = Array.from({ length: n }, () => new Array<number>(n).fill(0));
  for (let i = 0; i < n; i++)
    for (let j = 0; j <= i; j++) {
      let s = 0;
      for (let k = i; k < n; k++) s += Li[k * n + i] * Li[k * n + j];
      inv[i][j] = s;
      inv[j][i] = s;
    }
  return inv;
}

/** Weak hyperprior on each spread: log τ ~ N(log τ₀, 0.7²) (keeps a group family from collapsing to zero spread). */
function hyperLogPrior(h: Hyper): number {
  let s = -0.5 * ((Math.log(h.sigma) - Math.log(TAU0.sigma)) / 0.7) ** 2;
  for (const g of HYPERS) s += -0.5 * ((Math.log(h.tau[g]) - Math.log(TAU0[g])) / 0.7) ** 2;
  return s;
}

/**
 * Rows the decode fit uses: `kind: decode` (a benchmark at concurrency 1 is one; rows under load sit in
 * `c.benchmarks` and are predicted by workload.ts, never fitted).
 */
export function decodeRows(c: Corpus): CorpusRow[] {
  return c.rows.filter((r) => r.kind === "decode");
}

/** The support facts of one resolved input (engine date and maturity left to the caller). */
export function queryFacts(r: Resolved): Omit<RowFacts, "id" | "date" | "since" | "u"> {
  const a = r.arch;
  const exR = a.moe ? expertsOnBusiestDevice(a.moe.experts, a.moe.topk, r.batch, r.ep) : { mid: 0 };
  const formats = new Set<string>();
  for (const l of decodeLoads(r, exR.mid)) {
    if (l.group === "attentionCore" || l.group === "kv") continue;
    const key = formatKey(r, l);
    if (formatFamily(key)) formats.add(key);
  }
  const ref = referenceBandwidthGBs(r);
  return {
    engine: r.engine,
    family: modelFamily(a),
    device: ref.measured ? "probe" : deviceClass(r.gpu),
    formats: [...formats].sort(),
    moe: a.moe ? { experts: a.moe.experts, active: a.moe.topk / a.moe.experts } : undefined,
    tp: r.tp,
    ep: r.ep,
    link: linkKind(r),
  };
}

interface RowData {
  rows: FitRow[];
  facts: RowFacts[];
  support: CorpusSupport;
  /** A serving row's representative steps (its schedule's composition, fixed once per row). */
  reps: Map<string, RepStep[]>;
}

/** One source's configuration: rows sharing it repeat one measurement (another day, another release). */
export function configKey(r: CorpusRow): string {
  const w = r.workload;
  return [
    r.sourceKey,
    r.model,
    r.precision,
    r.hardware.device,
    r.hardware.count,
    r.parallelism.tp,
    r.parallelism.ep ?? 1,
    r.parallelism.dp ?? 1,
    r.engine.name,
    r.kind,
    w.batch,
    w.concurrency ?? 1,
    w.inputLen,
    w.outputLen,
    w.context ?? "",
  ].join("|");
}

/** Serving benchmarks the fit uses: TPOT under load at a concurrency (the corpus's benchmark and serving rows). */
/** A burst: every request of the run sent at once (no request rate, no concurrency cap below the request count). */
export function isBurstRow(row: CorpusRow): boolean {
  const w = row.workload;
  return (
    w.requestRate === undefined &&
    w.numPrompts !== undefined &&
    w.concurrency !== undefined &&
    w.numPrompts <= w.concurrency
  );
}

export function servingRows(c: Corpus): CorpusRow[] {
  return [...c.benchmarks, ...c.serving];
}

/** A step's time with every parameter at its prior mean (the serving schedule's step-cost proxy). */
function stepAtPriorMeans(sp: StepParts): number {
  const vals = sp.parts.map((p) => {
    let e = 0;
    for (const k in p.coef) e += p.coef[k] * priorMeanDefault(k);
    return p.baseMs * Math.exp(e);
  });
  const lanes = sp.parts.map((p) => LANE_CODE[p.lane ?? "gpu"]);
  return combineStep(vals, lanes, sp.overlap, new Float64Array(vals.length)).t;
}

/** A cheap step-cost proxy for a serving row's schedule: linear in the decodes and the chunk, from three steps. */
function scheduleProxy(row: CorpusRow, support: CorpusSupport): (B: number, T: number) => number {
  const C = Math.max(1, row.workload.concurrency ?? 1);
  const ctx = row.workload.inputLen + row.workload.outputLen / 2;
  const T0 = Math.max(1, Math.min(row.workload.inputLen, 4096));
  const at = (B: number, T: number) => stepAtPriorMeans(mixedStepParts(row.input, B, T, ctx, 0, support).sp);
  const d1 = at(1, 0);
  const dC = C > 1 ? at(C, 0) : d1;
  const slope = C > 1 ? (dC - d1) / (C - 1) : 0;
  const perToken = Math.max(0, (at(1, T0) - d1) / T0);
  return (B, T) => Math.max(0.01, d1 + slope * Math.max(0, B - 1) + perToken * T);
}

function rowData(c: Corpus): RowData {
  const decode = decodeRows(c);
  const serving = servingRows(c);
  const rows = [...decode, ...serving];
  const res = rows.map((r) => resolve(r.input));
  const facts: RowFacts[] = rows.map((row, i) => ({
    id: row.id,
    ...queryFacts(res[i]),
    date: row.engine.date.length === 7 ? `${row.engine.date}-15` : row.engine.date,
    since: row.modelSupportSince.length === 7 ? `${row.modelSupportSince}-15` : row.modelSupportSince,
    u: 0,
  }));
  const first = corpusSupport(facts);
  for (const f of facts) f.u = maturityWeight(supportAgeMonths(f.date, first.familySince[`${f.engine}|${f.family}`]));
  const support = corpusSupport(facts);
  const servingIds = new Set(serving.map((r) => r.id));
  const repeats = new Map<string, number>();
  for (const r of rows) repeats.set(configKey(r), (repeats.get(configKey(r)) ?? 0) + 1);
  const repsOf = new Map<string, RepStep[]>();
  const fitRows: FitRow[] = rows.map((row, i) => {
    // A source's own conditions (clocks, power cap, build flags, how it times) shift all its rows together: one
    // offset per source, so a 28-row source does not set the shared parameters alone, and a new deployment, which
    // no corpus source measured, carries the between-source spread τ_src (predictive()).
    const src = `src/${row.sourceKey}`;
    const withSrc = (parts: Part[]) => parts.map((p) => ({ ...p, coef: { ...p.coef, [src]: 1 } }));
    if (servingIds.has(row.id)) {
      const { steps, reps } = servingRowSteps(row.input, row, support, scheduleProxy(row, support));
      repsOf.set(row.id, reps);
      const sp0 = stepParts(res[i], undefined, support);
      return {
        id: row.id,
        y: Math.log(row.measuredMs),
        steps: steps.map((st) => ({ ...st, parts: withSrc(st.parts) })),
        maturityU: sp0.maturityU,
        moe: !!sp0.groups.moe,
        serving: true,
        burst: isBurstRow(row),
        repeats: repeats.get(configKey(row)),
      };
    }
    const sp = stepParts(res[i], undefined, support);
    return {
      id: row.id,
      y: Math.log(row.measuredMs),
      steps: [{ w: 1, parts: withSrc(sp.parts), overlap: sp.overlap }],
      maturityU: sp.maturityU,
      moe: !!sp.groups.moe,
      repeats: repeats.get(configKey(row)),
    };
  });
  fitRows.push(...traceFitRows(c.traces ?? shippedTraceRows()));
  return { rows: fitRows, facts, support, reps: repsOf };
}

/** Reference per-kernel cost under CUDA graphs, µs (ENGINE_CONSTANTS: vLLM, SGLang, TRT-LLM, gpt-fast). */
const REF_GRAPH_KERNEL_US = 3;

/**
 * Profiler traces as fit rows (trace-rows.ts): each trace's per-kernel cost observes the device's cost under its
 * launch mode; a serving engine's trace also observes its kernel count against the op-sequence count.
 */
function traceFitRows(rows: TraceRow[]): FitRow[] {
  const out: FitRow[] = [];
  for (const t of rows) {
    const input = {
      model: t.model,
      quant: t.precision,
      gpu: t.device,
      engine: (ENGINES as string[]).includes(t.engine) ? (t.engine as Engine) : "gptfast",
      cudaGraphs: t.cudaGraphs,
      batch: t.batch,
    };
    const r = resolve(input);
    // No source offset: a trace times the kernels themselves, with no harness, clock or release between (its rows
    // are the device's per-kernel cost and the engine's count, not one more source to be explained away).
    const src = {};
    out.push({
      id: `${t.id}/per-kernel`,
      y: Math.log(t.measured.perKernelUs / 1000),
      steps: [
        {
          w: 1,
          overlap: false,
          parts: [
            {
              term: "kernels",
              baseMs: REF_GRAPH_KERNEL_US / 1000,
              coef: { ...kernelCostCoef(kernelMode(r), deviceClass(r.gpu)), ...src },
            },
          ],
        },
      ],
      maturityU: null,
      exact: true,
    });
    if ((ENGINES as string[]).includes(t.engine)) {
      const n = kernelCount(r).perStep;
      out.push({
        id: `${t.id}/kernels`,
        y: Math.log(t.measured.kernels / n),
        steps: [
          {
            w: 1,
            overlap: false,
            parts: [
              {
                term: "kernels",
                baseMs: 1,
                coef: { ...kernelCountCoef(r.engine, kernelGroup(r), modelFamily(r.arch)), ...src },
              },
            ],
          },
        ],
        maturityU: null,
        exact: true,
      });
    }
  }
  return out;
}

/**
 * A corpus row as a prediction sees it, under a fit's support (its maturity clock): one decode step, or a serving
 * row's representative steps at their batches. No source offset: a held-out row's source is one the fit never saw.
 */
export function rowPredictSteps(c: Corpus, row: CorpusRow, support: CorpusSupport): { w: number; sp: StepParts }[] {
  const reps = corpusRowData(c).reps.get(row.id);
  if (!reps) return [{ w: 1, sp: stepParts(resolve(row.input), undefined, support) }];
  return reps.map((x) => ({
    w: x.w,
    sp: mixedStepParts(row.input, x.decodes, x.prefillTokens, x.decodeCtx, x.prefix, support).sp,
  }));
}

const rowCache = new WeakMap<Corpus, RowData>();

/** Fit rows, support facts and the full corpus's support (memoised per corpus object). */
export function corpusRowData(c: Corpus): RowData {
  let r = rowCache.get(c);
  if (!r) rowCache.set(c, (r = rowData(c)));
  return r;
}

/** Fits the corpus (optionally without one row): MAP parameters, posterior covariance, empirical-Bayes spreads. */
export function fitCorpus(
  c: Corpus = shippedCorpus(),
  opts: { exclude?: string | ReadonlySet<string>; hyper?: Hyper; hyperStart?: Hyper } = {},
): CorpusFit {
  const data = corpusRowData(c);
  const ex = opts.exclude;
  const out = (id: string) => (typeof ex === "string" ? id === ex : ex ? ex.has(id) : false);
  const rows = data.rows.filter((r) => !out(r.id));
  const support = ex ? corpusSupport(data.facts.filter((f) => !out(f.id))) : data.support;
  const nameSet = new Set<string>();
  for (const row of rows)
    for (const st of row.steps) for (const p of st.parts) for (const k of Object.keys(p.coef)) nameSet.add(k);
  // Row counts per parameter: number of rows (not parts) that depend on it.
  const rowCount = new Map<string, number>();
  for (const row of rows) {
    const seen = new Set<string>();
    for (const st of row.steps) for (const p of st.parts) for (const k of Object.keys(p.coef)) seen.add(k);
    for (const k of seen) rowCount.set(k, (rowCount.get(k) ?? 0) + 1);
  }
  const names = [...nameSet].sort();
  const index = new Map(names.map((n, i) => [n, i]));
  const compiled = rows.map((r) => compile(r, index));
  const K = names.length;
  // Hyperparameter trials compare evidences from warm starts: a few Gauss–Newton steps each (the evidence moves
  // far less than the grid's steps by then); the chosen spreads get a full solve.
  const run = (h: Hyper, start?: number[], quick = false) =>
    solveMap(
      compiled,
      K,
      names.map((n) => priorOf(n, h)),
      h.sigma,
      h.tau.rmoe,
      h.tau.rsrv,
      start,
      quick ? { maxIt: 4, tol: 1e-4, cov: false } : undefined,
      h.tau.rbst,
    );
  const { sigma: sigma0, ...tau0 } = TAU0;
  let hyper: Hyper = opts.hyper ?? { sigma: sigma0, tau: tau0 };
  let best = run(hyper);
  if (!opts.hyper) {
    // Empirical Bayes: coordinate hill-climb on log-spaced grids from the hyperprior centres until no gain;
    // opts.hyperStart warm-starts the neighbour search (leave-one-out folds start from the full-corpus optimum).
    const grid = [0.02, 0.03, 0.045, 0.07, 0.1, 0.14, 0.2, 0.28, 0.4, 0.6];
    const keys = ["sigma", ...HYPERS] as const;
    const get = (h: Hyper, g: (typeof keys)[number]) => (g === "sigma" ? h.sigma : h.tau[g]);
    const set = (h: Hyper, g: (typeof keys)[number], v: number): Hyper =>
      g === "sigma" ? { ...h, sigma: v } : { ...h, tau: { ...h.tau, [g]: v } };
    if (opts.hyperStart) {
      hyper = opts.hyperStart;
      best = run(hyper, best.theta);
    }
    let score = best.logEvidence + hyperLogPrior(hyper);
    const tryH = (h: Hyper) => {
      const f = run(h, best.theta, true);
      const sc = f.logEvidence + hyperLogPrior(h);
      if (sc > score + 1e-9) {
        score = sc;
        hyper = h;
        best = f;
        return true;
      }
      return false;
    };
    for (let sweep = 0; sweep < 8; sweep++) {
      let gained = false;
      for (const g of keys) {
        const i = grid.indexOf(get(hyper, g));
        for (const j of [i - 1, i + 1]) if (j >= 0 && j < grid.length && tryH(set(hyper, g, grid[j]))) gained = true;
      }
      if (!gained) break;
    }
    best = run(hyper, best.theta);
  }
  const params: ParamInfo[] = names.map((n, j) => {
    const h = hyperOf(n);
    return {
      name: n,
      kind: h ? "group" : "mean",
      hyper: h,
      label:
        h === "ffam"
          ? `format family: ${MU[n]?.label ?? n}`
          : h === "src"
            ? `source offset: ${n.slice(4)}`
            : h
              ? `${MU[h === "fmt" ? "fmt:gguf-k" : h]?.label.split(" (")[0] ?? h}: ${n.slice(n.indexOf("/") + 1)}`
              : (MU[n]?.label ?? n),
      prior: priorOf(n, hyper),
      posterior: { mean: best.theta[j], sd: Math.sqrt(Math.max(0, best.cov[j][j])) },
      rows: rowCount.get(n) ?? 0,
    };
  });
  return {
    names,
    index,
    theta: best.theta,
    cov: best.cov,
    hyper,
    params,
    rowsUsed: rows.map((r) => r.id),
    logEvidence: best.logEvidence,
    support,
  };
}

/** Effective number of parameters: Σ (1 − posterior variance / prior variance), the data's share of each. */
export function effectiveParameters(f: CorpusFit): number {
  return f.params.reduce((s, p) => s + Math.max(0, 1 - (p.posterior.sd / p.prior.sd) ** 2), 0);
}

let shippedFit: CorpusFit | undefined;

/** Every file the shipped fit reads: the corpus, its serving sources and the trace rows. */
export function corpusFiles(): string[] {
  return [CORPUS_FILE, ...servingFiles(), TRACES_FILE];
}

/**
 * The fit on the shipped corpus (once per process): the build's precomputed one when its stamp matches; else one that
 * another process of this checkout fitted from the same corpus and code and left in the temp folder (tests and runs
 * from src/ fit once, not once per process); else fitted now, and left there for the next process.
 */
export function corpusFit(): CorpusFit {
  if (shippedFit) return shippedFit;
  const cached = shippedCache()?.fit;
  if (cached) return (shippedFit = cached);
  const off = process.env.INFERSCOPE_PRIORS_CACHE === "0";
  const stamp = off ? undefined : fitStamp(THIS_FILE, corpusFiles());
  const tmp = stamp ? join(tmpdir(), `inferscope-priors-${stamp.stamp.slice(0, 24)}.json`) : undefined;
  if (tmp) {
    const r = readFitCache(tmp, THIS_FILE, corpusFiles());
    if (r.ok) return (shippedFit = r.value.fit);
  }
  // One process fits, the others of this checkout wait for its file (a fit of ~1,200 rows is tens of seconds of CPU:
  // a test run's parallel processes would otherwise each fit at once on a 2-core host).
  const lock = tmp ? claimFitLock(`${tmp}.lock`) : undefined;
  if (tmp && lock === "held-elsewhere") {
    const r = waitForFitCache(tmp, `${tmp}.lock`);
    if (r) return (shippedFit = r);
  }
  try {
    shippedFit = fitCorpus(shippedCorpus());
    if (tmp && stamp) {
      try {
        const part = `${tmp}.${process.pid}.tmp`;
        writeFileSync(part, JSON.stringify(fitCacheFile(shippedFit, supportDates(), stamp)));
        renameSync(part, tmp);
      } catch {
        // a temp folder that cannot be written only costs the next process a fit
      }
    }
  } finally {
    if (tmp && lock === "mine") rmSync(`${tmp}.lock`, { force: true });
  }
  return shippedFit;
}

/** Claims the temp-folder fit's lock: "mine", "held-elsewhere" (a live process fits), or "none" (unwritable). */
function claimFitLock(file: string): "mine" | "held-elsewhere" | "none" {
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      writeFileSync(file, String(process.pid), { flag: "wx" });
      return "mine";
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") return "none";
      if (lockHolderAlive(file)) return "held-elsewhere";
      rmSync(file, { force: true }); // its process died mid-fit
    }
  }
  return "none";
}

function lockHolderAlive(file: string): boolean {
  let pid: number;
  try {
    pid = Number(readFileSync(file, "utf8"));
  } catch {
    return false;
  }
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Waits (bounded: 15 min) for the fitting process's cache file; undefined when it died or the file never came. */
function waitForFitCache(tmp: string, lock: string): CorpusFit | undefined {
  const cell = new Int32Array(new SharedArrayBuffer(4));
  const deadline = Date.now() + 15 * 60_000;
  while (Date.now() < deadline) {
    const r = readFitCache(tmp, THIS_FILE, corpusFiles());
    if (r.ok) return r.value.fit;
    if (!lockHolderAlive(lock)) {
      const last = readFitCache(tmp, THIS_FILE, corpusFiles()); // written just before the lock went
      return last.ok ? last.value.fit : undefined;
    }
    Atomics.wait(cell, 0, 0, 200); // a synchronous pause: corpusFit() is synchronous for its callers
  }
  return undefined;
}

// ---------------------------------------------------------------- the precomputed fit (priors-cache.ts)

const THIS_FILE = fileURLToPath(import.meta.url);
/** Where the build puts the precomputed fit: beside this module (dist/model/); src/ has none. */
export const PRIORS_CACHE_FILE = fileURLToPath(new URL(`./${FIT_CACHE_NAME}`, import.meta.url));

let cacheRead: FitCacheRead | undefined;

/** Reads and checks PRIORS_CACHE_FILE now (no memo; the build checks what it wrote). */
export function readPrecomputedPriors(): FitCacheRead {
  return readFitCache(PRIORS_CACHE_FILE, THIS_FILE, corpusFiles());
}

/** How the shipped fit's cache was judged, once per process; INFERSCOPE_PRIORS_CACHE=0 turns it off. */
export function shippedCacheStatus(): FitCacheRead {
  cacheRead ??=
    process.env.INFERSCOPE_PRIORS_CACHE === "0"
      ? { ok: false, reason: "missing", detail: "INFERSCOPE_PRIORS_CACHE=0" }
      : readPrecomputedPriors();
  return cacheRead;
}

/** The out-of-support inflations the build stored beside the fit, when its cache holds them. */
export function cachedInflations(): unknown {
  return shippedCache()?.inflations;
}

function shippedCache(): CachedFit | undefined {
  const r = shippedCacheStatus();
  return r.ok ? r.value : undefined;
}

/** What the build writes to PRIORS_CACHE_FILE: a fresh fit of the shipped corpus, stamped with its inputs. */
export function precomputedPriors(): FitCacheFile {
  const c = shippedCorpus();
  // The grouped cross-validation behind the inflations refits the corpus some 80 times (minutes): the build takes the
  // checked-in file when its stamp matches this corpus and code, and runs it only when it does not.
  return fitCacheFile(fitCorpus(c), supportDates(), fitStamp(THIS_FILE, corpusFiles()), shippedInflations().inflations);
}

// ---------------------------------------------------------------- the prediction

export interface PartValue {
  term: TermName;
  ms: number;
  /** log-sd of this part alone (its parameters' posterior + any unfitted spread). */
  logSd: number;
}

export interface Predictive {
  /** Median step time, ms (the sum of the parts at the posterior mean). */
  ms: number;
  /** log-sd of the step time (posterior + residual σ + unfitted spreads + unknown maturity). */
  logSd: number;
  low80: number;
  high80: number;
  parts: PartValue[];
  /** Parameters this configuration uses that the corpus never informed (their prior spread stands). */
  unseen: string[];
  /** Time per lane (weighted over the steps), and the regime: host-bound when the host's work exceeds the device's
   * and overlaps it (the step then waits on the CPU). */
  lanes: {
    gpu: number;
    launch: number;
    host: number;
    serial: number;
    device: number;
    overlap: boolean;
    hostBound: boolean;
  };
}

/** Mean and variance of a parameter under the fit; outside it (an unseen group) its prior. */
function paramMoments(f: CorpusFit, name: string): { j?: number; mean: number; var: number } {
  const j = f.index.get(name);
  if (j !== undefined) return { j, mean: f.theta[j], var: f.cov[j][j] };
  const p = priorOf(name, f.hyper);
  return { mean: p.mean, var: p.sd ** 2 };
}

/** Variance of a linear combination Σ c_k θ_k (fitted ones through the covariance, unseen ones independent). */
function comboVar(f: CorpusFit, coef: Record<string, number>): number {
  const inFit: [number, number][] = [];
  let v = 0;
  for (const k in coef) {
    const m = paramMoments(f, k);
    if (m.j !== undefined) inFit.push([m.j, coef[k]]);
    else v += coef[k] ** 2 * m.var;
  }
  for (const [i, ci] of inFit) for (const [j, cj] of inFit) v += ci * cj * f.cov[i][j];
  return v;
}

export function predictive(f: CorpusFit, sp: StepParts, withResidual = true, inflationVar = 0): Predictive {
  return predictiveSteps(f, [{ w: 1, sp }], withResidual, inflationVar);
}

/**
 * The posterior predictive of a weighted sum of steps (one step for a decode prediction; a serving row's
 * representative steps for its mean TPOT). Parts report their share of the time, v·∂t/∂v (the lanes' smooth maxima
 * are homogeneous of degree 1, so the shares sum to the total).
 */
export function predictiveSteps(
  f: CorpusFit,
  steps: { w: number; sp: StepParts }[],
  withResidual = true,
  inflationVar = 0,
  serving = steps.length > 1,
  burst = false,
): Predictive {
  const sp = steps[0].sp;
  let t = 0;
  const shares: number[][] = [];
  const lanes = { gpu: 0, launch: 0, host: 0, serial: 0, device: 0 };
  for (const { w, sp: s } of steps) {
    const vals = s.parts.map((p) => {
      let e = 0;
      for (const k in p.coef) e += p.coef[k] * paramMoments(f, k).mean;
      return p.baseMs * Math.exp(e);
    });
    const d = new Float64Array(vals.length);
    const st = combineStep(
      vals,
      s.parts.map((p) => LANE_CODE[p.lane ?? "gpu"]),
      s.overlap,
      d,
    );
    t += w * st.t;
    lanes.gpu += w * st.gpu;
    lanes.launch += w * st.launch;
    lanes.host += w * st.host;
    lanes.serial += w * st.serial;
    lanes.device += w * (st.launch > 0 ? smax(st.gpu, st.launch) : st.gpu);
    shares.push(vals.map((v, i) => w * v * d[i]));
  }
  // Gradient of log t over every parameter the steps use.
  const g: Record<string, number> = {};
  let extra = 0;
  let matShare = 0;
  steps.forEach(({ sp: s }, k) => {
    s.parts.forEach((p, i) => {
      const wi = shares[k][i] / t;
      for (const c in p.coef) g[c] = (g[c] ?? 0) + wi * p.coef[c];
      extra += wi * wi * partExtraVar(p);
      if ("mat" in p.coef) matShare += wi;
    });
  });
  let v = comboVar(f, g) + extra;
  if (sp.maturityMix && matShare > 0) {
    // Unknown release: u drawn from a mixture. The coefficient E[u] carries the mean and Var(m)·E[u]²; add the rest
    // of Var(m·u) = E[m]²·Var(u) + Var(m)·Var(u).
    const fk = Object.keys(sp.matCoef).find((k) => k.startsWith("matf/"));
    const fam = fk ? { [fk]: 1 } : {};
    const m =
      paramMoments(f, "mat").mean +
      paramMoments(f, `mat/${sp.groups.engine}`).mean +
      (fk ? paramMoments(f, fk).mean : 0);
    const vm = comboVar(f, { mat: 1, [`mat/${sp.groups.engine}`]: 1, ...fam });
    v += matShare ** 2 * (m * m + vm) * sp.maturityMix.var;
  }
  // No release given: the release-to-release spread around the engine's maturity curve.
  if (!sp.releaseKey && matShare > 0) v += matShare ** 2 * f.hyper.tau.rel ** 2;
  // A prediction is for a deployment no corpus source measured: the residual and the between-source spread.
  if (withResidual)
    v +=
      f.hyper.sigma ** 2 +
      f.hyper.tau.src ** 2 +
      (sp.groups.moe ? f.hyper.tau.rmoe ** 2 : 0) +
      (serving ? f.hyper.tau.rsrv ** 2 : 0) +
      (burst ? (f.hyper.tau.rbst ?? 0) ** 2 : 0);
  // Out-of-support widening and the 80 % calibration (cv.ts): a variance multiplier estimated from the grouped
  // cross-validation (below 1 only by the calibration scale, never by an extrapolation).
  v *= Math.max(0.25, 1 + inflationVar);
  const sd = Math.sqrt(Math.max(0, v));
  // Parts: the first step's (a single-step prediction's own) with their shares; a multi-step prediction sums by part.
  const parts: PartValue[] =
    steps.length === 1
      ? sp.parts.map((p, i) => ({
          term: p.term,
          ms: shares[0][i],
          logSd: Math.sqrt(Math.max(0, comboVar(f, p.coef) + partExtraVar(p))),
        }))
      : termsOf(f, steps, shares);
  const unseen = [...new Set(steps.flatMap((x) => x.sp.parts.flatMap((p) => Object.keys(p.coef))))].filter(
    (k) => !f.index.has(k),
  );
  const hostBound = sp.overlap ? lanes.host > lanes.device : false;
  return {
    ms: t,
    logSd: sd,
    low80: t * Math.exp(-Z80 * sd),
    high80: t * Math.exp(Z80 * sd),
    parts,
    unseen,
    lanes: { ...lanes, overlap: sp.overlap, hostBound },
  };
}

/** A multi-step prediction's parts, one per term: the shares summed, the log-sd the shares' weighted mean. */
function termsOf(f: CorpusFit, steps: { w: number; sp: StepParts }[], shares: number[][]): PartValue[] {
  const by = new Map<TermName, { ms: number; sdw: number }>();
  steps.forEach(({ sp: s }, k) => {
    s.parts.forEach((p, i) => {
      const x = by.get(p.term) ?? { ms: 0, sdw: 0 };
      x.ms += shares[k][i];
      x.sdw += shares[k][i] * Math.sqrt(Math.max(0, comboVar(f, p.coef) + partExtraVar(p)));
      by.set(p.term, x);
    });
  });
  return [...by].map(([term, x]) => ({ term, ms: x.ms, logSd: x.ms > 0 ? x.sdw / x.ms : 0 }));
}

/** exp(posterior mean) of a combination: the fitted multiplier. */
/** The fitted all-reduce per-call factor for this link group (1 without one: no collective). */
export function linkArFactor(f: CorpusFit, r: Resolved, link: string | undefined): { mean: number; logSd: number } {
  return link ? fittedFactor(f, { ar: 1, [`arkind/${r.link.kind}`]: 1, [`ar/${link}`]: 1 }) : { mean: 1, logSd: 0 };
}

export function fittedFactor(f: CorpusFit, coef: Record<string, number>): { mean: number; logSd: number } {
  let e = 0;
  for (const k in coef) e += coef[k] * paramMoments(f, k).mean;
  return { mean: Math.exp(e), logSd: Math.sqrt(comboVar(f, coef)) };
}

// ---------------------------------------------------------------- leave-one-out

export interface LooRow {
  id: string;
  label: string;
  measuredMs: number;
  centreMs: number;
  low: number;
  high: number;
  inside: boolean;
  error: number;
  ratio: number;
}

export interface LooSummary {
  rows: LooRow[];
  medianAbsError: number;
  coverage: number;
  medianRatio: number;
  hyper: Hyper;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

/** Leave-one-out: refit (hyperparameters included) without each row, predict it, score the 80 % interval. */
export function leaveOneOut(c: Corpus = shippedCorpus(), only?: (r: CorpusRow) => boolean): LooSummary {
  const rows: LooRow[] = [];
  const full = fitCorpus(c);
  for (const r of c.rows) {
    if (only && !only(r)) continue;
    const f = fitCorpus(c, { exclude: r.id, hyperStart: full.hyper });
    const p = predictive(f, stepParts(resolve(r.input), undefined, f.support));
    rows.push({
      id: r.id,
      label: r.label,
      measuredMs: r.measuredMs,
      centreMs: p.ms,
      low: p.low80,
      high: p.high80,
      inside: r.measuredMs >= p.low80 && r.measuredMs <= p.high80,
      error: (p.ms - r.measuredMs) / r.measuredMs,
      ratio: p.high80 / p.low80,
    });
  }
  return {
    rows,
    medianAbsError: median(rows.map((x) => Math.abs(x.error))),
    coverage: rows.filter((x) => x.inside).length / rows.length,
    medianRatio: median(rows.map((x) => x.ratio)),
    hyper: full.hyper,
  };
}

// ---------------------------------------------------------------- linear algebra

/** Solves A x = b for a symmetric positive-definite A (the Gauss–Newton system: J'WJ plus the prior's diagonal) by a
 * Cholesky factorisation on a flat array; falls back to pivoted elimination if A is not numerically SPD. */
function solve(A: number[][], b: number[]): number[] {
  const n = b.length;
  const L = cholesky(A, true);
  if (!L) return solvePivoted(A, b);
  const y = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    let sum = b[i];
    const ri = i * n;
    for (let k = 0; k < i; k++) sum -= L[ri + k] * y[k];
    y[i] = sum / L[ri + i];
  }
  const x = new Array<number>(n).fill(0);
  for (let i = n - 1; i >= 0; i--) {
    let sum = y[i];
    for (let k = i + 1; k < n; k++) sum -= L[k * n + i] * x[k];
    x[i] = sum / L[i * n + i];
  }
  return x;
}

function solvePivoted(A: number[][], b: number[]): number[] {
  const n = b.length;
  const M = A.map((row, i) => [...row, b[i]]);
  for (let c = 0; c < n; c++) {
    let p = c;
    for (let r = c + 1; r < n; r++) if (Math.abs(M[r][c]) > Math.abs(M[p][c])) p = r;
    [M[c], M[p]] = [M[p], M[c]];
    const d = M[c][c];
    if (Math.abs(d) < 1e-300) throw new Error("singular system in the corpus fit");
    for (let r = c + 1; r < n; r++) {
      const k = M[r][c] / d;
      if (k === 0) continue;
      for (let j = c; j <= n; j++) M[r][j] -= k * M[c][j];
    }
  }
  const x = new Array(n).fill(0);
  for (let r = n - 1; r >= 0; r--) {
    let s = M[r][n];
    for (let j = r + 1; j < n; j++) s -= M[r][j] * x[j];
    x[r] = s / M[r][r];
  }
  return x;
}

// ---------------------------------------------------------------- priors for a calibration (model fit)

/** Fitted format factor of one tensor group (1 for 16-bit). */
export function formatFactorOf(r: Resolved, l: GroupLoad, f: CorpusFit = corpusFit()): number {
  if (l.group === "kv" || l.group === "attentionCore") return 1;
  const key = formatKey(r, l);
  const fam = formatFamily(key);
  return fam ? fittedFactor(f, { [fam]: 1, [`fmt/${key}`]: 1 }).mean : 1;
}

export interface CalibrationPriors {
  /** 1/η_m against the reference bandwidth (spec or measured). */
  invEta: { mean: number; sd: number };
  /** Routed-expert reads: 1/η_m · small-M shortfall · maturity. */
  invEtaExperts?: { mean: number; sd: number };
  /** Fixed per-step cost (kernels + routing kernels + engine), ms. */
  fixedMs: { mean: number; sd: number };
  /** Multiplier on the collectives model's per-call cost for this link. */
  arFactor: { mean: number; logSd: number };
  source: string;
}

/**
 * The corpus fit's small-M shape of the routed-expert reads relative to one token per expert: e^(g·(s(M) − 1)),
 * s(M) = 1/√M, g = the fitted expert-GEMM shortfall (shared + engine/backend, posterior means). A calibration's
 * invEtaExperts is the factor at M = 1; this carries it to any batch, so a batch sweep fits and predicts with the
 * same batch dependence as the uncalibrated model (1 for a dense model).
 */
export function expertSmallMShape(r: Resolved, f: CorpusFit = corpusFit()): number {
  if (!r.arch.moe) return 1;
  const grp = `${r.engine}/${backend(r)}`;
  const g = paramMoments(f, "moe").mean + paramMoments(f, `moe/${grp}`).mean;
  return Math.exp(g * (1 / Math.sqrt(expertM(r)) - 1));
}

/** The corpus posterior for this deployment, as priors for `model fit` (the same distributions, updated there). */
export function calibrationPriors(r: Resolved, f: CorpusFit = corpusFit()): CalibrationPriors {
  const sp = stepParts(r);
  const pr = predictive(f, sp, false);
  const g = sp.groups;
  const etaCoef = etaCoefOf(r);
  const eta = fittedFactor(f, etaCoef);
  let fixed = 0;
  let fixedSd = 0;
  sp.parts.forEach((p, i) => {
    if ("kern" in p.coef) {
      fixed += pr.parts[i].ms;
      fixedSd += pr.parts[i].ms * pr.parts[i].logSd;
    }
  });
  const matCoef = sp.matCoef;
  // Unknown release: the maturity weight's own spread (its mixture) widens the fixed-cost prior.
  if (sp.maturityMix) {
    const m = fittedFactor(f, { mat: 1, [`mat/${r.engine}`]: 1, [matFamilyKey(r)]: 1 });
    fixedSd = Math.hypot(fixedSd, fixed * Math.abs(Math.log(m.mean)) * Math.sqrt(sp.maturityMix.var));
  }
  let invEtaExperts: CalibrationPriors["invEtaExperts"];
  if (g.moe) {
    // At one token per expert (s(M) = 1); each batch's expert reads carry expertSmallMShape (the fit's batch shape).
    const e = fittedFactor(f, { ...etaCoef, moe: 1, [`moe/${g.moe}`]: 1, ...matCoef });
    invEtaExperts = { mean: e.mean, sd: e.mean * e.logSd };
  }
  const ar = linkArFactor(f, r, g.link);
  return {
    invEta: { mean: eta.mean, sd: eta.mean * eta.logSd },
    invEtaExperts,
    fixedMs: { mean: fixed, sd: Math.max(fixedSd, 0.01 * fixed) },
    arFactor: ar,
    source: `corpus fit (${f.rowsUsed.length} public measurements): device ${g.device}, kernels ${g.kernels}${g.moe ? `, MoE ${g.moe}` : ""}${g.link ? `, link ${g.link}` : ""}`,
  };
}
