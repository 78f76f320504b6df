// Public API of the trace capability.
export {
  type AnalyzeOptions,
  analyzeFile,
  analyzeTrace,
  type FileInfo,
  type KernelClassInfo,
  loadRuleFile,
  type RankAnalysis,
  type RankSkew,
  rankSkew,
  type TraceAnalysis,
} from "./analyze.ts";
export type { ClassTimes, Overall, StepBreakdown, StepKindSummary, Timeline, TopKernel } from "./breakdown.ts";
export { type CaptureOptions, type CaptureResult, captureTrace } from "./capture.ts";
export {
  type Classification,
  Classifier,
  classifyKernel,
  classifyModule,
  classifyOp,
  DEFAULT_RULES,
  decideClass,
  KERNEL_CLASSES,
  type KernelClass,
  MODULE_RULES,
  OP_RULES,
  type OpRule,
  parseRuleFile,
  type Rule,
  type RuleFile,
} from "./classify.ts";
export { type LatencyPoint, type NcclRow, type NcclTestsResult, ncclLatencyTable, parseNcclTests } from "./nccl.ts";
export { type RawEvent, type ReadStats, readTraceFile, TraceScanner } from "./reader.ts";
export { formatAnalysis, formatNccl, formatTopology, toReportSection } from "./report.ts";
export { parseStepName, type StepKind, type StepMode, type StepSource } from "./steps.ts";
export {
  classifyLink,
  type Diagnosis,
  diagnose,
  type Link,
  type LinkClass,
  parseTopology,
  type Topology,
} from "./topo.ts";
