// `runs export`: a run's per-request records and its summary as two flat tables with one documented
// schema (docs/export.md), written as CSV, JSON Lines or Parquet. The tables are built here from the
// store alone (pure); writing files is the CLI's.
import { UsageError } from "../errors.ts";
import { quantileSorted } from "../experiment/stats.ts";
import { npMean } from "../load/npstats.ts";
import type { Store } from "./store.ts";

export type ColumnType = "string" | "int32" | "int64" | "double" | "boolean";

export interface ExportColumn {
  name: string;
  type: ColumnType;
  /** "ms", "tokens", "requests", an ISO-8601 time, or "" where no unit applies. */
  unit: string;
  meaning: string;
}

export type ExportRow = Record<string, string | number | boolean | null>;

export interface ExportTables {
  runId: string;
  requests: ExportRow[];
  summary: ExportRow[];
}

export const EXPORT_FORMATS = ["json", "csv", "jsonl", "parquet"] as const;
export type ExportFormat = (typeof EXPORT_FORMATS)[number];

export const REQUEST_COLUMNS: readonly ExportColumn[] = [
  { name: "run_id", type: "string", unit: "", meaning: "the run's id in the store" },
  {
    name: "block",
    type: "int32",
    unit: "",
    meaning: "the block's index (A/B, sweep, tune, capacity); null for a bench run",
  },
  { name: "variant", type: "string", unit: "", meaning: "the block's variant; null for a bench run" },
  { name: "request", type: "int32", unit: "", meaning: "the request's index in its block (or run)" },
  { name: "ok", type: "boolean", unit: "", meaning: "the request completed without error" },
  { name: "ttft_ms", type: "double", unit: "ms", meaning: "time to first token, client side" },
  { name: "e2el_ms", type: "double", unit: "ms", meaning: "end-to-end latency, client side" },
  { name: "tpot_ms", type: "double", unit: "ms", meaning: "time per output token after the first" },
  { name: "output_tokens", type: "int32", unit: "tokens", meaning: "tokens generated" },
  { name: "prompt_tokens", type: "int32", unit: "tokens", meaning: "tokens in the prompt" },
  { name: "error", type: "string", unit: "", meaning: "the error's class and message; null when ok" },
];

const METRICS = [
  ["ttft", "time to first token"],
  ["tpot", "time per output token"],
  ["e2el", "end-to-end latency"],
] as const;
/** The statistics of each latency in the summary: mean and numpy-linear percentiles over ok requests. */
export const SUMMARY_STATS = [
  ["mean", null],
  ["p50", 0.5],
  ["p90", 0.9],
  ["p99", 0.99],
] as const;

export const SUMMARY_COLUMNS: readonly ExportColumn[] = [
  { name: "run_id", type: "string", unit: "", meaning: "the run's id in the store" },
  { name: "kind", type: "string", unit: "", meaning: "bench, capacity, ab, sweep-*, study or tune" },
  { name: "status", type: "string", unit: "", meaning: "complete, partial, failed or running" },
  { name: "model", type: "string", unit: "", meaning: "the model served, where the run recorded it" },
  { name: "engine", type: "string", unit: "", meaning: "the engine or API backend, where the run recorded it" },
  { name: "created_at", type: "string", unit: "ISO-8601", meaning: "when the run started" },
  { name: "finished_at", type: "string", unit: "ISO-8601", meaning: "when the run ended; null while running" },
  { name: "scope", type: "string", unit: "", meaning: '"run" (every request of the run) or "block" (one block)' },
  { name: "block", type: "int32", unit: "", meaning: "the block's index; null for scope run" },
  { name: "variant", type: "string", unit: "", meaning: "the block's variant; null for scope run" },
  { name: "requests", type: "int32", unit: "requests", meaning: "requests stored" },
  { name: "ok", type: "int32", unit: "requests", meaning: "requests that completed" },
  { name: "failed", type: "int32", unit: "requests", meaning: "requests that failed" },
  ...METRICS.flatMap(([m, what]) =>
    SUMMARY_STATS.map(
      ([s]): ExportColumn => ({
        name: `${m}_ms_${s}`,
        type: "double",
        unit: "ms",
        meaning: `${what}, ${s === "mean" ? "mean" : `${s.slice(1)}th percentile`} over ok requests; null if none`,
      }),
    ),
  ),
  { name: "output_tokens", type: "int64", unit: "tokens", meaning: "tokens generated, all requests" },
  { name: "prompt_tokens", type: "int64", unit: "tokens", meaning: "prompt tokens, all requests" },
];

type Req = ReturnType<Store["getRequests"]>[number];

/** The statistics of one group of requests, keyed as the summary columns are. */
function summarize(reqs: readonly Req[]): ExportRow {
  const ok = reqs.filter((r) => r.ok);
  const row: ExportRow = { requests: reqs.length, ok: ok.length, failed: reqs.length - ok.length };
  const key = { ttft: "ttftMs", tpot: "tpotMs", e2el: "e2elMs" } as const;
  for (const [m] of METRICS) {
    const xs = Float64Array.from(ok.flatMap((r) => (r[key[m]] == null ? [] : [r[key[m]] as number]))).sort();
    for (const [s, q] of SUMMARY_STATS)
      row[`${m}_ms_${s}`] = xs.length === 0 ? null : q === null ? npMean(xs) : quantileSorted(xs, q);
  }
  row.output_tokens = reqs.reduce((a, r) => a + (r.outputTokens ?? 0), 0);
  row.prompt_tokens = reqs.reduce((a, r) => a + (r.promptTokens ?? 0), 0);
  return row;
}

