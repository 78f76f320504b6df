// The measurement corpus (src/model/corpus/*.yaml): public batch-1 decode measurements as data, each a model input
// plus its measured ms per token. Parsed and checked here (errors name file, line and column); the priors are fitted
// from it (priors.ts). The shipped corpus is read once per process, and only when the build's precomputed fit
// (priors-cache.ts) does not match it; yaml loads on that first parse.
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { Node as YNode } from "yaml";
import { InputError } from "../errors.ts";
import { yaml } from "../lazy.ts";
import type { Engine } from "./collectives.ts";
import type { ModelInput } from "./resolve.ts";
import { ENGINES } from "./resolve.ts";

export interface CorpusRow {
  id: string;
  label: string;
  model: string;
  precision: string;
  hardware: { device: string; count: number; interconnect?: string; note?: string };
  parallelism: { tp: number; ep?: number; dp?: number };
  engine: {
    name: Engine;
    version?: string;
    date: string;
    dateApprox?: boolean;
    cudaGraphs: boolean;
    image?: string;
    /** Server flags that change how a step runs. */
    flags?: string[];
  };
  modelSupportSince: string;
  /** "decode": a pure decode step of `batch` sequences; "benchmark": a serving benchmark's TPOT/ITL at a concurrency
   * (steps may carry other requests' prefill chunks), which a decode-step fit must skip. */
  kind: "decode" | "benchmark";
  workload: {
    batch: number;
    inputLen: number;
    outputLen: number;
    context?: number;
    /** Client concurrency of a serving benchmark (1 = one request in flight). */
    concurrency?: number;
    /** The benchmark's prompt set, e.g. sharegpt or random. */
    dataset?: string;
    /** The random dataset's length spread (its harness's --random-range-ratio). */
    randomRangeRatio?: number;
    /** Requests the benchmark sent. */
    numPrompts?: number;
    /** A finite request rate, req/s (absent: all requests at once, capped by the concurrency). */
    requestRate?: number;
  };
  measured: { value: number; unit: "ms/token" | "tokens/s"; quantity: string; definition: string };
  source: string;
  /** When the number was published (YYYY-MM[-DD]); default the engine release's date. */
  published?: string;
  /** Where a reader finds the number (a URL), when the source's own address is not enough. */
  address?: string;
  /** Grouping keys for grouped cross-validation: one slug per source document, one per model family. */
  sourceKey: string;
  family: string;
  /** Derived: the measured decode time per token, ms. */
  measuredMs: number;
  /** Derived: the model input this row describes. */
  input: ModelInput;
}

export interface Corpus {
  file: string;
  definitions: Record<string, string>;
  /** kind: decode — pure decode steps, the rows the decode-step fit and its validation use. */
  rows: CorpusRow[];
  /** kind: benchmark — serving TPOT/ITL at a concurrency; kept apart from the decode rows (fitted through their
   * schedule: serving.ts). */
  benchmarks: CorpusRow[];
  /** Serving rows from the per-source files (corpus/serving/*.yaml). */
  serving?: CorpusRow[];
  /** Profiler-trace rows (corpus/traces.yaml; default: the shipped ones). */
  traces?: import("./trace-rows.ts").TraceRow[];
}

export const CORPUS_FILE = fileURLToPath(new URL("./corpus/validation-public.yaml", import.meta.url));

let cached: Corpus | undefined;

/** The corpus shipped with the library (read once). */
export function shippedCorpus(): Corpus {
  cached ??= parseCorpus(readFileSync(CORPUS_FILE, "utf8"), CORPUS_FILE);
  return cached;
}

const DATE = /^\d{4}-\d{2}(-\d{2})?$/;
const SLUG = /^[a-z0-9][a-z0-9.-]*$/;
const KINDS = ["decode", "benchmark"] as const;

