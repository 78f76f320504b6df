// Public API of the decode-step model: predict, explain, whatif, fit, ceilings and the catalogs.
export type { Architecture } from "./architecture.ts";
export { fromHfConfig, listModels, paramBreakdown } from "./architecture.ts";
export type { CatalogListing } from "./catalog.ts";
export { catalog, suggest } from "./catalog.ts";
export type { AllReduceChoice, Engine } from "./collectives.ts";
export { chooseAllReduce, ncclCandidates, ncclMenu } from "./collectives.ts";
export { SEED_DEPLOYMENT } from "./examples.ts";
export { explain, explainFit } from "./explain.ts";
export type { FitParam, FitResult } from "./fit.ts";
export { fit } from "./fit.ts";
export { parseGgufHeader } from "./gguf.ts";
export type { Gpu, Interconnect } from "./hardware.ts";
export { listGpus } from "./hardware.ts";
export { loadGguf, loadMeasurements, loadModelArg } from "./io.ts";
export type { Measurement, Variant } from "./measurements.ts";
// parseNcclTests (model name kept): nccl-tests output → a fit measurement, via the trace parser.
export { ncclMeasurement, ncclMeasurement as parseNcclTests, parseMeasurementsText } from "./measurements.ts";
export type { ModelCliOptions } from "./options.ts";
export { inputFromOptions } from "./options.ts";
export type { CollectivesReport, Prediction, Term } from "./predict.ts";
export { predict } from "./predict.ts";
export type { Range } from "./range.ts";
export type { Calibration, ModelInput } from "./resolve.ts";
export type { Topology } from "./topology.ts";
export { interconnectFromTopo, parseTopo } from "./topology.ts";
export type { CeilingRow, WhatIfRow } from "./whatif.ts";
export { ceilings, whatif, whatifGrid } from "./whatif.ts";
