// The shared shapes of hardware telemetry: every source (nvidia-smi, dcgm-exporter, Prometheus,
// amd-smi, /proc + RAPL, the embedded sim) produces samples in these units, and one summarizer
// derives the figures (energy, J/token, bandwidth, interconnect bytes, throttling) from them.

/** Where samples come from. */
export type TelemetrySourceKind = "nvidia-smi" | "dcgm" | "prometheus" | "amd-smi" | "cpu" | "sim" | "file";

/** The saved-file formats `telemetry read` parses (here, not in read.ts, so the CLI's --format choices load no parser). */
export const TELEMETRY_FORMATS = ["smi-query", "smi-dmon", "smi-q", "smi-topo", "dcgm", "amd-smi", "rocm-smi"] as const;
export type TelemetryFileFormat = (typeof TELEMETRY_FORMATS)[number];

/** A parsed `--telemetry` value. `auto` is resolved against the target before a run starts. */
export type TelemetrySpec =
  | { kind: "none" }
  | { kind: "auto"; intervalMs?: number }
  | { kind: "nvidia-smi"; intervalMs?: number }
  | { kind: "dcgm"; url: string; intervalMs?: number }
  | { kind: "prometheus"; url: string; intervalMs?: number }
  | { kind: "amd-smi"; intervalMs?: number }
  | { kind: "cpu"; intervalMs?: number };

/**
 * One reading of one device at one time. Every field is optional: a source fills what it has.
 * Units are fixed here; parsers convert (mJ → J, MiB stays MiB, % → 0–1 ratio).
 */
export interface TelemetrySample {
  /** Unix time in seconds (fractional). */
  t: number;
  /** Device key: "gpu0", "gpu1", "gpu0/mig1", "cpu", "package-0". */
  device: string;
  /** Board power in W, as the source averages it (nvidia-smi power.draw: a 1 s average on recent drivers). */
  powerW?: number;
  /** Instantaneous power in W where the source has it (power.draw.instant). */
  powerInstantW?: number;
  /** Cumulative energy counter in J (DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION, RAPL energy_uj). Resets are handled by the summarizer. */
  energyJ?: number;
  smClockMHz?: number;
  smClockMaxMHz?: number;
  memClockMHz?: number;
  /** Share of time a kernel ran (nvidia-smi utilization.gpu, DCGM_FI_DEV_GPU_UTIL), 0–1. */
  gpuBusy?: number;
  /** Share of time memory was read or written (utilization.memory, DCGM_FI_DEV_MEM_COPY_UTIL), 0–1. Not bandwidth. */
  memBusy?: number;
  /** DRAM active ratio (DCGM_FI_PROF_DRAM_ACTIVE, NVML GPM DRAM bandwidth utilization), 0–1: achieved bandwidth ÷ peak. */
  dramActive?: number;
  /** DCGM_FI_PROF_SM_ACTIVE, 0–1. */
  smActive?: number;
  /** DCGM_FI_PROF_PIPE_TENSOR_ACTIVE, 0–1. */
  tensorActive?: number;
  /** Interconnect rates in bytes per second (DCGM_FI_PROF_PCIE_TX_BYTES etc. are rates; dmon's MB/s converted). */
  pcieTxBps?: number;
  pcieRxBps?: number;
  nvlinkTxBps?: number;
  nvlinkRxBps?: number;
  /** Clock event (throttle) reasons bitmask, NVML's nvmlClocksEventReason* bits. */
  clockEventReasons?: number;
  /** Share of the sample's interval under a power / thermal violation, 0–1 (dmon pviol; derived from DCGM's µs counters). */
  powerViolation?: number;
  thermalViolation?: number;
  /** Cumulative violation time counters in µs (DCGM_FI_DEV_POWER_VIOLATION, DCGM_FI_DEV_THERMAL_VIOLATION; the exporter's ns are converted). */
  powerViolationUs?: number;
  thermalViolationUs?: number;
  powerLimitW?: number;
  temperatureC?: number;
  memoryUsedMiB?: number;
  memoryTotalMiB?: number;
  /** CPU hosts: share of CPU time busy over the sample's interval (from /proc/stat), 0–1. */
  cpuBusy?: number;
  /** The server process on this host (device "cpu/server"): cumulative s its threads ran on a CPU (/proc/PID/task/TID/schedstat, summed). */
  serverCpuS?: number;
  /** … and cumulative s its threads were runnable but waited on a run queue for a CPU (host contention). */
  serverRunQueueS?: number;
}

