// `inferscope telemetry read`: a thin wrapper over telemetryRead (files → window → summary → print).
// `telemetry watch` (the live view) registers on the same parent command.
import type { Command } from "@commander-js/extra-typings";
import { Option } from "@commander-js/extra-typings";
import { UsageError } from "../../errors.ts";
import { checkInputFiles } from "../../input-file.ts";
import { parseTelemetrySpec } from "../../telemetry/spec.ts";
import { TELEMETRY_FORMATS, type TelemetryFileFormat } from "../../telemetry/types.ts";
import {
  formatTelemetryLine,
  formatTelemetryPanel,
  type TelemetryFrame,
  telemetryWatch,
} from "../../telemetry/watch.ts";
import { type CommonOptions, durationFlag, emit, liveView, numberArg, safeLine, withCommon } from "../common.ts";

const lib = {
  read: () => import("../../telemetry/read.ts"),
  render: () => import("../../telemetry/render.ts"),
};

interface ReadFlags extends CommonOptions {
  window?: string;
  tokens?: number;
  peakBandwidth?: number;
  format?: string;
  utcOffset?: number;
  dmonInterval?: number;
}

/** `4800GB/s`, `4.8TB/s`, `4800` (GB/s) → GB/s. */
export function bandwidthFlag(v: string): number {
  const m = /^(\d+(?:\.\d+)?)\s*(GB\/s|TB\/s|GiB\/s|TiB\/s|GB|TB)?$/i.exec(v.trim());
  if (!m || !(Number(m[1]) > 0))
    throw new UsageError(`--peak-bandwidth: expected a bandwidth like 4800GB/s or 4.8TB/s, got "${v}"`);
  const unit = (m[2] ?? "GB/s").toLowerCase().replace("/s", "");
  const k: Record<string, number> = { gb: 1, tb: 1000, gib: 1.073741824, tib: 1099.511627776 };
  return Number(m[1]) * k[unit]!;
}

/** `Z`, `UTC`, `+01:00`, `-0530`, `90` (minutes) → minutes east of UTC. */
export function utcOffsetFlag(v: string): number {
  const s = v.trim();
  if (/^(z|utc)$/i.test(s)) return 0;
  // Real offsets run from −12:00 to +14:00.
  const hm = /^([+-])(\d{1,2}):?(\d{2})$/.exec(s);
  const min =
    hm && Number(hm[3]) < 60
      ? (hm[1] === "-" ? -1 : 1) * (Number(hm[2]) * 60 + Number(hm[3]))
      : /^[+-]?\d+$/.test(s)
        ? Number(s)
        : Number.NaN;
  if (min >= -12 * 60 && min <= 14 * 60) return min;
  throw new UsageError(
    `--utc-offset: expected Z, +HH:MM or minutes between −12:00 and +14:00 (every zone in use), got "${v}"`,
  );
}

export function register(program: Command): void {
  const cmd = program
    .command("telemetry")
    .description(
      "hardware telemetry: read saved nvidia-smi / dcgm-exporter / amd-smi captures, or watch a live source",
    );

  withCommon(
    cmd
      .command("read")
      .description(
        "read saved telemetry files (nvidia-smi --query-gpu CSV, dmon, -q, topo -m, dcgm-exporter expositions, amd-smi/rocm-smi JSON), find the loaded window and summarize it",
      )
      .argument("<files...>", "telemetry files; their formats are detected")
      .option(
        "--window <start,end>",
        "the window to summarize instead of the detected one: unix seconds, ISO times, or seconds from the first sample",
      )
      .option(
        "--tokens <n>",
        "tokens produced in the window (adds J/token and tokens/J)",
        numberArg("--tokens", { above: 0 }),
      )
      .option(
        "--peak-bandwidth <bw>",
        "peak DRAM bandwidth of one device, e.g. 4800GB/s (adds achieved bandwidth)",
        bandwidthFlag,
      )
      .addOption(new Option("--format <format>", "force the format of every file").choices(TELEMETRY_FORMATS))
      .option(
        "--utc-offset <offset>",
        "UTC offset of the machine that wrote nvidia-smi timestamps (Z, +01:00, minutes); default: this machine's zone",
        utcOffsetFlag,
      )
      .option(
        "--dmon-interval <s>",
        "seconds between dmon rows without a time column (dmon -d)",
        numberArg("--dmon-interval", { above: 0 }),
      ),
  ).action(async (...args: any[]) => {
    const files = args[0] as string[];
    const o = args[1] as ReadFlags;
    checkInputFiles(undefined, files, "telemetry file");
    const [{ telemetryRead }, R] = await Promise.all([lib.read(), o.json ? null : lib.render()]);
    const r = await telemetryRead(files, {
      window: o.window,
      tokens: o.tokens,
      peakBandwidthGBs: o.peakBandwidth,
      format: o.format as TelemetryFileFormat | undefined,
      utcOffsetMinutes: o.utcOffset,
      dmonIntervalS: o.dmonInterval,
    });
    emit(
      o.json
        ? {
            ...(r.summary ?? { window: null }),
            files: r.files,
            deviceReports: r.deviceReports,
            topology: r.topology ?? null,
            others: r.others,
            readNotes: r.notes,
          }
        : r,
      o,
      () => R!.formatTelemetryRead(r),
    );
  });

  withCommon(
    cmd
      .command("watch")
      .description("live view of a telemetry source: power, clocks, utilization, throttling (Ctrl-C stops)")
      .argument(
        "<source>",
        "auto, nvidia-smi, dcgm:URL, prometheus:URL, amd-smi or cpu; @INTERVAL sets the sampling interval (nvidia-smi@200ms)",
      )
      .option("--interval <duration>", "time between frames (default 1s; at least 100ms)")
      .option("--iterations <n>", "stop after this many frames", numberArg("--iterations", { integer: true, min: 1 })),
  ).action(async (...args: any[]) => {
    const [source, o] = args as [string, Record<string, any>];
    const spec = parseTelemetrySpec(source, { flag: "telemetry watch SOURCE" });
    if (spec.kind === "none") throw new UsageError('telemetry watch: "none" has nothing to watch');
    const intervalMs = durationFlag("--interval", o.interval);
    const format = { panel: (f: TelemetryFrame) => formatTelemetryPanel(f, source), line: formatTelemetryLine };
    await liveView(o, format, (signal, onFrame) =>
      telemetryWatch(spec, {
        intervalMs,
        iterations: o.iterations,
        signal,
        onFrame,
        context: { onProgress: (line) => process.stderr.write(`${safeLine(line)}\n`) },
      }),
    );
  });
}
