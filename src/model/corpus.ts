// The measurement corpus (src/model/corpus/): public batch-1 decode measurements as data (validation-public.yaml), each a
// model input plus its measured ms per token, and the serving-benchmark corpus (serving/<source>.yaml: one file per
// source, TPOT at a concurrency, a header saying how the source times it). Parsed and checked here (errors name file,
// line and column); the priors are fitted from the decode rows (priors.ts). The shipped corpus is read once per
// process, and only when the build's precomputed fit (priors-cache.ts) does not match it; yaml loads on that first
// parse.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Node as YNode } from "yaml";
import { InferscopeError, InputError } from "../errors.ts";
import { yaml } from "../lazy.ts";
import type { Engine } from "./collectives.ts";
import type { ModelInput } from "./resolve.ts";
import { ENGINES, resolve } from "./resolve.ts";

export interface CorpusRow {
  id: string;
  label: string;
  model: string;
  precision: string;
  /** KV-cache dtype where the source's server set one (`--kv-cache-dtype fp8`); absent: the engine's default (auto). */
  kvDtype?: string;
  hardware: { device: string; count: number; interconnect?: string; note?: string };
  /** dp: data-parallel attention ranks (SGLang --enable-dp-attention, vLLM --data-parallel-size); tp is per rank. */
  parallelism: { tp: number; ep?: number; dp?: number };
  engine: {
    name: Engine;
    version?: string;
    date: string;
    dateApprox?: boolean;
    cudaGraphs: boolean;
    /** The container image the source ran (its tag names the release). */
    image?: string;
    /** Server flags the source states beyond the model and parallelism (e.g. --async-scheduling). */
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
    /** The random dataset's length spread as its harness defines it (the source header's timing says how). */
    randomRangeRatio?: number;
    /** Requests the benchmark sent (after any warm-up). */
    numPrompts?: number;
    /** A finite request rate, req/s (absent: all requests at once, or as fast as the concurrency allows). */
    requestRate?: number;
  };
  measured: { value: number; unit: "ms/token" | "tokens/s"; quantity: string; definition: string };
  source: string;
  /** Grouping keys for grouped cross-validation: one slug per source document, one per model family. */
  sourceKey: string;
  family: string;
  /** When the figure was published (serving rows: the row's own date, else its source's). */
  published?: string;
  /** Where a reader finds the number (serving rows: the row's own address, else its source's). */
  address?: string;
  /** Further figures the source gives beside `measured` (median/p99 TPOT, ITL, TTFT, throughput), by name. */
  also?: Record<string, number>;
  /** Derived: the measured decode time per token, ms. */
  measuredMs: number;
  /** Derived: the model input this row describes. */
  input: ModelInput;
}

/** A serving-benchmark source (one file under corpus/serving/): what it is and how it times TPOT. */
export interface CorpusSource {
  key: string;
  title: string;
  address: string;
  published: string;
  harness: string;
  timing: {
    tpot: string;
    warmup: string;
    /** A number, or text where the source does not state one or its meaning needs words. */
    randomRangeRatio: number | string;
    ignoreEos: boolean | string;
  };
  /** The file's own `definitions:` (keys its rows may use beside the decode corpus's). */
  definitions: Record<string, string>;
  file: string;
}

export interface Corpus {
  file: string;
  definitions: Record<string, string>;
  /** kind: decode — pure decode steps, the rows the decode-step fit and its validation use. */
  rows: CorpusRow[];
  /** kind: benchmark — serving TPOT/ITL at a concurrency; kept apart from the decode rows (fitted through their
   * schedule: serving.ts). */
  benchmarks: CorpusRow[];
  /**
   * The serving-benchmark corpus (corpus/serving/*.yaml, every row kind: benchmark), apart from `benchmarks`. Read on
   * first access in shippedCorpus() (the files are ~1 MB of YAML, seconds to parse, and the decode fit never reads
   * them); a problem in them is thrown there, with its file, line and column.
   */
  serving: CorpusRow[];
  /** One entry per serving file, in file-name order. */
  sources: CorpusSource[];
  /** Profiler-trace rows (corpus/traces.yaml; default: the shipped ones). */
  traces?: import("./trace-rows.ts").TraceRow[];
}

export const CORPUS_FILE = fileURLToPath(new URL("./corpus/validation-public.yaml", import.meta.url));
export const SERVING_DIR = fileURLToPath(new URL("./corpus/serving/", import.meta.url));

