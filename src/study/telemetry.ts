// The study's telemetry section: the hardware's counters over the batch-1 bench's window, set beside the
// model's bytes (DRAM per step, collective bytes per token) and the measured step. Pure: no I/O.
import { fmt } from "../report/format.ts";
import type { Quantity, TelemetrySection } from "../report/types.ts";
import type { RunTelemetry } from "../telemetry/session.ts";
import type { TelemetrySample } from "../telemetry/types.ts";
import { type ModelHardware, modelTxBytesPerOutputToken } from "./phases.ts";

export interface TelemetryInputs {
  run: RunTelemetry;
  /** Output tokens/s over the window (wall seconds from its start). */
  tokenRate?: Array<{ t: number; tokensPerS: number }>;
  /** The measured decode step (ms per token at batch 1, simulated time). */
  stepMs?: number;
  model?: ModelHardware;
  /** The streaming bandwidth the model fit took from these counters (GB/s). */
  fittedBandwidthGBs?: number;
  /** Prompt and output tokens per request (the collective bytes per output token count both). */
  promptTokens?: number;
  outputTokens?: number;
  timeScale: number;
}

const measured = (value: number, unit: string, how: string, err?: number): Quantity => ({
  value,
  ...(err !== undefined && err > 0 ? { low: value - err, high: value + err } : {}),
  unit,
  method: "measured",
  how,
});

/** Total power per reading time over devices, and the SM clock (median over devices), for the chart. */
function powerSeries(samples: readonly TelemetrySample[], t0: number, x: number, sim: boolean) {
  // Devices read in one pass land within a few ms: group them by 10 ms, one reading per device per group.
  const byT = new Map<number, Map<string, { w?: number; clock?: number }>>();
  for (const s of samples) {
    const k = Math.round(s.t * 100) / 100;
    let e = byT.get(k);
    if (!e) byT.set(k, (e = new Map()));
    e.set(s.device, { w: s.powerW ?? s.powerInstantW, clock: s.smClockMHz });
  }
  return [...byT.entries()]
    .sort((a, b) => a[0] - b[0])
    .map(([t, e]) => {
      const ws = [...e.values()].flatMap((v) => (v.w === undefined ? [] : [v.w]));
      const c = [...e.values()].flatMap((v) => (v.clock === undefined ? [] : [v.clock])).sort((a, b) => a - b);
      const p = ws.reduce((a, b) => a + b, 0);
      return {
        t: (t - t0) * x,
        ...(ws.length ? { powerW: sim ? p / x : p } : {}),
        ...(c.length ? { smClockMHz: c[Math.floor(c.length / 2)]! } : {}),
      };
    })
    .filter((p) => p.t >= 0);
}

