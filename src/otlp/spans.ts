// OTLP trace export requests → plain span records. Protobuf bodies are decoded with the
// OpenTelemetry project's own generated definitions (@opentelemetry/otlp-transformer); JSON bodies
// follow the OTLP/JSON mapping (hex ids, int64 as strings). Both land in the same normaliser.
import { createRequire } from "node:module";

export interface OtlpSpan {
  traceId: string;
  spanId: string;
  /** "" for a root span. */
  parentSpanId: string;
  name: string;
  /** Epoch milliseconds (from the span's unix nanoseconds). */
  startUnixMs: number;
  endUnixMs: number;
  /** Attributes with scalar values; arrays and maps are kept as JSON text. */
  attributes: Record<string, string | number | boolean>;
  /** The resource's service.name, when given. */
  service: string | null;
}

export class OtlpDecodeError extends Error {}

interface Codec {
  decode(buf: Uint8Array): any;
  encode(msg: any): { finish(): Uint8Array };
  fromObject(o: any): any;
}
let codec: Codec | null = null;
/** The generated ExportTraceServiceRequest codec (loaded on first use: ~0.5 MB of generated code). */
export function traceRequestCodec(): Codec {
  if (!codec) {
    const require = createRequire(import.meta.url);
    const root = require("@opentelemetry/otlp-transformer/build/src/generated/root.js");
    codec = root.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest as Codec;
  }
  return codec;
}

export function decodeProtobufTraces(body: Uint8Array): OtlpSpan[] {
  let msg: any;
  try {
    msg = traceRequestCodec().decode(body);
  } catch (e) {
    throw new OtlpDecodeError(`protobuf ExportTraceServiceRequest does not decode: ${(e as Error).message}`);
  }
  return normalize(msg);
}

export function decodeJsonTraces(text: string): OtlpSpan[] {
  let obj: unknown;
  try {
    obj = JSON.parse(text);
  } catch (e) {
    throw new OtlpDecodeError(`JSON body does not parse: ${(e as Error).message}`);
  }
  if (obj === null || typeof obj !== "object" || Array.isArray(obj))
    throw new OtlpDecodeError("JSON body is not an ExportTraceServiceRequest object");
  return normalize(obj);
}

function hexId(v: unknown, what: string): string {
  if (v instanceof Uint8Array) return Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString("hex");
  if (typeof v === "string" && /^[0-9a-fA-F]*$/.test(v)) return v.toLowerCase();
  if (v === undefined || v === null) return "";
  throw new OtlpDecodeError(`${what} is not a hex string`);
}

/** Unix nanoseconds (number, decimal string or protobufjs Long) → epoch ms. */
function nanosToMs(v: unknown, what: string): number {
  if (v === undefined || v === null) return Number.NaN;
  const s = String(v);
  if (!/^\d+$/.test(s)) throw new OtlpDecodeError(`${what} is not an unsigned integer (${s.slice(0, 40)})`);
  const ns = BigInt(s);
  // Whole ms as bigint, the rest as a fraction: keeps sub-microsecond digits a double would lose.
  return Number(ns / 1_000_000n) + Number(ns % 1_000_000n) / 1e6;
}

function anyValue(v: any): string | number | boolean | undefined {
  if (v === null || typeof v !== "object") return undefined;
  if (v.stringValue !== undefined && v.stringValue !== null) return String(v.stringValue);
  if (v.boolValue !== undefined && v.boolValue !== null) return Boolean(v.boolValue);
  if (v.intValue !== undefined && v.intValue !== null) return Number(String(v.intValue));
  if (v.doubleValue !== undefined && v.doubleValue !== null) return Number(v.doubleValue);
  if (v.arrayValue) return JSON.stringify((v.arrayValue.values ?? []).map(anyValue));
  if (v.kvlistValue) return JSON.stringify(attrs(v.kvlistValue.values));
  if (v.bytesValue) return hexId(v.bytesValue, "bytesValue");
  return undefined;
}

function attrs(list: unknown): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  if (!Array.isArray(list)) return out;
  for (const kv of list) {
    if (!kv || typeof kv.key !== "string") continue;
    const v = anyValue(kv.value);
    if (v !== undefined) out[kv.key] = v;
  }
  return out;
}

function arr(v: unknown, what: string): any[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw new OtlpDecodeError(`${what} is not an array`);
  return v;
}

function normalize(msg: any): OtlpSpan[] {
  const out: OtlpSpan[] = [];
  const rss = arr(msg.resourceSpans, "resourceSpans");
  rss.forEach((rs, i) => {
    const res = attrs(rs?.resource?.attributes);
    const service = typeof res["service.name"] === "string" ? (res["service.name"] as string) : null;
    // Old exporters still send instrumentationLibrarySpans.
    const scopes = arr(rs?.scopeSpans ?? rs?.instrumentationLibrarySpans, `resourceSpans[${i}].scopeSpans`);
    scopes.forEach((ss, j) => {
      arr(ss?.spans, `resourceSpans[${i}].scopeSpans[${j}].spans`).forEach((sp, k) => {
        const where = `resourceSpans[${i}].scopeSpans[${j}].spans[${k}]`;
        if (sp === null || typeof sp !== "object") throw new OtlpDecodeError(`${where} is not an object`);
        out.push({
          traceId: hexId(sp.traceId, `${where}.traceId`),
          spanId: hexId(sp.spanId, `${where}.spanId`),
          parentSpanId: hexId(sp.parentSpanId, `${where}.parentSpanId`),
          name: typeof sp.name === "string" ? sp.name : "",
          startUnixMs: nanosToMs(sp.startTimeUnixNano, `${where}.startTimeUnixNano`),
          endUnixMs: nanosToMs(sp.endTimeUnixNano, `${where}.endTimeUnixNano`),
          attributes: attrs(sp.attributes),
          service,
        });
      });
    });
  });
  return out;
}
