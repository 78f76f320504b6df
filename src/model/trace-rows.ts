// The profiler-trace rows the corpus fit reads (corpus/traces.yaml): per-kernel cost and kernel counts measured from
// real traces by trace-evidence.ts. Kept apart from the trace reader so the fit's code (its cache stamp) does not
// include it. Pure but for reading the shipped file.
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { InputError } from "../errors.ts";
import { yaml } from "../lazy.ts";

export interface TraceRow {
  id: string;
  trace: string;
  label: string;
  model: string;
  precision: string;
  device: string;
  /** A serving engine (its kernel count is evidence too), or "torch" for a plain PyTorch step. */
  engine: string;
  cudaGraphs: boolean;
  batch: number;
  measured: { kernels: number; stepMs: number; fixedMs: number; perKernelUs: number };
  source: string;
  sourceKey: string;
}

export const TRACES_FILE = fileURLToPath(new URL("./corpus/traces.yaml", import.meta.url));

let tracesCache: TraceRow[] | undefined;

/** The trace rows shipped with the library (read once). */
export function shippedTraceRows(): TraceRow[] {
  tracesCache ??= parseTraceRows(readFileSync(TRACES_FILE, "utf8"), TRACES_FILE);
  return tracesCache;
}

/** Parses and checks the trace rows; a problem names the file, line and column. */
export function parseTraceRows(text: string, file: string): TraceRow[] {
  const { isMap, isSeq, LineCounter, parseDocument } = yaml();
  const lc = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lc, prettyErrors: false });
  const at = (node: unknown) => {
    const p = lc.linePos((node as { range?: number[] } | undefined)?.range?.[0] ?? 0);
    return { file, line: p.line, column: p.col };
  };
  if (doc.errors.length) {
    const p = lc.linePos(doc.errors[0].pos[0]);
    throw new InputError(`invalid YAML: ${doc.errors[0].message.split("\n")[0]}`, {
      position: { file, line: p.line, column: p.col },
    });
  }
  const rowsNode = isMap(doc.contents) ? doc.contents.get("rows", true) : undefined;
  if (!isSeq(rowsNode)) throw new InputError("a traces file is a mapping with `rows:`", { position: at(doc.contents) });
  return rowsNode.items.map((item, i) => {
    const js = (isMap(item) ? item.toJSON() : undefined) as Record<string, any> | undefined;
    const fail = (what: string): never => {
      throw new InputError(`trace row ${js?.id ?? i + 1}: ${what}`, { position: at(item) });
    };
    if (!js) return fail("is not a mapping");
    const str = (k: string) => (typeof js[k] === "string" && js[k] ? (js[k] as string) : fail(`${k} must be text`));
    const pos = (v: unknown, k: string) =>
      typeof v === "number" && Number.isFinite(v) && v > 0 ? v : fail(`${k} must be a number > 0`);
    const m = js.measured ?? fail("measured is missing");
    if (typeof js.cudaGraphs !== "boolean") fail("cudaGraphs must be true or false");
    return {
      id: str("id"),
      trace: str("trace"),
      label: str("label"),
      model: str("model"),
      precision: str("precision"),
      device: str("device"),
      engine: str("engine"),
      cudaGraphs: js.cudaGraphs,
      batch: pos(js.batch, "batch"),
      measured: {
        kernels: pos(m.kernels, "measured.kernels"),
        stepMs: pos(m.stepMs, "measured.stepMs"),
        fixedMs: pos(m.fixedMs, "measured.fixedMs"),
        perKernelUs: pos(m.perKernelUs, "measured.perKernelUs"),
      },
      source: str("source"),
      sourceKey: str("sourceKey"),
    };
  });
}
