// What the analytical model predicts for each tune candidate: the candidate's knobs become model
// inputs where the model represents them (NCCL protocol/algorithm, CUDA graphs, custom all-reduce,
// speculative tokens, TP, CPU threads); knobs it does not represent keep the baseline's prediction
// and get a wide prior, so only measurements can move them.
import type { ModelInput } from "../model/index.ts";
import { predict } from "../model/predict.ts";
import type { Candidate, KnobSpec } from "./knobs.ts";
import type { SurrogatePriors } from "./surrogate.ts";

export type Objective = "tpot" | "ttft" | "throughput-at-slo";

export const OBJECTIVES: Record<Objective, { label: string; unit: string; lowerIsBetter: boolean; define: string }> = {
  tpot: {
    label: "per-token decode time (TPOT)",
    unit: "ms/token",
    lowerIsBetter: true,
    define: "mean over the block's requests of (E2EL − TTFT)/(n − 1), vLLM's TPOT",
  },
  ttft: {
    label: "time to first token (TTFT)",
    unit: "ms",
    lowerIsBetter: true,
    define: "mean over the block's requests of first content chunk − send, vLLM's TTFT",
  },
  "throughput-at-slo": {
    label: "goodput (output tokens/s of requests that meet the SLO)",
    unit: "tok/s",
    lowerIsBetter: false,
    define:
      "output tokens of the block's requests whose TTFT and TPOT meet every --slo bound, ÷ the block's wall time (vLLM's --goodput, in tokens)",
  },
};

/** Expected tokens per speculative step with k drafts at per-token acceptance a: Σ_{i=0..k} aⁱ. */
export function tokensPerStep(k: number, a: number): number {
  if (k <= 0) return 1;
  return a >= 1 ? k + 1 : (1 - a ** (k + 1)) / (1 - a);
}

/** Prior sd (log) of the effect of a knob the model does not represent. */
const UNKNOWN_SD = 2;

// Without a measurement the acceptance is unknown; MTP/EAGLE drafts commonly accept 0.6–0.8 per token.
const ACCEPTANCE_GUESS = 0.7;

interface Mapping {
  change: Partial<ModelInput>;
  /** Prior sd of the model's error on this knob's effect (log). */
  sd: number;
  note?: string;
}

/** How the model represents one knob value; null when it does not. */
export function mapKnobValue(k: KnobSpec, value: string | null): Mapping | null {
  const on = value !== null;
  switch (k.name) {
    case "NCCL_PROTO":
      return { change: { ncclProto: on && /^(LL|LL128|Simple)$/i.test(value) ? value : undefined }, sd: 0.1 };
    case "NCCL_ALGO":
      return { change: { ncclAlgo: on && /^(Ring|Tree)$/i.test(value) ? value : undefined }, sd: 0.1 };
    case "--enforce-eager":
    case "--disable-cuda-graph":
      return { change: { cudaGraphs: !on }, sd: 0.15 };
    case "--disable-custom-all-reduce":
      return { change: { customAllReduce: on ? false : undefined }, sd: 0.1 };
    case "--spec-tokens":
    case "--num-speculative-tokens":
    case "--speculative-num-steps": {
      const n = on ? Number(value === "" ? 1 : value) : 0;
      if (!(Number.isInteger(n) && n >= 0)) return null;
      return {
        change: { tokensPerStep: tokensPerStep(n, ACCEPTANCE_GUESS) },
        // The acceptance rate is unknown and the model has no draft cost: a wide prior.
        sd: n === 0 ? 0.05 : 0.3,
        note: `${k.name}: acceptance ${ACCEPTANCE_GUESS} per token assumed, draft cost not modelled`,
      };
    }
    case "--tensor-parallel-size":
    case "--tp":
    case "--tp-size":
    case "-tp": {
      const n = Number(value);
      return on && Number.isInteger(n) && n >= 1 ? { change: { tp: n }, sd: 0.15 } : null;
    }
    default:
      return null;
  }
}

export interface CandidatePrediction {
  /** The model's objective for the candidate (80 % interval), in the objective's unit; null without a model. */
  value: { estimate: number; low: number; high: number } | null;
  /** log scale, lower is better (the surrogate's m_c). */
  m: number;
  error?: string;
}

export interface ModelPlan {
  available: boolean;
  /** Why the model cannot predict, when it cannot. */
  reason: string | null;
  predictions: CandidatePrediction[];
  priors: SurrogatePriors;
  /** Knobs the model does not represent (their effects come from measurements only). */
  unmapped: string[];
  notes: string[];
}

export interface Load {
  inputLen: number;
  outputLen: number;
  concurrency: number;
}

