import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { clientIdOf, type JoinRecord, joinSpans } from "../../src/otlp/join.ts";
import type { OtlpSpan } from "../../src/otlp/spans.ts";

interface Truth {
  up: number;
  intake: number;
  queue: number;
  prefill: number;
  delivery: number;
  decode: number;
  downEnd: number;
  tokens: number;
}

/** A run of n requests with known parts; the server's clock is the client's + theta + skew·(t − ref). */
function world(n: number, o: { theta: number; skewPpm?: number; gapMs?: number; idOf?: (id: string) => string }) {
  const T0 = 1_765_000_000_000;
  const gap = o.gapMs ?? 10;
  const ref = T0 + (gap * (n - 1)) / 2;
  const server = (c: number) => c + o.theta + (o.skewPpm ?? 0) * 1e-6 * (c - ref);
  const records: JoinRecord[] = [];
  const spans: OtlpSpan[] = [];
  const truth = new Map<string, Truth>();
  for (let i = 0; i < n; i++) {
    const t: Truth = {
      up: 0.2 + (i % 7) * 0.1,
      intake: 1 + (i % 2) * 0.5,
      queue: (i % 5) * 3,
      prefill: 10 + (i % 3),
      delivery: 0.3 + (i % 4) * 0.05,
      decode: 200,
      downEnd: 0.2 + (i % 3) * 0.1,
      tokens: 11,
    };
    const id = `isc-abc-${i}`;
    truth.set(id, t);
    const send = T0 + i * gap;
    const ttftS = t.intake + t.queue + t.prefill;
    records.push({
      id,
      index: i,
      ok: true,
      sendUnixMs: send,
      ttftMs: t.up + ttftS + t.delivery,
      lastChunkMs: t.up + ttftS + t.decode + t.downEnd,
      outputTokens: t.tokens,
    });
    const arrival = send + t.up;
    spans.push({
      traceId: "0".repeat(32),
      spanId: i.toString(16).padStart(16, "0"),
      parentSpanId: "",
      name: "llm_request",
      startUnixMs: server(arrival),
      endUnixMs: server(arrival + ttftS + t.decode),
      attributes: {
        "gen_ai.request.id": (o.idOf ?? ((x) => `chatcmpl-${x}`))(id),
        "gen_ai.latency.time_in_queue": t.queue / 1000,
        "gen_ai.latency.time_to_first_token": ttftS / 1000,
        "gen_ai.latency.time_in_model_prefill": t.prefill / 1000,
        "gen_ai.latency.time_in_model_decode": t.decode / 1000,
        "gen_ai.usage.completion_tokens": t.tokens,
      },
      service: "x",
    });
  }
  return { records, spans, truth };
}

const close = (a: number, b: number, tol: number, what: string) =>
  assert.ok(Math.abs(a - b) <= tol, `${what}: ${a} vs ${b} (±${tol})`);

describe("joining client records with request spans", () => {
  test("every part of each TTFT recovered, the clock offset found, parts add up to the client's TTFT", () => {
    // Tolerances of 1 µs: epoch ms in a double resolve 0.24 µs.
    const { records, spans, truth } = world(100, { theta: 37.5 });
    const j = joinSpans(records, spans);
    assert.equal(j.joined, 100);
    assert.equal(j.joinRate, 1);
    assert.deepEqual(j.findings, []);
    close(j.clock!.offsetMs, 37.5, 1e-3, "offset");
    for (const r of j.perRequest) {
      const t = truth.get(r.id)!;
      close(r.networkMs, t.up, 1e-3, "network");
      close(r.intakeMs, t.intake, 1e-6, "intake");
      close(r.queueMs, t.queue, 1e-9, "queue");
      close(r.prefillMs, t.prefill, 1e-9, "prefill");
      close(r.deliveryMs, t.delivery, 1e-3, "delivery");
      close(r.networkMs + r.intakeMs + r.queueMs + r.prefillMs + r.deliveryMs, r.clientTtftMs, 1e-9, "sum");
      close(r.serverTpotMs!, t.decode / (t.tokens - 1), 1e-9, "server tpot");
      close(r.clientTpotMs!, (t.decode + t.downEnd - t.delivery) / (t.tokens - 1), 1e-9, "client tpot");
    }
    assert.equal(j.split.queueMs!.n, 100);
    assert.equal(j.split.queueMs!.p50, 6);
  });

  test("skew: a server clock drifting 100 ppm over 100 s is followed, not taken for network time", () => {
    const { records, spans, truth } = world(101, { theta: -12, skewPpm: 100, gapMs: 1000 });
    const j = joinSpans(records, spans);
    close(j.clock!.skewPpm, 100, 5, "skew");
    let worst = 0;
    for (const r of j.perRequest) worst = Math.max(worst, Math.abs(r.networkMs - truth.get(r.id)!.up));
    // Uncorrected, the drift would put ±5 ms into network time at the run's ends.
    assert.ok(worst < 0.3, `network error ${worst} ms`);
  });

  test("ids: vLLM's chatcmpl-/cmpl- prefixes and older releases' suffix; unmatched on both sides and duplicates reported", () => {
    const known = new Map([["isc-1", 1]]);
    assert.equal(clientIdOf("isc-1", known), "isc-1");
    assert.equal(clientIdOf("chatcmpl-isc-1", known), "isc-1");
    assert.equal(clientIdOf("cmpl-isc-1-0123abcd", known), "isc-1");
    assert.equal(clientIdOf("chatcmpl-isc-12", known), null);
    const { records, spans } = world(20, { theta: 0, idOf: (x) => `cmpl-${x}` });
    const lost = spans.splice(3, 2);
    spans.push({ ...spans[0]!, spanId: "dup" });
    spans.push({ ...lost[0]!, attributes: { ...lost[0]!.attributes, "gen_ai.request.id": "chatcmpl-someone-else" } });
    // Not a request span: ignored, neither joined nor unmatched.
    spans.push({ ...spans[1]!, name: "POST /v1/completions", attributes: {} });
    const j = joinSpans(records, spans);
    assert.equal(j.joined, 18);
    assert.equal(j.joinRate, 0.9);
    assert.deepEqual(j.unmatchedRequests, ["isc-abc-3", "isc-abc-4"]);
    assert.deepEqual(j.unmatchedSpans, ["chatcmpl-someone-else"]);
    assert.deepEqual(j.duplicateSpans, ["cmpl-isc-abc-0"]);
    assert.deepEqual(j.findings.map((f) => f.kind).sort(), ["duplicate-span", "unmatched-request", "unmatched-span"]);
  });

  test("no spans, missing attributes and a clock jump are findings, never a wrong split", () => {
    const { records, spans } = world(10, { theta: 5 });
    const none = joinSpans(records, []);
    assert.equal(none.joinRate, 0);
    assert.deepEqual(
      none.findings.map((f) => f.kind),
      ["no-spans"],
    );
    assert.match(none.findings[0]!.detail, /--otlp-traces-endpoint/);
    const bare = spans.map((s, i) =>
      i === 2
        ? { ...s, attributes: { "gen_ai.request.id": s.attributes["gen_ai.request.id"]!, "gen_ai.latency.e2e": 1 } }
        : s,
    );
    // A span with the id but none of the latencies: joined, but without a split.
    const b = joinSpans(records, bare);
    assert.equal(b.perRequest.length, 9);
    assert.ok(b.findings.some((f) => f.kind === "missing-attribute"));
    // The server clock jumps back 50 ms for one request.
    const jumped = spans.map((s, i) => (i === 7 ? { ...s, startUnixMs: s.startUnixMs - 50 } : s));
    const c = joinSpans(records, jumped);
    assert.ok(
      c.findings.some((f) => f.kind === "clock"),
      JSON.stringify(c.findings),
    );
  });
});

