// Fleet mode end to end: a real Prometheus scrapes the fixture server (whose histograms advance on
// every scrape); our quantile over the samples Prometheus stored, extrapolated exactly as rate() does,
// must equal Prometheus' own histogram_quantile at the same evaluation time, and the fleet audit and
// watch must read the same numbers through the HTTP API.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { histogramQuantile } from "../../src/metrics/histogram.ts";
import {
  extrapolatedRate,
  fleetAudit,
  fleetWatch,
  PrometheusClient,
  selectorInner,
} from "../../src/metrics/prometheus.ts";
import type { WatchFrame } from "../../src/metrics/watch.ts";
import { type PrometheusHandle, prometheusSkipReason, startPrometheus } from "../helpers/prometheus.ts";
import { type FixtureServer, startFixtureServer, VllmFixture, vllmRoute } from "./fixtures/server.ts";

const skip = prometheusSkipReason();
if (skip) console.warn(skip);

const ITL = "vllm:inter_token_latency_seconds_bucket";
const WINDOW_MS = 5000;
const rel = (a: number, b: number) => Math.abs(a - b) / Math.max(Math.abs(a), Math.abs(b), Number.MIN_VALUE);

let server: FixtureServer;
let prom: PrometheusHandle;
let client: PrometheusClient;
const fx = new VllmFixture({ itlRange: [0.006, 0.14], engines: ["0", "1"], seed: 99 });

before(async () => {
  if (skip) return;
  // Two requests per engine per scrape, spread over several ITL buckets.
  server = await startFixtureServer({
    "/metrics": vllmRoute(fx, (f) => {
      for (const e of f.engines) for (let i = 0; i < 2; i++) f.serve(undefined, e);
      f.running = 2;
      f.kvUsage = 0.25;
    }),
  });
  prom = await startPrometheus({ targets: [{ job: "vllm", target: `127.0.0.1:${server.port}` }] });
  client = new PrometheusClient(prom.url);
  // Wait (bounded) until Prometheus holds at least four scrapes of the target.
  const deadline = Date.now() + 20_000;
  for (;;) {
    const r = await client.instant(
      `count_over_time(vllm:inter_token_latency_seconds_count{engine="0"}[30s])`,
      Date.now(),
    );
    if ((r[0]?.value.v ?? 0) >= 4) break;
    if (Date.now() > deadline) throw new Error(`Prometheus did not scrape the fixture in time:\n${prom.log()}`);
    await new Promise((res) => setTimeout(res, 200));
  }
});

after(async () => {
  await client?.close();
  await prom?.stop();
  await server?.close();
});

/** An evaluation time (whole seconds) whose window holds at least two samples of every bucket series. */
async function evaluationTime(): Promise<{ t: number; raw: Awaited<ReturnType<PrometheusClient["rawRange"]>> }> {
  for (let i = 0; i < 5; i++) {
    const t = Math.floor(Date.now() / 1000) * 1000 - 1000;
    const raw = await client.rawRange(`${ITL}[${WINDOW_MS / 1000}s]`, t);
    if (raw.length > 0 && raw.every((s) => s.value.length >= 2)) return { t, raw };
    await new Promise((res) => setTimeout(res, 1000));
  }
  throw new Error("no window with two samples per series");
}

test("our histogramQuantile over Prometheus' stored buckets equals histogram_quantile (rel 1e-9)", {
  skip,
  timeout: 20_000,
}, async () => {
  const { t, raw } = await evaluationTime();
  // Ours: rate() per series from the raw samples, then sum by (le), then the quantile.
  const byLe = new Map<number, number>();
  for (const s of raw) {
    const r = extrapolatedRate(s.value, t - WINDOW_MS, t, true, true);
    assert.ok(r !== undefined);
    const le = s.metric.le === "+Inf" ? Number.POSITIVE_INFINITY : Number(s.metric.le);
    byLe.set(le, (byLe.get(le) ?? 0) + r);
  }
  const buckets = [...byLe.entries()].sort((a, b) => a[0] - b[0]).map(([le, count]) => ({ le, count }));
  assert.equal(buckets.length, 20, "19 finite ITL bounds + +Inf");

  // Prometheus' rate() per le, at the same evaluation time.
  const promRates = await client.instant(`sum by (le) (rate(${ITL}[${WINDOW_MS / 1000}s]))`, t);
  for (const p of promRates) {
    const le = p.metric.le === "+Inf" ? Number.POSITIVE_INFINITY : Number(p.metric.le);
    assert.ok(rel(p.value.v, byLe.get(le)!) <= 1e-12, `rate at le=${p.metric.le}: ${p.value.v} vs ${byLe.get(le)}`);
  }

  const seen = new Set<number>();
  for (const q of [0.05, 0.25, 0.5, 0.9, 0.99]) {
    const [p] = await client.instant(`histogram_quantile(${q}, sum by (le) (rate(${ITL}[${WINDOW_MS / 1000}s])))`, t);
    const ours = histogramQuantile(q, buckets);
    assert.ok(p && Number.isFinite(p.value.v), `Prometheus returned ${p?.value.v}`);
    assert.ok(rel(ours, p.value.v) <= 1e-9, `q=${q}: ours ${ours} vs Prometheus ${p.value.v}`);
    seen.add(Number(ours.toPrecision(6)));
  }
  assert.ok(seen.size >= 3, "the window's quantiles should differ (observations spread over buckets)");
});

