// Calibration: fits the model's free parameters (bandwidth efficiency, per-collective latency and its bandwidth term,
// in-loop skew, fixed per-step overhead, prefill scale, A/B variant deltas) to measurements. Every prediction is linear
// in these parameters, so this is a linear-Gaussian MAP fit: priors are the reference ranges (range ≈ ±2σ), the
// posterior covariance says what the data pinned down. Pure.
import { UsageError } from "../errors.ts";
import { measuredLatency, SKEW_US } from "./collectives.ts";
import type { Measurement, Variant } from "./measurements.ts";
import { describeVariant } from "./measurements.ts";
import type { Prediction } from "./predict.ts";
import { arKey, predictResolved, prefillEstimate } from "./predict.ts";
import { calibrationPriors, expertSmallMShape, formatFactorOf } from "./priors.ts";
import type { CalibParam, Calibration, ModelInput, Resolved } from "./resolve.ts";
import { resolve } from "./resolve.ts";
import {
  allReduceFor,
  collectiveCounts,
  decodeLoads,
  ENGINE_CONSTANTS,
  ETA_M_MEASURED,
  ETA_M_SPEC,
  evalDecode,
  expertsOnBusiestDevice,
  GGUF_KERNEL_EFF,
  kernelCount,
  kvReadPerGpu,
  referenceBandwidthGBs,
} from "./step.ts";
import { predictWorkload } from "./workload.ts";

export interface FitParam {
  name: string;
  label: string;
  unit: string;
  digits: number;
  prior: { mean: number; sd: number };
  /** Where the prior came from: the corpus posterior for this deployment, or a reference range. */
  priorFrom?: string;
  posterior: { mean: number; sd: number };
  pinned: boolean;
  why?: string;
}

export interface Residual {
  label: string;
  measured: number;
  fitted: number;
  prior: number;
  unit: string;
  sigma: number;
  z: number;
}

export interface Derived {
  name: string;
  label: string;
  text: string;
  values: Record<string, number | string>;
}

export interface FullCalibration extends Calibration {
  baseline: { arModelUs: number; arKey: string };
  /** The engine's host time per step, when measured (engine spans): predict() splits fixedMs into kernels + this. */
  hostMs?: { mean: number; sd: number };
  arVariants: { key: string; variant: Variant; deltaUs: { mean: number; sd: number } }[];
}

export interface FitResult {
  kind: "inferscope.model.fit";
  measurementsUsed: number;
  parameters: FitParam[];
  calibration: FullCalibration;
  residuals: Residual[];
  derived: Derived[];
  consistency: string[];
  notPinned: string[];
  summary: string;
  /** Facts ceilings() needs from the measurements. */
  facts: FitFacts;
  prediction: Prediction;
}

export interface FitFacts {
  itlMs?: number;
  ttftMs?: number;
  bandwidthGBs?: number;
  nAr: number;
  arBytes: number;
  shareLow?: number;
  shareHigh?: number;
  computeLowMs?: number;
  computeHighMs?: number;
  ceilingLowTps?: number;
  ceilingHighTps?: number;
  isolatedModelUs?: number;
  isolatedMeasuredUs?: number;
  floors: { recipe: string; description: string; GB: number; ms: number }[];
}

interface Row {
  label: string;
  y: number;
  sigma: number;
  /** Coefficients on θ, and the constant part. */
  coef: number[];
  c: number;
  unit: string;
}

function sdFromCi(ci: [number, number] | undefined): number | undefined {
  return ci ? Math.abs(ci[1] - ci[0]) / 3.92 : undefined;
}

function applyVariant(input: ModelInput, v: Variant | undefined): ModelInput {
  if (!v) return input;
  return {
    ...input,
    ncclProto: v.ncclProto ?? input.ncclProto,
    ncclAlgo: v.ncclAlgo ?? input.ncclAlgo,
    customAllReduce: v.customAllReduce ?? input.customAllReduce,
    cudaGraphs: v.cudaGraphs ?? input.cudaGraphs,
    interconnect: v.interconnect ?? input.interconnect,
  };
}

/** Model-discrepancy σ added to every row, as a fraction of the value (the model is not exact). */
const MODEL_REL_SIGMA = 0.03;
/** A fitted row this many σ off under the priors is a prior–data conflict. */
const CONFLICT_Z = 3;
/** Degrees of freedom of the heavy-tailed priors used once a conflict is found. */
const PRIOR_T_NU = 4;

