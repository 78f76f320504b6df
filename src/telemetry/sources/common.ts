// What every live telemetry source shares: the handle it returns, the capture it builds, the
// interval loop, PATH lookups and child process groups that never outlive us.
import { spawn } from "node:child_process";
import { accessSync, constants, statSync } from "node:fs";
import { delimiter, join } from "node:path";
import { abortableSleep } from "../../sleep.ts";
import type {
  TelemetryCapture,
  TelemetryDevice,
  TelemetrySample,
  TelemetrySourceKind,
  TelemetrySpec,
} from "../types.ts";

export interface SourceStartOptions {
  /** Sampling interval (ms). */
  intervalMs: number;
  /** Aborting stops sampling (and kills a child); stop() still returns what was recorded. */
  signal?: AbortSignal;
  /** Each sample as it is read (live views). */
  onSample?: (s: TelemetrySample) => void;
  /** Each problem as it is met (progress lines); the same text lands in capture.notes. */
  onNote?: (note: string) => void;
  /** Transient state a person watching wants at once but the capture keeps only in its final note (a gap opening). */
  onProgress?: (line: string) => void;
  /** Wall clock (ms); injectable for tests of the pure parts only. */
  now?: () => number;
}

/** A running source. */
export interface TelemetryHandle {
  readonly kind: TelemetrySourceKind;
  /** What is read: the command line or the URL. */
  readonly detail: string;
  /** Samples so far (a live copy; do not mutate). */
  readonly samples: readonly TelemetrySample[];
  /** Problems met so far, each said once (what capture.notes will hold). */
  readonly errors: readonly string[];
  /** Stops sampling and returns everything recorded. Idempotent. */
  stop(): Promise<TelemetryCapture>;
}

/**
 * A telemetry source. start() throws a TelemetryError (exit 3) when the source cannot give a first
 * reading (a binary missing, an exporter down), before any measurement starts; later failures become
 * notes and the samples so far are kept.
 */
export interface TelemetrySource {
  readonly kind: TelemetrySourceKind;
  start(opts: SourceStartOptions): Promise<TelemetryHandle>;
}

/** Collects one recording's samples, devices, notes and unavailable fields. */
export class CaptureBuilder {
  readonly samples: TelemetrySample[] = [];
  readonly notes: string[] = [];
  readonly unavailable: { field: string; why: string }[] = [];
  private readonly devices = new Map<string, TelemetryDevice>();
  constructor(
    readonly kind: TelemetrySourceKind,
    public detail: string,
    readonly intervalMs: number,
    private readonly opts: Pick<SourceStartOptions, "onSample" | "onNote" | "onProgress"> = {},
  ) {}

  add(s: TelemetrySample): void {
    this.samples.push(s);
    this.opts.onSample?.(s);
  }

  device(d: TelemetryDevice): void {
    const had = this.devices.get(d.key);
    this.devices.set(d.key, { ...had, ...stripUndefined(d) });
  }

  /** A problem, said once. */
  note(text: string): void {
    if (this.notes.includes(text)) return;
    this.notes.push(text);
    this.opts.onNote?.(text);
  }

  /** A line for progress only (not kept in the capture). */
  progress(line: string): void {
    this.opts.onProgress?.(line);
  }

  missing(field: string, why: string): void {
    if (!this.unavailable.some((u) => u.field === field)) this.unavailable.push({ field, why });
  }

  /** The capture; `extra` carries what the source's parser knows of its readings (power averaging, accuracy). */
  build(
    extra: Pick<TelemetryCapture, "powerAveragingS" | "powerAccuracyW" | "timeResolutionS"> = {},
  ): TelemetryCapture {
    const samples = [...this.samples].sort(
      (a, b) => a.t - b.t || (a.device < b.device ? -1 : a.device > b.device ? 1 : 0),
    );
    return {
      source: { kind: this.kind, detail: this.detail },
      devices: [...this.devices.values()].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0)),
      samples,
      intervalMs: this.intervalMs,
      ...stripUndefined(extra),
      notes: [...this.notes],
      unavailable: [...this.unavailable],
    };
  }
}

function stripUndefined<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}

/** Absolute path of an executable on PATH, or null. */
export function findOnPath(name: string, pathVar = process.env.PATH ?? ""): string | null {
  for (const dir of pathVar.split(delimiter)) {
    if (!dir) continue;
    const p = join(dir, name);
    try {
      if (!statSync(p).isFile()) continue;
      accessSync(p, constants.X_OK);
      return p;
    } catch {}
  }
  return null;
}