test("fleet audit through Prometheus: engine, label dimensions, and the same p50 as histogram_quantile", {
  skip,
  timeout: 20_000,
}, async () => {
  const { t } = await evaluationTime();
  const report = await fleetAudit({
    prometheusUrl: prom.url,
    selector: '{job="vllm"}',
    windowMs: WINDOW_MS,
    timeMs: t,
  });
  assert.equal(report.via, "prometheus");
  assert.equal(report.engine?.id, "vllm");
  assert.deepEqual(report.dimensions.engine, ["0", "1"]);
  assert.deepEqual(report.models, ["glm-5"]);
  const itl = report.concepts.find((c) => c.concept === "itl")!;
  assert.equal(itl.observable, true);
  assert.ok((itl.value?.count ?? 0) > 0);
  const [p50] = await client.instant(
    `histogram_quantile(0.5, sum by (le) (rate(${ITL}{job="vllm"}[${WINDOW_MS / 1000}s])))`,
    t,
  );
  assert.ok(rel(itl.value!.p50!, p50!.value.v) <= 1e-9, `${itl.value!.p50} vs ${p50!.value.v}`);
  // mean = increase(sum)/increase(count): both extrapolated by the same factor, so the ratio is exact.
  const [mean] = await client.instant(
    `sum(increase(vllm:inter_token_latency_seconds_sum[5s])) / sum(increase(vllm:inter_token_latency_seconds_count[5s]))`,
    t,
  );
  assert.ok(rel(itl.value!.mean!, mean!.value.v) <= 1e-9);
  const running = report.concepts.find((c) => c.concept === "running")!;
  assert.equal(running.value?.after, 4, "running is summed over the two engines");
  assert.match(report.verdict, /^request-level only/);
  assert.ok(report.gaps.some((g) => g.command.includes("--variant ll:NCCL_PROTO=LL")));
});

test("fleet watch reads one frame per interval and stops at --iterations", { skip, timeout: 20_000 }, async () => {
  const frames: WatchFrame[] = [];
  const n = await fleetWatch({
    prometheusUrl: prom.url,
    selector: '{job="vllm"}',
    windowMs: WINDOW_MS,
    intervalMs: 100,
    iterations: 2,
    onFrame: (f) => frames.push(f),
  });
  assert.equal(n, 2);
  assert.equal(frames.length, 2);
  for (const f of frames) {
    assert.equal(f.engine, "vLLM");
    assert.ok((f.generationTokensPerSecond ?? 0) > 0);
    assert.ok((f.itl?.count ?? 0) > 0);
    assert.equal(f.kvUsage, 0.25, "a fraction: averaged over the two engines");
  }
});

test("fleet mode errors: unreachable Prometheus is exit 3, a bad selector is a usage error", {
  skip,
  timeout: 20_000,
}, async () => {
  await assert.rejects(
    fleetAudit({ prometheusUrl: "http://127.0.0.1:1", windowMs: 5000 }),
    (e: Error & { exitCode?: number }) => {
      assert.equal(e.exitCode, 3);
      assert.match(e.message, /cannot reach Prometheus/);
      return true;
    },
  );
  await assert.rejects(
    fleetAudit({ prometheusUrl: prom.url, selector: '{job=="vllm"}', windowMs: 5000 }),
    (e: Error & { exitCode?: number }) => {
      assert.equal(e.exitCode, 2);
      assert.match(e.message, /Prometheus rejected the query/);
      return true;
    },
  );
  await assert.rejects(
    fleetAudit({ prometheusUrl: prom.url, selector: '{job="nope"}', windowMs: 5000 }),
    /no series matching/,
  );
  assert.equal(selectorInner('{job="vllm"}'), 'job="vllm"');
  assert.equal(selectorInner('job="vllm",'), 'job="vllm"');
});
