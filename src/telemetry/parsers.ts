// The parse interface the live sources use, and the one place that picks the implementation.
// INTEGRATION POINT: the defaults below are the live sources' own minimal adapters
// (sources/minimal-parsers.ts). When src/telemetry/smi.ts and dcgm.ts land, point these re-exports at
// them (wrapped to these signatures) and delete the minimal adapters; the sources take these as options.
import type { Exposition } from "../metrics/types.ts";
import type { TelemetryDevice, TelemetrySample } from "./types.ts";

/** One line of `nvidia-smi --query-gpu=… --format=csv[,nounits]` output, read in order. */
export type SmiQueryLine =
  | { kind: "header"; columns: string[] }
  | { kind: "sample"; sample: TelemetrySample; device: TelemetryDevice }
  | { kind: "skip" }
  /** A malformed line: skipped with a note, never fatal. */
  | { kind: "bad"; why: string };

/** Stateful (the header names the columns): one parser per nvidia-smi process. */
export type SmiQueryLineParser = (line: string) => SmiQueryLine;

export interface SmiQueryParserOptions {
  /**
   * nvidia-smi prints local time without a zone: the host's UTC offset in minutes (east positive),
   * taken when the loop starts.
   */
  utcOffsetMinutes: number;
}

export type SmiQueryParserFactory = (opts: SmiQueryParserOptions) => SmiQueryLineParser;

/** One line of `nvidia-smi dmon -s t -o T` (PCIe MB/s per GPU per interval). */
export type SmiDmonLine =
  | { kind: "header" }
  | { kind: "sample"; sample: TelemetrySample }
  | { kind: "skip" }
  | { kind: "bad"; why: string };

export interface SmiDmonParserOptions extends SmiQueryParserOptions {
  /** dmon -o T prints the time of day only: the date is the one that puts it nearest to now (ms). */
  now: () => number;
}

export type SmiDmonParserFactory = (opts: SmiDmonParserOptions) => (line: string) => SmiDmonLine;

/** A parsed dcgm-exporter exposition (from the exporter, or rebuilt from Prometheus) → samples at `atS`. */
export type DcgmExpositionParser = (
  exp: Exposition,
  atS: number,
) => { samples: TelemetrySample[]; devices: TelemetryDevice[] };

/** `amd-smi metric --json` output → samples at `atS`. */
export type AmdSmiJsonParser = (
  json: unknown,
  atS: number,
) => { samples: TelemetrySample[]; devices: TelemetryDevice[] };

export {
  minimalAmdSmiJson as parseAmdSmiJson,
  minimalDcgmExposition as parseDcgmExposition,
  minimalSmiDmonParser as createSmiDmonParser,
  minimalSmiQueryParser as createSmiQueryParser,
} from "./sources/minimal-parsers.ts";