/** Sleeps until `ms`, or until the signal aborts. */
export function sleepUntil(atMs: number, now: () => number, signal?: AbortSignal): Promise<void> {
  return abortableSleep(Math.max(0, atMs - now()), signal);
}

/**
 * Calls `tick` on a fixed grid (start + k × interval) until the signal aborts. A tick that overruns
 * skips the grid points it covered: `tick` gets how many were skipped, so a source can count them as
 * missing samples rather than bunching late readings together.
 */
export async function pollGrid(
  intervalMs: number,
  signal: AbortSignal,
  now: () => number,
  tick: (skipped: number) => Promise<void>,
): Promise<void> {
  const t0 = now();
  let k = 0;
  let skipped = 0;
  while (!signal.aborted) {
    await tick(skipped);
    if (signal.aborted) break;
    const next = Math.floor((now() - t0) / intervalMs) + 1;
    skipped = Math.max(0, next - k - 1);
    k = next;
    await sleepUntil(t0 + k * intervalMs, now, signal);
  }
}

/** "12:00:03.250" in local time, for notes a person reads beside their own clock. */
export function clock(ms: number): string {
  const d = new Date(ms);
  const p = (n: number, w = 2) => String(n).padStart(w, "0");
  return `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}.${p(d.getMilliseconds(), 3)}`;
}

/**
 * Gap bookkeeping for polled sources: the first failure opens a gap, the next success closes it with
 * one note ("exporter unreachable 12:00:03–12:00:05: 2 samples missing (connection refused)").
 */
export class GapTracker {
  private openAt: number | null = null;
  private missed = 0;
  private reasons: string[] = [];
  constructor(
    private readonly what: string,
    private readonly capture: CaptureBuilder,
  ) {}

  get open(): boolean {
    return this.openAt !== null;
  }

  fail(atMs: number, reason: string, missed = 1): void {
    if (this.openAt === null) {
      this.openAt = atMs;
      this.capture.progress(`${this.what} since ${clock(atMs)} (${reason}); still trying every interval`);
    }
    this.missed += missed;
    if (!this.reasons.includes(reason) && this.reasons.length < 3) this.reasons.push(reason);
  }

  /** Skipped grid points while a gap is open count as missing too. */
  skipped(n: number): void {
    if (this.openAt !== null) this.missed += n;
  }

  ok(atMs: number): void {
    if (this.openAt === null) return;
    this.close(`${clock(this.openAt)}–${clock(atMs)}`);
  }

  /** At stop: a gap still open runs to the end of the recording. */
  end(): void {
    if (this.openAt === null) return;
    this.close(`from ${clock(this.openAt)} to the end of the recording`);
  }

  private close(span: string): void {
    const n = this.missed;
    this.capture.note(
      `${this.what} ${span}: ${n} sample${n === 1 ? "" : "s"} missing (${this.reasons.join("; ")}); recording continued`,
    );
    this.openAt = null;
    this.missed = 0;
    this.reasons = [];
  }
}

export interface PollingOptions {
  kind: TelemetrySourceKind;
  cap: CaptureBuilder;
  opts: SourceStartOptions;
  /** Who fails, for gap notes: "exporter http://…/metrics unreachable". */
  gapWhat: string;
  /** One read, taken into the capture; throws when the source does not answer. The signal aborts at stop. */
  poll: (signal: AbortSignal) => Promise<void>;
  /** A failure in few words, for the gap note. */
  reason: (err: unknown) => string;
  /** At stop, right after the abort: cut a read in flight short (destroy a connection pool). */
  halt?: () => Promise<void>;
  /** At stop, after the loop: one more read (Prometheus stores a scrape after it ends). */
  lastRead?: boolean;
  /** At stop, before the capture is built: release resources, say what is missing. */
  close?: () => Promise<void>;
}

/**
 * The loop of a polled source (an exporter, Prometheus, amd-smi) after its first reading, which start() has
 * taken: one read per grid point from one interval on, a gap note while reads fail, and the handle.
 */
