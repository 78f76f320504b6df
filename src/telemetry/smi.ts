// Parsers for nvidia-smi's text outputs: the `--query-gpu … --format=csv` loop (whole files or one line at a
// time from a live child), `dmon`, and `-q`. Pure: text in, samples out; no clock, no file system.
//
// Timestamps: nvidia-smi prints `2026/12/04 16:54:22.517` (query) and `HH:MM:SS` / `YYYYMMDD` (dmon -o DT) in
// the local time of the machine that ran it, without a zone. By default they are read in this process's local
// zone (right for a live sampler, and for a file read on the machine that wrote it); `utcOffsetMinutes` reads
// them at a fixed offset instead (0 = UTC) for files from elsewhere. Only absolute comparisons (a `--window`
// in unix seconds, a run's own clock) depend on it; window detection and every derived figure do not.

import { ParseError } from "../errors.ts";
import type { TelemetryCapture, TelemetryDevice, TelemetrySample } from "./types.ts";

export interface SmiParseOptions {
  /** Name used in error messages (file:line:column). */
  file?: string;
  /** Offset of the capturing machine's clock from UTC in minutes (60 = UTC+1); default: this process's zone. */
  utcOffsetMinutes?: number;
}

/** NVML clocks event reason bits (nvml.h nvmlClocksEventReason*; the same values as the older ThrottleReason names). */
export const CLOCK_EVENT_BITS: Record<string, number> = {
  GpuIdle: 0x1,
  ApplicationsClocksSetting: 0x2,
  SwPowerCap: 0x4,
  HwSlowdown: 0x8,
  SyncBoost: 0x10,
  SwThermalSlowdown: 0x20,
  HwThermalSlowdown: 0x40,
  HwPowerBrakeSlowdown: 0x80,
  DisplayClockSetting: 0x100,
};

/** The query field suffix of each `clocks_event_reasons.*` / `clocks_throttle_reasons.*` column → its bit. */
const REASON_COLUMN_BITS: Record<string, number> = {
  gpu_idle: 0x1,
  applications_clocks_setting: 0x2,
  sw_power_cap: 0x4,
  hw_slowdown: 0x8,
  sync_boost: 0x10,
  sw_thermal_slowdown: 0x20,
  hw_thermal_slowdown: 0x40,
  hw_power_brake_slowdown: 0x80,
  display_clock_setting: 0x100,
};

/** "accurate to within +/- 5 watts" (nvidia-smi --help-query-gpu, power.draw and power.draw.instant). */
export const SMI_POWER_ACCURACY_W = 5;

/** Values nvidia-smi prints for "no value": the field is left absent, never read as 0. */
const NO_VALUE =
  /^\[?(N\/A|Not Supported|Unknown Error|Insufficient Permissions|Not Available|GPU requires reset|Not Found)\]?$/i;

/** Parses `2026/12/04 16:54:22.517` (also `-` date separators, optional fraction) to unix seconds. */
export function parseSmiTimestamp(text: string, utcOffsetMinutes?: number): number | undefined {
  const m = /^(\d{4})[/-](\d{2})[/-](\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?$/.exec(text.trim());
  if (!m) return undefined;
  const [y, mo, d, h, mi, s] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  // Date normalizes 2026/13/45 25:61:61 into another day: a time that is not one is refused instead.
  if (!validWallClock(y, mo, d, h, mi, s)) return undefined;
  const frac = m[7] ? Number(`0.${m[7]}`) : 0;
  return wallClockToUnix(y, mo, d, h, mi, s, utcOffsetMinutes) + frac;
}

/** A calendar date and time of day that exist (a leap second's :60 is allowed). */
function validWallClock(y: number, mo: number, d: number, h: number, mi: number, s: number): boolean {
  const days = mo >= 1 && mo <= 12 ? new Date(Date.UTC(y, mo, 0)).getUTCDate() : 0;
  return y >= 1970 && d >= 1 && d <= days && h <= 23 && mi <= 59 && s <= 60;
}

function wallClockToUnix(
  y: number,
  mo: number,
  d: number,
  h: number,
  mi: number,
  s: number,
  utcOffsetMinutes: number | undefined,
): number {
  if (utcOffsetMinutes !== undefined) return Date.UTC(y, mo - 1, d, h, mi, s) / 1000 - utcOffsetMinutes * 60;
  return new Date(y, mo - 1, d, h, mi, s).getTime() / 1000;
}

/** A header cell → its canonical field name: `power.draw [W]` → `power.draw`, `clocks.current.sm` → `clocks.sm`. */
export function canonicalField(cell: string): string {
  const name = cell
    .trim()
    .replace(/\s*\[[^\]]*\]\s*$/, "")
    .toLowerCase();
  const alias: Record<string, string> = {
    "clocks.current.sm": "clocks.sm",
    "clocks.current.memory": "clocks.mem",
    "clocks.current.graphics": "clocks.gr",
    "clocks.max.memory": "clocks.max.mem",
    "clocks.max.graphics": "clocks.max.gr",
    "clocks.max.streaming_multiprocessor": "clocks.max.sm",
    "gpu.power.draw.average": "power.draw.average",
    "gpu.power.draw.instant": "power.draw.instant",
    "gpu.power.requested_limit": "power.limit",
    "gpu.power.enforced_limit": "enforced.power.limit",
    "gpu.power.draw": "power.draw",
    gpu_uuid: "uuid",
    gpu_name: "name",
    gpu_bus_id: "pci.bus_id",
  };
  const n = alias[name] ?? name;
  return n.replace(/^clocks_throttle_reasons\./, "clocks_event_reasons.");
}

