import assert from "node:assert/strict";
import { test } from "node:test";
import { diffSnapshots } from "../../src/metrics/diff.ts";
import { histogramQuantile } from "../../src/metrics/histogram.ts";
import { parseExposition } from "../../src/metrics/parse.ts";
import type { Snapshot } from "../../src/metrics/types.ts";

const snap = (atMs: number, text: string): Snapshot => ({ source: "test", atMs, exposition: parseExposition(text) });

const before = snap(
  1_000,
  `# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0"} 1000
vllm:generation_tokens_total{engine="1"} 500
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0"} 4
# TYPE vllm:inter_token_latency_seconds histogram
vllm:inter_token_latency_seconds_bucket{engine="0",le="0.01"} 0
vllm:inter_token_latency_seconds_bucket{engine="0",le="0.025"} 100
vllm:inter_token_latency_seconds_bucket{engine="0",le="+Inf"} 110
vllm:inter_token_latency_seconds_count{engine="0"} 110
vllm:inter_token_latency_seconds_sum{engine="0"} 2.0
vllm:inter_token_latency_seconds_bucket{engine="1",le="0.01"} 5
vllm:inter_token_latency_seconds_bucket{engine="1",le="0.025"} 50
vllm:inter_token_latency_seconds_bucket{engine="1",le="+Inf"} 60
vllm:inter_token_latency_seconds_count{engine="1"} 60
vllm:inter_token_latency_seconds_sum{engine="1"} 1.0
# TYPE gone gauge
gone 1
# TYPE rpc summary
rpc{quantile="0.5"} 0.1
rpc_sum 10
rpc_count 100
`,
);
const after = snap(
  11_000,
  `# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0"} 1500
vllm:generation_tokens_total{engine="1"} 20
vllm:generation_tokens_total{engine="2"} 7
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0"} 6
# TYPE vllm:inter_token_latency_seconds histogram
vllm:inter_token_latency_seconds_bucket{engine="0",le="0.01"} 0
vllm:inter_token_latency_seconds_bucket{engine="0",le="0.025"} 1100
vllm:inter_token_latency_seconds_bucket{engine="0",le="+Inf"} 1110
vllm:inter_token_latency_seconds_count{engine="0"} 1110
vllm:inter_token_latency_seconds_sum{engine="0"} 19.5
vllm:inter_token_latency_seconds_bucket{engine="1",le="0.01"} 1
vllm:inter_token_latency_seconds_bucket{engine="1",le="0.025"} 2
vllm:inter_token_latency_seconds_bucket{engine="1",le="+Inf"} 3
vllm:inter_token_latency_seconds_count{engine="1"} 3
vllm:inter_token_latency_seconds_sum{engine="1"} 0.05
# TYPE rpc summary
rpc{quantile="0.5"} 0.2
rpc_sum 30
rpc_count 150
`,
);

test("counter deltas, resets, new series and rates per second over the window", () => {
  const d = diffSnapshots(before, after);
  assert.equal(d.windowSeconds, 10);
  const [e0, e1, e2] = d.counters;
  assert.deepEqual(e0, {
    family: "vllm:generation_tokens",
    name: "vllm:generation_tokens_total",
    labels: { engine: "0" },
    before: 1000,
    after: 1500,
    delta: 500,
    rate: 50,
    reset: false,
    added: false,
  });
  // Reset: the counter went down, so the window's increase is the new value.
  assert.equal(e1.reset, true);
  assert.equal(e1.delta, 20);
  assert.equal(e1.rate, 2);
  assert.equal(e2.added, true);
  assert.equal(e2.delta, 7);
  assert.ok(Number.isNaN(e2.before));
});

test("histogram deltas bucket by bucket, reset when the count decreased", () => {
  const d = diffSnapshots(before, after);
  const [h0, h1] = d.histograms;
  assert.deepEqual(h0.buckets, [
    { le: 0.01, count: 0 },
    { le: 0.025, count: 1000 },
    { le: Infinity, count: 1000 },
  ]);
  assert.equal(h0.count, 1000);
  assert.equal(h0.sum, 17.5);
  assert.equal(h0.mean, 0.0175);
  assert.equal(h0.rate, 100);
  assert.equal(h0.reset, false);
  assert.equal(histogramQuantile(0.5, h0.buckets), 0.0175);
  assert.equal(h1.reset, true);
  assert.equal(h1.count, 3);
  assert.deepEqual(
    h1.buckets.map((b) => b.count),
    [1, 2, 3],
  );
});

test("gauges before/after, summaries, removed series, zero window", () => {
  const d = diffSnapshots(before, after);
  assert.deepEqual(d.gauges, [
    {
      family: "vllm:num_requests_running",
      name: "vllm:num_requests_running",
      labels: { engine: "0" },
      type: "gauge",
      before: 4,
      after: 6,
      change: 2,
    },
  ]);
  assert.deepEqual(d.removed, [{ family: "gone", name: "gone", labels: {} }]);
  assert.equal(d.summaries[0].count, 50);
  assert.equal(d.summaries[0].mean, 0.4);
  assert.deepEqual(d.summaries[0].quantiles, [{ quantile: 0.5, value: 0.2 }]);
  const same = diffSnapshots(after, { ...after });
  assert.ok(Number.isNaN(same.counters[0].rate));
  assert.equal(same.counters[0].delta, 0);
});

test("a changed _created timestamp is a reset even when the value grew", () => {
  const a = snap(0, "# TYPE c counter\nc_total 5\nc_created 100\n# EOF\n");
  const b = snap(1000, "# TYPE c counter\nc_total 9\nc_created 200\n# EOF\n");
  const d = diffSnapshots(a, b);
  assert.equal(d.counters.length, 1);
  assert.equal(d.counters[0].reset, true);
  assert.equal(d.counters[0].delta, 9);
  assert.deepEqual(d.removed, []);
});
