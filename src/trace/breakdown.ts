// Per-step and overall time decomposition (pure): GPU busy per class, idle (host-bound vs other),
// communication exposed vs overlapped, kernel counts, launch overhead, top kernels.
import { COMM_CLASS, KERNEL_CLASSES, type KernelClass } from "./classify.ts";
import { findSorted, KIND_MEMCPY, type TraceModel } from "./events.ts";
import type { Segmentation, StepKind, StepSource } from "./steps.ts";

export type ClassTimes = Partial<Record<KernelClass, number>>;

export interface TopKernel {
  name: string;
  class: KernelClass;
  rule: string;
  count: number;
  totalUs: number;
  meanUs: number;
  /** Share of all GPU kernel time. */
  share: number;
  /** CPU op that launched it (first seen), e.g. aten::mm. */
  launchedBy?: string;
  /** The evidence that decided its class: "rule gemm.tensile", "op aten::addmm" or "default". */
  decidedBy?: string;
}

/**
 * GPU time line of a set of activities, as TraceLens's gpu_timeline.csv (and HTA's temporal
 * breakdown) define it: span from first start to last end; busy = union of all; computation =
 * union of kernels and memsets that are not communication; exposed communication = communication
 * not under computation; exposed memcpy = memcpy under neither. idle = span − busy.
 */
export interface Timeline {
  spanUs: number;
  busyUs: number;
  idleUs: number;
  computeUs: number;
  commExposedUs: number;
  memcpyExposedUs: number;
  commUs: number;
  memcpyUs: number;
}

export interface StepBreakdown {
  index: number;
  name: string;
  kind: StepKind;
  /** Annotation format the step came from (vllm, sglang, profiler-step) or gap. */
  source?: StepSource;
  /** Requests and scheduled tokens in the batch, from the annotation. */
  batch?: { requests?: number; tokens?: number };
  kvTokens?: number;
  forwardMode?: string;
  /** Time line over this step's own activities (first start to last end), TraceLens's definitions. */
  timeline: Timeline;
  /** GPU activities that ran as part of a CUDA/HIP graph replay this step launched. */
  graphKernels: number;
  /** Start of the step's GPU window (µs, trace clock). */
  startUs: number;
  /** Window length: from the previous step's last kernel end to this step's last kernel end. */
  durUs: number;
  busyUs: number;
  /** Busy time split by class; overlapping compute is shared, communication hidden under compute counts as compute. */
  busyByClass: ClassTimes;
  /** Sum of kernel durations per class for kernels this step launched. */
  kernelUsByClass: ClassTimes;
  idleUs: number;
  /** GPU idle while nothing had been submitted yet: waiting on the host. */
  idleHostUs: number;
  idleOtherUs: number;
  commExposedUs: number;
  commOverlappedUs: number;
  kernels: number;
  kernelsByClass: Partial<Record<KernelClass, number>>;
  /** All-reduce kernels (communication other than gather/scatter/all-to-all/p2p) and their total time. */
  allReduceCalls: number;
  allReduceUs: number;
  launch: { calls: number; graphLaunches: number; cpuUs: number; meanLatencyUs?: number };
  topKernels: Array<{ name: string; class: KernelClass; totalUs: number; count: number }>;
  cpuStartUs?: number;
  cpuDurUs?: number;
  tokens?: { contextRequests?: number; contextTokens?: number; generationRequests?: number; generationTokens?: number };
  /** The step was cut by the profiling window (or launched work that is missing from the trace). */
  clipped: boolean;
  clipReason?: string;
}

export interface StepKindSummary {
  kind: StepKind;
  count: number;
  durUs: { mean: number; p50: number; p90: number; min: number; max: number };
  meanBusyByClass: ClassTimes;
  meanIdleUs: number;
  meanIdleHostUs: number;
  meanCommExposedUs: number;
  meanKernels: number;
  /** e.g. "decode step 18.70 ms = gemm 13.10 + attention 1.20 + … + idle 2.00" */
  headline: string;
}

