// OTLP/gRPC: what vLLM and SGLang send by default. A real OpenTelemetry SDK gRPC exporter talks to
// the receiver; a raw gRPC call with bytes that are no ExportTraceServiceRequest gets INVALID_ARGUMENT.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Client, credentials, status } from "@grpc/grpc-js";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-grpc";
import { BasicTracerProvider, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { engineFlagHint, type OtlpReceiver, startOtlpReceiver } from "../../src/otlp/receiver.ts";

describe("OTLP/gRPC receiver", () => {
  let rx: OtlpReceiver;
  before(async () => {
    rx = await startOtlpReceiver({ port: 0, grpcPort: 0, maxBodyBytes: 64 * 1024 });
  });
  after(() => rx.close());

  test("spans from the SDK's gRPC exporter arrive with their attributes and times", async () => {
    assert.match(rx.grpcEndpoint!, /^http:\/\/127\.0\.0\.1:\d+$/);
    const p = new BasicTracerProvider({
      spanProcessors: [new SimpleSpanProcessor(new OTLPTraceExporter({ url: rx.grpcEndpoint! }))],
    });
    const sp = p.getTracer("t").startSpan("llm_request", {
      startTime: [1_765_000_003, 500_000],
      attributes: { "gen_ai.request.id": "cmpl-g1", "gen_ai.latency.time_in_model_prefill": 0.0125 },
    });
    sp.end([1_765_000_004, 0]);
    await p.shutdown();
    const got = rx.spans.filter((s) => s.attributes["gen_ai.request.id"] === "cmpl-g1");
    assert.equal(got.length, 1);
    assert.equal(got[0]!.startUnixMs, 1_765_000_003_000.5);
    assert.equal(got[0]!.attributes["gen_ai.latency.time_in_model_prefill"], 0.0125);
    assert.deepEqual(rx.findings, []);
    assert.match(engineFlagHint(rx.endpoint, rx.grpcEndpoint), /--otlp-traces-endpoint http:\/\/127\.0\.0\.1:\d+ /);
  });

  test("a body that does not decode: INVALID_ARGUMENT with the reason, a finding, and the receiver goes on", async () => {
    const c = new Client(rx.grpcEndpoint!.replace("http://", ""), credentials.createInsecure());
    const call = (body: Buffer) =>
      new Promise<{ code: number; details: string } | null>((resolve) =>
        c.makeUnaryRequest(
          "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
          (b: Buffer) => b,
          (b: Buffer) => b,
          body,
          (err) => resolve(err ? { code: err.code, details: err.details } : null),
        ),
      );
    const bad = await call(Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f]));
    assert.equal(bad?.code, status.INVALID_ARGUMENT);
    assert.match(bad!.details, /does not decode/);
    assert.equal(rx.findings.at(-1)?.kind, "malformed");
    const big = await call(Buffer.alloc(64 * 1024 + 10));
    assert.equal(big?.code, status.RESOURCE_EXHAUSTED);
    assert.equal(await call(Buffer.alloc(0)), null);
    // The refusal is grpc-js's own, before any handler: it still reaches the findings, once.
    const tooLarge = rx.findings.filter((f) => f.kind === "too-large");
    assert.equal(tooLarge.length, 1);
    assert.match(tooLarge[0]!.detail, /gRPC: .*RESOURCE_EXHAUSTED/);
    c.close();
  });
});
