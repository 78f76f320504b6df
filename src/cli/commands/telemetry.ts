// `inferscope telemetry watch SOURCE`: a thin wrapper over src/telemetry/watch.ts (flags → library → print).
import type { Command } from "@commander-js/extra-typings";
import { UsageError } from "../../errors.ts";
import { parseTelemetrySpec } from "../../telemetry/spec.ts";
import {
  formatTelemetryLine,
  formatTelemetryPanel,
  type TelemetryFrame,
  telemetryWatch,
} from "../../telemetry/watch.ts";
import { durationFlag, numberArg, safeLine, terminalSafe, withCommon } from "../common.ts";

/** Ctrl-C stops the view; the command then returns normally (exit 0), as `metrics watch` does. */
function stopSignal(): { signal: AbortSignal; dispose: () => void } {
  const ac = new AbortController();
  const onSig = () => ac.abort();
  process.once("SIGINT", onSig);
  process.once("SIGTERM", onSig);
  return {
    signal: ac.signal,
    dispose: () => {
      process.off("SIGINT", onSig);
      process.off("SIGTERM", onSig);
    },
  };
}

export function register(program: Command): void {
  const telemetry = program
    .command("telemetry")
    .description("read the hardware's own counters: a live view of a telemetry source");

  withCommon(
    telemetry
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
    const tty = Boolean(process.stdout.isTTY) && !o.json;
    // log-update only for the live panel, as in metrics watch.
    const logUpdate = tty ? (await import("log-update")).default : null;
    const onFrame = (frame: TelemetryFrame) => {
      const f = terminalSafe(frame);
      if (o.json) process.stdout.write(`${JSON.stringify(frame)}\n`);
      else if (logUpdate) logUpdate(formatTelemetryPanel(f, source));
      else process.stdout.write(`${formatTelemetryLine(f)}\n`);
    };
    const { signal, dispose } = stopSignal();
    try {
      await telemetryWatch(spec, {
        intervalMs,
        iterations: o.iterations,
        signal,
        onFrame,
        context: { onProgress: (line) => process.stderr.write(`${safeLine(line)}\n`) },
      });
    } finally {
      dispose();
      logUpdate?.done();
    }
  });
}
