// Serving benchmarks as evidence for the step model. A serving row measures mean TPOT at a concurrency: every step of
// its run carries the batch the schedule gave it (decodes at their contexts, prompt chunks riding along), and TPOT is
// a weighted mean of those steps' times. The schedule's composition hardly depends on how long a step takes (a closed
// loop keeps C requests in flight whatever the speed), so it is fixed once per row from a cheap step-cost proxy, and
// its steps are binned into a few representative mixed steps: the row's time is Σ_k W_k · step_k(θ), each step_k the
// same parts the decode rows use (priors.ts stepParts) at its batch. Pure.

import { makeRng } from "../rng.ts";
import type { LengthDist, SchedulerDefaults, WorkloadSpec } from "./batching.ts";
import { drawLen, INTAKE_MS, poissonArrivals, schedulerDefaults } from "./batching.ts";
import type { CorpusRow } from "./corpus.ts";
import { expertsOnBusiestDevice } from "./moe.ts";
import type { RowStep, StepParts } from "./priors.ts";
import { stepParts } from "./priors.ts";
import type { ModelInput, Resolved } from "./resolve.ts";
import { resolve } from "./resolve.ts";
import type { GroupLoad } from "./step.ts";
import { decodeLoads, kvReadPerGpu } from "./step.ts";
import type { CorpusSupport } from "./support.ts";

/**
 * The parts of one engine step: `decodes` sequences at mean context `decodeCtx`, plus `prefillTokens` prompt tokens
 * whose chunk starts at `prefix`. Weights are streamed once for all B + T tokens (FLOPs, experts touched, all-reduce
 * bytes at B + T); the decodes read their KV; the chunk attends over its prefix (read once).
 */
export function mixedStepParts(
  input: ModelInput,
  decodes: number,
  prefillTokens: number,
  decodeCtx: number,
  prefix: number,
  support?: CorpusSupport,
): { r: Resolved; sp: StepParts } {
  const B = decodes;
  const T = prefillTokens;
  const tokens = Math.max(1, Math.round(B + T));
  const dc = B > 0 ? Math.max(1, decodeCtx) : 0;
  const r = resolve({ ...input, batch: tokens, contextLen: Math.max(1, Math.round(dc || prefix + T)) });
  const a = r.arch;
  const ex = a.moe ? expertsOnBusiestDevice(a.moe.experts, a.moe.topk, tokens, r.ep).mid : 0;
  const loads: GroupLoad[] = decodeLoads(r, ex, tokens, 0).filter(
    (l) => l.group !== "kv" && l.group !== "attentionCore",
  );
  let kvBytes = 0;
  let coreFlops = 0;
  if (B > 0) {
    // Per-sequence loads at one sequence, scaled: B may be a bin's mean (fractional).
    const d = decodeLoads(r, ex, 1, Math.round(dc));
    kvBytes += B * (d.find((l) => l.group === "kv")?.bytes ?? 0);
    coreFlops += B * (d.find((l) => l.group === "attentionCore")?.flops ?? 0);
  }
  if (T > 0) {
    // The chunk's T queries attend over the prefix plus half the chunk on average; the prefix KV is read once.
    const p = decodeLoads(r, ex, 1, Math.round(prefix + T / 2));
    coreFlops += T * (p.find((l) => l.group === "attentionCore")?.flops ?? 0);
    kvBytes += prefix > 0 ? kvReadPerGpu(r, Math.round(prefix)).bytesPerSeq : 0;
  }
  loads.push({ group: "kv", label: "KV cache", bytes: kvBytes, flops: 0 });
  loads.push({ group: "attentionCore", label: "attention core", bytes: 0, flops: coreFlops });
  // The engine handles every decoding sequence and the request whose prompt is being prefilled.
  const seqs = B + (T > 0 ? 1 : 0);
  return { r, sp: stepParts(r, { loads, seqs }, support) };
}

