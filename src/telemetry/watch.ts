// Live view of a telemetry source, like `metrics watch`: the newest reading per device each frame,
// power from the energy counter's rate where the source has no power reading (RAPL).
import { TelemetryError } from "../errors.ts";
import { type RecorderContext, startTelemetry } from "./recorder.ts";
import { powerBoundW, screenSample } from "./sanity.ts";
import { sleepUntil } from "./sources/common.ts";
import type { TelemetrySample, TelemetrySourceKind, TelemetrySpec } from "./types.ts";

/** The sample fields a frame shows as they are: the newest value of each. */
const CARRIED = [
  "smClockMHz",
  "smClockMaxMHz",
  "memClockMHz",
  "gpuBusy",
  "memBusy",
  "dramActive",
  "temperatureC",
  "memoryUsedMiB",
  "memoryTotalMiB",
  "cpuBusy",
  "energyJ",
  "pcieTxBps",
  "pcieRxBps",
  "nvlinkTxBps",
] as const;

export interface TelemetryFrameDevice extends Pick<TelemetrySample, (typeof CARRIED)[number]> {
  device: string;
  /** Unix seconds of the newest reading. */
  t: number;
  powerW?: number;
  /** How powerW was obtained. */
  powerFrom?: "reading" | "energy-rate";
  /** Clock event reasons that limit clocks, by NVML name (idle excluded). */
  reasons?: string[];
}

export interface TelemetryFrame {
  atMs: number;
  source: { kind: TelemetrySourceKind | "none"; why: string };
  devices: TelemetryFrameDevice[];
  /** Problems met since the previous frame. */
  notes: string[];
}

// NVML's nvmlClocksEventReason* bits (nvml.h).
const REASONS: Array<[number, string]> = [
  [0x2, "applications clocks"],
  [0x4, "SW power cap"],
  [0x8, "HW slowdown"],
  [0x10, "sync boost"],
  [0x20, "SW thermal"],
  [0x40, "HW thermal"],
  [0x80, "HW power brake"],
  [0x100, "display clock"],
];

export function reasonNames(mask: number): string[] {
  return REASONS.filter(([bit]) => (mask & bit) !== 0).map(([, n]) => n);
}

