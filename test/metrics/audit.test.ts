// The audit: values over a window (exact against the generator's truth), bucket resolution in words,
// the seed scenario's verdict, gaps with the commands that recover them, per-engine quirks, and the
// I/O wrapper against a real HTTP server (the fixture server, and the simulator when present).
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { test } from "node:test";
import { analyzeAudit, auditMetrics, bucketResolution, formatAudit } from "../../src/metrics/audit.ts";
import { parseExposition } from "../../src/metrics/parse.ts";
import type { Snapshot } from "../../src/metrics/types.ts";
import { jsonRoute, OPENMETRICS, readFixture, startFixtureServer, VllmFixture, vllmRoute } from "./fixtures/server.ts";

const snap = (text: string, atMs: number, source = "http://127.0.0.1:8000/metrics"): Snapshot => ({
  source,
  atMs,
  exposition: parseExposition(text),
});

function seedWindow(requests = 4, opts = {}) {
  const fx = new VllmFixture({ itlRange: [0.0165, 0.0183], outputTokens: 64, ...opts });
  fx.serve();
  const before = fx.totals();
  const a = snap(fx.render(), 1_000);
  for (let i = 0; i < requests; i++) fx.serve();
  const b = snap(fx.render(), 11_000);
  return { fx, a, b, before, after: fx.totals() };
}

test("seed scenario: request-level only, the ITL bucket 10–25 ms spans the signal", () => {
  const { a, b, before, after } = seedWindow();
  const r = analyzeAudit(a, b, { target: "http://127.0.0.1:8000/metrics" });
  assert.equal(r.engine?.id, "vllm");
  assert.equal(r.engine?.variant, "V1");
  assert.equal(r.timingGranularity, "request");
  assert.equal(r.verdict, "request-level only; ITL bucket 10–25 ms spans the signal");
  assert.equal(r.windowSeconds, 10);

  const itl = r.concepts.find((c) => c.concept === "itl")!;
  assert.equal(itl.granularity, "request");
  // Count and mean are exact deltas of what was served in the window.
  assert.equal(itl.value!.count, after.itlCount - before.itlCount);
  assert.equal(itl.value!.count, 4 * 63);
  const trueMean = (after.itlSum - before.itlSum) / (after.itlCount - before.itlCount);
  assert.ok(Math.abs(itl.value!.mean! - trueMean) <= 1e-12 * trueMean);
  // Every quantile is interpolation inside (0.01, 0.025]: p50 is 17.5 ms whatever the values.
  assert.ok(Math.abs(itl.value!.p50! - 0.0175) < 1e-15);
  assert.equal(itl.resolution?.interpolated, true);
  assert.deepEqual(itl.resolution?.modalBucket, { lower: 0.01, upper: 0.025, share: 1 });
  assert.match(
    itl.resolution!.text,
    /^ITL buckets are 15 ms wide around the 17\.\d ms mean: p50 is interpolated, not measured; all 252 observations fall in one bucket \(10–25 ms\)/,
  );
  const ttft = r.concepts.find((c) => c.concept === "ttft")!;
  assert.deepEqual(ttft.resolution?.meanBucket, { lower: 0.04, upper: 0.06 }, "TTFT 52 ms lands in (0.04, 0.06]");
});

test("vLLM invariants: iteration_tokens _count = engine steps = requests × max_tokens at batch 1", () => {
  const { a, b } = seedWindow(5);
  const r = analyzeAudit(a, b, { target: "x" });
  const steps = r.concepts.find((c) => c.concept === "step_tokens")!;
  assert.equal(steps.granularity, "step");
  assert.equal(steps.value!.count, 5 * 64);
  const gen = r.concepts.find((c) => c.concept === "generation_tokens")!;
  assert.equal(gen.value!.count, 5 * 64);
  assert.equal(gen.value!.rate, (5 * 64) / 10);
  const itl = r.concepts.find((c) => c.concept === "itl")!;
  assert.equal(itl.value!.count, 5 * 63, "ITL _count = requests × (max_tokens − 1)");
  const prefix = r.concepts.find((c) => c.concept === "prefix_cache_hit_rate")!;
  assert.equal(prefix.value!.ratio, 0.5);
  const derived = Object.fromEntries(r.derived.map((d) => [d.name, d.value]));
  assert.equal(derived["tokens per ITL observation"], 1, "one token per output event");
  assert.equal(derived["engine steps"], (5 * 64) / 10);
  assert.equal(derived["tokens per step"], (5 * (128 + 1) + 5 * 63) / (5 * 64));
  assert.ok(Math.abs(derived["per-request decode rate"]! - 1 / itl.value!.mean!) < 1e-9);
});