export function telemetrySection(i: TelemetryInputs): TelemetrySection | undefined {
  const { run, timeScale: x } = i;
  const s = run.summary;
  if (!s) return undefined;
  const sim = run.source.kind === "sim";
  const seconds = (s.window.endS - s.window.startS) * (sim ? x : 1);
  const notes = [...run.notes, ...s.notes];
  const src = `${run.source.kind === "sim" ? "the embedded sim's dcgm-exporter endpoint" : run.source.kind} (${run.source.detail})`;
  const energyHow =
    s.energyMethod === "counter"
      ? "energy counter delta over the measured window, summed over devices"
      : "power integrated over the measured window (trapezoid, the source's averaging undone), summed over devices; ± the sampling and meter bound";
  const sec: TelemetrySection = {
    source: src,
    why: run.source.why,
    window: { startS: s.window.startS, endS: s.window.endS, seconds },
    devices: s.devices,
    samples: s.samples,
    series: [],
    unavailable: s.unavailable,
    notes,
  };
  if (s.energyJ !== null) sec.energyJ = measured(s.energyJ, "J", energyHow, s.energyErrorJ ?? undefined);
  if (s.joulesPerToken !== null && s.tokens) {
    const err = s.energyErrorJ ? s.energyErrorJ / s.tokens : undefined;
    sec.joulesPerToken = measured(s.joulesPerToken, "J/token", `energy ÷ ${s.tokens} output tokens in the window`, err);
  }
  if (s.tokensPerJoule !== null)
    sec.tokensPerJoule = measured(s.tokensPerJoule, "tokens/J", "output tokens ÷ energy over the window");
  if (s.avgPowerW !== null)
    sec.avgPowerW = measured(
      s.avgPowerW,
      "W",
      `energy ÷ window, all devices${sim && x !== 1 ? " (per simulated second)" : ""}`,
    );
  if (s.peakPowerW !== null)
    sec.peakPowerW = measured(s.peakPowerW, "W", "highest reading of total power in the window");
  if (s.cpu?.busyMean != null)
    sec.cpuBusy = measured(s.cpu.busyMean * 100, "%", "busy share of all CPUs' time over the window, from /proc/stat");
  if (s.cpu?.server) {
    const v = s.cpu.server;
    sec.serverCpuCores = measured(
      v.cpuCores,
      "cores",
      `${v.name}: its threads' CPU time ÷ the window (/proc schedstat)`,
    );
    sec.serverRunQueue = measured(
      v.runQueueShare * 100,
      "%",
      `${v.name}: share of its threads' runnable time spent waiting for a CPU (${fmt(v.runQueueS, 3)} s over the window): host contention`,
    );
  }
  if (s.smClockMHz) sec.smClockMHz = { median: s.smClockMHz.median, max: s.smClockMHz.deviceMax ?? s.smClockMHz.max };
  if (s.throttle)
    sec.throttle = {
      powerCapped: s.throttle.powerCapped,
      shareOfWindow: s.throttle.shareOfWindow,
      reasons: s.throttle.reasons,
    };
  // DRAM: achieved (counters) beside the model's bytes per step over the measured step.
  const peak = s.dram?.peakGBs ?? i.model?.specBandwidthGBs ?? null;
  if (s.utilization?.dramActive != null && peak) {
    const achieved = s.utilization.dramActive * peak;
    sec.dram = {
      achievedGBs: measured(
        achieved,
        "GB/s",
        `DRAM active ${fmt(s.utilization.dramActive * 100, 3)} % × ${fmt(peak)} GB/s peak, mean over devices`,
      ),
      peakGBs: peak,
    };
    if (i.model?.bytesPerStepGB && i.stepMs)
      sec.dram.modelGBs = {
        value: (i.model.bytesPerStepGB / i.stepMs) * 1000,
        unit: "GB/s",
        method: "derived",
        how: `the model's ${fmt(i.model.bytesPerStepGB, 3)} GB per GPU per step ÷ the measured ${fmt(i.stepMs, 3)} ms step`,
      };
    if (s.utilization.memBusy != null && s.utilization.memBusy > 0)
      sec.dram.efficiency = {
        value: s.utilization.dramActive / s.utilization.memBusy,
        unit: "of peak",
        method: "measured",
        how: `bandwidth while memory is busy: DRAM active ÷ memory busy (${fmt(s.utilization.memBusy * 100, 3)} %)${
          i.fittedBandwidthGBs
            ? `; the model's fit takes ${fmt(i.fittedBandwidthGBs)} GB/s from it instead of its spec × efficiency prior`
            : ""
        }`,
      };
  }
  const ic = s.interconnect;
  if (ic?.bytesPerToken != null) {
    sec.interconnect = {
      bytesPerToken: measured(
        ic.bytesPerToken,
        "B/token",
        "PCIe + NVLink TX bytes over the window, all devices, ÷ output tokens",
      ),
    };
    const mb =
      i.model && i.outputTokens ? modelTxBytesPerOutputToken(i.model, i.promptTokens ?? 0, i.outputTokens) : null;
    if (mb != null && mb > 0) {
      sec.interconnect.modelBytesPerToken = {
        value: mb,
        unit: "B/token",
        method: "modelled",
        how: `all-reduces (the embedding one included) × their per-GPU TX (ring 2(n−1)/n·S, one-shot (n−1)·S) × GPUs for each of the ${(i.promptTokens ?? 0) + (i.outputTokens ?? 0) - 1} tokens through the model per request, ÷ its ${i.outputTokens} output tokens, plus the logits gather per output token`,
      };
      sec.interconnect.ratio = ic.bytesPerToken / mb;
    }
  }
  // The chart: power and SM clock from the samples, throughput from the client, on one axis.
  const t0 = s.window.startS;
  const pw = powerSeries(run.samples, t0, sim ? x : 1, sim).filter((p) => p.t <= seconds + 1e-9);
  const tr = (i.tokenRate ?? []).map((p) => ({ t: p.t * x, tokensPerS: p.tokensPerS / x }));
  sec.series = [...pw, ...tr].sort((a, b) => a.t - b.t);
  return sec;
}

/** Findings a reader must see first: a capped window, and the model's bytes against the counters. */
export function telemetryFindings(sec: TelemetrySection): string[] {
  const out: string[] = [];
  const th = sec.throttle;
  if (th?.powerCapped) {
    const clk =
      sec.smClockMHz?.median != null && sec.smClockMHz.max != null
        ? `: SM clock median ${fmt(sec.smClockMHz.median, 4)} of ${fmt(sec.smClockMHz.max, 4)} MHz`
        : "";
    out.push(
      `Power-capped for ${fmt(th.shareOfWindow * 100, 3)} % of the measured window${clk}; the timings measure the cap as much as the deployment.`,
    );
  }
  const ic = sec.interconnect;
  if (ic?.ratio !== undefined && Math.abs(ic.ratio - 1) > 0.1)
    out.push(
      `The interconnect counters read ${fmt(ic.ratio, 3)}× the model's collective bytes per token (${fmt(ic.bytesPerToken.value)} vs ${fmt(ic.modelBytesPerToken!.value)} B/token): ${
        ic.ratio > 1
          ? "protocol overhead or traffic the model does not count"
          : "fewer or smaller collectives than the model counts"
      }.`,
    );
  return out;
}
