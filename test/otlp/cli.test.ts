// `inferscope bench --otlp-receiver` as a user runs it: the sim in its own process exports to the
// port given, bench prints the engine flag, and the split lands in the table and in --json.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { assertRefused, runCli } from "../helpers/cli.ts";
import { freePort } from "../helpers/prometheus.ts";
import { type SpawnedSim, spawnSim } from "../helpers/sim.ts";

describe("bench --otlp-receiver (CLI)", () => {
  let sim: SpawnedSim;
  let port: number;
  before(async () => {
    // Free now; the sim exports there only after bench's requests, by when bench listens on it.
    port = await freePort();
    sim = await spawnSim(["--profile", "llama3-8b-1xh100", "--otlp-traces-endpoint", `http://127.0.0.1:${port}`]);
  });
  after(() => sim?.stop());

  const args = () => [
    "bench",
    "--base-url",
    sim.url,
    "--otlp-receiver",
    String(port),
    "--otlp-wait",
    "20s",
    "--num-prompts",
    "6",
    "--concurrency",
    "2",
    "--random-input-len",
    "32",
    "--random-output-len",
    "4",
    "--ignore-eos",
    "--no-server-metrics",
    "--telemetry",
    "none",
  ];

  test("--json and --db: the join under `otlp`, every request joined, warm-up spans not strangers, the engine flag on stderr", async () => {
    const dir = mkdtempSync(join(tmpdir(), "isc-otlp-"));
    const db = join(dir, "runs.db");
    const r = await runCli([...args(), "--warmup", "2", "--json", "--db", db, "--otlp-grpc-receiver", "0"], {
      limitMs: 60_000,
    });
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, new RegExp(`--otlp-traces-endpoint http://127\\.0\\.0\\.1:${port}/v1/traces`));
    const j = JSON.parse(r.stdout);
    // With a gRPC port too, the hint gives vLLM's default (gRPC) form first.
    assert.match(j.otlp.grpc_endpoint, /^http:\/\/127\.0\.0\.1:\d+$/);
    assert.ok(r.stderr.includes(`--otlp-traces-endpoint ${j.otlp.grpc_endpoint} `), r.stderr);
    assert.equal(j.otlp.requests, 6);
    assert.equal(j.otlp.join_rate, 1);
    assert.equal(j.otlp.complete, true);
    assert.equal(j.otlp.per_request.length, 6);
    assert.deepEqual(j.otlp.unmatched_spans, []);
    assert.deepEqual(j.otlp.findings, []);
    for (const k of ["network", "intake", "queue", "prefill", "delivery", "client_ttft"])
      assert.equal(j.otlp.split_ms[k].n, 6, k);
    assert.ok(j.otlp.split_ms.prefill.p50 > 0);
    // The store keeps the same join beside the run's summary.
    const { openStore } = await import("../../src/store/index.ts");
    const store = openStore(db);
    try {
      const [run] = store.listRuns({ kind: "bench" });
      const stored = store.getRun(run!.id).summaries.otlp as typeof j.otlp;
      assert.equal(stored.join_rate, 1);
      assert.deepEqual(stored.split_ms.queue, j.otlp.split_ms.queue);
    } finally {
      store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("terminal: the split table after the console summary", async () => {
    const r = await runCli(args(), { limitMs: 60_000 });
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /Engine spans \(OTLP\)/);
    assert.match(r.stdout, /Requests joined:\s+6 of 6 \(100\.0%\)/);
    assert.match(r.stdout, /^queue\s+\d+\.\d\d\s+\d+\.\d\d\s+\d+\.\d\d$/m);
    assert.match(r.stdout, /^prefill\s+\d+\.\d\d/m);
  });

  test("an engine that sends nothing: the run's results stand, with a finding that says what to check", async () => {
    const quiet = await spawnSim(["--speed", "zero"]);
    try {
      const r = await runCli(
        ["bench", "--base-url", quiet.url, "--otlp-receiver", "0", "--otlp-wait", "300ms", "--num-prompts", "3"]
          .concat(["--random-input-len", "8", "--random-output-len", "2", "--no-server-metrics", "--telemetry", "none"])
          .concat(["--json"]),
        { limitMs: 60_000 },
      );
      assert.equal(r.code, 0, r.stderr);
      const j = JSON.parse(r.stdout);
      assert.equal(j.completed, 3);
      assert.equal(j.otlp.joined, 0);
      assert.equal(j.otlp.complete, false);
      assert.deepEqual(
        j.otlp.findings.map((f: { kind: string }) => f.kind),
        ["no-spans"],
      );
      assert.match(j.otlp.findings[0].detail, /--otlp-traces-endpoint/);
    } finally {
      await quiet.stop();
    }
  });

  test("bad flags are refused before anything is sent", async () => {
    assertRefused(await runCli(["bench", "--otlp-receiver", "here"]), /expected \[HOST:\]PORT/, "not a port");
    assertRefused(
      await runCli(["bench", "--otlp-receiver", "4318", "--sweep", "auto"]),
      /single run/,
      "a sweep mixes runs",
    );
    assertRefused(await runCli(["bench", "--otlp-grpc-receiver", "4317"]), /goes with --otlp-receiver/, "gRPC alone");
  });
});