test("gaps name the missing pieces and the exact commands that recover them", () => {
  const { a, b } = seedWindow();
  const r = analyzeAudit(a, b, { target: "http://10.0.0.5:8000/metrics" });
  const cmds = r.gaps.map((g) => g.command);
  assert.ok(cmds.includes("inferscope trace capture http://10.0.0.5:8000 --steps 20"));
  assert.ok(
    cmds.includes("inferscope ab --server-cmd '<your server command>' --variant base: --variant ll:NCCL_PROTO=LL"),
  );
  assert.ok(cmds.includes("inferscope sweep lengths --url http://10.0.0.5:8000 --out 16,32,64,128,256,512"));
  assert.ok(cmds.includes("inferscope model predict --model glm-5 --gpu <gpu> --gpus <n> --tp <n>"));
  assert.ok(cmds.some((c) => c.startsWith("inferscope bench --base-url http://10.0.0.5:8000")));
  assert.ok(r.gaps.some((g) => /all-reduce/.test(g.what)));
  assert.ok(r.gaps.some((g) => /step breakdown/.test(g.what)));
  const text = formatAudit(r);
  assert.match(text, /Verdict: request-level only; ITL bucket 10–25 ms spans the signal/);
  assert.match(text, /inferscope trace capture http:\/\/10\.0\.0\.5:8000 --steps 20/);
  assert.match(text, /ITL buckets are 15 ms wide around the 17\.\d ms mean: p50 is interpolated, not measured/);
});

test("a restart between the scrapes (counters went down) uses the new values, not negative deltas", () => {
  const old = new VllmFixture();
  for (let i = 0; i < 10; i++) old.serve();
  const fresh = new VllmFixture();
  fresh.serve();
  const r = analyzeAudit(snap(old.render(), 0), snap(fresh.render(), 5000), { target: "x" });
  const itl = r.concepts.find((c) => c.concept === "itl")!;
  assert.equal(itl.value!.count, fresh.totals().itlCount);
  const gen = r.concepts.find((c) => c.concept === "generation_tokens")!;
  assert.equal(gen.value!.count, fresh.totals().generation);
});

test("data-parallel engines (engine label) are summed; an idle window says so", () => {
  const fx = new VllmFixture({ engines: ["0", "1"] });
  fx.running = 1;
  const a = snap(fx.render(), 0);
  fx.serve(undefined, "0");
  fx.serve(undefined, "1");
  fx.serve(undefined, "1");
  const r = analyzeAudit(a, snap(fx.render(), 2000), { target: "x" });
  assert.deepEqual(r.dimensions.engine, ["0", "1"]);
  assert.equal(r.concepts.find((c) => c.concept === "requests")!.value!.count, 3);
  assert.equal(r.concepts.find((c) => c.concept === "running")!.value!.after, 2);
  const idle = analyzeAudit(a, snap(new VllmFixture({ engines: ["0", "1"] }).render(), 2000), { target: "x" });
  assert.equal(idle.idle, true);
  assert.match(idle.verdict, /no traffic during the window/);
});

test("SGLang: tensor-parallel ranks are not double counted; ITL counts tokens", () => {
  const r = analyzeAudit(
    snap(readFixture("engine-sglang.prom"), 0),
    snap(readFixture("engine-sglang.b.prom"), 10_000),
    { target: "x" },
  );
  assert.equal(r.engine?.id, "sglang");
  assert.deepEqual(r.dimensions.tp_rank, ["0", "1"]);
  const running = r.concepts.find((c) => c.concept === "running")!;
  assert.deepEqual(running.value, { before: 4, after: 6 }, "tp_rank 1 repeats tp_rank 0");
  assert.equal(r.concepts.find((c) => c.concept === "preemptions")!.value!.count, 2);
  assert.equal(r.concepts.find((c) => c.concept === "itl")!.value!.count, 20 * 255);
  assert.equal(r.verdict, "request-level only");
  assert.ok(r.quirks.some((q) => /routing_key/.test(q)));
});

test("TGI: per-batch forward time makes it step-level; no TTFT, and the audit says why", () => {
  const r = analyzeAudit(snap(readFixture("engine-tgi.prom"), 0), snap(readFixture("engine-tgi.b.prom"), 10_000), {
    target: "x",
  });
  assert.equal(r.engine?.id, "tgi");
  assert.equal(r.timingGranularity, "step");
  assert.match(r.verdict, /^step-level timing \(tgi_batch_forward_duration\); no per-operation timing/);
  const ttft = r.concepts.find((c) => c.concept === "ttft")!;
  assert.equal(ttft.observable, false);
  assert.match(ttft.note!, /validation \+ queue \+ prefill/);
  const decode = r.concepts.find((c) => c.concept === "decode")!;
  assert.equal(decode.metric, 'tgi_batch_forward_duration{method="decode"}');
  assert.equal(decode.value!.count, 3000);
  assert.equal(r.concepts.find((c) => c.concept === "requests")!.value!.count, 30);
  assert.ok(!r.gaps.some((g) => g.what === "per-step forward time"));
});