function isHeaderLine(cells: string[]): boolean {
  // Data lines start with a timestamp or a number: skip the regexes for them.
  const c0 = cells[0]?.charCodeAt(0) ?? 0;
  if (c0 >= 48 && c0 <= 57) return false;
  return (
    cells.length > 0 &&
    cells.every((c) => /^[a-z][a-z0-9_.]*(\s*\[[^\]]*\])?$/i.test(c.trim())) &&
    cells.some((c) => /[._]/.test(c) || /^(timestamp|index|name|uuid|count)$/i.test(c.trim()))
  );
}

/** Splits a CSV line at commas, keeping each cell's 1-based start column. nvidia-smi never quotes. */
function splitCells(line: string): { text: string; column: number }[] {
  const out: { text: string; column: number }[] = [];
  let start = 0;
  for (let i = 0; i <= line.length; i++) {
    if (i === line.length || line[i] === ",") {
      const raw = line.slice(start, i);
      const lead = raw.length - raw.trimStart().length;
      out.push({ text: raw.trim(), column: start + lead + 1 });
      start = i + 1;
    }
  }
  return out;
}

/** A cell that is not what its column holds (built only on error: no closure per cell). */
function cellError(field: string, what: string, got: string, file: string, line: number, column: number): ParseError {
  return new ParseError(`${field}: ${what}, got "${got}"`, { file, line, column });
}

