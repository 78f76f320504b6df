// The `--telemetry` value: which source to record beside a measurement, and how often it samples.
// Pure: no network, no PATH lookups (auto is resolved by the recorder).
import { UsageError } from "../errors.ts";
import type { TelemetrySpec } from "./types.ts";

/** Sampling intervals (ms) when none is given: nvidia-smi's loop is cheap, an HTTP scrape or amd-smi is not. */
export const DEFAULT_INTERVAL_MS = {
  "nvidia-smi": 100,
  dcgm: 1000,
  prometheus: 1000,
  "amd-smi": 1000,
  cpu: 500,
} as const;

/** Faster than this the sources measure their own overhead; slower than this a window has too few samples. */
export const MIN_INTERVAL_MS = 50;
export const MAX_INTERVAL_MS = 60_000;

const KINDS = "auto, none, nvidia-smi, dcgm:URL, prometheus:URL, amd-smi, cpu";

export interface SpecOptions {
  /** The flag named in errors (default --telemetry). */
  flag?: string;
  /** A separate interval flag's value (ms, already parsed), e.g. `--telemetry-interval`; wins over `@INTERVAL`. */
  intervalMs?: number;
  /** The interval flag's name for errors (default --telemetry-interval). */
  intervalFlag?: string;
}

/**
 * Parses `auto|none|nvidia-smi|dcgm:URL|prometheus:URL|amd-smi|cpu`, each with an optional
 * `@INTERVAL` suffix (`nvidia-smi@200ms`, `dcgm:http://h:9400@2s`). `dcgm:URL` with no path means
 * the exporter's `/metrics`. URLs must be http(s).
 */
export function parseTelemetrySpec(text: string, opts: SpecOptions = {}): TelemetrySpec {
  const flag = opts.flag ?? "--telemetry";
  const raw = text.trim();
  if (!raw) throw new UsageError(`${flag}: empty value (one of ${KINDS})`);
  // The suffix is taken only when it reads as a duration, so a URL's own `@` (user@host) stays.
  let body = raw;
  let intervalMs: number | undefined;
  const at = /@(\d+(?:\.\d+)?(?:ms|s|m)?)$/.exec(raw);
  if (at) {
    body = raw.slice(0, at.index);
    intervalMs = checkInterval(durationMs(at[1]!), `${flag} …@${at[1]}`);
  } else {
    // A suffix that means to be an interval but is none (`nvidia-smi@-1s`, `dcgm:http://h:9400@0.5.s`): said as
    // such, not as an unknown source. A URL's own `@` is followed by a host, which does not start like a number.
    const bad = /@([-+]?[\d.]+[a-z]*|[-+][^@/]*)$/i.exec(raw);
    if (bad)
      throw new UsageError(
        `${flag}: bad sampling interval "@${bad[1]}" in "${raw}": expected a duration from ${MIN_INTERVAL_MS} ms to ${MAX_INTERVAL_MS / 1000} s, e.g. @200ms or @2s`,
      );
  }
  if (opts.intervalMs !== undefined)
    intervalMs = checkInterval(opts.intervalMs, opts.intervalFlag ?? "--telemetry-interval");
  const colon = body.indexOf(":");
  const kind = (colon < 0 ? body : body.slice(0, colon)).toLowerCase();
  const arg = colon < 0 ? undefined : body.slice(colon + 1);
  const noArg = (k: string) => {
    if (arg !== undefined) throw new UsageError(`${flag}: "${k}" takes no argument, got "${raw}"`);
  };
  const withInterval = <T extends object>(o: T) => (intervalMs === undefined ? o : { ...o, intervalMs });
  switch (kind) {
    case "auto":
    case "none":
      noArg(kind);
      if (intervalMs !== undefined && kind === "none")
        throw new UsageError(`${flag}: "none" records nothing, so an interval means nothing`);
      return kind === "auto" ? withInterval({ kind: "auto" as const }) : { kind: "none" };
    case "nvidia-smi":
    case "amd-smi":
    case "cpu":
      noArg(kind);
      return withInterval({ kind });
    case "dcgm":
    case "prometheus": {
      if (!arg) throw new UsageError(`${flag}: "${kind}" needs a URL: ${kind}:http://HOST:PORT`);
      const url = checkUrl(arg, flag, kind);
      return withInterval({ kind, url });
    }
    default:
      throw new UsageError(`${flag}: unknown source "${kind}" in "${raw}" (one of ${KINDS})`, {
        hint: kind.startsWith("http")
          ? "an exporter URL needs its kind: dcgm:URL (dcgm-exporter) or prometheus:URL (a Prometheus server)"
          : undefined,
      });
  }
}

/** The interval a spec samples at: its own, else the source's default. */
export function specIntervalMs(spec: TelemetrySpec): number | undefined {
  if (spec.kind === "none") return undefined;
  if ("intervalMs" in spec && spec.intervalMs !== undefined) return spec.intervalMs;
  return spec.kind === "auto" ? undefined : DEFAULT_INTERVAL_MS[spec.kind];
}

/** The spec written back as a flag value (for logs and the run store). */
export function formatTelemetrySpec(spec: TelemetrySpec): string {
  const iv = "intervalMs" in spec && spec.intervalMs !== undefined ? `@${spec.intervalMs}ms` : "";
  let base: string = spec.kind;
  if ("url" in spec) {
    // `http://host:9090@1000ms` reads as user "host", password "9090" to anything that looks for credentials
    // (and to a URL parser): a path's "/" before the interval keeps the port a port. The parse drops it again.
    const u = new URL(spec.url);
    const bare = iv !== "" && u.pathname === "/" && !u.search && !spec.url.endsWith("/");
    base = `${spec.kind}:${spec.url}${bare ? "/" : ""}`;
  }
  return `${base}${iv}`;
}

function durationMs(s: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m)?$/.exec(s)!;
  // A bare number is milliseconds here: sampling intervals are sub-second far more often than not.
  return Number(m[1]) * { ms: 1, s: 1000, m: 60_000 }[m[2] ?? "ms"]!;
}

function checkInterval(ms: number, what: string): number {
  if (!Number.isFinite(ms) || ms < MIN_INTERVAL_MS || ms > MAX_INTERVAL_MS)
    throw new UsageError(
      `${what}: the sampling interval must be between ${MIN_INTERVAL_MS} ms and ${MAX_INTERVAL_MS / 1000} s, got ${ms} ms`,
    );
  return Math.round(ms);
}

function checkUrl(text: string, flag: string, kind: "dcgm" | "prometheus"): string {
  let u: URL;
  try {
    u = new URL(text);
  } catch {
    throw new UsageError(`${flag}: not a URL after "${kind}:": "${text}" (example: ${kind}:${example(kind)})`);
  }
  if (u.protocol !== "http:" && u.protocol !== "https:")
    throw new UsageError(`${flag}: ${kind}: only http:// and https:// URLs are read, got "${u.protocol}"`);
  if (u.hash) throw new UsageError(`${flag}: ${kind}: a URL fragment ("${u.hash}") means nothing to an exporter`);
  // dcgm-exporter serves its families at /metrics; a bare host:port means that path.
  if (kind === "dcgm" && (u.pathname === "/" || u.pathname === "") && !u.search) u.pathname = "/metrics";
  const s = u.toString();
  // Prometheus' API lives under the base URL: keep it without a trailing slash.
  return kind === "prometheus" ? s.replace(/\/+$/, "") : s;
}

function example(kind: "dcgm" | "prometheus"): string {
  return kind === "dcgm" ? "http://127.0.0.1:9400/metrics" : "http://127.0.0.1:9090";
}
