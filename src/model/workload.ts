// What a serving benchmark measures: TPOT, ITL and TTFT under continuous batching with chunked prefill, for a
// closed loop of C clients (`--concurrency`) or Poisson arrivals (`--request-rate`). Pure: a step-level schedule
// driven by the fitted step model (the decode step at the batch, plus the prefill chunks riding in it).
//
// Definitions follow vLLM's bench serve (docs/metrics.md): TPOT per request = (E2EL − TTFT)/(n − 1), mean over
// requests; ITL = every gap between consecutive tokens, pooled; TTFT from the send to the first token.

import { InputError } from "../errors.ts";
import type { LengthDist, Schedule, StepCostFn, WorkloadSpec } from "./batching.ts";
import { INTAKE_MS, schedulerDefaults, simulateSchedule } from "./batching.ts";
import { supportInflation } from "./cv.ts";
import { corpusFit, predictive } from "./priors.ts";
import type { Range } from "./range.ts";
import { round, roundRange } from "./range.ts";
import type { ModelInput } from "./resolve.ts";
import { resolve } from "./resolve.ts";
import { mixedStepParts } from "./serving.ts";

export type {
  LengthDist,
  Schedule,
  ScheduledRequest,
  SchedulerDefaults,
  ScheduleStep,
  StepCostFn,
  WorkloadSpec,
} from "./batching.ts";
export { schedulerDefaults, simulateSchedule } from "./batching.ts";

// ---------------------------------------------------------------- the step cost

/**
 * The fitted step model over a mixed batch: weights streamed once for all B + T tokens (FLOPs, experts touched,
 * all-reduce bytes at B + T), the decodes' KV reads, and the chunk's attention over its prefix (read once).
 */
export function stepCostModel(input: ModelInput): StepCostFn {
  const memo = new Map<string, Range>();
  const f = corpusFit();
  // The deployment's out-of-support widening and interval calibration, as predict() applies them (cv.ts).
  const widen = supportInflation(resolve(input), f);
  return (B, T, decCtx, prefix) => {
    const dc = B > 0 ? Math.max(1, Math.round(decCtx / 16) * 16) : 0;
    const pc = T > 0 ? Math.round(prefix / 64) * 64 : 0;
    const key = `${B}|${T}|${dc}|${pc}`;
    const hit = memo.get(key);
    if (hit) return hit;
    const { sp } = mixedStepParts(input, B, T, dc, pc);
    const pr = predictive(f, sp, true, widen);
    const out = { low: pr.low80, mid: pr.ms, high: pr.high80 };
    memo.set(key, out);
    return out;
  };
}

// ---------------------------------------------------------------- metrics as bench serve computes them

/** numpy.percentile with linear interpolation. */
export function percentile(xs: number[], p: number): number {
  if (!xs.length) return 0;
  const s = [...xs].sort((a, b) => a - b);
  const pos = (p / 100) * (s.length - 1);
  const lo = Math.floor(pos);
  const hi = Math.min(s.length - 1, lo + 1);
  return s[lo] + (s[hi] - s[lo]) * (pos - lo);
}

const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0);

export interface ScheduleMetrics {
  tpot: number[];
  itl: number[];
  ttft: number[];
}

/** TPOT, ITL and TTFT samples from a schedule, on the timeline of the chosen step durations. */
export function scheduleMetrics(s: Schedule, which: keyof Range | "pure"): ScheduleMetrics {
  const dur = s.steps.map((x) => (which === "pure" ? x.pureMs.mid : x.ms[which]));
  const end: number[] = [];
  let acc = 0;
  for (const d of dur) end.push((acc += d));
  // Map the mid timeline's idle gaps onto this one: a step starts at max(previous end, the mid start shifted).
  const tpot: number[] = [];
  const itl: number[] = [];
  const ttft: number[] = [];
  for (const r of s.requests) {
    const ts = r.tokenSteps.map((i) => end[i]);
    if (!ts.length) continue;
    // TTFT: intake plus the steps from the one the request joined to its first token, plus any idle wait before.
    const first = r.tokenSteps[0];
    const midStart = s.stepEndMs[first] - s.steps[first].ms.mid;
    const joinedMid = Math.max(0, midStart - (r.sentMs + r.intakeMs));
    // (joinedMid includes any wait for the intake of requests sent just before this one.)
    const firstDur = dur[first];
    ttft.push(
      r.intakeMs + joinedMid * (which === "mid" || which === "pure" ? 1 : firstDur / s.steps[first].ms.mid) + firstDur,
    );
    for (let i = 1; i < ts.length; i++) itl.push(ts[i] - ts[i - 1]);
    if (ts.length > 1) tpot.push((ts[ts.length - 1] - ts[0]) / (ts.length - 1));
  }
  return { tpot, itl, ttft };
}

