// Telemetry beside one measurement (a bench, a block of an A/B or sweep, a study phase): starts the
// source before the run, stamps the measured window's edges, and at the end cuts the samples to that
// window and derives the summary over it. A source that fails mid-run costs notes, never the run.
import { fetchRaw } from "../metrics/scrape.ts";
import { cutToWindow, type Recorder, type RecorderContext, startTelemetry } from "./recorder.ts";
import { screenCapture } from "./sanity.ts";
import { parseTelemetrySpec, specIntervalMs } from "./spec.ts";
import { medianSpacing, summarizeTelemetry, valueChanges } from "./summary.ts";
import type {
  TelemetryCapture,
  TelemetrySample,
  TelemetrySourceKind,
  TelemetrySpec,
  TelemetrySummary,
} from "./types.ts";

/** What a run keeps of its telemetry: in `--json`, in the run store and in the report. */
export interface RunTelemetry {
  /** The source as resolved: kind, its detail (command or URL) and why it was chosen. */
  source: { kind: TelemetrySourceKind | "none"; detail: string; why: string };
  /** Null when nothing was recorded (none, or a source that gave no sample in the window). */
  summary: TelemetrySummary | null;
  /** The samples cut to the measured window (one kept on each side for integration). */
  samples: TelemetrySample[];
  notes: string[];
}

export interface TelemetrySessionContext {
  /** The target's base URL: `auto` asks it whether it is the embedded sim. */
  baseUrl?: string;
  /** Known to be the embedded sim (study, tune): skips the probe. */
  embeddedSim?: boolean;
  signal?: AbortSignal;
  onProgress?: (line: string) => void;
  /** Overrides for tests and tools (binaries, PATH). */
  recorder?: Pick<RecorderContext, "sources" | "path">;
}

export interface TelemetrySession {
  readonly source: RunTelemetry["source"];
  /** Stamps the start of the measured window (after warm-up). */
  start(): void;
  /** Stamps its end. */
  end(): void;
  /** Stops the source and derives the summary over the stamped window. Never throws for a source's failure. */
  finish(o: { tokens?: number; peakBandwidthGBs?: number; timeScale?: number }): Promise<RunTelemetry | null>;
  /** Stops the source without a summary (the run failed before its window). */
  abandon(): Promise<void>;
}

const LOOPBACK = /^(127\.|localhost$|\[::1\]$|::1$)/;

/** True when the target's /metrics says it is inferscope's embedded sim (its time-scale gauge). */
export async function isEmbeddedSim(baseUrl: string, timeoutMs = 2000): Promise<boolean> {
  try {
    const raw = await fetchRaw(baseUrl, { timeoutMs, maxBytes: 8 * 1024 * 1024 });
    return raw.body.includes("inferscope_sim_time_scale");
  } catch {
    return false;
  }
}

/**
 * Opens a session for `--telemetry SPEC`. An explicit source that cannot start throws here (exit 3),
 * before anything is measured; `auto` falls back and says which source it took and why.
 */
