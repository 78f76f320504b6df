// analyzeTrace: read one trace file per rank, segment steps, decompose time. The I/O shell around
// the pure model/steps/breakdown modules.
import { realpathSync } from "node:fs";
import { basename } from "node:path";
import { InputError, UsageError } from "../errors.ts";
import type { Architecture } from "../model/architecture.ts";
import { computeBreakdown, headSteps, type Overall, round, type StepBreakdown, summarizeKinds } from "./breakdown.ts";
import { CLASS_INDEX, KERNEL_CLASSES, type KernelClass, parseRuleFile, type RuleFile } from "./classify.ts";
import { applyContext } from "./context.ts";
import { EVENT_FIELDS, MODULE_PREFIX, ModelBuilder, type TraceModel } from "./events.ts";
import { attributeClasses } from "./evidence.ts";
import { type CapturedLaunch, capturedLaunches, matchReplays } from "./graphs.ts";
import { analyzeLayers, type LayerAnalysis } from "./layers.ts";
import { readTraceModel } from "./parallel.ts";
import { type ReadStats, readTraceFile } from "./reader.ts";
import type { RooflineAnalysis } from "./roofline.ts";
import {
  isStepAnnotation,
  kernelRowsByStep,
  linkLaunches,
  orderByStart,
  type StepMode,
  segmentSteps,
} from "./steps.ts";

export interface AnalyzeOptions {
  rules?: RuleFile;
  stepMode?: StepMode;
  /** Gap threshold for gap mode (µs); default max(100, 10 × median gap). */
  gapUs?: number;
  topN?: number;
  /** Graph-capture traces (the trace recorded while the CUDA/HIP graphs were captured): they give
   * graph-replayed kernels the launching op and module that the replay trace lacks. */
  capture?: string[];
  /** Progress callback: (file, bytes read, file size). */
  onProgress?: (file: string, read: number, total: number) => void;
  /** Threads reading a large uncompressed file (parallel.ts); default: the cores, at most 4. */
  threads?: number;
  /** Nominal segment size for those threads (tests: small segments on small files). */
  segmentBytes?: number;
  /** Files below this size are read in one pass (default: ParallelOptions.minBytes's). */
  parallelMinBytes?: number;
  /** Per-kernel roofline and the step beside the model's prediction: the model, the GPU, its bandwidth. */
  roofline?: RooflineOptions;
}

export interface RooflineOptions {
  /** A catalog name (llama-3.1-8b) or an Architecture read from a config.json / .gguf. */
  model: string | Architecture;
  gpu: string;
  /** Measured device-memory bandwidth (GB/s): the ceiling; else the GPU's spec figure. */
  measuredBandwidthGBs?: number;
  /** Decode batch (default: the steps' annotated batch, else 1). */
  batch?: number;
  /** KV length per sequence (default: the model's default). */
  contextLen?: number;
}

export interface FileInfo {
  file: string;
  rank: number;
  gzip: boolean;
  fileBytes: number;
  jsonBytes: number;
  events: number;
  parsedEvents: number;
  skippedEvents: number;
  badEvents: number;
  invalidUtf8: number;
  truncated: boolean;
  categories: Record<string, number>;
  devices: number[];
  vllmVersion?: string;
  /** Threads that read the file (1: one pass; more: a large uncompressed file, in segments). */
  readThreads: number;
}

export interface RankAnalysis {
  rank: number;
  file: string;
  stepMode: Exclude<StepMode, "auto">;
  steps: StepBreakdown[];
  overall: Overall;
  info: FileInfo;
  notes: string[];
  /** Transformer layers inside the steps, where a layer period is found. */
  layers?: LayerAnalysis;
}

export interface RankSkew {
  /** Steps compared (aligned by index over unclipped steps present on every rank). */
  alignedSteps: number;
  perRank: Array<{ rank: number; steps: number; meanStepUs: number; p50StepUs: number; meanCommUs: number }>;
  /** Per aligned step: slowest minus fastest rank's step duration. */
  meanSkewUs: number;
  maxSkewUs: number;
  /** Rank most often slowest; with all-reduce, the straggler also shows the least communication time. */
  slowestRank?: number;
  stragglerRank?: number;
}

export interface KernelClassInfo {
  class: KernelClass;
  /** The name rule that matched ("default" if none). */
  rule: string;
  /** "rule <id>", "op <launching CPU op>" or "default". */
  decidedBy: string;
  /** Kernels with this name in the trace, and their total time (µs). */
  count?: number;
  totalUs?: number;
  /** Where launching ops split one name over several classes: each, with kernels and time. */
  variants?: Array<{ class: KernelClass; decidedBy: string; count: number; totalUs: number }>;
}

