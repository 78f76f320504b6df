// CUDA/HIP graph replays matched to their capture (pure). A replay's trace holds only the graph
// launch and the kernels it ran; the trace recorded while the graph was captured holds each launch
// call with its kernel name (`args.kernel`), its CPU op and its nn.Module frames. Replays run the
// captured kernels in capture order, so a replay's kernel-name sequence is found in the capture's.

import { findSorted, KIND_KERNEL, NO_NAME, type TraceModel } from "./events.ts";
import { enclosingOps, indexModules, moduleChain, opChain, type ReplayOrigin } from "./evidence.ts";

export interface CapturedLaunch extends ReplayOrigin {
  kernel: string;
}

const CAPTURE_RE = /^capture_/;

/**
 * The kernel launches recorded in a graph-capture trace, in time order, each with the op and module
 * chains around it. Where the trace marks its captures (vLLM's and SGLang's `capture_<bs>_<mode>`
 * annotations), only launches inside them count.
 */
export function capturedLaunches(model: TraceModel): CapturedLaunch[] {
  const { runtime } = model;
  const kernel = runtime.kernel;
  if (!kernel) return [];
  const spans = model.annotations
    .filter((a) => !a.gpu && CAPTURE_RE.test(a.name))
    .map((a) => [a.ts, a.ts + a.dur] as const)
    .sort((a, b) => a[0] - b[0]);
  const inside = (t: number) => spans.length === 0 || spans.some(([s, e]) => t >= s && t <= e);
  const rows: number[] = [];
  for (let i = 0; i < runtime.n; i++) if (kernel[i] !== NO_NAME && inside(runtime.ts[i]!)) rows.push(i);
  rows.sort((a, b) => runtime.ts[a]! - runtime.ts[b]! || a - b);
  const parent = enclosingOps(model);
  const modules = model.modules.name.length ? indexModules(model) : undefined;
  return rows.map((i) => {
    const ext = runtime.ext[i]!;
    const row = Number.isNaN(ext) ? -1 : findSorted(model.cpuOpExt, ext);
    return {
      kernel: model.names[kernel[i]!]!,
      ops: row >= 0 ? opChain(model, parent, row) : [],
      modules: modules ? moduleChain(model, runtime.tid[i]!, runtime.ts[i]!, modules) : [],
    };
  });
}

export interface ReplayMatch {
  /** GPU row → its captured launch. */
  origin: Map<number, CapturedLaunch>;
  replayedKernels: number;
  matched: number;
}

/**
 * Matches each graph replay (the kernels sharing one graph launch, in start order) to the captured
 * launches: the replay's name sequence as a contiguous run of the capture's (searched from where the
 * previous replay matched, as piecewise graphs replay their pieces in order); failing that, each
 * kernel to the next captured launch of the same name.
 */
export function matchReplays(
  model: TraceModel,
  launchIdx: Int32Array,
  order: Uint32Array,
  captured: readonly CapturedLaunch[],
): ReplayMatch {
  const { gpu, runtime } = model;
  const origin = new Map<number, CapturedLaunch>();
  const isGraph = new Map<number, boolean>();
  const replays = new Map<number, number[]>();
  for (let j = 0; j < order.length; j++) {
    const k = order[j]!;
    const li = launchIdx[k]!;
    // Graph memcpy/memset nodes have no launch call of their own in the capture: kernels only.
    if (li < 0 || gpu.kind[k] !== KIND_KERNEL) continue;
    const nm = runtime.name[li]!;
    let g = isGraph.get(nm);
    if (g === undefined) {
      g = /GraphLaunch/i.test(model.names[nm]!);
      isGraph.set(nm, g);
    }
    if (!g) continue;
    const list = replays.get(li);
    if (list) list.push(k);
    else replays.set(li, [k]);
  }
  let replayed = 0;
  if (captured.length === 0) return { origin, replayedKernels: 0, matched: 0 };
  const C = captured.map((c) => c.kernel);
  const byName = new Map<string, number[]>();
  C.forEach((n, i) => {
    const l = byName.get(n);
    if (l) l.push(i);
    else byName.set(n, [i]);
  });
  const nextOfName = new Map<string, number>();
  let cursor = 0;
  const runAt = (R: string[], at: number): boolean => {
    if (at + R.length > C.length) return false;
    for (let i = 0; i < R.length; i++) if (C[at + i] !== R[i]) return false;
    return true;
  };
  const sortedReplays = [...replays.values()].sort((a, b) => gpu.start[a[0]!]! - gpu.start[b[0]!]!);
  for (const rows of sortedReplays) {
    replayed += rows.length;
    const R = rows.map((k) => model.names[gpu.name[k]!]!);
    let at = -1;
    for (let step = 0; step < C.length && at < 0; step++) {
      const p = (cursor + step) % C.length;
      if (C[p] === R[0] && runAt(R, p)) at = p;
    }
    if (at >= 0) {
      rows.forEach((k, i) => {
        origin.set(k, captured[at + i]!);
      });
      cursor = (at + R.length) % C.length;
      continue;
    }
    for (const k of rows) {
      const n = model.names[gpu.name[k]!]!;
      const list = byName.get(n);
      if (!list) continue;
      const i = nextOfName.get(n) ?? 0;
      origin.set(k, captured[list[i % list.length]!]!);
      nextOfName.set(n, i + 1);
    }
  }
  return { origin, replayedKernels: replayed, matched: origin.size };
}
