// A dcgm-exporter endpoint (or the embedded sim's compatible one), scraped every interval with the
// project's scrape client. Down at start: exit 3 before any measurement. Down mid-run: a gap note, and
// recording continues when it answers again.
import type { Agent } from "undici";
import { TelemetryError } from "../../errors.ts";
import { undici } from "../../lazy.ts";
import { fetchRaw, parseRaw } from "../../metrics/scrape.ts";
import { dcgmExpositionCapture, dcgmUnavailable } from "../dcgm.ts";
import {
  CaptureBuilder,
  pollingHandle,
  type SourceStartOptions,
  type TelemetryHandle,
  type TelemetrySource,
} from "./common.ts";

export interface DcgmOptions {
  /** Per-scrape limit (ms); default twice the interval, between 1 and 10 s. */
  timeoutMs?: number;
  headers?: Record<string, string>;
  /** The flag value named in errors (default `--telemetry dcgm:URL`). */
  label?: string;
}

/** A scrape failure in few words: the URL is already in the note. */
export function failureReason(err: unknown, url: string): string {
  const m = err instanceof Error ? err.message : String(err);
  return m
    .replace(`cannot scrape ${url}: `, "")
    .replace(`${url}: `, "")
    .replace(/\s*\([^)]*\)/g, "")
    .trim();
}

export function dcgmSource(url: string, o: DcgmOptions = {}): TelemetrySource {
  return { kind: "dcgm", start: (opts) => startDcgm(url, o, opts) };
}

async function startDcgm(url: string, o: DcgmOptions, opts: SourceStartOptions): Promise<TelemetryHandle> {
  const now = opts.now ?? Date.now;
  const label = o.label ?? `--telemetry dcgm:${url}`;
  const intervalMs = opts.intervalMs;
  const timeoutMs = o.timeoutMs ?? Math.min(10_000, Math.max(1000, 2 * intervalMs));
  const agent: Agent = new (undici().Agent)({
    connect: { timeout: timeoutMs },
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
    connections: 1,
  });
  const cap = new CaptureBuilder("dcgm", url, intervalMs, opts);
  const families = new Set<string>();

  const scrapeOnce = async () => {
    const raw = await fetchRaw(url, { dispatcher: agent, timeoutMs, headers: o.headers, now });
    const snap = parseRaw(raw);
    // The reading is the exporter's at the time it answered: the midpoint of the request.
    const atS = (raw.atMs - raw.elapsedMs / 2) / 1000;
    const r = dcgmExpositionCapture(snap.exposition, atS, url);
    for (const f of snap.exposition.families) if (f.name.startsWith("DCGM_FI_")) families.add(f.name);
    return r;
  };

  let first: Awaited<ReturnType<typeof scrapeOnce>>;
  try {
    first = await scrapeOnce();
  } catch (err) {
    await agent.destroy().catch(() => {});
    const why = failureReason(err, url);
    throw new TelemetryError(`${label}: the exporter did not answer a first scrape: ${why}; nothing was measured`, {
      hint: "check that dcgm-exporter runs and serves this URL (curl it), or use --telemetry none",
    });
  }
  if (first.samples.length === 0) {
    await agent.destroy().catch(() => {});
    throw new TelemetryError(`${label}: ${url} serves no DCGM_FI_* series with a gpu label; is it dcgm-exporter?`, {
      hint: "dcgm-exporter serves at :9400/metrics by default",
    });
  }
  const take = (r: typeof first) => {
    for (const d of r.devices) cap.device(d);
    for (const s of r.samples) cap.add(s);
    for (const n of r.notes) cap.note(n);
  };
  take(first);

  return pollingHandle({
    kind: "dcgm",
    cap,
    opts,
    gapWhat: `exporter ${url} unreachable`,
    async poll(signal) {
      const r = await scrapeOnce();
      if (!signal.aborted) take(r);
    },
    reason: (err) => failureReason(err, url),
    // Destroying the agent ends a scrape in flight at once instead of waiting out its timeout.
    halt: () => agent.destroy().catch(() => {}),
    async close() {
      for (const u of dcgmUnavailable(families)) cap.missing(u.field, u.why);
    },
  });
}
