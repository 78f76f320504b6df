// The study's public surface.
export { assemble, type Measurements } from "./assemble.ts";
export { deploymentOf } from "./deployment.ts";
export * from "./estimate.ts";
export { defaultPlan, defaultTimeScale, PHASES, type PhaseName, type StudyPlan } from "./plan.ts";
export {
  DEFAULT_PROFILE,
  embeddedSimCommand,
  rebuildReport,
  runStudy,
  SEED_DEPLOYMENT,
  type StudyOptions,
  type StudyOutcome,
} from "./run.ts";
