// MINIMAL ADAPTERS, to be replaced: just enough line → sample parsing for the live sources and their
// tests until src/telemetry/smi.ts and dcgm.ts (the full file parsers) are merged. src/telemetry/parsers.ts
// is the only importer; point it at the full parsers and delete this file.
import type { Exposition } from "../../metrics/types.ts";
import type {
  SmiDmonLine,
  SmiDmonParserOptions,
  SmiQueryLine,
  SmiQueryLineParser,
  SmiQueryParserOptions,
} from "../parsers.ts";
import type { TelemetryDevice, TelemetrySample } from "../types.ts";

// nvidia-smi prints these for values a device does not have.
const NOT_A_VALUE = /^\[?(N\/A|Not Supported|Unknown Error|Insufficient Permissions|GPU is lost)\]?$/i;

/** A CSV cell as a number: units ("79.25 W", "18 %", "1980 MHz", "1 MiB") dropped; hex bitmasks read. */
function num(cell: string | undefined): number | undefined {
  if (cell === undefined) return undefined;
  const s = cell.trim();
  if (!s || NOT_A_VALUE.test(s)) return undefined;
  if (/^0x[0-9a-f]+$/i.test(s)) return Number.parseInt(s.slice(2), 16);
  const m = /^(-?\d+(?:\.\d+)?)(?:\s*(W|%|MHz|MiB|C))?$/.exec(s);
  return m ? Number(m[1]) : undefined;
}

const TIMESTAMP = /^(\d{4})\/(\d{2})\/(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,3}))?$/;

/** The columns as nvidia-smi names them in its header (the first name of each help entry). */
type Setter = (v: string, s: TelemetrySample, d: TelemetryDevice) => void;
const pct = (k: "gpuBusy" | "memBusy") => (v: string, s: TelemetrySample) => {
  const n = num(v);
  if (n !== undefined) s[k] = n / 100;
};
const field =
  (k: keyof TelemetrySample) =>
  (v: string, s: TelemetrySample): void => {
    const n = num(v);
    if (n !== undefined) (s as unknown as Record<string, number>)[k] = n;
  };
const COLUMNS: Record<string, Setter> = {
  "power.draw": field("powerW"),
  "power.draw.instant": field("powerInstantW"),
  "power.limit": field("powerLimitW"),
  "enforced.power.limit": field("powerLimitW"),
  "utilization.gpu": pct("gpuBusy"),
  "utilization.memory": pct("memBusy"),
  "clocks.current.sm": field("smClockMHz"),
  "clocks.sm": field("smClockMHz"),
  "clocks.max.sm": field("smClockMaxMHz"),
  "clocks.current.memory": field("memClockMHz"),
  "clocks.mem": field("memClockMHz"),
  "temperature.gpu": field("temperatureC"),
  "memory.used": field("memoryUsedMiB"),
  "memory.total": field("memoryTotalMiB"),
  "clocks_event_reasons.active": field("clockEventReasons"),
  "clocks_throttle_reasons.active": field("clockEventReasons"),
  uuid: (v, _s, d) => {
    if (!NOT_A_VALUE.test(v)) d.uuid = v;
  },
  name: (v, _s, d) => {
    if (!NOT_A_VALUE.test(v)) d.name = v;
  },
  "pcie.link.gen.current": (v, _s, d) => {
    const n = num(v);
    if (n !== undefined) d.pcieGen = n;
  },
};

export function minimalSmiQueryParser(opts: SmiQueryParserOptions): SmiQueryLineParser {
  let columns: string[] | null = null;
  return (line: string): SmiQueryLine => {
    const text = line.trim();
    if (!text) return { kind: "skip" };
    const cells = text.split(",").map((c) => c.trim());
    if (cells[0] === "timestamp" || cells.includes("index")) {
      columns = cells.map((c) => c.replace(/\s*\[[^\]]*\]$/, ""));
      return { kind: "header", columns };
    }
    if (!columns) return { kind: "bad", why: "a data line before the CSV header" };
    if (cells.length !== columns.length)
      return { kind: "bad", why: `${cells.length} fields where the header has ${columns.length}` };
    const ti = columns.indexOf("timestamp");
    const ii = columns.indexOf("index");
    const m = ti >= 0 ? TIMESTAMP.exec(cells[ti]!) : null;
    if (!m) return { kind: "bad", why: `not a timestamp: "${cells[ti] ?? ""}"` };
    const index = ii >= 0 ? num(cells[ii]) : 0;
    if (index === undefined) return { kind: "bad", why: `not a GPU index: "${cells[ii]}"` };
    const [, y, mo, d, h, mi, s, frac] = m;
    // Local wall time → UTC with the host's offset.
    const utcMs =
      Date.UTC(+y!, +mo! - 1, +d!, +h!, +mi!, +s!, Number((frac ?? "0").padEnd(3, "0"))) -
      opts.utcOffsetMinutes * 60_000;
    const key = `gpu${index}`;
    const sample: TelemetrySample = { t: utcMs / 1000, device: key };
    const device: TelemetryDevice = { key };
    for (let i = 0; i < columns.length; i++) COLUMNS[columns[i]!]?.(cells[i]!, sample, device);
    if (sample.powerLimitW !== undefined) device.powerLimitW = sample.powerLimitW;
    if (sample.smClockMaxMHz !== undefined) device.smClockMaxMHz = sample.smClockMaxMHz;
    return { kind: "sample", sample, device };
  };
}

