// What a serving benchmark measures: TPOT, ITL and TTFT under continuous batching with chunked prefill, for a
// closed loop of C clients (`--concurrency`) or Poisson arrivals (`--request-rate`). Pure: a step-level schedule
// driven by the fitted step model (the decode step at the batch, plus the prefill chunks riding in it).
//
// Definitions follow vLLM's bench serve (docs/metrics.md): TPOT per request = (E2EL − TTFT)/(n − 1), mean over
// requests; ITL = every gap between consecutive tokens, pooled; TTFT from the send to the first token.

import { InputError } from "../errors.ts";
import { makeRng } from "../rng.ts";
import { supportInflation } from "./cv.ts";
import { expertsOnBusiestDevice } from "./moe.ts";
import { corpusFit, predictive, stepParts } from "./priors.ts";
import type { Range } from "./range.ts";
import { round, roundRange } from "./range.ts";
import type { ModelInput, Resolved } from "./resolve.ts";
import { resolve } from "./resolve.ts";
import type { GroupLoad } from "./step.ts";
import { decodeLoads, kvReadPerGpu } from "./step.ts";

/** Request lengths: a mean and spread, or the samples themselves (drawn in order, cycling). */
export interface LengthDist {
  mean: number;
  sd: number;
  samples?: number[];
  source: string;
}

export interface WorkloadSpec {
  /** Closed loop: C clients, each sending its next request when the previous one ends. */
  concurrency?: number;
  /** Open loop: Poisson arrivals, requests per second (with concurrency: capped at C in flight, as bench serve). */
  requestRate?: number;
  inputLen: LengthDist;
  outputLen: LengthDist;
  /** Token budget per step (vLLM max_num_batched_tokens); default from the engine and device. */
  maxNumBatchedTokens?: number;
  maxNumSeqs?: number;
  /** Requests simulated (default max(200, 25·C)). */
  requests?: number;
  seed?: number;
}

export interface SchedulerDefaults {
  maxNumBatchedTokens: number;
  maxNumSeqs: number;
  source: string;
}

const GiB = 1024 ** 3;

/** The engine's default token budget per step and its sequence cap, with the source. */
export function schedulerDefaults(r: Resolved): SchedulerDefaults {
  const memBytes = r.gpu.memoryGB * 1e9;
  switch (r.engine) {
    case "vllm": {
      const big = memBytes >= 70 * GiB && !/^a100/.test(r.gpu.id);
      return {
        maxNumBatchedTokens: big ? 8192 : 2048,
        maxNumSeqs: big ? 1024 : 256,
        source: `vLLM EngineArgs.get_batch_defaults (OpenAI server): ${big ? "≥ 70 GiB and not A100 → 8192 tokens, 1024 seqs" : "< 70 GiB or A100 → 2048 tokens, 256 seqs"} (PR #17885)`,
      };
    }
    case "sglang":
      return {
        maxNumBatchedTokens: 8192,
        maxNumSeqs: 1024,
        source:
          "SGLang server_args chunked_prefill_size 8192 (recent releases pick 2048–16384 by GPU memory: assumption)",
      };
    case "trtllm":
      return {
        maxNumBatchedTokens: 8192,
        maxNumSeqs: 2048,
        source: "trtllm-serve max_num_tokens 8192, max_batch_size 2048",
      };
    case "llamacpp":
      return {
        maxNumBatchedTokens: 2048,
        maxNumSeqs: 1 << 20,
        source:
          "llama-server -b 2048 (n_batch: decode tokens of every slot + prompt tokens per llama_decode); slots = -np",
      };
    case "mlx":
      return {
        maxNumBatchedTokens: 2048,
        maxNumSeqs: 1,
        source: "mlx_lm.server: one request at a time; prefill_step_size 2048",
      };
    default:
      return {
        maxNumBatchedTokens: 2048,
        maxNumSeqs: 1 << 20,
        source: "no serving scheduler: a vLLM-like one assumed",
      };
  }
}

// ---------------------------------------------------------------- the step cost

/** One engine step: `decodes` sequences at mean context `decodeCtx`, plus `prefillTokens` prompt tokens whose chunk
 * starts at `prefillPrefix`. Returns the step's 80 % interval and median, ms. */
