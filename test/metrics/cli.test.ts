// The real CLI (bin/inferscope.mjs as a child process) against the fixture server and fixture files:
// exit codes, --json, no stack traces, bounded watch, Ctrl-C.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { ExitCode } from "../../src/errors.ts";
import {
  type FixtureServer,
  fixture,
  jsonRoute,
  readFixture,
  startFixtureServer,
  VllmFixture,
  vllmRoute,
} from "./fixtures/server.ts";

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the CLI without blocking this process (the fixture server lives here). */
function cli(
  args: string[],
  opts: { stdin?: string; onStdout?: (chunk: string, kill: () => void) => void; timeoutMs?: number } = {},
): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["bin/inferscope.mjs", ...args], {
      stdio: ["pipe", "pipe", "pipe"],
      env: { ...process.env, NO_COLOR: "1" },
    });
    let stdout = "";
    let stderr = "";
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`inferscope ${args.join(" ")} did not finish; stderr:\n${stderr}`));
    }, opts.timeoutMs ?? 150_000);
    child.stdout.setEncoding("utf8").on("data", (d: string) => {
      stdout += d;
      opts.onStdout?.(d, () => child.kill("SIGINT"));
    });
    child.stderr.setEncoding("utf8").on("data", (d: string) => {
      stderr += d;
    });
    child.stdin.end(opts.stdin ?? "");
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

const noStack = (r: Run) => assert.doesNotMatch(r.stderr, /\n\s+at /, r.stderr);

let server: FixtureServer;
before(async () => {
  const fx = new VllmFixture({ itlRange: [0.0165, 0.0183] });
  server = await startFixtureServer({
    "/metrics": vllmRoute(fx, (f) => {
      for (let i = 0; i < 2; i++) f.serve();
      f.running = 1;
    }),
    // A second generator, so concurrent audits do not see each other's scrapes.
    "/metrics-b": vllmRoute(new VllmFixture({ itlRange: [0.0165, 0.0183] }), (f) => {
      for (let i = 0; i < 2; i++) f.serve();
    }),
    "/v1/models": jsonRoute({ data: [{ id: "glm-5" }] }),
  });
});
after(() => server.close());

