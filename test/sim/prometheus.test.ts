import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { startSim } from "../../src/sim/index.ts";
import { post } from "./util.ts";

const PROMETHEUS = "/usr/bin/prometheus";

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

test("a real Prometheus scrapes the sim: target up, vllm: series as served", async (t) => {
  if (!existsSync(PROMETHEUS)) {
    if (process.env.INFERSCOPE_REQUIRE_E2E) assert.fail(`${PROMETHEUS} is required (INFERSCOPE_REQUIRE_E2E)`);
    t.skip(`prometheus not installed (${PROMETHEUS})`);
    return;
  }
  const sim = await startSim({ port: 0, speed: "zero", warmup: false });
  const dir = mkdtempSync(join(tmpdir(), "sim-prom-"));
  const port = await freePort();
  writeFileSync(
    join(dir, "prometheus.yml"),
    `global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: sim\n    static_configs:\n      - targets: ["127.0.0.1:${sim.port}"]\n`,
  );
  const prom = spawn(
    PROMETHEUS,
    [
      `--config.file=${join(dir, "prometheus.yml")}`,
      `--storage.tsdb.path=${join(dir, "data")}`,
      `--web.listen-address=127.0.0.1:${port}`,
    ],
    { stdio: "ignore" },
  );
  const exited = new Promise((r) => prom.on("exit", r));
  try {
    for (let i = 0; i < 3; i++) await post(sim.url, "/v1/completions", { prompt: "scrape me", max_tokens: 25 });
    const query = async (q: string) => {
      const r = await fetch(`http://127.0.0.1:${port}/api/v1/query?query=${encodeURIComponent(q)}`);
      return (await r.json()) as {
        data: { result: Array<{ metric: Record<string, string>; value: [number, string] }> };
      };
    };
    // Only the query is retried (Prometheus may not have scraped yet); the checks run once, after the
    // loop, so a failed one fails the test instead of being retried away.
    let series: { metric: Record<string, string>; value: [number, string] } | null = null;
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline) {
      try {
        const r = await query("vllm:generation_tokens_total");
        if (r.data.result.length) {
          series = r.data.result[0]!;
          // A scrape taken while the requests ran holds less; the next one has them all.
          if (Number(series.value[1]) >= 75) break;
        }
      } catch {
        /* not up yet */
      }
      await new Promise((r) => setTimeout(r, 250));
    }
    assert.ok(series, "Prometheus stored the sim's generation counter within 30 s");
    assert.equal(Number(series.value[1]), 75, "the generation counter");
    assert.equal(series.metric.model_name, "zai-org/GLM-5");
    const up = await query('up{job="sim"}');
    assert.equal(up.data.result[0]!.value[1], "1");
    const buckets = await query("vllm:inter_token_latency_seconds_bucket");
    assert.equal(buckets.data.result.length, 20, "19 bounds + Inf");
  } finally {
    prom.kill("SIGTERM");
    await exited;
    await sim.close();
  }
});