export interface Overall {
  /** First GPU activity start to last end (µs). */
  spanUs: number;
  busyUs: number;
  busyByClass: ClassTimes;
  kernelUsByClass: ClassTimes;
  kernelCountByClass: Partial<Record<KernelClass, number>>;
  idleUs: number;
  idleHostUs: number;
  idleOtherUs: number;
  commExposedUs: number;
  commOverlappedUs: number;
  kernels: number;
  /** Kernels not launched inside any step. */
  kernelsOutsideSteps: number;
  launch: { calls: number; graphLaunches: number; cpuUs: number; medianLatencyUs?: number };
  streams: number;
  topKernels: TopKernel[];
  byKind: StepKindSummary[];
  /** Time line over all GPU activities in the trace (TraceLens's / HTA's definitions). */
  timeline: Timeline;
}

const NC = KERNEL_CLASSES.length;
const PRODUCES_GPU_WORK = /LaunchKernel|GraphLaunch|LaunchCooperative|ModuleLaunch|Memcpy|Memset/i;
const GRAPH_LAUNCH = /GraphLaunch/i;
const NOT_ALL_REDUCE =
  /AllGather|all_gather|allgather|ReduceScatter|reduce_scatter|AllToAll|all_to_all|alltoall|Broadcast|SendRecv|Send_|Recv_|dispatch|combine/i;

/** Small binary min-heap of row indices keyed by a Float64Array. */
class EndHeap {
  private a: number[] = [];
  constructor(private readonly key: Float64Array) {}
  get size(): number {
    return this.a.length;
  }
  peekKey(): number {
    return this.key[this.a[0]!]!;
  }
  push(i: number): void {
    const a = this.a;
    const k = this.key;
    a.push(i);
    let j = a.length - 1;
    while (j > 0) {
      const p = (j - 1) >> 1;
      if (k[a[p]!]! <= k[i]!) break;
      a[j] = a[p]!;
      j = p;
    }
    a[j] = i;
  }
  pop(): number {
    const a = this.a;
    const k = this.key;
    const top = a[0]!;
    const last = a.pop()!;
    if (a.length) {
      let j = 0;
      const n = a.length;
      for (;;) {
        let c = 2 * j + 1;
        if (c >= n) break;
        if (c + 1 < n && k[a[c + 1]!]! < k[a[c]!]!) c++;
        if (k[a[c]!]! >= k[last]!) break;
        a[j] = a[c]!;
        j = c;
      }
      a[j] = last;
    }
    return top;
  }
}

export interface BreakdownInput {
  model: TraceModel;
  seg: Segmentation;
  launchIdx: Int32Array;
  order: Uint32Array;
  topN?: number;
}