/** Pure: one frame from the samples since the previous frame (and the one before them, for rates). */
export function frameFrom(
  latest: Map<string, TelemetrySample[]>,
  atMs: number,
  source: TelemetryFrame["source"],
  notes: string[],
): TelemetryFrame {
  const devices: TelemetryFrameDevice[] = [];
  const dropped: string[] = [];
  for (const [device, raw] of [...latest.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    // Impossible readings are not shown as measured (sanity.ts): the field is left out, said in the frame's notes.
    const list = raw.flatMap((x) => {
      const r = screenSample(x);
      for (const n of r.notes) if (!dropped.includes(n)) dropped.push(n);
      return r.sample ? [r.sample] : [];
    });
    const s = list.at(-1);
    if (!s) continue;
    const d: TelemetryFrameDevice = { device, t: s.t };
    // The newest value of each field (a source may fill fields in different readings).
    for (const x of list) {
      for (const k of CARRIED) if (x[k] !== undefined) d[k] = x[k];
      if (x.powerW !== undefined || x.powerInstantW !== undefined) {
        d.powerW = x.powerW ?? x.powerInstantW;
        d.powerFrom = "reading";
      }
      if (x.clockEventReasons !== undefined) d.reasons = reasonNames(x.clockEventReasons);
    }
    if (d.powerW === undefined) {
      const withE = list.filter((x) => x.energyJ !== undefined);
      const a = withE[0];
      const b = withE.at(-1);
      const rate = a && b && b.t > a.t ? (b.energyJ! - a.energyJ!) / (b.t - a.t) : undefined;
      // A counter that went down (or past any device's power) gives no power to show.
      if (rate !== undefined && rate >= 0 && rate <= powerBoundW(undefined)) {
        d.powerW = rate;
        d.powerFrom = "energy-rate";
      }
    }
    devices.push(d);
  }
  return { atMs, source, devices, notes: [...notes, ...dropped] };
}

export interface TelemetryWatchOptions {
  /** Between frames (ms); at least 100 (≤ 10 redraws a second). Default 1000. */
  intervalMs?: number;
  /** Stop after this many frames; default: until aborted. */
  iterations?: number;
  signal?: AbortSignal;
  onFrame: (frame: TelemetryFrame) => void;
  /** Passed to the recorder (simUrl for auto, source overrides). */
  context?: Omit<RecorderContext, "signal" | "onSample">;
}

/** Records the source and emits a frame every interval; returns the number of frames. */
export async function telemetryWatch(spec: TelemetrySpec, opts: TelemetryWatchOptions): Promise<number> {
  const intervalMs = Math.max(100, opts.intervalMs ?? 1000);
  // Each frame keeps the last reading before it, so a rate spans at least one interval.
  let pending = new Map<string, TelemetrySample[]>();
  const onSample = (s: TelemetrySample) => {
    let l = pending.get(s.device);
    if (!l) pending.set(s.device, (l = []));
    l.push(s);
  };
  const ac = new AbortController();
  // The caller's reason goes along (an interrupt stays an interrupt, not an AbortError from deep in a probe).
  const onAbort = () => ac.abort(opts.signal?.reason);
  opts.signal?.addEventListener("abort", onAbort, { once: true });
  if (opts.signal?.aborted) onAbort();
  let rec: Awaited<ReturnType<typeof startTelemetry>>;
  try {
    rec = await startTelemetry(spec, { ...opts.context, signal: ac.signal, onSample });
  } catch (err) {
    opts.signal?.removeEventListener("abort", onAbort);
    // Stopped while the source was starting (a hung nvidia-smi probe): a live view stopped before its first frame.
    if (ac.signal.aborted) return 0;
    throw err;
  }
  const source = { kind: rec.resolved.kind, why: rec.resolved.why };
  let frames = 0;
  let notesSeen = 0;
  try {
    if (rec.resolved.kind === "none")
      // Nothing to watch is a failure to say, not an empty frame: auto lists what it tried.
      throw new TelemetryError(
        `telemetry watch ${spec.kind}: no source to watch (tried ${(rec.resolved.tried ?? [rec.resolved.why]).join("; ")})`,
        {
          hint: "name a source: nvidia-smi, dcgm:URL, prometheus:URL, amd-smi or cpu (this host's /proc/stat and RAPL)",
        },
      );
    const t0 = Date.now();
    let tick = 0;
    while (!ac.signal.aborted && (opts.iterations === undefined || frames < opts.iterations)) {
      tick++;
      await sleepUntil(t0 + tick * intervalMs, Date.now, ac.signal);
      if (ac.signal.aborted) break;
      // Until the first reading arrives (a tool still starting) there is nothing to show.
      if (rec.samples.length === 0 && rec.errors.length === notesSeen) continue;
      const cur = pending;
      pending = new Map([...cur].map(([k, l]) => [k, l.slice(-1)]));
      const notes = rec.errors.slice(notesSeen);
      notesSeen = rec.errors.length;
      opts.onFrame(frameFrom(cur, Date.now(), source, notes));
      frames++;
    }
  } finally {
    opts.signal?.removeEventListener("abort", onAbort);
    await rec.stop();
  }
  return frames;
}

const f = (x: number | undefined, d = 0, unit = "") => (x === undefined ? "–" : `${x.toFixed(d)}${unit}`);
const pct = (x: number | undefined) => (x === undefined ? "–" : `${(x * 100).toFixed(0)}%`);

function deviceLine(d: TelemetryFrameDevice): string {
  if (d.cpuBusy !== undefined || d.device === "cpu") return `${d.device} busy ${pct(d.cpuBusy)}`;
  const parts = [`${d.device} ${f(d.powerW, 0, " W")}${d.powerFrom === "energy-rate" ? " (from energy)" : ""}`];
  if (d.smClockMHz !== undefined)
    parts.push(`sm ${f(d.smClockMHz)}${d.smClockMaxMHz ? `/${f(d.smClockMaxMHz)}` : ""} MHz`);
  if (d.gpuBusy !== undefined) parts.push(`busy ${pct(d.gpuBusy)}`);
  if (d.memBusy !== undefined) parts.push(`mem-busy ${pct(d.memBusy)}`);
  if (d.dramActive !== undefined) parts.push(`dram ${pct(d.dramActive)}`);
  if (d.temperatureC !== undefined) parts.push(`${f(d.temperatureC)} °C`);
  if (d.memoryUsedMiB !== undefined) parts.push(`${f(d.memoryUsedMiB)} MiB`);
  if (d.pcieTxBps !== undefined || d.pcieRxBps !== undefined)
    parts.push(
      `pcie tx ${f(d.pcieTxBps === undefined ? undefined : d.pcieTxBps / 1e6, 0)} rx ${f(d.pcieRxBps === undefined ? undefined : d.pcieRxBps / 1e6, 0)} MB/s`,
    );
  if (d.nvlinkTxBps !== undefined) parts.push(`nvlink tx ${f(d.nvlinkTxBps / 1e9, 1)} GB/s`);
  if (d.reasons?.length) parts.push(`limited: ${d.reasons.join(", ")}`);
  return parts.join("  ");
}

/** One line per frame (pipes, logs). */
export function formatTelemetryLine(fr: TelemetryFrame): string {
  const t = new Date(fr.atMs).toISOString().slice(11, 19);
  const devs = fr.devices.length ? fr.devices.map(deviceLine).join(" | ") : "no readings";
  const notes = fr.notes.length ? `  [${fr.notes.join("; ")}]` : "";
  return `${t}  ${devs}${notes}`;
}

/** A panel redrawn in place on a TTY. */
export function formatTelemetryPanel(fr: TelemetryFrame, label: string): string {
  const head = `${label}  ${fr.source.kind}  ${new Date(fr.atMs).toISOString().slice(11, 19)}`;
  const lines = fr.devices.length ? fr.devices.map((d) => `  ${deviceLine(d)}`) : ["  no readings in this frame"];
  return [head, ...lines, ...fr.notes.map((n) => `  ! ${n}`), "  (Ctrl-C to stop)"].join("\n");
}
