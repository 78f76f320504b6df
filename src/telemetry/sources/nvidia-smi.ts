// Local nvidia-smi: `nvidia-smi --query-gpu=<fields> --format=csv,nounits -lms N` as a child in its own
// process group, one line per GPU per interval. The field list is probed first with a one-shot query:
// older drivers name clocks_throttle_reasons.* and lack power.draw.instant, and one unknown field makes
// nvidia-smi refuse the whole query.
import { spawn } from "node:child_process";
import { ParseError, TelemetryError } from "../../errors.ts";
import { createSmiDmonLineParser, createSmiQueryLineParser, smiQueryCapture } from "../smi.ts";
import type { TelemetrySample } from "../types.ts";
import {
  CaptureBuilder,
  captureHandle,
  clock,
  findOnPath,
  killGroup,
  type OnceResult,
  runOnce,
  type SourceStartOptions,
  type TelemetryHandle,
  type TelemetrySource,
  trackGroup,
  untrackGroup,
} from "./common.ts";

/** What we ask for, in this order. timestamp and index are required; the rest is dropped if the driver lacks it. */
export const SMI_FIELDS = [
  "timestamp",
  "index",
  "uuid",
  "name",
  "power.draw",
  "power.draw.instant",
  "power.limit",
  "utilization.gpu",
  "utilization.memory",
  "clocks.sm",
  "clocks.max.sm",
  "clocks.mem",
  "temperature.gpu",
  "memory.used",
  "memory.total",
  "clocks_event_reasons.active",
  "pcie.link.gen.current",
] as const;

const REQUIRED = new Set(["timestamp", "index"]);

export interface NvidiaSmiOptions {
  /** The binary; default: `nvidia-smi` found on PATH. */
  binary?: string;
  /** PATH searched when no binary is given (default process.env.PATH). */
  path?: string;
  /** Fields to ask for (default SMI_FIELDS). */
  fields?: readonly string[];
  /** Also run `nvidia-smi dmon -s t` for PCIe MB/s (default true). */
  dmon?: boolean;
  /** Limit for the one-shot probe (ms); a first nvidia-smi call can take seconds while the driver loads. */
  probeTimeoutMs?: number;
  /** After SIGTERM, SIGKILL the group past this (ms). */
  graceMs?: number;
}

/** A probe quieter than this gets a progress line saying what it waits for. */
export const PROBE_QUIET_MS = 1000;

/** nvidia-smi's own words for a field it does not know (exit 2): `Field "x" is not a valid field to query.` */
const INVALID_FIELD = /Field "([^"]+)" is not a valid field to query/;

/**
 * The field list this nvidia-smi accepts: each refused field is renamed to its older name
 * (clocks_event_reasons.* → clocks_throttle_reasons.*) or dropped, and the query retried.
 */
export async function probeSmiFields(
  bin: string,
  wanted: readonly string[],
  limitMs: number,
  signal?: AbortSignal,
  onWait?: (line: string) => void,
): Promise<{ fields: string[]; dropped: { field: string; why: string }[] }> {
  let fields = [...wanted];
  const dropped: { field: string; why: string }[] = [];
  for (let attempt = 0; attempt <= wanted.length; attempt++) {
    let r: OnceResult;
    // A first call can take seconds while the driver loads: after one, say what is being waited for.
    const waiting = onWait
      ? setTimeout(
          () =>
            onWait(`waiting for ${bin} to answer a first query (up to ${limitMs / 1000} s: the driver may be loading)`),
          PROBE_QUIET_MS,
        )
      : undefined;
    try {
      r = await runOnce(bin, [`--query-gpu=${fields.join(",")}`, "--format=csv,nounits"], limitMs, signal);
    } catch (err) {
      throw new TelemetryError(`--telemetry nvidia-smi: could not run ${bin}: ${(err as Error).message}`);
    } finally {
      clearTimeout(waiting);
    }
    // Interrupted while probing: the caller's abort reason (an InterruptedError from the CLI) says so.
    if (signal?.aborted) throw signal.reason ?? new TelemetryError("--telemetry nvidia-smi: interrupted while probing");
    if (r.timedOut)
      throw new TelemetryError(`--telemetry nvidia-smi: ${bin} did not answer a one-shot query within ${limitMs} ms`, {
        hint: "check the driver (nvidia-smi on its own), or record with --telemetry none",
      });
    if (r.code === 0) return { fields, dropped };
    const bad = INVALID_FIELD.exec(r.out)?.[1];
    if (!bad || !fields.includes(bad)) {
      const said = r.out.trim().split("\n").slice(0, 3).join(" / ") || "no output";
      throw new TelemetryError(
        `--telemetry nvidia-smi: ${bin} failed (${r.code !== null ? `exit ${r.code}` : r.signal}): ${said}`,
        { hint: "nvidia-smi must work on its own before inferscope can record it; or use --telemetry none" },
      );
    }
    if (REQUIRED.has(bad))
      throw new TelemetryError(`--telemetry nvidia-smi: this nvidia-smi does not know the "${bad}" field`);
    const older = bad.startsWith("clocks_event_reasons.")
      ? bad.replace("clocks_event_reasons.", "clocks_throttle_reasons.")
      : null;
    if (older && !fields.includes(older) && !dropped.some((d) => d.field === older)) {
      fields = fields.map((f) => (f === bad ? older : f));
      dropped.push({ field: bad, why: `not known to this nvidia-smi; asked for "${older}" (older drivers' name)` });
    } else {
      fields = fields.filter((f) => f !== bad);
      dropped.push({ field: bad, why: "not a valid --query-gpu field for this nvidia-smi (older driver)" });
    }
  }
  throw new TelemetryError("--telemetry nvidia-smi: no field list this nvidia-smi accepts");
}

