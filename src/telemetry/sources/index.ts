// The registry of live telemetry sources: a resolved spec → the source that records it.
import { InternalError } from "../../errors.ts";
import { DEFAULT_INTERVAL_MS } from "../spec.ts";
import type { TelemetrySpec } from "../types.ts";
import { type AmdSmiOptions, amdSmiSource } from "./amd-smi.ts";
import { intervalOf, type TelemetrySource } from "./common.ts";
import { type CpuSourceOptions, cpuSource } from "./cpu.ts";
import { type DcgmOptions, dcgmSource } from "./dcgm.ts";
import { type NvidiaSmiOptions, nvidiaSmiSource } from "./nvidia-smi.ts";
import { type PrometheusSourceOptions, prometheusSource } from "./prometheus.ts";

export type { SourceStartOptions, TelemetryHandle, TelemetrySource } from "./common.ts";
export { liveTelemetryGroups } from "./common.ts";

/** Per-source options (binaries, paths, limits); tests swap pieces here. */
export interface SourceOverrides {
  nvidiaSmi?: NvidiaSmiOptions;
  dcgm?: DcgmOptions;
  prometheus?: PrometheusSourceOptions;
  amdSmi?: AmdSmiOptions;
  cpu?: CpuSourceOptions;
}

export type ConcreteSpec = Exclude<TelemetrySpec, { kind: "none" } | { kind: "auto" }>;

export function sourceFor(
  spec: ConcreteSpec,
  o: SourceOverrides = {},
): { source: TelemetrySource; intervalMs: number } {
  const intervalMs = intervalOf(spec, DEFAULT_INTERVAL_MS[spec.kind]);
  switch (spec.kind) {
    case "nvidia-smi":
      return { source: nvidiaSmiSource(o.nvidiaSmi), intervalMs };
    case "dcgm":
      return { source: dcgmSource(spec.url, o.dcgm), intervalMs };
    case "prometheus":
      return { source: prometheusSource(spec.url, o.prometheus), intervalMs };
    case "amd-smi":
      return { source: amdSmiSource(o.amdSmi), intervalMs };
    case "cpu":
      return { source: cpuSource(o.cpu), intervalMs };
    default:
      throw new InternalError(`no telemetry source for ${(spec as { kind: string }).kind}`);
  }
}