/**
 * `nvidia-smi dmon -s t -o T`: a `#Time gpu rxpci txpci` header, a `#HH:MM:SS Idx MB/s MB/s` units
 * line, then one row per GPU per interval. MB/s taken as 10^6 bytes/s.
 */
export function minimalSmiDmonParser(opts: SmiDmonParserOptions): (line: string) => SmiDmonLine {
  let columns: string[] | null = null;
  return (line: string): SmiDmonLine => {
    const text = line.trim();
    if (!text) return { kind: "skip" };
    if (text.startsWith("#")) {
      const cells = text.slice(1).trim().split(/\s+/);
      if (cells.includes("gpu")) columns = cells;
      return { kind: "header" };
    }
    if (!columns) return { kind: "bad", why: "a data line before the dmon header" };
    const cells = text.split(/\s+/);
    if (cells.length !== columns.length)
      return { kind: "bad", why: `${cells.length} fields where the header has ${columns.length}` };
    const at = (name: string) => cells[columns!.indexOf(name)];
    const m = /^(\d{2}):(\d{2}):(\d{2})$/.exec(at("Time") ?? "");
    if (!m) return { kind: "bad", why: `not a time of day: "${at("Time") ?? ""}"` };
    const gpu = num(at("gpu"));
    if (gpu === undefined) return { kind: "bad", why: `not a GPU index: "${at("gpu")}"` };
    // The local date that puts this time of day nearest to now.
    const nowMs = opts.now();
    const local = new Date(nowMs + opts.utcOffsetMinutes * 60_000);
    let t =
      Date.UTC(local.getUTCFullYear(), local.getUTCMonth(), local.getUTCDate(), +m[1]!, +m[2]!, +m[3]!) -
      opts.utcOffsetMinutes * 60_000;
    if (t - nowMs > 12 * 3_600_000) t -= 86_400_000;
    else if (nowMs - t > 12 * 3_600_000) t += 86_400_000;
    const sample: TelemetrySample = { t: t / 1000, device: `gpu${gpu}` };
    const rx = num(at("rxpci"));
    const tx = num(at("txpci"));
    if (rx !== undefined) sample.pcieRxBps = rx * 1e6;
    if (tx !== undefined) sample.pcieTxBps = tx * 1e6;
    return { kind: "sample", sample };
  };
}

// dcgm-exporter family → sample field and scale (default-counters.csv units: W, mJ, MHz, %, ratios, B/s, µs, MiB).
const DCGM: Record<string, [keyof TelemetrySample, number]> = {
  DCGM_FI_DEV_POWER_USAGE: ["powerW", 1],
  DCGM_FI_DEV_POWER_USAGE_INSTANT: ["powerInstantW", 1],
  DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION: ["energyJ", 1e-3],
  DCGM_FI_DEV_SM_CLOCK: ["smClockMHz", 1],
  DCGM_FI_DEV_MEM_CLOCK: ["memClockMHz", 1],
  DCGM_FI_DEV_GPU_UTIL: ["gpuBusy", 0.01],
  DCGM_FI_DEV_MEM_COPY_UTIL: ["memBusy", 0.01],
  DCGM_FI_PROF_DRAM_ACTIVE: ["dramActive", 1],
  DCGM_FI_PROF_SM_ACTIVE: ["smActive", 1],
  DCGM_FI_PROF_PIPE_TENSOR_ACTIVE: ["tensorActive", 1],
  DCGM_FI_PROF_PCIE_TX_BYTES: ["pcieTxBps", 1],
  DCGM_FI_PROF_PCIE_RX_BYTES: ["pcieRxBps", 1],
  DCGM_FI_PROF_NVLINK_TX_BYTES: ["nvlinkTxBps", 1],
  DCGM_FI_PROF_NVLINK_RX_BYTES: ["nvlinkRxBps", 1],
  DCGM_FI_DEV_GPU_TEMP: ["temperatureC", 1],
  DCGM_FI_DEV_FB_USED: ["memoryUsedMiB", 1],
  DCGM_FI_DEV_POWER_VIOLATION: ["powerViolationUs", 1],
  DCGM_FI_DEV_THERMAL_VIOLATION: ["thermalViolationUs", 1],
  DCGM_FI_DEV_CLOCK_THROTTLE_REASONS: ["clockEventReasons", 1],
  DCGM_FI_DEV_CLOCKS_EVENT_REASONS: ["clockEventReasons", 1],
};