export function computeBreakdown({ model, seg, launchIdx, order, topN = 20 }: BreakdownInput): {
  steps: StepBreakdown[];
  overall: Overall;
} {
  // Each pass over the kernels is a function of its own: in a fresh process every loop runs cold,
  // and a loop in one large function is compiled (on-stack) with the whole function around it, once
  // per loop and again after each deopt where the code after the loop had not run yet.
  const { gpu, runtime } = model;
  const S = seg.steps.length;
  const stepOf = seg.stepOf;
  const runtimeStep = seg.runtimeStep.slice();
  if (seg.mode === "gap" || seg.mode === "period" || seg.mode === "none")
    launchesToSteps(runtimeStep, stepOf, launchIdx, gpu.n);
  const end = kernelEnds(gpu);
  const a = attribute(model, stepOf, launchIdx, end, S, runtime.n);
  const { gStart, gEnd, kUs, kCnt, firstKernelOfLaunch, arCalls, arUs, streams } = a;

  // Step windows partition the GPU timeline: each ends where its last kernel ends.
  const wStart = new Float64Array(S);
  const wEnd = new Float64Array(S);
  let prevEnd = Number.NEGATIVE_INFINITY;
  for (let s = 0; s < S; s++) {
    const def = seg.steps[s]!;
    const hasWork = Number.isFinite(gStart[s]!);
    if (!Number.isFinite(prevEnd)) {
      const cpu = def.cpuStartUs;
      const st = hasWork ? (cpu !== undefined ? Math.min(cpu, gStart[s]!) : gStart[s]!) : (cpu ?? 0);
      wStart[s] = st;
      wEnd[s] = hasWork ? gEnd[s]! : st;
    } else {
      wStart[s] = prevEnd;
      wEnd[s] = hasWork ? Math.max(prevEnd, gEnd[s]!) : prevEnd;
    }
    if (hasWork || Number.isFinite(prevEnd)) prevEnd = wEnd[s]!;
  }
  const { busy, idleHost, idleOther, commExp, commOvl } = sweep(model, order, end, launchIdx, wStart, wEnd);

  const { lCalls, lGraph, lCpu, lLatSum, lLatN, missing, graphName, latencies } = launchCalls(
    model,
    runtimeStep,
    firstKernelOfLaunch,
    S,
  );
  // Top kernels per step: bucket kernels by step, then accumulate per name.
  const { stepCount, byStep } = bucketByStep(stepOf, order, S, gpu.n);
  const graphKernels = graphKernelCounts(model, stepOf, launchIdx, graphName, S);
  const scratch = new Float64Array(model.names.length);
  const scratchN = new Int32Array(model.names.length);

  // Only Kineto's "Record Window End" marker tells where recording stopped.
  const windowEnd = model.windowEndTs ?? Number.POSITIVE_INFINITY;
  const steps: StepBreakdown[] = [];
  for (let s = 0; s < S; s++) {
    const def = seg.steps[s]!;
    const topKernels = stepTopKernels(model, byStep, stepCount[s]!, stepCount[s + 1]!, scratch, scratchN);
    const busyByClass = classTimes(busy, s);
    const busyUs = sumRow(busy, s);
    const durUs = wEnd[s]! - wStart[s]!;
    let clipReason: string | undefined;
    if (!Number.isFinite(gStart[s]!)) clipReason = "no GPU work recorded for this step";
    else if (missing[s]! > 0) clipReason = `${missing[s]} launches have no GPU activity in the trace`;
    else if (def.cpuEndUs !== undefined && def.cpuEndUs > windowEnd)
      clipReason = "the step runs past the end of the trace";
    const kernels = sumRow(kCnt, s);
    steps.push({
      index: s,
      name: def.name,
      kind: def.kind,
      ...(def.source ? { source: def.source } : {}),
      ...(def.batch ? { batch: def.batch } : {}),
      ...(def.kvTokens !== undefined ? { kvTokens: def.kvTokens } : {}),
      ...(def.forwardMode ? { forwardMode: def.forwardMode } : {}),
      timeline: timelineOf(gpu, byStep, stepCount[s]!, stepCount[s + 1]!),
      graphKernels: graphKernels[s]!,
      startUs: round(wStart[s]!),
      durUs: round(durUs),
      busyUs: round(busyUs),
      busyByClass,
      kernelUsByClass: classTimes(kUs, s),
      idleUs: round(idleHost[s]! + idleOther[s]!),
      idleHostUs: round(idleHost[s]!),
      idleOtherUs: round(idleOther[s]!),
      commExposedUs: round(commExp[s]!),
      commOverlappedUs: round(commOvl[s]!),
      kernels,
      kernelsByClass: classCounts(kCnt, s),
      allReduceCalls: arCalls[s]!,
      allReduceUs: round(arUs[s]!),
      launch: {
        calls: lCalls[s]!,
        graphLaunches: lGraph[s]!,
        cpuUs: round(lCpu[s]!),
        ...(lLatN[s]! > 0 ? { meanLatencyUs: round(lLatSum[s]! / lLatN[s]!) } : {}),
      },
      topKernels,
      ...(def.cpuStartUs !== undefined
        ? { cpuStartUs: round(def.cpuStartUs), cpuDurUs: round((def.cpuEndUs ?? def.cpuStartUs) - def.cpuStartUs) }
        : {}),
      ...(def.contextRequests !== undefined || def.generationRequests !== undefined
        ? {
            tokens: {
              contextRequests: def.contextRequests,
              contextTokens: def.contextTokens,
              generationRequests: def.generationRequests,
              generationTokens: def.generationTokens,
            },
          }
        : {}),
      clipped: clipReason !== undefined,
      ...(clipReason ? { clipReason } : {}),
    });
  }

  // Overall totals: every slot, inside and outside steps.
  const allBusy = new Float64Array(NC);
  const allKUs = new Float64Array(NC);
  const allKCnt = new Float64Array(NC);
  for (let r = 0; r <= S; r++)
    for (let c = 0; c < NC; c++) {
      allBusy[c]! += busy[r * NC + c]!;
      allKUs[c]! += kUs[r * NC + c]!;
      allKCnt[c]! += kCnt[r * NC + c]!;
    }
  const sumArr = (a: Float64Array) => a.reduce((x, y) => x + y, 0);

  // Top kernels overall.
  const { nameUs, nameN, nameExt } = nameTotals(model);
  const totalKernelUs = sumArr(allKUs);
  const topIdx: number[] = [];
  for (let nm = 0; nm < model.names.length; nm++) if (nameN[nm]! > 0) topIdx.push(nm);
  topIdx.sort((a, b) => nameUs[b]! - nameUs[a]!);
  const topKernels: TopKernel[] = topIdx.slice(0, topN).map((nm) => {
    const ext = nameExt[nm]!;
    const op = Number.isNaN(ext) ? -1 : findSorted(model.cpuOpExt, ext);
    return {
      name: model.names[nm]!,
      class: model.nameClass[nm]!.class as KernelClass,
      rule: model.nameClass[nm]!.rule,
      count: nameN[nm]!,
      totalUs: round(nameUs[nm]!),
      meanUs: round(nameUs[nm]! / nameN[nm]!),
      share: totalKernelUs > 0 ? round4(nameUs[nm]! / totalKernelUs) : 0,
      ...(op >= 0 ? { launchedBy: model.names[model.cpuOpName[op]!]! } : {}),
      ...(model.nameClass[nm]!.decidedBy ? { decidedBy: model.nameClass[nm]!.decidedBy } : {}),
    };
  });

  const { first, last } = span(gpu.start, end);
  latencies.sort((a, b) => a - b);
  const overall: Overall = {
    spanUs: gpu.n ? round(last - first) : 0,
    busyUs: round(sumArr(allBusy)),
    busyByClass: toClassTimes(allBusy),
    kernelUsByClass: toClassTimes(allKUs),
    kernelCountByClass: toClassCounts(allKCnt),
    idleUs: round(sumArr(idleHost) + sumArr(idleOther)),
    idleHostUs: round(sumArr(idleHost)),
    idleOtherUs: round(sumArr(idleOther)),
    commExposedUs: round(sumArr(commExp)),
    commOverlappedUs: round(sumArr(commOvl)),
    kernels: gpu.n,
    kernelsOutsideSteps: sumRow(kCnt, S),
    launch: {
      calls: sumArr(lCalls),
      graphLaunches: sumArr(lGraph),
      cpuUs: round(sumArr(lCpu)),
      ...(latencies.length ? { medianLatencyUs: round(latencies[Math.floor(latencies.length / 2)]!) } : {}),
    },
    streams: streams.size,
    topKernels,
    byKind: summarizeKinds(steps),
    timeline: timelineOf(gpu, order, 0, order.length),
  };
  return { steps, overall };
}

