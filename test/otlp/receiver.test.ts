import assert from "node:assert/strict";
import { request } from "node:http";
import { after, before, describe, test } from "node:test";
import { gzipSync } from "node:zlib";
import { JsonTraceSerializer } from "@opentelemetry/otlp-transformer";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { type OtlpReceiver, parseOtlpListen, startOtlpReceiver } from "../../src/otlp/receiver.ts";
import { createSpanEmitter, type SpanTruth } from "../../src/sim/otlp.ts";

function post(
  port: number,
  body: Buffer | string,
  headers: Record<string, string>,
  path = "/v1/traces",
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, method: "POST", path, headers }, (res) => {
      const parts: Buffer[] = [];
      res.on("data", (b) => parts.push(b));
      res.on("end", () => resolve({ status: res.statusCode!, text: Buffer.concat(parts).toString("utf8") }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

const truth = (i: number): SpanTruth => ({
  requestId: `chatcmpl-r${i}`,
  arrivalUnixMs: 1_765_000_000_000 + i * 10 + 0.123456,
  endUnixMs: 1_765_000_000_500 + i * 10,
  promptTokens: 100 + i,
  completionTokens: 20,
  maxTokens: 20,
  n: 1,
  queue: 0.001 * i,
  ttft: 0.05,
  e2e: 0.5,
  prefill: 0.04,
  decode: 0.45,
  inference: 0.49,
});

describe("OTLP/HTTP receiver", () => {
  let rx: OtlpReceiver;
  before(async () => {
    rx = await startOtlpReceiver({ port: 0, maxBodyBytes: 64 * 1024 });
  });
  after(() => rx.close());

  test("protobuf from the real OpenTelemetry JS SDK exporter: every span, attribute and time", async () => {
    const em = createSpanEmitter(rx.endpoint, { scheduledDelayMillis: 5 });
    for (let i = 0; i < 5; i++) em.emit(truth(i));
    await em.shutdown();
    const got = rx.spans.filter((s) => s.attributes["gen_ai.request.id"]?.toString().startsWith("chatcmpl-r"));
    assert.equal(got.length, 5);
    const s3 = got.find((s) => s.attributes["gen_ai.request.id"] === "chatcmpl-r3")!;
    assert.equal(s3.name, "llm_request");
    assert.equal(s3.service, "inferscope-sim");
    assert.match(s3.traceId, /^[0-9a-f]{32}$/);
    assert.match(s3.spanId, /^[0-9a-f]{16}$/);
    // Sub-millisecond start survives the nanosecond round trip.
    assert.ok(Math.abs(s3.startUnixMs - (1_765_000_000_030 + 0.123456)) < 1e-3, String(s3.startUnixMs));
    assert.equal(s3.endUnixMs, 1_765_000_000_530);
    assert.equal(s3.attributes["gen_ai.latency.time_in_queue"], 0.003);
    assert.equal(s3.attributes["gen_ai.latency.time_in_model_prefill"], 0.04);
    assert.equal(s3.attributes["gen_ai.usage.prompt_tokens"], 103);
    assert.deepEqual(rx.findings, []);
  });

  test("JSON (OTLP/JSON mapping from the project's serializer) and gzip decode to the same spans", async () => {
    const mem = new InMemorySpanExporter();
    const p = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(mem)] });
    const sp = p.getTracer("t").startSpan("llm_request", {
      startTime: [1_765_000_001, 250_000_000],
      attributes: {
        "gen_ai.request.id": "json-1",
        "gen_ai.latency.time_in_queue": 0.25,
        "gen_ai.usage.prompt_tokens": 7,
      },
    });
    sp.end([1_765_000_002, 0]);
    const bytes = JsonTraceSerializer.serializeRequest(mem.getFinishedSpans())!;
    const before = rx.spans.length;
    const r = await post(rx.port, Buffer.from(bytes), { "content-type": "application/json" });
    assert.equal(r.status, 200, r.text);
    const r2 = await post(rx.port, gzipSync(Buffer.from(bytes)), {
      "content-type": "application/json",
      "content-encoding": "gzip",
    });
    assert.equal(r2.status, 200, r2.text);
    const got = rx.spans.slice(before);
    assert.equal(got.length, 2);
    for (const s of got) {
      assert.equal(s.attributes["gen_ai.request.id"], "json-1");
      assert.equal(s.attributes["gen_ai.latency.time_in_queue"], 0.25);
      assert.equal(s.attributes["gen_ai.usage.prompt_tokens"], 7);
      assert.equal(s.startUnixMs, 1_765_000_001_250);
      assert.equal(s.endUnixMs, 1_765_000_002_000);
      assert.equal(s.traceId, sp.spanContext().traceId);
    }
    await p.shutdown();
  });

  test("bad bodies: 400 with the reason, 413 over the cap, 415 wrong type, 404 wrong path; the receiver keeps going", async () => {
    const n0 = rx.findings.length;
    const bad = await post(rx.port, Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f]), {
      "content-type": "application/x-protobuf",
    });
    assert.equal(bad.status, 400);
    assert.match(bad.text, /protobuf ExportTraceServiceRequest does not decode/);
    const badJson = await post(rx.port, '{"resourceSpans": [', { "content-type": "application/json" });
    assert.equal(badJson.status, 400);
    assert.match(badJson.text, /JSON body does not parse/);
    const badTime = await post(
      rx.port,
      JSON.stringify({ resourceSpans: [{ scopeSpans: [{ spans: [{ startTimeUnixNano: "-5" }] }] }] }),
      { "content-type": "application/json" },
    );
    assert.equal(badTime.status, 400);
    assert.match(badTime.text, /resourceSpans\[0\]\.scopeSpans\[0\]\.spans\[0\]\.startTimeUnixNano/);
    const big = await post(rx.port, Buffer.alloc(64 * 1024 + 1), { "content-type": "application/x-protobuf" });
    assert.equal(big.status, 413);
    assert.match(big.text, /over the 65536-byte cap/);
    const bomb = await post(rx.port, gzipSync(Buffer.alloc(1 << 20)), {
      "content-type": "application/x-protobuf",
      "content-encoding": "gzip",
    });
    assert.equal(bomb.status, 413);
    assert.match(bomb.text, /after gunzip/);
    const type = await post(rx.port, "x", { "content-type": "text/plain" });
    assert.equal(type.status, 415);
    const path = await post(rx.port, "{}", { "content-type": "application/json" }, "/v1/metrics");
    assert.equal(path.status, 404);
    assert.deepEqual(
      rx.findings.slice(n0).map((f) => [f.kind, f.status]),
      [
        ["malformed", 400],
        ["malformed", 400],
        ["malformed", 400],
        ["too-large", 413],
        ["too-large", 413],
        ["unsupported-media-type", 415],
        ["not-found", 404],
      ],
    );
    // Still accepting after all that.
    const ok = await post(rx.port, "{}", { "content-type": "application/json" });
    assert.equal(ok.status, 200);
  });

  test("past the span cap spans are counted, not kept, and said so", async () => {
    const small = await startOtlpReceiver({ port: 0, maxSpans: 3 });
    const em = createSpanEmitter(small.endpoint, { scheduledDelayMillis: 5 });
    for (let i = 0; i < 5; i++) em.emit(truth(i));
    await em.shutdown();
    assert.equal(small.spans.length, 3);
    // Read while the receiver still runs, as bench reads it.
    assert.deepEqual(
      small.findings.map((f) => [f.kind, f.detail]),
      [["span-cap", "2 spans past the first 3 were accepted but not kept (memory bound)"]],
    );
    await small.close();
  });

  test("--otlp-receiver [HOST:]PORT: loopback by default, clear error otherwise", () => {
    assert.deepEqual(parseOtlpListen("4318"), { host: "127.0.0.1", port: 4318 });
    assert.deepEqual(parseOtlpListen("0.0.0.0:4318"), { host: "0.0.0.0", port: 4318 });
    assert.deepEqual(parseOtlpListen("[::1]:4318"), { host: "::1", port: 4318 });
    assert.throws(() => parseOtlpListen("localhost"), /expected \[HOST:\]PORT/);
    assert.throws(() => parseOtlpListen("70000"), /expected \[HOST:\]PORT/);
  });
});