let cached: Corpus | undefined;

/** The corpus shipped with the library (read once): the decode corpus, and every serving file when first asked for. */
export function shippedCorpus(): Corpus {
  cached ??= withServing(parseCorpus(readFileSync(CORPUS_FILE, "utf8"), CORPUS_FILE), servingFiles);
  return cached;
}

/** The serving source files shipped beside the corpus, sorted by name. */
export function servingFiles(dir = SERVING_DIR): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((f) => f.endsWith(".yaml"))
    .sort()
    .map((f) => join(dir, f));
}

/** The decode corpus file plus serving source files, all read now; ids are unique across all of them. */
export function loadCorpus(corpusFile: string, serving: string[]): Corpus {
  const c = withServing(parseCorpus(readFileSync(corpusFile, "utf8"), corpusFile), () => serving);
  void c.serving;
  return c;
}

/** Gives `c` serving rows and sources read from `files()` on first access (once). */
function withServing(c: Corpus, files: () => string[]): Corpus {
  let read: Pick<Corpus, "serving" | "sources"> | undefined;
  const load = () => {
    if (read) return read;
    const ids = new Map([...c.rows, ...c.benchmarks].map((r) => [r.id, c.file]));
    const out: Pick<Corpus, "serving" | "sources"> = { serving: [], sources: [] };
    for (const f of files()) {
      const s = parseServingSource(readFileSync(f, "utf8"), f, { definitions: c.definitions, ids });
      out.sources.push(s.source);
      out.serving.push(...s.rows);
    }
    read = out;
    return read;
  };
  Object.defineProperty(c, "serving", { get: () => load().serving, enumerable: true });
  Object.defineProperty(c, "sources", { get: () => load().sources, enumerable: true });
  return c;
}

/** The text of a row's `measured.definition`: its key in the row's file (decode corpus or serving source), or itself. */
export function definitionOf(c: Corpus, row: CorpusRow): string {
  const key = row.measured.definition;
  const own = c.sources.find((s) => s.key === row.sourceKey && s.definitions[key] !== undefined);
  return own?.definitions[key] ?? c.definitions[key] ?? key;
}

const DATE = /^\d{4}-\d{2}(-\d{2})?$/;
const SLUG = /^[a-z0-9][a-z0-9.-]*$/;
const KINDS = ["decode", "benchmark"] as const;
const SOURCE_KIND = "inferscope.model.corpus.source";

type Doc = ReturnType<typeof readDoc>;

/** Parses YAML with positions; a syntax error names the file, line and column. */
function readDoc(text: string, file: string) {
  const { LineCounter, parseDocument } = yaml();
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
  return { doc, at };
}

/** The node at a dotted path under `node` (the deepest one that exists), for error positions. */
function nodeAt(node: unknown, path: string): YNode {
  const { isMap } = yaml();
  let n: unknown = node;
  for (const p of path.split(".")) {
    const next = isMap(n) ? n.get(p, true) : undefined;
    if (next === undefined) break;
    n = next;
  }
  return n as YNode;
}

/** Field checks that throw with the position of the offending node under `node`. */
function checker(d: Doc, node: unknown, prefix: string) {
  const fail = (path: string, what: string): never => {
    throw new InputError(`${prefix}${path} ${what}`, { position: d.at(nodeAt(node, path)) });
  };
  const str = (path: string, v: unknown) => (typeof v === "string" && v.length > 0 ? v : fail(path, "must be text"));
  const num = (path: string, v: unknown, min = 0) =>
    typeof v === "number" && Number.isFinite(v) && v >= min ? v : fail(path, `must be a number ≥ ${min}`);
  const int = (path: string, v: unknown, min = 1) =>
    Number.isInteger(v) && (v as number) >= min ? (v as number) : fail(path, `must be an integer ≥ ${min}`);
  const date = (path: string, v: unknown) => {
    const s = v instanceof Date ? v.toISOString().slice(0, 10) : String(v ?? "");
    return DATE.test(s) ? s : fail(path, "must be a date YYYY-MM or YYYY-MM-DD");
  };
  const slug = (path: string, v: unknown) =>
    SLUG.test(str(path, v) as string)
      ? (v as string)
      : fail(path, `"${v}" must be a lower-case slug (a-z, 0-9, ".", "-")`);
  const url = (path: string, v: unknown) =>
    /^https?:\/\/\S+$/.test(str(path, v)) ? (v as string) : fail(path, `"${v}" must be an http(s) address`);
  return { fail, str, num, int, date, slug, url };
}

