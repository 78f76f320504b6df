// The simulated engine: a vLLM-V1-like continuous-batching scheduler driven by a precise clock.
// Each step's duration comes from the StepModel; tokens of a step are emitted when it ends.

import { MAX_TIMER_MS } from "../sleep.ts";
import type { FinishReason, SimMetrics } from "./exposition.ts";
import { blockHashes, chainHash, KvBlockPool, type KvHolder, type PrefixCacheTruth, ROOT_HASH } from "./kvcache.ts";
import { mix32, Rng } from "./rng.ts";
import { generatedTokenId, tokenText } from "./text.ts";
import { type BatchShape, COMPONENTS, type StepModel } from "./timing.ts";

const SAMPLING = COMPONENTS.indexOf("sampling");
const SCHEDULER = COMPONENTS.indexOf("scheduler");

/** Receives a request's output as the engine produces it. */
export interface RequestSink {
  /** `count` new tokens starting at index `from`; `finish` set on the last output. */
  onTokens(req: SimRequest, from: number, count: number, finish: FinishReason | null): void;
  /** Sends what onTokens wrote now (called after a step's outputs, before the engine's bookkeeping). */
  flush?(): void;
}

/** One finished request as the engine saw it (the prefix-cache truth's per-request rows). */
/**
 * What held the waiting queue back in a step: nothing, the batch ceiling, the KV blocks, or the token budget;
 * with nothing held back by admission, a per-sequence cost that outweighs the rest of the step (compute or
 * the host), past which the queue forms inside the batch.
 */
export type AdmissionBlocker = "none" | "max-num-seqs" | "kv-capacity" | "token-budget" | "compute" | "host";

/**
 * Per blocker: steps, their simulated ms, the requests finished in them, and the work they ran: tokens (prompt
 * chunks + decodes, what compute costs) and sequence-steps (what the host's per-sequence work costs).
 */
export type LimitTruth = Record<
  AdmissionBlocker,
  { steps: number; simMs: number; finished: number; tokens: number; seqs: number }
>;

function emptyLimitTruth(): LimitTruth {
  const z = () => ({ steps: 0, simMs: 0, finished: 0, tokens: 0, seqs: 0 });
  return { none: z(), "max-num-seqs": z(), "kv-capacity": z(), "token-budget": z(), compute: z(), host: z() };
}

export interface RequestTruth {
  id: number;
  promptTokens: number;
  /** Prompt tokens found in the prefix cache at its first admission (vLLM's num_cached_tokens). */
  cachedTokens: number;
  generatedTokens: number;
  preemptions: number;
  /** Model (pre-jitter) simulated ms of the steps that ran its prefill chunks. */
  prefillModelMs: number;
  /** The server's name for it (the response id; null outside the HTTP server). */
  name: string | null;
  /** Engine clock (wall ms): arrival, queued (after the frontend), first scheduled, first token sent, and that step's deadline. */
  arrivalMs: number;
  queuedMs: number;
  scheduledMs: number;
  firstTokenMs: number;
  firstTokenDueMs: number;
  /** TTFT in simulated ms, as the TTFT histogram observed it. */
  ttftMs: number;
  /**
   * Simulated ms of the steps it rode in, split as vLLM's detailed traces split them: the model's forward pass (every
   * step component but sampling and the scheduler), execute (forward + sampling) and the scheduler's part.
   */
  forwardMs: number;
  executeMs: number;
  schedulerMs: number;
}

const NO_BLOCKS: readonly number[] = [];