const str = (v: unknown): string | null => (typeof v === "string" && v !== "" ? v : null);

/** The run's model and engine, from what each kind records (bench's setup, a config's model/engine). */
function modelAndEngine(config: Record<string, unknown>, summaries: Record<string, unknown>) {
  const setup = ((summaries.bench as { setup?: Record<string, unknown> } | undefined)?.setup ?? {}) as Record<
    string,
    unknown
  >;
  return {
    model: str(setup.model_id) ?? str(config.model),
    engine: str(config.engine) ?? str(setup.backend) ?? str(config.backend),
  };
}

/** A run's two tables, as docs/export.md describes them. */
export function exportTables(store: Store, id: string): ExportTables {
  const detail = store.getRun(id);
  const { run } = detail;
  const reqs = store.getRequests(run.id);
  const blockById = new Map(detail.blocks.map((b) => [b.id, b]));
  const requests: ExportRow[] = reqs.map((r) => {
    const b = r.blockId == null ? undefined : blockById.get(r.blockId);
    return {
      run_id: run.id,
      block: b?.index ?? null,
      variant: b?.variant ?? null,
      request: r.index,
      ok: r.ok,
      ttft_ms: r.ttftMs,
      e2el_ms: r.e2elMs,
      tpot_ms: r.tpotMs,
      output_tokens: r.outputTokens,
      prompt_tokens: r.promptTokens,
      error: r.error ?? null,
    };
  });
  const head = {
    run_id: run.id,
    kind: run.kind,
    status: run.status,
    ...modelAndEngine(run.config, detail.summaries),
    created_at: run.createdAt,
    finished_at: run.finishedAt,
  };
  const summary: ExportRow[] = [{ ...head, scope: "run", block: null, variant: null, ...summarize(reqs) }];
  for (const b of detail.blocks)
    summary.push({
      ...head,
      scope: "block",
      block: b.index,
      variant: b.variant,
      ...summarize(reqs.filter((r) => r.blockId === b.id)),
    });
  return { runId: run.id, requests, summary };
}

function csvCell(v: unknown): string {
  if (v == null) return "";
  const s = String(v);
  return /[",\n\r]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

/** One table as CSV: a header, then a row per record; null is an empty cell, booleans 1/0. */
export function tableToCsv(columns: readonly ExportColumn[], rows: readonly ExportRow[]): string {
  const lines = [columns.map((c) => c.name).join(",")];
  for (const r of rows)
    lines.push(columns.map((c) => csvCell(typeof r[c.name] === "boolean" ? (r[c.name] ? 1 : 0) : r[c.name])).join(","));
  return `${lines.join("\n")}\n`;
}

/** Both tables as JSON Lines: the summary rows first, then the requests, each with its "type". */
export function tablesToJsonl(t: ExportTables): string {
  const line = (type: string, r: ExportRow) => JSON.stringify({ type, ...r });
  return `${[...t.summary.map((r) => line("summary", r)), ...t.requests.map((r) => line("request", r))].join("\n")}\n`;
}

export function checkExportFormat(format: string): ExportFormat {
  if (!(EXPORT_FORMATS as readonly string[]).includes(format))
    throw new UsageError(`--format must be one of ${EXPORT_FORMATS.join(", ")}, got "${format}"`);
  return format as ExportFormat;
}

const PARQUET_TYPE = {
  string: "STRING",
  int32: "INT32",
  int64: "INT64",
  double: "DOUBLE",
  boolean: "BOOLEAN",
} as const;

/** One table as a Parquet file (snappy-compressed, every column nullable). The writer loads on first use. */
export async function tableToParquet(
  columns: readonly ExportColumn[],
  rows: readonly ExportRow[],
): Promise<Uint8Array> {
  const { parquetWriteBuffer } = await import("hyparquet-writer");
  const columnData = columns.map((c) => ({
    name: c.name,
    type: PARQUET_TYPE[c.type],
    nullable: true,
    data: rows.map((r) => {
      const v = r[c.name] ?? null;
      return c.type === "int64" && v !== null ? BigInt(v as number) : v;
    }),
  }));
  return new Uint8Array(parquetWriteBuffer({ columnData, kvMetadata: [{ key: "inferscope.schema", value: "1" }] }));
}

/**
 * The files an export writes: one for json and jsonl, two (requests and summary) for csv and parquet.
 * `base` is --out; without it csv and jsonl go to stdout (csv: the requests table, as before) and
 * parquet to `<run id>.requests.parquet` and `<run id>.summary.parquet` in the working folder.
 */
export async function exportFiles(
  store: Store,
  id: string,
  format: ExportFormat,
  base?: string,
): Promise<Array<{ path: string | null; table: "run" | "requests" | "summary"; data: string | Uint8Array }>> {
  checkExportFormat(format);
  if (format === "json") return [{ path: base ?? null, table: "run", data: store.exportRun(id, "json") }];
  const t = exportTables(store, id);
  if (format === "jsonl") return [{ path: base ?? null, table: "run", data: tablesToJsonl(t) }];
  if (format === "csv" && base === undefined)
    return [{ path: null, table: "requests", data: tableToCsv(REQUEST_COLUMNS, t.requests) }];
  const stem = (base ?? t.runId).replace(new RegExp(`\\.${format}$`), "");
  const encode = format === "csv" ? tableToCsv : tableToParquet;
  return [
    { path: `${stem}.requests.${format}`, table: "requests", data: await encode(REQUEST_COLUMNS, t.requests) },
    { path: `${stem}.summary.${format}`, table: "summary", data: await encode(SUMMARY_COLUMNS, t.summary) },
  ];
}