interface RowContext {
  /** Definition keys this file may use. */
  definitions: Record<string, string>;
  /** Ids seen so far (across files) → the file that holds them. */
  ids: Map<string, string>;
  /** Serving files: every row is a benchmark row, header defaults fill sourceKey/source/address/published. */
  serving?: { source: Omit<CorpusSource, "file" | "definitions"> };
}

/** Checks and converts one row; every problem names the file, line and column. */
function parseRow(d: Doc, item: unknown, i: number, ctx: RowContext): CorpusRow {
  const { isMap, isSeq } = yaml();
  const file = d.at(null).file;
  const node = item as YNode;
  if (!isMap(node)) throw new InputError(`row ${i + 1} is not a mapping`, { position: d.at(node) });
  const js = node.toJSON() as Record<string, any>;
  const { fail, str, num, int, date, slug, url } = checker(d, node, `row ${js.id ?? i + 1}: `);
  const opt = <T>(v: unknown, f: () => T): T | undefined => (v === undefined ? undefined : f());
  const id = str("id", js.id);
  const seen = ctx.ids.get(id);
  if (seen !== undefined) fail("id", `"${id}" appears twice${seen === file ? "" : ` (also in ${seen})`}`);
  ctx.ids.set(id, file);
  const hw = js.hardware ?? fail("hardware", "is missing");
  const par = js.parallelism ?? fail("parallelism", "is missing");
  const eng = js.engine ?? fail("engine", "is missing");
  const wl = js.workload ?? fail("workload", "is missing");
  const ms = js.measured ?? fail("measured", "is missing");
  const engineName = str("engine.name", eng.name) as Engine;
  if (!ENGINES.includes(engineName)) fail("engine.name", `"${engineName}" is not one of ${ENGINES.join(", ")}`);
  if (typeof eng.cudaGraphs !== "boolean") fail("engine.cudaGraphs", "must be true or false");
  const flagsNode = node.getIn(["engine", "flags"], true);
  if (flagsNode !== undefined && !isSeq(flagsNode)) fail("engine.flags", "must be a list of flags");
  const flags = opt(eng.flags, () => (eng.flags as unknown[]).map((f) => str("engine.flags", f)));
  const unit = str("measured.unit", ms.unit);
  if (unit !== "ms/token" && unit !== "tokens/s") fail("measured.unit", 'must be "ms/token" or "tokens/s"');
  const value = num("measured.value", ms.value, Number.MIN_VALUE);
  const kind = js.kind === undefined ? "decode" : str("kind", js.kind);
  if (!(KINDS as readonly string[]).includes(kind)) fail("kind", `"${kind}" is not one of ${KINDS.join(", ")}`);
  if (ctx.serving && kind !== "benchmark") fail("kind", "must be benchmark in a serving source file");
  const concurrency = opt(wl.concurrency, () => num("workload.concurrency", wl.concurrency, 1));
  // A serving benchmark with several requests in flight is not a decode step: it must say so.
  if (kind === "benchmark" && concurrency === undefined) fail("kind", "benchmark needs workload.concurrency");
  if (concurrency !== undefined && concurrency > 1 && kind !== "benchmark")
    fail(
      "workload.concurrency",
      `${concurrency} > 1 needs kind: benchmark (steps share the batch with other requests)`,
    );
  const ratio = opt(wl.randomRangeRatio, () => num("workload.randomRangeRatio", wl.randomRangeRatio, 0));
  if (ratio !== undefined && ratio > 1) fail("workload.randomRangeRatio", "must be between 0 and 1");
  const definition = str("measured.definition", ms.definition);
  if (!ctx.definitions[definition] && definition.length < 20)
    fail("measured.definition", `"${definition}" is neither a key of definitions: nor a definition`);
  const alsoNode = node.get("also", true);
  if (alsoNode !== undefined && !isMap(alsoNode)) fail("also", "must be a mapping of figure names to numbers");
  const also = opt(js.also, () =>
    Object.fromEntries(Object.entries(js.also as Record<string, unknown>).map(([k, v]) => [k, num(`also.${k}`, v, 0)])),
  );
  const hdr = ctx.serving?.source;
  const row: Omit<CorpusRow, "input" | "measuredMs"> = {
    id,
    label: str("label", js.label),
    model: str("model", js.model),
    precision: str("precision", js.precision),
    hardware: {
      device: str("hardware.device", hw.device),
      count: num("hardware.count", hw.count, 1),
      interconnect: opt(hw.interconnect, () => str("hardware.interconnect", hw.interconnect)),
      note: hw.note,
    },
    parallelism: {
      tp: num("parallelism.tp", par.tp, 1),
      ep: opt(par.ep, () => num("parallelism.ep", par.ep, 1)),
      ...(par.dp === undefined ? {} : { dp: int("parallelism.dp", par.dp, 1) }),
    },
    engine: {
      name: engineName,
      version: eng.version === undefined ? undefined : String(eng.version),
      date: date("engine.date", eng.date),
      dateApprox: eng.dateApprox === true,
      cudaGraphs: eng.cudaGraphs,
      ...(eng.image === undefined ? {} : { image: str("engine.image", eng.image) }),
      ...(flags === undefined ? {} : { flags }),
    },
    modelSupportSince: date("modelSupportSince", js.modelSupportSince),
    kind: kind as CorpusRow["kind"],
    workload: {
      batch: num("workload.batch", wl.batch, 1),
      inputLen: num("workload.inputLen", wl.inputLen, 0),
      outputLen: num("workload.outputLen", wl.outputLen, 1),
      context: opt(wl.context, () => num("workload.context", wl.context, 0)),
      concurrency,
      dataset: opt(wl.dataset, () => str("workload.dataset", wl.dataset)),
      ...(ratio === undefined ? {} : { randomRangeRatio: ratio }),
      ...(wl.numPrompts === undefined ? {} : { numPrompts: int("workload.numPrompts", wl.numPrompts, 1) }),
      ...(wl.requestRate === undefined
        ? {}
        : { requestRate: num("workload.requestRate", wl.requestRate, Number.MIN_VALUE) }),
    },
    measured: {
      value,
      unit: unit as CorpusRow["measured"]["unit"],
      quantity: str("measured.quantity", ms.quantity),
      definition,
    },
    source: js.source === undefined && hdr ? hdr.title : str("source", js.source),
    sourceKey: js.sourceKey === undefined && hdr ? hdr.key : slug("sourceKey", js.sourceKey),
    family: slug("family", js.family),
  };
  const published = js.published === undefined ? hdr?.published : date("published", js.published);
  const address = js.address === undefined ? hdr?.address : url("address", js.address);
  if (js.kvDtype !== undefined) row.kvDtype = str("kvDtype", js.kvDtype);
  if (published !== undefined) row.published = published;
  if (address !== undefined) row.address = address;
  if (also !== undefined) row.also = also;
  const input = rowInput(row);
  if (ctx.serving) {
    // A serving row must describe a deployment the model can take: the catalog names and parallelism resolve.
    try {
      resolve(input);
    } catch (e) {
      if (!(e instanceof InferscopeError)) throw e;
      throw new InputError(`row ${id}: ${e.message}`, { position: d.at(node) });
    }
  }
  return { ...row, measuredMs: unit === "ms/token" ? value : 1000 / value, input };
}