export class SimRequest implements KvHolder {
  readonly id: number;
  readonly promptIds: Uint32Array;
  readonly promptLen: number;
  readonly maxTokens: number;
  readonly minTokens: number;
  readonly ignoreEos: boolean;
  readonly stop: readonly string[] | null;
  readonly seed: number;
  readonly sink: RequestSink;
  readonly paramsMaxTokens: number | null;
  readonly n: number;
  /** Token index at which the simulated model emits EOS (Infinity: never). */
  eosAt = Number.POSITIVE_INFINITY;
  generated = 0;
  /** Tokens whose KV is computed (prompt, then prompt + generated after a preemption). */
  computed = 0;
  /** Prompt (+ generated, after preemption) tokens that must be computed before sampling. */
  target = 0;
  /** KV blocks held, and the hashes of the full ones named so far (src/sim/kvcache.ts). */
  blockIds: number[] = [];
  hashes: number[] = [];
  /** Hashes of the prompt's full blocks (computed once, when prefix caching is on). */
  promptHashes: number[] | null = null;
  cachedTokens = 0;
  preemptions = 0;
  prefillModelMs = 0;
  /** Simulated ms of its steps' forward, execute (forward + sampling) and scheduler parts (RequestTruth). */
  forwardMs = 0;
  executeMs = 0;
  schedulerMs = 0;
  firstTokenDue = -1;
  arrival = 0;
  queuedAt = 0;
  scheduledAt = -1;
  firstTokenAt = -1;
  lastTokenAt = -1;
  /** The end of every step it rode (prefill chunks, then decode steps), engine clock; kept only with recordSteps. */
  stepEnds: number[] | null = null;
  finished: FinishReason | null = null;
  stopReason: string | null = null;
  /** Text of the last token when a stop string cut it short. */
  lastTextOverride: string | null = null;
  aborted = false;
  stopText = "";
  /** Opaque slot for the server. */
  ctx: unknown = null;
  /** The server's name for it (its response id, as vLLM's request id). */
  name: string | null = null;

  constructor(o: {
    id: number;
    promptIds: Uint32Array;
    maxTokens: number;
    minTokens?: number;
    ignoreEos?: boolean;
    stop?: readonly string[] | null;
    seed: number;
    sink: RequestSink;
    paramsMaxTokens?: number | null;
    n?: number;
  }) {
    this.id = o.id;
    this.promptIds = o.promptIds;
    this.promptLen = o.promptIds.length;
    this.maxTokens = o.maxTokens;
    this.minTokens = o.minTokens ?? 0;
    this.ignoreEos = o.ignoreEos ?? false;
    this.stop = o.stop?.length ? o.stop : null;
    this.seed = o.seed;
    this.sink = o.sink;
    this.paramsMaxTokens = o.paramsMaxTokens ?? null;
    this.n = o.n ?? 1;
    this.target = this.promptLen;
  }

  /** Token id at position i of prompt + output. */
  tokenAt = (i: number): number =>
    i < this.promptLen ? this.promptIds[i]! : generatedTokenId(this.seed, i - this.promptLen);

  /** Text of generated token i (honours a stop-string cut on the last one). */
  text(i: number): string {
    if (this.lastTextOverride !== null && i === this.generated - 1) return this.lastTextOverride;
    return tokenText(this.seed, i);
  }
}

/** What the engine did in one step (kept for the profiler). */
export interface StepRecord {
  index: number;
  startMs: number;
  endMs: number;
  shape: BatchShape;
  jitter: number;
}

export interface EngineOptions {
  model: StepModel;
  metrics: SimMetrics;
  /** Wall-clock ms (performance.now). */
  clock: () => number;
  timeScale: number;
  speedZero: boolean;
  seed: number;
  maxNumSeqs: number;
  maxNumBatchedTokens: number;
  acceptance: number;
  onStep?: (rec: StepRecord) => void;
  /** Called when a step is scheduled, with its model mean (ms, before jitter): telemetry integrates from it. */
  onStepBegin?: (rec: StepRecord, meanMs: number) => void;
  /** Called when the engine finds no work: the next step starts from "now", not on the old schedule. */
  onIdle?: () => void;
  /** Called once per request that finished (not aborted), at its last step's end (`nowMs`, the engine clock). */
  onFinished?: (req: SimRequest, nowMs: number) => void;
  /** Keep each request's step ends (SimRequest.stepEnds): SGLang's span layout has a slice per step. */
  recordSteps?: boolean;
}

interface Scheduled {
  req: SimRequest;
  tokens: number;
  prefill: boolean;
}

