// Public API of the trace capability.
export {
  type AnalyzeOptions,
  analyzeFile,
  analyzeTrace,
  type FileInfo,
  loadRuleFile,
  type RankAnalysis,
  type RankSkew,
  rankSkew,
  type TraceAnalysis,
} from "./analyze.ts";
export type { ClassTimes, Overall, StepBreakdown, StepKindSummary, TopKernel } from "./breakdown.ts";
export { type CaptureOptions, type CaptureResult, captureTrace } from "./capture.ts";
export {
  type Classification,
  Classifier,
  classifyKernel,
  DEFAULT_RULES,
  KERNEL_CLASSES,
  type KernelClass,
  parseRuleFile,
  type Rule,
  type RuleFile,
} from "./classify.ts";
export { type LatencyPoint, type NcclRow, type NcclTestsResult, ncclLatencyTable, parseNcclTests } from "./nccl.ts";
export { type RawEvent, type ReadStats, readTraceFile, TraceScanner } from "./reader.ts";
export { formatAnalysis, formatNccl, formatTopology, toReportSection } from "./report.ts";
export { parseStepName, type StepKind, type StepMode } from "./steps.ts";
export {
  classifyLink,
  type Diagnosis,
  diagnose,
  type Link,
  type LinkClass,
  parseTopology,
  type Topology,
} from "./topo.ts";
