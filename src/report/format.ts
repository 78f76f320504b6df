// Number and text formatting shared by every report writer (pure).
import { escapeControl } from "../control.ts";
import { redactString } from "../secrets.ts";
import type { Deployment, DeploymentField, Quantity, TelemetrySection } from "./types.ts";

/** Significant-figure formatting that keeps small and large numbers readable. */
export function fmt(x: number | undefined, digits = 3): string {
  if (x === undefined || x === null || Number.isNaN(x)) return "n/a";
  if (!Number.isFinite(x)) return x > 0 ? "∞" : "−∞";
  const a = Math.abs(x);
  if (a === 0) return "0";
  if (a >= 10_000) return Math.round(x).toLocaleString("en-US");
  if (a >= 100) return x.toFixed(Math.max(0, digits - 3));
  if (a >= 10) return x.toFixed(Math.max(0, digits - 2));
  if (a >= 1) return x.toFixed(Math.max(0, digits - 1));
  return x.toPrecision(digits);
}

/** "17.4 ms [17.2, 17.6]" — value, interval where known, unit. */
export function fmtQ(q: Quantity | undefined, digits = 3): string {
  if (!q) return "n/a";
  // A narrow interval gets more digits, so its bounds do not print as the value itself.
  if (q.low !== undefined && q.high !== undefined && q.high > q.low)
    while (digits < 6 && fmt(q.low, digits) === fmt(q.high, digits)) digits++;
  const unit = q.unit ? ` ${q.unit}` : "";
  const range = q.low !== undefined && q.high !== undefined ? ` [${fmt(q.low, digits)}, ${fmt(q.high, digits)}]` : "";
  return `${fmt(q.value, digits)}${unit}${range}`;
}

export function fmtPct(share: number | undefined, digits = 1): string {
  if (share === undefined || !Number.isFinite(share)) return "n/a";
  return `${(share * 100).toFixed(digits)} %`;
}

export function fmtP(p: number | undefined): string {
  if (p === undefined || !Number.isFinite(p)) return "n/a";
  if (p < 1e-4) return "< 0.0001";
  return p.toPrecision(2);
}

const HTML_ESCAPES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

/** Escapes text for HTML element content and attribute values. */
export function esc(text: unknown): string {
  return escapeControl(String(text ?? "").replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]!));
}

/** Escapes text for a Markdown table cell or paragraph: no raw HTML, no table breaks. */
export function mdEsc(text: unknown): string {
  const md = String(text ?? "")
    .replace(/\\/g, "\\\\")
    .replace(/[&<>]/g, (c) => HTML_ESCAPES[c]!)
    .replace(/\|/g, "\\|")
    .replace(/([*_`[\]])/g, "\\$1")
    .replace(/\r?\n/g, " ");
  return escapeControl(md);
}

/** Removes credentials from a command line or URL before it is stored or shown (the project's one redactor). */
export function redactSecrets(text: string): string {
  return redactString(text);
}

const PROVENANCE_WORD: Record<string, string> = {
  detected: "detected",
  given: "given",
  profile: "embedded profile",
  unknown: "unknown",
};

/** One line naming the deployment; a field nobody gave or detected reads "unknown", never a default. */
export function deploymentTitle(d: Deployment): string {
  // A model file is named by its file name; a catalog or hub name as it is.
  const base = (p: string) => (/\.(gguf|json)$/i.test(p) ? p.replace(/^.*[\\/]/, "") : p);
  const model = d.modelName ?? (d.model ? base(d.model) : null) ?? d.servedModel ?? "unknown model";
  const device = d.gpu ? ((d.gpus ?? 1) > 1 ? `${d.gpus}× ${d.gpu}` : d.gpu) : "unknown hardware";
  const parts = [`${model} (${d.quant ?? "quantization unknown"}) on ${device}`];
  if (d.deviceKind !== "cpu") parts.push(d.tp !== null ? `TP ${d.tp}` : "TP unknown");
  if (d.interconnect && d.interconnect !== "none") parts.push(d.interconnect);
  parts.push(d.engine ? `${d.engine}${d.engineVersion ? ` ${d.engineVersion}` : ""}` : "engine unknown");
  return parts.join(", ");
}

/** Rows of (field, value, where it came from) for the report's deployment table. */
export function deploymentRows(d: Deployment): Array<{ field: string; value: string; source: string }> {
  const rows: Array<[DeploymentField, string, unknown]> = [
    ["engine", "engine", d.engine],
    ["engineVersion", "engine version", d.engineVersion],
    ["servedModel", "served model", d.servedModel],
    ["model", "model input", d.model],
    ["modelName", "architecture", d.modelName],
    ["quant", "quantization", d.quant],
    ["deviceKind", "device kind", d.deviceKind],
    ["gpu", "device", d.gpu],
    ["gpus", "devices", d.gpus],
    ["tp", "tensor parallel", d.tp],
    ["interconnect", "interconnect", d.interconnect],
    ["maxModelLen", "max model length", d.maxModelLen],
  ];
  return rows.map(([k, label, v]) => {
    const src = d.sources?.[k];
    const known = v !== null && v !== undefined;
    return {
      field: label,
      value: known ? String(v) : "unknown",
      source: src
        ? `${PROVENANCE_WORD[src.source] ?? src.source}${src.from ? ` (${src.from})` : ""}`
        : known
          ? ""
          : "unknown",
    };
  });
}

/** The telemetry section's table, the same rows in every writer. */
export function telemetryRows(t: TelemetrySection): Array<[string, Quantity | undefined]> {
  return [
    ["energy", t.energyJ],
    ["energy per output token", t.joulesPerToken],
    ["output tokens per joule", t.tokensPerJoule],
    ["average power", t.avgPowerW],
    ["peak power", t.peakPowerW],
    ["CPU busy", t.cpuBusy],
    ["server CPU", t.serverCpuCores],
    ["server waiting for a CPU", t.serverRunQueue],
    ["achieved DRAM bandwidth", t.dram?.achievedGBs],
    ["model bytes per step ÷ measured step", t.dram?.modelGBs],
    ["measured bandwidth efficiency", t.dram?.efficiency],
    ["interconnect TX bytes per token", t.interconnect?.bytesPerToken],
    ["model collective bytes per token", t.interconnect?.modelBytesPerToken],
  ];
}