/** A representative step of a serving run: a bin of the schedule's steps, with its share of the mean TPOT. */
export interface RepStep {
  /** Share of the row's mean TPOT (Σ over the row = 1). */
  w: number;
  decodes: number;
  prefillTokens: number;
  decodeCtx: number;
  prefix: number;
  /** Schedule steps in the bin. */
  steps: number;
}

/** The lengths a serving row's requests had: fixed, or uniform over the range the source's harness draws from. */
export function rowLengths(row: CorpusRow): { input: LengthDist; output: LengthDist; how: string } {
  const w = row.workload;
  const r = w.randomRangeRatio;
  if (r === undefined || r >= 1) {
    const fixed = (n: number): LengthDist => ({ mean: n, sd: 0, source: "fixed" });
    return { input: fixed(w.inputLen), output: fixed(w.outputLen), how: "fixed lengths" };
  }
  // InferenceX's benchmark_serving.py draws uniformly from [⌊L·r⌋, L]; vLLM's bench serve (≥ v0.10) from
  // [⌊L·(1 − r)⌋, ⌈L·(1 + r)⌉] (a ratio ≥ 1 there means fixed).
  const inferencex = /inferencex/i.test(row.sourceKey);
  const range = (L: number): [number, number] =>
    inferencex ? [Math.floor(L * r), L] : [Math.max(1, Math.floor(L * (1 - r))), Math.ceil(L * (1 + r))];
  const uni = (L: number): LengthDist => {
    const [lo, hi] = range(L);
    return { mean: (lo + hi) / 2, sd: (hi - lo) / Math.sqrt(12), uniform: [lo, hi], source: "uniform" };
  };
  return {
    input: uni(w.inputLen),
    output: uni(w.outputLen),
    how: inferencex ? `uniform [⌊L·${r}⌋, L] (InferenceX)` : `uniform [L·(1 − ${r}), L·(1 + ${r})] (vLLM)`,
  };
}

const MAX_DECODE_BINS = 6;
const MAX_PREFILL_BINS = 3;

/** A run of identical-composition steps of a serving schedule, and its share of the mean TPOT. */
export interface Segment {
  decodes: number;
  prefillTokens: number;
  /** Mean decode context over the run. */
  ctx: number;
  prefix: number;
  steps: number;
  /** Share of the mean TPOT: steps × Σ over the decoding requests of 1 / ((n − 1)·N). */
  w: number;
}

/**
 * The schedule of a serving run (the same continuous batching as batching.ts simulateSchedule: intake one request at
 * a time, every decode first, then prompt chunks in arrival order up to the token budget), advanced event to event:
 * between a prefill, a finish and an arrival, every step decodes the same requests, so a run of k steps is one
 * segment. Each request's TPOT is the mean of the n − 1 steps after its first token, so a step's share of the mean
 * TPOT is Σ over the requests it decodes of 1 / ((n − 1)·N). O(events), not O(steps).
 */
