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
  type RooflineOptions,
  rankSkew,
  rooflineFor,
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
export { applyContext, CONTEXT_ATTENTION, CONTEXT_NOT_SAMPLING } from "./context.ts";
export { explainKernels, formatExplanations, type KernelExplanation } from "./explain.ts";
export { analyzeLayers, type HeadTailKernel, type LayerAnalysis, type LayerOp, type Spread } from "./layers.ts";
export { type LatencyPoint, type NcclRow, type NcclTestsResult, ncclLatencyTable, parseNcclTests } from "./nccl.ts";
export { type RawEvent, type ReadStats, readTraceFile, TraceScanner } from "./reader.ts";
export { findRepeats, type RepeatOptions, type Repeats } from "./repeats.ts";
export { formatAnalysis, formatLayers, formatNccl, formatRoofline, formatTopology, toReportSection } from "./report.ts";
export { type GemmRoofline, type RooflineAnalysis, roofline, rooflineLine, type TermComparison } from "./roofline.ts";
export { layersSection, rooflineSection } from "./section.ts";
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