describe("the join as evidence for the model (server-split)", () => {
  /** n requests of 11 tokens with a 200 ms decode (20 ms a step); detailed traces put 0.5 ms a step outside the model. */
  function detailed(n: number, hostMs = 0.5) {
    const w = world(n, { theta: 3 });
    for (const s of w.spans) {
      const inference = (s.attributes["gen_ai.latency.time_in_model_prefill"] as number) * 1000 + 200;
      s.attributes["gen_ai.latency.time_in_model_inference"] = inference / 1000;
      // 11 steps: one prefill step + 10 decode steps.
      s.attributes["gen_ai.latency.time_in_model_execute"] = (inference - 11 * hostMs) / 1000;
    }
    return w;
  }

  test("server step, host part per step and queue as means with CIs; every figure from the spans", async () => {
    const { spanEvidence } = await import("../../src/otlp/evidence.ts");
    const { records, spans, truth } = detailed(12);
    const e = spanEvidence(joinSpans(records, spans), { concurrency: 1, inputLen: 64, outputLen: 11 });
    const m = e.measurement!;
    assert.ok(m, e.why);
    assert.equal(m.requests, 12);
    close(m.stepMs!.value, 20, 1e-9, "step");
    close(m.hostMs!.value, 0.5, 1e-9, "host");
    close(m.executeMs!.value, 19.5, 1e-9, "execute");
    const q = [...truth.values()].map((t) => t.queue);
    close(m.queueMs!.value, q.reduce((a, b) => a + b, 0) / q.length, 1e-9, "queue");
    assert.ok(m.queueMs!.ci![0] < m.queueMs!.value && m.queueMs!.value < m.queueMs!.ci![1]);
    assert.match(e.why, /^engine spans, 12 requests, detailed traces: .*÷ \(1 \+ tokens − 1\)/);
  });

  test("not used below 10 joined requests or a 90 % join rate; without detailed traces, no host part", async () => {
    const { spanEvidence } = await import("../../src/otlp/evidence.ts");
    const few = detailed(9);
    const e9 = spanEvidence(joinSpans(few.records, few.spans), { concurrency: 1 });
    assert.equal(e9.measurement, null);
    assert.match(e9.why, /9 requests joined with their timings \(< 10\)/);
    const lossy = detailed(20);
    const e = spanEvidence(joinSpans(lossy.records, lossy.spans.slice(3)), { concurrency: 1 });
    assert.equal(e.measurement, null);
    assert.match(e.why, /the join matched 17 of 20 requests \(85 % < 90 %\)/);
    const plain = world(12, { theta: 3 });
    const p = spanEvidence(joinSpans(plain.records, plain.spans), { concurrency: 1 })!;
    assert.equal(p.measurement!.hostMs, undefined);
    close(p.measurement!.stepMs!.value, 20, 1e-9, "step");
    assert.match(p.why, /^engine spans, 12 requests: .*no detailed traces, so no host part/);
  });
});
