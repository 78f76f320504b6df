// Asks a running server what it is: the info endpoints engines serve, /v1/models, the /metrics
// families and the response headers. I/O only; every answer is kept raw for the pure detectors
// (detect.ts). An endpoint that is missing, slow or broken is simply absent from the answers.
import { undici } from "../lazy.ts";
import { detectEngines } from "../metrics/engines/index.ts";
import { scrape } from "../metrics/scrape.ts";

/** What the server answered, endpoint by endpoint (JSON bodies as parsed; absent when not served). */
export interface ServerAnswers {
  origin: string;
  /** GET path → parsed JSON body of a 2xx answer. */
  json: Record<string, unknown>;
  /** GET path → HTTP status, for every endpoint asked (0: no answer). */
  status: Record<string, number>;
  /** Lower-cased response headers of the first endpoint that answered (Server, x-*). */
  headers: Record<string, string>;
  /** /metrics family names, when /metrics could be read. */
  metricFamilies?: string[];
  /** The metrics-based engine detections, best first. */
  metricEngines?: Array<{ id: string; confidence: number }>;
  metricsError?: string;
}

/** Every engine's info endpoint: vLLM /version, llama.cpp /props, TGI /info, SGLang /get_server_info|/server_info. */
export const INFO_PATHS = ["/v1/models", "/version", "/props", "/info", "/get_server_info", "/server_info"];

export interface ProbeOptions {
  apiKey?: string;
  /** Per request (connect, headers and body). Default 3 s. */
  timeoutMs?: number;
  /** Where the Prometheus text is (default /metrics). */
  metricsPath?: string;
  signal?: AbortSignal;
}

export async function probeServer(baseUrl: string, o: ProbeOptions = {}): Promise<ServerAnswers> {
  const origin = new URL(baseUrl).origin;
  const timeoutMs = o.timeoutMs ?? 3000;
  const { Agent, request } = undici();
  const agent = new Agent({ connect: { timeout: timeoutMs }, headersTimeout: timeoutMs, bodyTimeout: timeoutMs });
  const auth: Record<string, string> = o.apiKey ? { authorization: `Bearer ${o.apiKey}` } : {};
  const out: ServerAnswers = { origin, json: {}, status: {}, headers: {} };
  const get = async (path: string) => {
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(), timeoutMs * 2);
    const onAbort = () => ac.abort();
    o.signal?.addEventListener("abort", onAbort, { once: true });
    try {
      const res = await request(`${origin}${path}`, {
        dispatcher: agent,
        headers: { accept: "application/json", ...auth },
        signal: ac.signal,
      });
      const chunks: Buffer[] = [];
      let n = 0;
      for await (const c of res.body) {
        n += (c as Buffer).length;
        if (n > 1 << 20) break; // an info document is small; a huge one is not one
        chunks.push(c as Buffer);
      }
      out.status[path] = res.statusCode;
      if (Object.keys(out.headers).length === 0)
        for (const [k, v] of Object.entries(res.headers)) if (typeof v === "string") out.headers[k.toLowerCase()] = v;
      if (res.statusCode >= 200 && res.statusCode < 300) {
        try {
          out.json[path] = JSON.parse(Buffer.concat(chunks).toString("utf8"));
        } catch {
          // not JSON: an HTML page or text; the status is kept
        }
      }
    } catch {
      out.status[path] = 0;
    } finally {
      clearTimeout(timer);
      o.signal?.removeEventListener("abort", onAbort);
    }
  };
  const metrics = async () => {
    try {
      const snap = await scrape(`${origin}${o.metricsPath ?? "/metrics"}`, { timeoutMs, headers: auth });
      out.metricFamilies = snap.exposition.families.map((f) => f.name);
      out.metricEngines = detectEngines(snap.exposition.families).map((d) => ({
        id: d.engine.id,
        confidence: d.confidence,
      }));
    } catch (err) {
      out.metricsError = (err as Error).message;
    }
  };
  try {
    await Promise.all([...INFO_PATHS.map(get), metrics()]);
  } finally {
    await agent.close().catch(() => {});
  }
  return out;
}
