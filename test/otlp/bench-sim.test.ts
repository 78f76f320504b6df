// End to end: bench with its OTLP receiver against the sim in its own process, which sends its
// request spans through the OpenTelemetry JS SDK's OTLP/HTTP exporter. The split is checked against
// the engine's own per-request truth (/debug/prefix_cache_truth), which travels by another path.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { benchWithSpans, type SpanJoinReport } from "../../src/otlp/bench.ts";
import { startOtlpReceiver } from "../../src/otlp/receiver.ts";
import type { RequestTruth } from "../../src/sim/engine.ts";
import { type SpawnedSim, spawnSim } from "../helpers/sim.ts";

const within = (got: number, want: number) => Math.abs(got - want) <= Math.max(1, 0.02 * Math.abs(want));

async function run(simArgs: string[], concurrency: number, numPrompts: number) {
  const rx = await startOtlpReceiver({ port: 0 });
  let sim: SpawnedSim | null = null;
  try {
    sim = await spawnSim(["--profile", "llama3-8b-1xh100", "--otlp-traces-endpoint", rx.endpoint, ...simArgs]);
    const { spans } = await benchWithSpans(
      {
        baseUrl: sim.url,
        numPrompts,
        concurrency,
        randomInputLen: 64,
        randomOutputLen: 8,
        ignoreEos: true,
        noServerMetrics: true,
        telemetry: "none",
        seed: 5,
      },
      {},
      { receiver: rx, waitMs: 30_000 },
    );
    const truthRes = await fetch(`${sim.url}/debug/prefix_cache_truth`);
    const truth = ((await truthRes.json()) as { requestsRecent: RequestTruth[] }).requestsRecent;
    return { spans, truth };
  } finally {
    await sim?.stop();
    await rx.close();
  }
}

/** The sim's name for a client id: vLLM's cmpl-<request_id>, or SGLang's bare rid. */
const vllmName = (id: string) => `cmpl-${id}`;

function check(spans: SpanJoinReport, truth: RequestTruth[], n: number, nameOf = vllmName) {
  const j = spans.join;
  assert.equal(j.requests, n);
  assert.ok(j.joinRate >= 0.99, `join rate ${j.joinRate}: ${JSON.stringify(j.findings)}`);
  assert.deepEqual(spans.receiverFindings, []);
  assert.deepEqual(j.unmatchedSpans, []);
  const byName = new Map(truth.map((t) => [t.name, t]));
  const tq: number[] = [];
  const tp: number[] = [];
  for (const r of j.perRequest) {
    const t = byName.get(nameOf(r.id));
    assert.ok(t, `no truth for ${r.id}`);
    const queue = t.scheduledMs - t.queuedMs;
    const prefill = t.firstTokenMs - t.scheduledMs;
    assert.ok(within(r.queueMs, queue), `${r.id} queue ${r.queueMs} vs truth ${queue}`);
    assert.ok(within(r.prefillMs, prefill), `${r.id} prefill ${r.prefillMs} vs truth ${prefill}`);
    assert.ok(within(r.intakeMs, t.queuedMs - t.arrivalMs), `${r.id} intake ${r.intakeMs}`);
    // The parts are the client's TTFT, exactly.
    const sum = r.networkMs + r.intakeMs + r.queueMs + r.prefillMs + r.deliveryMs;
    assert.ok(Math.abs(sum - r.clientTtftMs) < 1e-6, `${r.id} parts ${sum} vs TTFT ${r.clientTtftMs}`);
    tq.push(queue);
    tp.push(prefill);
  }
  const pct = (xs: number[], p: number) => {
    const s = [...xs].sort((a, b) => a - b);
    // numpy's linear interpolation, as the join's distributions.
    const k = ((s.length - 1) * p) / 100;
    const f = Math.floor(k);
    return s[f]! + (s[Math.min(f + 1, s.length - 1)]! - s[f]!) * (k - f);
  };
  for (const p of [50, 99] as const) {
    const key = p === 50 ? "p50" : "p99";
    assert.ok(within(j.split.queueMs![key], pct(tq, p)), `queue ${key} ${j.split.queueMs![key]} vs ${pct(tq, p)}`);
    assert.ok(
      within(j.split.prefillMs![key], pct(tp, p)),
      `prefill ${key} ${j.split.prefillMs![key]} vs ${pct(tp, p)}`,
    );
  }
  return { tq };
}

describe("bench --otlp-receiver against the sim's spans", () => {
  test("concurrency 1: every request joined; queue and prefill equal the engine's truth", async () => {
    const { spans, truth } = await run([], 1, 12);
    check(spans, truth, 12);
    assert.equal(spans.complete, true);
    assert.ok(spans.join.clock !== null);
  });

  test("a load that queues (8 users, 2 sequences at a time): the queue share is non-zero and still matches", async () => {
    const { spans, truth } = await run(["--max-num-seqs", "2"], 8, 40);
    const { tq } = check(spans, truth, 40);
    assert.ok(Math.max(...tq) > 5, `the engine queued at most ${Math.max(...tq)} ms`);
    assert.ok(spans.join.split.queueMs!.p99 > 5);
  });
});