export interface TraceAnalysis {
  files: string[];
  stepMode: Exclude<StepMode, "auto">;
  steps: StepBreakdown[];
  overall: Overall;
  /** Per kernel name: class (the one most of its time got), the name rule, and what decided it. */
  kernelClasses: Record<string, KernelClassInfo>;
  ranks: RankAnalysis[];
  /** Per-GEMM roofline and the step beside the model (with `roofline` options). */
  roofline?: RooflineAnalysis;
  /** The first rank's layers (per-op times, head and tail), where found. */
  layers?: LayerAnalysis;
  skew?: RankSkew;
  warnings: string[];
  notes: string[];
}

const SKIP = new Set(["python_function", "ac2g", "fwdbwd", "trace", "cpu_instant_event", "overhead", "python"]);

/** Reads and analyses one trace file (one rank). */
export async function analyzeFile(
  file: string,
  rankHint: number,
  opts: AnalyzeOptions = {},
  captured?: readonly CapturedLaunch[],
): Promise<{ rank: RankAnalysis; kernelClasses: TraceAnalysis["kernelClasses"]; warnings: string[] }> {
  const builder = new ModelBuilder(opts.rules, KERNEL_CLASSES, isStepAnnotation);
  const stats = await readTraceModel(
    file,
    builder,
    {
      skipCategories: SKIP,
      keepNamePrefix: { python_function: MODULE_PREFIX },
      fields: EVENT_FIELDS,
      onProgress: opts.onProgress ? (r, t) => opts.onProgress!(file, r, t) : undefined,
    },
    { threads: opts.threads, segmentBytes: opts.segmentBytes, minBytes: opts.parallelMinBytes },
  );
  const model = builder.finish();
  const warnings = [...stats.warnings];
  if (stats.bytes === 0) throw new InputError(`${file}: empty file (0 bytes${stats.gzip ? " after gunzip" : ""})`);
  if (!stats.sawTraceEvents) {
    const keys = Object.keys(stats.metadata);
    throw new InputError(
      `${file}: not a profiler trace: the JSON has no "traceEvents" array${keys.length ? ` (top-level keys: ${keys.slice(0, 8).join(", ")})` : ""}`,
      {
        hint: "pass a PyTorch/Kineto trace (*.pt.trace.json[.gz]) as written by torch.profiler or vLLM's /stop_profile",
      },
    );
  }
  if (model.gpu.n === 0) throw noGpuError(file, model, stats);
  if (stats.invalidUtf8)
    warnings.push(`${file}: ${stats.invalidUtf8} events contained invalid UTF-8 (decoded with U+FFFD)`);
  if (stats.badEvents) warnings.push(`${file}: ${stats.badEvents} events were not valid JSON and were skipped`);
  if (model.unsafeIds) warnings.push(`${file}: ${model.unsafeIds} ids beyond 2^53 (precision lost; linking may miss)`);
  if (model.devices.length > 1)
    warnings.push(
      `${file}: GPU activity on ${model.devices.length} devices (${model.devices.join(", ")}) analysed together`,
    );

  const launchIdx = linkLaunches(model);
  const order = orderByStart(model.gpu.start);
  const replay = captured?.length ? matchReplays(model, launchIdx, order, captured) : undefined;
  const ev = attributeClasses(model, launchIdx, KERNEL_CLASSES, replay?.origin);
  const seg = segmentSteps(model, launchIdx, order, opts.stepMode ?? "auto", { gapUs: opts.gapUs });
  const byStep = kernelRowsByStep(seg, order, model.gpu.kind);
  const byContext = applyContext(model, seg, order, ev, byStep);
  const { steps, overall } = computeBreakdown({ model, seg, launchIdx, order, topN: opts.topN });
  if (stats.truncated && steps.length) {
    // The cut removed the end of the file: the last step's remaining events (GPU activities come
    // late in Kineto's files) are missing, so it must not count as a whole step.
    steps[steps.length - 1]!.clipped = true;
    for (const s of steps)
      if (s.clipped)
        s.clipReason = `the trace file is truncated: this step is partial${s.clipReason ? ` (${s.clipReason})` : ""}`;
    overall.byKind = summarizeKinds(steps);
  }
  const clipped = steps.filter((s) => s.clipped).length;
  const layers = analyzeLayers(model, seg, order, (s) => !steps[s]?.clipped, byStep);
  const notes = [...seg.notes];
  if (replay && replay.replayedKernels > 0 && replay.matched === 0)
    warnings.push(
      `${file}: the capture trace(s) given match none of its ${replay.replayedKernels} graph-replayed kernels: not the capture of these graphs (a different model, batch size or build?)`,
    );
  if (replay)
    notes.push(
      `${replay.matched} of ${replay.replayedKernels} graph-replayed kernels matched to their launch in the capture trace(s)`,
    );
  if (ev.decidedByOp)
    notes.push(
      `${ev.decidedByOp} kernels classified by their launching CPU op or module (the name alone was unknown or ambiguous)`,
    );
  if (byContext)
    notes.push(
      `${byContext} kernels classified by their place in the step (a softmax between two GEMMs is attention; sampling only follows the LM-head GEMM)`,
    );
  if (clipped)
    notes.push(
      `${clipped} of ${steps.length} steps clipped by the profiling window (excluded from per-kind summaries)`,
    );
  const meta = stats.metadata;
  const dist = meta.distributedInfo as { rank?: unknown } | undefined;
  const rank = typeof dist?.rank === "number" ? dist.rank : (rankFromName(file) ?? rankHint);
  const info: FileInfo = {
    file,
    rank,
    gzip: stats.gzip,
    fileBytes: stats.fileBytes,
    jsonBytes: stats.bytes,
    events: stats.events,
    parsedEvents: stats.parsed,
    skippedEvents: stats.skippedByCategory,
    badEvents: stats.badEvents,
    invalidUtf8: stats.invalidUtf8,
    truncated: stats.truncated,
    categories: model.categories,
    devices: model.devices,
    readThreads: stats.threads,
    ...(typeof meta.vllm_version === "string" ? { vllmVersion: meta.vllm_version } : {}),
  };
  const kernelClasses: TraceAnalysis["kernelClasses"] = {};
  const used = new Uint32Array(model.names.length);
  const usedUs = new Float64Array(model.names.length);
  for (let k = 0; k < model.gpu.n; k++) {
    used[model.gpu.name[k]!]!++;
    usedUs[model.gpu.name[k]!]! += model.gpu.dur[k]!;
  }
  model.names.forEach((n, i) => {
    const c = model.nameClass[i]!;
    if (!used[i] || CLASS_INDEX[c.class as KernelClass] === undefined) return;
    const v = ev.perName.get(i);
    kernelClasses[n] = {
      class: c.class as KernelClass,
      rule: c.rule,
      decidedBy: c.decidedBy ?? (c.rule === "default" ? "default" : `rule ${c.rule}`),
      count: used[i]!,
      totalUs: round(usedUs[i]!),
      ...(v && v.length > 1
        ? {
            variants: v.map((x) => ({ class: x.class, decidedBy: x.by, count: x.count, totalUs: round(x.us) })),
          }
        : {}),
    };
  });
  return {
    rank: { rank, file, stepMode: seg.mode, steps, overall, info, notes, ...(layers ? { layers } : {}) },
    kernelClasses,
    warnings,
  };
}