/** A FIFO with O(1) shift. */
class Queue<T> {
  private a: T[] = [];
  private h = 0;
  get length(): number {
    return this.a.length - this.h;
  }
  push(x: T): void {
    this.a.push(x);
  }
  unshift(x: T): void {
    if (this.h > 0) this.a[--this.h] = x;
    else this.a.unshift(x);
  }
  peek(): T | undefined {
    return this.a[this.h];
  }
  shift(): T | undefined {
    if (this.h >= this.a.length) return undefined;
    const x = this.a[this.h]!;
    (this.a as unknown[])[this.h++] = undefined;
    if (this.h > 1024 && this.h * 2 > this.a.length) {
      this.a = this.a.slice(this.h);
      this.h = 0;
    }
    return x;
  }
  /** Inserts keeping the queue ordered by `key` (after equal keys); O(1) when x belongs at the back. */
  insertBy(x: T, key: (v: T) => number): void {
    const k = key(x);
    let i = this.a.length;
    while (i > this.h && key(this.a[i - 1]!) > k) i--;
    if (i === this.a.length) this.a.push(x);
    else this.a.splice(i, 0, x);
  }
  remove(x: T): boolean {
    const i = this.a.indexOf(x, this.h);
    if (i < 0) return false;
    this.a.splice(i, 1);
    return true;
  }
  *[Symbol.iterator](): Iterator<T> {
    for (let i = this.h; i < this.a.length; i++) yield this.a[i]!;
  }
}

/** Finished requests the prefix-cache truth keeps. */
const RECENT = 4096;

/** Wall ms of lateness the step chain makes up for; beyond it the schedule restarts from now. */
const CATCH_UP_MS = 100;

export class Engine {
  readonly opts: EngineOptions;
  private readonly model: StepModel;
  private readonly m: SimMetrics;
  private readonly pending = new Queue<SimRequest>();
  private readonly waiting = new Queue<SimRequest>();
  private running: SimRequest[] = [];
  private readonly rng: Rng;
  private readonly blockSize: number;
  private readonly pool: KvBlockPool;
  /** The last finished requests (a ring), for the prefix-cache truth. */
  private readonly recent: RequestTruth[] = [];
  private recentNext = 0;
  private readonly frontendMs: number;
  private readonly specTokens: number;
  /** Simulated ms per wall ms: every duration observed into /metrics is wall × this. */
  private readonly simPerWall: number;
  private inFlight: {
    batch: Scheduled[];
    rec: StepRecord;
    meanMs: number;
    blocker: AdmissionBlocker;
    /** The step's shares of forward, sampling and scheduler in its model time. */
    forwardShare: number;
    samplingShare: number;
    schedulerShare: number;
  } | null = null;
  private readonly parts = new Float64Array(COMPONENTS.length);
  /** Why the last schedule() left requests waiting (null: it admitted all it could see). */
  private blocker: AdmissionBlocker = "none";
  private readonly limits: LimitTruth = emptyLimitTruth();
  private timerArmed = false;
  private lastEnd = Number.NEGATIVE_INFINITY;
  /** When the last step actually completed (wall ms). */
  private lastDone = Number.NEGATIVE_INFINITY;
  private stepIndex = 0;
  private closed = false;
  private drainWaiters: Array<() => void> = [];
  /** Sinks that got output in the step being completed (reused). */
  private readonly touched: RequestSink[] = [];
  private readonly shape: BatchShape = {
    prefillTokens: 0,
    prefillSeqs: 0,
    prefillAttnTokenCtx: 0,
    prefillKvTokens: 0,
    decodeSeqs: 0,
    decodeContextTokens: 0,
  };

  constructor(opts: EngineOptions) {
    this.opts = opts;
    this.model = opts.model;
    this.m = opts.metrics;
    this.rng = new Rng(opts.seed ^ 0x5eed);
    const p = opts.model.profile;
    this.blockSize = p.engine.blockSize;
    this.pool = new KvBlockPool(p.engine.numGpuBlocks, p.engine.blockSize, p.engine.enablePrefixCaching);
    this.frontendMs = opts.speedZero ? 0 : p.cost.frontendMs / opts.timeScale;
    this.specTokens = opts.model.config.specTokens;
    // --speed zero takes no simulated time, so its wall times are the only times there are.
    this.simPerWall = opts.speedZero ? 1 : opts.timeScale;
    this.m.timeScale = this.simPerWall;
  }

