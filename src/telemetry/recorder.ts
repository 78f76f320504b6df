// Records telemetry beside a measurement: resolves `auto`, starts the source before the run (a source
// that cannot start fails here, before anything is measured), stamps window edges, and returns the
// capture at stop. cutToWindow() keeps the measured window (plus one sample each side for integration).
import { InferscopeError } from "../errors.ts";
import { findOnPath } from "./sources/common.ts";
import { type ConcreteSpec, type SourceOverrides, sourceFor, type TelemetryHandle } from "./sources/index.ts";
import { formatTelemetrySpec } from "./spec.ts";
import type { TelemetryCapture, TelemetrySample, TelemetrySourceKind, TelemetrySpec } from "./types.ts";

export interface RecorderContext {
  signal?: AbortSignal;
  /** The embedded sim's base URL when the target is the sim: `auto` then reads its dcgm endpoint. */
  simUrl?: string;
  /** The target runs on this host (a loopback URL): `auto` falls back to the cpu source. */
  localTarget?: boolean;
  /** The local target's port: the cpu source reads the process listening there (its CPU time and run-queue wait). */
  targetPort?: number;
  /** One line per decision and problem (which source and why, a gap, a dying tool). */
  onProgress?: (line: string) => void;
  onSample?: (s: TelemetrySample) => void;
  /** Source options (binaries, paths, limits). */
  sources?: SourceOverrides;
  /** PATH searched for nvidia-smi by `auto` (default process.env.PATH). */
  path?: string;
}

/** What `auto` (or an explicit spec) became, and why. */
export interface TelemetryResolution {
  kind: TelemetrySourceKind | "none";
  why: string;
  /** The concrete spec recorded (none for none). */
  spec: TelemetrySpec;
  /** auto without a source: each candidate and why it was not taken ("nvidia-smi: not on PATH"). */
  tried?: string[];
}

export interface TelemetryMark {
  name: string;
  /** Unix seconds. */
  t: number;
}

export interface TelemetryRecording {
  resolved: TelemetryResolution;
  /** null when nothing was recorded (none). */
  capture: TelemetryCapture | null;
  marks: TelemetryMark[];
}

export interface Recorder {
  readonly resolved: TelemetryResolution;
  readonly marks: readonly TelemetryMark[];
  /** Samples so far (live). */
  readonly samples: readonly TelemetrySample[];
  /** Problems so far. */
  readonly errors: readonly string[];
  /** Stamps a window edge now (or at `atMs`): "measure-start", "measure-end", a phase name. */
  mark(name: string, atMs?: number): void;
  /** Stops the source; idempotent. */
  stop(): Promise<TelemetryRecording>;
}

/** The sim's dcgm-exporter-compatible endpoint under its base URL. */
export function simDcgmUrl(simUrl: string): string {
  return `${simUrl.replace(/\/+$/, "")}/dcgm/metrics`;
}

/** The candidates `auto` tries, in order, each with why; none last. */
export function autoCandidates(
  ctx: Pick<RecorderContext, "simUrl" | "localTarget" | "path">,
  intervalMs?: number,
): Array<{ spec: ConcreteSpec; kind: TelemetrySourceKind; why: string; binary?: string }> {
  const iv = intervalMs === undefined ? {} : { intervalMs };
  const out: Array<{ spec: ConcreteSpec; kind: TelemetrySourceKind; why: string; binary?: string }> = [];
  const smi = findOnPath("nvidia-smi", ctx.path ?? process.env.PATH ?? "");
  if (smi)
    out.push({
      spec: { kind: "nvidia-smi", ...iv },
      kind: "nvidia-smi",
      why: `nvidia-smi found at ${smi}`,
      binary: smi,
    });
  if (ctx.simUrl)
    out.push({
      spec: { kind: "dcgm", url: simDcgmUrl(ctx.simUrl), ...iv },
      kind: "sim",
      why: `the target is the embedded sim: its dcgm-exporter-compatible endpoint ${simDcgmUrl(ctx.simUrl)}`,
    });
  if (ctx.localTarget)
    out.push({
      spec: { kind: "cpu", ...iv },
      kind: "cpu",
      why: "no GPU tool on PATH and the target runs on this host: CPU busy time from /proc/stat and RAPL energy",
    });
  return out;
}

function noneWhy(tried: string[]): string {
  const base = tried.length
    ? "no telemetry source could start"
    : "no nvidia-smi on PATH and the target is not the embedded sim";
  const t = tried.length ? ` (${tried.join("; ")})` : "";
  return `${base}${t}; give --telemetry dcgm:URL, prometheus:URL, amd-smi or cpu to record one`;
}

/** Source overrides with the local target's port given to the cpu source. */
function withServer(ctx: RecorderContext): SourceOverrides {
  const o = ctx.sources ?? {};
  if (!ctx.localTarget || ctx.targetPort === undefined || o.cpu?.serverPort !== undefined) return o;
  return { ...o, cpu: { ...o.cpu, serverPort: ctx.targetPort } };
}