export function pollingHandle(p: PollingOptions): TelemetryHandle {
  const { cap, opts } = p;
  const now = opts.now ?? Date.now;
  const gap = new GapTracker(p.gapWhat, cap);
  const ac = new AbortController();
  const onAbort = () => ac.abort();
  opts.signal?.addEventListener("abort", onAbort, { once: true });
  if (opts.signal?.aborted) ac.abort();
  // A read that ends after the abort says nothing about the source's health, except the last one at stop.
  const tick = async (final: boolean) => {
    const at = now();
    try {
      await p.poll(ac.signal);
      if (final || !ac.signal.aborted) gap.ok(at);
    } catch (err) {
      if (final || !ac.signal.aborted) gap.fail(at, p.reason(err));
    }
  };
  const t0 = now();
  const loop = (async () => {
    await sleepUntil(t0 + opts.intervalMs, now, ac.signal);
    await pollGrid(opts.intervalMs, ac.signal, now, async (skipped) => {
      gap.skipped(skipped);
      await tick(false);
    });
  })();
  return captureHandle(p.kind, cap, async () => {
    opts.signal?.removeEventListener("abort", onAbort);
    ac.abort();
    await p.halt?.();
    await loop;
    if (p.lastRead) await tick(true);
    gap.end();
    await p.close?.();
    return cap.build();
  });
}

/** The handle over a capture being built: stop() runs `finish` once; later calls get the same capture. */
export function captureHandle(
  kind: TelemetrySourceKind,
  cap: CaptureBuilder,
  finish: () => Promise<TelemetryCapture>,
): TelemetryHandle {
  let stopped: Promise<TelemetryCapture> | null = null;
  return {
    kind,
    get detail() {
      return cap.detail;
    },
    samples: cap.samples,
    errors: cap.notes,
    stop() {
      stopped ??= finish();
      return stopped;
    },
  };
}

// ---------------------------------------------------------------- child process groups

// Every child group we started and have not seen exit; SIGKILLed when this process exits by any path
// (an error, a second Ctrl-C's process.exit), as src/experiment/variants.ts does for servers.
const liveGroups = new Set<number>();
let exitHook = false;

export function trackGroup(pgid: number): void {
  liveGroups.add(pgid);
  if (exitHook) return;
  exitHook = true;
  process.on("exit", () => {
    for (const g of liveGroups) killGroup(g, "SIGKILL");
  });
}

export function untrackGroup(pgid: number): void {
  liveGroups.delete(pgid);
}

/** Telemetry child groups still running (for tests and the interrupt path). */
export function liveTelemetryGroups(): number[] {
  return [...liveGroups];
}

export function killGroup(pgid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(-pgid, sig);
  } catch {
    // already gone
  }
}

/** The spec's interval, or the source default. */
export function intervalOf(spec: TelemetrySpec, fallback: number): number {
  return "intervalMs" in spec && spec.intervalMs !== undefined ? spec.intervalMs : fallback;
}

export interface OnceResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** stdout and stderr interleaved as they came. */
  out: string;
  stdout: string;
  timedOut: boolean;
}

/** Runs a command once in its own tracked process group, killing the group past the limit or on abort. */
export function runOnce(bin: string, args: string[], limitMs: number, signal?: AbortSignal): Promise<OnceResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(bin, args, { stdio: ["ignore", "pipe", "pipe"], detached: true });
    const pgid = child.pid;
    if (pgid !== undefined) trackGroup(pgid);
    let out = "";
    let stdout = "";
    let timedOut = false;
    child.stdout!.setEncoding("utf8").on("data", (d: string) => {
      out += d;
      stdout += d;
    });
    child.stderr!.setEncoding("utf8").on("data", (d: string) => (out += d));
    const timer = setTimeout(() => {
      timedOut = true;
      if (pgid !== undefined) killGroup(pgid, "SIGKILL");
    }, limitMs);
    const onAbort = () => {
      if (pgid !== undefined) killGroup(pgid, "SIGKILL");
    };
    signal?.addEventListener("abort", onAbort, { once: true });
    child.once("error", (err) => {
      signal?.removeEventListener("abort", onAbort);
      clearTimeout(timer);
      if (pgid !== undefined) untrackGroup(pgid);
      reject(err);
    });
    child.once("close", (code, sig) => {
      signal?.removeEventListener("abort", onAbort);
      clearTimeout(timer);
      if (pgid !== undefined) {
        killGroup(pgid, "SIGKILL"); // anything it left in its group
        untrackGroup(pgid);
      }
      resolve({ code, signal: sig, out, stdout, timedOut });
    });
  });
}
