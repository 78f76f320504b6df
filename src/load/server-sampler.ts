// Samples the server's load gauges (running, waiting, KV usage, preemptions) from /metrics through a
// load level, for the binding-limit diagnosis (diagnose.ts). One scrape in flight at a time, one
// Agent for the whole level; a failed scrape is skipped, and the first failure's message is kept.
import { undici } from "../lazy.ts";
import { fetchRaw, metricsPath, parseRaw } from "../metrics/scrape.ts";
import { abortableSleep } from "../sleep.ts";
import { readServerSample, type ServerSample } from "./diagnose.ts";

export interface SampledServer {
  samples: ServerSample[];
  engine: string | null;
  /** Why scrapes failed (the first failure), when any did. */
  error: string | null;
}

export interface ServerSampler {
  /** Stops after the scrape in flight and returns what was sampled. */
  stop(): Promise<SampledServer>;
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