test("llama.cpp: window means from cumulative counters, scrape-reset gauges ignored", () => {
  const r = analyzeAudit(
    snap(readFixture("engine-llamacpp.prom"), 0),
    snap(readFixture("engine-llamacpp.b.prom"), 10_000),
    { target: "http://127.0.0.1:8080/metrics" },
  );
  assert.equal(r.engine?.id, "llamacpp");
  assert.equal(r.verdict, "cumulative totals only");
  const decode = r.concepts.find((c) => c.concept === "decode")!;
  assert.equal(decode.granularity, "aggregate");
  assert.ok(Math.abs(decode.value!.mean! - (75.5 - 50) / 1000) < 1e-12);
  assert.equal(r.concepts.find((c) => c.concept === "generation_tokens")!.value!.rate, 100);
  // No profiler endpoint: the op-level gap points at the model instead.
  assert.ok(r.gaps.some((g) => g.command.startsWith("inferscope model explain")));
});

test("bucketResolution: capped quantiles and fine buckets are described", () => {
  const capped = bucketResolution(
    "E2E",
    [
      { le: 1, count: 5 },
      { le: 2, count: 8 },
      { le: Number.POSITIVE_INFINITY, count: 10 },
    ],
    1.8,
    1,
    "seconds",
  )!;
  assert.equal(capped.aboveLargestBound, 2);
  assert.match(capped.text, /2 observations above 2 s: p99 is capped at that bound/);
  const fine = bucketResolution(
    "ITL",
    [
      { le: 0.017, count: 40 },
      { le: 0.0175, count: 100 },
      { le: 0.018, count: 160 },
      { le: Number.POSITIVE_INFINITY, count: 160 },
    ],
    0.0175,
    1,
    "seconds",
  )!;
  assert.equal(fine.interpolated, false);
  assert.match(fine.text, /fine enough/);
});

test("auditMetrics over HTTP: two scrapes across the window, /v1/models and /version read", async () => {
  const { formatExposition } = await import("../../src/metrics/write.ts");
  const fx = new VllmFixture({ model: "zai-org/GLM-5" });
  let served = 0;
  const server = await startFixtureServer({
    // Negotiates like prometheus_client: OpenMetrics when asked for it, 0.0.4 text otherwise.
    "/metrics": (req) => {
      if (served++ < 2) for (let i = 0; i < 2; i++) fx.serve();
      const text = fx.render();
      if (!req.headers.accept?.startsWith("application/openmetrics-text")) return { body: text };
      const om = formatExposition(parseExposition(text).families, "openmetrics-1.0");
      return { headers: { "content-type": OPENMETRICS }, body: om };
    },
    "/v1/models": jsonRoute({ object: "list", data: [{ id: "zai-org/GLM-5", object: "model" }] }),
    "/version": jsonRoute({ version: "0.11.0" }),
  });
  try {
    let clock = 1_700_000_000_000;
    const r = await auditMetrics(`${server.url}/metrics`, {
      windowMs: 10_000,
      now: () => clock,
      sleep: async (ms) => {
        clock += ms;
      },
    });
    assert.equal(r.windowSeconds, 10);
    assert.equal(r.engine?.version, "0.11.0");
    assert.deepEqual(r.models, ["zai-org/GLM-5"]);
    assert.equal(r.concepts.find((c) => c.concept === "requests")!.value!.count, 2);
    // Two scrapes for the window (OpenMetrics), one more asking for 0.0.4 text.
    assert.equal(server.hits.get("/metrics"), 3);
    assert.equal(r.format, "openmetrics-1.0");
    assert.deepEqual(
      r.formats?.map((f) => f.format),
      ["openmetrics-1.0", "prometheus-0.0.4"],
    );
    assert.equal(r.formats?.[0]?.families, r.formats?.[1]?.families);
    assert.match(formatAudit(r), /formats: openmetrics-1\.0 and prometheus-0\.0\.4/);
    assert.ok(
      r.gaps.some(
        (g) => g.command === "inferscope model predict --model zai-org/GLM-5 --gpu <gpu> --gpus <n> --tp <n>",
      ),
    );
  } finally {
    await server.close();
  }
});

