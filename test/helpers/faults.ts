// Hostile and broken servers for tests: real loopback servers, one per misbehaviour, every loop bounded
// in count and time. Each answers every path a command asks for (/health, /v1/models, /metrics,
// /v1/completions, /start_profile …) with its own fault, except where a fault only makes sense in one
// place (the SSE faults serve a healthy /v1/models so a client gets as far as streaming).
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from "node:http";
import { type AddressInfo, createServer as createNetServer, type Server, type Socket } from "node:net";

export type FaultName =
  | "refused"
  | "silent"
  | "trickle"
  | "http500"
  | "http401"
  | "redirect"
  | "html"
  | "empty"
  | "sse-malformed"
  | "sse-keepalive"
  | "sse-cut"
  | "escapes"
  | "bad-utf8";

export const FAULTS: readonly FaultName[] = [
  "refused",
  "silent",
  "trickle",
  "http500",
  "http401",
  "redirect",
  "html",
  "empty",
  "sse-malformed",
  "sse-keepalive",
  "sse-cut",
  "escapes",
  "bad-utf8",
];

/** What the hostile server puts in its text: ESC sequences that clear the screen and recolour it, and a BEL. */
export const ESC_PAYLOAD = "\x1b[2J\x1b[31mPWNED\x1b]0;title\x07";

export interface FaultServer {
  fault: FaultName;
  url: string;
  port: number;
  /** Requests seen, by path. */
  hits: Map<string, number>;
  close(): Promise<void>;
}

const MODEL = "fault-model";
const MAX_TRICKLE_BYTES = 120; // 2 minutes at one byte a second, far past any test's bound
const MAX_KEEPALIVES = 600; // 60 s of comments every 100 ms

function modelsBody(id = MODEL): string {
  return JSON.stringify({ object: "list", data: [{ id, object: "model", owned_by: "fault" }] });
}

function chunk(text: string, finish: string | null = null): string {
  return `data: ${JSON.stringify({ id: "c", object: "text_completion", model: MODEL, choices: [{ index: 0, text, finish_reason: finish }] })}\n\n`;
}

/** Bounded timers a server owns, cleared on close. */
class Timers {
  private readonly set = new Set<NodeJS.Timeout>();
  every(ms: number, max: number, tick: (n: number) => boolean): void {
    let n = 0;
    const t = setInterval(() => {
      n++;
      if (n > max || !tick(n)) {
        clearInterval(t);
        this.set.delete(t);
      }
    }, ms);
    this.set.add(t);
  }
  clear(): void {
    for (const t of this.set) clearInterval(t);
    this.set.clear();
  }
}

type Handler = (req: IncomingMessage, res: ServerResponse, path: string, timers: Timers) => void;

const json = (res: ServerResponse, status: number, body: unknown) => {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
};

/** A healthy /health and /v1/models, and 404 for /metrics: what an SSE fault's server answers outside its stream. */
function healthyAside(res: ServerResponse, path: string): boolean {
  if (path === "/health") {
    res.writeHead(200);
    res.end();
    return true;
  }
  if (path === "/v1/models") {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(modelsBody());
    return true;
  }
  if (path === "/version") {
    json(res, 200, { version: "0.0.0-fault" });
    return true;
  }
  if (path !== "/v1/completions" && path !== "/v1/chat/completions") {
    json(res, 404, { detail: "Not Found" });
    return true;
  }
  return false;
}

