// Terminal rendering of `telemetry read`: a compact table of the summary, device facts from -q, and what is
// unavailable and why.

import type { TelemetryReadResult } from "./read.ts";
import type { TelemetrySummary } from "./types.ts";

const f = (x: number | null | undefined, d = 1) => (x === null || x === undefined ? "—" : x.toFixed(d));
const pct = (x: number | null | undefined) => (x === null || x === undefined ? "—" : `${(100 * x).toFixed(1)} %`);

function iso(t: number): string {
  if (!Number.isFinite(t) || Math.abs(t) > 8.64e12) return `${t} s`;
  return t >= 1e8 ? new Date(t * 1000).toISOString() : `t+${t.toFixed(3)} s`;
}

/** "covers 1.80 of 1.90 s" where the energy readings leave part of the window uncovered. */
function coverage(s: TelemetrySummary): string {
  const c = s.energyCoverage;
  if (!c || c.coveredS >= c.windowS * (1 - 1e-9)) return "";
  return ` · covers ${c.coveredS.toFixed(2)} of ${c.windowS.toFixed(2)} s`;
}

export function formatSummary(s: TelemetrySummary): string {
  const rows: [string, string][] = [];
  const w = s.window;
  rows.push(["window", `${iso(w.startS)} → ${iso(w.endS)} (${(w.endS - w.startS).toFixed(2)} s, ${w.how})`]);
  rows.push(["source", s.source.detail]);
  rows.push(["devices", `${s.devices.join(", ")} · ${s.samples} readings in the window`]);
  if (s.energyJ !== null)
    rows.push([
      "energy",
      `${f(s.energyJ)} J ± ${f(s.energyErrorJ)} J (${s.energyMethod === "counter" ? "energy counter delta" : "integrated power"})${coverage(s)}`,
    ]);
  else {
    const why = s.unavailable.find((u) => u.field === "energyJ")?.why;
    rows.push(["energy", `unavailable${why ? `: ${why}` : ""}`]);
  }
  rows.push(["power", `avg ${f(s.avgPowerW)} W · peak ${f(s.peakPowerW)} W`]);
  if (s.tokens !== null)
    rows.push([
      "per token",
      `${f(s.joulesPerToken, 4)} J/token · ${f(s.tokensPerJoule, 3)} tokens/J (${s.tokens} tokens)`,
    ]);
  if (s.smClockMHz)
    rows.push([
      "SM clock",
      `median ${f(s.smClockMHz.median, 0)} · p10 ${f(s.smClockMHz.p10, 0)} · max ${f(s.smClockMHz.max, 0)}${s.smClockMHz.deviceMax ? ` of ${s.smClockMHz.deviceMax}` : ""} MHz`,
    ]);
  if (s.throttle) {
    const t = s.throttle;
    const reasons = t.reasons.map((r) => `${r.reason} ${pct(r.share)}`).join(", ") || "none";
    rows.push([
      "throttling",
      `${t.powerCapped ? "POWER-CAPPED" : "not power-capped"} · limited ${pct(t.shareOfWindow)} of the window · reasons: ${reasons}${t.basis ? ` (from ${t.basis})` : ""}`,
    ]);
  }
  if (s.utilization)
    rows.push([
      "utilization",
      `GPU busy ${pct(s.utilization.gpuBusy)} · memory busy ${pct(s.utilization.memBusy)} · DRAM active ${pct(s.utilization.dramActive)} · SM active ${pct(s.utilization.smActive)}`,
    ]);
  if (s.dram)
    rows.push([
      "DRAM",
      `active ${pct(s.dram.activeMean)} · achieved ${f(s.dram.achievedGBs, 0)} of ${f(s.dram.peakGBs, 0)} GB/s`,
    ]);
  if (s.interconnect) {
    const i = s.interconnect;
    const mb = (x: number | null) => (x === null ? "—" : `${(x / 1e6).toFixed(2)} MB`);
    rows.push([
      "interconnect",
      `PCIe tx ${mb(i.pcieTxBytes)} rx ${mb(i.pcieRxBytes)} · NVLink tx ${mb(i.nvlinkTxBytes)} rx ${mb(i.nvlinkRxBytes)}${i.bytesPerToken !== null ? ` · ${f(i.bytesPerToken, 0)} B/token` : ""}`,
    ]);
  }
  if (s.cpu) {
    const v = s.cpu.server;
    rows.push([
      "CPU",
      `busy ${pct(s.cpu.busyMean)}${v ? ` · ${v.name}: ${f(v.cpuCores, 2)} cores, waited for a CPU ${pct(v.runQueueShare)} of its runnable time` : ""}`,
    ]);
  }
  const width = Math.max(...rows.map((r) => r[0].length));
  const out = rows.map(([k, v]) => `${k.padEnd(width)}  ${v}`);
  if (s.unavailable.length) {
    out.push("", "unavailable:");
    for (const u of s.unavailable) out.push(`  ${u.field}: ${u.why}`);
  }
  if (s.notes.length) {
    out.push("", "notes:");
    for (const n of s.notes) out.push(`  ${n}`);
  }
  return out.join("\n");
}

export function formatTelemetryRead(r: TelemetryReadResult): string {
  const out: string[] = [];
  for (const q of r.deviceReports)
    for (const g of q.gpus) {
      const bits = [
        g.name,
        g.architecture,
        g.busId,
        g.powerLimitW !== undefined ? `power limit ${g.powerLimitW} W` : undefined,
        g.smClockMaxMHz !== undefined ? `max SM ${g.smClockMaxMHz} MHz` : undefined,
        g.memClockMaxMHz !== undefined ? `max mem ${g.memClockMaxMHz} MHz` : undefined,
        g.migMode ? `MIG ${g.migMode}` : undefined,
        g.clockEventReasons ? `clock events: ${g.clockEventReasons.active.join(", ") || "none active"}` : undefined,
      ].filter(Boolean);
      out.push(`${g.key}: ${bits.join(" · ")}`);
    }
  if (r.topology) out.push(`topology: ${r.topology.gpus.length} GPU(s) ${r.topology.gpus.join(", ")}`);
  if (r.summary) {
    if (out.length) out.push("");
    out.push(formatSummary(r.summary));
  }
  for (const o of r.others) out.push("", `— ${o.file} —`, formatSummary(o.summary));
  for (const n of r.notes) out.push(`note: ${n}`);
  return out.join("\n");
}