  get numRunning(): number {
    return this.running.length;
  }
  get numWaiting(): number {
    return this.waiting.length + this.pending.length;
  }
  get idle(): boolean {
    return !this.inFlight && this.running.length === 0 && this.waiting.length === 0 && this.pending.length === 0;
  }

  /**
   * Hands a request to the engine. `arrivalMs` (engine clock) is when the server received it; the
   * frontend cost runs from then, so HTTP handling done since overlaps it instead of adding to it.
   */
  submit(req: SimRequest, arrivalMs?: number): void {
    const now = this.opts.clock();
    req.arrival = arrivalMs ?? now;
    // It joins the engine's queue when the frontend cost has passed, and never before it got here.
    req.queuedAt = Math.max(req.arrival + this.frontendMs, now);
    if (this.opts.recordSteps) req.stepEnds = [];
    const eosMean = this.model.profile.text.eosMeanTokens;
    if (eosMean > 0) {
      // Geometric natural length with the profile's mean, from the request's seed.
      const u = (mix32(req.seed ^ 0xe05) + 0.5) / 4294967296;
      req.eosAt = 1 + Math.floor(Math.log(u) / Math.log(1 - 1 / Math.max(1.0001, eosMean)));
    }
    this.pending.insertBy(req, (r) => r.queuedAt);
    this.kick();
  }

  /** Client went away: drop the request at the next step boundary. */
  abort(req: SimRequest): void {
    if (req.finished) return;
    req.aborted = true;
    if (this.pending.remove(req) || this.waiting.remove(req)) this.finishAborted(req);
    this.kick();
  }

  /** Resolves when no request is left (for graceful shutdown). */
  drain(): Promise<void> {
    if (this.idle) return Promise.resolve();
    return new Promise((r) => this.drainWaiters.push(r));
  }

  close(): void {
    this.closed = true;
  }

  private finishAborted(req: SimRequest): void {
    req.finished = "abort";
    this.m.success.abort++;
    this.freeBlocks(req);
    req.sink.onTokens(req, req.generated, 0, "abort");
  }

  private freeBlocks(req: SimRequest): void {
    this.pool.release(req);
  }

  /** The prefix cache's counts now, and the last finished requests (oldest first). */
  /** Steps, simulated time and finished requests by what held the waiting queue back in each step. */
  limitTruth(): LimitTruth & { maxNumSeqs: number; maxNumBatchedTokens: number } {
    return {
      ...structuredClone(this.limits),
      maxNumSeqs: this.opts.maxNumSeqs,
      maxNumBatchedTokens: this.opts.maxNumBatchedTokens,
    };
  }

  prefixCacheTruth(): PrefixCacheTruth & { requestsRecent: RequestTruth[] } {
    const r = this.recent;
    const rows = r.length < RECENT ? r.slice() : [...r.slice(this.recentNext), ...r.slice(0, this.recentNext)];
    return { ...this.pool.truth(), requestsRecent: rows };
  }

  /** Starts the loop on the next turn (never inside the caller: requests submitted together batch together). */
  private kick(): void {
    if (!this.timerArmed && !this.inFlight) {
      this.timerArmed = true;
      setImmediate(this.loop);
    }
  }