/** A number with an optional unit suffix (`140.71 W`, `12 %`, `1980 MHz`, `16351 MiB`, `0x…` hex). */
function numberCell(text: string): number | undefined {
  if (/^0x[0-9a-f]+$/i.test(text)) return Number.parseInt(text.slice(2), 16);
  const m =
    /^([-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)(?:\s*(W|%|MHz|MiB|KiB|GiB|C|mW|J|mJ|s|ms|us|ns|KB\/s|MB\/s))?$/.exec(text);
  return m ? Number(m[1]) : undefined;
}

type Setter = (s: TelemetrySample, v: number, facts: TelemetryDevice) => void;

/** Numeric query fields → where they go in a sample (units converted). */
const NUMERIC: Record<string, Setter> = {
  "power.draw": (s, v) => {
    s.powerW = v;
  },
  "power.draw.average": (s, v) => {
    s.powerW ??= v;
  },
  "power.draw.instant": (s, v) => {
    s.powerInstantW = v;
  },
  "power.limit": (s, v, f) => {
    s.powerLimitW ??= v;
    f.powerLimitW ??= v;
  },
  "enforced.power.limit": (s, v, f) => {
    s.powerLimitW = v;
    f.powerLimitW = v;
  },
  "utilization.gpu": (s, v) => {
    s.gpuBusy = v / 100;
  },
  "utilization.memory": (s, v) => {
    s.memBusy = v / 100;
  },
  "clocks.sm": (s, v) => {
    s.smClockMHz = v;
  },
  "clocks.max.sm": (s, v, f) => {
    s.smClockMaxMHz = v;
    f.smClockMaxMHz = v;
  },
  "clocks.mem": (s, v) => {
    s.memClockMHz = v;
  },
  "clocks.max.mem": (_s, v, f) => {
    f.memClockMaxMHz = v;
  },
  "temperature.gpu": (s, v) => {
    s.temperatureC = v;
  },
  "memory.used": (s, v) => {
    s.memoryUsedMiB = v;
  },
  "memory.total": (s, v) => {
    s.memoryTotalMiB = v;
  },
  "pcie.link.gen.current": (_s, v, f) => {
    f.pcieGen = v;
  },
  "pcie.link.gen.gpucurrent": (_s, v, f) => {
    f.pcieGen = v;
  },
  "clocks_event_reasons.active": (s, v) => {
    s.clockEventReasons = v;
  },
};

export interface SmiQueryLineParser {
  /** One line of `--format=csv` output → the samples it holds (none for a header or a blank line). */
  (line: string): TelemetrySample[];
  /** Static facts met so far, by device key. */
  readonly devices: Map<string, TelemetryDevice>;
  /** The canonical field names in use (from the header line or the option). */
  readonly fields: string[] | undefined;
}

export interface SmiQueryLineOptions extends SmiParseOptions {
  /** The `--query-gpu` field list (`timestamp,index,power.draw`), needed for `noheader` output. */
  header?: string | string[];
  /** Line number of the first line fed (for positions when a caller feeds a stream from the middle). */
  firstLine?: number;
}

/**
 * A line-at-a-time parser for `nvidia-smi --query-gpu=… --format=csv[,noheader][,nounits] [-lms N]`: the same
 * code reads a saved file and a live child's stdout. Any field order and subset; a repeated header resets the
 * fields. A malformed line throws a ParseError at its line and column.
 */
export function createSmiQueryLineParser(opts: SmiQueryLineOptions = {}): SmiQueryLineParser {
  const file = opts.file ?? "nvidia-smi output";
  let fields: string[] | undefined =
    opts.header === undefined
      ? undefined
      : (Array.isArray(opts.header) ? opts.header : opts.header.split(",")).map(canonicalField);
  let lineNo = (opts.firstLine ?? 1) - 1;
  const devices = new Map<string, TelemetryDevice>();
  // Without an index/uuid/bus id column, GPUs are told apart by their order among rows with one timestamp.
  let lastStamp = "";
  let rowInStamp = 0;

  const parse = ((line: string): TelemetrySample[] => {
    lineNo++;
    const text = line.replace(/\r$/, "");
    if (!text.trim()) return [];
    const cells = splitCells(text);
    if (isHeaderLine(cells.map((c) => c.text))) {
      fields = cells.map((c) => canonicalField(c.text));
      return [];
    }
    if (!fields)
      throw new ParseError(
        "a data line before any header: give the --query-gpu field list for output written with noheader",
        { file, line: lineNo, column: 1 },
      );
    if (cells.length !== fields.length) {
      const col = cells.length > fields.length ? cells[fields.length]!.column : text.length + 1;
      throw new ParseError(`expected ${fields.length} comma-separated values (as the header), found ${cells.length}`, {
        file,
        line: lineNo,
        column: col,
      });
    }
    const sample: TelemetrySample = { t: Number.NaN, device: "" };
    const facts: TelemetryDevice = { key: "" };
    let index: string | undefined;
    let uuid: string | undefined;
    let busId: string | undefined;
    let stamp = "";
    let reasonMask: number | undefined;
    for (let k = 0; k < fields.length; k++) {
      const f = fields[k]!;
      const { text: v, column } = cells[k]!;
      if (f === "timestamp") {
        const t = parseSmiTimestamp(v, opts.utcOffsetMinutes);
        if (t === undefined)
          throw cellError(
            f,
            "expected a timestamp like 2026/12/04 16:54:22.517 (a date and time that exist)",
            v,
            file,
            lineNo,
            column,
          );
        sample.t = t;
        stamp = v;
        continue;
      }
      if (v === "" || ((v[0] === "[" || v[0] === "N" || v[0] === "n") && NO_VALUE.test(v))) continue;
      if (f === "index") {
        if (!/^\d+$/.test(v)) throw cellError(f, "expected a GPU index", v, file, lineNo, column);
        index = v;
      } else if (f === "uuid") {
        uuid = v;
        facts.uuid = v;
      } else if (f === "pci.bus_id") busId = v;
      else if (f === "name") facts.name = v;
      else if (f.startsWith("clocks_event_reasons.") && f !== "clocks_event_reasons.active") {
        const bit = REASON_COLUMN_BITS[f.slice("clocks_event_reasons.".length)];
        if (bit === undefined) continue;
        if (/^active$/i.test(v)) reasonMask = (reasonMask ?? 0) | bit;
        else if (/^not active$/i.test(v)) reasonMask ??= 0;
        else throw cellError(f, 'expected "Active" or "Not Active"', v, file, lineNo, column);
      } else {
        const set = NUMERIC[f];
        if (!set) continue;
        const n = numberCell(v);
        if (n === undefined || !Number.isFinite(n)) throw cellError(f, "expected a number", v, file, lineNo, column);
        set(sample, n, facts);
      }
    }
    if (Number.isNaN(sample.t))
      throw new ParseError("no timestamp column: add timestamp to --query-gpu", { file, line: lineNo, column: 1 });
    if (sample.clockEventReasons === undefined && reasonMask !== undefined) sample.clockEventReasons = reasonMask;
    if (stamp === lastStamp) rowInStamp++;
    else {
      lastStamp = stamp;
      rowInStamp = 0;
    }
    sample.device =
      index !== undefined ? `gpu${index}` : uuid ? `gpu-${uuid}` : busId ? `gpu-${busId}` : `gpu${rowInStamp}`;
    facts.key = sample.device;
    const known = devices.get(sample.device);
    if (!known) devices.set(sample.device, facts);
    else for (const k in facts) if ((facts as any)[k] !== undefined) (known as any)[k] = (facts as any)[k];
    return [sample];
  }) as SmiQueryLineParser;
  Object.defineProperty(parse, "devices", { get: () => devices });
  Object.defineProperty(parse, "fields", { get: () => fields });
  return parse;
}

/** A whole `--query-gpu … --format=csv` file → a capture. */
export function parseSmiQueryCsv(text: string, opts: SmiQueryLineOptions = {}): TelemetryCapture {
  const parse = createSmiQueryLineParser(opts);
  const samples: TelemetrySample[] = [];
  const lines = text.split("\n");
  // A loop stopped mid-write leaves its last line without a newline and short: that line alone is dropped.
  const cut = !text.endsWith("\n") && lines.length > 1 ? lines.pop() : undefined;
  for (const line of lines) for (const s of parse(line)) samples.push(s);
  let note: string | undefined;
  if (cut?.trim()) {
    try {
      for (const s of parse(cut)) samples.push(s);
    } catch (e) {
      if (!(e instanceof ParseError) || cut.split(",").length >= (parse.fields?.length ?? 0)) throw e;
      note = `the last line (${lines.length + 1}) is cut short without a newline (the loop was stopped mid-write): skipped`;
    }
  }
  const cap = smiQueryCapture(parse, samples, `query CSV${opts.file ? ` ${opts.file}` : ""}`);
  if (note) cap.notes.push(note);
  return cap;
}

/**
 * The capture of a query loop, from the line parser that read it and the samples it gave: what the live
 * sampler builds when its child stops, and what a saved file gives. Carries how power.draw is averaged and
 * how accurate it is, which the summarizer needs.
 */
export function smiQueryCapture(
  parse: SmiQueryLineParser,
  samples: TelemetrySample[],
  detail: string,
): TelemetryCapture {
  sortSamples(samples);
  const fields = parse.fields ?? [];
  const unavailable: TelemetryCapture["unavailable"] = [
    { field: "energyJ", why: "nvidia-smi --query-gpu has no energy counter; energy is integrated from power" },
  ];
  if (!fields.some((f) => f.startsWith("power.draw")))
    unavailable.push({ field: "powerW", why: "no power.draw column in the query" });
  return {
    source: { kind: "nvidia-smi", detail: `${detail}: ${fields.join(",")}` },
    devices: [...parse.devices.values()],
    samples,
    intervalMs: medianIntervalMs(samples),
    // power.draw is a 1 s trailing average on Ampere and newer (nvidia-smi --help-query-gpu); .instant is not.
    ...(fields.includes("power.draw") || fields.includes("power.draw.average") ? { powerAveragingS: 1 } : {}),
    powerAccuracyW: SMI_POWER_ACCURACY_W,
    notes: [],
    unavailable,
  };
}

export function sortSamples(samples: TelemetrySample[]): void {
  samples.sort((a, b) => a.t - b.t || (a.device < b.device ? -1 : a.device > b.device ? 1 : 0));
}

/** Median spacing of one device's samples in ms. */
export function medianIntervalMs(samples: TelemetrySample[]): number | undefined {
  const byDev = new Map<string, number[]>();
  for (const s of samples) {
    const a = byDev.get(s.device) ?? [];
    a.push(s.t);
    byDev.set(s.device, a);
  }
  const gaps: number[] = [];
  for (const ts of byDev.values()) for (let i = 1; i < ts.length; i++) gaps.push(ts[i]! - ts[i - 1]!);
  if (!gaps.length) return undefined;
  gaps.sort((a, b) => a - b);
  return Math.round(gaps[Math.floor(gaps.length / 2)]! * 1000);
}

// ---------------------------------------------------------------------------------------------------------------
// dmon

export interface DmonParseOptions extends SmiParseOptions {
  /** Seconds between rows when the output has no time column (`dmon -d N`; default 1). */
  intervalS?: number;
  /** Date (YYYY-MM-DD, in the capture's zone) for `-o T` output, which prints only the time of day. */
  date?: string;
}

export interface DmonLineOptions extends DmonParseOptions {
  /**
   * A live child's `-o T` output: each row is dated by the day that puts its time of day nearest to this clock
   * (unix ms), so a row read just after midnight from just before it lands on the day before.
   */
  now?: () => number;
}

export interface SmiDmonLineParser {
  /** One line of dmon output → the sample it holds (none for a header or a blank line). Throws a ParseError. */
  (line: string): TelemetrySample[];
  /** The columns of the latest `# gpu …` header line, lower case. */
  readonly columns: string[] | undefined;
  /** How rows are timed: a date and time (absolute), a time of day only (relative to the first row), no time. */
  readonly timeMode: "absolute" | "relative" | "index";
}

/**
 * A line-at-a-time parser for `nvidia-smi dmon`: any `-s` selection, with or without `-o T` / `-o DT` time
 * columns, the two header lines repeated every so many rows, `-` for no value. The same code reads a saved log
 * (parseSmiDmon) and a live child's stdout. Without a date (or `now`), `-o T` times count from the first row
 * (midnight roll-over handled); without any time column, rows are `intervalS` apart from t = 0.
 */
export function createSmiDmonLineParser(opts: DmonLineOptions = {}): SmiDmonLineParser {
  const file = opts.file ?? "nvidia-smi dmon output";
  let cols: string[] | undefined;
  let units: string[] | undefined;
  let lineNo = 0;
  let dayOffset = 0;
  let lastTod = -1;
  let firstTod: number | undefined;
  let firstDevice: string | undefined;
  let row = -1;
  const baseDate = opts.date ? /^(\d{4})-(\d{2})-(\d{2})$/.exec(opts.date) : null;
  let timeMode: SmiDmonLineParser["timeMode"] = "index";
  const parse = ((raw: string): TelemetrySample[] => {
    lineNo++;
    const line = raw.replace(/\r$/, "");
    if (!line.trim()) return [];
    if (line.startsWith("#")) {
      const toks = line.slice(1).trim().toLowerCase().split(/\s+/);
      if (toks.includes("gpu")) {
        cols = toks;
        units = undefined;
      } else if (cols && !units) units = toks;
      return [];
    }
    if (!cols)
      throw new ParseError("a dmon data row before its '# gpu …' header line", { file, line: lineNo, column: 1 });
    const cells: { text: string; column: number }[] = [];
    const re = /\S+/g;
    for (let m = re.exec(line); m; m = re.exec(line)) cells.push({ text: m[0], column: m.index + 1 });
    if (cells.length !== cols.length)
      throw new ParseError(
        `expected ${cols.length} columns (as the '# ${cols.join(" ")}' header), found ${cells.length}`,
        {
          file,
          line: lineNo,
          column: cells[Math.min(cells.length, cols.length) - 1]?.column ?? 1,
        },
      );
    const s: TelemetrySample = { t: Number.NaN, device: "" };
    let date: string | undefined;
    let tod: number | undefined;
    for (let k = 0; k < cols.length; k++) {
      const c = cols[k]!;
      const { text: v, column } = cells[k]!;
      if (c === "date") {
        const ok =
          /^\d{8}$/.test(v) &&
          validWallClock(Number(v.slice(0, 4)), Number(v.slice(4, 6)), Number(v.slice(6, 8)), 0, 0, 0);
        if (!ok) throw cellError(c, "expected a date YYYYMMDD that exists", v, file, lineNo, column);
        date = v;
        continue;
      }
      if (c === "time") {
        const m = /^(\d{2}):(\d{2}):(\d{2})$/.exec(v);
        if (!m || !validWallClock(2000, 1, 1, Number(m[1]), Number(m[2]), Number(m[3])))
          throw cellError(c, "expected a time of day HH:MM:SS", v, file, lineNo, column);
        tod = Number(m[1]) * 3600 + Number(m[2]) * 60 + Number(m[3]);
        continue;
      }
      if (v === "-" || NO_VALUE.test(v)) continue;
      if (c === "gpu") {
        if (!/^\d+$/.test(v)) throw cellError(c, "expected a GPU index", v, file, lineNo, column);
        s.device = `gpu${v}`;
        continue;
      }
      const n = Number(v);
      if (!Number.isFinite(n)) throw cellError(c, "expected a number", v, file, lineNo, column);
      setDmonField(s, c, n, units?.[k]);
    }
    if (!s.device) s.device = "gpu0";
    if (date !== undefined && tod !== undefined) {
      timeMode = "absolute";
      const y = Number(date.slice(0, 4));
      const mo = Number(date.slice(4, 6));
      const d = Number(date.slice(6, 8));
      s.t = wallClockToUnix(y, mo, d, 0, 0, 0, opts.utcOffsetMinutes) + tod;
    } else if (tod !== undefined && opts.now) {
      timeMode = "absolute";
      s.t = nearestDay(tod, opts.now() / 1000, opts.utcOffsetMinutes);
    } else if (tod !== undefined) {
      if (lastTod >= 0 && tod < lastTod - 43200) dayOffset += 86400;
      lastTod = tod;
      if (baseDate) {
        timeMode = "absolute";
        const [y, mo, d] = [Number(baseDate[1]), Number(baseDate[2]), Number(baseDate[3])];
        s.t = wallClockToUnix(y, mo, d, 0, 0, 0, opts.utcOffsetMinutes) + tod + dayOffset;
      } else {
        timeMode = "relative";
        firstTod ??= tod;
        s.t = tod + dayOffset - firstTod;
      }
    } else {
      // No time column: the k-th row of the first device (and the rows after it) are k intervals in.
      firstDevice ??= s.device;
      if (s.device === firstDevice) row++;
      s.t = row * (opts.intervalS ?? 1);
    }
    return [s];
  }) as SmiDmonLineParser;
  Object.defineProperty(parse, "columns", { get: () => cols });
  Object.defineProperty(parse, "timeMode", { get: () => timeMode });
  return parse;
}

/** dmon columns → sample field and divisor (% → 0–1; dmon divides NVML's KB/s by 1024, so its MB is 2^20 B). */
const DMON_FIELDS: Record<string, [keyof TelemetrySample, number]> = {
  pwr: ["powerW", 1],
  gtemp: ["temperatureC", 1],
  sm: ["gpuBusy", 100],
  mem: ["memBusy", 100],
  mclk: ["memClockMHz", 1],
  pclk: ["smClockMHz", 1],
  pviol: ["powerViolation", 100],
  tviol: ["thermalViolation", 100],
  fb: ["memoryUsedMiB", 1],
  rxpci: ["pcieRxBps", 2 ** -20],
  txpci: ["pcieTxBps", 2 ** -20],
};

function setDmonField(s: TelemetrySample, column: string, n: number, unit: string | undefined): void {
  const f = DMON_FIELDS[column];
  if (!f) return;
  // tviol: older drivers print a percentage, newer ones a bool.
  (s as unknown as Record<string, number>)[f[0]] = column === "tviol" && unit === "bool" ? (n > 0 ? 1 : 0) : n / f[1];
}

/** A time of day (s after local midnight) on the day that puts it nearest to `nowS`, as unix seconds. */
function nearestDay(tod: number, nowS: number, utcOffsetMinutes: number | undefined): number {
  const fixed = utcOffsetMinutes !== undefined;
  const d = new Date((nowS + (fixed ? utcOffsetMinutes * 60 : 0)) * 1000);
  const y = fixed ? d.getUTCFullYear() : d.getFullYear();
  const mo = (fixed ? d.getUTCMonth() : d.getMonth()) + 1;
  const day = fixed ? d.getUTCDate() : d.getDate();
  // Day ± 1 past a month's end is normalized by Date.
  const on = (k: number) => wallClockToUnix(y, mo, day + k, 0, 0, 0, utcOffsetMinutes) + tod;
  const t = on(0);
  return t - nowS > 43200 ? on(-1) : nowS - t > 43200 ? on(1) : t;
}

/** A whole `nvidia-smi dmon` log → a capture (see createSmiDmonLineParser for what is read). */
export function parseSmiDmon(text: string, opts: DmonParseOptions = {}): TelemetryCapture {
  const parse = createSmiDmonLineParser(opts);
  const samples: TelemetrySample[] = [];
  for (const line of text.split("\n")) for (const s of parse(line)) samples.push(s);
  const cols = parse.columns;
  if (!cols)
    throw new ParseError("no dmon header line ('# gpu pwr …') found", {
      file: opts.file ?? "nvidia-smi dmon output",
      line: 1,
      column: 1,
    });
  const notes: string[] = [];
  if (parse.timeMode === "index")
    notes.push(
      `no time column (dmon without -o T): rows taken ${opts.intervalS ?? 1} s apart from t = 0 (relative time)`,
    );
  else if (parse.timeMode === "relative")
    notes.push("dmon -o T prints no date: times count from the first row (relative time); give a date for absolute");
  sortSamples(samples);
  const devs = [...new Set(samples.map((s) => s.device))].map((key) => ({ key }));
  return {
    source: { kind: "nvidia-smi", detail: `dmon${opts.file ? ` ${opts.file}` : ""}: ${cols.join(" ")}` },
    devices: devs,
    samples,
    intervalMs: medianIntervalMs(samples) ?? (opts.intervalS ?? 1) * 1000,
    // dmon's pwr is NVML's power usage, the same 1 s average as power.draw.
    powerAveragingS: 1,
    powerAccuracyW: SMI_POWER_ACCURACY_W,
    // Whole seconds (-o T/DT), or no time at all (rows assumed evenly spaced).
    timeResolutionS: parse.timeMode === "index" ? (opts.intervalS ?? 1) : 1,
    notes,
    unavailable: [
      { field: "energyJ", why: "dmon has no energy counter; energy is integrated from pwr" },
      {
        field: "powerInstantW",
        why: "dmon prints one (averaged) power per row; integrated energy carries up to a row's interval of lag",
      },
    ],
  };
}

// ---------------------------------------------------------------------------------------------------------------
// nvidia-smi -q

export interface SmiQReport {
  timestamp?: number;
  driverVersion?: string;
  cudaVersion?: string;
  gpus: (TelemetryDevice & {
    busId: string;
    architecture?: string;
    migMode?: string;
    powerDrawW?: number;
    powerInstantW?: number;
    defaultPowerLimitW?: number;
    minPowerLimitW?: number;
    maxPowerLimitW?: number;
    smClockMHz?: number;
    memClockMHz?: number;
    /** Active clocks event reasons by -q's names ("SW Power Cap"), and as an NVML mask. */
    clockEventReasons?: { active: string[]; mask: number };
    /** Clocks event reason counters (µs), by name. */
    clockEventCountersUs?: Record<string, number>;
  })[];
}

const Q_REASON_BITS: Record<string, number> = {
  idle: 0x1,
  "applications clocks setting": 0x2,
  "sw power cap": 0x4,
  "hw slowdown": 0x8,
  "sync boost": 0x10,
  "sw thermal slowdown": 0x20,
  "hw thermal slowdown": 0x40,
  "hw power brake slowdown": 0x80,
  "display clock setting": 0x100,
};

/** Parses `nvidia-smi -q` (any `-d` selection): device facts and one reading per GPU at the report's timestamp. */
export function parseSmiQ(text: string, opts: SmiParseOptions = {}): SmiQReport {
  const file = opts.file ?? "nvidia-smi -q output";
  const lines = text.split("\n").map((l) => l.replace(/\r$/, ""));
  if (!lines.some((l) => /NVSMI LOG/.test(l)))
    throw new ParseError("not nvidia-smi -q output: no '==============NVSMI LOG==============' banner", {
      file,
      line: 1,
      column: 1,
    });
  const report: SmiQReport = { gpus: [] };
  let gpu: SmiQReport["gpus"][number] | undefined;
  const stack: { indent: number; name: string }[] = [];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (!line.trim() || line.startsWith("=")) continue;
    const gm = /^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$/.exec(line);
    if (gm) {
      gpu = { key: `gpu${report.gpus.length}`, busId: gm[1]! };
      report.gpus.push(gpu);
      stack.length = 0;
      continue;
    }
    const indent = line.length - line.trimStart().length;
    const colon = line.indexOf(" : ");
    const name = (colon >= 0 ? line.slice(0, colon) : line).trim();
    const value = colon >= 0 ? line.slice(colon + 3).trim() : undefined;
    while (stack.length && stack.at(-1)!.indent >= indent) stack.pop();
    const path = [...stack.map((s) => s.name), name].join("/");
    if (value === undefined) {
      stack.push({ indent, name });
      continue;
    }
    if (!gpu) {
      if (name === "Timestamp") report.timestamp = parseCtime(value, opts.utcOffsetMinutes);
      else if (name === "Driver Version") report.driverVersion = value;
      else if (name === "CUDA Version") report.cudaVersion = value;
      continue;
    }
    const num = NO_VALUE.test(value) ? undefined : numberCell(value.replace(/\s+(W|MHz|us)$/, ""));
    switch (path) {
      case "Product Name":
        gpu.name = value;
        break;
      case "Product Architecture":
        gpu.architecture = value;
        break;
      case "GPU UUID":
        gpu.uuid = value;
        break;
      case "MIG Mode/Current":
        gpu.migMode = value;
        break;
      case "Minor Number":
        break;
      case "PCI/GPU Link Info/PCIe Generation/Current":
        gpu.pcieGen = num;
        break;
      // Current layout ("GPU Power Readings") and the pre-535 one ("Power Readings").
      case "GPU Power Readings/Average Power Draw":
      case "Power Readings/Average Power Draw":
      case "Power Readings/Power Draw":
        gpu.powerDrawW = num;
        break;
      case "GPU Power Readings/Instantaneous Power Draw":
      case "Power Readings/Instantaneous Power Draw":
        gpu.powerInstantW = num;
        break;
      case "GPU Power Readings/Current Power Limit":
      case "Power Readings/Enforced Power Limit":
      case "Power Readings/Current Power Limit":
        gpu.powerLimitW = num;
        break;
      case "GPU Power Readings/Default Power Limit":
      case "Power Readings/Default Power Limit":
        gpu.defaultPowerLimitW = num;
        break;
      case "GPU Power Readings/Min Power Limit":
      case "Power Readings/Min Power Limit":
        gpu.minPowerLimitW = num;
        break;
      case "GPU Power Readings/Max Power Limit":
      case "Power Readings/Max Power Limit":
        gpu.maxPowerLimitW = num;
        break;
      case "Clocks/SM":
        gpu.smClockMHz = num;
        break;
      case "Clocks/Memory":
        gpu.memClockMHz = num;
        break;
      case "Max Clocks/SM":
        gpu.smClockMaxMHz = num;
        break;
      case "Max Clocks/Memory":
        gpu.memClockMaxMHz = num;
        break;
      default: {
        const section = stack[0]?.name;
        if (section === "Clocks Event Reasons" || section === "Clocks Throttle Reasons") {
          const bit = Q_REASON_BITS[name.toLowerCase()];
          if (bit === undefined) break;
          gpu.clockEventReasons ??= { active: [], mask: 0 };
          if (/^active$/i.test(value)) {
            gpu.clockEventReasons.active.push(name);
            gpu.clockEventReasons.mask |= bit;
          }
        } else if (
          (section === "Clocks Event Reasons Counters" || section === "Clocks Throttle Reasons Counters") &&
          num !== undefined
        ) {
          gpu.clockEventCountersUs ??= {};
          gpu.clockEventCountersUs[name] = num;
        }
      }
    }
  }
  if (!report.gpus.length)
    throw new ParseError("no 'GPU 00000000:xx:yy.z' section found in nvidia-smi -q output", {
      file,
      line: 1,
      column: 1,
    });
  return report;
}