const HANDLERS: Record<Exclude<FaultName, "refused" | "silent">, Handler> = {
  trickle(_req, res, _path, timers) {
    res.writeHead(200, { "content-type": "text/plain; version=0.0.4", "transfer-encoding": "chunked" });
    res.flushHeaders();
    timers.every(1000, MAX_TRICKLE_BYTES, () => {
      if (res.destroyed) return false;
      res.write("#");
      return true;
    });
  },
  http500(_req, res) {
    json(res, 500, { error: { message: "engine crashed: CUDA error: out of memory", type: "InternalServerError" } });
  },
  http401(_req, res) {
    json(res, 401, { error: { message: "invalid API key", type: "AuthenticationError" } });
  },
  redirect(_req, res) {
    res.writeHead(301, { location: "http://127.0.0.1:1/elsewhere", "content-type": "text/plain" });
    res.end("Moved Permanently");
  },
  html(_req, res) {
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    res.end("<!doctype html><html><head><title>Welcome to nginx!</title></head><body>hello</body></html>");
  },
  empty(_req, res) {
    res.writeHead(200, { "content-type": "text/plain", "content-length": "0" });
    res.end();
  },
  "sse-malformed"(_req, res, path) {
    if (healthyAside(res, path)) return;
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.end('data: {"choices": [{"text": "hel\n\ndata: not json at all\n\n');
  },
  "sse-keepalive"(_req, res, path, timers) {
    if (healthyAside(res, path)) return;
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.flushHeaders();
    timers.every(100, MAX_KEEPALIVES, () => {
      if (res.destroyed) return false;
      res.write(": keepalive\n\n");
      return true;
    });
  },
  "sse-cut"(_req, res, path) {
    if (healthyAside(res, path)) return;
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.write(chunk("Hello"));
    res.write(chunk(" wor"));
    // Half a chunk, then the connection drops.
    res.write('data: {"id":"c","choices":[{"index":0,"te');
    setImmediate(() => res.socket?.destroy());
  },
  escapes(_req, res, path) {
    if (path === "/health") {
      res.writeHead(200);
      res.end();
      return;
    }
    if (path === "/v1/models") {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(modelsBody(`evil${ESC_PAYLOAD}`));
      return;
    }
    if (path === "/metrics") {
      res.writeHead(200, { "content-type": "text/plain; version=0.0.4" });
      res.end(
        `# HELP evil_total ${ESC_PAYLOAD} help text\n# TYPE evil_total counter\n` +
          `evil_total{model_name="${ESC_PAYLOAD.replace(/\x07/g, "")}"} 1\n`,
      );
      return;
    }
    json(res, 400, { error: { message: `bad request ${ESC_PAYLOAD}`, type: "BadRequestError" } });
  },
  "bad-utf8"(_req, res, path) {
    if (path === "/health") {
      res.writeHead(200);
      res.end();
      return;
    }
    if (path === "/v1/models") {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(Buffer.concat([Buffer.from('{"data":[{"id":"m'), Buffer.from([0xff, 0xfe]), Buffer.from('"}]}')]));
      return;
    }
    const bad = Buffer.concat([
      Buffer.from('# TYPE x_total counter\nx_total{a="'),
      Buffer.from([0xc3, 0x28]),
      Buffer.from('"} 1\n'),
    ]);
    if (path === "/metrics") {
      res.writeHead(200, { "content-type": "text/plain; version=0.0.4" });
      res.end(bad);
      return;
    }
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.end(
      Buffer.concat([
        Buffer.from('data: {"choices":[{"index":0,"text":"'),
        Buffer.from([0xff]),
        Buffer.from('"}]}\n\n'),
      ]),
    );
  },
};

/** A port nothing listens on (bound, read, closed; nothing else on this host picks ports below the ephemeral range). */
async function closedPort(): Promise<number> {
  const s = createNetServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const port = (s.address() as AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

export async function startFaultServer(fault: FaultName): Promise<FaultServer> {
  const hits = new Map<string, number>();
  if (fault === "refused") {
    const port = await closedPort();
    return { fault, url: `http://127.0.0.1:${port}`, port, hits, close: async () => {} };
  }
  const sockets = new Set<Socket>();
  const timers = new Timers();
  let server: Server;
  if (fault === "silent") {
    // Accepts the connection, reads whatever comes, never answers.
    server = createNetServer((s) => {
      s.on("data", () => hits.set("*", (hits.get("*") ?? 0) + 1));
      s.on("error", () => {});
    });
  } else {
    const handler = HANDLERS[fault];
    server = createHttpServer((req, res) => {
      const path = (req.url ?? "/").split("?")[0]!;
      hits.set(path, (hits.get(path) ?? 0) + 1);
      req.resume();
      res.on("error", () => {});
      handler(req, res, path, timers);
    });
    (server as ReturnType<typeof createHttpServer>).keepAliveTimeout = 1000;
  }
  server.on("connection", (s: Socket) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  return {
    fault,
    url: `http://127.0.0.1:${port}`,
    port,
    hits,
    close: () =>
      new Promise<void>((resolve) => {
        timers.clear();
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/** Starts one server per fault; close them all with closeAll. */
export async function startFaultServers(faults: readonly FaultName[] = FAULTS): Promise<Map<FaultName, FaultServer>> {
  const out = new Map<FaultName, FaultServer>();
  for (const f of faults) out.set(f, await startFaultServer(f));
  return out;
}

export async function closeAll(servers: Map<FaultName, FaultServer>): Promise<void> {
  await Promise.all([...servers.values()].map((s) => s.close()));
}