export async function openTelemetry(
  spec: string | TelemetrySpec | undefined,
  ctx: TelemetrySessionContext = {},
): Promise<TelemetrySession | null> {
  const parsed: TelemetrySpec =
    spec === undefined ? { kind: "none" } : typeof spec === "string" ? parseTelemetrySpec(spec) : spec;
  if (parsed.kind === "none") return null;
  let host = "";
  let port: number | undefined;
  try {
    const u = ctx.baseUrl ? new URL(ctx.baseUrl) : undefined;
    host = u?.hostname ?? "";
    if (u) port = Number(u.port || (u.protocol === "https:" ? 443 : 80));
  } catch {
    host = "";
  }
  const sim = parsed.kind === "auto" && ctx.baseUrl ? (ctx.embeddedSim ?? (await isEmbeddedSim(ctx.baseUrl))) : false;
  // The sim's exporter collects every 100 ms by default: read it twice as often (a reader as slow as the
  // exporter aliases, docs/telemetry.md), unless an interval was given.
  const use: TelemetrySpec =
    sim && parsed.kind === "auto" && parsed.intervalMs === undefined ? { kind: "auto", intervalMs: 50 } : parsed;
  const waiter = new SampleWaiter();
  const rec: Recorder = await startTelemetry(use, {
    signal: ctx.signal,
    onSample: (x) => waiter.seen(x.t),
    simUrl: sim ? ctx.baseUrl : undefined,
    localTarget: host !== "" && LOOPBACK.test(host),
    targetPort: port,
    onProgress: ctx.onProgress,
    ...ctx.recorder,
  });
  const source: RunTelemetry["source"] = { kind: rec.resolved.kind, detail: rec.resolved.kind, why: rec.resolved.why };
  let t0: number | null = null;
  let t1: number | null = null;
  return {
    source,
    start() {
      t0 = Date.now() / 1000;
      rec.mark("measure-start");
    },
    end() {
      t1 = Date.now() / 1000;
      rec.mark("measure-end");
    },
    async abandon() {
      await rec.stop();
    },
    async finish(o) {
      if (rec.resolved.kind === "none") {
        await rec.stop();
        return { source, summary: null, samples: [], notes: [rec.resolved.why] };
      }
      // A reading a full interval past the window's end lets power be integrated (and an exporter's counters,
      // which move only at its collections, be read) up to it; bounded by three intervals.
      if (t1 !== null) {
        const iv = specIntervalMs(rec.resolved.spec) ?? 1000;
        // An exporter's values change once per collection: wait for one collection past the end as well.
        const wait = Math.max(iv, collectionSpacingMs(rec.samples) ?? 0) + iv;
        await waiter.until(t1 + wait / 1000, Math.min(10_000, 2 * wait + 500), ctx.signal);
      }
      const recording = await rec.stop();
      const capture: TelemetryCapture | null = recording.capture;
      if (capture) source.detail = capture.source.detail;
      const notes = [...(capture?.notes ?? [])];
      if (!capture || t0 === null || t1 === null || t1 <= t0)
        return { source, summary: null, samples: [], notes: [...notes, "no measured window was recorded"] };
      const x = o.timeScale ?? 1;
      // The sim's rates are per wall second of its faster clock: the bounds on a possible reading scale with it.
      const rateScale = rec.resolved.kind === "sim" ? x : 1;
      const cut = cutToWindow(screenCapture(capture, { rateScale }), t0, t1);
      // A source that fell silent before the window opened has nothing to say of it: no table of dashes.
      const last = cut.samples.at(-1);
      if (!last || last.t < t0)
        return {
          source,
          summary: null,
          samples: [],
          notes: [
            ...notes,
            last
              ? `${source.detail}: no reading inside the measured window (the last came ${(t0 - last.t).toFixed(1)} s before it opened): telemetry unavailable for this run`
              : `${source.detail}: no sample inside the measured window`,
          ],
        };
      const summary = summarizeTelemetry(cut, {
        window: { startS: t0, endS: t1, how: "measured-run" },
        tokens: o.tokens,
        peakBandwidthGBs: o.peakBandwidthGBs,
        rateScale,
      });
      if (rec.resolved.kind === "sim" && x !== 1) {
        // Energy and bytes are modelled totals either way; only the rates per wall second carry the scale.
        if (summary.avgPowerW !== null) summary.avgPowerW /= x;
        if (summary.peakPowerW !== null) summary.peakPowerW /= x;
        notes.push(
          `the sim ran ${x}× faster than real time: power is shown per simulated second (the exporter's watts ÷ ${x}); energy, bytes and J/token are the modelled totals`,
        );
      }
      return { source, summary, samples: cut.samples, notes };
    },
  };
}

/** An exporter's collection interval (ms): the median spacing of changes in the first device's readings. */
function collectionSpacingMs(samples: readonly TelemetrySample[]): number | null {
  const dev = samples[0]?.device;
  const mine = samples.filter((s) => s.device === dev);
  const d = medianSpacing(valueChanges(mine, (s) => `${s.energyJ}|${s.powerW}|${s.pcieTxBps}|${s.nvlinkTxBps}`));
  return d === null ? null : d * 1000;
}

/** Waits for readings as they arrive (the source's own onSample), for the one past the window's end. */
class SampleWaiter {
  private lastT = Number.NEGATIVE_INFINITY;
  private waiters: Array<{ t: number; resolve: () => void }> = [];
  seen(t: number): void {
    if (t > this.lastT) this.lastT = t;
    this.waiters = this.waiters.filter((w) => {
      if (this.lastT <= w.t) return true;
      w.resolve();
      return false;
    });
  }
  /** Resolves once a reading past `t` arrived, or after `ms` at most. */
  until(t: number, ms: number, signal?: AbortSignal): Promise<void> {
    if (this.lastT > t || signal?.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal?.addEventListener("abort", done, { once: true });
      this.waiters.push({ t, resolve: done });
    });
  }
}
