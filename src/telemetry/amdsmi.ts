// AMD GPUs: `amd-smi metric --json` (a list of per-GPU objects, or {"gpu_data": [...]}, values as
// {"value", "unit"} objects or bare numbers, "N/A" for none) and `rocm-smi --showpower --showuse --showmemuse
// --showclocks --json` ({"card0": {"GPU use (%)": "12", ...}}, values as strings) → one sample per GPU. Pure.
// amd-smi's keys as its CLI writes them (ROCm/amdsmi amdsmi_cli/amdsmi_commands.py): power.socket_power (W),
// usage.gfx_activity / umc_activity (%), clock.gfx_N.clk and clock.mem_0.clk (MHz, with max_clk),
// mem_usage.used_vram / total_vram (MB), energy.total_energy_consumption ({value, unit: "J"}).

import { InputError } from "../errors.ts";
import type { TelemetryCapture, TelemetryDevice, TelemetrySample } from "./types.ts";

export interface AmdSmiParseOptions {
  file?: string;
  /** Unix seconds of the reading (neither tool prints a time): the caller passes the file's mtime or now. */
  timeS: number;
}

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

/** A value as amd-smi prints it: 42, "42", {"value": 42, "unit": "W"}; "N/A" and null → undefined. */
function amdValue(x: Json | undefined): { v: number; unit?: string } | undefined {
  if (x === null || x === undefined) return undefined;
  if (typeof x === "number") return Number.isFinite(x) ? { v: x } : undefined;
  if (typeof x === "string") {
    const m = /^\(?\s*([-+]?\d+(?:\.\d+)?)\s*([A-Za-z%/]*)\)?$/.exec(x.trim());
    return m ? { v: Number(m[1]), unit: m[2] || undefined } : undefined;
  }
  if (typeof x === "object" && !Array.isArray(x) && "value" in x) {
    const inner = amdValue(x.value);
    if (!inner) return undefined;
    return { v: inner.v, unit: typeof x.unit === "string" ? x.unit : inner.unit };
  }
  return undefined;
}

function get(o: Json | undefined, ...path: string[]): Json | undefined {
  let cur: Json | undefined = o;
  for (const p of path) {
    if (!cur || typeof cur !== "object" || Array.isArray(cur)) return undefined;
    cur = (cur as Record<string, Json>)[p];
  }
  return cur;
}

function first(o: Json | undefined, paths: string[][]): { v: number; unit?: string } | undefined {
  for (const p of paths) {
    const v = amdValue(get(o, ...p));
    if (v) return v;
  }
  return undefined;
}

/** Each quantity's units as amd-smi may print them, to the unit a sample holds (W, J, MHz, MiB, °C, %). */
const UNITS = {
  power: { W: 1, mW: 1e-3, uW: 1e-6, µW: 1e-6, kW: 1e3 },
  energy: { J: 1, mJ: 1e-3, uJ: 1e-6, µJ: 1e-6, kJ: 1e3 },
  clock: { MHz: 1, GHz: 1e3, kHz: 1e-3, Hz: 1e-6 },
  // amd-smi divides bytes by 1024² and calls it MB (an MI300X's 192 GiB shows as total_vram 196592 MB).
  memory: { MB: 1, MiB: 1, GB: 1024, GiB: 1024, KB: 1 / 1024, KiB: 1 / 1024, B: 1 / 1048576 },
  temperature: { C: 1, "°C": 1 },
  percent: { "%": 1 },
} as const;

/**
 * A value in the sample's unit. No unit means the tool's documented one (`dflt`); a unit of another quantity
 * (`12 kWh` as power) is refused, never read as the default.
 */
function inUnit(
  x: { v: number; unit?: string },
  kind: keyof typeof UNITS,
  key: string,
  ctx: { file: string; entry: string },
): number {
  if (x.unit === undefined) return x.v;
  const k = (UNITS[kind] as Record<string, number>)[x.unit];
  if (k === undefined)
    throw new InputError(
      `${ctx.entry} ${key}: "${x.v} ${x.unit}" is not in a unit of ${kind} (${Object.keys(UNITS[kind]).join(", ")})`,
      { position: { file: ctx.file, line: 1, column: 1 } },
    );
  return x.v * k;
}

