// Measurements the fit accepts, and parsers for their file forms: our JSON/YAML list, a vLLM-style
// `bench --save-result` JSON, and nccl-tests `all_reduce_perf` text (collectives.md §6). Pure: text in, records out.
import { InputError } from "../errors.ts";
import { yaml } from "../lazy.ts";
import { ncclLatencyTable, parseNcclTests } from "../trace/nccl.ts";

/** A server/launch configuration that differs between A/B arms. */
export interface Variant {
  ncclProto?: string;
  ncclAlgo?: string;
  customAllReduce?: boolean;
  cudaGraphs?: boolean;
  interconnect?: string;
  env?: Record<string, string>;
}

interface Base {
  label?: string;
  source?: string;
}

export type Measurement =
  | (Base & {
      kind: "itl";
      ms: number;
      batch?: number;
      contextLen?: number;
      sd?: number;
      ci?: [number, number];
      variant?: Variant;
    })
  | (Base & { kind: "ttft"; ms: number; inputLen?: number; sd?: number; ci?: [number, number]; variant?: Variant })
  | (Base & {
      kind: "ab";
      variantA: Variant;
      variantB: Variant;
      /** (B − A) per generated token, ms. */
      deltaMsPerToken?: number;
      /** Per-request totals, seconds, with the token count they cover. */
      aTotalS?: number;
      bTotalS?: number;
      tokens?: number;
      ci?: [number, number];
    })
  | (Base & { kind: "length-sweep"; slopeMsPerToken: number; interceptMs: number; ci?: [number, number] })
  | (Base & { kind: "context-slope"; msPerKToken: number; ci?: [number, number] })
  | (Base & {
      kind: "nccl-tests";
      rows: { bytes: number; us: number; inPlace: boolean }[];
      nGpus?: number;
      graph?: boolean;
    })
  | (Base & {
      kind: "trace";
      /**
       * Mean all-reduce kernel time per call in the traced decode steps, µs: the in-loop cost (isolated
       * latency + bandwidth term + skew/sync wait), as the profiler saw it.
       */
      allReduceUsPerCall: { value: number; ci?: [number, number] };
      /** All-reduce calls per decode step in the trace (checked against the model's count). */
      allReduceCallsPerToken?: number;
      /** The traced decode step period, ms (fits like an `itl` row at `batch`). */
      stepMs?: { value: number; ci?: [number, number] };
      batch?: number;
      contextLen?: number;
      /** The configuration the trace was taken on (e.g. {ncclProto: "LL"}); default = the baseline. */
      variant?: Variant;
    })
  | (Base & {
      kind: "trace-fixed";
      /** What a profiler trace's decode steps show (trace-evidence.ts): kernels per step, the time outside GEMM, MoE,
       * attention, collectives and host waits (ms), its share per kernel (µs), the host-bound idle per step (ms). */
      kernels: number;
      fixedMs: number;
      perKernelUs: number;
      hostGapMs: number;
      stepMs: number;
      batch?: number;
      file?: string;
    })
  | (Base & {
      kind: "server-split";
      /**
       * What the engine's request spans say (otlp/join.ts), means over the joined requests with their CIs: the decode
       * step the server timed (time_in_model_decode ÷ (tokens − 1), no client delivery), with detailed traces the
       * engine's host part per step ((inference − execute) ÷ steps) and the execute part (step − host), and the queue
       * wait per request at the run's concurrency. Needs stepMs or hostMs.
       */
      requests: number;
      stepMs?: { value: number; ci?: [number, number] };
      hostMs?: { value: number; ci?: [number, number] };
      executeMs?: { value: number; ci?: [number, number] };
      queueMs?: { value: number; ci?: [number, number] };
      /** Clients in flight during the run (the decode batch; default 1). */
      concurrency?: number;
      inputLen?: number;
      outputLen?: number;
      contextLen?: number;
    })
  | (Base & { kind: "bandwidth"; gbs: number })
  | (Base & { kind: "estimate"; name: "allreduce-share" | "compute-ms" | "ceiling-tps"; low: number; high: number });