const simHelper = new URL("../helpers/sim.ts", import.meta.url);
test("against the simulator (glm5 profile): vLLM detected, ITL bucket remark as in the seed", {
  skip: existsSync(simHelper) ? false : "test/helpers/sim.ts not present",
  timeout: 120_000,
}, async () => {
  const { spawnSim } = (await import(simHelper.href)) as typeof import("../helpers/sim.ts");
  // Real time (scale 1): the sim records wall-clock gaps, and the remark is about a ~17 ms ITL.
  const sim = await spawnSim(["--profile", "glm5-8x-rtxpro6000-pcie"], { timeoutMs: 60_000 });
  try {
    const generate = async () => {
      for (let i = 0; i < 3; i++) {
        const res = await fetch(`${sim.url}/v1/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ prompt: "hello", max_tokens: 16, ignore_eos: true }),
        });
        assert.equal(res.status, 200, await res.text());
      }
    };
    const r = await auditMetrics(`${sim.url}/metrics`, { windowMs: 0, sleep: generate });
    assert.equal(r.engine?.id, "vllm");
    assert.equal(r.engine?.variant, "V1");
    assert.equal(r.timingGranularity, "request");
    assert.match(r.verdict, /^request-level only/);
    const itl = r.concepts.find((c) => c.concept === "itl")!;
    const value = (c: string) => r.concepts.find((k) => k.concept === c)!.value!.count!;
    // vLLM's invariant: one ITL observation per generated token after each request's first.
    assert.ok(value("requests") >= 2);
    assert.equal(itl.value!.count, value("generation_tokens") - value("requests"));
    // The sim's histograms record wall-clock gaps, so a loaded machine can widen them; the
    // profile's 17.4 ms sits in vLLM's (10, 25] ms bucket, and the remark must say how coarse it is.
    // A very busy machine can push gaps past 25 ms; the remark must then describe that bucket instead.
    const mean = itl.value!.mean!;
    assert.ok(mean > 0.01, `ITL mean ${mean}`);
    const width = itl.resolution!.meanBucket!.upper - itl.resolution!.meanBucket!.lower;
    assert.match(itl.resolution!.text, /^ITL buckets are [\d.]+ ms wide around the [\d.]+ ms mean/);
    if (mean <= 0.025) {
      assert.ok(Math.abs(width - 0.015) < 1e-12);
      assert.match(
        itl.resolution!.text,
        /^ITL buckets are 15 ms wide around the [\d.]+ ms mean: p50 is interpolated, not measured/,
      );
    }
    if (itl.resolution!.modalBucket.share >= 0.8)
      assert.equal(r.verdict, "request-level only; ITL bucket 10–25 ms spans the signal");
  } finally {
    await sim.stop();
  }
});

test("watchMetrics: one frame per interval over a trailing window, stops at iterations", async () => {
  const { watchMetrics } = await import("../../src/metrics/watch.ts");
  const fx = new VllmFixture({ itlRange: [0.0165, 0.0183], outputTokens: 10 });
  const server = await startFixtureServer({
    "/metrics": vllmRoute(fx, (f) => {
      f.serve();
      f.running = 1;
      f.kvUsage = 0.125;
    }),
  });
  try {
    let clock = 0;
    const frames: import("../../src/metrics/watch.ts").WatchFrame[] = [];
    const n = await watchMetrics(`${server.url}/metrics`, {
      intervalMs: 1000,
      windowMs: 3000,
      iterations: 6,
      now: () => clock,
      sleep: async (ms) => {
        clock += ms;
      },
      onFrame: (f) => frames.push(f),
    });
    assert.equal(n, 6);
    assert.equal(server.hits.get("/metrics"), 7);
    // The window grows to 3 s and then slides: one request (10 tokens) per second throughout.
    assert.deepEqual(
      frames.map((f) => f.windowSeconds),
      [1, 2, 3, 3, 3, 3],
    );
    for (const f of frames) {
      assert.equal(f.generationTokensPerSecond, 10);
      assert.equal(f.requestsPerSecond, 1);
      assert.equal(f.running, 1);
      assert.equal(f.kvUsage, 0.125);
      assert.equal(f.itl!.count, 9 * f.windowSeconds);
      assert.ok(Math.abs(f.itl!.p50! - 0.0175) < 1e-12);
    }
  } finally {
    await server.close();
  }
});

test("the same window read as OpenMetrics gives the same audit (counter families without _total)", async () => {
  const { formatExposition } = await import("../../src/metrics/write.ts");
  const { a, b } = seedWindow(3);
  const toOm = (s: Snapshot): Snapshot => {
    const text = formatExposition(s.exposition.families, "openmetrics-1.0");
    return { ...s, exposition: parseExposition(text, { format: "openmetrics-1.0" }) };
  };
  const oa = toOm(a);
  const ob = toOm(b);
  assert.equal(ob.exposition.format, "openmetrics-1.0");
  assert.ok(ob.exposition.families.some((f) => f.name === "vllm:prompt_tokens" && f.type === "counter"));
  const r0 = analyzeAudit(a, b, { target: "x" });
  const r1 = analyzeAudit(oa, ob, { target: "x" });
  assert.equal(r1.verdict, r0.verdict);
  assert.deepEqual(
    r1.concepts.map((c) => [c.concept, c.observable, c.value]),
    r0.concepts.map((c) => [c.concept, c.observable, c.value]),
  );
});