export type StepCostFn = (decodes: number, prefillTokens: number, decodeCtx: number, prefillPrefix: number) => Range;

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
    const tokens = Math.max(1, B + T);
    const r = resolve({ ...input, batch: tokens, contextLen: Math.max(1, dc || pc + T) });
    const a = r.arch;
    const ex = a.moe ? expertsOnBusiestDevice(a.moe.experts, a.moe.topk, tokens, r.ep).mid : 0;
    const weights = decodeLoads(r, ex, tokens, 0).filter((l) => l.group !== "kv" && l.group !== "attentionCore");
    const loads: GroupLoad[] = [...weights];
    let kvBytes = 0;
    let coreFlops = 0;
    if (B > 0) {
      const d = decodeLoads(r, ex, B, dc);
      kvBytes += d.find((l) => l.group === "kv")?.bytes ?? 0;
      coreFlops += d.find((l) => l.group === "attentionCore")?.flops ?? 0;
    }
    if (T > 0) {
      // The chunk's T queries attend over the prefix plus half the chunk on average; the prefix KV is read once.
      const p = decodeLoads(r, ex, T, pc + T / 2);
      coreFlops += p.find((l) => l.group === "attentionCore")?.flops ?? 0;
      kvBytes += pc > 0 ? kvReadPerGpu(r, pc).bytesPerSeq : 0;
    }
    loads.push({ group: "kv", label: "KV cache", bytes: kvBytes, flops: 0 });
    loads.push({ group: "attentionCore", label: "attention core", bytes: 0, flops: coreFlops });
    const pr = predictive(f, stepParts(r, { loads }), true, widen);
    const out = { low: pr.low80, mid: pr.ms, high: pr.high80 };
    memo.set(key, out);
    return out;
  };
}

// ---------------------------------------------------------------- the schedule

export interface ScheduleStep {
  decodes: number;
  prefillTokens: number;
  ms: Range;
  /** The same step without its prefill chunks. */
  pureMs: Range;
}

export interface ScheduledRequest {
  inputLen: number;
  outputLen: number;
  sentMs: number;
  /** Request intake before the scheduler sees it (HTTP, tokenize), ms. */
  intakeMs: number;
  /** Index of the step that produced each token. */
  tokenSteps: number[];
}

export interface Schedule {
  steps: ScheduleStep[];
  requests: ScheduledRequest[];
  /** End time of each step on the mid timeline, ms. */
  stepEndMs: number[];
}

/** Draws a length from the distribution: the i-th sample, or a log-normal with its mean and sd (≥ 1). */
function drawLen(d: LengthDist, i: number, u: () => number): number {
  if (d.samples?.length) return Math.max(1, Math.round(d.samples[i % d.samples.length]));
  if (d.sd <= 0) return Math.max(1, Math.round(d.mean));
  const s2 = Math.log(1 + (d.sd / d.mean) ** 2);
  const z = Math.sqrt(-2 * Math.log(Math.max(1e-12, u()))) * Math.cos(2 * Math.PI * u());
  return Math.max(1, Math.round(Math.exp(Math.log(d.mean) - s2 / 2 + Math.sqrt(s2) * z)));
}

/** Request intake (HTTP, tokenization, queueing into the engine), ms: uniform 1–5 ms (the request-overhead range). */
const INTAKE_MS = { low: 1, high: 5 };

/**
 * Runs the step-level schedule: each step the engine takes every decoding sequence (one token each), then prompt
 * tokens of admitted requests in arrival order up to the token budget (chunked prefill, as vLLM V1's scheduler);
 * the step that finishes a prompt yields its first token. Deterministic for a seed.
 */
