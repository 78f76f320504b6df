// The dcgm-exporter families through a Prometheus server (a fleet), with the fleet client. Each poll
// reads the raw samples of `{__name__=~"DCGM_FI_.*"}[window]`: every reading with the exporter's scrape
// timestamp, none duplicated or interpolated, whatever Prometheus' own scrape interval is.
import { InferscopeError, TelemetryError } from "../../errors.ts";
import { PrometheusClient, type PromSample, type PromSeries, promDuration } from "../../metrics/prometheus.ts";
import { dcgmHost, dcgmVectorsToSamples, type PromVectorElement } from "../dcgm.ts";
import type { TelemetryCapture } from "../types.ts";
import {
  CaptureBuilder,
  pollingHandle,
  type SourceStartOptions,
  type TelemetryHandle,
  type TelemetrySource,
} from "./common.ts";
import { failureReason } from "./dcgm.ts";

export const DCGM_SELECTOR = '{__name__=~"DCGM_FI_.*"}';

export interface PrometheusSourceOptions {
  timeoutMs?: number;
  /** How far back the first read looks for the exporter's series (ms); default 60 s. */
  lookbackMs?: number;
  label?: string;
}

/**
 * A failed read in plain words: a server that never answers is a timeout (not undici's "Headers Timeout Error"),
 * and an answer whose shape is not Prometheus' range vector is said to be so (not a JavaScript TypeError).
 */
export function prometheusFailure(err: unknown, timeoutMs: number): string {
  const codes = [(err as { code?: string })?.code, (err as { cause?: { code?: string } })?.cause?.code];
  if (
    codes.some(
      (c) => c === "UND_ERR_HEADERS_TIMEOUT" || c === "UND_ERR_BODY_TIMEOUT" || c === "UND_ERR_CONNECT_TIMEOUT",
    )
  )
    return `no answer within ${timeoutMs} ms (the server accepted the connection and said nothing)`;
  if (err instanceof InferscopeError) return err.message;
  return "the answer is not a Prometheus range vector (/api/v1/query with a [range] selector): not a Prometheus server?";
}

export function prometheusSource(url: string, o: PrometheusSourceOptions = {}): TelemetrySource {
  return { kind: "prometheus", start: (opts) => startPrometheus(url, o, opts) };
}

async function startPrometheus(
  url: string,
  o: PrometheusSourceOptions,
  opts: SourceStartOptions,
): Promise<TelemetryHandle> {
  const now = opts.now ?? Date.now;
  const label = o.label ?? `--telemetry prometheus:${url}`;
  const intervalMs = opts.intervalMs;
  const timeoutMs = o.timeoutMs ?? Math.min(10_000, Math.max(1000, 2 * intervalMs));
  let client: PrometheusClient;
  try {
    client = new PrometheusClient(url, { timeoutMs });
  } catch (err) {
    throw new TelemetryError(`${label}: ${(err as Error).message}`);
  }
  const cap = new CaptureBuilder("prometheus", `${url} ${DCGM_SELECTOR}`, intervalMs, opts);
  const lastSeen = new Map<string, number>();
  const hosts = new Set<string>();
  let lastPollMs = 0;

  /** New raw points since the last poll → samples (one per device and scrape time), through the file parser. */
  const read = async (windowMs: number) => {
    const at = now();
    const series = await client.rawRange(`${DCGM_SELECTOR}[${promDuration(windowMs)}]`, at);
    lastPollMs = at;
    const points: PromVectorElement[] = [];
    for (const s of series as Array<PromSeries<PromSample[]>>) {
      if (!s.metric.__name__) continue;
      const key = JSON.stringify(s.metric);
      const seen = lastSeen.get(key) ?? Number.NEGATIVE_INFINITY;
      hosts.add(dcgmHost(s.metric));
      // Samples keep the scrape time Prometheus stored, not the time we asked.
      for (const p of s.value) if (p.t > seen) points.push({ metric: s.metric, value: p });
      const newest = s.value.at(-1)?.t;
      if (newest !== undefined && newest > seen) lastSeen.set(key, newest);
    }
    // One host: the exporter's own device keys (gpu0); a fleet (over all reads so far): host:gpu0.
    return dcgmVectorsToSamples(points, cap.detail, { hostPrefix: hosts.size > 1 });
  };
  const take = (r: TelemetryCapture) => {
    for (const d of r.devices) cap.device(d);
    for (const s of r.samples) cap.add(s);
    for (const n of r.notes) cap.note(n);
  };

  const lookbackMs = o.lookbackMs ?? 60_000;
  let first: TelemetryCapture;
  try {
    first = await read(lookbackMs);
  } catch (err) {
    await client.close();
    throw new TelemetryError(`${label}: ${prometheusFailure(err, timeoutMs)}; nothing was measured`, {
      hint: "check the Prometheus URL (its /api/v1/query must answer), or use --telemetry none",
    });
  }
  if (first.samples.length === 0) {
    await client.close();
    throw new TelemetryError(
      `${label}: Prometheus holds no DCGM_FI_* series with a gpu label from the last ${lookbackMs / 1000} s; is dcgm-exporter scraped?`,
    );
  }
  take(first);

  // Prometheus appends a scrape after it ends: each read reaches back past the previous one, and
  // lastSeen drops what was already taken.
  const overlapMs = Math.max(5000, 2 * intervalMs);
  return pollingHandle({
    kind: "prometheus",
    cap,
    opts,
    gapWhat: `Prometheus ${url} unreachable`,
    poll: async () => take(await read(now() - lastPollMs + overlapMs)),
    reason: (err) => failureReason(prometheusFailure(err, timeoutMs), url),
    // One last read: Prometheus may have stored the window's last scrapes since the previous poll.
    lastRead: true,
    close: () => client.close(),
  });
}