export async function startTelemetry(spec: TelemetrySpec, ctx: RecorderContext = {}): Promise<Recorder> {
  const marks: TelemetryMark[] = [];
  const progress = ctx.onProgress ?? (() => {});
  const startOpts = (intervalMs: number) => ({
    intervalMs,
    signal: ctx.signal,
    onSample: ctx.onSample,
    onNote: (n: string) => progress(`telemetry: ${n}`),
    onProgress: (l: string) => progress(`telemetry: ${l}`),
  });

  let handle: TelemetryHandle | null = null;
  let resolved: TelemetryResolution;
  if (spec.kind === "none") {
    resolved = { kind: "none", why: "--telemetry none", spec };
  } else if (spec.kind === "auto") {
    const tried: string[] = [];
    resolved = { kind: "none", why: "", spec: { kind: "none" } };
    for (const c of autoCandidates(ctx, spec.intervalMs)) {
      const overrides: SourceOverrides =
        c.binary && c.spec.kind === "nvidia-smi"
          ? { ...withServer(ctx), nvidiaSmi: { ...ctx.sources?.nvidiaSmi, binary: c.binary } }
          : withServer(ctx);
      const { source, intervalMs } = sourceFor(c.spec, overrides);
      try {
        handle = await source.start(startOpts(intervalMs));
        resolved = { kind: c.kind, why: `auto: ${c.why}`, spec: c.spec };
        break;
      } catch (err) {
        // auto never fails a run: a candidate that cannot start is said and the next one tried.
        if (!(err instanceof InferscopeError)) throw err;
        tried.push(`${c.kind}: ${err.message}`);
      }
    }
    if (!handle) {
      const absent = findOnPath("nvidia-smi", ctx.path ?? process.env.PATH ?? "") ? [] : ["nvidia-smi: not on PATH"];
      if (!ctx.simUrl) absent.push("the embedded sim's /dcgm/metrics: no sim target");
      if (!ctx.localTarget) absent.push("cpu: no target on this host");
      resolved = { kind: "none", why: `auto: ${noneWhy(tried)}`, spec: { kind: "none" }, tried: [...absent, ...tried] };
    }
  } else {
    const { source, intervalMs } = sourceFor(spec, withServer(ctx));
    // An explicit source that cannot start is an error (exit 3), thrown before any measurement.
    handle = await source.start(startOpts(intervalMs));
    resolved = { kind: spec.kind, why: `--telemetry ${formatTelemetrySpec(spec)}`, spec };
  }
  progress(`telemetry: ${resolved.kind === "none" ? "none" : (handle?.detail ?? resolved.kind)} (${resolved.why})`);

  let stopped: Promise<TelemetryRecording> | null = null;
  const h = handle;
  return {
    resolved,
    marks,
    get samples() {
      return h?.samples ?? [];
    },
    get errors() {
      return h?.errors ?? [];
    },
    mark(name: string, atMs?: number) {
      marks.push({ name, t: (atMs ?? Date.now()) / 1000 });
    },
    stop() {
      stopped ??= (async () => {
        let capture = h ? await h.stop() : null;
        if (capture && resolved.kind === "sim")
          capture = { ...capture, source: { kind: "sim", detail: capture.source.detail } };
        return { resolved, capture, marks: [...marks] };
      })();
      return stopped;
    },
  };
}

/** The window between two marks (default measure-start … measure-end), or null when either is missing. */
export function markedWindow(
  marks: readonly TelemetryMark[],
  start = "measure-start",
  end = "measure-end",
): { startS: number; endS: number } | null {
  const s = marks.find((m) => m.name === start);
  const e = [...marks].reverse().find((m) => m.name === end);
  if (!s || !e || e.t < s.t) return null;
  return { startS: s.t, endS: e.t };
}

/**
 * The capture cut to [startS, endS], keeping per device the last sample before the window and the
 * first after it, so power can be integrated (and counters differenced) up to the window's edges. Where
 * power is a trailing average (nvidia-smi's power.draw: 1 s), the readings of that span before the window
 * stay too: the summarizer needs them to remove the lag, and a file read of the same rows has them.
 */
export function cutToWindow(capture: TelemetryCapture, startS: number, endS: number): TelemetryCapture {
  const from = startS - (capture.powerAveragingS ?? 0);
  const byDevice = new Map<string, TelemetrySample[]>();
  for (const s of capture.samples) {
    let l = byDevice.get(s.device);
    if (!l) byDevice.set(s.device, (l = []));
    l.push(s);
  }
  const kept: TelemetrySample[] = [];
  for (const list of byDevice.values()) {
    list.sort((a, b) => a.t - b.t);
    let before: TelemetrySample | undefined;
    let after: TelemetrySample | undefined;
    for (const s of list) {
      if (s.t < from) before = s;
      else if (s.t > endS) {
        after = s;
        break;
      } else kept.push(s);
    }
    if (before) kept.push(before);
    if (after) kept.push(after);
  }
  kept.sort((a, b) => a.t - b.t || (a.device < b.device ? -1 : a.device > b.device ? 1 : 0));
  return { ...capture, samples: kept };
}
