// Samples the server's load gauges (running, waiting, KV usage, preemptions) from /metrics through a
// load level, for the binding-limit diagnosis (diagnose.ts). One scrape in flight at a time, one
// Agent for the whole level; a failed scrape is skipped, and the first failure's message is kept.
import { undici } from "../lazy.ts";
import { engineById } from "../metrics/engines/index.ts";
import { fetchRaw, metricsPath, parseRaw } from "../metrics/scrape.ts";
import { abortableSleep } from "../sleep.ts";
import { readServerSample, type ServerSample } from "./diagnose.ts";

export interface SampledServer {
  samples: ServerSample[];
  engine: string | null;
  /** Why scrapes failed (the first failure), when any did. */
  error: string | null;
  /** The running batch's ceiling the server states (llama.cpp /props total_slots), when its catalog says where. */
  ceiling?: number | null;
}

export interface ServerSampler {
  /** Stops after the scrape in flight and returns what was sampled. */
  stop(): Promise<SampledServer>;
}

/** The integer `where.field` of the JSON at `where.path` on the server (≥ 1), or null. */
async function statedCeiling(
  baseUrl: string,
  where: { path: string; field: string },
  dispatcher: NonNullable<Parameters<typeof fetchRaw>[1]>["dispatcher"],
  headers: Record<string, string> | undefined,
): Promise<number | null> {
  try {
    const raw = await fetchRaw(new URL(where.path, baseUrl).toString(), {
      timeoutMs: 3000,
      dispatcher,
      headers,
    });
    const v = (JSON.parse(raw.body.toString("utf8")) as Record<string, unknown>)[where.field];
    return typeof v === "number" && Number.isInteger(v) && v >= 1 ? v : null;
  } catch {
    return null;
  }
}

/** Scrapes `${baseUrl}/metrics` every `intervalMs` until stopped (or `signal` aborts). */
export function startServerSampler(
  baseUrl: string,
  o: { intervalMs: number; headers?: Record<string, string>; signal?: AbortSignal },
): ServerSampler {
  const stopped = new AbortController();
  const onAbort = () => stopped.abort();
  o.signal?.addEventListener("abort", onAbort, { once: true });
  const out: SampledServer = { samples: [], engine: null, error: null };
  const loop = (async () => {
    const dispatcher = new (undici().Agent)({ connections: 1, headersTimeout: 3000, bodyTimeout: 3000 });
    try {
      // Bounded by the stop signal: every pass awaits one scrape (timeout 3 s) and one sleep.
      while (!stopped.signal.aborted) {
        try {
          const raw = await fetchRaw(metricsPath(baseUrl), {
            timeoutMs: 3000,
            dispatcher,
            headers: o.headers,
            now: () => performance.timeOrigin + performance.now(),
          });
          const r = readServerSample(parseRaw(raw).exposition, raw.atMs);
          out.samples.push(r.sample);
          out.engine ??= r.engine;
          // Once, when the engine is known: its stated batch ceiling; none is kept when the probe fails.
          if (out.ceiling === undefined && out.engine) {
            out.ceiling = null;
            const where = engineById(out.engine)?.batchCeiling;
            if (where) out.ceiling = await statedCeiling(baseUrl, where, dispatcher, o.headers);
          }
        } catch (e) {
          out.error ??= (e as Error).message;
        }
        await abortableSleep(o.intervalMs, stopped.signal);
      }
    } finally {
      await dispatcher.close();
    }
  })();
  return {
    async stop() {
      stopped.abort();
      o.signal?.removeEventListener("abort", onAbort);
      await loop;
      return out;
    },
  };
}

/**
 * The samples within the measured window: idle scrapes during warm-up, connection set-up and after
 * the last request would dilute the level's running and waiting means. A window too short for two
 * scrapes keeps the one either side of it.
 */
export function clipToWindow(
  samples: readonly ServerSample[],
  w: { startMs: number; endMs: number } | null | undefined,
): ServerSample[] {
  if (!w) return [...samples];
  const inside = samples.filter((s) => s.tMs >= w.startMs && s.tMs <= w.endMs);
  if (inside.length >= 2) return inside;
  const before = samples.findLast((s) => s.tMs < w.startMs);
  const after = samples.find((s) => s.tMs > w.endMs);
  return [...(before ? [before] : []), ...inside, ...(after ? [after] : [])];
}