/** Gap, period and none modes: a launch call belongs to the step of the kernels it launched. */
function launchesToSteps(runtimeStep: Int32Array, stepOf: Int32Array, launchIdx: Int32Array, n: number): void {
  for (let k = 0; k < n; k++) {
    const li = launchIdx[k]!;
    if (li >= 0 && runtimeStep[li] === -1) runtimeStep[li] = stepOf[k]!;
  }
}

function kernelEnds(gpu: TraceModel["gpu"]): Float64Array {
  const end = new Float64Array(gpu.n);
  for (let k = 0; k < gpu.n; k++) end[k] = gpu.start[k]! + gpu.dur[k]!;
  return end;
}

/** Per-step kernel attribution: time and count per class (row S: outside any step), each step's
 * first start and last end, all-reduce calls, streams, and each launch's first kernel start. */
function attribute(
  model: TraceModel,
  stepOf: Int32Array,
  launchIdx: Int32Array,
  end: Float64Array,
  S: number,
  runtimeN: number,
) {
  const gpu = model.gpu;
  const gStart = new Float64Array(S).fill(Number.POSITIVE_INFINITY);
  const gEnd = new Float64Array(S).fill(Number.NEGATIVE_INFINITY);
  const kUs = new Float64Array((S + 1) * NC); // row S = outside any step
  const kCnt = new Float64Array((S + 1) * NC);
  const firstKernelOfLaunch = new Float64Array(runtimeN).fill(Number.POSITIVE_INFINITY);
  const isAR = new Uint8Array(model.names.length);
  model.nameClass.forEach((c, i) => {
    if (c.class === "communication" && !NOT_ALL_REDUCE.test(model.names[i]!)) isAR[i] = 1;
  });
  const arCalls = new Float64Array(S + 1);
  const arUs = new Float64Array(S + 1);
  const streams = new Set<number>();
  for (let k = 0; k < gpu.n; k++) {
    const s = stepOf[k]!;
    const row = s >= 0 ? s : S;
    const c = gpu.cls[k]!;
    kUs[row * NC + c]! += gpu.dur[k]!;
    kCnt[row * NC + c]!++;
    if (isAR[gpu.name[k]!]) {
      arCalls[row]!++;
      arUs[row]! += gpu.dur[k]!;
    }
    streams.add(gpu.stream[k]!);
    if (s >= 0) {
      if (gpu.start[k]! < gStart[s]!) gStart[s] = gpu.start[k]!;
      if (end[k]! > gEnd[s]!) gEnd[s] = end[k]!;
    }
    const li = launchIdx[k]!;
    if (li >= 0 && gpu.start[k]! < firstKernelOfLaunch[li]!) firstKernelOfLaunch[li] = gpu.start[k]!;
  }
  return { gStart, gEnd, kUs, kCnt, firstKernelOfLaunch, arCalls, arUs, streams };
}

