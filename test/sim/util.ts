// A lean raw-HTTP SSE client for the sim tests: per-event arrival times, parsed JSON, status.
import { request } from "node:http";

export interface SseResult {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  /** Raw `data:` payloads in order (including "[DONE]"). */
  data: string[];
  /** Arrival time (performance.now, ms) of each data event. */
  times: number[];
  body: string;
  t0: number;
}

export function post(url: string, path: string, body: unknown, raw?: string): Promise<SseResult> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const req = request(
      `${url}${path}`,
      { method: "POST", headers: { "content-type": "application/json" }, agent: false },
      (res) => {
        let buf = "";
        let all = "";
        const data: string[] = [];
        const times: number[] = [];
        res.setEncoding("utf8");
        res.on("data", (d: string) => {
          const now = performance.now();
          all += d;
          buf += d;
          for (let i = buf.indexOf("\n\n"); i >= 0; i = buf.indexOf("\n\n")) {
            const ev = buf.slice(0, i);
            buf = buf.slice(i + 2);
            if (ev.startsWith("data: ")) {
              data.push(ev.slice(6));
              times.push(now);
            }
          }
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, data, times, body: all, t0 }));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.on("socket", (s) => s.setNoDelay(true));
    req.end(raw ?? JSON.stringify(body));
  });
}

export async function get(
  url: string,
  path: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: string; type: string }> {
  const r = await fetch(`${url}${path}`, { headers });
  return { status: r.status, body: await r.text(), type: r.headers.get("content-type") ?? "" };
}

/** Value of one sample line `name{labels} value` in a Prometheus exposition (labels matched as a substring). */
export function sample(text: string, name: string, labelPart = ""): number {
  for (const line of text.split("\n")) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (labelPart && !line.includes(labelPart)) continue;
    return Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return Number.NaN;
}
