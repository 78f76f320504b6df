// The `inferscope bench` command end to end: real CLI process, real simulator process, 127.0.0.1 only.
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { type SimProcess, spawnSimProcess } from "../../src/load/selftest.ts";

const cli = (args: string[]) =>
  spawnSync(process.execPath, ["bin/inferscope.mjs", "bench", ...args], { encoding: "utf8", timeout: 60_000 });
const dir = mkdtempSync(join(tmpdir(), "inferscope-bench-cli-"));

async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return port;
}

test("unreachable server: clear error, exit 3, no stack trace", async () => {
  const port = await closedPort();
  const t0 = Date.now();
  const r = cli(["--base-url", `http://127.0.0.1:${port}`, "--num-prompts", "2", "--connect-timeout", "2s"]);
  assert.equal(r.status, 3, r.stderr);
  assert.match(r.stderr, /cannot reach http:\/\/127\.0\.0\.1:\d+\/v1\/models: connection refused/);
  assert.doesNotMatch(r.stderr, /\n\s+at /);
  assert.ok(Date.now() - t0 < 20_000);
});

test("contradictory flags and bad datasets are usage errors (exit 2)", () => {
  const r = cli(["--concurrency", "4", "--request-rate", "10"]);
  assert.equal(r.status, 2);
  assert.match(r.stderr, /contradict/);
  const bad = join(dir, "bad.jsonl");
  writeFileSync(bad, '{"prompt":"ok"}\n{"prompt":\n');
  const d = cli(["--dataset-name", "jsonl", "--dataset-path", bad]);
  assert.equal(d.status, 2);
  assert.ok(d.stderr.includes(`${bad}:2:`), d.stderr);
  const g = cli(["--goodput", "ttft=5"]);
  assert.equal(g.status, 2);
  assert.match(g.stderr, /bad SLO/);
  const w = cli(["--workers", "0"]);
  assert.equal(w.status, 2);
  assert.match(w.stderr, /--workers must be an integer ≥ 1 or auto/);
  const h = cli(["--http-client", "curl"]);
  assert.equal(h.status, 2);
  assert.match(h.stderr, /http-client/);
  const s = cli(["--http-client", "h1", "--base-url", "https://127.0.0.1:1"]);
  assert.equal(s.status, 2);
  assert.match(s.stderr, /h1 transport speaks plain http only/);
});