/** Busy time per class and slot (a step's window, or row S outside them), idle host-bound and
 * other, and communication exposed and overlapped: a sweep over elementary intervals between
 * kernel boundaries, cut at window edges. */
function sweep(
  model: TraceModel,
  order: Uint32Array,
  end: Float64Array,
  launchIdx: Int32Array,
  wStart: Float64Array,
  wEnd: Float64Array,
) {
  const { gpu, runtime } = model;
  const S = wStart.length;
  const busy = new Float64Array((S + 1) * NC);
  const idleHost = new Float64Array(S + 1);
  const idleOther = new Float64Array(S + 1);
  const commExp = new Float64Array(S + 1);
  const commOvl = new Float64Array(S + 1);
  const cnt = new Int32Array(NC);
  let active = 0;
  let w = 0;
  const piece = (t0: number, t1: number, mode: number): void => {
    // mode 0 busy, 1 idle host-bound, 2 idle other
    while (t0 < t1) {
      while (w < S && wEnd[w]! <= t0) w++;
      let slot: number;
      let segEnd: number;
      if (w >= S || t0 < wStart[w]!) {
        slot = S;
        segEnd = w < S ? Math.min(t1, wStart[w]!) : t1;
      } else {
        slot = w;
        segEnd = Math.min(t1, wEnd[w]!);
      }
      const L = segEnd - t0;
      if (mode === 1) idleHost[slot]! += L;
      else if (mode === 2) idleOther[slot]! += L;
      else {
        const nonComm = active - cnt[COMM_CLASS]!;
        if (nonComm > 0) {
          for (let c = 0; c < NC; c++)
            if (c !== COMM_CLASS && cnt[c]! > 0) busy[slot * NC + c]! += (L * cnt[c]!) / nonComm;
          if (cnt[COMM_CLASS]! > 0) commOvl[slot]! += L;
        } else {
          busy[slot * NC + COMM_CLASS]! += L;
          commExp[slot]! += L;
        }
      }
      t0 = segEnd;
    }
  };
  const heap = new EndHeap(end);
  let t = gpu.n ? gpu.start[order[0]!]! : 0;
  if (S > 0 && Number.isFinite(wStart[0]!) && wStart[0]! < t) t = wStart[0]!;
  for (let j = 0; j < order.length; j++) {
    const k = order[j]!;
    const s = gpu.start[k]!;
    while (heap.size && heap.peekKey() <= s) {
      const e = heap.peekKey();
      const i = heap.pop();
      if (e > t) {
        piece(t, e, 0);
        t = e;
      }
      cnt[gpu.cls[i]!]!--;
      active--;
    }
    if (s > t) {
      if (active > 0) piece(t, s, 0);
      else {
        const li = launchIdx[k]!;
        // Host-bound: the launch call had not started when the GPU went idle.
        piece(t, s, li >= 0 && runtime.ts[li]! >= t ? 1 : 2);
      }
      t = s;
    }
    heap.push(k);
    cnt[gpu.cls[k]!]!++;
    active++;
  }
  while (heap.size) {
    const e = heap.peekKey();
    const i = heap.pop();
    if (e > t) {
      piece(t, e, 0);
      t = e;
    }
    cnt[gpu.cls[i]!]!--;
    active--;
  }
  return { busy, idleHost, idleOther, commExp, commOvl };
}

