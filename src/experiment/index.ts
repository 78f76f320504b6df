// The experiment capability's public surface: A/B with restarts, sweeps, statistics, attribution.
export type {
  ABBlock,
  ABConfig,
  ABDeps,
  ABOptions,
  ABProgress,
  ABResult,
  MetricName,
  MetricSummary,
  VariantDiff,
  VariantStats,
} from "./ab.ts";
export { analyseRun, METRICS, metricSamples, resolveABConfig, runAB } from "./ab.ts";
export type { Attribution } from "./attribute.ts";
export { attributePerOp } from "./attribute.ts";
export type { BlockContext, BlockResult, BlockRunner, BlockSample, Workload } from "./blocks.ts";
export { benchBlockRunner, DEFAULT_WORKLOAD, sampleFromRecord } from "./blocks.ts";
export type { PlannedBlock } from "./design.ts";
export { planBlocks } from "./design.ts";
export { renderAB, renderLoadSweep, renderSweep } from "./render.ts";
export type { Comparison, Interval, LineFit, MannWhitneyResult, SampleSummary, WelchResult } from "./stats.ts";
export {
  bootstrapCI,
  bootstrapDiffCI,
  compareSamples,
  makeRng,
  mannWhitneyU,
  minimumDetectableEffect,
  studentTCdf,
  theilSen,
  theilSenBootstrap,
  welchT,
} from "./stats.ts";
export type {
  LengthSweepConfig,
  LengthSweepOptions,
  LoadPoint,
  LoadSweepConfig,
  LoadSweepOptions,
  LoadSweepResult,
  SweepDeps,
  SweepFit,
  SweepPoint,
  SweepProgress,
  SweepResult,
} from "./sweep.ts";
export { analyseLengthSweep, analyseLoadSweep, runLengthSweep, runLoadSweep } from "./sweep.ts";
export type { ServerHandle, ServerSpec, VariantSpec } from "./variants.ts";
export { interruptSignal, parseVariant, processGroupMembers, startServer } from "./variants.ts";