/** The `definitions:` mapping of a file: text values only. */
function readDefinitions(d: Doc, root: unknown): Record<string, string> {
  const { isMap } = yaml();
  const defsNode = isMap(root) ? root.get("definitions", true) : undefined;
  if (defsNode === undefined) return {};
  const { fail, str } = checker(d, root, "");
  if (!isMap(defsNode)) fail("definitions", "must be a mapping of keys to definitions");
  const js = (defsNode as YNode).toJSON() as Record<string, unknown>;
  for (const [k, v] of Object.entries(js)) str(`definitions.${k}`, v);
  return js as Record<string, string>;
}

/** Parses and checks a corpus document; every problem names the file, line and column. */
export function parseCorpus(text: string, file: string): Corpus {
  const { isMap, isSeq } = yaml();
  const d = readDoc(text, file);
  const root = d.doc.contents;
  if (!isMap(root)) throw new InputError("a corpus is a mapping with `rows:`", { position: d.at(root) });
  const rowsNode = root.get("rows", true);
  if (!isSeq(rowsNode) || rowsNode.items.length === 0)
    throw new InputError("`rows:` must be a non-empty list", { position: d.at((rowsNode as YNode) ?? root) });
  const defs = readDefinitions(d, root);
  const ctx: RowContext = { definitions: defs, ids: new Map() };
  const all = rowsNode.items.map((item, i) => parseRow(d, item, i, ctx));
  return {
    file,
    definitions: defs,
    rows: all.filter((r) => r.kind === "decode"),
    benchmarks: all.filter((r) => r.kind === "benchmark"),
    serving: [],
    sources: [],
  };
}

