// SGLang's request traces (a root "Req <rid>", a thread span per process, stage slices) joined to
// the client's records: hand-built traces with known parts, in both releases' nesting of the chunks.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { type JoinRecord, joinSpans } from "../../src/otlp/join.ts";
import { SglangProgress } from "../../src/otlp/sglang.ts";
import type { OtlpSpan } from "../../src/otlp/spans.ts";

const T0 = 1_765_000_000_000;
/** Server clock = client clock + 20 ms. */
const THETA = 20;

interface Parts {
  queue: number;
  chunks: number[];
  decodeSteps: number[];
}

let nextSpan = 1;
const sid = () => (nextSpan++).toString(16).padStart(16, "0");

/**
 * One request: sent at `send`, 0.5 ms up, tokenize 1 ms, request_process 0.5 ms, then the parts; the last chunk
 * gives the first token, 0.3 ms to reach the client. `rankSkewMs` moves TP rank 1's reading of everything after the
 * queue (the root ends with the scheduler's last slice); `nested`: chunks under prefill_forward (newer releases) or before it as siblings (older).
 */
function request(
  i: number,
  p: Parts,
  o: { rankSkewMs?: number; nested?: boolean; drop?: (name: string) => boolean } = {},
) {
  const id = `isc-9f-${i}`;
  const send = T0 + i * 50;
  const arrival = send + 0.5 + THETA;
  const trace = `${(i + 1).toString(16).padStart(16, "0")}${"0".repeat(16)}`;
  const spans: OtlpSpan[] = [];
  const add = (name: string, parent: string, start: number, end: number, attributes: OtlpSpan["attributes"] = {}) => {
    const s: OtlpSpan = {
      traceId: trace,
      spanId: sid(),
      parentSpanId: parent,
      name,
      startUnixMs: start,
      endUnixMs: end,
      attributes,
      service: "sglang",
    };
    if (!o.drop?.(name)) spans.push(s);
    return s.spanId;
  };
  const queued = arrival + 1.5;
  const scheduled = queued + p.queue;
  const prefill = p.chunks.reduce((a, b) => a + b, 0);
  const firstToken = scheduled + prefill;
  const end = firstToken + p.decodeSteps.reduce((a, b) => a + b, 0);
  const root = add(`Req ${id.slice(0, 8)}`, "", arrival, end, {
    rid: id,
    module: "sglang::request",
    "gen_ai.usage.completion_tokens": p.decodeSteps.length + 1,
  });
  const tok = add("Tokenizer (host:5131a7e0 | pid:7)", root, arrival, arrival + 1, {
    thread_label: "Tokenizer",
    pid: 7,
  });
  add("tokenize", tok, arrival, arrival + 1);
  for (const rank of [0, 1]) {
    const k = rank === 1 ? (o.rankSkewMs ?? 0.2) : 0;
    const th = add(`Scheduler [TP ${rank}] (host:5131a7e0 | pid:${8 + rank})`, root, arrival + 1, end + k, {
      thread_label: "Scheduler",
      tp_rank: rank,
      pid: 8 + rank,
    });
    add("request_process", th, arrival + 1, queued);
    add("prefill_waiting", th, queued, scheduled + k);
    let t = scheduled + k;
    const chunkParent = o.nested === false ? th : "";
    const chunkSpans: Array<[number, number]> = [];
    for (const c of p.chunks.slice(0, -1)) {
      chunkSpans.push([t, t + c]);
      t += c;
    }
    const fwdStart = o.nested === false ? t : scheduled + k;
    const fwd = add("prefill_forward", th, fwdStart, firstToken + k);
    for (const [a, b] of chunkSpans) add("chunked_prefill", chunkParent || fwd, a, b);
    t = firstToken + k;
    p.decodeSteps.forEach((d, n) => {
      add("decode_loop", th, t, t + d, { decode_ct: n });
      t += d;
    });
  }
  const ttft = 1.5 + p.queue + prefill;
  const record: JoinRecord = {
    id,
    index: i,
    ok: true,
    sendUnixMs: send,
    ttftMs: 0.5 + ttft + 0.3,
    // The last chunk leaves as the root ends and takes as long down as the request took up: the clock's estimate is exact.
    lastChunkMs: 0.5 + (end - arrival) + 0.5,
    outputTokens: p.decodeSteps.length + 1,
  };
  return { id, spans, record, ttft, prefill, decode: end - firstToken };
}

function run(n: number, o: Parameters<typeof request>[2] = {}) {
  const rs = Array.from({ length: n }, (_, i) =>
    request(i, { queue: (i % 4) * 2.5, chunks: i % 2 ? [4, 5] : [6], decodeSteps: [10, 10, 12] }, o),
  );
  return { rs, records: rs.map((r) => r.record), spans: rs.flatMap((r) => r.spans) };
}