export function servingSegments(
  spec: WorkloadSpec,
  budget: SchedulerDefaults,
  cost: (B: number, T: number) => number,
): Segment[] {
  const u = makeRng(spec.seed ?? 1);
  const C = spec.concurrency ?? 1;
  const N = spec.requests ?? 10 * C;
  const chunk = spec.maxNumBatchedTokens ?? budget.maxNumBatchedTokens;
  const maxSeqs = spec.maxNumSeqs ?? budget.maxNumSeqs;
  interface Live {
    inputLen: number;
    outputLen: number;
    ready: number;
    prefilled: number;
    generated: number;
    /** Per decode step: 1 / ((n − 1)·N). */
    share: number;
  }
  const queue: Live[] = [];
  const running: Live[] = [];
  const out: Segment[] = [];
  const arrivals = spec.requestRate ? poissonArrivals(N, spec.requestRate, u) : [];
  let sent = 0;
  let done = 0;
  let inFlight = 0;
  let intakeFreeMs = 0;
  let slotFreeMs = 0;
  let nextArrival = 0;
  const counted = N;
  const send = (t: number) => {
    const inputLen = drawLen(spec.inputLen, sent, u);
    const outputLen = drawLen(spec.outputLen, sent, u);
    const intake = INTAKE_MS.low + (INTAKE_MS.high - INTAKE_MS.low) * u();
    sent++;
    inFlight++;
    const ready = Math.max(t, intakeFreeMs) + intake;
    intakeFreeMs = ready;
    queue.push({
      inputLen,
      outputLen,
      ready,
      prefilled: 0,
      generated: 0,
      share: outputLen > 1 ? 1 / ((outputLen - 1) * counted) : 0,
    });
  };
  const releaseOpen = (t: number) => {
    while (nextArrival < arrivals.length && arrivals[nextArrival] <= t && inFlight < C) {
      send(Math.max(arrivals[nextArrival], slotFreeMs));
      nextArrival++;
    }
  };
  let t = 0;
  if (!spec.requestRate) for (let i = 0; i < C && sent < N; i++) send(0);
  let guard = 0;
  while (done < N) {
    if (++guard > 10_000_000) throw new Error("serving schedule did not finish");
    if (spec.requestRate) releaseOpen(t);
    queue.sort((a, b) => a.ready - b.ready);
    while (queue.length && queue[0].ready <= t && running.length < maxSeqs) running.push(queue.shift()!);
    let B = 0;
    let wsum = 0;
    let ctxSum = 0;
    let minLeft = Number.POSITIVE_INFINITY;
    let prefilling = false;
    for (const x of running) {
      if (x.prefilled >= x.inputLen) {
        B++;
        wsum += x.share;
        ctxSum += x.inputLen + x.generated;
        minLeft = Math.min(minLeft, x.outputLen - x.generated);
      } else prefilling = true;
    }
    if (!B && !prefilling) {
      const next = Math.min(
        queue.length ? queue[0].ready : Number.POSITIVE_INFINITY,
        spec.requestRate && nextArrival < arrivals.length ? arrivals[nextArrival] : Number.POSITIVE_INFINITY,
      );
      if (!Number.isFinite(next)) break;
      t = Math.max(t, next);
      continue;
    }
    if (!prefilling) {
      // A run of pure decode steps: until a request finishes, or the next request becomes ready (it joins the
      // running set at the first step boundary at or after its ready time).
      const d = cost(B, 0);
      let k = minLeft;
      const nextReady = Math.min(
        queue.length && running.length < maxSeqs ? queue[0].ready : Number.POSITIVE_INFINITY,
        spec.requestRate && nextArrival < arrivals.length && inFlight < C
          ? Math.max(arrivals[nextArrival], t)
          : Number.POSITIVE_INFINITY,
      );
      if (Number.isFinite(nextReady)) k = Math.max(1, Math.min(k, Math.ceil((nextReady - t) / d)));
      out.push({ decodes: B, prefillTokens: 0, ctx: ctxSum / B + (k - 1) / 2, prefix: 0, steps: k, w: k * wsum });
      t += k * d;
      for (const x of running) if (x.prefilled >= x.inputLen) x.generated += k;
    } else {
      // One step with prompt chunks (every decode, then prompts in arrival order up to the budget).
      let room = chunk - B;
      let T = 0;
      let prefixW = 0;
      for (const x of running) {
        if (room <= 0) break;
        if (x.prefilled >= x.inputLen) continue;
        const n = Math.min(x.inputLen - x.prefilled, room);
        prefixW += x.prefilled * n;
        T += n;
        room -= n;
      }
      out.push({
        decodes: B,
        prefillTokens: T,
        ctx: B ? ctxSum / B : 0,
        prefix: T ? prefixW / T : 0,
        steps: 1,
        w: wsum,
      });
      t += cost(B, T);
      room = chunk - B;
      for (const x of running) {
        if (x.prefilled >= x.inputLen) x.generated++;
        else if (room > 0) {
          const n = Math.min(x.inputLen - x.prefilled, room);
          room -= n;
          x.prefilled += n;
          if (x.prefilled >= x.inputLen) x.generated = 1;
        }
      }
    }
    for (let i = running.length - 1; i >= 0; i--) {
      const x = running[i];
      if (x.prefilled >= x.inputLen && x.generated >= x.outputLen) {
        running.splice(i, 1);
        done++;
        if (inFlight === C) slotFreeMs = t;
        inFlight--;
        if (!spec.requestRate && sent < N) send(t);
      }
    }
  }
  return out;
}