export function fit(inputIn: ModelInput, measurements: Measurement[]): FitResult {
  if (measurements.length === 0) throw new UsageError("model fit needs at least one measurement");
  const bwM = measurements.find((m): m is Measurement & { kind: "bandwidth" } => m.kind === "bandwidth");
  const input: ModelInput = {
    ...inputIn,
    calibration: undefined,
    measuredBandwidthGBs: inputIn.measuredBandwidthGBs ?? bwM?.gbs,
  };
  const r = resolve(input);
  const ref = referenceBandwidthGBs(r);
  const kernels = kernelCount(r);
  const ec = ENGINE_CONSTANTS[r.engine];
  const ar = allReduceFor(r);
  const cc = collectiveCounts(r);
  const eta = ref.measured ? ETA_M_MEASURED : ETA_M_SPEC;

  // ---- parameters and priors: the corpus posterior for this deployment (priors.ts), updated here
  const cp = calibrationPriors(r);
  const names: string[] = ["invEta", "arLatUs", "arUsPerKB", "skewUs", "fixedMs", "prefillScale"];
  const prior: { mean: number; sd: number }[] = [];
  prior.push(cp.invEta);
  const bestNccl = ar?.candidates?.filter((c) => c.enabled).sort((a, b) => a.timeUs - b.timeUs)[0];
  const perKB = bestNccl
    ? 1024 / (1000 * bestNccl.algBwGBs)
    : ar
      ? 1024 / (1000 * Math.max(1, r.link.perDirectionGBs * 0.7))
      : 0;
  const isoMid = ar ? Math.max(0.5, ar.isolatedUs.mid - (perKB * cc.bytesEach) / 1024) : 0;
  // The collectives model's per-call split, scaled by the corpus's fitted factor for this link (its spread added).
  const af = cp.arFactor;
  const scaled = (mean: number, sd: number) => ({
    mean: mean * af.mean,
    sd: Math.hypot(sd * af.mean, mean * af.mean * af.logSd),
  });
  prior.push(ar ? scaled(isoMid, Math.max(1, (ar.isolatedUs.high - ar.isolatedUs.low) / 4)) : { mean: 0, sd: 0.01 });
  prior.push({ mean: perKB, sd: Math.max(1e-4, perKB * 0.5) });
  prior.push(ar ? scaled(SKEW_US.mid, (SKEW_US.high - SKEW_US.low) / 4) : { mean: 0, sd: 0.01 });
  prior.push(cp.fixedMs);
  prior.push({ mean: 1, sd: 0.35 });
  // MoE: routed-expert reads have their own fitted 1/η (small-M expert GEMMs, engine maturity).
  const iExp = cp.invEtaExperts ? names.push("invEtaExperts") - 1 : -1;
  if (cp.invEtaExperts) prior.push(cp.invEtaExperts);
  // Engine spans with detailed traces measure the host part of the step: it becomes its own parameter, fixedMs the
  // kernel part (the corpus prior above sums only the kernel parts). Its prior is the model's engine term: zero where
  // the engine overlaps its host work with the device, else the engine's reference host time.
  const hostPrior = hostTermPrior(r);
  const iHost = measurements.some((m) => m.kind === "server-split" && m.hostMs) ? names.push("hostMs") - 1 : -1;
  if (iHost >= 0) prior.push({ mean: hostPrior.mean, sd: hostPrior.sd });
  const baseKey = arKey(r);
  const arModelBase = ar?.latencyUs.mid ?? 0;
  const variantIndex = new Map<string, { idx: number; variant: Variant }>();
  const variantParam = (v: Variant | undefined): number | null => {
    if (!v || !ar) return null;
    const vr = resolve(applyVariant(input, v));
    const key = arKey(vr);
    if (key === baseKey) return null;
    const hit = variantIndex.get(key);
    if (hit) return hit.idx;
    const vAr = allReduceFor(vr);
    const diff = (vAr?.latencyUs.mid ?? 0) - arModelBase;
    names.push(`dAR:${describeVariant(v)}`);
    // Forcing a protocol or kernel can move a call by tens of µs (Simple − LL: 44–68 µs modelled at n = 8).
    prior.push({ mean: diff, sd: Math.max(20, 0.5 * Math.abs(diff) + 5) });
    variantIndex.set(key, { idx: names.length - 1, variant: v });
    return names.length - 1;
  };

  // ---- linear rows
  const rows: Row[] = [];
  const P = names.length;
  const zeros = () => new Array(64).fill(0);
  const ggufEff = r.recipe.gguf && r.recipe.groups.attention.bpw < 16 ? GGUF_KERNEL_EFF.mid : 1;
  const itlRow = (
    label: string,
    y: number,
    sigma: number,
    batch: number,
    ctx: number,
    variant: Variant | undefined,
    unit = "ms",
  ) => {
    const rb: Resolved = { ...r, batch, contextLen: ctx };
    const exp = r.arch.moe ? expertsOnBusiestDevice(r.arch.moe.experts, r.arch.moe.topk, batch, r.ep).mid : 0;
    const loads = decodeLoads(rb, exp, batch, ctx);
    // Bytes at the corpus format factors; routed experts on their own parameter (MoE).
    let bytes = 0;
    let expertBytes = 0;
    for (const l of loads) {
      if (l.group === "attentionCore") continue;
      const b = l.bytes * formatFactorOf(rb, l);
      if (l.group === "experts" && iExp >= 0) expertBytes += b;
      else bytes += b;
    }
    const coef = zeros();
    coef[0] = bytes / (ref.gbs * 1e6);
    // invEtaExperts is the factor at one token per expert; the corpus fit's small-M shape carries it to this batch.
    if (iExp >= 0) coef[iExp] = (expertBytes * expertSmallMShape(rb)) / (ref.gbs * 1e6);
    const ccb = collectiveCounts(rb, batch);
    const nAll = ar && !input.zeroComm ? ccb.perToken + ccb.embedding + ccb.logitsGather : 0;
    coef[1] = nAll / 1000;
    coef[2] = ((nAll / 1000) * ccb.bytesEach) / 1024;
    coef[3] = nAll / 1000;
    coef[4] = 1;
    if (iHost >= 0) coef[iHost] = 1;
    const vi = variantParam(variant);
    if (vi !== null) coef[vi] = nAll / 1000;
    // Constant: compute beyond bandwidth, all-to-all, p2p — from the central model.
    const mid = evalDecode(
      rb,
      {
        etaM: 1 / prior[0].mean,
        etaC: 0.6,
        ggufEff: GGUF_KERNEL_EFF.mid,
        kernelUs: 0,
        engineMs: 0,
        arUs: 0,
        a2aUs: 25,
        p2pUs: 10,
        expertsLocal: exp,
      },
      ar,
      kernels,
    );
    const c = mid.computeMs + mid.allToAllMs + mid.p2pMs;
    rows.push({ label, y, sigma: Math.hypot(sigma, MODEL_REL_SIGMA * y), coef, c, unit });
  };
  const facts: FitFacts = { nAr: cc.perToken, arBytes: cc.bytesEach, bandwidthGBs: bwM?.gbs, floors: [] };
  let used = 0;
  const abs: (Measurement & { kind: "ab" })[] = [];
  const consistency: string[] = [];
  let traceShare: { low: number; high: number } | undefined;
  // Prefill with only the matmul terms at the prior bandwidth: the shape TTFT and sweep intercepts scale.
  const matmulOnlyPrefill = (rr: Resolved) =>
    prefillEstimate(
      rr,
      [0, 1, 2].map(() => ({
        etaM: 1 / prior[0]!.mean,
        etaC: 0.6,
        ggufEff: GGUF_KERNEL_EFF.mid,
        kernelUs: 0,
        engineMs: 0,
        arUs: 0,
        a2aUs: 0,
        p2pUs: 0,
        expertsLocal: 0,
      })),
    );
  for (const m of measurements) {
    switch (m.kind) {
      case "itl": {
        const sd = m.sd ?? sdFromCi(m.ci) ?? Math.max(0.1, 0.02 * m.ms);
        itlRow(
          m.label ?? `ITL at batch ${m.batch ?? 1}${m.variant ? ` (${describeVariant(m.variant)})` : ""}`,
          m.ms,
          sd,
          m.batch ?? r.batch,
          m.contextLen ?? r.contextLen,
          m.variant,
        );
        if ((m.batch ?? 1) === 1 && !m.variant && facts.itlMs === undefined) facts.itlMs = m.ms;
        used++;
        break;
      }
      case "ttft": {
        const rr: Resolved = { ...r, inputLen: m.inputLen ?? r.inputLen };
        const pe = matmulOnlyPrefill(rr);
        // The scale multiplies the whole prefill (matmuls, all-reduces, kernels); request overhead stays.
        const rest = pe.terms[3].ms.mid;
        const body = pe.ttftMs.mid - rest;
        const coef = zeros();
        coef[5] = body;
        const sd = m.sd ?? sdFromCi(m.ci) ?? 0.05 * m.ms;
        rows.push({
          label: m.label ?? `TTFT (${rr.inputLen} input tokens)`,
          y: m.ms,
          sigma: Math.hypot(sd, 0.05 * m.ms),
          coef,
          c: rest,
          unit: "ms",
        });
        facts.ttftMs ??= m.ms;
        used++;
        break;
      }
      case "ab": {
        abs.push(m);
        const n = cc.perToken + cc.embedding + cc.logitsGather;
        const delta = m.deltaMsPerToken ?? ((m.bTotalS! - m.aTotalS!) * 1000) / m.tokens!;
        const coef = zeros();
        const ia = variantParam(m.variantA);
        const ib = variantParam(m.variantB);
        if (ia !== null) coef[ia] -= n / 1000;
        if (ib !== null) coef[ib] += n / 1000;
        const sd = sdFromCi(m.ci) ?? Math.max(0.05, 0.1 * Math.abs(delta));
        rows.push({
          label: m.label ?? `A/B ${describeVariant(m.variantB)} − ${describeVariant(m.variantA)} per token`,
          y: delta,
          sigma: sd,
          coef,
          c: 0,
          unit: "ms",
        });
        used++;
        break;
      }
      case "length-sweep": {
        const sd = sdFromCi(m.ci) ?? Math.max(0.1, 0.02 * m.slopeMsPerToken);
        itlRow(m.label ?? "length-sweep slope (ITL)", m.slopeMsPerToken, sd, 1, r.contextLen, undefined);
        facts.itlMs ??= m.slopeMsPerToken;
        const rr: Resolved = { ...r };
        const pe = matmulOnlyPrefill(rr);
        const coef = zeros();
        coef[5] = pe.ttftMs.mid - pe.terms[3].ms.mid;
        rows.push({
          label: "length-sweep intercept (≈ TTFT)",
          y: m.interceptMs,
          sigma: 0.08 * m.interceptMs,
          coef,
          c: pe.terms[3].ms.mid,
          unit: "ms",
        });
        facts.ttftMs ??= m.interceptMs;
        used++;
        break;
      }
      case "context-slope": {
        const perTok = kvReadPerGpu(r, 1000).bytesPerSeq - kvReadPerGpu(r, 0).bytesPerSeq;
        // KV reads stream at the device's 1/η (no format factor).
        const coef = zeros();
        coef[0] = (perTok * r.batch) / (ref.gbs * 1e6);
        const sd = sdFromCi(m.ci) ?? Math.max(0.005, 0.2 * Math.abs(m.msPerKToken));
        rows.push({
          label: m.label ?? "ITL growth per 1K context tokens",
          y: m.msPerKToken,
          sigma: sd,
          coef,
          c: 0,
          unit: "ms/1K tokens",
        });
        used++;
        break;
      }
      case "nccl-tests": {
        if (ar?.implementation !== "nccl") break;
        for (const row of m.rows.filter((x) => x.bytes >= 1024 && x.bytes <= 4 * 1024 * 1024)) {
          const coef = zeros();
          coef[1] = 1;
          coef[2] = row.bytes / 1024;
          rows.push({
            label: `nccl-tests ${row.bytes} B ${row.inPlace ? "in-place" : "out-of-place"}`,
            y: row.us,
            sigma: 0.05 * row.us + 0.5,
            coef,
            c: 0,
            unit: "µs",
          });
        }
        used++;
        break;
      }
      case "trace": {
        const batch = m.batch ?? 1;
        const rb: Resolved = { ...r, batch, contextLen: m.contextLen ?? r.contextLen };
        const ccb = collectiveCounts(rb, batch);
        const nAll = ccb.perToken + ccb.embedding + ccb.logitsGather;
        const cfg = m.variant ? ` (${describeVariant(m.variant)})` : "";
        if (m.stepMs) {
          const sd = sdFromCi(m.stepMs.ci) ?? Math.max(0.1, 0.02 * m.stepMs.value);
          itlRow(
            m.label ?? `decode step at batch ${batch} (trace)${cfg}`,
            m.stepMs.value,
            sd,
            batch,
            rb.contextLen,
            m.variant,
          );
          if (batch === 1 && !m.variant) facts.itlMs ??= m.stepMs.value;
        }
        const per = m.allReduceUsPerCall;
        if (ar) {
          // In-loop cost of one call as the profiler saw it: isolated latency + bandwidth term + skew.
          const coef = zeros();
          coef[1] = 1;
          coef[2] = ccb.bytesEach / 1024;
          coef[3] = 1;
          const vi = variantParam(m.variant);
          if (vi !== null) coef[vi] = 1;
          // No model-discrepancy term: in the model the in-loop per-call cost is exactly these parameters.
          const sd = sdFromCi(per.ci) ?? 0.05 * per.value;
          rows.push({
            label: `all-reduce per call (trace)${cfg}`,
            y: per.value,
            sigma: Math.max(sd, 0.002 * per.value, 0.05),
            coef,
            c: 0,
            unit: "µs",
          });
          const calls = m.allReduceCallsPerToken;
          if (calls !== undefined && Math.abs(calls - nAll) > 0.5)
            consistency.push(
              `The trace counts ${calls} all-reduce calls per step; the model counts ${nAll} (${ccb.perToken} per layer pass + ${ccb.embedding} embedding + ${ccb.logitsGather} logits): the model's collective total differs from the trace's by ${(((calls - nAll) * per.value) / 1000).toFixed(2)} ms per step.`,
            );
        } else
          consistency.push(
            "The trace has all-reduce time, but the model sees no all-reduce in this deployment (TP 1?): the per-call row was not fitted.",
          );
        // The trace's own share, when no stated share was given (the ceiling rows use it).
        if (m.stepMs && m.allReduceCallsPerToken && !m.variant && batch === 1) {
          const share = (us: number) => (m.allReduceCallsPerToken! * us) / 1000 / m.stepMs!.value;
          traceShare ??= {
            low: share(per.ci?.[0] ?? per.value),
            high: share(per.ci?.[1] ?? per.value),
          };
        }
        used++;
        break;
      }
      case "trace-fixed": {
        // The trace's fixed time (kernels outside the streaming GEMMs and attention, and the gaps between them) is the
        // kernel part of fixedMs; the engine's host part stays at its prior (a trace under the profiler slows the host),
        // or is its own parameter when engine spans measured it.
        const hostPart = iHost >= 0 ? 0 : ec.engineMs.mid;
        const coef = zeros();
        coef[4] = 1;
        rows.push({
          label:
            m.label ?? `fixed per-step cost (trace: ${m.kernels.toFixed(0)} kernels × ${m.perKernelUs.toFixed(2)} µs)`,
          y: m.fixedMs,
          sigma: Math.max(0.05, 0.05 * m.fixedMs),
          coef,
          c: -hostPart,
          unit: "ms",
        });
        const batch = m.batch ?? r.batch;
        const rb: Resolved = { ...r, batch };
        const n = kernelCount(rb).perStep;
        consistency.push(
          `The trace runs ${m.kernels.toFixed(0)} kernels per decode step at ${m.perKernelUs.toFixed(2)} µs of fixed time each (${m.fixedMs.toFixed(2)} ms outside GEMM, MoE, attention and collectives); the model's ${r.engine} op sequence counts ${n} (${kernels.basis}).`,
        );
        if (m.hostGapMs > 0.1 * m.stepMs)
          consistency.push(
            `The GPU waited on the host ${m.hostGapMs.toFixed(2)} ms of each ${m.stepMs.toFixed(2)} ms traced step: the step was host-bound while profiled (the profiler slows the host), so the traced step time is not fitted.`,
          );
        else
          itlRow(
            `decode step at batch ${batch} (trace)`,
            m.stepMs,
            Math.max(0.05, 0.02 * m.stepMs),
            batch,
            r.contextLen,
            undefined,
          );
        used++;
        break;
      }
      case "server-split": {
        const from = `engine spans, ${m.requests} requests${m.hostMs ? ", detailed traces" : ""}`;
        const batch = m.concurrency ?? 1;
        if (m.stepMs) {
          // The server's own decode step: an ITL row without the client's delivery.
          const sd = sdFromCi(m.stepMs.ci) ?? Math.max(0.05, 0.02 * m.stepMs.value);
          itlRow(
            m.label ?? `server decode step at batch ${batch} (${from})`,
            m.stepMs.value,
            sd,
            batch,
            m.contextLen ?? r.contextLen,
            undefined,
          );
          if (batch === 1) facts.itlMs ??= m.stepMs.value;
        }
        if (m.hostMs && iHost >= 0) {
          const coef = zeros();
          coef[iHost] = 1;
          // The parameter itself, measured: no model-discrepancy term.
          const sd = sdFromCi(m.hostMs.ci) ?? Math.max(0.01, 0.1 * m.hostMs.value);
          rows.push({
            label: `engine host time per step (${from})`,
            y: m.hostMs.value,
            sigma: Math.max(sd, 0.002),
            coef,
            c: 0,
            unit: "ms",
          });
        }
        if (m.queueMs) consistency.push(queueConsistency(input, r, m, from));
        used++;
        break;
      }
      case "bandwidth":
        used++;
        break;
      case "estimate":
        if (m.name === "allreduce-share") {
          facts.shareLow = Math.min(m.low, m.high) > 1 ? Math.min(m.low, m.high) / 100 : Math.min(m.low, m.high);
          facts.shareHigh = Math.max(m.low, m.high) > 1 ? Math.max(m.low, m.high) / 100 : Math.max(m.low, m.high);
        } else if (m.name === "compute-ms") {
          facts.computeLowMs = Math.min(m.low, m.high);
          facts.computeHighMs = Math.max(m.low, m.high);
        } else {
          facts.ceilingLowTps = Math.min(m.low, m.high);
          facts.ceilingHighTps = Math.max(m.low, m.high);
        }
        used++;
        break;
    }
  }
  if (traceShare && facts.shareLow === undefined) {
    facts.shareLow = traceShare.low;
    facts.shareHigh = traceShare.high;
  }
  const K = names.length;
  if (K > P && prior.length !== K) throw new Error("internal: prior length");

  // ---- MAP solve: H = JᵀWJ + T⁻¹, θ = H⁻¹(JᵀW(y − c) + T⁻¹μ); pw scales each prior's precision.
  const solve = (pw: number[]) => {
    const H: number[][] = Array.from({ length: K }, () => new Array(K).fill(0));
    const b: number[] = new Array(K).fill(0);
    for (let j = 0; j < K; j++) {
      H[j][j] += pw[j]! / prior[j].sd ** 2;
      b[j] += (pw[j]! * prior[j].mean) / prior[j].sd ** 2;
    }
    for (const row of rows) {
      const w = 1 / row.sigma ** 2;
      for (let i = 0; i < K; i++) {
        if (row.coef[i] === 0) continue;
        b[i] += w * row.coef[i] * (row.y - row.c);
        for (let j = 0; j < K; j++) H[i][j] += w * row.coef[i] * row.coef[j];
      }
    }
    const cv = invert(H);
    return { cov: cv, theta: cv.map((rowv) => rowv.reduce((s, v, j) => s + v * b[j], 0)) };
  };
  const predRow = (row: Row, th: number[]) => row.c + row.coef.slice(0, K).reduce((s, v, j) => s + v * th[j], 0);
  const rowZ = (th: number[]) => rows.map((row) => (row.y - predRow(row, th)) / row.sigma);
  let priorWeights = new Array(K).fill(1);
  let { cov, theta } = solve(priorWeights);
  // Prior–data conflict: a measurement the fitted model still misses by > 3σ means the corpus prior does
  // not describe this deployment (a CPU host, a contended machine, an engine the corpus lacks). The
  // priors are then treated as heavy-tailed (Student-t, ν = 4, by reweighting) so the measurements set
  // the step; a prior never becomes tighter than stated.
  const z0 = rowZ(theta);
  const worst = z0.reduce((w, z, i) => (Math.abs(z) > Math.abs(z0[w] ?? 0) ? i : w), 0);
  if (rows.length && Math.abs(z0[worst]!) > CONFLICT_Z) {
    for (let it = 0; it < 50; it++) {
      const next = theta.map((t, j) => {
        const r = (t - prior[j].mean) / prior[j].sd;
        return Math.min(1, (PRIOR_T_NU + 1) / (PRIOR_T_NU + r * r));
      });
      const done = next.every((w, j) => Math.abs(w - priorWeights[j]) < 1e-4);
      priorWeights = next;
      ({ cov, theta } = solve(priorWeights));
      if (done) break;
    }
    const loosened = names.filter((_, j) => priorWeights[j] < 0.99);
    consistency.push(
      `Prior–data conflict: under the corpus priors the fitted model missed "${rows[worst]!.label}" by ${z0[worst]!.toFixed(1)}σ, so those priors do not describe this deployment; they were treated as heavy-tailed (Student-t, ν = ${PRIOR_T_NU}) and the measurements set the step${loosened.length ? ` (loosened: ${loosened.map((n) => `${n} ×${(1 / Math.sqrt(priorWeights[names.indexOf(n)]!)).toFixed(1)} sd`).join(", ")})` : ""}; the excess is carried by the loosened parameters.`,
    );
  }
  const priorMeans = prior.map((p) => p.mean);
  const residuals: Residual[] = rows.map((row) => {
    const fitted = predRow(row, theta);
    return {
      label: row.label,
      measured: row.y,
      fitted,
      prior: predRow(row, priorMeans),
      unit: row.unit,
      sigma: row.sigma,
      z: (row.y - fitted) / row.sigma,
    };
  });

  // ---- parameters: pinned or not
  const META: Record<string, { label: string; unit: string; digits: number }> = {
    invEta: {
      label: `1/η_m (bandwidth efficiency vs ${ref.measured ? "measured" : "spec"} ${ref.gbs} GB/s)`,
      unit: "",
      digits: 3,
    },
    invEtaExperts: {
      label: "1/η of routed-expert reads (bandwidth × small-M expert-GEMM efficiency × engine maturity)",
      unit: "",
      digits: 3,
    },
    arLatUs: { label: "all-reduce latency per call, isolated", unit: "µs", digits: 1 },
    arUsPerKB: { label: "all-reduce bandwidth term", unit: "µs/KiB", digits: 3 },
    skewUs: { label: "in-loop skew/sync per all-reduce", unit: "µs", digits: 1 },
    fixedMs: {
      label:
        iHost >= 0
          ? "fixed per-step overhead, kernels (the host part is hostMs)"
          : "fixed per-step overhead (kernels + engine)",
      unit: "ms",
      digits: 2,
    },
    hostMs: { label: "engine host time per step (scheduler, output processing, gaps)", unit: "ms", digits: 3 },
    prefillScale: { label: "prefill time scale", unit: "×", digits: 2 },
  };
  const parameters: FitParam[] = names.map((name, j) => {
    const sd = Math.sqrt(Math.max(0, cov[j][j]));
    const shrink = sd / (prior[j].sd / Math.sqrt(priorWeights[j]));
    const sensitive = rows.some((row) => row.coef[j] !== 0);
    let why: string | undefined;
    let partner = -1;
    let best = 0;
    for (let k = 0; k < K; k++) {
      if (k === j) continue;
      const corr = cov[j][k] / Math.sqrt(cov[j][j] * cov[k][k]);
      if (Math.abs(corr) > Math.abs(best)) {
        best = corr;
        partner = k;
      }
    }
    // Pinned when the data carry at least as much information as the prior (posterior variance ≤ half the prior's).
    // (or, when the prior was already tight, when the data still narrow it and it is known to ±10 %).
    // A parameter that moved only together with another (|correlation| > 0.6) is part of a combination, not pinned.
    const pinned =
      sensitive &&
      Math.abs(best) <= 0.6 &&
      (shrink <= Math.SQRT1_2 || (shrink <= 0.9 && sd <= 0.1 * Math.abs(theta[j])));
    if (!pinned) {
      if (!sensitive) why = "no measurement depends on it; the prior stands";
      else if (partner >= 0 && Math.abs(best) > 0.6)
        why = `the data fix only a combination with ${names[partner]} (correlation ${best.toFixed(2)})`;
      else {
        // Every row that sees this parameter also sees these: only their sum is measured.
        const mine = rows.filter((row) => row.coef[j] !== 0);
        const shared = names.filter((_, q) => q !== j && mine.every((row) => row.coef[q] !== 0));
        why = shared.length
          ? `it enters only rows that also depend on ${shared.join(", ")}: the data fix their sum, not each part`
          : `weakly constrained (posterior sd ${(100 * shrink).toFixed(0)} % of prior)`;
      }
    }
    const meta = META[name] ?? {
      label: `per-call all-reduce change for ${name.slice(4)} vs baseline`,
      unit: "µs",
      digits: 1,
    };
    return {
      name,
      label: meta.label,
      unit: meta.unit,
      digits: meta.digits,
      prior: prior[j],
      priorFrom: ["invEta", "invEtaExperts", "fixedMs"].includes(name)
        ? cp.source
        : name === "hostMs"
          ? hostPrior.from
          : ["arLatUs", "skewUs"].includes(name) && ar
            ? `collectives model × the corpus's fitted link factor ×${cp.arFactor.mean.toFixed(2)} (${cp.source})`
            : name.startsWith("dAR:")
              ? "the collectives model's difference for this variant"
              : "reference range",
      posterior: { mean: theta[j], sd },
      pinned,
      why,
    };
  });
  const notPinned = parameters.filter((p) => !p.pinned).map((p) => p.name);

  // ---- calibration for predict()
  const par = (name: CalibParam) => {
    const j = names.indexOf(name);
    return { mean: theta[j], sd: Math.sqrt(Math.max(0, cov[j][j])) };
  };
  const calibration: FullCalibration = {
    params: {
      invEta: par("invEta"),
      ...(iExp >= 0 ? { invEtaExperts: par("invEtaExperts") } : {}),
      arLatUs: par("arLatUs"),
      arUsPerKB: par("arUsPerKB"),
      skewUs: par("skewUs"),
      fixedMs: iHost >= 0 ? sumOf(cov, theta, names.indexOf("fixedMs"), iHost) : par("fixedMs"),
      prefillScale: par("prefillScale"),
    },
    ...(iHost >= 0 ? { hostMs: { mean: theta[iHost], sd: Math.sqrt(Math.max(0, cov[iHost][iHost])) } } : {}),
    source: `model fit on ${used} measurement(s)`,
    measuredBandwidthGBs: ref.measured ? ref.gbs : undefined,
    baseline: { arModelUs: arModelBase, arKey: baseKey },
    arVariants: [...variantIndex.entries()].map(([key, v]) => ({
      key,
      variant: v.variant,
      deltaUs: { mean: theta[v.idx], sd: Math.sqrt(Math.max(0, cov[v.idx][v.idx])) },
    })),
  };
  if (!ar) {
    delete calibration.params.arLatUs;
    delete calibration.params.arUsPerKB;
    delete calibration.params.skewUs;
  }
  const prediction = predictResolved(resolve({ ...input, calibration }));

  // ---- derived arithmetic (seed-scenario.md §3) and consistency
  const derived: Derived[] = [];
  const n = cc.perToken;
  for (const m of abs) {
    const delta = m.deltaMsPerToken ?? ((m.bTotalS! - m.aTotalS!) * 1000) / m.tokens!;
    const aName = describeVariant(m.variantA);
    const bName = describeVariant(m.variantB);
    const perCall = (delta * 1000) / n;
    const perCallPlus = (delta * 1000) / (n + cc.embedding);
    const totals =
      m.aTotalS !== undefined && m.bTotalS !== undefined && m.tokens
        ? ` = (${m.bTotalS} − ${m.aTotalS} s) / ${m.tokens} tokens`
        : "";
    derived.push({
      name: "ab-per-call",
      label: `A/B ${bName} vs ${aName}`,
      text: `saving per token ${delta.toFixed(2)} ms${totals}; per all-reduce ${delta.toFixed(2)} ms / ${n} = ${perCall.toFixed(1)} µs (${perCallPlus.toFixed(1)} µs if ${n + cc.embedding} calls, counting the embedding all-reduce).`,
      values: {
        deltaMsPerToken: round3(delta),
        perCallUs: round3(perCall),
        perCallUsWithEmbedding: round3(perCallPlus),
        calls: n,
      },
    });
    if (m.aTotalS !== undefined && m.bTotalS !== undefined && m.tokens) {
      const N = m.tokens;
      const ttft = facts.ttftMs;
      const arm = (t: number) => ({
        per: (t * 1000) / N,
        perNoTtft: ttft !== undefined ? (t * 1000 - ttft) / (N - 1) : undefined,
        rate: N / t,
      });
      const A = arm(m.aTotalS);
      const B = arm(m.bTotalS);
      derived.push({
        name: "ab-arms",
        label: "A/B arms per token",
        text: `${aName} arm ${A.per.toFixed(1)} ms/token${A.perNoTtft !== undefined ? ` (${A.perNoTtft.toFixed(1)} ms without TTFT)` : ""}, ${A.rate.toFixed(1)} tok/s; ${bName} arm ${B.per.toFixed(1)} ms/token${B.perNoTtft !== undefined ? ` (${B.perNoTtft.toFixed(1)} ms without TTFT)` : ""}, ${B.rate.toFixed(1)} tok/s. Assumes TTFT equal in both arms (prefill also runs ${n} all-reduces, with larger messages).`,
        values: {
          aMsPerToken: round3(A.per),
          bMsPerToken: round3(B.per),
          aTokPerS: round3(A.rate),
          bTokPerS: round3(B.rate),
        },
      });
      if (facts.itlMs !== undefined) {
        const itl = facts.itlMs;
        const dA = Math.min(
          Math.abs(itl - A.per),
          A.perNoTtft !== undefined ? Math.abs(itl - A.perNoTtft) : Number.POSITIVE_INFINITY,
        );
        const dB = Math.min(
          Math.abs(itl - B.per),
          B.perNoTtft !== undefined ? Math.abs(itl - B.perNoTtft) : Number.POSITIVE_INFINITY,
        );
        const keyA = arKey(resolve(applyVariant(input, m.variantA)));
        const keyB = arKey(resolve(applyVariant(input, m.variantB)));
        const closer = dA <= dB ? "A" : "B";
        const closerName = closer === "A" ? aName : bName;
        const otherName = closer === "A" ? bName : aName;
        const closerIsBaseline = (closer === "A" ? keyA : keyB) === baseKey;
        const tN = ttft !== undefined ? (ttft + (N - 1) * itl) / 1000 : undefined;
        const arms = (x: typeof A) =>
          `${x.per.toFixed(1)} ms${x.perNoTtft !== undefined ? `; ${x.perNoTtft.toFixed(1)} without TTFT` : ""}`;
        if (closerIsBaseline)
          consistency.push(
            `Consistent: the baseline ITL ${itl} ms matches the ${closerName} arm, which is the baseline configuration.`,
          );
        else
          consistency.push(
            `Inconsistency: the baseline ITL ${itl} ms${tN !== undefined ? ` predicts T(${N}) = ${tN.toFixed(2)} s` : ""}, which matches the ${closerName} arm (${arms(closer === "A" ? A : B)}), not the ${otherName} arm (${arms(closer === "A" ? B : A)}) — although the baseline is recorded as the ${describeVariant({ ncclProto: input.ncclProto, ncclAlgo: input.ncclAlgo })} configuration. Either the baseline figures were taken on a ${closerName}-configured server, or the ${otherName} arm differed in something else (server start, warm-up, clocks). Attach the full configuration (environment, flags, versions, server start id) to every number.`,
          );
      }
    }
  }
  if (facts.itlMs !== undefined && n > 0 && facts.shareLow !== undefined && facts.shareHigh !== undefined) {
    const itl = facts.itlMs;
    for (const s of [facts.shareLow, facts.shareHigh]) {
      const t = s * itl;
      derived.push({
        name: "share-per-call",
        label: `all-reduce share ${(100 * s).toFixed(0)} %`,
        text: `${(100 * s).toFixed(0)} % of ${itl} ms = ${t.toFixed(2)} ms of all-reduce per token → ${((t * 1000) / n).toFixed(1)} µs per call (÷ ${n}); rest of the token ${(itl - t).toFixed(2)} ms.`,
        values: { share: s, allReduceMs: round3(t), perCallUs: round3((t * 1000) / n), restMs: round3(itl - t) },
      });
    }
  }
  if (ar && ar.implementation === "nccl") {
    facts.isolatedModelUs = ar.candidates
      ?.filter((c) => c.enabled)
      .sort((a, b) => a.latencyUs - b.latencyUs)[0]?.latencyUs;
    facts.isolatedMeasuredUs = measuredLatency(r.gpu.id, "nccl", r.tp, cc.bytesEach)?.us;
    if (facts.itlMs !== undefined && facts.shareLow !== undefined && facts.shareHigh !== undefined) {
      const lo = (facts.shareLow * facts.itlMs * 1000) / n;
      const hi = (facts.shareHigh * facts.itlMs * 1000) / n;
      const parts: string[] = [];
      if (facts.isolatedMeasuredUs)
        parts.push(
          `${(lo / facts.isolatedMeasuredUs).toFixed(1)}–${(hi / facts.isolatedMeasuredUs).toFixed(1)}× the isolated ${r.tp}-GPU NCCL measurement on this GPU (${facts.isolatedMeasuredUs.toFixed(1)} µs)`,
        );
      if (facts.isolatedModelUs)
        parts.push(
          `${(lo / facts.isolatedModelUs).toFixed(1)}–${(hi / facts.isolatedModelUs).toFixed(1)}× NCCL's LL model (${facts.isolatedModelUs.toFixed(1)} µs)`,
        );
      derived.push({
        name: "share-vs-isolated",
        label: "implied per-call cost vs isolated",
        text: `${lo.toFixed(1)}–${hi.toFixed(1)} µs per call is ${parts.join(" and ")}. Candidates for the excess: some calls on Simple, rank skew (profiled medians 2–5× minima), host gaps counted as all-reduce time.`,
        values: { lowUs: round3(lo), highUs: round3(hi) },
      });
    }
    const lat = ar.candidates ?? [];
    const ring = (p: string) => lat.find((c) => c.algorithm === "Ring" && c.protocol === p)?.latencyUs;
    const tree = (p: string) => lat.find((c) => c.algorithm === "Tree" && c.protocol === p)?.latencyUs;
    const sR = ring("Simple");
    const lR = ring("LL");
    const sT = tree("Simple");
    const lT = tree("LL");
    if (sR && lR && sT && lT)
      derived.push({
        name: "nccl-gap",
        label: "modelled Simple − LL gap",
        text: `NCCL's model puts Simple − LL at ${(sT - lT).toFixed(1)} µs (Tree) / ${(sR - lR).toFixed(1)} µs (Ring) per call at n = ${r.tp}; a measured saving below that means only part of the calls changed protocol, or the constants misfit this platform.`,
        values: { treeGapUs: round3(sT - lT), ringGapUs: round3(sR - lR) },
      });
  }
  // Weight-streaming floor per precision assumption.
  const floorBw = facts.bandwidthGBs ?? ref.gbs;
  const family = r.recipe.name.startsWith("nvfp4") ? ["nvfp4-all", "nvfp4", "nvfp4-routed"] : [r.recipe.name];
  for (const name of family) {
    try {
      const rr = resolve({ ...input, quant: name, batch: 1, calibration: undefined });
      const exp = rr.arch.moe ? expertsOnBusiestDevice(rr.arch.moe.experts, rr.arch.moe.topk, 1, rr.ep).mid : 0;
      const bytes = decodeLoads(rr, exp, 1, 0)
        .filter((l) => l.group !== "kv" && l.group !== "attentionCore")
        .reduce((s, l) => s + l.bytes, 0);
      facts.floors.push({
        recipe: name,
        description: rr.recipe.description,
        GB: bytes / 1e9,
        ms: bytes / (floorBw * 1e6),
      });
    } catch {
      // a GGUF-only recipe without a file: no floor row
    }
  }
  if (facts.floors.length)
    derived.push({
      name: "weight-floor",
      label: `weight-streaming floor at ${floorBw} GB/s${facts.bandwidthGBs ? " (measured)" : " (spec)"}, batch 1, TP ${r.tp}`,
      text: facts.floors.map((f) => `${f.ms.toFixed(1)} ms (${f.GB.toFixed(2)} GB: ${f.description})`).join(" · "),
      values: Object.fromEntries(facts.floors.map((f) => [f.recipe, round3(f.ms)])),
    });
  const pinnedNames = parameters.filter((p) => p.pinned).map((p) => p.name);
  const summary = `${rows.length} fitted row(s); pinned: ${pinnedNames.length ? pinnedNames.join(", ") : "none"}; not pinned: ${notPinned.length ? notPinned.join(", ") : "none"}. Calibrated decode step ${prediction.decode.stepMs.mid.toFixed(2)} ms (${prediction.decode.stepMs.low.toFixed(2)}–${prediction.decode.stepMs.high.toFixed(2)}).`;
  return {
    kind: "inferscope.model.fit",
    measurementsUsed: used,
    parameters,
    calibration,
    residuals,
    derived,
    consistency,
    notPinned,
    summary,
    facts,
    prediction,
  };
}