export function simulateSchedule(spec: WorkloadSpec, budget: SchedulerDefaults, cost: StepCostFn): Schedule {
  const u = makeRng(spec.seed ?? 1);
  const C = spec.concurrency;
  const N = spec.requests ?? Math.max(200, 25 * (C ?? 8));
  const chunk = spec.maxNumBatchedTokens ?? budget.maxNumBatchedTokens;
  const maxSeqs = spec.maxNumSeqs ?? budget.maxNumSeqs;
  const requests: ScheduledRequest[] = [];
  interface Live {
    req: ScheduledRequest;
    ready: number;
    prefilled: number;
    generated: number;
  }
  const queue: Live[] = [];
  const running: Live[] = [];
  const steps: ScheduleStep[] = [];
  const stepEndMs: number[] = [];
  let sent = 0;
  let done = 0;
  // Open-loop arrival times (Poisson), or closed-loop clients.
  const arrivals: number[] = [];
  if (spec.requestRate) {
    let t = 0;
    for (let i = 0; i < N; i++) {
      arrivals.push(t);
      t += (-Math.log(Math.max(1e-12, 1 - u())) / spec.requestRate) * 1000;
    }
  }
  let inFlight = 0;
  // The API server takes requests in one process, one after another: simultaneous sends reach the scheduler
  // staggered by the intake time (this is what spreads a closed loop's clients over different steps).
  let intakeFreeMs = 0;
  const send = (t: number) => {
    const req: ScheduledRequest = {
      inputLen: drawLen(spec.inputLen, sent, u),
      outputLen: drawLen(spec.outputLen, sent, u),
      sentMs: t,
      intakeMs: INTAKE_MS.low + (INTAKE_MS.high - INTAKE_MS.low) * u(),
      tokenSteps: [],
    };
    sent++;
    inFlight++;
    requests.push(req);
    const ready = Math.max(t, intakeFreeMs) + req.intakeMs;
    intakeFreeMs = ready;
    queue.push({ req, ready, prefilled: 0, generated: 0 });
  };
  // Pending open-loop sends that wait for a concurrency slot.
  let nextArrival = 0;
  // When a concurrency slot last came free: an arrival that waited for one is sent then.
  let slotFreeMs = 0;
  const releaseOpen = (t: number) => {
    while (nextArrival < arrivals.length && arrivals[nextArrival] <= t && (!C || inFlight < C)) {
      send(Math.max(arrivals[nextArrival], slotFreeMs));
      nextArrival++;
    }
  };
  let t = 0;
  if (!spec.requestRate) for (let i = 0; i < (C ?? 1) && sent < N; i++) send(0);
  let guard = 0;
  while (done < N) {
    if (++guard > 50_000_000) throw new Error("workload schedule did not finish");
    if (spec.requestRate) releaseOpen(t);
    // Admit ready requests in arrival order, within the sequence cap.
    queue.sort((a, b) => a.ready - b.ready);
    while (queue.length && queue[0].ready <= t && running.length < maxSeqs) running.push(queue.shift()!);
    const decoding = running.filter((x) => x.prefilled >= x.req.inputLen);
    let room = chunk - decoding.length;
    const chunks: { x: Live; n: number; prefix: number }[] = [];
    for (const x of running) {
      if (room <= 0) break;
      if (x.prefilled >= x.req.inputLen) continue;
      const n = Math.min(x.req.inputLen - x.prefilled, room);
      chunks.push({ x, n, prefix: x.prefilled });
      room -= n;
    }
    if (!decoding.length && !chunks.length) {
      // Idle: jump to the next ready request or arrival.
      const next = Math.min(
        queue.length ? queue[0].ready : Number.POSITIVE_INFINITY,
        spec.requestRate && nextArrival < arrivals.length ? arrivals[nextArrival] : Number.POSITIVE_INFINITY,
      );
      if (!Number.isFinite(next)) break;
      t = Math.max(t, next);
      continue;
    }
    const T = chunks.reduce((s, c) => s + c.n, 0);
    const ctx = decoding.length ? decoding.reduce((s, x) => s + x.req.inputLen + x.generated, 0) / decoding.length : 0;
    const prefix = chunks.length ? chunks.reduce((s, c) => s + c.prefix * c.n, 0) / T : 0;
    const ms = cost(decoding.length, T, ctx, prefix);
    const pureMs = T > 0 && decoding.length ? cost(decoding.length, 0, ctx, 0) : ms;
    const idx = steps.length;
    steps.push({ decodes: decoding.length, prefillTokens: T, ms, pureMs });
    t += ms.mid;
    stepEndMs.push(t);
    const finished: Live[] = [];
    for (const x of decoding) {
      x.generated++;
      x.req.tokenSteps.push(idx);
      if (x.generated >= x.req.outputLen) finished.push(x);
    }
    for (const c of chunks) {
      c.x.prefilled += c.n;
      if (c.x.prefilled >= c.x.req.inputLen) {
        c.x.generated = 1;
        c.x.req.tokenSteps.push(idx);
        if (c.x.req.outputLen <= 1) finished.push(c.x);
      }
    }
    for (const x of finished) {
      running.splice(running.indexOf(x), 1);
      done++;
      if (C && inFlight === C) slotFreeMs = t;
      inFlight--;
      if (!spec.requestRate && sent < N) send(t);
    }
  }
  return { steps, requests, stepEndMs };
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