/**
 * Parses one serving source file (corpus/serving/<key>.yaml): its header (what the source is, how it times TPOT), its
 * own definitions (beside the decode corpus's, which it may not redefine), and its rows, all kind: benchmark. `ids` carries the ids of files
 * read before, so an id is unique across the corpus.
 */
export function parseServingSource(
  text: string,
  file: string,
  shared: { definitions?: Record<string, string>; ids?: Map<string, string> } = {},
): { source: CorpusSource; rows: CorpusRow[] } {
  const { isMap, isSeq } = yaml();
  const d = readDoc(text, file);
  const root = d.doc.contents;
  if (!isMap(root))
    throw new InputError("a serving source file is a mapping with kind, version, source and rows", {
      position: d.at(root),
    });
  const js = root.toJSON() as Record<string, any>;
  const { fail, str, date, slug, url } = checker(d, root, "");
  if (js.kind !== SOURCE_KIND) fail("kind", `must be ${SOURCE_KIND}`);
  if (js.version !== 1) fail("version", "must be 1");
  const src = js.source;
  if (!isMap(root.get("source", true)))
    fail("source", "must be a mapping (key, title, address, published, harness, timing)");
  const t = src.timing;
  if (!isMap(root.getIn(["source", "timing"], true)))
    fail("source.timing", "must be a mapping (tpot, warmup, randomRangeRatio, ignoreEos)");
  const stated = (path: string, v: unknown, kind: "number" | "boolean") =>
    typeof v === kind || (typeof v === "string" && v.length > 0)
      ? (v as never)
      : fail(path, `must be a ${kind} or text ("not stated")`);
  const source: Omit<CorpusSource, "file" | "definitions"> = {
    key: slug("source.key", src.key),
    title: str("source.title", src.title),
    address: url("source.address", src.address),
    published: date("source.published", src.published),
    harness: str("source.harness", src.harness),
    timing: {
      tpot: str("source.timing.tpot", t.tpot),
      warmup: str("source.timing.warmup", t.warmup),
      randomRangeRatio: stated("source.timing.randomRangeRatio", t.randomRangeRatio, "number"),
      ignoreEos: stated("source.timing.ignoreEos", t.ignoreEos, "boolean"),
    },
  };
  const own = readDefinitions(d, root);
  for (const [k, v] of Object.entries(own))
    if (shared.definitions?.[k] !== undefined && shared.definitions[k] !== v)
      fail(`definitions.${k}`, "redefines a key of the decode corpus's definitions with other text");
  const rowsNode = root.get("rows", true);
  if (!isSeq(rowsNode) || rowsNode.items.length === 0)
    throw new InputError("`rows:` must be a non-empty list", { position: d.at((rowsNode as YNode) ?? root) });
  const ctx: RowContext = {
    definitions: { ...shared.definitions, ...own },
    ids: shared.ids ?? new Map(),
    serving: { source },
  };
  const rows = rowsNode.items.map((item, i) => parseRow(d, item, i, ctx));
  return { source: { ...source, definitions: own, file }, rows };
}

/** The model input a corpus row describes (engine date as its version, so the maturity clock is known). */
export function rowInput(r: Omit<CorpusRow, "input" | "measuredMs">): ModelInput {
  return {
    model: r.model,
    quant: r.precision,
    ...(r.kvDtype === undefined ? {} : { kvDtype: r.kvDtype }),
    gpu: r.hardware.device,
    gpus: r.hardware.count,
    tp: r.parallelism.tp,
    ep: r.parallelism.ep,
    interconnect: r.hardware.interconnect,
    engine: r.engine.name,
    engineVersion: r.engine.date,
    cudaGraphs: r.engine.cudaGraphs,
    engineFlags: r.engine.flags,
    batch: r.workload.batch,
    inputLen: r.workload.inputLen,
    outputLen: r.workload.outputLen,
    contextLen: r.workload.context,
    ...(r.parallelism.dp === undefined ? {} : { dp: r.parallelism.dp }),
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
