// The run store's public surface.

export type { RunComparison, RunListing } from "./compare.ts";
export { compareRuns, listRunsView, showRun } from "./compare.ts";
export { collectEnvironment } from "./environment.ts";
export type { ColumnType, ExportColumn, ExportFormat, ExportRow, ExportTables } from "./export.ts";
export {
  checkExportFormat,
  EXPORT_FORMATS,
  exportFiles,
  exportTables,
  REQUEST_COLUMNS,
  SUMMARY_COLUMNS,
  tablesToJsonl,
  tableToCsv,
  tableToParquet,
} from "./export.ts";
export type { PromSample } from "./push.ts";
export {
  encodeRemoteWrite,
  OTLP_METRICS,
  otlpMetrics,
  PROM_SERIES,
  promSamples,
  pushOtlpMetrics,
  pushRemoteWrite,
} from "./push.ts";
export { addSecret, redact, redactString } from "./redact.ts";
export { MIGRATIONS, SCHEMA_VERSION } from "./schema.ts";
export type { OpenOptions, SqlDatabase, SqliteDriverName, SqlStatement, SqlTransaction } from "./sqlite.ts";
export { openDatabase, sqliteDriver, sqliteErrorCode } from "./sqlite.ts";
export type { BlockRecord, BlockStatus, RunDetail, RunRecord, RunStatus, Store, StoredRequest } from "./store.ts";
export { defaultDbPath, migrate, newRunId, openStore } from "./store.ts";
