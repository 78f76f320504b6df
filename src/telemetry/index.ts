// Public API of the telemetry capability (file readers, parsers, window, summary). The live samplers
// (sources/) add their own exports here.
export { type AmdSmiParseOptions, parseAmdSmiJson } from "./amdsmi.ts";
export {
  DCGM_FAMILIES,
  type DcgmParseOptions,
  dcgmDeviceKey,
  dcgmExpositionCapture,
  dcgmHost,
  dcgmUnavailable,
  dcgmVectorsToSamples,
  type PromVectorElement,
  parseDcgmExposition,
} from "./dcgm.ts";
export {
  detectTelemetryFormat,
  TELEMETRY_FORMATS,
  type TelemetryFileFormat,
  type TelemetryFileResult,
  type TelemetryReadOptions,
  type TelemetryReadResult,
  telemetryRead,
} from "./read.ts";
export { formatSummary, formatTelemetryRead } from "./render.ts";
export {
  CLOCK_EVENT_BITS,
  canonicalField,
  createSmiDmonLineParser,
  createSmiQueryLineParser,
  type DmonLineOptions,
  type DmonParseOptions,
  parseSmiDmon,
  parseSmiQ,
  parseSmiQueryCsv,
  parseSmiTimestamp,
  SMI_POWER_ACCURACY_W,
  type SmiDmonLineParser,
  type SmiParseOptions,
  type SmiQReport,
  type SmiQueryLineOptions,
  type SmiQueryLineParser,
  smiQCapture,
  smiQueryCapture,
} from "./smi.ts";
export {
  counterDelta,
  integrateTrailingAverage,
  integrateTrapezoid,
  POWER_CAPPED_SHARE,
  type SummaryOptions,
  summarizeTelemetry,
} from "./summary.ts";
export type * from "./types.ts";
export { type DetectOptions, detectWindow, parseWindowFlag, type TelemetryWindow } from "./window.ts";