function rankFromName(file: string): number | undefined {
  const m = /(?:^|[^a-z])(?:rank|tp)[-_]?(\d+)(?!.*(?:rank|tp)[-_]?\d)/i.exec(basename(file));
  return m ? Number(m[1]) : undefined;
}

function noGpuError(file: string, model: TraceModel, stats: ReadStats): InputError {
  const cats = Object.entries(model.categories)
    .sort((a, b) => b[1] - a[1])
    .slice(0, 6)
    .map(([c, n]) => `${c} ${n}`)
    .join(", ");
  const hasRuntime = (model.categories.cuda_runtime ?? 0) + (model.categories.cuda_driver ?? 0) > 0;
  const kinetoErrors = [stats.metadata.ERROR, stats.metadata.WARNING]
    .flat()
    .filter((x): x is string => typeof x === "string")
    .slice(0, 3);
  let why: string;
  if (stats.truncated)
    // A cut file explains missing GPU activity before anything else: Kineto writes CPU events first.
    why = `the file is truncated (${stats.bytes} bytes of JSON read) before any GPU activity: the cut removed it; CUPTI is not to blame unless the complete file also has none`;
  else if (stats.events === 0) why = "the trace has no events at all";
  else if (hasRuntime)
    why =
      "it has CUDA runtime calls but no GPU activity: CUPTI could not record kernels (e.g. insufficient privileges for GPU counters, or another profiler holding CUPTI)";
  else
    why =
      "it has only CPU events: the profiler ran without CUDA activity — use activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]; for vLLM this is the CPU-only frontend trace, analyse the worker traces (…-rank-N… / …_rankN…) instead";
  return new InputError(
    `${file}: no GPU kernels in the trace (${stats.events} events${cats ? `: ${cats}` : ""}): ${why}${kinetoErrors.length ? `; profiler said: ${kinetoErrors.join(" | ")}` : ""}`,
    {
      hint: stats.truncated ? "copy the complete trace file (this one ends early) and analyse it again" : undefined,
    },
  );
}