const close = (a: number, b: number, what: string) => assert.ok(Math.abs(a - b) < 1e-6, `${what}: ${a} vs ${b}`);

describe("SGLang's request traces in the span join", () => {
  for (const nested of [true, false])
    test(`queue = prefill_waiting, prefill = the chunks and prefill_forward (${nested ? "nested, newer" : "siblings, older"}), rank 0 read`, () => {
      const { rs, records, spans } = run(12, { nested });
      const j = joinSpans(records, spans);
      assert.equal(j.joined, 12);
      assert.deepEqual(j.layouts, ["sglang"]);
      assert.match(j.key, /rid/);
      assert.deepEqual(j.findings, []);
      assert.match(j.notes.join(), /tp_rank 0 scheduler \(of 2 TP ranks\)/);
      assert.match(j.notSent.join(), /not sent by SGLang/);
      close(j.clock!.offsetMs, THETA, "offset");
      for (const r of j.perRequest) {
        const t = rs[r.index]!;
        close(r.queueMs, (r.index % 4) * 2.5, "queue");
        close(r.prefillMs, t.prefill, "prefill");
        close(r.serverTtftMs, t.ttft, "server ttft");
        close(r.intakeMs, 1.5, "intake");
        close(r.networkMs, 0.5, "network");
        close(r.deliveryMs, 0.3, "delivery");
        close(r.serverTpotMs!, t.decode / 3, "server tpot");
        assert.equal(r.forwardMs, null);
        assert.equal(r.schedulerMs, null);
      }
      assert.equal(j.split.forwardMs, null);
    });

  test("a trace without prefill_waiting is joined but left out of the split, and said so", () => {
    const { records, spans } = run(4, { drop: (n) => n === "prefill_waiting" });
    const j = joinSpans(records, spans);
    assert.equal(j.joined, 4);
    assert.equal(j.perRequest.length, 0);
    const f = j.findings.find((x) => x.kind === "missing-attribute");
    assert.ok(f, JSON.stringify(j.findings));
    assert.match(f.detail, /prefill_waiting: 4/);
  });

  test("a trace whose root never came is unmatched and listed by trace id; its request is unmatched too", () => {
    const { records, spans } = run(3);
    const lost = spans.find((s) => s.name.startsWith("Req ") && s.attributes.rid === "isc-9f-1")!;
    const j = joinSpans(
      records,
      spans.filter((s) => s !== lost),
    );
    assert.equal(j.joined, 2);
    assert.deepEqual(j.unmatchedRequests, ["isc-9f-1"]);
    assert.deepEqual(j.unmatchedSpans, [`trace ${lost.traceId} (no root span)`]);
    assert.deepEqual(j.findings.map((f) => f.kind).sort(), ["unmatched-request", "unmatched-span"]);
  });

  test("TP ranks that disagree past the bound are a finding; the split stays rank 0's", () => {
    const { rs, records, spans } = run(4, { rankSkewMs: 8 });
    const j = joinSpans(records, spans);
    const f = j.findings.find((x) => x.kind === "rank-disagreement");
    assert.ok(f, JSON.stringify(j.findings));
    assert.match(f.detail, /4 SGLang requests.*worst 8\.0 ms/);
    for (const r of j.perRequest) close(r.prefillMs, rs[r.index]!.prefill, "prefill");
  });

  test("multi-tokenizer mode's <worker>_ prefix on the rid is dropped, as SGLang drops it", () => {
    const { records, spans } = run(2);
    for (const s of spans) if (typeof s.attributes.rid === "string") s.attributes.rid = `3_${s.attributes.rid}`;
    assert.equal(joinSpans(records, spans).joined, 2);
  });

  test("warm-up requests' traces are neither joined nor strangers", () => {
    const { records, spans } = run(3);
    const j = joinSpans(records.slice(1), spans, new Set(["isc-9f-0"]));
    assert.equal(j.joined, 2);
    assert.deepEqual(j.unmatchedSpans, []);
  });

  test("a request is complete once its root and rank-0 scheduler thread came, in either order", () => {
    const { spans } = run(2);
    const p = new SglangProgress();
    const t1 = spans.filter((s) => s.attributes.rid === "isc-9f-1" || s.attributes.tp_rank === 0);
    const rank0 = t1.filter((s) => s.attributes.tp_rank === 0);
    assert.deepEqual(p.feed(rank0), []);
    assert.deepEqual(p.feed(spans.filter((s) => s.attributes.rid === "isc-9f-1")), ["isc-9f-1"]);
    assert.deepEqual(p.feed(spans), ["isc-9f-0"]);
  });
});
