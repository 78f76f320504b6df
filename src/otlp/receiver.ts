// An OTLP/HTTP trace receiver (POST /v1/traces, protobuf or JSON, gzip allowed) that an engine
// exports its request spans to while bench runs. Bad bodies are answered (400, 413, 415) and kept
// as findings; none of them stops the receiver.

import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { gunzipSync } from "node:zlib";
import type { ServerInterceptor, ServerUnaryCall, sendUnaryData } from "@grpc/grpc-js";
import { UsageError } from "../errors.ts";
import { engineById } from "../metrics/engines/index.ts";
import { decodeJsonTraces, decodeProtobufTraces, OtlpDecodeError, type OtlpSpan } from "./spans.ts";

export interface OtlpFinding {
  kind: "malformed" | "too-large" | "unsupported-media-type" | "not-found" | "span-cap";
  status: number;
  detail: string;
}

export interface OtlpReceiverOptions {
  host?: string;
  port: number;
  /** Largest body accepted, compressed or not (bytes); larger ones get 413. */
  maxBodyBytes?: number;
  /** Spans kept (default one per request bench can send); past it they are counted, not kept. */
  maxSpans?: number;
  /** Called with each accepted request's spans, in arrival order. */
  onSpans?: (spans: OtlpSpan[]) => void;
  /** Also take OTLP/gRPC (TraceService/Export) on this port (0: a free one); its host defaults to `host`. */
  grpcPort?: number;
  grpcHost?: string;
}

export interface OtlpReceiver {
  readonly host: string;
  readonly port: number;
  /** The endpoint an engine exports to over HTTP (vLLM's --otlp-traces-endpoint, + /v1/traces). */
  readonly endpoint: string;
  /** The gRPC endpoint, when one was asked for. */
  readonly grpcEndpoint: string | null;
  readonly spans: OtlpSpan[];
  readonly findings: OtlpFinding[];
  /** Export requests accepted. */
  readonly requests: number;
  /** Calls `fn` after each accepted export request; returns the call that stops it. */
  listen(fn: () => void): () => void;
  /** Forgets the spans kept so far (a caller that has joined them): a long run holds one block's at a time. */
  clear(): void;
  close(): Promise<void>;
}

export const DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024;
/** One span per request bench can send (src/load/limits.ts), plus warm-up and strangers. */
export const DEFAULT_MAX_SPANS = 1_100_000;
/** Findings kept in full; past it only counted, so a flood cannot grow memory. */
const MAX_FINDINGS = 100;

/** `[HOST:]PORT` → host and port; loopback when no host is given. */
export function parseOtlpListen(spec: string, flag = "--otlp-receiver"): { host: string; port: number } {
  const m = /^(?:(\[[^\]]+\]|[^:]+):)?(\d+)$/.exec(spec.trim());
  const port = m ? Number(m[2]) : Number.NaN;
  if (!m || !Number.isInteger(port) || port < 0 || port > 65535)
    throw new UsageError(`${flag}: expected [HOST:]PORT (e.g. 4318 or 127.0.0.1:4318), got '${spec}'`);
  const host = m[1] ? m[1].replace(/^\[|\]$/g, "") : "127.0.0.1";
  return { host, port };
}

/** The receiver flags of bench and tune (`--otlp-receiver`, `--otlp-grpc-receiver`), parsed; null when not given. */
export function parseOtlpFlags(o: {
  otlpReceiver?: unknown;
  otlpGrpcReceiver?: unknown;
}): { host: string; port: number; grpc?: { host: string; port: number } } | null {
  const listen = o.otlpReceiver !== undefined ? parseOtlpListen(String(o.otlpReceiver)) : null;
  const grpc =
    o.otlpGrpcReceiver !== undefined ? parseOtlpListen(String(o.otlpGrpcReceiver), "--otlp-grpc-receiver") : null;
  if (grpc && !listen)
    throw new UsageError("--otlp-grpc-receiver goes with --otlp-receiver (the HTTP port), e.g. --otlp-receiver 4318");
  return listen && { ...listen, ...(grpc ? { grpc } : {}) };
}