/** Static facts about a device, where the source tells them (nvidia-smi -q, exporter labels). */
export interface TelemetryDevice {
  key: string;
  name?: string;
  uuid?: string;
  /** MIG instance labels as the exporter gives them (GPU_I_PROFILE, GPU_I_ID). */
  mig?: { profile?: string; instanceId?: string };
  powerLimitW?: number;
  smClockMaxMHz?: number;
  memClockMaxMHz?: number;
  pcieGen?: number;
  /** Host the device is on (dcgm-exporter's Hostname label). */
  host?: string;
  /** The Kubernetes workload dcgm-exporter attributes the device to (pod, namespace, container labels). */
  workload?: { namespace?: string; pod?: string; container?: string };
}

/** Everything one source gave over one recording (live or read from files). */
export interface TelemetryCapture {
  source: { kind: TelemetrySourceKind; detail: string };
  devices: TelemetryDevice[];
  /** Sorted by t, then device. */
  samples: TelemetrySample[];
  /** Nominal sampling interval in ms where known. */
  intervalMs?: number;
  /**
   * Seconds over which the source averages `powerW` before reporting it: 1 for nvidia-smi's power.draw on Ampere
   * and newer (its help says so), 0 or absent for instantaneous readings. The summarizer removes this lag.
   */
  powerAveragingS?: number;
  /** Stated accuracy of one power reading in W (nvidia-smi: ±5 W); integrated energy carries it over the window. */
  powerAccuracyW?: number;
  /** Resolution of the sample times in s where coarse (dmon prints whole seconds, or no time at all): 1. */
  timeResolutionS?: number;
  /** Gaps and problems met while recording (an exporter down for 2 s, a malformed line skipped), each said once. */
  notes: string[];
  /** Fields the source could not give, with why ("energy counter: not exposed by nvidia-smi --query-gpu; integrated from power.draw"). */
  unavailable: { field: string; why: string }[];
}

/** The figures derived over a window. Every field says how it was obtained. */
export interface TelemetrySummary {
  source: { kind: TelemetrySourceKind; detail: string };
  window: { startS: number; endS: number; how: "given" | "detected" | "measured-run" };
  devices: string[];
  samples: number;
  /** Energy over the window, summed over devices. */
  energyJ: number | null;
  energyMethod: "counter" | "integrated-power" | null;
  /** ± bound of the energy from sampling (integration), 0 for a counter delta; null when no energy. */
  energyErrorJ: number | null;
  /**
   * The seconds of the window the energy readings cover (the least of any device) and the window's length. Energy
   * is never extrapolated: it is over `coveredS`; under 90 % of the window it is null. Absent in older summaries.
   */
  energyCoverage?: { coveredS: number; windowS: number } | null;
  avgPowerW: number | null;
  peakPowerW: number | null;
  tokens: number | null;
  joulesPerToken: number | null;
  tokensPerJoule: number | null;
  smClockMHz: {
    max: number | null;
    median: number | null;
    p10: number | null;
    /** The device's maximum SM clock (clocks.max.sm, -q's Max Clocks, DCGM_FI_DEV_MAX_SM_CLOCK), where known. */
    deviceMax?: number | null;
  } | null;
  memClockMHz: { median: number | null } | null;
  throttle: {
    powerCapped: boolean;
    /** Share of the window with any clock-limiting reason (power cap, thermal, HW slowdown); idle and app-clock bits excluded. */
    shareOfWindow: number;
    /** Each reason seen, with its share of the window. */
    reasons: { reason: string; share: number }[];
    /** What the verdict rests on: NVML's event-reason bits, violation counters (dmon pviol, DCGM µs), or only the SM clock. */
    basis?: "clock-event-reasons" | "violation-counters" | "sm-clock";
  } | null;
  utilization: {
    gpuBusy: number | null;
    memBusy: number | null;
    dramActive: number | null;
    smActive: number | null;
  } | null;
  /** Achieved DRAM bandwidth = DRAM active × peak (given), per device mean; null without DCGM/GPM DRAM active. */
  dram: { activeMean: number; peakGBs: number | null; achievedGBs: number | null } | null;
  interconnect: {
    pcieTxBytes: number | null;
    pcieRxBytes: number | null;
    nvlinkTxBytes: number | null;
    nvlinkRxBytes: number | null;
    /** TX bytes (PCIe + NVLink, all devices) ÷ tokens. */
    bytesPerToken: number | null;
    /** ± bound on bytesPerToken from the sampling (edges, collections never read); absent for older summaries. */
    bytesPerTokenError?: number | null;
  } | null;
  cpu: {
    busyMean: number | null;
    energyJ: number | null;
    /**
     * The server process, where it runs on this host and its /proc is readable: CPU cores its threads used on
     * average, and the share of their runnable time spent waiting for a CPU (0 on a quiet host). A CPU server's
     * token time is work plus that wait.
     */
    server?: { name: string; cpuCores: number; runQueueShare: number; runQueueS: number } | null;
  } | null;
  /** One line per figure that is missing and why (never a zero for an unknown). */
  unavailable: { field: string; why: string }[];
  notes: string[];
}