  private loop = (): void => {
    this.timerArmed = false;
    if (this.inFlight || this.closed) return;
    const clock = this.opts.clock;
    // --speed zero: run steps for up to 20 ms per macrotask, so each socket gets several events per write.
    const burstEnd = clock() + 20;
    for (;;) {
      const now = clock();
      while (this.pending.length && this.pending.peek()!.queuedAt <= now) this.waiting.push(this.pending.shift()!);
      const batch = this.schedule();
      if (batch.length === 0) {
        // Idle: the next step starts when work arrives, not on the old schedule.
        this.lastEnd = Number.NEGATIVE_INFINITY;
        this.opts.onIdle?.();
        this.publishGauges();
        if (this.pending.length) this.waitUntil(this.pending.peek()!.queuedAt, this.loop);
        else if (this.idle) this.notifyDrained();
        return;
      }
      // The step's parts (stepMs() is their sum): the request spans' detailed times take the split.
      const meanMs = this.model.componentsInto(this.shape, this.parts);
      if (this.blocker === "none") this.blocker = this.model.perSeqBound(this.shape) ?? "none";
      const jitter = this.opts.speedZero ? 1 : this.rng.lognormalUnitMean(this.model.profile.cost.jitterSigma);
      const dur = this.opts.speedZero ? 0 : (meanMs * jitter) / this.opts.timeScale;
      // Chain steps on absolute deadlines so timer lateness (GC, CPU contention) does not accumulate:
      // a late step is followed by shorter waits until the schedule is met again (up to CATCH_UP_MS).
      const start = this.lastEnd >= now - CATCH_UP_MS ? this.lastEnd : now;
      const end = start + dur;
      this.lastEnd = end;
      const lt = this.limits[this.blocker];
      lt.steps++;
      lt.tokens += this.model.tokens(this.shape);
      lt.seqs += this.shape.prefillSeqs + this.shape.decodeSeqs;
      lt.simMs += this.opts.speedZero ? 0 : meanMs * jitter;
      const rec: StepRecord = {
        index: this.stepIndex++,
        startMs: start,
        endMs: end,
        shape: { ...this.shape },
        jitter,
      };
      // The request spans' detailed times (vLLM --collect-detailed-traces) split the step's time in these shares.
      const sampling = meanMs > 0 ? this.parts[SAMPLING]! / meanMs : 0;
      const scheduler = meanMs > 0 ? this.parts[SCHEDULER]! / meanMs : 0;
      this.inFlight = {
        batch,
        rec,
        meanMs,
        blocker: this.blocker,
        forwardShare: 1 - sampling - scheduler,
        samplingShare: sampling,
        schedulerShare: scheduler,
      };
      this.opts.onStepBegin?.(rec, meanMs);
      if (end > clock()) {
        this.waitUntil(end, this.endStep);
        return;
      }
      this.completeStep();
      // --speed zero: keep stepping in this macrotask for a short burst, then let I/O run.
      if (clock() >= burstEnd) {
        this.timerArmed = true;
        setImmediate(this.loop);
        return;
      }
    }
  };

  private endStep = (): void => {
    this.completeStep();
    this.loop();
  };

  /** Waits for an absolute deadline: a timer to ~1 ms before it, then setImmediate polling. */
  private waitUntil(deadline: number, fn: () => void): void {
    this.timerArmed = true;
    const tick = (): void => {
      const rem = deadline - this.opts.clock();
      // Chunked past Node's timer limit: a longer delay fires at once, and this would spin.
      if (rem > 1.6) setTimeout(tick, Math.min(MAX_TIMER_MS, rem - 1.3));
      else if (rem > 0) setImmediate(tick);
      else {
        this.timerArmed = false;
        fn();
      }
    };
    tick();
  }

  private notifyDrained(): void {
    const w = this.drainWaiters;
    this.drainWaiters = [];
    for (const r of w) r();
  }

  private blocksFor(tokens: number): number {
    return Math.ceil(tokens / this.blockSize);
  }

  /** Grows a running request's KV to `tokens`; preempts the newest running requests if needed. */
  private reserve(req: SimRequest, tokens: number): boolean {
    const need = this.blocksFor(tokens) - req.blockIds.length;
    if (need <= 0) return true;
    while (this.pool.numFree < need) {
      const victim = this.running[this.running.length - 1];
      if (!victim) return false;
      // vLLM preempts the lowest-priority (newest) running request, possibly the one asking.
      this.preempt(victim);
      if (victim === req) return false;
    }
    this.pool.allocate(req, need);
    return true;
  }

  /** Names the request's blocks that will be full after this step (vLLM caches them when it allocates). */
  private nameBlocks(req: SimRequest, computedAfter: number): void {
    if (!this.pool.caching) return;
    const known = Math.min(computedAfter, req.promptLen + req.generated);
    if (Math.floor(known / this.blockSize) > req.hashes.length)
      this.pool.nameFullBlocks(req, known, req.promptHashes ?? NO_BLOCKS, req.tokenAt);
  }