describe("against the simulator", { timeout: 120_000 }, () => {
  let sim: SimProcess;
  before(async () => {
    sim = await spawnSimProcess(["--time-scale", "20"]);
  });
  after(() => sim?.stop());

  test("a wrong model name aborts with the server's own message (exit 3)", () => {
    const r = cli(["--base-url", sim.url, "--model", "no-such-model", "--num-prompts", "20", "--concurrency", "2"]);
    assert.equal(r.status, 3, r.stderr);
    assert.match(r.stderr, /rejected the request: HTTP 404.*no-such-model/);
  });

  test("an output path that cannot be written fails before any request is sent (exit 2)", async () => {
    const served = async () => {
      const text = await (await fetch(`${sim.url}/metrics`)).text();
      return [...text.matchAll(/^vllm:request_success_total\{[^}]*\} (\S+)$/gm)].reduce((a, m) => a + Number(m[1]), 0);
    };
    const before = await served();
    const missing = join(dir, "no-such-dir", "x");
    for (const [flag, path, msg] of [
      ["--save-result", `${missing}.json`, /--save-result \S+x\.json: no such directory/],
      ["--records", `${missing}.jsonl`, /--records \S+x\.jsonl: no such directory/],
      ["--save-result", dir, /--save-result \S+: is a directory; give a file name/],
    ] as const) {
      const r = cli(["--base-url", sim.url, "--num-prompts", "4", flag, path]);
      assert.equal(r.status, 2, r.stderr);
      assert.match(r.stderr, msg);
      assert.doesNotMatch(r.stderr, /\n\s+at /);
    }
    assert.equal(await served(), before, "no request reached the server");
  });

  test("vLLM console layout, --save-result with vLLM's field names, records JSONL", () => {
    const out = join(dir, "res.json");
    const recs = join(dir, "recs.jsonl");
    const r = cli([
      "--base-url",
      sim.url,
      "--num-prompts",
      "6",
      "--max-concurrency",
      "3",
      "--random-input-len",
      "16",
      "--random-output-len",
      "12",
      "--ignore-eos",
      "--metric-percentiles",
      "50,99.9",
      "--percentile-metrics",
      "ttft,tpot,itl,e2el",
      "--goodput",
      "ttft:10000",
      "tpot:10000",
      "--save-result",
      out,
      "--save-detailed",
      "--records",
      recs,
    ]);
    assert.equal(r.status, 0, r.stderr);
    const lines = r.stdout.split("\n");
    assert.equal(lines[0], "============ Serving Benchmark Result ============");
    assert.match(r.stdout, /^Successful requests: {21}6\s*$/m);
    assert.match(r.stdout, /^Maximum request concurrency: {13}3\s*$/m);
    assert.match(r.stdout, /^Request goodput \(req\/s\): +\d+\.\d\d/m);
    assert.match(r.stdout, /^-+Time per Output Token \(excl\. 1st token\)-+$/m);
    assert.match(r.stdout, /^P99\.9 ITL \(ms\): +\d+\.\d\d/m);
    assert.match(r.stdout, /^Median E2EL \(ms\):/m);
    const j = JSON.parse(readFileSync(out, "utf8"));
    for (const k of [
      "date",
      "backend",
      "model_id",
      "num_prompts",
      "request_rate",
      "max_concurrency",
      "duration",
      "completed",
      "failed",
      "total_input_tokens",
      "total_output_tokens",
      "request_throughput",
      "request_goodput",
      "output_throughput",
      "total_token_throughput",
      "max_output_tokens_per_s",
      "max_concurrent_requests",
      "mean_ttft_ms",
      "median_ttft_ms",
      "std_ttft_ms",
      "p50_ttft_ms",
      "p99.9_tpot_ms",
      "mean_itl_ms",
      "p99.9_e2el_ms",
      "latencies",
      "queue_times",
      "ttfts",
      "itls",
      "input_lens",
      "output_lens",
    ])
      assert.ok(k in j, `missing ${k}`);
    assert.equal(j.request_rate, "inf");
    assert.equal(j.completed, 6);
    assert.equal(j.total_output_tokens, 72);
    assert.equal(j.itls.length, 6);
    assert.equal(j.itls[0].length, 11);
    assert.ok(j.max_concurrent_requests <= 3);
    assert.equal(typeof j.inferscope.itl_token_ms.mean, "number");
    const rl = readFileSync(recs, "utf8").trim().split("\n");
    assert.equal(rl.length, 7); // header + 6
    // 12 token chunks with choices (a usage-only trailer, if sent, has none).
    assert.equal(JSON.parse(rl[1]!).chunks.flags.filter((f: number) => f & 1).length, 12);
  });

  test("Ctrl-C: stops sending, writes partial results marked partial, exit 130", async () => {
    const out = join(dir, "partial.json");
    const recs = join(dir, "partial.jsonl");
    const child = spawn(
      process.execPath,
      [
        "bin/inferscope.mjs",
        "bench",
        "--base-url",
        sim.url,
        "--num-prompts",
        "400",
        "--concurrency",
        "2",
        "--random-input-len",
        "16",
        "--random-output-len",
        "200",
        "--ignore-eos",
        "--save-result",
        out,
        "--records",
        recs,
      ],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    let stdout = "";
    child.stdout.on("data", (d) => {
      stdout += d;
    });
    // Interrupt once some records have been written (records stream as requests complete).
    const t0 = Date.now();
    while (Date.now() - t0 < 30_000) {
      if (existsSync(recs) && readFileSync(recs, "utf8").split("\n").length > 3) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    const tKill = Date.now();
    child.kill("SIGINT");
    const code = await new Promise<number | null>((r) => child.on("exit", (c) => r(c)));
    assert.equal(code, 130);
    assert.ok(Date.now() - tKill < 8000, "stopped within the grace period");
    const j = JSON.parse(readFileSync(out, "utf8"));
    assert.equal(j.inferscope.partial, true);
    assert.ok(j.completed >= 2 && j.completed < 400, `completed ${j.completed}`);
    assert.match(stdout, /interrupted: partial results/);
  });
});