function objectiveOf(input: ModelInput, o: Objective, load: Load): { estimate: number; low: number; high: number } {
  const p = predict(input);
  if (o === "ttft") return { estimate: p.prefill.ttftMs.mid, low: p.prefill.ttftMs.low, high: p.prefill.ttftMs.high };
  const tps = p.decode.tokensPerSecond;
  if (o === "tpot") return { estimate: 1000 / tps.mid, low: 1000 / tps.high, high: 1000 / tps.low };
  const c = load.concurrency;
  return { estimate: tps.mid * c, low: tps.low * c, high: tps.high * c };
}

/** Predictions for every candidate, and the surrogate's priors that follow from them. */
export function planModel(
  base: ModelInput | null,
  why: string | null,
  knobs: KnobSpec[],
  cands: Candidate[],
  objective: Objective,
  load: Load,
): ModelPlan {
  const lower = OBJECTIVES[objective].lowerIsBetter;
  const unmapped = knobs.filter((k) => k.values.some((v) => mapKnobValue(k, v.value) === null)).map((k) => k.name);
  const knobSd = knobs.map((k) => {
    // Nothing is known of its effect: a prior this wide lets one measurement speak for itself (a
    // thread count past the free cores can cost 50×), and never splits one candidate's surprise
    // over knobs that were not measured alone.
    if (unmapped.includes(k.name) || !base) return UNKNOWN_SD;
    return Math.max(...k.values.map((v) => mapKnobValue(k, v.value)?.sd ?? 0.5));
  });
  const notes = new Set<string>();
  if (!base)
    return {
      available: false,
      reason: why ?? "no model input",
      predictions: cands.map(() => ({ value: null, m: 0 })),
      priors: { bias: 10, knob: knobSd, interaction: 0.1, tau0: 0.05, nu0: 2 },
      unmapped,
      notes: [],
    };
  const input: ModelInput = {
    ...base,
    batch: load.concurrency,
    inputLen: load.inputLen,
    outputLen: load.outputLen,
    contextLen: load.inputLen + Math.round(load.outputLen / 2),
  };
  let baseSd = 0.3;
  const predictions = cands.map((c): CandidatePrediction => {
    let inp: ModelInput = { ...input };
    for (const k of knobs) {
      const label = c.settings[k.name];
      const v = k.values.find((x) => x.label === label);
      if (!v) continue;
      const m = mapKnobValue(k, v.value);
      if (m) {
        inp = { ...inp, ...m.change };
        if (m.note && v.value !== null) notes.add(m.note);
      }
    }
    try {
      const value = objectiveOf(inp, objective, load);
      const m = lower ? Math.log(value.estimate) : -Math.log(value.estimate);
      if (c.id === "c0") baseSd = Math.max(0.05, (Math.log(value.high) - Math.log(value.low)) / (2 * 1.2816));
      return { value, m };
    } catch (err) {
      return { value: null, m: Number.NaN, error: (err as Error).message };
    }
  });
  // A candidate the model cannot describe gets the baseline's prediction (its knobs' priors stay wide).
  const m0 = predictions[0]!.m;
  for (const p of predictions) if (!Number.isFinite(p.m)) p.m = Number.isFinite(m0) ? m0 : 0;
  // A knob's correction is as uncertain as the model is about that change alone: the part of the
  // single-change candidate's interval that the baseline's does not already carry.
  const logSd = (p: CandidatePrediction) =>
    p.value ? (Math.log(p.value.high) - Math.log(p.value.low)) / (2 * 1.2816) : Number.NaN;
  const s0 = logSd(predictions[0]!);
  knobs.forEach((k, ki) => {
    if (knobSd[ki]! >= UNKNOWN_SD) return;
    for (let lv = 1; lv < k.values.length; lv++) {
      const i = cands.findIndex((c) =>
        knobs.every((kk, j) => c.settings[kk.name] === kk.values[j === ki ? lv : 0]!.label),
      );
      const sc = i >= 0 ? logSd(predictions[i]!) : Number.NaN;
      if (Number.isFinite(sc) && Number.isFinite(s0))
        knobSd[ki] = Math.min(0.5, Math.max(knobSd[ki]!, Math.sqrt(Math.max(0, sc ** 2 - s0 ** 2))));
    }
  });
  for (const u of unmapped) notes.add(`${u}: the model has no term for it, so its effect comes from measurements only`);
  return {
    available: Number.isFinite(m0),
    reason: Number.isFinite(m0) ? null : (predictions[0]!.error ?? "the model failed on the baseline"),
    predictions,
    priors: {
      bias: baseSd,
      knob: knobSd,
      interaction: unmapped.length ? 0.1 : 0.03,
      tau0: 0.05,
      nu0: 2,
    },
    unmapped,
    notes: [...notes],
  };
}