  /** Hashes of the full blocks of the request's first `tokens` tokens (prompt, then output after a preemption). */
  private hashesFor(req: SimRequest, tokens: number): readonly number[] {
    const bs = this.blockSize;
    req.promptHashes ??= blockHashes(req.promptIds, req.promptLen, bs);
    const ph = req.promptHashes;
    if (tokens <= req.promptLen) return ph;
    const out = ph.slice();
    const buf = new Uint32Array(bs);
    for (let k = out.length; (k + 1) * bs <= tokens; k++) {
      for (let i = 0; i < bs; i++) buf[i] = req.tokenAt(k * bs + i);
      out.push(chainHash(k === 0 ? ROOT_HASH : out[k - 1]!, buf, 0, bs));
    }
    return out;
  }

  private preempt(req: SimRequest): void {
    this.running.pop();
    this.freeBlocks(req);
    req.computed = 0;
    req.target = req.promptLen + req.generated;
    req.preemptions++;
    this.m.preemptions++;
    this.waiting.unshift(req);
  }

  /** vLLM V1 order: running requests first (decode or their next prefill chunk), then waiting. */
  private schedule(): Scheduled[] {
    const s = this.shape;
    s.prefillTokens = 0;
    s.prefillSeqs = 0;
    s.prefillAttnTokenCtx = 0;
    s.prefillKvTokens = 0;
    s.decodeSeqs = 0;
    s.decodeContextTokens = 0;
    const out: Scheduled[] = [];
    let budget = this.opts.maxNumBatchedTokens;
    if (this.running.some((r) => r.aborted)) {
      for (const r of this.running) if (r.aborted) this.finishAborted(r);
      this.running = this.running.filter((r) => !r.aborted);
    }
    for (let i = 0; i < this.running.length && budget > 0; i++) {
      const req = this.running[i]!;
      if (req.computed < req.target) {
        const n = Math.min(req.target - req.computed, budget);
        if (!this.reserve(req, req.computed + n)) continue;
        this.nameBlocks(req, req.computed + n);
        this.addPrefill(out, req, n);
        budget -= n;
      } else {
        const n = Math.min(1 + this.specTokens, budget);
        if (!this.reserve(req, req.promptLen + req.generated + n)) continue;
        this.nameBlocks(req, req.computed + n);
        out.push({ req, tokens: n, prefill: false });
        s.decodeSeqs++;
        s.decodeContextTokens += req.promptLen + req.generated;
        budget -= n;
      }
    }
    while (budget > 0 && this.waiting.length && this.running.length < this.opts.maxNumSeqs) {
      const req = this.waiting.peek()!;
      if (req.aborted) {
        this.waiting.shift();
        this.finishAborted(req);
        continue;
      }
      const first = req.scheduledAt < 0;
      const pool = this.pool;
      // The longest run of named leading blocks; at least one token is always computed (vLLM: num_tokens - 1).
      const hashes = pool.caching ? this.hashesFor(req, req.target) : NO_BLOCKS;
      const hit = pool.caching ? pool.lookup(hashes, Math.floor((req.target - 1) / this.blockSize)) : NO_BLOCKS;
      const cached = hit.length * this.blockSize;
      const n = Math.min(req.target - cached, budget);
      // New requests only take free blocks (cached ones nobody holds count as free); they never preempt running ones.
      const fresh = this.blocksFor(cached + n) - hit.length;
      if (pool.numFree < fresh + pool.evictableAmong(hit)) break;
      this.waiting.shift();
      pool.hold(req, hit);
      for (let k = 0; k < hit.length; k++) req.hashes.push(hashes[k]!);
      pool.allocate(req, fresh);
      req.computed = cached;
      if (pool.caching) {
        const st = pool.stats;
        if (req.preemptions === 0) {
          st.requests++;
          st.queries += req.target;
          st.hits += cached;
          this.m.prefixQueries += req.target;
          this.m.prefixHits += cached;
        } else {
          // vLLM counts a preempted request's re-lookup apart and does not export it.
          st.preemptedRequests++;
          st.preemptedQueries += req.target;
          st.preemptedHits += cached;
        }
      }
      if (first) {
        req.scheduledAt = this.opts.clock();
        req.cachedTokens = cached;
      }
      this.nameBlocks(req, cached + n);
      this.running.push(req);
      this.addPrefill(out, req, n);
      budget -= n;
    }
    // The sim's truth of what held the queue back this step (docs/sim.md "Limit truth").
    const queued = this.waiting.length > 0 && !this.waiting.peek()!.aborted;
    this.blocker = !queued
      ? "none"
      : this.running.length >= this.opts.maxNumSeqs
        ? "max-num-seqs"
        : budget <= 0
          ? "token-budget"
          : "kv-capacity";
    return out;
  }