/** The sample field each query field feeds, for capture.unavailable. */
const FEEDS: Record<string, string> = {
  "power.draw": "powerW",
  "power.draw.instant": "powerInstantW",
  "power.limit": "powerLimitW",
  "utilization.gpu": "gpuBusy",
  "utilization.memory": "memBusy",
  "clocks.sm": "smClockMHz",
  "clocks.max.sm": "smClockMaxMHz",
  "clocks.mem": "memClockMHz",
  "temperature.gpu": "temperatureC",
  "memory.used": "memoryUsedMiB",
  "memory.total": "memoryTotalMiB",
  "clocks_event_reasons.active": "clockEventReasons",
  "clocks_throttle_reasons.active": "clockEventReasons",
};

export function nvidiaSmiSource(o: NvidiaSmiOptions = {}): TelemetrySource {
  return {
    kind: "nvidia-smi",
    start: (opts) => startNvidiaSmi(o, opts),
  };
}

async function startNvidiaSmi(o: NvidiaSmiOptions, opts: SourceStartOptions): Promise<TelemetryHandle> {
  const bin = o.binary ?? findOnPath("nvidia-smi", o.path ?? process.env.PATH ?? "");
  if (!bin)
    throw new TelemetryError("--telemetry nvidia-smi: nvidia-smi is not on PATH; nothing was measured", {
      hint: "run where the NVIDIA driver utilities are installed, read an exporter with --telemetry dcgm:URL, or use --telemetry none",
    });
  const now = opts.now ?? Date.now;
  const intervalMs = Math.max(1, Math.round(opts.intervalMs));
  const { fields, dropped } = await probeSmiFields(
    bin,
    o.fields ?? SMI_FIELDS,
    o.probeTimeoutMs ?? 15_000,
    opts.signal,
    opts.onProgress,
  );
  const args = [`--query-gpu=${fields.join(",")}`, "--format=csv,nounits", "-lms", String(intervalMs)];
  const cap = new CaptureBuilder("nvidia-smi", `${bin} ${args.join(" ")}`, intervalMs, opts);
  for (const d of dropped) {
    const feeds = FEEDS[d.field];
    const renamed = d.why.includes("asked for");
    if (feeds && !renamed) cap.missing(feeds, `nvidia-smi ${d.field}: ${d.why}`);
    else cap.note(`nvidia-smi ${d.field}: ${d.why}`);
  }
  cap.missing("dramActive", "nvidia-smi reports utilization.memory (busy time), not DRAM bandwidth; use dcgm:URL");

  // The offset is taken once, when the loop starts: nvidia-smi stamps local wall time without a zone.
  const utcOffsetMinutes = -new Date(now()).getTimezoneOffset();
  const parse = createSmiQueryLineParser({ utcOffsetMinutes, file: "nvidia-smi --query-gpu" });
  const querySamples: TelemetrySample[] = [];
  const queryLines = lineReader("nvidia-smi", parse, (s) => {
    querySamples.push(s);
    cap.add(s);
  });
  const query = spawnLines(bin, args, {
    onLine: queryLines.onLine,
    onCut: queryLines.onCut,
    onExit(how, said) {
      cap.note(
        `nvidia-smi exited (${how}) at ${clock(now())} after ${querySamples.length} samples${said ? `: ${said}` : ""}; ` +
          "the samples so far are kept, nothing after",
      );
    },
  });
  if (!query) throw new TelemetryError(`--telemetry nvidia-smi: could not start ${bin}`);

  // PCIe throughput: dmon's t group, beside the query loop (its interval is whole seconds).
  let dmon: ReturnType<typeof spawnLines> = null;
  let dmonLines: ReturnType<typeof lineReader> | null = null;
  if (o.dmon !== false) {
    const dmonArgs = ["dmon", "-s", "t", "-d", String(Math.max(1, Math.round(intervalMs / 1000))), "-o", "T"];
    const parseDmon = createSmiDmonLineParser({ utcOffsetMinutes, now, file: "nvidia-smi dmon" });
    let dmonSamples = 0;
    const reader = lineReader("nvidia-smi dmon", parseDmon, (s) => {
      dmonSamples++;
      cap.add(s);
    });
    dmonLines = reader;
    dmon = spawnLines(bin, dmonArgs, {
      onLine: reader.onLine,
      onCut: reader.onCut,
      onExit(how, said) {
        if (dmonSamples === 0) cap.missing("pcieTxBps", `nvidia-smi dmon -s t gave no reading (exited: ${how})`);
        cap.note(
          `nvidia-smi dmon exited (${how}) at ${clock(now())} after ${dmonSamples} readings${said ? `: ${said}` : ""}; ` +
            "PCIe throughput is missing from then on",
        );
      },
    });
    if (dmon) cap.detail += `; ${bin} ${dmonArgs.join(" ")}`;
  }
  if (!dmon) cap.missing("pcieTxBps", "not read: nvidia-smi dmon -s t was not run");

  const graceMs = o.graceMs ?? 2000;
  const halt = () => Promise.all([query.halt(graceMs), dmon?.halt(graceMs)]);
  const onAbort = () => {
    void halt();
  };
  opts.signal?.addEventListener("abort", onAbort, { once: true });
  if (opts.signal?.aborted) onAbort();

  return captureHandle("nvidia-smi", cap, async () => {
    opts.signal?.removeEventListener("abort", onAbort);
    await halt();
    for (const n of [...queryLines.notes(), ...(dmonLines?.notes() ?? [])]) cap.note(n);
    // The file parser's capture of the same lines: how power.draw is averaged, its stated accuracy, what the
    // query cannot give. Its samples are the query's; dmon's PCIe readings join them in the builder.
    const q = smiQueryCapture(parse, querySamples, cap.detail);
    for (const d of q.devices) cap.device(d);
    for (const u of q.unavailable) cap.missing(u.field, u.why);
    return cap.build({ powerAveragingS: q.powerAveragingS, powerAccuracyW: q.powerAccuracyW });
  });
}