/** Launch calls per step (row S: outside any step): calls that produce GPU work, graph launches,
 * their CPU time, launch latency to the first kernel, and launches whose GPU work is missing. */
function launchCalls(model: TraceModel, runtimeStep: Int32Array, firstKernelOfLaunch: Float64Array, S: number) {
  const runtime = model.runtime;
  const lCalls = new Float64Array(S + 1);
  const lGraph = new Float64Array(S + 1);
  const lCpu = new Float64Array(S + 1);
  const lLatSum = new Float64Array(S + 1);
  const lLatN = new Float64Array(S + 1);
  const missing = new Int32Array(S + 1);
  const graphName = new Map<number, boolean>();
  const producesWork = new Map<number, boolean>();
  const latencies: number[] = [];
  for (let i = 0; i < runtime.n; i++) {
    const nm = runtime.name[i]!;
    let pw = producesWork.get(nm);
    if (pw === undefined) {
      pw = PRODUCES_GPU_WORK.test(model.names[nm]!);
      producesWork.set(nm, pw);
      graphName.set(nm, GRAPH_LAUNCH.test(model.names[nm]!));
    }
    if (!pw) continue;
    const s = runtimeStep[i]!;
    const row = s >= 0 ? s : S;
    lCalls[row]!++;
    if (graphName.get(nm)) lGraph[row]!++;
    lCpu[row]! += runtime.dur[i]!;
    const fk = firstKernelOfLaunch[i]!;
    if (Number.isFinite(fk)) {
      const lat = fk - runtime.ts[i]!;
      lLatSum[row]! += lat;
      lLatN[row]!++;
      if (latencies.length < 200_000) latencies.push(lat);
    } else if (!Number.isNaN(runtime.corr[i]!)) missing[row]!++;
  }
  return { lCalls, lGraph, lCpu, lLatSum, lLatN, missing, graphName, latencies };
}

/** Kernel rows grouped by step (CSR: step s's rows are byStep[stepCount[s]..stepCount[s + 1]]),
 * filled in start order, so each step's slice is sorted by start (the time line needs that). */
function bucketByStep(stepOf: Int32Array, order: Uint32Array, S: number, n: number) {
  const stepCount = new Int32Array(S + 2);
  for (let k = 0; k < n; k++) if (stepOf[k]! >= 0) stepCount[stepOf[k]! + 1]!++;
  for (let s = 0; s < S; s++) stepCount[s + 1]! += stepCount[s]!;
  const byStep = new Uint32Array(stepCount[S]!);
  const fill = stepCount.slice();
  for (let j = 0; j < order.length; j++) {
    const k = order[j]!;
    if (stepOf[k]! >= 0) byStep[fill[stepOf[k]!]!++] = k;
  }
  return { stepCount, byStep };
}

/** GPU activities per step that a graph launch started (row S: outside any step). */
function graphKernelCounts(
  model: TraceModel,
  stepOf: Int32Array,
  launchIdx: Int32Array,
  graphName: Map<number, boolean>,
  S: number,
): Int32Array {
  const runtime = model.runtime;
  const graphKernels = new Int32Array(S + 1);
  for (let k = 0; k < model.gpu.n; k++) {
    const li = launchIdx[k]!;
    if (li < 0) continue;
    const nm = runtime.name[li]!;
    let g = graphName.get(nm);
    if (g === undefined) {
      g = GRAPH_LAUNCH.test(model.names[nm]!);
      graphName.set(nm, g);
    }
    if (g) graphKernels[stepOf[k]! >= 0 ? stepOf[k]! : S]!++;
  }
  return graphKernels;
}