  private addPrefill(out: Scheduled[], req: SimRequest, n: number): void {
    const s = this.shape;
    out.push({ req, tokens: n, prefill: true });
    s.prefillTokens += n;
    s.prefillSeqs++;
    s.prefillAttnTokenCtx += n * (req.computed + n / 2);
    s.prefillKvTokens += req.computed + n;
  }

  private completeStep(): void {
    const f = this.inFlight!;
    this.inFlight = null;
    this.opts.onStep?.(f.rec);
    const now = this.opts.clock();
    const m = this.m;
    // Simulated seconds (wall ms × scale / 1000): the histograms read as on the profiled deployment.
    const k = this.simPerWall / 1000;
    let iterTokens = 0;
    let anyOutput = false;
    let finishedAny = false;
    // --speed zero leaves flushing to the sinks: a burst of steps in one macrotask goes out as one
    // write per stream.
    const sinks = this.opts.speedZero ? null : this.touched;
    // The step as its requests lived it, on the wall clock in simulated ms: from its place on the deadline chain (or the
    // previous step's actual end, if later; or the request's scheduling) to done. That is the period the decode time
    // sees: a timer's lateness before the step was issued is absorbed by the chain, not time outside the model (issued
    // → done left it there: ~0.6 ms a step on a busy host, read as host time). Never more than the span's inference.
    const stepFrom = Math.max(f.rec.startMs, this.lastDone);
    this.lastDone = now;
    for (const { req, tokens, prefill } of f.batch) {
      if (req.aborted || req.finished) continue;
      const stepSim = this.opts.speedZero
        ? f.meanMs
        : Math.max(0, now - Math.max(stepFrom, req.scheduledAt)) * this.simPerWall;
      req.stepEnds?.push(now);
      req.forwardMs += stepSim * f.forwardShare;
      req.executeMs += stepSim * (f.forwardShare + f.samplingShare);
      req.schedulerMs += stepSim * f.schedulerShare;
      let emit = 0;
      if (prefill) {
        req.computed += tokens;
        req.prefillModelMs += f.meanMs;
        if (req.computed < req.target) continue; // an intermediate chunk: no output
        emit = 1;
        if (req.firstTokenAt < 0) {
          // The whole prompt is credited in the batch that emits the first token.
          iterTokens += req.promptLen;
          m.promptTokens += req.promptLen;
        }
      } else {
        emit = 1;
        if (this.specTokens > 0) {
          let acc = 0;
          while (acc < this.specTokens && this.rng.next() < this.opts.acceptance) {
            m.specAcceptedPerPos[acc]!++;
            acc++;
          }
          m.specDrafts++;
          m.specDraftTokens += this.specTokens;
          m.specAccepted += acc;
          emit += acc;
        }
      }
      const from = req.generated;
      let finish: FinishReason | null = null;
      let count = 0;
      while (count < emit) {
        count++;
        const idx = from + count - 1;
        if (idx + 1 >= req.maxTokens) {
          finish = "length";
          break;
        }
        if (!req.ignoreEos && idx + 1 >= req.eosAt && idx + 1 >= req.minTokens) {
          finish = "stop";
          break;
        }
        if (req.stop && idx + 1 >= req.minTokens && this.checkStop(req, idx)) {
          finish = "stop";
          break;
        }
      }
      req.generated += count;
      req.computed = req.promptLen + req.generated - 1;
      req.target = req.computed;
      iterTokens += count;
      anyOutput = true;
      m.generationTokens += count;
      if (req.firstTokenAt < 0) {
        req.firstTokenAt = now;
        req.firstTokenDue = f.rec.endMs;
        m.ttft.observe((now - req.arrival) * k);
      } else m.itl.observe((now - req.lastTokenAt) * k);
      req.lastTokenAt = now;
      if (finish) {
        req.finished = finish;
        finishedAny = true;
        this.limits[f.blocker].finished++;
        this.recordFinished(req, now);
      }
      req.sink.onTokens(req, from, count, finish);
      if (sinks && sinks[sinks.length - 1] !== req.sink) sinks.push(req.sink);
    }
    // The tokens leave at the step's end, as stamped.
    if (sinks) {
      for (const k of sinks) k.flush?.();
      sinks.length = 0;
    }
    if (anyOutput) m.iterationTokens.observe(iterTokens);
    if (finishedAny) {
      this.running = this.running.filter((r) => {
        if (!r.finished) return true;
        this.freeBlocks(r);
        return false;
      });
    }
    this.publishGauges();
  }

