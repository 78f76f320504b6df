// dcgm-exporter's Prometheus families → telemetry samples, from an exposition (our parser in metrics/parse.ts) or
// from a Prometheus server's instant vectors. Names, units and labels as the real exporter writes them
// (etc/default-counters.csv and etc/dcp-metrics-included.csv of NVIDIA/dcgm-exporter). Pure.

import { ParseError } from "../errors.ts";
import { parseExposition } from "../metrics/parse.ts";
import type { Exposition, Labels } from "../metrics/types.ts";
import { saneTime } from "./sanity.ts";
import type { TelemetryCapture, TelemetryDevice, TelemetrySample } from "./types.ts";

type Conv = (s: TelemetrySample, v: number, help: string | undefined, d: TelemetryDevice) => void;

/** Families read, each with its unit conversion. Ratios stay 0–1; percentages become 0–1. */
export const DCGM_FAMILIES: Record<string, Conv> = {
  DCGM_FI_DEV_POWER_USAGE: (s, v) => {
    s.powerW = v; // W
  },
  DCGM_FI_DEV_POWER_USAGE_INSTANT: (s, v) => {
    s.powerInstantW = v;
  },
  DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION: (s, v) => {
    s.energyJ = v / 1000; // counter, mJ since boot
  },
  DCGM_FI_DEV_SM_CLOCK: (s, v) => {
    s.smClockMHz = v;
  },
  DCGM_FI_DEV_MAX_SM_CLOCK: (s, v, _h, d) => {
    s.smClockMaxMHz = v;
    d.smClockMaxMHz = v;
  },
  DCGM_FI_DEV_MEM_CLOCK: (s, v) => {
    s.memClockMHz = v;
  },
  DCGM_FI_DEV_MAX_MEM_CLOCK: (_s, v, _h, d) => {
    d.memClockMaxMHz = v;
  },
  DCGM_FI_DEV_GPU_UTIL: (s, v) => {
    s.gpuBusy = v / 100; // gauge, %
  },
  DCGM_FI_DEV_MEM_COPY_UTIL: (s, v) => {
    s.memBusy = v / 100; // gauge, %
  },
  DCGM_FI_PROF_DRAM_ACTIVE: (s, v) => {
    s.dramActive = v; // ratio of cycles, 0–1
  },
  DCGM_FI_PROF_SM_ACTIVE: (s, v) => {
    s.smActive = v;
  },
  DCGM_FI_PROF_PIPE_TENSOR_ACTIVE: (s, v) => {
    s.tensorActive = v;
  },
  DCGM_FI_PROF_PCIE_TX_BYTES: (s, v) => {
    s.pcieTxBps = v; // gauge: a rate in bytes per second (despite the name)
  },
  DCGM_FI_PROF_PCIE_RX_BYTES: (s, v) => {
    s.pcieRxBps = v;
  },
  DCGM_FI_PROF_NVLINK_TX_BYTES: (s, v) => {
    s.nvlinkTxBps = v;
  },
  DCGM_FI_PROF_NVLINK_RX_BYTES: (s, v) => {
    s.nvlinkRxBps = v;
  },
  DCGM_FI_DEV_CLOCK_THROTTLE_REASONS: (s, v) => {
    s.clockEventReasons = v; // NVML bitmask
  },
  DCGM_FI_DEV_CLOCKS_EVENT_REASONS: (s, v) => {
    s.clockEventReasons = v;
  },
  // dcgm-exporter's counters file says "(in ns)"; the HELP text decides when it says otherwise.
  DCGM_FI_DEV_POWER_VIOLATION: (s, v, help) => {
    s.powerViolationUs = toMicros(v, help);
  },
  DCGM_FI_DEV_THERMAL_VIOLATION: (s, v, help) => {
    s.thermalViolationUs = toMicros(v, help);
  },
  DCGM_FI_DEV_POWER_MGMT_LIMIT: (s, v, _h, d) => {
    s.powerLimitW = v;
    d.powerLimitW = v;
  },
  DCGM_FI_DEV_GPU_TEMP: (s, v) => {
    s.temperatureC = v;
  },
  DCGM_FI_DEV_FB_USED: (s, v) => {
    s.memoryUsedMiB = v;
  },
};