/** amd-smi's sections of one GPU's entry: an entry with none of them is not a GPU. */
const AMD_SECTIONS = ["gpu", "power", "usage", "clock", "temperature", "mem_usage", "energy"];

function describe(x: Json): string {
  return x === null ? "null" : Array.isArray(x) ? "a list" : typeof x === "object" ? "an object" : `a ${typeof x}`;
}

function amdSmiGpu(g: Json, t: number, idx: number, file: string): { s: TelemetrySample; d: TelemetryDevice } {
  const entry = `entry ${idx} of the GPU list`;
  if (!g || typeof g !== "object" || Array.isArray(g))
    throw new InputError(
      `${entry} is ${describe(g)}, not a GPU object (amd-smi metric --json lists one object per GPU)`,
      {
        position: { file, line: 1, column: 1 },
      },
    );
  if (!AMD_SECTIONS.some((k) => k in g))
    throw new InputError(
      `${entry} holds none of amd-smi's GPU sections (${AMD_SECTIONS.join(", ")}): not amd-smi metric output`,
      { position: { file, line: 1, column: 1 } },
    );
  const ctx = { file, entry };
  const gpuNo = amdValue(get(g, "gpu"))?.v ?? idx;
  const key = `gpu${gpuNo}`;
  const s: TelemetrySample = { t, device: key };
  const d: TelemetryDevice = { key };
  const power = first(g, [
    ["power", "socket_power"],
    ["power", "current_socket_power"],
    ["power", "average_socket_power"],
  ]);
  if (power) s.powerW = inUnit(power, "power", "power", ctx);
  const gfx = first(g, [["usage", "gfx_activity"]]);
  if (gfx) s.gpuBusy = inUnit(gfx, "percent", "usage.gfx_activity", ctx) / 100;
  const umc = first(g, [["usage", "umc_activity"]]);
  if (umc) s.memBusy = inUnit(umc, "percent", "usage.umc_activity", ctx) / 100;
  const clk = first(g, [
    ["clock", "gfx_0", "clk"],
    ["clock", "gfx_clock"],
    ["clock", "gfx", "clk"],
  ]);
  if (clk) s.smClockMHz = inUnit(clk, "clock", "clock (gfx)", ctx);
  const clkMax = first(g, [["clock", "gfx_0", "max_clk"]]);
  if (clkMax) {
    s.smClockMaxMHz = inUnit(clkMax, "clock", "clock.gfx_0.max_clk", ctx);
    d.smClockMaxMHz = s.smClockMaxMHz;
  }
  const mclk = first(g, [
    ["clock", "mem_0", "clk"],
    ["clock", "mem_clock"],
  ]);
  if (mclk) s.memClockMHz = inUnit(mclk, "clock", "clock (mem)", ctx);
  const temp = first(g, [
    ["temperature", "hotspot"],
    ["temperature", "edge"],
  ]);
  if (temp) s.temperatureC = inUnit(temp, "temperature", "temperature", ctx);
  const used = first(g, [["mem_usage", "used_vram"]]);
  if (used) s.memoryUsedMiB = inUnit(used, "memory", "mem_usage.used_vram", ctx);
  const total = first(g, [["mem_usage", "total_vram"]]);
  if (total) s.memoryTotalMiB = inUnit(total, "memory", "mem_usage.total_vram", ctx);
  const energy = first(g, [["energy", "total_energy_consumption"]]);
  if (energy) s.energyJ = inUnit(energy, "energy", "energy.total_energy_consumption", ctx);
  const limit = first(g, [["power", "power_limit"]]);
  if (limit) {
    s.powerLimitW = inUnit(limit, "power", "power.power_limit", ctx);
    d.powerLimitW = s.powerLimitW;
  }
  return { s, d };
}

