// The library (`import { … } from "inferscope"`): the function behind each command at the top level,
// and each capability's whole public API as a namespace (`load.computeMetrics`, `model.whatifGrid`).
// vega, SQLite and undici load on first use, so importing this costs none of them.

export {
  describeError,
  ExitCode,
  FindingsError,
  InferscopeError,
  InputError,
  InternalError,
  InterruptedError,
  ParseError,
  TargetError,
  UsageError,
} from "./errors.ts";
export * as experiment from "./experiment/index.ts";
// inferscope ab / sweep
export { runAB, runLengthSweep, runLoadSweep } from "./experiment/index.ts";
export * as load from "./load/index.ts";
// inferscope bench
export {
  type BenchResult,
  computeMetrics,
  parseRecordsJsonl,
  runBench,
  runSelfTest,
  runSweep,
  toVllmJson,
} from "./load/index.ts";
export type { BenchOptions, RequestRecord } from "./load/types.ts";
// inferscope metrics
export { type AuditOptions, type AuditReport, analyzeAudit, auditMetrics, formatAudit } from "./metrics/audit.ts";
export { diffSnapshots, type SnapshotDiff } from "./metrics/diff.ts";
export * as metrics from "./metrics/index.ts";
export { parseExposition } from "./metrics/parse.ts";
export { type FleetOptions, fleetAudit, fleetWatch } from "./metrics/prometheus.ts";
export { fetchRaw, parseRaw, scrape } from "./metrics/scrape.ts";
export type { Snapshot } from "./metrics/types.ts";
export { type WatchFrame, type WatchOptions, watchMetrics } from "./metrics/watch.ts";
export * as model from "./model/index.ts";
// inferscope model
export {
  catalog,
  ceilings,
  explain,
  fit,
  inputFromOptions,
  type ModelCliOptions,
  type ModelInput,
  type Prediction,
  predict,
  whatif,
} from "./model/index.ts";
export * as report from "./report/index.ts";
export { renderTerminal, type StudyResult, type WrittenReport, writeReport } from "./report/index.ts";
export * as sim from "./sim/index.ts";
// inferscope sim
export { type SimHandle, type SimOptions, startSim } from "./sim/index.ts";
export * as store from "./store/index.ts";
// inferscope runs
export { compareRuns, listRunsView, openStore, type Store, showRun } from "./store/index.ts";
export * as study from "./study/index.ts";
// inferscope study / report
export { rebuildReport, runStudy, type StudyOptions, type StudyOutcome } from "./study/index.ts";
export * as telemetry from "./telemetry/index.ts";
// inferscope telemetry read
export { type TelemetryReadOptions, type TelemetryReadResult, telemetryRead } from "./telemetry/index.ts";
export * as trace from "./trace/index.ts";
// inferscope trace
export {
  analyzeFile,
  analyzeTrace,
  captureTrace,
  parseNcclTests,
  parseTopology,
  type TraceAnalysis,
} from "./trace/index.ts";