/** Analyses one trace per rank (or one trace). Throws InputError for unusable input. */
export async function analyzeTrace(paths: string[], opts: AnalyzeOptions = {}): Promise<TraceAnalysis> {
  if (paths.length === 0) throw new InputError("no trace files given");
  // One file named twice (or through a link) would be read as two ranks that agree perfectly.
  const seen = new Map<string, string>();
  for (const p of paths) {
    let real: string;
    try {
      real = realpathSync(p);
    } catch {
      continue; // a missing file is reported by the reader, with its own words
    }
    const first = seen.get(real);
    if (first !== undefined)
      throw new UsageError(
        first === p
          ? `${p}: given twice; each rank's trace is read once`
          : `${p}: the same file as ${first}; each rank's trace is read once`,
        { hint: "give one trace file per rank" },
      );
    seen.set(real, p);
  }
  const ranks: RankAnalysis[] = [];
  const kernelClasses: TraceAnalysis["kernelClasses"] = {};
  const warnings: string[] = [];
  const captured: CapturedLaunch[] = [];
  for (const c of opts.capture ?? []) captured.push(...(await readCapture(c, opts)));
  for (let i = 0; i < paths.length; i++) {
    const r = await analyzeFile(paths[i]!, i, opts, captured);
    ranks.push(r.rank);
    Object.assign(kernelClasses, r.kernelClasses);
    warnings.push(...r.warnings);
  }
  if (new Set(ranks.map((r) => r.rank)).size !== ranks.length)
    ranks.forEach((r, i) => {
      r.rank = i;
    });
  ranks.sort((a, b) => a.rank - b.rank);
  const primary = ranks[0]!;
  const notes = [...primary.notes];
  const roof = opts.roofline ? await rooflineFor(primary, opts.roofline) : undefined;
  return {
    ...(roof ? { roofline: roof } : {}),
    files: paths,
    stepMode: primary.stepMode,
    steps: primary.steps,
    overall: primary.overall,
    ...(primary.layers ? { layers: primary.layers } : {}),
    kernelClasses,
    ranks,
    ...(ranks.length > 1 ? { skew: rankSkew(ranks) } : {}),
    warnings,
    notes,
  };
}

/** The roofline of one rank's steps beside the model (loads the model library). */
export async function rooflineFor(r: RankAnalysis, o: RooflineOptions): Promise<RooflineAnalysis> {
  // The model library is loaded only when asked for.
  const [{ requireModel }, { requireGpu }, { predict }, { roofline }] = await Promise.all([
    import("../model/architecture.ts"),
    import("../model/hardware.ts"),
    import("../model/predict.ts"),
    import("./roofline.ts"),
  ]);
  const arch = typeof o.model === "string" ? requireModel(o.model) : o.model;
  const gpu = requireGpu(o.gpu);
  const steps = headSteps(r.steps);
  const annotated = steps.map((s) => s.batch?.requests).filter((x): x is number => x !== undefined);
  const batch = o.batch ?? (annotated.length ? annotated.sort((a, b) => a - b)[Math.floor(annotated.length / 2)]! : 1);
  const prediction = predict({
    model: arch,
    gpu,
    batch,
    ...(o.contextLen !== undefined ? { contextLen: o.contextLen } : {}),
    ...(o.measuredBandwidthGBs !== undefined ? { measuredBandwidthGBs: o.measuredBandwidthGBs } : {}),
    cudaGraphs: r.overall.launch.graphLaunches > 0,
  });
  const out = roofline({
    arch,
    gpu,
    ceilingGBs: o.measuredBandwidthGBs ?? gpu.bandwidthGBs,
    ceilingIs:
      o.measuredBandwidthGBs !== undefined
        ? "measured copy bandwidth (--measured-bandwidth)"
        : `${gpu.name} spec sheet (no --measured-bandwidth; copies reach less than the spec)`,
    prediction,
    layers: r.layers,
    steps,
  });
  if (o.batch === undefined && !annotated.length) out.notes.push("batch not in the trace: 1 assumed (give --batch)");
  if (o.contextLen === undefined)
    out.notes.push(`context length not given: the model's default ${prediction.input.contextLen} (give --context)`);
  return out;
}