describe("bench --otlp-receiver against the sim's spans in SGLang's layout (sim --otlp-layout sglang)", () => {
  const sglang = ["--otlp-layout", "sglang"];
  const bare = (id: string) => id;

  test("concurrency 1: every request's trace joined by its rid; queue and prefill equal the engine's truth", async () => {
    // A 2-GPU profile at TP 2 (a later --profile wins): two scheduler ranks, each with its own thread span.
    const tp2 = ["--profile", "mixtral-8x7b-2xa100", "--tensor-parallel-size", "2"];
    const { spans, truth } = await run([...sglang, ...tp2], 1, 12);
    check(spans, truth, 12, bare);
    assert.equal(spans.complete, true);
    assert.deepEqual(spans.join.layouts, ["sglang"]);
    assert.match(spans.join.notes.join(), /tp_rank 0 scheduler \(of 2 TP ranks\)/);
    assert.match(spans.join.notSent.join(), /not sent by SGLang/);
    assert.equal(spans.join.split.forwardMs, null);
    assert.ok(spans.join.split.serverTpotMs!.n === 12);
  });

  test("a load that queues, with chunked prefill: the queue share is non-zero and still matches", async () => {
    const { spans, truth } = await run([...sglang, "--max-num-seqs", "2", "--max-num-batched-tokens", "40"], 8, 40);
    const { tq } = check(spans, truth, 40, bare);
    assert.ok(Math.max(...tq) > 5, `the engine queued at most ${Math.max(...tq)} ms`);
    assert.ok(spans.join.split.queueMs!.p99 > 5);
  });

  test("--otlp-layout: only vllm or sglang, only with an endpoint, and not with vLLM's detailed traces", async () => {
    const { spanLayout } = await import("../../src/sim/index.ts");
    assert.equal(spanLayout(undefined, false, undefined), "vllm");
    assert.throws(() => spanLayout("tgi", true, undefined), /expected vllm or sglang/);
    assert.throws(() => spanLayout("sglang", false, undefined), /needs --otlp-traces-endpoint/);
    assert.throws(() => spanLayout("sglang", true, "all"), /vLLM's/);
  });
});

describe("detailed traces (vLLM --collect-detailed-traces all): each request's time inside the engine", () => {
  test("forward, execute and scheduler per request equal the engine's truth; the rest of inference is outside the model", async () => {
    const { spans, truth } = await run(["--collect-detailed-traces", "all"], 4, 16);
    check(spans, truth, 16);
    const byName = new Map(truth.map((t) => [t.name, t]));
    for (const r of spans.join.perRequest) {
      const t = byName.get(vllmName(r.id))!;
      assert.ok(
        r.forwardMs !== null && within(r.forwardMs, t.forwardMs),
        `${r.id} forward ${r.forwardMs} vs ${t.forwardMs}`,
      );
      assert.ok(
        r.executeMs !== null && within(r.executeMs, t.executeMs),
        `${r.id} execute ${r.executeMs} vs ${t.executeMs}`,
      );
      assert.ok(r.schedulerMs !== null && within(r.schedulerMs, t.schedulerMs), `${r.id} scheduler ${r.schedulerMs}`);
      // Sampling is inside execute, the scheduler outside it; what the model did not take is the rest of inference.
      assert.ok(t.executeMs > t.forwardMs && t.schedulerMs > 0);
      assert.ok(r.inferenceMs !== null && r.outsideModelMs !== null);
      assert.ok(Math.abs(r.outsideModelMs - (r.inferenceMs - r.executeMs)) < 1e-9);
      // The sim's steps tile its requests' inference time (each from the previous step's end): outside the model is
      // the scheduler's part and nothing else, however late the host's timers fire.
      assert.ok(
        Math.abs(r.outsideModelMs - r.schedulerMs) < 0.01 + 1e-3 * r.schedulerMs,
        `${r.id} outside ${r.outsideModelMs} vs scheduler ${r.schedulerMs}`,
      );
    }
    for (const k of ["forwardMs", "executeMs", "schedulerMs", "outsideModelMs"] as const)
      assert.ok(spans.join.split[k], `no ${k} distribution`);
  });

  test("without the flag the spans carry none of them; the flag without an endpoint is refused", async () => {
    const { spans } = await run([], 1, 3);
    assert.equal(spans.join.split.forwardMs, null);
    assert.equal(spans.join.split.outsideModelMs, null);
    const { detailedTraces } = await import("../../src/sim/index.ts");
    assert.throws(() => detailedTraces("all", false), /needs --otlp-traces-endpoint/);
    assert.throws(() => detailedTraces("gpu", true), /unknown module "gpu"/);
    assert.deepEqual([...detailedTraces("model", true)], ["model"]);
  });
});

describe("the sim names requests as vLLM does", () => {
  test("X-Request-Id wins over the body's request_id, which wins over a random id; any text stays valid JSON", async () => {
    const { startSim } = await import("../../src/sim/index.ts");
    const sim = await startSim({ port: 0, speed: "zero", warmup: false });
    try {
      const ask = async (headers: Record<string, string>, extra: Record<string, unknown>) => {
        const r = await fetch(`${sim.url}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json", ...headers },
          body: JSON.stringify({ messages: [{ role: "user", content: "hi" }], max_tokens: 2, stream: true, ...extra }),
        });
        const first = (await r.text()).split("\n").find((l) => l.startsWith("data: {"))!;
        return JSON.parse(first.slice(6)).id as string;
      };
      assert.equal(await ask({ "x-request-id": "hdr-1" }, { request_id: "body-1" }), "chatcmpl-hdr-1");
      assert.equal(await ask({}, { request_id: 'body "2"' }), 'chatcmpl-body "2"');
      assert.match(await ask({}, {}), /^chatcmpl-[0-9a-f]{32}$/);
    } finally {
      await sim.close();
    }
  });
});
