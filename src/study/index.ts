// The study's public surface.
export { DEFAULT_PROFILE, embeddedSimCommand } from "../sim/profile.ts";
export { assemble, type Measurements } from "./assemble.ts";
export { deploymentOf } from "./deployment.ts";
export * from "./estimate.ts";
export { defaultPlan, defaultTimeScale, PHASES, type PhaseName, type StudyPlan } from "./plan.ts";
export {
  rebuildReport,
  runStudy,
  SEED_DEPLOYMENT,
  type StudyOptions,
  type StudyOutcome,
} from "./run.ts";