function toMicros(v: number, help: string | undefined): number {
  if (help && /\((in )?(us|usec|µs|microseconds)\)/i.test(help)) return v;
  return v / 1000;
}

/** DCGM's "blank" sentinels (no value: not supported, not yet sampled): never read as numbers. */
function isBlank(v: number): boolean {
  return !Number.isFinite(v) || v >= 9.2233720368547e18 || v === 140737488355328 || v === 2147483632;
}

/** Labels → device key: `gpu0`, a MIG instance `gpu0/mig3`; with `host`, `host:gpu0`. */
export function dcgmDeviceKey(labels: Labels, host?: string): string {
  const gpu = labels.gpu ?? labels.device?.replace(/^nvidia/, "") ?? labels.UUID ?? "?";
  const base = `gpu${gpu}`;
  const mig = labels.GPU_I_ID !== undefined && labels.GPU_I_ID !== "" ? `${base}/mig${labels.GPU_I_ID}` : base;
  return host ? `${host}:${mig}` : mig;
}

function deviceFacts(key: string, labels: Labels): TelemetryDevice {
  const d: TelemetryDevice = { key };
  if (labels.modelName) d.name = labels.modelName;
  if (labels.UUID) d.uuid = labels.UUID;
  if (labels.GPU_I_ID !== undefined && labels.GPU_I_ID !== "")
    d.mig = { profile: labels.GPU_I_PROFILE, instanceId: labels.GPU_I_ID };
  if (labels.Hostname) d.host = labels.Hostname;
  if (labels.pod || labels.namespace || labels.container)
    d.workload = {
      ...(labels.namespace ? { namespace: labels.namespace } : {}),
      ...(labels.pod ? { pod: labels.pod } : {}),
      ...(labels.container ? { container: labels.container } : {}),
    };
  return d;
}

interface Row {
  name: string;
  labels: Labels;
  value: number;
  /** Unix seconds. */
  t: number;
  help?: string;
}

function rowsToCapture(rows: Row[], source: TelemetryCapture["source"], hostPrefix: boolean): TelemetryCapture {
  const samples = new Map<string, TelemetrySample>();
  const devices = new Map<string, TelemetryDevice>();
  const seen = new Set<string>();
  const notes: string[] = [];
  const blank = new Set<string>();
  for (const r of rows) {
    const conv = DCGM_FAMILIES[r.name];
    if (!conv) continue;
    seen.add(r.name);
    if (isBlank(r.value)) {
      blank.add(r.name);
      continue;
    }
    const key = dcgmDeviceKey(r.labels, hostPrefix ? dcgmHost(r.labels) || undefined : undefined);
    const id = `${r.t}\u0000${key}`;
    let s = samples.get(id);
    if (!s) {
      s = { t: r.t, device: key };
      samples.set(id, s);
    }
    const d = devices.get(key) ?? deviceFacts(key, r.labels);
    devices.set(key, d);
    conv(s, r.value, r.help, d);
  }
  // Named by family, not counted: a live source meets the same blanks at every scrape and says them once.
  if (blank.size)
    notes.push(
      `${[...blank].sort().join(", ")}: DCGM's blank value (not supported or not yet sampled); those readings were skipped`,
    );
  const out = [...samples.values()].sort((x, y) => x.t - y.t || (x.device < y.device ? -1 : 1));
  return { source, devices: [...devices.values()], samples: out, notes, unavailable: dcgmUnavailable(seen) };
}