/** Mean and sd of θ_a + θ_b under the posterior covariance. */
function sumOf(cov: number[][], theta: number[], a: number, b: number): { mean: number; sd: number } {
  return { mean: theta[a] + theta[b], sd: Math.sqrt(Math.max(0, cov[a][a] + cov[b][b] + 2 * cov[a][b])) };
}

/**
 * The engine's host time per step as the uncalibrated model has it (its `engine` term, 80 % range), as a prior: an
 * engine that overlaps its host work with the device has none in the step; the sd is at least half the engine's
 * reference high, so a measurement can move it.
 */
function hostTermPrior(r: Resolved): { mean: number; sd: number; from: string } {
  const ec = ENGINE_CONSTANTS[r.engine];
  const t = predictResolved(r).decode.terms.find((x) => x.name === "engine");
  const ms = t?.ms ?? { low: 0, mid: 0, high: 0 };
  return {
    mean: ms.mid,
    sd: Math.max((ms.high - ms.low) / 2.563, ec.engineMs.high / 2),
    from: `the model's engine term for ${r.engine} (${r.hostOverlap.overlap ? `host overlapped: ${r.hostOverlap.why}` : "host serial"}; reference ${ec.engineMs.low}–${ec.engineMs.high} ms)`,
  };
}

/** The spans' queue wait beside the workload schedule's at the same concurrency (no parameter moves the queue). */
function queueConsistency(
  input: ModelInput,
  r: Resolved,
  m: Measurement & { kind: "server-split" },
  from: string,
): string {
  const q = m.queueMs!;
  const c = m.concurrency ?? 1;
  const inLen = m.inputLen ?? r.inputLen;
  const outLen = m.outputLen ?? r.outputLen;
  const len = (mean: number) => ({ mean, sd: 0, source: "the measurement" });
  const ci = q.ci ? ` [${q.ci[0].toFixed(3)}, ${q.ci[1].toFixed(3)}]` : "";
  try {
    const w = predictWorkload(
      { ...input, calibration: undefined },
      { concurrency: c, inputLen: len(inLen), outputLen: len(outLen), requests: Math.max(50, 10 * c) },
    );
    const d = q.value - w.meanQueueMs;
    return `Queue (${from}): ${q.value.toFixed(3)} ms${ci} per request at concurrency ${c}; the model's workload schedule (${inLen} → ${outLen} tokens) puts it at ${w.meanQueueMs.toFixed(3)} ms: the engine queued ${Math.abs(d).toFixed(3)} ms ${d >= 0 ? "more" : "less"} than modelled (no fitted parameter carries the queue).`;
  } catch (err) {
    return `Queue (${from}): ${q.value.toFixed(3)} ms${ci} per request at concurrency ${c}; the workload schedule could not be run: ${(err as Error).message}`;
  }
}

function round3(x: number): number {
  return Math.round(x * 1000) / 1000;
}

/** Gauss–Jordan inverse with partial pivoting (K ≤ a dozen). */
export function invert(m: number[][]): number[][] {
  const n = m.length;
  const a = m.map((row, i) => [...row, ...Array.from({ length: n }, (_, j) => (i === j ? 1 : 0))]);
  for (let c = 0; c < n; c++) {
    let p = c;
    for (let r = c + 1; r < n; r++) if (Math.abs(a[r][c]) > Math.abs(a[p][c])) p = r;
    if (Math.abs(a[p][c]) < 1e-300) throw new Error("singular matrix in fit");
    [a[c], a[p]] = [a[p], a[c]];
    const d = a[c][c];
    for (let j = 0; j < 2 * n; j++) a[c][j] /= d;
    for (let r = 0; r < n; r++) {
      if (r === c) continue;
      const f = a[r][c];
      if (f === 0) continue;
      for (let j = 0; j < 2 * n; j++) a[r][j] -= f * a[c][j];
    }
  }
  return a.map((row) => row.slice(n));
}