/** Compares per-rank step times (aligned by step index over unclipped steps). */
export function rankSkew(ranks: RankAnalysis[]): RankSkew {
  const usable = ranks.map((r) => r.steps.filter((s) => !s.clipped));
  const n = Math.min(...usable.map((u) => u.length));
  let sum = 0;
  let max = 0;
  const slowest = new Map<number, number>();
  for (let i = 0; i < n; i++) {
    let lo = Number.POSITIVE_INFINITY;
    let hi = Number.NEGATIVE_INFINITY;
    let hiRank = -1;
    usable.forEach((u, r) => {
      const d = u[i]!.durUs;
      if (d < lo) lo = d;
      if (d > hi) {
        hi = d;
        hiRank = ranks[r]!.rank;
      }
    });
    sum += hi - lo;
    max = Math.max(max, hi - lo);
    slowest.set(hiRank, (slowest.get(hiRank) ?? 0) + 1);
  }
  const perRank = ranks.map((r, j) => {
    const d = usable[j]!.map((s) => s.durUs).sort((a, b) => a - b);
    const mean = d.length ? d.reduce((a, b) => a + b, 0) / d.length : 0;
    const comm = usable[j]!.length
      ? usable[j]!.reduce((a, s) => a + (s.kernelUsByClass.communication ?? 0), 0) / usable[j]!.length
      : 0;
    return {
      rank: r.rank,
      steps: d.length,
      meanStepUs: round(mean),
      p50StepUs: d.length ? d[Math.floor((d.length - 1) / 2)]! : 0,
      meanCommUs: round(comm),
    };
  });
  const slowestRank = [...slowest.entries()].sort((a, b) => b[1] - a[1])[0]?.[0];
  const withComm = perRank.filter((p) => p.meanCommUs > 0);
  const stragglerRank =
    withComm.length === perRank.length && withComm.length > 1
      ? withComm.slice().sort((a, b) => a.meanCommUs - b.meanCommUs)[0]!.rank
      : undefined;
  return {
    alignedSteps: n,
    perRank,
    meanSkewUs: n ? round(sum / n) : 0,
    maxSkewUs: round(max),
    ...(slowestRank !== undefined && n ? { slowestRank } : {}),
    ...(stragglerRank !== undefined ? { stragglerRank } : {}),
  };
}

/** Reads a graph-capture trace into its captured launches (kernel name, op and module chains). */
async function readCapture(file: string, opts: AnalyzeOptions): Promise<CapturedLaunch[]> {
  const builder = new ModelBuilder(opts.rules, KERNEL_CLASSES, (n) => n.startsWith("capture_"), {
    launchKernelNames: true,
  });
  const stats = await readTraceFile(file, (ev) => builder.add(ev), {
    skipCategories: SKIP,
    keepNamePrefix: { python_function: MODULE_PREFIX },
    fields: EVENT_FIELDS,
  });
  if (!stats.sawTraceEvents) throw new InputError(`${file}: not a profiler trace: the JSON has no "traceEvents" array`);
  const launches = capturedLaunches(builder.finish());
  if (launches.length === 0)
    throw new InputError(`${file}: no kernel launches with kernel names: not a graph-capture trace`, {
      hint: "pass the trace recorded while the CUDA/HIP graphs were captured (its launch calls carry args.kernel)",
    });
  return launches;
}

/** Reads a --rules file (YAML or JSON) and validates it. */
export async function loadRuleFile(path: string): Promise<RuleFile> {
  const { readFile } = await import("node:fs/promises");
  const { parse, YAMLParseError } = await import("yaml");
  const text = await readFile(path, "utf8");
  let doc: unknown;
  try {
    doc = parse(text);
  } catch (e) {
    if (e instanceof YAMLParseError && e.linePos?.[0])
      throw new InputError(e.message.split("\n")[0]!, {
        position: { file: path, line: e.linePos[0].line, column: e.linePos[0].col },
      });
    throw new InputError(`${path}: ${(e as Error).message}`);
  }
  return parseRuleFile(doc, path);
}