/** A step's three longest-running kernel names. `scratch` and `scratchN` (per name, zero) are
 * left zero again. */
function stepTopKernels(
  model: TraceModel,
  byStep: Uint32Array,
  from: number,
  to: number,
  scratch: Float64Array,
  scratchN: Int32Array,
) {
  const gpu = model.gpu;
  const touched: number[] = [];
  for (let j = from; j < to; j++) {
    const k = byStep[j]!;
    const nm = gpu.name[k]!;
    if (scratchN[nm] === 0) touched.push(nm);
    scratch[nm]! += gpu.dur[k]!;
    scratchN[nm]!++;
  }
  touched.sort((a, b) => scratch[b]! - scratch[a]!);
  const top = touched.slice(0, 3).map((nm) => ({
    name: model.names[nm]!,
    class: model.nameClass[nm]!.class as KernelClass,
    totalUs: round(scratch[nm]!),
    count: scratchN[nm]!,
  }));
  for (const nm of touched) {
    scratch[nm] = 0;
    scratchN[nm] = 0;
  }
  return top;
}

/** Per kernel name: total time, count, and the External id of its first launch that has one. */
function nameTotals(model: TraceModel) {
  const gpu = model.gpu;
  const nameUs = new Float64Array(model.names.length);
  const nameN = new Float64Array(model.names.length);
  const nameExt = new Float64Array(model.names.length).fill(Number.NaN);
  for (let k = 0; k < gpu.n; k++) {
    const nm = gpu.name[k]!;
    nameUs[nm]! += gpu.dur[k]!;
    nameN[nm]!++;
    if (Number.isNaN(nameExt[nm]!) && !Number.isNaN(gpu.ext[k]!)) nameExt[nm] = gpu.ext[k]!;
  }
  return { nameUs, nameN, nameExt };
}

/** First start and last end over all activities. */
function span(start: Float64Array, end: Float64Array): { first: number; last: number } {
  let first = Number.POSITIVE_INFINITY;
  let last = Number.NEGATIVE_INFINITY;
  for (let k = 0; k < end.length; k++) {
    if (start[k]! < first) first = start[k]!;
    if (end[k]! > last) last = end[k]!;
  }
  return { first, last };
}

/** Length of the union of intervals fed in start order, in O(1) memory. */
class UnionLength {
  total = 0;
  private s = Number.NaN;
  private e = Number.NaN;
  add(st: number, en: number): void {
    if (st <= this.e) {
      if (en > this.e) this.e = en;
      return;
    }
    if (this.e > this.s) this.total += this.e - this.s;
    this.s = st;
    this.e = en;
  }
  get length(): number {
    return this.e > this.s ? this.total + this.e - this.s : this.total;
  }
}

/**
 * The time line over idx[from..to), which must be sorted by start. Every quantity is a union
 * length, streamed: |comm − comp| = |comm ∪ comp| − |comp|, |memcpy − (comp ∪ comm)| = busy −
 * |comp ∪ comm|, so memory stays O(1) however many activities a step has.
 */
export function timelineOf(gpu: TraceModel["gpu"], idx: ArrayLike<number>, from: number, to: number): Timeline {
  const all = new UnionLength();
  const comp = new UnionLength();
  const comm = new UnionLength();
  const mem = new UnionLength();
  const compComm = new UnionLength();
  let first = Number.POSITIVE_INFINITY;
  let last = Number.NEGATIVE_INFINITY;
  for (let j = from; j < to; j++) {
    const k = idx[j]!;
    const st = gpu.start[k]!;
    const en = st + gpu.dur[k]!;
    if (st < first) first = st;
    if (en > last) last = en;
    all.add(st, en);
    if (gpu.kind[k] === KIND_MEMCPY) mem.add(st, en);
    else {
      compComm.add(st, en);
      if (gpu.cls[k] === COMM_CLASS) comm.add(st, en);
      else comp.add(st, en);
    }
  }
  if (to <= from)
    return {
      spanUs: 0,
      busyUs: 0,
      idleUs: 0,
      computeUs: 0,
      commExposedUs: 0,
      memcpyExposedUs: 0,
      commUs: 0,
      memcpyUs: 0,
    };
  const busy = all.length;
  return {
    spanUs: round(last - first),
    busyUs: round(busy),
    idleUs: round(last - first - busy),
    computeUs: round(comp.length),
    commExposedUs: round(compComm.length - comp.length),
    memcpyExposedUs: round(busy - compComm.length),
    commUs: round(comm.length),
    memcpyUs: round(mem.length),
  };
}