export async function startOtlpReceiver(o: OtlpReceiverOptions): Promise<OtlpReceiver> {
  const host = o.host ?? "127.0.0.1";
  const cap = o.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  const spans: OtlpSpan[] = [];
  const findings: OtlpFinding[] = [];
  let requests = 0;
  let dropped = 0;
  const listeners = new Set<() => void>();
  const find = (f: OtlpFinding) => {
    if (findings.length < MAX_FINDINGS) findings.push(f);
    else dropped++;
  };

  const maxSpans = o.maxSpans ?? DEFAULT_MAX_SPANS;
  let overCap = 0;
  const accept = (got: OtlpSpan[]) => {
    requests++;
    for (const s of got) {
      if (spans.length < maxSpans) spans.push(s);
      else overCap++;
    }
    o.onSpans?.(got);
    for (const fn of listeners) fn();
  };

  const answer = (res: ServerResponse, status: number, json: boolean, detail?: string) => {
    // Errors carry a google.rpc.Status-shaped message, as the OTLP spec asks; success an empty response.
    const body = detail === undefined ? (json ? "{}" : "") : JSON.stringify({ code: status, message: detail });
    res.writeHead(status, {
      "content-type": detail !== undefined || json ? "application/json" : "application/x-protobuf",
      "content-length": Buffer.byteLength(body),
    });
    res.end(body);
  };

  const handle = (req: IncomingMessage, res: ServerResponse) => {
    const path = (req.url ?? "").split("?")[0];
    // "/" too: an exporter given the bare endpoint posts there.
    if (req.method !== "POST" || (path !== "/v1/traces" && path !== "/")) {
      const detail = `${req.method} ${path}: this receiver takes POST /v1/traces only`;
      find({ kind: "not-found", status: 404, detail });
      req.resume();
      answer(res, 404, true, detail);
      return;
    }
    const type = String(req.headers["content-type"] ?? "")
      .split(";")[0]!
      .trim()
      .toLowerCase();
    const json = type === "application/json";
    if (!json && type !== "application/x-protobuf" && type !== "application/protobuf") {
      const detail = `content-type '${type}' is neither application/x-protobuf nor application/json`;
      find({ kind: "unsupported-media-type", status: 415, detail });
      req.resume();
      answer(res, 415, true, detail);
      return;
    }
    const tooLarge = (n: number | string) => {
      const detail = `body of ${n} bytes is over the ${cap}-byte cap`;
      find({ kind: "too-large", status: 413, detail });
      answer(res, 413, json, detail);
    };
    const declared = Number(req.headers["content-length"]);
    if (Number.isFinite(declared) && declared > cap) {
      // Answered before reading; the connection closes so the unread body is not parsed as a request.
      res.setHeader("connection", "close");
      tooLarge(declared);
      req.resume();
      return;
    }
    const parts: Buffer[] = [];
    let size = 0;
    let over = false;
    req.on("data", (b: Buffer) => {
      if (over) return;
      size += b.length;
      if (size > cap) {
        over = true;
        parts.length = 0;
        res.setHeader("connection", "close");
        tooLarge(`more than ${cap}`);
        return;
      }
      parts.push(b);
    });
    req.on("error", () => {});
    req.on("end", () => {
      if (over) return;
      let body: Buffer = Buffer.concat(parts, size);
      const enc = String(req.headers["content-encoding"] ?? "identity").toLowerCase();
      try {
        if (enc === "gzip") {
          try {
            body = gunzipSync(body, { maxOutputLength: cap });
          } catch (e) {
            if ((e as any)?.code === "ERR_BUFFER_TOO_LARGE") {
              tooLarge(`more than ${cap} (after gunzip)`);
              return;
            }
            throw new OtlpDecodeError(`gzip body does not inflate: ${(e as Error).message}`);
          }
        } else if (enc !== "identity") throw new OtlpDecodeError(`content-encoding '${enc}' is not supported`);
        const got = json ? decodeJsonTraces(body.toString("utf8")) : decodeProtobufTraces(body);
        accept(got);
        answer(res, 200, json);
      } catch (e) {
        if (!(e instanceof OtlpDecodeError)) throw e;
        find({ kind: "malformed", status: 400, detail: e.message });
        answer(res, 400, json, e.message);
      }
    });
  };

  const server: Server = createServer(handle);
  await new Promise<void>((resolve, reject) => {
    server.once("error", (e: any) =>
      reject(
        new UsageError(
          `--otlp-receiver: cannot listen on ${host}:${o.port} (${e?.code === "EADDRINUSE" ? "address in use" : (e?.message ?? e)})`,
        ),
      ),
    );
    server.listen(o.port, host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  const urlHost = host.includes(":") ? `[${host}]` : host;
  let grpc: { port: number; close(): Promise<void> } | null = null;
  if (o.grpcPort !== undefined) {
    try {
      grpc = await startGrpc(o.grpcHost ?? host, o.grpcPort, cap, accept, find);
    } catch (e) {
      server.close();
      throw e;
    }
  }
  const grpcHost = o.grpcHost ?? host;
  return {
    host,
    port,
    endpoint: `http://${urlHost}:${port}`,
    grpcEndpoint: grpc ? `http://${grpcHost.includes(":") ? `[${grpcHost}]` : grpcHost}:${grpc.port}` : null,
    spans,
    // The counts of what the caps left out, as findings, whenever read.
    get findings() {
      const out = findings.slice();
      if (dropped > 0)
        out.push({ kind: "malformed", status: 0, detail: `${dropped} more findings not kept (cap reached)` });
      if (overCap > 0)
        out.push({
          kind: "span-cap",
          status: 200,
          detail: `${overCap} spans past the first ${maxSpans} were accepted but not kept (memory bound)`,
        });
      return out;
    },
    get requests() {
      return requests;
    },
    listen(fn) {
      listeners.add(fn);
      return () => listeners.delete(fn);
    },
    clear() {
      spans.length = 0;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => (grpc ? grpc.close().then(resolve) : resolve()));
      }),
  };
}

/** The engines that send request spans, and how each is started (their catalog entries hold the flags). */
const SPAN_ENGINES = [
  { id: "vllm", cmd: "vllm serve …" },
  { id: "sglang", cmd: "python -m sglang.launch_server …" },
] as const;

/**
 * The engine-side flags that make it export to this receiver, per engine (both speak gRPC unless told http/protobuf,
 * and then post to the endpoint as given).
 */
export function engineFlagHint(endpoint: string, grpcEndpoint: string | null = null): string {
  const lines = SPAN_ENGINES.map(({ id, cmd }) => {
    const { name, requestSpans: e } = engineById(id)!;
    const env = Object.entries(e!.env).map(([k, v]) => `${k}=${v} `);
    const http = `${env.join("")}${cmd} ${e!.args(endpoint).join(" ")}`;
    if (!grpcEndpoint) return `${name}: ${http}`;
    const grpc = `${cmd} ${e!
      .args(grpcEndpoint)
      .join(" ")
      .replace(/\/v1\/traces$/, "")}`;
    return `${name}: ${grpc} (or over HTTP: ${http})`;
  });
  return `start the engine with ${lines.join("; ")}`;
}

const EXPORT_PATH = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

/**
 * OTLP/gRPC: TraceService/Export with the bytes passed through, so the same generated codec decodes
 * them. grpc-js itself answers RESOURCE_EXHAUSTED past the cap (and inflates gzip), a too-large finding here; a body
 * that does not decode is INVALID_ARGUMENT and a finding.
 */
async function startGrpc(
  host: string,
  port: number,
  cap: number,
  accept: (got: OtlpSpan[]) => void,
  find: (f: OtlpFinding) => void,
): Promise<{ port: number; close(): Promise<void> }> {
  const grpc = await import("@grpc/grpc-js");
  // grpc-js refuses a message past the cap (or one whose gzip inflates past it) before any handler runs; the only
  // sign that reaches us is the call's cancellation with no message received, so that is the too-large finding.
  const refused: ServerInterceptor = (_method, call) => {
    let received = false;
    return new grpc.ServerInterceptingCall(call, {
      start: (next) =>
        next({
          onReceiveMessage: (message, nextMessage) => {
            received = true;
            nextMessage(message);
          },
          onCancel: () => {
            if (!received)
              find({
                kind: "too-large",
                status: 413,
                detail: `gRPC: an export was refused before decoding (RESOURCE_EXHAUSTED: over the ${cap}-byte cap, or inflating past it), or the engine cancelled it`,
              });
          },
        }),
    });
  };
  const server = new grpc.Server({ "grpc.max_receive_message_length": cap, interceptors: [refused] });
  const pass = (b: Buffer) => b;
  server.addService(
    {
      Export: {
        path: EXPORT_PATH,
        requestStream: false,
        responseStream: false,
        requestSerialize: pass,
        requestDeserialize: pass,
        // An empty ExportTraceServiceResponse: full success.
        responseSerialize: () => Buffer.alloc(0),
        responseDeserialize: pass,
      },
    },
    {
      Export: (call: ServerUnaryCall<Buffer, Buffer>, cb: sendUnaryData<Buffer>) => {
        try {
          accept(decodeProtobufTraces(call.request));
          cb(null, Buffer.alloc(0));
        } catch (e) {
          if (!(e instanceof OtlpDecodeError)) throw e;
          find({ kind: "malformed", status: 400, detail: `gRPC: ${e.message}` });
          cb({ code: grpc.status.INVALID_ARGUMENT, details: e.message });
        }
      },
    },
  );
  const addr = host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`;
  const bound = await new Promise<number>((resolve, reject) =>
    server.bindAsync(addr, grpc.ServerCredentials.createInsecure(), (err, p) =>
      err ? reject(new UsageError(`--otlp-grpc-receiver: cannot listen on ${addr} (${err.message})`)) : resolve(p),
    ),
  );
  return {
    port: bound,
    close: () =>
      new Promise<void>((resolve) => {
        // Connections an engine keeps open would hold tryShutdown: after a second they are cut.
        const t = setTimeout(() => server.forceShutdown(), 1000);
        t.unref();
        server.tryShutdown(() => {
          clearTimeout(t);
          resolve();
        });
      }),
  };
}