/** Normalises variant spellings: {env: {NCCL_PROTO: "LL"}} → {ncclProto: "LL"}. */
export function normVariant(v: unknown): Variant {
  if (!v || typeof v !== "object") return {};
  const o = v as Record<string, unknown>;
  const env = (o.env ?? {}) as Record<string, string>;
  const out: Variant = {};
  const proto = o.ncclProto ?? o.NCCL_PROTO ?? env.NCCL_PROTO;
  const algo = o.ncclAlgo ?? o.NCCL_ALGO ?? env.NCCL_ALGO;
  if (typeof proto === "string" && proto) out.ncclProto = proto;
  if (typeof algo === "string" && algo) out.ncclAlgo = algo;
  if (typeof o.customAllReduce === "boolean") out.customAllReduce = o.customAllReduce;
  if (o.disableCustomAllReduce === true) out.customAllReduce = false;
  if (typeof o.cudaGraphs === "boolean") out.cudaGraphs = o.cudaGraphs;
  if (o.enforceEager === true) out.cudaGraphs = false;
  if (typeof o.interconnect === "string") out.interconnect = o.interconnect;
  return out;
}

export function describeVariant(v: Variant): string {
  const parts: string[] = [];
  if (v.ncclProto) parts.push(`NCCL_PROTO=${v.ncclProto}`);
  if (v.ncclAlgo) parts.push(`NCCL_ALGO=${v.ncclAlgo}`);
  if (v.customAllReduce === false) parts.push("custom AR off");
  if (v.customAllReduce === true) parts.push("custom AR on");
  if (v.cudaGraphs === false) parts.push("eager");
  if (v.interconnect) parts.push(v.interconnect);
  return parts.length ? parts.join(", ") : "default";
}