export function minimalDcgmExposition(
  exp: Exposition,
  atS: number,
): { samples: TelemetrySample[]; devices: TelemetryDevice[] } {
  const byKey = new Map<string, { s: TelemetrySample; d: TelemetryDevice }>();
  for (const fam of exp.families) {
    const map = DCGM[fam.name];
    if (!map) continue;
    for (const x of fam.samples) {
      const gpu = x.labels.gpu;
      if (gpu === undefined || !Number.isFinite(x.value)) continue;
      const mig = x.labels.GPU_I_ID;
      const key = mig !== undefined && mig !== "" ? `gpu${gpu}/mig${mig}` : `gpu${gpu}`;
      let e = byKey.get(key);
      if (!e) {
        e = { s: { t: x.timestampMs !== undefined ? x.timestampMs / 1000 : atS, device: key }, d: { key } };
        if (x.labels.modelName) e.d.name = x.labels.modelName;
        if (x.labels.UUID) e.d.uuid = x.labels.UUID;
        if (mig !== undefined && mig !== "") e.d.mig = { profile: x.labels.GPU_I_PROFILE, instanceId: mig };
        byKey.set(key, e);
      }
      (e.s as unknown as Record<string, number>)[map[0]] = x.value * map[1];
    }
  }
  const out = [...byKey.values()];
  return { samples: out.map((e) => e.s), devices: out.map((e) => e.d) };
}

/** amd-smi values come as {value, unit}, a bare number, or "N/A". */
function amdVal(v: unknown): { value: number; unit?: string } | undefined {
  if (typeof v === "number" && Number.isFinite(v)) return { value: v };
  if (v && typeof v === "object" && "value" in v) {
    const o = v as { value: unknown; unit?: unknown };
    if (typeof o.value === "number" && Number.isFinite(o.value))
      return { value: o.value, unit: typeof o.unit === "string" ? o.unit : undefined };
  }
  return undefined;
}

function pick(o: unknown, ...path: string[]): unknown {
  let cur = o;
  for (const k of path) {
    if (!cur || typeof cur !== "object") return undefined;
    cur = (cur as Record<string, unknown>)[k];
  }
  return cur;
}

export function minimalAmdSmiJson(
  json: unknown,
  atS: number,
): { samples: TelemetrySample[]; devices: TelemetryDevice[] } {
  const list = Array.isArray(json) ? json : (pick(json, "gpu_data") as unknown[] | undefined);
  const samples: TelemetrySample[] = [];
  const devices: TelemetryDevice[] = [];
  if (!Array.isArray(list)) return { samples, devices };
  for (const g of list) {
    const idx = pick(g, "gpu");
    if (typeof idx !== "number") continue;
    const key = `gpu${idx}`;
    const s: TelemetrySample = { t: atS, device: key };
    const power = amdVal(pick(g, "power", "socket_power")) ?? amdVal(pick(g, "power", "average_socket_power"));
    if (power) s.powerW = power.value;
    const gfx = amdVal(pick(g, "usage", "gfx_activity"));
    if (gfx) s.gpuBusy = gfx.value / 100;
    const umc = amdVal(pick(g, "usage", "umc_activity"));
    if (umc) s.memBusy = umc.value / 100;
    const temp = amdVal(pick(g, "temperature", "hotspot")) ?? amdVal(pick(g, "temperature", "edge"));
    if (temp) s.temperatureC = temp.value;
    const used = amdVal(pick(g, "mem_usage", "used_vram"));
    const total = amdVal(pick(g, "mem_usage", "total_vram"));
    // amd-smi's "MB" is MiB (it divides bytes by 1024²).
    if (used) s.memoryUsedMiB = used.value;
    if (total) s.memoryTotalMiB = total.value;
    const energy = amdVal(pick(g, "energy", "total_energy_consumption"));
    if (energy)
      s.energyJ = energy.unit === "uJ" ? energy.value / 1e6 : energy.unit === "mJ" ? energy.value / 1e3 : energy.value;
    const sclk = amdVal(pick(g, "clock", "gfx_0", "clk"));
    if (sclk) s.smClockMHz = sclk.value;
    const mclk = amdVal(pick(g, "clock", "mem_0", "clk"));
    if (mclk) s.memClockMHz = mclk.value;
    samples.push(s);
    devices.push({ key });
  }
  return { samples, devices };
}