/**
 * The representative steps of a serving row: its schedule run once with a step-cost proxy (linear in the batch and
 * the chunk, from the parts at their prior means), each step weighted by its share of the mean TPOT, and the steps
 * binned by batch (decode-only steps) and by chunk size (steps that carry a prompt chunk).
 */
export function servingRepSteps(input: ModelInput, row: CorpusRow, proxy: (B: number, T: number) => number): RepStep[] {
  const C = row.workload.concurrency ?? 1;
  const lengths = rowLengths(row);
  const r = resolve(input);
  const spec: WorkloadSpec = {
    concurrency: C,
    requestRate: row.workload.requestRate,
    inputLen: lengths.input,
    outputLen: lengths.output,
    // The benchmark's own request count where it says so (InferenceX: 10 × C), else 10 × C.
    requests: Math.max(C, Math.min(row.workload.numPrompts ?? 10 * C, 20 * C, 4000)),
    seed: 1,
  };
  const segs = servingSegments(spec, schedulerDefaults(r), proxy).filter((x) => x.w > 0);
  const bin = (xs: Segment[], key: (x: Segment) => number, max: number): Segment[][] => {
    const sorted = [...xs].sort((a, b) => key(a) - key(b));
    const total = sorted.reduce((t, x) => t + x.w, 0);
    const out: Segment[][] = [];
    let cur: Segment[] = [];
    let acc = 0;
    let edge = total / max;
    for (const x of sorted) {
      cur.push(x);
      acc += x.w;
      if (acc >= edge - 1e-12 && out.length < max - 1) {
        out.push(cur);
        cur = [];
        edge += total / max;
      }
    }
    if (cur.length) out.push(cur);
    return out;
  };
  const bins = [
    ...bin(
      segs.filter((x) => x.prefillTokens === 0),
      (x) => x.decodes,
      MAX_DECODE_BINS,
    ),
    ...bin(
      segs.filter((x) => x.prefillTokens > 0),
      (x) => x.prefillTokens * 1e6 + x.decodes,
      MAX_PREFILL_BINS,
    ),
  ];
  const reps: RepStep[] = [];
  for (const b of bins) {
    let w = 0;
    let B = 0;
    let T = 0;
    let ctx = 0;
    let cw = 0;
    let prefix = 0;
    let steps = 0;
    for (const x of b) {
      w += x.w;
      B += x.w * x.decodes;
      T += x.w * x.prefillTokens;
      prefix += x.w * x.prefix;
      steps += x.steps;
      if (x.decodes > 0) {
        ctx += x.w * x.ctx;
        cw += x.w;
      }
    }
    if (w <= 0) continue;
    reps.push({
      w,
      decodes: B / w,
      prefillTokens: T / w,
      decodeCtx: cw > 0 ? ctx / cw : lengths.input.mean,
      prefix: prefix / w,
      steps,
    });
  }
  const total = reps.reduce((t, x) => t + x.w, 0);
  for (const x of reps) x.w /= total;
  return reps;
}

/** The row's representative steps as fit steps: parts at each step's batch, weighted. */
export function servingRowSteps(
  input: ModelInput,
  row: CorpusRow,
  support: CorpusSupport | undefined,
  proxy: (B: number, T: number) => number,
): { reps: RepStep[]; steps: RowStep[]; specs: { w: number; sp: StepParts }[] } {
  const reps = servingRepSteps(input, row, proxy);
  const specs = reps.map((x) => ({
    w: x.w,
    sp: mixedStepParts(input, x.decodes, x.prefillTokens, x.decodeCtx, x.prefix, support).sp,
  }));
  const steps = specs.map(({ w, sp }) => ({ w, parts: sp.parts, overlap: sp.overlap }));
  return { reps, steps, specs };
}