/**
 * Feeds a child's lines to a file parser: a line it refuses (a ParseError) is skipped and counted, never fatal.
 * A last line without its newline was cut when the child stopped (a block-buffered pipe ends mid-line): it is
 * dropped, as the file parser drops a saved loop's. notes() says both, once, at stop.
 */
function lineReader(
  what: string,
  parse: (line: string) => TelemetrySample[],
  take: (s: TelemetrySample) => void,
): { onLine: (line: string) => void; onCut: (line: string) => void; notes: () => string[] } {
  let bad = 0;
  let first = "";
  let cut: string | null = null;
  return {
    onCut(line) {
      if (line.trim()) cut = line;
    },
    notes() {
      const out: string[] = [];
      if (bad) out.push(`${what}: ${bad} malformed line${bad === 1 ? "" : "s"} skipped (first: ${first})`);
      if (cut !== null)
        out.push(`${what}: its last line was cut short when it stopped (no newline): skipped ("${cut.slice(0, 60)}")`);
      return out;
    },
    onLine(line) {
      let got: TelemetrySample[];
      try {
        got = parse(line);
      } catch (err) {
        if (!(err instanceof ParseError)) throw err;
        bad++;
        if (!first) first = `line ${err.position?.line ?? "?"}: ${err.rawMessage}: "${line.slice(0, 120)}"`;
        return;
      }
      for (const s of got) take(s);
    },
  };
}

/**
 * A long-running child in its own process group, read line by line. Its group is killed on our exit
 * by any path (trackGroup); if we are SIGKILLed, its next write to the closed pipe ends it (EPIPE).
 * `onCut` gets a last line left without its newline; `onExit` is called when it exits before halt(). Null when it
 * could not be spawned.
 */
function spawnLines(
  bin: string,
  args: string[],
  h: {
    onLine: (line: string) => void;
    onCut: (line: string) => void;
    onExit: (how: string, stderrTail: string) => void;
  },
): { pgid: number; halt: (graceMs: number) => Promise<void> } | null {
  const child = spawn(bin, args, { stdio: ["ignore", "pipe", "pipe"], detached: true });
  const pgid = child.pid;
  if (pgid === undefined) {
    child.once("error", () => {});
    return null;
  }
  trackGroup(pgid);
  let partial = "";
  let stderrTail = "";
  child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
    const parts = (partial + chunk).split("\n");
    partial = parts.pop()!;
    for (const p of parts) h.onLine(p.replace(/\r$/, ""));
  });
  child.stderr!.setEncoding("utf8").on("data", (d: string) => {
    stderrTail = (stderrTail + d).slice(-2000);
  });
  let stopping = false;
  const exited = new Promise<void>((resolve) => {
    child.once("error", (err) => {
      if (!stopping) h.onExit(err.message, "");
      resolve();
    });
    child.once("close", (code, signal) => {
      untrackGroup(pgid);
      if (partial) h.onCut(partial.replace(/\r$/, ""));
      partial = "";
      if (!stopping)
        h.onExit(code !== null ? `code ${code}` : String(signal), stderrTail.trim().split("\n").slice(-2).join(" / "));
      resolve();
    });
  });
  return {
    pgid,
    async halt(graceMs: number) {
      stopping = true;
      killGroup(pgid, "SIGTERM");
      const t = setTimeout(() => killGroup(pgid, "SIGKILL"), graceMs);
      await exited;
      clearTimeout(t);
      // Anything it left in its group (none expected) goes with it.
      killGroup(pgid, "SIGKILL");
    },
  };
}
