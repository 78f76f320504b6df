// `telemetry read`: saved telemetry files → captures → the loaded window → the summary. Each file's format is
// detected from its text (or forced); the parsers are pure, this module reads the files.

import { createHash } from "node:crypto";
import { open, realpath, stat } from "node:fs/promises";
import { basename } from "node:path";
import { InputError, plainReason, UsageError } from "../errors.ts";
import { parseTopology, type Topology } from "../trace/topo.ts";
import { parseAmdSmiJson } from "./amdsmi.ts";
import { parseDcgmExposition } from "./dcgm.ts";
import { screenCapture } from "./sanity.ts";
import { medianIntervalMs, parseSmiDmon, parseSmiQ, parseSmiQueryCsv, type SmiQReport, smiQCapture } from "./smi.ts";
import { summarizeTelemetry } from "./summary.ts";
import type {
  TelemetryCapture,
  TelemetryDevice,
  TelemetryFileFormat,
  TelemetrySample,
  TelemetrySummary,
} from "./types.ts";
import { detectWindow, parseWindowFlag, type TelemetryWindow } from "./window.ts";

export { TELEMETRY_FORMATS, type TelemetryFileFormat } from "./types.ts";

const ANSI = /\x1b\[[0-9;]*[A-Za-z]/g;

/** What a file's text is, from its first meaningful lines. Throws an InputError naming what it looked for. */
export function detectTelemetryFormat(text: string, file = "input"): TelemetryFileFormat {
  const clean = text.replace(ANSI, "");
  const lines = clean.split("\n").map((l) => l.trim());
  const first = lines.find((l) => l !== "") ?? "";
  if (/NVSMI LOG/.test(clean.slice(0, 4096))) return "smi-q";
  if (first.startsWith("{") || first.startsWith("[")) {
    if (/"card\d+"\s*:/.test(clean)) return "rocm-smi";
    return "amd-smi";
  }
  if (lines.some((l) => /^GPU0(\s|$)/.test(l)) && /Legend:|CPU Affinity|NV\d+\s*=|\bX\b/.test(clean)) return "smi-topo";
  if (/^#\s*(HELP|TYPE)\s+DCGM_/m.test(clean) || /^DCGM_[A-Z0-9_]+[{ ]/m.test(clean)) return "dcgm";
  if (/^#\s*(Date\s+)?(Time\s+)?gpu\s/i.test(first)) return "smi-dmon";
  if (first.includes(",")) {
    const cells = first.split(",").map((c) => c.trim());
    if (cells.every((c) => /^[a-z][a-z0-9_.]*(\s*\[[^\]]*\])?$/i.test(c))) return "smi-query";
    if (/^\d{4}\/\d{2}\/\d{2} \d{2}:\d{2}:\d{2}/.test(cells[0]!))
      throw new InputError(
        "an nvidia-smi query CSV without a header line (noheader): its fields cannot be known; rerun without noheader",
        { position: { file, line: 1, column: 1 } },
      );
  }
  throw new InputError(
    `unknown telemetry format: expected nvidia-smi --query-gpu CSV (a header like "timestamp, power.draw [W]"), nvidia-smi dmon ("# gpu pwr …"), nvidia-smi -q ("NVSMI LOG"), nvidia-smi topo -m ("GPU0 … CPU Affinity"), a dcgm-exporter exposition ("DCGM_FI_…"), or amd-smi/rocm-smi JSON`,
    { position: { file, line: 1, column: 1 } },
  );
}

export interface TelemetryReadOptions {
  /** `START,END` (see parseWindowFlag) or bounds in unix seconds; default: detected. */
  window?: string | { startS: number; endS: number };
  tokens?: number;
  /** Force one format for every file. */
  format?: TelemetryFileFormat;
  peakBandwidthGBs?: number;
  /** Offset of the capturing machine's clock from UTC (minutes) for nvidia-smi timestamps; default: local zone. */
  utcOffsetMinutes?: number;
  /** Seconds between dmon rows without a time column (dmon -d; default 1). */
  dmonIntervalS?: number;
}

export interface TelemetryFileResult {
  file: string;
  format: TelemetryFileFormat;
  samples: number;
  devices: string[];
}

export interface TelemetryReadResult {
  files: TelemetryFileResult[];
  /** One capture per time-series file (query CSV, dmon, dcgm, amd-smi). */
  captures: TelemetryCapture[];
  /** Facts from nvidia-smi -q files. */
  deviceReports: SmiQReport[];
  topology?: Topology;
  /** The capture the summary rests on (time-series files of one time axis merged; see notes). */
  window: TelemetryWindow | null;
  summary: TelemetrySummary | null;
  /** Each other time-series file summarized on its own over its own window. */
  others: { file: string; window: TelemetryWindow; summary: TelemetrySummary }[];
  notes: string[];
}

/**
 * The largest telemetry file read (the same limit as a metrics file): an hour of 100 ms readings of eight GPUs
 * is ~70 MB of query CSV. Above it, reading and parsing would take minutes and gigabytes; split the file.
 */
export const MAX_TELEMETRY_FILE_BYTES = 64 * 1024 * 1024;

const mib = (n: number) => `${(n / 1048576).toFixed(n < 1048576 ? 2 : 0)} MiB`;

/**
 * A telemetry file's bytes, refused past MAX_TELEMETRY_FILE_BYTES before it is read whole: a regular file by its
 * size, anything else (a device like /dev/zero, a pipe) by what it has given so far.
 */
export async function readTelemetryFile(file: string, maxBytes = MAX_TELEMETRY_FILE_BYTES): Promise<Buffer> {
  const limit = `telemetry read takes files up to ${mib(maxBytes)}; split a longer capture (by time) and read the part with the run`;
  let fh: Awaited<ReturnType<typeof open>>;
  try {
    fh = await open(file, "r");
  } catch (e) {
    throw new InputError(`${file}: ${plainReason(e)}`, { cause: e });
  }
  try {
    const st = await fh.stat();
    if (st.isFile() && st.size > maxBytes) throw new InputError(`${file}: ${mib(st.size)}: ${limit}`);
    const chunks: Buffer[] = [];
    let total = 0;
    for (;;) {
      const buf = Buffer.allocUnsafe(Math.min(1 << 20, maxBytes + 1 - total));
      const { bytesRead } = await fh.read(buf, 0, buf.length, null);
      if (bytesRead === 0) break;
      chunks.push(buf.subarray(0, bytesRead));
      total += bytesRead;
      if (total > maxBytes)
        throw new InputError(
          `${file}: more than ${mib(maxBytes)}${st.isFile() ? "" : " (not a regular file)"}: ${limit}`,
        );
    }
    return Buffer.concat(chunks, total);
  } finally {
    await fh.close();
  }
}

/** Reads telemetry files, finds the loaded window (or takes the given one) and summarizes. */
export async function telemetryRead(files: string[], opts: TelemetryReadOptions = {}): Promise<TelemetryReadResult> {
  if (!files.length) throw new UsageError("give telemetry files to read");
  if (opts.tokens !== undefined && !(opts.tokens > 0)) throw new UsageError("--tokens: expected a positive number");
  const results: TelemetryFileResult[] = [];
  const series: { file: string; cap: TelemetryCapture; format: TelemetryFileFormat }[] = [];
  const reports: SmiQReport[] = [];
  let topology: Topology | undefined;
  const notes: string[] = [];
  // The same file named twice (or two copies of one) is one recording, read once: summing it twice would count
  // every device twice, merging it would interleave a device with itself.
  const seenPath = new Map<string, string>();
  const seenBytes = new Map<string, string>();
  for (const file of files) {
    const real = await realpath(file).catch(() => file);
    const again = seenPath.get(real);
    if (again !== undefined) {
      notes.push(`${file}: the same file as ${again}; read once`);
      continue;
    }
    seenPath.set(real, file);
    const bytes = await readTelemetryFile(file);
    const digest = createHash("sha256").update(bytes).digest("hex");
    const copy = seenBytes.get(digest);
    if (copy !== undefined) {
      notes.push(`${file}: the same bytes as ${copy} (a copy of one recording); read once`);
      continue;
    }
    seenBytes.set(digest, file);
    const text = bytes.toString("utf8");
    const format = opts.format ?? detectTelemetryFormat(text, file);
    let cap: TelemetryCapture | undefined;
    switch (format) {
      case "smi-query":
        cap = parseSmiQueryCsv(text, { file, utcOffsetMinutes: opts.utcOffsetMinutes });
        break;
      case "smi-dmon":
        cap = parseSmiDmon(text, { file, utcOffsetMinutes: opts.utcOffsetMinutes, intervalS: opts.dmonIntervalS });
        break;
      case "smi-q": {
        const q = parseSmiQ(text, { file, utcOffsetMinutes: opts.utcOffsetMinutes });
        reports.push(q);
        results.push({ file, format, samples: 0, devices: q.gpus.map((g) => g.key) });
        continue;
      }
      case "smi-topo":
        topology = parseTopology(text, file);
        results.push({ file, format, samples: 0, devices: topology.gpus });
        continue;
      case "dcgm": {
        // A saved exposition carries no scrape time unless its samples have timestamps: the file's mtime stands in.
        const st = await stat(file);
        cap = parseDcgmExposition(text, { file, scrapeTimeS: st.mtimeMs / 1000 });
        break;
      }
      case "amd-smi":
      case "rocm-smi": {
        const st = await stat(file);
        cap = parseAmdSmiJson(text, { file, timeS: st.mtimeMs / 1000 });
        break;
      }
    }
    results.push({ file, format, samples: cap.samples.length, devices: cap.devices.map((d) => d.key) });
    series.push({ file, cap, format });
  }
  // -q facts fill in devices of every capture (matched by UUID, else by key).
  const facts = reports.flatMap((r) => smiQCapture(r).devices);
  // Impossible readings go before anything is derived (the facts first: a device's power limit bounds its power).
  for (const s of series) {
    s.cap.devices = s.cap.devices.map((d) => mergeFacts(d, facts));
    s.cap = screenCapture(s.cap);
  }
  if (!series.length) {
    if (reports.length && !topology) notes.push("no time series among the files: device facts only");
    return {
      files: results,
      captures: [],
      deviceReports: reports,
      topology,
      window: null,
      summary: null,
      others: [],
      notes,
    };
  }
  // Files of one format are segments of one recording (successive scrapes of an exporter, a loop restarted):
  // their samples are concatenated. Of the groups, the finest-sampled carries the summary; another group joins
  // it when it holds other devices on the same time axis, and is otherwise summarized on its own (a dmon log
  // beside the query loop of the same run would interleave two power series of one GPU).
  const groups = new Map<
    TelemetryFileFormat,
    { file: string; cap: TelemetryCapture; members: Member[]; split: Set<string> }
  >();
  for (const s of series) {
    const g = groups.get(s.format);
    if (!g) {
      groups.set(s.format, {
        file: s.file,
        cap: { ...s.cap, samples: [...s.cap.samples], devices: [...s.cap.devices], notes: [...s.cap.notes] },
        members: [{ file: s.file, cap: s.cap }],
        split: new Set(),
      });
      continue;
    }
    g.file = `${g.file}, ${s.file}`;
    joinSegment(g, { file: s.file, cap: s.cap }, notes);
    g.cap.intervalMs = undefined;
  }
  for (const g of groups.values()) {
    g.cap.samples.sort((x, y) => x.t - y.t || (x.device < y.device ? -1 : 1));
    g.cap.intervalMs ??= medianIntervalMs(g.cap.samples);
  }
  const ranked = [...groups.values()].sort((x, y) => (x.cap.intervalMs ?? 1e9) - (y.cap.intervalMs ?? 1e9));
  const primary = ranked[0]!;
  const merged: TelemetryCapture = primary.cap;
  const others: TelemetryReadResult["others"] = [];
  const relative = (c: TelemetryCapture) => (c.samples[0]?.t ?? 0) < 1e8;
  for (const s of ranked.slice(1)) {
    const overlap = s.cap.devices.some((d) => merged.devices.some((m) => m.key === d.key));
    if (!overlap && relative(s.cap) === relative(merged)) {
      merged.samples.push(...s.cap.samples);
      merged.devices.push(...s.cap.devices);
      merged.notes.push(...s.cap.notes);
      merged.unavailable = merged.unavailable.filter((u) => s.cap.unavailable.some((v) => v.field === u.field));
      continue;
    }
    const w = chooseWindow(s.cap, opts);
    const sum = summarizeTelemetry(s.cap, summaryOpts(w, opts));
    sum.notes.push(...w.notes);
    others.push({ file: s.file, window: w, summary: sum });
    notes.push(
      `${s.file}: summarized on its own (it ${overlap ? "holds the same devices as" : "is on another time axis than"} ${primary.file})`,
    );
  }
  merged.samples.sort((x, y) => x.t - y.t || (x.device < y.device ? -1 : 1));
  const window = chooseWindow(merged, opts);
  const summary = summarizeTelemetry(merged, summaryOpts(window, opts));
  summary.notes.push(...window.notes);
  return {
    files: results,
    captures: series.map((s) => s.cap),
    deviceReports: reports,
    topology,
    window,
    summary,
    others,
    notes,
  };
}

interface Member {
  file: string;
  cap: TelemetryCapture;
}

/** Time span of one device's readings in a capture. */
function spanOf(cap: TelemetryCapture, key: string): [number, number] | null {
  let lo = Number.POSITIVE_INFINITY;
  let hi = Number.NEGATIVE_INFINITY;
  for (const s of cap.samples)
    if (s.device === key) {
      if (s.t < lo) lo = s.t;
      if (s.t > hi) hi = s.t;
    }
  return lo <= hi ? [lo, hi] : null;
}

/** The label that tells two files' devices apart: the host where both know theirs, else the file's name. */
function labelOf(m: Member, others: Member[], dev: TelemetryDevice | undefined): string {
  if (dev?.host) return dev.host;
  const base = basename(m.file);
  return others.some((o) => o !== m && basename(o.file) === base) ? m.file : base;
}

function renameDevice(cap: TelemetryCapture, from: string, to: string): void {
  cap.samples = cap.samples.map((s: TelemetrySample) => (s.device === from ? { ...s, device: to } : s));
  cap.devices = cap.devices.map((d) => (d.key === from ? { ...d, key: to } : d));
}

/**
 * Joins one more file of a format to its group. Files of one format are segments of one recording (successive
 * scrapes, a loop restarted) unless their devices say otherwise: one key (gpu0) in two files is one GPU only where
 * the UUIDs agree, or, without UUIDs, where the files do not overlap in time. Two GPUs are kept apart
 * (`a.csv:gpu0`, `b.csv:gpu0`, or by host); one GPU recorded twice over the same time keeps its first file's readings.
 */
function joinSegment(
  g: { cap: TelemetryCapture; members: Member[]; split: Set<string> },
  m: Member,
  notes: string[],
): void {
  const cap: TelemetryCapture = { ...m.cap, samples: [...m.cap.samples], devices: [...m.cap.devices] };
  const mine = { file: m.file, cap };
  const all = [...g.members, mine];
  for (const key of [...new Set(cap.samples.map((s) => s.device))]) {
    if (g.split.has(key)) {
      // Already told apart in earlier files: this file's is one more.
      let lb = labelOf(
        mine,
        all,
        cap.devices.find((d) => d.key === key),
      );
      if (g.cap.devices.some((d) => d.key === `${lb}:${key}`)) lb = m.file;
      renameDevice(cap, key, `${lb}:${key}`);
      notes.push(`${key} in ${m.file}: kept apart from the other files' as ${lb}:${key}`);
      continue;
    }
    const prior = g.members.find((p) => p.cap.samples.some((s) => s.device === key));
    if (!prior) continue;
    const a = g.cap.devices.find((d) => d.key === key);
    const b = cap.devices.find((d) => d.key === key);
    const sa = spanOf(prior.cap, key)!;
    const sb = spanOf(cap, key)!;
    const overlap = Math.max(sa[0], sb[0]) <= Math.min(sa[1], sb[1]);
    if (a?.uuid && b?.uuid && a.uuid === b.uuid) {
      if (!overlap) continue;
      cap.samples = cap.samples.filter((s) => s.device !== key);
      notes.push(
        `${m.file}: ${key} is the GPU ${a.uuid} that ${prior.file} records over the same time: its readings there are left out (one GPU counted once)`,
      );
      continue;
    }
    if (!(a?.uuid && b?.uuid) && !overlap) {
      notes.push(
        `${key} in ${prior.file} and ${m.file}: no UUID to tell GPUs apart, and the files do not overlap in time: read as one recording of one GPU`,
      );
      continue;
    }
    // Two GPUs under one key: each takes its file's (or host's) name.
    const la = labelOf(prior, all, a);
    let lb = labelOf(mine, all, b);
    if (lb === la) lb = m.file === prior.file ? `${lb}#2` : m.file;
    const ka = `${la}:${key}`;
    const kb = `${lb}:${key}`;
    renameDevice(g.cap, key, ka);
    renameDevice(prior.cap, key, ka);
    renameDevice(cap, key, kb);
    g.split.add(key);
    notes.push(
      a?.uuid && b?.uuid
        ? `${key} in ${prior.file} and in ${m.file} are two GPUs (UUIDs ${a.uuid}, ${b.uuid}): kept apart as ${ka} and ${kb}`
        : `${key} in ${prior.file} and in ${m.file} overlap in time and carry no UUID to say they are one GPU: kept apart as ${ka} and ${kb}`,
    );
  }
  g.cap.samples.push(...cap.samples);
  for (const d of cap.devices) if (!g.cap.devices.some((x) => x.key === d.key)) g.cap.devices.push(d);
  for (const n of cap.notes) if (!g.cap.notes.includes(n)) g.cap.notes.push(n);
  g.members.push(mine);
}

function summaryOpts(w: TelemetryWindow, o: TelemetryReadOptions) {
  return { window: w, tokens: o.tokens, peakBandwidthGBs: o.peakBandwidthGBs };
}

function chooseWindow(cap: TelemetryCapture, opts: TelemetryReadOptions): TelemetryWindow {
  if (opts.window !== undefined) {
    const w = typeof opts.window === "string" ? parseWindowFlag(opts.window, cap.samples[0]?.t) : opts.window;
    return { ...w, how: "given", notes: [] };
  }
  return detectWindow(cap, { powerAveragingS: cap.powerAveragingS });
}

function mergeFacts(d: TelemetryDevice, facts: TelemetryDevice[]): TelemetryDevice {
  const f = facts.find((x) => (d.uuid && x.uuid === d.uuid) || x.key === d.key);
  if (!f) return d;
  const out: TelemetryDevice = { ...d };
  for (const [k, v] of Object.entries(f)) if (v !== undefined && (out as any)[k] === undefined) (out as any)[k] = v;
  return out;
}
