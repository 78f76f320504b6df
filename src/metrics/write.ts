// Writes families back out as Prometheus text 0.0.4 or OpenMetrics 1.0, with each format's escaping.
// Names outside the legacy character set are written quoted, the Prometheus 3 UTF-8 syntax
// (`{"my.metric", "label.name"="v"} 1`, `# TYPE "my.metric" counter`), so they read back.

import type { ExpositionFormat, Labels, MetricFamily, Sample } from "./types.ts";

/** Go-style float text: NaN, +Inf, -Inf, -0; otherwise the shortest text that parses back to the same double. */
export function formatValue(v: number): string {
  if (Number.isNaN(v)) return "NaN";
  if (v === Infinity) return "+Inf";
  if (v === -Infinity) return "-Inf";
  if (v === 0 && 1 / v < 0) return "-0";
  return String(v);
}

/** Label value escaping (both formats): backslash, double quote, newline. */
export function escapeLabelValue(s: string): string {
  if (!/[\\"\n]/.test(s)) return s;
  return s.replace(/[\\"\n]/g, (c) => (c === "\\" ? "\\\\" : c === '"' ? '\\"' : "\\n"));
}

/** HELP escaping: 0.0.4 escapes backslash and newline; OpenMetrics also the double quote. */
export function escapeHelp(s: string, format: ExpositionFormat): string {
  const re = format === "openmetrics-1.0" ? /[\\"\n]/g : /[\\\n]/g;
  return s.replace(re, (c) => (c === "\\" ? "\\\\" : c === '"' ? '\\"' : "\\n"));
}

const LEGACY_METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LEGACY_LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/** A metric name as written in HELP/TYPE/UNIT: bare when legacy-valid, else double-quoted and escaped. */
export function formatMetricName(name: string): string {
  return LEGACY_METRIC_NAME.test(name) ? name : `"${escapeLabelValue(name)}"`;
}

/** A label name: bare when legacy-valid ([a-zA-Z_][a-zA-Z0-9_]*), else double-quoted and escaped. */
export function formatLabelName(name: string): string {
  return LEGACY_LABEL_NAME.test(name) ? name : `"${escapeLabelValue(name)}"`;
}

/** `{a="x",b="y"}`, or "" for no labels. */
export function formatLabels(labels: Labels): string {
  const inner = labelPairs(labels);
  return inner ? `{${inner}}` : "";
}

function labelPairs(labels: Labels): string {
  let out = "";
  for (const k in labels) {
    if (!Object.hasOwn(labels, k)) continue;
    out += `${out ? "," : ""}${formatLabelName(k)}="${escapeLabelValue(labels[k])}"`;
  }
  return out;
}

/** A sample's name and labels: `name{labels}`, or `{"name",labels}` when the name needs quoting. */
export function formatSeries(name: string, labels: Labels): string {
  if (LEGACY_METRIC_NAME.test(name)) return `${name}${formatLabels(labels)}`;
  const inner = labelPairs(labels);
  return `{"${escapeLabelValue(name)}"${inner ? `,${inner}` : ""}}`;
}

/** Milliseconds → decimal seconds text that parses back to the same milliseconds. */
function msToSecondsText(ms: number): string {
  if (Number.isInteger(ms) && Math.abs(ms) < Number.MAX_SAFE_INTEGER) {
    const neg = ms < 0;
    const a = Math.abs(ms);
    const whole = Math.floor(a / 1000);
    const frac = a % 1000;
    const text = frac === 0 ? `${whole}` : `${whole}.${String(frac).padStart(3, "0").replace(/0+$/, "")}`;
    return neg ? `-${text}` : text;
  }
  return formatValue(ms / 1000);
}

function sampleLine(s: Sample, om: boolean): string {
  let line = `${formatSeries(s.name, s.labels)} ${formatValue(s.value)}`;
  if (s.timestampMs !== undefined) {
    line += ` ${om ? msToSecondsText(s.timestampMs) : formatValue(Math.round(s.timestampMs))}`;
  }
  if (s.exemplar && om) {
    const e = s.exemplar;
    line += ` # ${formatLabels(e.labels) || "{}"} ${formatValue(e.value)}`;
    if (e.timestamp !== undefined) line += ` ${formatValue(e.timestamp)}`;
  }
  return line;
}

/**
 * Writes families in the given format. Prometheus text has no info/stateset/gaugehistogram types:
 * they are written as gauge/gauge/histogram (as the Python client does), so they read back with
 * those types. Exemplars are written only in OpenMetrics.
 */
export function formatExposition(families: MetricFamily[], format: ExpositionFormat): string {
  const om = format === "openmetrics-1.0";
  const parts: string[] = [];
  for (const f of families) {
    let metaName = f.name;
    let type: string = f.type;
    if (om) {
      if (type === "untyped") type = "unknown";
    } else {
      // 0.0.4 names a counter by its sample name (`x_total`) when its samples carry the suffix.
      if (type === "counter" && f.samples.length > 0 && f.samples.every((s) => s.name !== f.name)) {
        metaName = `${f.name}_total`;
      } else if (type === "counter" && f.samples.length === 0) metaName = `${f.name}_total`;
      if (type === "info" || type === "stateset") type = "gauge";
      else if (type === "gaugehistogram") type = "histogram";
    }
    metaName = formatMetricName(metaName);
    if (f.help !== undefined) parts.push(`# HELP ${metaName} ${escapeHelp(f.help, format)}`);
    parts.push(`# TYPE ${metaName} ${type}`);
    if (om && f.unit !== undefined && f.unit !== "") parts.push(`# UNIT ${metaName} ${f.unit}`);
    for (const s of f.samples) parts.push(sampleLine(s, om));
  }
  if (om) parts.push("# EOF");
  return `${parts.join("\n")}\n`;
}
