// Engine catalogs: detection on each engine's fixture, concept bindings, and the real quirks.
import assert from "node:assert/strict";
import { test } from "node:test";
import { CONCEPTS, conceptInfo, sourceMetrics } from "../../src/metrics/concepts.ts";
import { detectEngines, engines, NameIndex } from "../../src/metrics/engines/index.ts";
import { parseExposition } from "../../src/metrics/parse.ts";
import { readFixture, VllmFixture } from "./fixtures/server.ts";

const families = (text: string) => parseExposition(text).families;

const cases: Array<{ fixture: string; id: string; variant?: string; observable: string[] }> = [
  {
    fixture: "engine-sglang.prom",
    id: "sglang",
    observable: ["ttft", "itl", "e2e", "queue", "prefill", "decode", "running", "waiting", "kv_usage", "preemptions"],
  },
  {
    fixture: "engine-tgi.prom",
    id: "tgi",
    observable: ["tpot", "e2e", "queue", "prefill", "decode", "step_time", "running", "waiting", "requests"],
  },
  {
    fixture: "engine-llamacpp.prom",
    id: "llamacpp",
    observable: ["prefill", "decode", "step_tokens", "running", "waiting", "prompt_tokens", "generation_tokens"],
  },
  {
    fixture: "engine-trtllm.prom",
    id: "trtllm",
    observable: ["ttft", "tpot", "e2e", "step_time", "running", "waiting", "kv_usage", "prefix_cache_hit_rate"],
  },
  { fixture: "engine-triton.prom", id: "triton", observable: ["e2e", "queue", "step_time", "running", "kv_usage"] },
  {
    fixture: "engine-dynamo.prom",
    id: "dynamo",
    variant: "frontend",
    observable: ["ttft", "itl", "running", "waiting", "generation_tokens", "requests"],
  },
  {
    fixture: "engine-vllm-v0.prom",
    id: "vllm",
    variant: "V0 (legacy engine)",
    observable: ["ttft", "itl", "queue", "step_time", "running", "waiting", "kv_usage", "preemptions"],
  },
];

for (const c of cases) {
  test(`detects ${c.id} in ${c.fixture} and resolves its concepts`, () => {
    const fams = families(readFixture(c.fixture));
    const [top, ...rest] = detectEngines(fams);
    assert.equal(top?.engine.id, c.id);
    assert.ok(top!.confidence >= 0.8, `confidence ${top!.confidence}`);
    for (const r of rest) assert.ok(r.confidence < top!.confidence);
    if (c.variant) assert.equal(top!.engine.variant?.(fams), c.variant);
    const idx = new NameIndex(fams);
    for (const concept of c.observable) {
      const bindings = top!.engine.concepts[concept as keyof typeof top.engine.concepts] ?? [];
      const hit = bindings.find((b) => sourceMetrics(b.source).every((m) => idx.has(m)));
      assert.ok(hit, `${c.id}: ${concept} should be observable in ${c.fixture}`);
    }
  });
}

test("vLLM V1 (generated exposition) is detected as V1, and V1 has no step timing", () => {
  const fams = families(new VllmFixture().render());
  const [top] = detectEngines(fams);
  assert.equal(top?.engine.id, "vllm");
  assert.equal(top!.confidence, 1);
  assert.equal(engines.vllm.variant?.(fams), "V1");
  const idx = new NameIndex(fams);
  const step = engines.vllm.concepts.step_time!.find((b) => sourceMetrics(b.source).every((m) => idx.has(m)));
  assert.equal(step, undefined, "model_forward_time_milliseconds is V0 only");
  // iteration_tokens_total is a histogram family despite its _total name.
  assert.equal(fams.find((f) => f.name === "vllm:iteration_tokens_total")?.type, "histogram");
});

test("a non-inference exposition detects no engine", () => {
  const fams = families(
    '# TYPE node_cpu_seconds_total counter\nnode_cpu_seconds_total{cpu="0",mode="idle"} 1\n# TYPE up gauge\nup 1\n',
  );
  assert.deepEqual(detectEngines(fams), []);
});

test("Ray-sanitized vLLM names (vllm_ prefix) are weak evidence, not certainty", () => {
  const fams = families("# TYPE vllm_num_requests_running gauge\nvllm_num_requests_running 1\n");
  const [top] = detectEngines(fams);
  assert.equal(top?.engine.id, "vllm");
  assert.ok(top!.confidence < 0.5);
});

test("a Dynamo worker endpoint is the engine's own (vLLM) first, Dynamo second", () => {
  const text = `${new VllmFixture().render()}# TYPE dynamo_component_requests_total counter\ndynamo_component_requests_total 3\n`;
  const d = detectEngines(families(text));
  assert.equal(d[0]?.engine.id, "vllm");
  assert.equal(d[1]?.engine.id, "dynamo");
});

test("every catalog binding names a known concept, a granularity, and a well-formed source", () => {
  for (const e of Object.values(engines)) {
    for (const [concept, bindings] of Object.entries(e.concepts)) {
      assert.ok((CONCEPTS as readonly string[]).includes(concept), `${e.id}: unknown concept ${concept}`);
      for (const b of bindings ?? []) {
        assert.ok(["request", "step", "operation", "aggregate"].includes(b.granularity));
        for (const m of sourceMetrics(b.source)) assert.match(m, /^[a-zA-Z_:][a-zA-Z0-9_:]*$/);
        if (b.source.kind === "histogram" && conceptInfo[concept as keyof typeof conceptInfo].unit === "seconds")
          assert.ok(b.source.scale === undefined || b.source.scale < 1);
      }
    }
    assert.ok(e.metricsPath.startsWith("/"));
  }
  assert.equal(engines.trtllm.metricsPath, "/prometheus/metrics");
});

test("quirks: TGI counters without _total resolve; SGLang gt/le gauges stay gauges; llama.cpp scrape-reset gauges flagged", () => {
  const tgi = new NameIndex(families(readFixture("engine-tgi.prom")));
  assert.ok(tgi.has("tgi_request_success"));
  assert.ok(engines.tgi.quirks.some((q) => q.when(tgi) && /no _total/.test(q.text)));

  const sg = families(readFixture("engine-sglang.prom"));
  const routing = sg.find((f) => f.name === "sglang:routing_key_running_req_count");
  assert.equal(routing?.type, "gauge");
  assert.ok(routing!.samples.every((s) => s.labels.gt !== undefined && s.labels.le !== undefined));
  assert.ok(engines.sglang.quirks.some((q) => q.when(new NameIndex(sg)) && /non-cumulative/.test(q.text)));

  const ll = new NameIndex(families(readFixture("engine-llamacpp.prom")));
  assert.ok(engines.llamacpp.quirks.some((q) => q.when(ll) && /resets them/.test(q.text)));
});
