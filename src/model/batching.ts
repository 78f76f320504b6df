// Continuous batching as a serving engine runs it, step by step: requests arrive (closed loop or Poisson), pass an
// intake, and each step takes every decoding sequence plus prompt tokens up to the token budget (chunked prefill).
// Pure and deterministic for a seed; the step cost is passed in (workload.ts: the fitted step model; serving.ts: a
// cheap proxy that fixes a serving row's batch composition once).
import { makeRng } from "../rng.ts";
import type { Range } from "./range.ts";
import type { Resolved } from "./resolve.ts";

/** Request lengths: a mean and spread, or the samples themselves (drawn in order, cycling). */
export interface LengthDist {
  mean: number;
  sd: number;
  /** Uniform integers over [lo, hi] (a benchmark's random-range ratio). */
  uniform?: [number, number];
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

/** One engine step: `decodes` sequences at mean context `decodeCtx`, plus `prefillTokens` prompt tokens whose chunk
 * starts at `prefillPrefix`. Returns the step's 80 % interval and median, ms. */
export type StepCostFn = (decodes: number, prefillTokens: number, decodeCtx: number, prefillPrefix: number) => Range;

// ---------------------------------------------------------------- the schedule

export interface ScheduleStep {
  decodes: number;
  prefillTokens: number;
  /** Mean context of the decoding sequences. */
  ctx: number;
  /** Mean prefix of the prompt chunks (tokens of their prompts already prefilled), weighted by chunk size. */
  prefix: number;
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
export function drawLen(d: LengthDist, i: number, u: () => number): number {
  if (d.samples?.length) return Math.max(1, Math.round(d.samples[i % d.samples.length]));
  if (d.uniform) return Math.max(1, d.uniform[0] + Math.floor(u() * (d.uniform[1] - d.uniform[0] + 1)));
  if (d.sd <= 0) return Math.max(1, Math.round(d.mean));
  const s2 = Math.log(1 + (d.sd / d.mean) ** 2);
  const z = Math.sqrt(-2 * Math.log(Math.max(1e-12, u()))) * Math.cos(2 * Math.PI * u());
  return Math.max(1, Math.round(Math.exp(Math.log(d.mean) - s2 / 2 + Math.sqrt(s2) * z)));
}

/** Request intake (HTTP, tokenization, queueing into the engine), ms: uniform 1–5 ms (the request-overhead range). */
export const INTAKE_MS = { low: 1, high: 5 };

/**
 * Runs the step-level schedule: each step the engine takes every decoding sequence (one token each), then prompt
 * tokens of admitted requests in arrival order up to the token budget (chunked prefill, as vLLM V1's scheduler);
 * the step that finishes a prompt yields its first token. Deterministic for a seed.
 */
/** N Poisson arrival times (ms from 0) at `rate` requests/s, drawn from u. */
export function poissonArrivals(N: number, rate: number, u: () => number): number[] {
  const out: number[] = [];
  let t = 0;
  for (let i = 0; i < N; i++) {
    out.push(t);
    t += (-Math.log(Math.max(1e-12, 1 - u())) / rate) * 1000;
  }
  return out;
}

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
  const arrivals = spec.requestRate ? poissonArrivals(N, spec.requestRate, u) : [];
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
    steps.push({ decodes: decoding.length, prefillTokens: T, ctx, prefix, ms, pureMs });
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