/** Parses and checks a corpus document; every problem names the file, line and column. */
export function parseCorpus(text: string, file: string): Corpus {
  const { isMap, isSeq, LineCounter, parseDocument } = yaml();
  const lc = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lc, prettyErrors: false });
  const at = (node: YNode | null | undefined) => {
    const off = node?.range?.[0] ?? 0;
    const p = lc.linePos(off);
    return { file, line: p.line, column: p.col };
  };
  if (doc.errors.length) {
    const e = doc.errors[0];
    const p = lc.linePos(e.pos[0]);
    throw new InputError(`invalid YAML: ${e.message.split("\n")[0]}`, {
      position: { file, line: p.line, column: p.col },
    });
  }
  const root = doc.contents;
  if (!isMap(root)) throw new InputError("a corpus is a mapping with `rows:`", { position: at(root) });
  const rowsNode = root.get("rows", true);
  if (!isSeq(rowsNode) || rowsNode.items.length === 0)
    throw new InputError("`rows:` must be a non-empty list", { position: at((rowsNode as YNode) ?? root) });
  const defs = (doc.toJS() as { definitions?: Record<string, string> }).definitions ?? {};
  const ids = new Set<string>();
  const all: CorpusRow[] = rowsNode.items.map((item, i) => {
    const node = item as YNode;
    if (!isMap(node)) throw new InputError(`row ${i + 1} is not a mapping`, { position: at(node) });
    const js = node.toJSON() as Record<string, any>;
    const fail = (path: string, what: string): never => {
      const parts = path.split(".");
      let n: unknown = node;
      for (const p of parts) {
        const next = isMap(n) ? n.get(p, true) : undefined;
        if (next === undefined) break;
        n = next;
      }
      throw new InputError(`row ${js.id ?? i + 1}: ${path} ${what}`, { position: at(n as YNode) });
    };
    const str = (path: string, v: unknown) => (typeof v === "string" && v.length > 0 ? v : fail(path, "must be text"));
    const num = (path: string, v: unknown, min = 0) =>
      typeof v === "number" && Number.isFinite(v) && v >= min ? v : fail(path, `must be a number ≥ ${min}`);
    const date = (path: string, v: unknown) => {
      const s = v instanceof Date ? v.toISOString().slice(0, 10) : String(v ?? "");
      return DATE.test(s) ? s : fail(path, "must be a date YYYY-MM or YYYY-MM-DD");
    };
    const id = str("id", js.id);
    if (ids.has(id)) fail("id", `"${id}" appears twice`);
    ids.add(id);
    const hw = js.hardware ?? fail("hardware", "is missing");
    const par = js.parallelism ?? fail("parallelism", "is missing");
    const eng = js.engine ?? fail("engine", "is missing");
    const wl = js.workload ?? fail("workload", "is missing");
    const ms = js.measured ?? fail("measured", "is missing");
    const engineName = str("engine.name", eng.name) as Engine;
    if (!ENGINES.includes(engineName)) fail("engine.name", `"${engineName}" is not one of ${ENGINES.join(", ")}`);
    if (typeof eng.cudaGraphs !== "boolean") fail("engine.cudaGraphs", "must be true or false");
    const unit = str("measured.unit", ms.unit);
    if (unit !== "ms/token" && unit !== "tokens/s") fail("measured.unit", 'must be "ms/token" or "tokens/s"');
    const value = num("measured.value", ms.value, Number.MIN_VALUE);
    const slug = (path: string, v: unknown) =>
      SLUG.test(str(path, v) as string)
        ? (v as string)
        : fail(path, `"${v}" must be a lower-case slug (a-z, 0-9, ".", "-")`);
    const kind = js.kind === undefined ? "decode" : str("kind", js.kind);
    if (!(KINDS as readonly string[]).includes(kind)) fail("kind", `"${kind}" is not one of ${KINDS.join(", ")}`);
    const concurrency = wl.concurrency === undefined ? undefined : num("workload.concurrency", wl.concurrency, 1);
    // A serving benchmark with several requests in flight is not a decode step: it must say so.
    if (kind === "benchmark" && concurrency === undefined) fail("kind", "benchmark needs workload.concurrency");
    if (concurrency !== undefined && concurrency > 1 && kind !== "benchmark")
      fail(
        "workload.concurrency",
        `${concurrency} > 1 needs kind: benchmark (steps share the batch with other requests)`,
      );
    const definition = str("measured.definition", ms.definition);
    if (!defs[definition] && definition.length < 20)
      fail("measured.definition", `"${definition}" is neither a key of definitions: nor a definition`);
    const row: Omit<CorpusRow, "input" | "measuredMs"> = {
      id,
      label: str("label", js.label),
      model: str("model", js.model),
      precision: str("precision", js.precision),
      hardware: {
        device: str("hardware.device", hw.device),
        count: num("hardware.count", hw.count, 1),
        interconnect: hw.interconnect === undefined ? undefined : str("hardware.interconnect", hw.interconnect),
        note: hw.note,
      },
      parallelism: {
        tp: num("parallelism.tp", par.tp, 1),
        ep: par.ep === undefined ? undefined : num("parallelism.ep", par.ep, 1),
        dp: par.dp === undefined ? undefined : num("parallelism.dp", par.dp, 1),
      },
      engine: {
        name: engineName,
        version: eng.version === undefined ? undefined : String(eng.version),
        date: date("engine.date", eng.date),
        dateApprox: eng.dateApprox === true,
        cudaGraphs: eng.cudaGraphs,
      },
      modelSupportSince: date("modelSupportSince", js.modelSupportSince),
      kind: kind as CorpusRow["kind"],
      workload: {
        batch: num("workload.batch", wl.batch, 1),
        inputLen: num("workload.inputLen", wl.inputLen, 0),
        outputLen: num("workload.outputLen", wl.outputLen, 1),
        context: wl.context === undefined ? undefined : num("workload.context", wl.context, 0),
        concurrency,
        dataset: wl.dataset === undefined ? undefined : str("workload.dataset", wl.dataset),
      },
      measured: {
        value,
        unit: unit as CorpusRow["measured"]["unit"],
        quantity: str("measured.quantity", ms.quantity),
        definition,
      },
      source: str("source", js.source),
      sourceKey: slug("sourceKey", js.sourceKey),
      family: slug("family", js.family),
    };
    return {
      ...row,
      measuredMs: unit === "ms/token" ? value : 1000 / value,
      input: rowInput(row),
    };
  });
  return {
    file,
    definitions: defs,
    rows: all.filter((r) => r.kind === "decode"),
    benchmarks: all.filter((r) => r.kind === "benchmark"),
  };
}

/** The model input a corpus row describes (engine date as its version, so the maturity clock is known). */
export function rowInput(r: Omit<CorpusRow, "input" | "measuredMs">): ModelInput {
  return {
    model: r.model,
    quant: r.precision,
    gpu: r.hardware.device,
    gpus: r.hardware.count,
    tp: r.parallelism.tp,
    ep: r.parallelism.ep,
    dp: r.parallelism.dp,
    interconnect: r.hardware.interconnect,
    engine: r.engine.name,
    engineVersion: r.engine.date,
    cudaGraphs: r.engine.cudaGraphs,
    engineFlags: r.engine.flags,
    batch: r.workload.batch,
    inputLen: r.workload.inputLen,
    outputLen: r.workload.outputLen,
    contextLen: r.workload.context,
  };
}

/** When each engine first ran each model family, from the corpus rows (the maturity clock's start). */
export function supportDates(c: Corpus = shippedCorpus()): Map<string, string> {
  const m = new Map<string, string>();
  for (const r of c.rows) {
    const k = `${r.engine.name}|${r.model}`;
    if (!m.has(k) || r.modelSupportSince < m.get(k)!) m.set(k, r.modelSupportSince);
  }
  return m;
}