export function parseMeasurementsText(text: string, file = "measurements"): Measurement[] {
  if (/all_reduce_perf|#\s*nThread|#\s+size\s+count\s+type/.test(text)) return [ncclMeasurement(text, file)];
  let doc: unknown;
  const t = text.trim();
  if (t.startsWith("{") || t.startsWith("[")) {
    try {
      doc = JSON.parse(t);
    } catch (err) {
      const msg = (err as Error).message;
      const m = /position (\d+)/.exec(msg);
      const pos = m ? Number(m[1]) : 0;
      const before = t.slice(0, pos);
      throw new InputError(`invalid JSON: ${msg.replace(/ in JSON at position \d+.*$/, "")}`, {
        position: { file, line: before.split("\n").length, column: pos - before.lastIndexOf("\n") },
      });
    }
  } else {
    try {
      doc = yaml().parse(text);
    } catch (err) {
      const e = err as { linePos?: { line: number; col: number }[]; message: string };
      const p = e.linePos?.[0];
      throw new InputError(`invalid YAML: ${e.message.split("\n")[0]}`, {
        position: p ? { file, line: p.line, column: p.col } : undefined,
      });
    }
  }
  // nccl-tests -J JSON: {config, results: [...]}.
  if (doc && typeof doc === "object" && Array.isArray((doc as { results?: unknown }).results))
    return [ncclMeasurement(t, file)];
  return measurementsFromDoc(doc, file);
}

export function measurementsFromDoc(doc: unknown, file = "measurements"): Measurement[] {
  if (Array.isArray(doc)) return doc.map((m, i) => checkMeasurement(m, file, i));
  if (!doc || typeof doc !== "object")
    throw new InputError(`${file}: expected a list of measurements or {measurements: [...]}`);
  const o = doc as Record<string, unknown>;
  if (Array.isArray(o.measurements)) return o.measurements.map((m, i) => checkMeasurement(m, file, i));
  if (typeof o.mean_itl_ms === "number" || typeof o.mean_tpot_ms === "number" || typeof o.mean_ttft_ms === "number")
    return fromBenchResult(o, file);
  throw new InputError(
    `${file}: not a measurements file (no "measurements" list), not a bench --save-result JSON (no mean_itl_ms) and not nccl-tests output`,
  );
}

/** vLLM bench serve / inferscope bench --save-result: mean ITL (per-chunk gap), mean TTFT, concurrency. */
export function fromBenchResult(o: Record<string, unknown>, file: string): Measurement[] {
  const out: Measurement[] = [];
  const batch = typeof o.max_concurrency === "number" ? o.max_concurrency : 1;
  const completed = typeof o.completed === "number" && o.completed > 0 ? o.completed : undefined;
  const inputLen =
    completed && typeof o.total_input_tokens === "number" ? Math.round(o.total_input_tokens / completed) : undefined;
  const itl = typeof o.mean_itl_ms === "number" ? o.mean_itl_ms : (o.mean_tpot_ms as number | undefined);
  if (typeof itl === "number")
    out.push({
      kind: "itl",
      ms: itl,
      batch,
      sd:
        typeof o.std_itl_ms === "number" && completed
          ? o.std_itl_ms / Math.sqrt(Math.max(1, (o.total_output_tokens as number) ?? completed))
          : undefined,
      label: `bench result mean ${typeof o.mean_itl_ms === "number" ? "ITL" : "TPOT"} at concurrency ${batch}`,
      source: file,
    });
  if (typeof o.mean_ttft_ms === "number")
    out.push({
      kind: "ttft",
      ms: o.mean_ttft_ms,
      inputLen,
      label: `bench result mean TTFT${inputLen ? ` (${inputLen} input tokens)` : ""}`,
      source: file,
    });
  return out;
}

function checkMeasurement(m: unknown, file: string, i: number): Measurement {
  const where = `${file}: measurement #${i + 1}`;
  if (!m || typeof m !== "object") throw new InputError(`${where}: not an object`);
  const o = m as Record<string, unknown>;
  const n = (k: string, required = true): number | undefined => {
    const v = o[k];
    if (typeof v === "number" && Number.isFinite(v)) return v;
    if (required) throw new InputError(`${where} (${String(o.kind)}): missing number "${k}"`);
    return undefined;
  };
  const ci = Array.isArray(o.ci) && o.ci.length === 2 ? (o.ci as [number, number]) : undefined;
  const base = {
    label: typeof o.label === "string" ? o.label : undefined,
    source: typeof o.source === "string" ? o.source : file,
  };
  switch (o.kind) {
    case "itl":
      return {
        ...base,
        kind: "itl",
        ms: n("ms")!,
        batch: n("batch", false),
        contextLen: n("contextLen", false),
        sd: n("sd", false),
        ci,
        variant: o.variant ? normVariant(o.variant) : undefined,
      };
    case "tpot":
    case "rate": {
      const ms = o.kind === "rate" ? 1000 / n("tokensPerSecond")! : n("ms")!;
      return {
        ...base,
        kind: "itl",
        ms,
        batch: n("batch", false),
        ci,
        variant: o.variant ? normVariant(o.variant) : undefined,
      };
    }
    case "ttft":
      return {
        ...base,
        kind: "ttft",
        ms: n("ms")!,
        inputLen: n("inputLen", false),
        sd: n("sd", false),
        ci,
        variant: o.variant ? normVariant(o.variant) : undefined,
      };
    case "ab": {
      const d = n("deltaMsPerToken", false);
      const a = n("aTotalS", false);
      const b = n("bTotalS", false);
      if (d === undefined && (a === undefined || b === undefined))
        throw new InputError(`${where} (ab): needs "deltaMsPerToken" or both "aTotalS" and "bTotalS" with "tokens"`);
      return {
        ...base,
        kind: "ab",
        variantA: normVariant(o.variantA),
        variantB: normVariant(o.variantB),
        deltaMsPerToken: d,
        aTotalS: a,
        bTotalS: b,
        tokens: n("tokens", d === undefined),
        ci,
      };
    }
    case "length-sweep":
      return {
        ...base,
        kind: "length-sweep",
        slopeMsPerToken: n("slopeMsPerToken")!,
        interceptMs: n("interceptMs")!,
        ci,
      };
    case "context-slope":
      return { ...base, kind: "context-slope", msPerKToken: n("msPerKToken")!, ci };
    case "nccl-tests": {
      if (!Array.isArray(o.rows)) throw new InputError(`${where} (nccl-tests): missing "rows"`);
      return {
        ...base,
        kind: "nccl-tests",
        rows: (o.rows as { bytes: number; us: number }[]).map((r) => ({ bytes: r.bytes, us: r.us, inPlace: false })),
        nGpus: n("nGpus", false),
      };
    }
    case "trace":
      return traceMeasurement(o, where, base);
    case "trace-fixed":
      return {
        ...base,
        kind: "trace-fixed",
        kernels: n("kernels")!,
        fixedMs: n("fixedMs")!,
        perKernelUs: n("perKernelUs")!,
        hostGapMs: n("hostGapMs")!,
        stepMs: n("stepMs")!,
        batch: n("batch", false),
      };
    case "server-split":
      return serverSplitMeasurement(o, where, base);
    case "bandwidth":
      return { ...base, kind: "bandwidth", gbs: n("gbs")! };
    case "estimate": {
      const name = o.name;
      if (name !== "allreduce-share" && name !== "compute-ms" && name !== "ceiling-tps")
        throw new InputError(`${where} (estimate): "name" must be allreduce-share, compute-ms or ceiling-tps`);
      return { ...base, kind: "estimate", name, low: n("low")!, high: n("high")! };
    }
    default:
      throw new InputError(
        `${where}: unknown kind "${String(o.kind)}" (itl, ttft, rate, ab, length-sweep, context-slope, nccl-tests, trace, trace-fixed, server-split, bandwidth, estimate)`,
      );
  }
}

/** A number, or {value, ci: [lo, hi]}; undefined when absent. */
function valueCi(
  o: Record<string, unknown>,
  k: string,
  where: string,
  kind = "trace",
): { value: number; ci?: [number, number] } | undefined {
  const v = o[k];
  if (v === undefined) return undefined;
  if (typeof v === "number" && Number.isFinite(v)) return { value: v };
  if (v && typeof v === "object") {
    const x = v as Record<string, unknown>;
    const ci = x.ci;
    const okCi = Array.isArray(ci) && ci.length === 2 && ci.every((c) => typeof c === "number" && Number.isFinite(c));
    if (typeof x.value === "number" && Number.isFinite(x.value) && (ci === undefined || okCi))
      return { value: x.value, ci: okCi ? [Math.min(...(ci as number[])), Math.max(...(ci as number[]))] : undefined };
  }
  throw new InputError(`${where} (${kind}): "${k}" must be a number or {value, ci: [low, high]}`);
}

/** The engine spans' split: each figure a number or {value, ci}; the host part within the step. */
function serverSplitMeasurement(o: Record<string, unknown>, where: string, base: Base): Measurement {
  const w = `${where} (server-split)`;
  const v = (k: string) => valueCi(o, k, where, "server-split");
  const count = (k: string, required: boolean): number | undefined => {
    const x = o[k];
    if (x === undefined && !required) return undefined;
    if (typeof x === "number" && Number.isInteger(x) && x >= 1) return x;
    throw new InputError(`${w}: "${k}" must be a whole number ≥ 1${x === undefined ? " (missing)" : ""}`);
  };
  const requests = count("requests", true)!;
  const stepMs = v("stepMs");
  const hostMs = v("hostMs");
  const executeMs = v("executeMs");
  const queueMs = v("queueMs");
  if (!stepMs && !hostMs) throw new InputError(`${w}: needs "stepMs" (the server's decode step) or "hostMs"`);
  if (stepMs && !(stepMs.value > 0)) throw new InputError(`${w}: "stepMs" must be positive`);
  if (executeMs && !(executeMs.value > 0)) throw new InputError(`${w}: "executeMs" must be positive`);
  if (hostMs && hostMs.value < 0) throw new InputError(`${w}: "hostMs" must not be negative`);
  if (hostMs && stepMs && hostMs.value >= stepMs.value)
    throw new InputError(`${w}: "hostMs" (${hostMs.value}) must be less than "stepMs" (${stepMs.value})`);
  if (queueMs && queueMs.value < 0) throw new InputError(`${w}: "queueMs" must not be negative`);
  return {
    ...base,
    kind: "server-split",
    requests,
    stepMs,
    hostMs,
    executeMs,
    queueMs,
    concurrency: count("concurrency", false),
    inputLen: count("inputLen", false),
    outputLen: count("outputLen", false),
    contextLen: count("contextLen", false),
  };
}

/**
 * A trace measurement: per-call all-reduce time given directly (`allReduceUsPerCall`), or as the
 * all-reduce share of the step (`allReduceShare`, fraction or %) with `stepMs` and `allReduceCallsPerToken`.
 */
function traceMeasurement(o: Record<string, unknown>, where: string, base: Base): Measurement {
  const stepMs = valueCi(o, "stepMs", where);
  const calls = o.allReduceCallsPerToken;
  if (calls !== undefined && !(typeof calls === "number" && calls > 0))
    throw new InputError(`${where} (trace): "allReduceCallsPerToken" must be a positive number`);
  let perCall = valueCi(o, "allReduceUsPerCall", where);
  const share = valueCi(o, "allReduceShare", where);
  if (!perCall && share) {
    if (!stepMs || calls === undefined)
      throw new InputError(`${where} (trace): "allReduceShare" needs "stepMs" and "allReduceCallsPerToken"`);
    const frac = (x: number) => (share.value > 1 ? x / 100 : x);
    const us = (s: number) => (frac(s) * stepMs.value * 1000) / (calls as number);
    perCall = { value: us(share.value), ci: share.ci ? [us(share.ci[0]), us(share.ci[1])] : undefined };
  }
  if (!perCall)
    throw new InputError(`${where} (trace): needs "allReduceUsPerCall" (or "allReduceShare" with "stepMs")`);
  if (!(perCall.value > 0)) throw new InputError(`${where} (trace): the per-call all-reduce time must be positive`);
  const num = (k: string) => (typeof o[k] === "number" && Number.isFinite(o[k]) ? (o[k] as number) : undefined);
  const proto = typeof o.protocol === "string" && o.protocol ? { ncclProto: o.protocol } : {};
  const variant = o.variant || o.protocol ? { ...normVariant(o.variant), ...proto } : undefined;
  return {
    ...base,
    kind: "trace",
    allReduceUsPerCall: perCall,
    allReduceCallsPerToken: calls as number | undefined,
    stepMs,
    batch: num("batch"),
    contextLen: num("contextLen"),
    variant,
  };
}

/**
 * nccl-tests output (text in either column layout, or -J JSON) as a fit measurement: parsed by the
 * trace module's parser, one row per size (the faster of out-of-place / in-place).
 */
export function ncclMeasurement(text: string, file = "nccl-tests.txt"): Measurement & { kind: "nccl-tests" } {
  const r = parseNcclTests(text, file);
  const rows = ncclLatencyTable(r).map((p) => ({ bytes: p.sizeBytes, us: p.timeUs, inPlace: p.inPlace }));
  if (rows.length === 0)
    throw new InputError(`${file}: nccl-tests output has no row with a finite time`, {
      position: { file, line: r.rows[0]?.line ?? 1, column: 1 },
    });
  // Ranks listed under "Using devices" count every GPU (MPI runs print nGpus 1 per process).
  const perProcess = Number(r.config.nThread ?? 1) * Number(r.config.nGpus ?? Number.NaN);
  const nGpus = r.devices.length || (Number.isFinite(perProcess) ? perProcess : undefined);
  return {
    kind: "nccl-tests",
    rows,
    nGpus,
    graph: typeof r.config.graph === "number" ? r.config.graph > 0 : undefined,
    label: `nccl-tests ${r.collective ?? "all_reduce_perf"} (${rows.length} sizes)`,
    source: file,
  };
}