/** rocm-smi's key names (they carry the unit in parentheses) → sample fields. */
function rocmSmiCard(key: string, card: Record<string, Json>, t: number): { s: TelemetrySample; d: TelemetryDevice } {
  const dev = `gpu${key.replace(/^card/, "")}`;
  const s: TelemetrySample = { t, device: dev };
  const d: TelemetryDevice = { key: dev };
  for (const [k, raw] of Object.entries(card)) {
    const v = amdValue(raw)?.v;
    if (v === undefined) {
      if (/card series|card model/i.test(k) && typeof raw === "string") d.name = raw;
      continue;
    }
    if (/^(Average|Current Socket) Graphics Package Power \(W\)$/i.test(k)) s.powerW ??= v;
    else if (/^GPU use \(%\)$/i.test(k)) s.gpuBusy = v / 100;
    else if (/^GPU memory use \(%\)$/i.test(k) || /^Memory Activity$/i.test(k)) s.memBusy = v / 100;
    else if (/^sclk clock speed:?$/i.test(k)) s.smClockMHz = v;
    else if (/^mclk clock speed:?$/i.test(k)) s.memClockMHz = v;
    else if (/^Temperature \(Sensor junction\) \(C\)$/i.test(k)) s.temperatureC = v;
    else if (/^Temperature \(Sensor edge\) \(C\)$/i.test(k)) s.temperatureC ??= v;
    else if (/^VRAM Total Used Memory \(B\)$/i.test(k)) s.memoryUsedMiB = v / 1048576;
    else if (/^VRAM Total Memory \(B\)$/i.test(k)) s.memoryTotalMiB = v / 1048576;
    else if (/^Max Graphics Package Power \(W\)$/i.test(k)) {
      s.powerLimitW = v;
      d.powerLimitW = v;
    }
  }
  return { s, d };
}

/** Either tool's JSON → a capture of one reading per GPU. */
export function parseAmdSmiJson(text: string, opts: AmdSmiParseOptions): TelemetryCapture {
  const file = opts.file ?? "amd-smi output";
  // amd-smi may print WARNING lines before the JSON (which may hold brackets of their own): the JSON starts a line.
  const start = text.search(/^[ \t]*[[{]/m);
  let doc: Json;
  try {
    doc = JSON.parse(start >= 0 ? text.slice(start) : text) as Json;
  } catch (e) {
    const m = /position (\d+)/.exec(String((e as Error).message));
    const pos = m ? Number(m[1]) + Math.max(0, start) : 0;
    const before = text.slice(0, pos);
    const line = before.split("\n").length;
    const column = pos - before.lastIndexOf("\n");
    throw new InputError(`not valid JSON: ${(e as Error).message}`, { position: { file, line, column } });
  }
  const samples: TelemetrySample[] = [];
  const devices: TelemetryDevice[] = [];
  let detail: string;
  const list = Array.isArray(doc) ? doc : Array.isArray(get(doc, "gpu_data")) ? (get(doc, "gpu_data") as Json[]) : null;
  if (list) {
    detail = "amd-smi metric --json";
    list.forEach((g, i) => {
      const { s, d } = amdSmiGpu(g, opts.timeS, i, file);
      samples.push(s);
      devices.push(d);
    });
  } else if (doc && typeof doc === "object" && Object.keys(doc).some((k) => /^card\d+$/.test(k))) {
    detail = "rocm-smi --json";
    for (const [k, v] of Object.entries(doc as Record<string, Json>)) {
      if (!/^card\d+$/.test(k) || !v || typeof v !== "object" || Array.isArray(v)) continue;
      const { s, d } = rocmSmiCard(k, v as Record<string, Json>, opts.timeS);
      samples.push(s);
      devices.push(d);
    }
  } else
    throw new InputError(
      'JSON that is neither amd-smi metric --json (a list, or {"gpu_data": [...]}) nor rocm-smi --json ({"card0": {...}})',
      { position: { file, line: 1, column: 1 } },
    );
  const unavailable: TelemetryCapture["unavailable"] = [];
  if (!samples.some((s) => s.energyJ !== undefined))
    unavailable.push({ field: "energyJ", why: `${detail} gave no energy counter` });
  unavailable.push({ field: "throttle", why: `${detail}: clock event reasons are not read from it` });
  return {
    source: { kind: "amd-smi", detail: `${detail}${opts.file ? ` ${opts.file}` : ""}` },
    devices,
    samples,
    notes: ["one reading per GPU: a single amd-smi/rocm-smi call gives a snapshot, not a window"],
    unavailable,
  };
}