/** The figures the exported families cannot give, from the DCGM_FI_* names seen (one scrape, or a recording's). */
export function dcgmUnavailable(seen: ReadonlySet<string>): TelemetryCapture["unavailable"] {
  const unavailable: TelemetryCapture["unavailable"] = [];
  const want: [string, string][] = [
    ["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "energyJ"],
    ["DCGM_FI_PROF_DRAM_ACTIVE", "dramActive"],
    ["DCGM_FI_DEV_SM_CLOCK", "smClockMHz"],
  ];
  for (const [fam, field] of want)
    if (!seen.has(fam))
      unavailable.push({ field, why: `${fam} is not exported (add it to the exporter's counters CSV)` });
  if (!seen.has("DCGM_FI_PROF_PCIE_TX_BYTES") && !seen.has("DCGM_FI_PROF_NVLINK_TX_BYTES"))
    unavailable.push({
      field: "interconnect",
      why: "neither DCGM_FI_PROF_PCIE_TX_BYTES nor DCGM_FI_PROF_NVLINK_TX_BYTES is exported",
    });
  if (
    !seen.has("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS") &&
    !seen.has("DCGM_FI_DEV_CLOCKS_EVENT_REASONS") &&
    !seen.has("DCGM_FI_DEV_POWER_VIOLATION")
  )
    unavailable.push({
      field: "throttle",
      why: "no DCGM_FI_DEV_CLOCKS_EVENT_REASONS / CLOCK_THROTTLE_REASONS or DCGM_FI_DEV_POWER_VIOLATION exported",
    });
  return unavailable;
}

export interface DcgmParseOptions {
  file?: string;
  /** Unix seconds of the scrape, for samples without their own timestamp. */
  scrapeTimeS: number;
}

/** One dcgm-exporter exposition (text) → a capture; several scrapes of one exporter are merged by the caller. */
export function parseDcgmExposition(text: string, opts: DcgmParseOptions): TelemetryCapture {
  return dcgmExpositionCapture(
    parseExposition(text, { file: opts.file }),
    opts.scrapeTimeS,
    `dcgm-exporter exposition${opts.file ? ` ${opts.file}` : ""}`,
    opts.file,
  );
}

/**
 * An exposition already parsed (the live dcgm source's scrape) → a capture; samples without a timestamp get
 * `scrapeTimeS`. A sample timestamp that is no time (negative, past 2100: `1e16` ms) is a ParseError at its line.
 */
export function dcgmExpositionCapture(
  exp: Exposition,
  scrapeTimeS: number,
  detail: string,
  file?: string,
): TelemetryCapture {
  const rows: Row[] = [];
  for (const f of exp.families)
    for (const s of f.samples) {
      if (s.timestampMs !== undefined && DCGM_FAMILIES[s.name] && !saneTime(s.timestampMs / 1000))
        throw new ParseError(
          `${s.name}: the sample timestamp ${s.timestampMs} ms is not a time (expected ms since 1970, before 2100)`,
          { file, line: s.line ?? 1, column: 1 },
        );
      rows.push({
        name: s.name,
        labels: s.labels,
        value: s.value,
        t: s.timestampMs !== undefined ? s.timestampMs / 1000 : scrapeTimeS,
        help: f.help,
      });
    }
  const cap = rowsToCapture(rows, { kind: "dcgm", detail }, false);
  if (!cap.samples.length && !rows.some((r) => r.name.startsWith("DCGM_")))
    cap.notes.push("the exposition holds no DCGM_FI_* families");
  return cap;
}

/** A Prometheus instant-vector element: the shape of PrometheusClient.instant() or a plain {labels, value, timestamp}. */
export type PromVectorElement =
  | { metric: Labels; value: { t: number; v: number } }
  | { labels: Labels; value: number; timestamp: number };

/**
 * dcgm-exporter families read through a Prometheus server (a fleet): each element's `__name__` says the family.
 * Timestamps: `{t}` in ms (PrometheusClient), `timestamp` in seconds. Devices are keyed `host:gpuN` when more
 * than one Hostname (or instance) is present. HELP text is not in a vector: violation counters are taken in ns.
 */
export function dcgmVectorsToSamples(
  vectors: PromVectorElement[],
  detail = "Prometheus",
  opts: { hostPrefix?: boolean } = {},
): TelemetryCapture {
  const rows: Row[] = vectors.map((e) =>
    "metric" in e
      ? { name: e.metric.__name__ ?? "", labels: e.metric, value: e.value.v, t: e.value.t / 1000 }
      : { name: e.labels.__name__ ?? "", labels: e.labels, value: e.value, t: e.timestamp },
  );
  // A live reader decides over all its reads (hostPrefix), not over one batch.
  const prefix = opts.hostPrefix ?? new Set(rows.map((r) => dcgmHost(r.labels))).size > 1;
  return rowsToCapture(rows, { kind: "prometheus", detail }, prefix);
}

/** The host a series came from: dcgm-exporter's Hostname label, else Prometheus' instance. */
export function dcgmHost(labels: Labels): string {
  return labels.Hostname ?? labels.instance ?? "";
}