/** The -q report as a capture: device facts, and one sample per GPU at its timestamp. */
export function smiQCapture(q: SmiQReport, file?: string): TelemetryCapture {
  const samples: TelemetrySample[] = [];
  if (q.timestamp !== undefined)
    for (const g of q.gpus) {
      const s: TelemetrySample = { t: q.timestamp, device: g.key };
      if (g.powerDrawW !== undefined) s.powerW = g.powerDrawW;
      if (g.powerInstantW !== undefined) s.powerInstantW = g.powerInstantW;
      if (g.smClockMHz !== undefined) s.smClockMHz = g.smClockMHz;
      if (g.smClockMaxMHz !== undefined) s.smClockMaxMHz = g.smClockMaxMHz;
      if (g.memClockMHz !== undefined) s.memClockMHz = g.memClockMHz;
      if (g.powerLimitW !== undefined) s.powerLimitW = g.powerLimitW;
      if (g.clockEventReasons) s.clockEventReasons = g.clockEventReasons.mask;
      samples.push(s);
    }
  return {
    source: { kind: "nvidia-smi", detail: `nvidia-smi -q${file ? ` ${file}` : ""}` },
    devices: q.gpus.map((g) => ({
      key: g.key,
      name: g.name,
      uuid: g.uuid,
      powerLimitW: g.powerLimitW,
      smClockMaxMHz: g.smClockMaxMHz,
      memClockMaxMHz: g.memClockMaxMHz,
      pcieGen: g.pcieGen,
    })),
    samples,
    notes: [],
    unavailable: [],
  };
}

const MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];

/** `Fri Dec  4 17:47:11 2026` (ctime) → unix seconds in the capture's zone. */
function parseCtime(text: string, utcOffsetMinutes?: number): number | undefined {
  const m = /^\w{3}\s+(\w{3})\s+(\d{1,2})\s+(\d{2}):(\d{2}):(\d{2})\s+(\d{4})$/.exec(text.trim());
  if (!m) return undefined;
  const mo = MONTHS.indexOf(m[1]!.toLowerCase()) + 1;
  if (!mo) return undefined;
  return wallClockToUnix(Number(m[6]), mo, Number(m[2]), Number(m[3]), Number(m[4]), Number(m[5]), utcOffsetMinutes);
}