/** The steps a summary stands for: whole decode steps, else every whole step. */
export function headSteps(steps: StepBreakdown[]): StepBreakdown[] {
  const good = steps.filter((s) => !s.clipped);
  const decode = good.filter((s) => s.kind === "decode");
  return decode.length ? decode : good;
}

export function summarizeKinds(steps: StepBreakdown[]): StepKindSummary[] {
  const out: StepKindSummary[] = [];
  for (const kind of ["decode", "prefill", "mixed", "unknown"] as StepKind[]) {
    const ss = steps.filter((s) => s.kind === kind && !s.clipped);
    if (!ss.length) continue;
    const durs = ss.map((s) => s.durUs).sort((a, b) => a - b);
    const mean = (f: (s: StepBreakdown) => number) => ss.reduce((a, s) => a + f(s), 0) / ss.length;
    const meanBusyByClass: ClassTimes = {};
    for (const c of KERNEL_CLASSES) {
      const m = mean((s) => s.busyByClass[c] ?? 0);
      if (m > 0) meanBusyByClass[c] = round(m);
    }
    const meanIdleUs = round(mean((s) => s.idleUs));
    const summary: StepKindSummary = {
      kind,
      count: ss.length,
      durUs: {
        mean: round(mean((s) => s.durUs)),
        p50: quantile(durs, 0.5),
        p90: quantile(durs, 0.9),
        min: durs[0]!,
        max: durs[durs.length - 1]!,
      },
      meanBusyByClass,
      meanIdleUs,
      meanIdleHostUs: round(mean((s) => s.idleHostUs)),
      meanCommExposedUs: round(mean((s) => s.commExposedUs)),
      meanKernels: round(mean((s) => s.kernels)),
      headline: "",
    };
    summary.headline = headline(summary);
    out.push(summary);
  }
  return out;
}

function headline(s: StepKindSummary): string {
  const parts = Object.entries(s.meanBusyByClass)
    .filter(([, v]) => (v ?? 0) >= 0.005 * s.durUs.mean)
    .sort((a, b) => (b[1] ?? 0) - (a[1] ?? 0))
    .map(([c, v]) => `${c} ${ms(v ?? 0)}`);
  if (s.meanIdleUs > 0) parts.push(`idle ${ms(s.meanIdleUs)}`);
  return `${s.kind} step ${ms(s.durUs.mean)} ms = ${parts.join(" + ")}`;
}

function ms(us: number): string {
  return (us / 1000).toFixed(us >= 10_000 ? 1 : 2);
}

function quantile(sorted: number[], q: number): number {
  if (!sorted.length) return 0;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[i]!;
}

function sumRow(a: Float64Array, row: number): number {
  let s = 0;
  for (let c = 0; c < NC; c++) s += a[row * NC + c]!;
  return round(s);
}

function classTimes(a: Float64Array, row: number): ClassTimes {
  return toClassTimes(a.subarray(row * NC, row * NC + NC));
}

function classCounts(a: Float64Array, row: number): Partial<Record<KernelClass, number>> {
  return toClassCounts(a.subarray(row * NC, row * NC + NC));
}

function toClassTimes(a: Float64Array): ClassTimes {
  const out: ClassTimes = {};
  for (let c = 0; c < NC; c++) if (a[c]! > 0) out[KERNEL_CLASSES[c]!] = round(a[c]!);
  return out;
}

function toClassCounts(a: Float64Array): Partial<Record<KernelClass, number>> {
  const out: Partial<Record<KernelClass, number>> = {};
  for (let c = 0; c < NC; c++) if (a[c]! > 0) out[KERNEL_CLASSES[c]!] = a[c]!;
  return out;
}

export function round(x: number): number {
  return Math.round(x * 1000) / 1000;
}

function round4(x: number): number {
  return Math.round(x * 10000) / 10000;
}