  private checkStop(req: SimRequest, idx: number): boolean {
    const piece = tokenText(req.seed, idx);
    const before = req.stopText;
    req.stopText += piece;
    for (const s of req.stop!) {
      const at = req.stopText.indexOf(s, Math.max(0, before.length - s.length + 1));
      if (at >= 0) {
        req.stopReason = s;
        req.lastTextOverride = req.stopText.slice(before.length, Math.max(before.length, at));
        return true;
      }
    }
    if (req.stopText.length > 256) req.stopText = req.stopText.slice(-128);
    return false;
  }

  private recordFinished(req: SimRequest, now: number): void {
    const m = this.m;
    m.success[req.finished!]++;
    const k = this.simPerWall / 1000;
    const s = (ms: number) => ms * k;
    m.e2e.observe(s(now - req.arrival));
    m.queue.observe(s(req.scheduledAt - req.queuedAt));
    m.prefill.observe(s(req.firstTokenAt - req.scheduledAt));
    const decode = s(now - req.firstTokenAt);
    m.decode.observe(decode);
    m.inference.observe(s(now - req.scheduledAt));
    m.tpot.observe(req.generated > 1 ? decode / (req.generated - 1) : 0);
    m.requestPromptTokens.observe(req.promptLen);
    const row: RequestTruth = {
      id: req.id,
      promptTokens: req.promptLen,
      cachedTokens: req.cachedTokens,
      generatedTokens: req.generated,
      preemptions: req.preemptions,
      prefillModelMs: req.prefillModelMs,
      name: req.name,
      arrivalMs: req.arrival,
      queuedMs: req.queuedAt,
      scheduledMs: req.scheduledAt,
      firstTokenMs: req.firstTokenAt,
      firstTokenDueMs: req.firstTokenDue,
      ttftMs: (req.firstTokenAt - req.arrival) * this.simPerWall,
      forwardMs: req.forwardMs,
      executeMs: req.executeMs,
      schedulerMs: req.schedulerMs,
    };
    if (this.recent.length < RECENT) this.recent.push(row);
    else this.recent[this.recentNext] = row;
    this.recentNext = (this.recentNext + 1) % RECENT;
    m.requestGenerationTokens.observe(req.generated);
    m.requestMaxGenTokens.observe(req.maxTokens);
    m.paramsN.observe(req.n);
    if (req.paramsMaxTokens !== null) m.paramsMaxTokens.observe(req.paramsMaxTokens);
    this.opts.onFinished?.(req, now);
  }

  private publishGauges(): void {
    this.m.running = this.running.length;
    // The engine-core waiting queue: requests still in the frontend (tokenization, IPC) are not in it.
    this.m.waiting = this.waiting.length;
    // Cached blocks nobody holds are free, as in vLLM's kv_cache_usage_perc.
    this.m.kvUsage = this.pool.usedBlocks / this.pool.numBlocks;
  }
}
