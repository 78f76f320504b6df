// The dcgm-exporter families through a Prometheus server (a fleet), with the fleet client. Each poll
// reads the raw samples of `{__name__=~"DCGM_FI_.*"}[window]`: every reading with the exporter's scrape
// timestamp, none duplicated or interpolated, whatever Prometheus' own scrape interval is.
import { TelemetryError } from "../../errors.ts";
import { PrometheusClient, type PromSample, type PromSeries, promDuration } from "../../metrics/prometheus.ts";
import type { Exposition, MetricFamily } from "../../metrics/types.ts";
import { type DcgmExpositionParser, parseDcgmExposition } from "../parsers.ts";
import type { TelemetryCapture, TelemetrySample } from "../types.ts";
import {
  CaptureBuilder,
  GapTracker,
  pollGrid,
  type SourceStartOptions,
  sleepUntil,
  type TelemetryHandle,
  type TelemetrySource,
} from "./common.ts";
import { failureReason } from "./dcgm.ts";

export const DCGM_SELECTOR = '{__name__=~"DCGM_FI_.*"}';

export interface PrometheusSourceOptions {
  parser?: DcgmExpositionParser;
  timeoutMs?: number;
  /** How far back the first read looks for the exporter's series (ms); default 60 s. */
  lookbackMs?: number;
  label?: string;
}

export function prometheusSource(url: string, o: PrometheusSourceOptions = {}): TelemetrySource {
  return { kind: "prometheus", start: (opts) => startPrometheus(url, o, opts) };
}

/** The host a series came from: dcgm-exporter's Hostname label, else Prometheus' instance. */
function hostOf(labels: Record<string, string>): string {
  return labels.Hostname ?? labels.instance ?? "";
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
  const parse = o.parser ?? parseDcgmExposition;
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

  /** New raw points since the last poll → samples (grouped by host and scrape time). */
  const read = async (windowMs: number) => {
    const at = now();
    const series = await client.rawRange(`${DCGM_SELECTOR}[${promDuration(windowMs)}]`, at);
    lastPollMs = at;
    const groups = new Map<string, { host: string; t: number; fams: Map<string, MetricFamily> }>();
    for (const s of series as Array<PromSeries<PromSample[]>>) {
      const { __name__: name, ...labels } = s.metric;
      if (!name) continue;
      const key = JSON.stringify(s.metric);
      const seen = lastSeen.get(key) ?? Number.NEGATIVE_INFINITY;
      const host = hostOf(labels);
      hosts.add(host);
      for (const p of s.value) {
        if (p.t <= seen) continue;
        const gk = `${host}\u0000${p.t}`;
        let g = groups.get(gk);
        if (!g) groups.set(gk, (g = { host, t: p.t, fams: new Map() }));
        let fam = g.fams.get(name);
        if (!fam) g.fams.set(name, (fam = { name, type: "untyped", samples: [] }));
        fam.samples.push({ name, labels, value: p.v });
      }
      const newest = s.value.at(-1)?.t;
      if (newest !== undefined && newest > seen) lastSeen.set(key, newest);
    }
    const out: { samples: TelemetrySample[]; host: string; devices: ReturnType<DcgmExpositionParser>["devices"] }[] =
      [];
    for (const g of [...groups.values()].sort((a, b) => a.t - b.t)) {
      const exp: Exposition = { format: "prometheus-0.0.4", families: [...g.fams.values()], warnings: [] };
      const r = parse(exp, g.t / 1000);
      // Samples keep the scrape time Prometheus stored, not the time we asked.
      for (const s of r.samples) s.t = g.t / 1000;
      out.push({ samples: r.samples, host: g.host, devices: r.devices });
    }
    return out;
  };
  const take = (rs: Awaited<ReturnType<typeof read>>) => {
    // One host: the exporter's own device keys (gpu0); a fleet: prefixed with the host (node-a/gpu0).
    const prefix = (h: string) => (hosts.size > 1 && h ? `${h}/` : "");
    for (const r of rs) {
      for (const d of r.devices) cap.device({ ...d, key: prefix(r.host) + d.key });
      for (const s of r.samples) cap.add({ ...s, device: prefix(r.host) + s.device });
    }
  };

  const lookbackMs = o.lookbackMs ?? 60_000;
  let first: Awaited<ReturnType<typeof read>>;
  try {
    first = await read(lookbackMs);
  } catch (err) {
    await client.close();
    throw new TelemetryError(`${label}: ${(err as Error).message}; nothing was measured`, {
      hint: "check the Prometheus URL (its /api/v1/query must answer), or use --telemetry none",
    });
  }
  if (!first.some((r) => r.samples.length > 0)) {
    await client.close();
    throw new TelemetryError(
      `${label}: Prometheus holds no DCGM_FI_* series with a gpu label from the last ${lookbackMs / 1000} s; is dcgm-exporter scraped?`,
    );
  }
  take(first);

  const gap = new GapTracker(`Prometheus ${url} unreachable`, cap);
  const ac = new AbortController();
  const onAbort = () => ac.abort();
  opts.signal?.addEventListener("abort", onAbort, { once: true });
  if (opts.signal?.aborted) ac.abort();
  // Prometheus appends a scrape after it ends: each read reaches back past the previous one, and
  // lastSeen drops what was already taken.
  const overlapMs = Math.max(5000, 2 * intervalMs);
  const poll = async () => {
    const at = now();
    try {
      take(await read(at - lastPollMs + overlapMs));
      gap.ok(at);
    } catch (err) {
      gap.fail(at, failureReason(err, url));
    }
  };
  const t0 = now();
  const loop = (async () => {
    await sleepUntil(t0 + intervalMs, now, ac.signal);
    await pollGrid(intervalMs, ac.signal, now, async (skipped) => {
      gap.skipped(skipped);
      await poll();
    });
  })();

  let stopped: Promise<TelemetryCapture> | null = null;
  return {
    kind: "prometheus",
    detail: cap.detail,
    samples: cap.samples,
    errors: cap.notes,
    stop() {
      stopped ??= (async () => {
        opts.signal?.removeEventListener("abort", onAbort);
        ac.abort();
        await loop;
        // One last read: Prometheus may have stored the window's last scrapes since the previous poll.
        await poll();
        gap.end();
        await client.close();
        return cap.build();
      })();
      return stopped;
    },
  };
}