/**
 * Each request's engine queue wait on the mid timeline (vLLM's time_in_queue: ready → first scheduled): from its
 * arrival at the scheduler (send + intake, as the TTFT above) to the start of the first step that carried its prompt,
 * a prompt over the token budget taking ⌈length ÷ budget⌉ steps before its first token.
 */
export function queueWaits(s: Schedule, budget: number): number[] {
  const out: number[] = [];
  for (const r of s.requests) {
    if (!r.tokenSteps.length) continue;
    const first = Math.max(0, r.tokenSteps[0] - (Math.ceil(r.inputLen / Math.max(1, budget)) - 1));
    const start = s.stepEndMs[first] - s.steps[first].ms.mid;
    out.push(Math.max(0, start - (r.sentMs + r.intakeMs)));
  }
  return out;
}

export interface WorkloadPrediction {
  mode: "concurrency" | "request-rate";
  concurrency?: number;
  requestRate?: number;
  inputLen: { mean: number; sd: number; source: string };
  outputLen: { mean: number; sd: number; source: string };
  maxNumBatchedTokens: number;
  maxNumSeqs: number;
  schedulerSource: string;
  requestsSimulated: number;
  meanTpotMs: Range;
  p99TpotMs: Range;
  meanItlMs: Range;
  p99ItlMs: Range;
  ttftMs: Range;
  p99TtftMs: Range;
  /** Mean engine queue wait per request (queueWaits), ms, on the mid timeline. */
  meanQueueMs: number;
  /** Mean TPOT on the same schedule with every prefill chunk removed from the decode steps. */
  pureDecodeTpotMs: number;
  /** Mean decodes per decode step. */
  steadyBatch: number;
  decodeSteps: number;
  stepsWithPrefill: number;
  /** stepsWithPrefill / decodeSteps. */
  prefillShare: number;
  /** Mean extra time of a decode step that carries prefill chunks, ms. */
  prefillExtraMs: number;
  meanPrefillTokensPerStepWithPrefill: number;
  summary: string;
  formula: string;
  assumptions: string[];
}

function range3(f: (w: keyof Range) => number): Range {
  const [l, m, h] = (["low", "mid", "high"] as const).map(f);
  return { low: Math.min(l, h), mid: m, high: Math.max(l, h) };
}