// CLI start-up (tsx + every command module) is seconds on a busy machine: few spawns, run 3 at a time.
describe("inferscope metrics", { concurrency: 3, timeout: 400_000 }, () => {
  test("scrape FILE --json prints the parsed exposition; --out saves the body", async () => {
    const out = join(mkdtempSync(join(tmpdir(), "inferscope-cli-")), "saved.prom");
    const r = await cli(["metrics", "scrape", fixture("engine-tgi.prom"), "--json", "--out", out]);
    assert.equal(r.code, 0, r.stderr);
    const snap = JSON.parse(r.stdout);
    assert.equal(snap.exposition.format, "prometheus-0.0.4");
    assert.ok(snap.exposition.families.some((f: { name: string }) => f.name === "tgi_batch_forward_duration"));
    assert.equal(readFileSync(out, "utf8"), readFixture("engine-tgi.prom"));
  });

  test("scrape - reads stdin and prints a table of families", async () => {
    const r = await cli(["metrics", "scrape", "-"], { stdin: readFixture("engine-llamacpp.prom") });
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /stdin: prometheus-0\.0\.4, 11 families, 11 samples/);
    assert.match(r.stdout, /llamacpp:tokens_predicted_seconds +│ counter/);
  });

  test("scrape --strict on non-OpenMetrics input exits 2 with file:line:column, no stack", async () => {
    const r = await cli(["metrics", "scrape", fixture("engine-llamacpp.prom"), "--strict"]);
    assert.equal(r.code, ExitCode.usage);
    assert.match(r.stderr, /^inferscope: error: .*engine-llamacpp\.prom:\d+:\d+: /);
    noStack(r);
  });

  test("scrape of an unreachable URL exits 3 in plain words", async () => {
    const r = await cli(["metrics", "scrape", "http://127.0.0.1:1/metrics", "--timeout", "2s"]);
    assert.equal(r.code, ExitCode.unreachable);
    assert.match(r.stderr, /cannot scrape http:\/\/127\.0\.0\.1:1\/metrics: connection refused/);
    noStack(r);
  });

  test("audit URL prints the seed verdict and the commands; --json carries the same report", async () => {
    const [text, json] = await Promise.all([
      cli(["metrics", "audit", `${server.url}/metrics`, "--window", "300ms"]),
      cli(["metrics", "audit", `${server.url}/metrics-b`, "--window", "300ms", "--json"]),
    ]);
    assert.equal(text.code, 0, text.stderr);
    assert.match(text.stdout, /vLLM V1 \(confidence 1\.00\)/);
    assert.match(text.stdout, /Verdict: request-level only; ITL bucket 10–25 ms spans the signal/);
    assert.match(
      text.stdout,
      /ITL buckets are 15 ms wide around the 17\.\d ms mean: p50 is interpolated, not measured/,
    );
    assert.match(text.stdout, new RegExp(`inferscope trace capture ${server.url} --steps 20`));
    assert.match(text.stdout, /--variant ll:NCCL_PROTO=LL/);
    assert.equal(json.code, 0, json.stderr);
    const report = JSON.parse(json.stdout);
    assert.equal(report.engine.id, "vllm");
    assert.deepEqual(report.models, ["glm-5"]);
    assert.equal(report.verdict, "request-level only; ITL bucket 10–25 ms spans the signal");
    assert.equal(report.concepts.find((c: { concept: string }) => c.concept === "requests").value.count, 2);
  });

  test("audit needs a URL or --prometheus; a bad --window is a usage error", async () => {
    const [a, b] = await Promise.all([
      cli(["metrics", "audit"]),
      cli(["metrics", "audit", `${server.url}/metrics`, "--window", "soon"]),
    ]);
    assert.equal(a.code, ExitCode.usage);
    assert.match(a.stderr, /needs a URL/);
    assert.equal(b.code, ExitCode.usage);
    assert.match(b.stderr, /--window: not a duration: "soon"/);
    noStack(a);
    noStack(b);
  });

  test("diff A B --json has the counter and histogram deltas exactly", async () => {
    const json = await cli([
      "metrics",
      "diff",
      fixture("engine-sglang.prom"),
      fixture("engine-sglang.b.prom"),
      "--json",
    ]);
    assert.equal(json.code, 0, json.stderr);
    const d = JSON.parse(json.stdout);
    const req = d.counters.find((c: { name: string }) => c.name === "sglang:num_requests_total");
    assert.equal(req.delta, 20);
    const itl = d.histograms.find((h: { family: string }) => h.family === "sglang:inter_token_latency_seconds");
    assert.equal(itl.count, 20 * 255);
  });

  test("watch --iterations 3 prints one line per interval when not a TTY, exit 0", async () => {
    const r = await cli(["metrics", "watch", `${server.url}/metrics`, "--interval", "100ms", "--iterations", "3"]);
    assert.equal(r.code, 0, r.stderr);
    const lines = r.stdout.trim().split("\n");
    assert.equal(lines.length, 3);
    for (const l of lines) assert.match(l, /gen [\d.]+ tok\/s .* running 1 .* itl p50 17\.5 ms/);
  });

  test("watch stops cleanly on Ctrl-C (SIGINT): exit 0", async () => {
    let sent = false;
    const r = await cli(["metrics", "watch", `${server.url}/metrics`, "--interval", "100ms", "--json"], {
      onStdout: (_d, kill) => {
        if (!sent) {
          sent = true;
          kill();
        }
      },
    });
    assert.equal(r.code, 0, r.stderr);
    const first = JSON.parse(r.stdout.trim().split("\n")[0]!);
    assert.equal(first.engine, "vLLM");
    assert.ok(first.generationTokensPerSecond > 0);
  });
});