/** Predicts what a serving benchmark reports for this deployment under the workload. */
export function predictWorkload(input: ModelInput, spec: WorkloadSpec): WorkloadPrediction {
  if (!spec.concurrency && !spec.requestRate)
    throw new InputError("a workload needs --concurrency C or --request-rate R");
  if (spec.concurrency !== undefined && (!Number.isInteger(spec.concurrency) || spec.concurrency < 1))
    throw new InputError(`--concurrency expects a whole number ≥ 1 (got ${spec.concurrency})`);
  const r = resolve(input);
  const budget = schedulerDefaults(r);
  const cost = stepCostModel(input);
  const s = simulateSchedule(spec, budget, cost);
  const m = { low: scheduleMetrics(s, "low"), mid: scheduleMetrics(s, "mid"), high: scheduleMetrics(s, "high") };
  const pure = scheduleMetrics(s, "pure");
  const decodeSteps = s.steps.filter((x) => x.decodes > 0);
  const withPrefill = decodeSteps.filter((x) => x.prefillTokens > 0);
  const extra = mean(withPrefill.map((x) => x.ms.mid - x.pureMs.mid));
  const share = decodeSteps.length ? withPrefill.length / decodeSteps.length : 0;
  const meanTpot = range3((w) => mean(m[w].tpot));
  const pureTpot = mean(pure.tpot);
  const chunk = spec.maxNumBatchedTokens ?? budget.maxNumBatchedTokens;
  const maxSeqs = spec.maxNumSeqs ?? budget.maxNumSeqs;
  const summary = `prefill chunks ride in ${(100 * share).toFixed(1)} % of decode steps, +${extra.toFixed(2)} ms each: mean TPOT ${meanTpot.mid.toFixed(2)} ms vs pure decode ${pureTpot.toFixed(2)} ms (steady batch ${mean(decodeSteps.map((x) => x.decodes)).toFixed(1)})`;
  const lenDesc = (d: LengthDist) => ({ mean: round(d.mean, 1), sd: round(d.sd, 1), source: d.source });
  return {
    mode: spec.requestRate ? "request-rate" : "concurrency",
    concurrency: spec.concurrency,
    requestRate: spec.requestRate,
    inputLen: lenDesc(spec.inputLen),
    outputLen: lenDesc(spec.outputLen),
    maxNumBatchedTokens: chunk,
    maxNumSeqs: maxSeqs,
    schedulerSource: spec.maxNumBatchedTokens ? "given" : budget.source,
    requestsSimulated: s.requests.length,
    meanTpotMs: roundRange(meanTpot, 4),
    p99TpotMs: roundRange(
      range3((w) => percentile(m[w].tpot, 99)),
      4,
    ),
    meanItlMs: roundRange(
      range3((w) => mean(m[w].itl)),
      4,
    ),
    p99ItlMs: roundRange(
      range3((w) => percentile(m[w].itl, 99)),
      4,
    ),
    ttftMs: roundRange(
      range3((w) => mean(m[w].ttft)),
      4,
    ),
    p99TtftMs: roundRange(
      range3((w) => percentile(m[w].ttft, 99)),
      4,
    ),
    meanQueueMs: round(mean(queueWaits(s, chunk)), 4),
    pureDecodeTpotMs: round(pureTpot, 4),
    steadyBatch: round(mean(decodeSteps.map((x) => x.decodes)), 3),
    decodeSteps: decodeSteps.length,
    stepsWithPrefill: withPrefill.length,
    prefillShare: round(share, 4),
    prefillExtraMs: round(extra, 4),
    meanPrefillTokensPerStepWithPrefill: round(mean(withPrefill.map((x) => x.prefillTokens)), 1),
    summary,
    formula:
      "step(B, T) = fitted step model with weights and FLOPs for B + T tokens, KV reads of the B decodes, attention of the T-token chunk over its prefix; TPOT = (last − first token)/(n − 1) per request; ITL = every gap; TTFT = intake + wait + steps to the first token",
    assumptions: [
      `continuous batching with chunked prefill: every decode first, then prompt tokens in arrival order up to ${chunk} tokens per step (${spec.maxNumBatchedTokens ? "given" : budget.source}); at most ${maxSeqs >= 1 << 20 ? "unlimited" : maxSeqs} sequences`,
      `request intake (HTTP, tokenize) uniform ${INTAKE_MS.low}–${INTAKE_MS.high} ms per request, one at a time (one API-server process), seeded: it staggers simultaneous sends over steps`,
      spec.requestRate
        ? `Poisson arrivals at ${spec.requestRate} req/s${spec.concurrency ? `, at most ${spec.concurrency} in flight` : ""}`
        : `closed loop: ${spec.concurrency} clients, each sends its next request when the previous ends (bench serve --max-concurrency with many prompts)`,
      `${s.requests.length} requests simulated (deterministic seed ${spec.seed ?? 1}); the ramp-up and ramp-down are included, as in a benchmark`,
      "the range is the decode model's 80 % interval carried along the same schedule (fully correlated across steps)",
      "no prefix caching, no preemption, no speculative decoding",
      ...(input.calibration
        ? ["the schedule's step costs come from the corpus fit: --calibration is not applied to the workload (yet)"]
        : []),
    ],
  };
}

// ---------------------------------------------------------------- lengths from a file

/**
 * Lengths from a file's text: a `bench --save-result` / vLLM result JSON (`input_lens`, `output_lens`), JSONL
 * records with input_length/output_length (Mooncake), or CSV with ContextTokens/GeneratedTokens (Azure) or
 * input_len/output_len columns.
 */
export function parseLengths(text: string, file: string): { input: LengthDist; output: LengthDist } {
  const fromPairs = (ins: number[], outs: number[], how: string) => {
    if (!ins.length || ins.length !== outs.length)
      throw new InputError(`${file}: no input/output length pairs found (${how})`);
    const stat = (xs: number[]) => {
      const mu = mean(xs);
      return { mean: mu, sd: Math.sqrt(mean(xs.map((x) => (x - mu) ** 2))) };
    };
    const src = `${file} (${ins.length} requests, ${how})`;
    return {
      input: { ...stat(ins), samples: ins, source: src },
      output: { ...stat(outs), samples: outs, source: src },
    };
  };
  const t = text.trim();
  if (t.startsWith("{")) {
    // One JSON document with input_lens/output_lens, else JSON lines.
    let j: any;
    try {
      j = JSON.parse(t);
    } catch {
      j = undefined;
    }
    if (j && (j.input_lens !== undefined || j.output_lens !== undefined || !("input_length" in j))) {
      const ins = j.input_lens ?? j.inputLens;
      const outs = j.output_lens ?? j.outputLens;
      if (!Array.isArray(ins) || !Array.isArray(outs))
        throw new InputError(`${file}: a JSON lengths file needs "input_lens" and "output_lens" arrays`);
      return fromPairs(ins.map(Number), outs.map(Number), "input_lens/output_lens");
    }
  }
  const lines = t.split(/\r?\n/);
  if (lines[0].startsWith("{")) {
    const ins: number[] = [];
    const outs: number[] = [];
    lines.forEach((line, i) => {
      if (!line.trim()) return;
      let o: any;
      try {
        o = JSON.parse(line);
      } catch (e) {
        throw new InputError(`${file}:${i + 1}: not valid JSON (${(e as Error).message})`);
      }
      const a = o.input_length ?? o.input_len ?? o.prompt_len;
      const b = o.output_length ?? o.output_len;
      if (!Number.isFinite(a) || !Number.isFinite(b))
        throw new InputError(`${file}:${i + 1}: needs input_length and output_length numbers`);
      ins.push(a);
      outs.push(b);
    });
    return fromPairs(ins, outs, "JSONL input_length/output_length");
  }
  const head = lines[0].split(",").map((x) => x.trim());
  const ci = head.findIndex((h) => /^(ContextTokens|input_len(gth)?|prompt_len)$/i.test(h));
  const co = head.findIndex((h) => /^(GeneratedTokens|output_len(gth)?)$/i.test(h));
  if (ci < 0 || co < 0)
    throw new InputError(
      `${file}:1: CSV header needs ContextTokens/GeneratedTokens or input_len/output_len columns (got ${head.join(", ")})`,
    );
  const ins: number[] = [];
  const outs: number[] = [];
  for (let i = 1; i < lines.length; i++) {
    if (!lines[i].trim()) continue;
    const cols = lines[i].split(",");
    const a = Number(cols[ci]);
    const b = Number(cols[co]);
    if (!Number.isFinite(a) || !Number.isFinite(b))
      throw new InputError(`${file}:${i + 1}: column ${ci + 1} or ${co + 1} is not a number`);
    ins.push(a);
    outs.push(b);
  }
  return fromPairs(ins, outs, `CSV ${head[ci]}/${head[co]}`);
}
