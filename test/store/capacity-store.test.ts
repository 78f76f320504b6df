// `bench --find-capacity --db`: the search is saved for real (kind "capacity"), one block per run at a
// load with its requests, the result as a summary, and `runs list|show|export` read it like any run.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { type SimHandle, startSim } from "../../src/sim/index.ts";
import { openStore } from "../../src/store/index.ts";
import { runCli, STACK } from "../helpers/cli.ts";

const dir = mkdtempSync(join(tmpdir(), "inferscope-capacity-store-"));
let sim: SimHandle;
before(async () => {
  sim = await startSim({ port: 0, speed: "zero", seed: 1 });
});
after(async () => {
  await sim?.close(0);
  rmSync(dir, { recursive: true, force: true });
});

test("bench --find-capacity --db saves the search: its runs as blocks with their requests, its result", async () => {
  const db = join(dir, "runs.db");
  const r = await runCli(
    [
      "bench",
      ...["--base-url", sim.url, "--telemetry", "none", "--no-server-metrics", "--random-output-len", "4"],
      ...["--find-capacity", "--slo", "ttft:60000", "--goodput", "0.5", "--capacity-start", "20"],
      ...["--capacity-max-runs", "2", "--capacity-replicates", "1", "--num-prompts", "4", "--warmup", "0"],
      ...["--db", db, "--json"],
    ],
    { limitMs: 60_000 },
  );
  assert.doesNotMatch(r.stderr, STACK);
  assert.ok(r.code === 0 || r.code === 1, `exit ${r.code}: ${r.stderr}`);
  const cap = JSON.parse(r.stdout).capacity;

  const s = openStore(db);
  try {
    const [run] = s.listRuns({ kind: "capacity" });
    assert.ok(run, "no capacity run in the store");
    assert.equal(run.status, "complete");
    assert.deepEqual(run.config.capacity, { knob: "request_rate", unit: "req/s", target: 0.5, start: 20 });
    const d = s.getRun(run.id);
    assert.equal(d.blocks.length, cap.runs.length);
    for (const [i, b] of d.blocks.entries()) {
      assert.equal(b.status, "complete");
      assert.equal(b.variant, `${cap.runs[i].load} req/s`);
      assert.equal((b.summary as { total: number }).total, cap.runs[i].total);
      assert.equal(s.getRequests(run.id, { blockId: b.id }).length, 4);
    }
    assert.equal(d.requestCount, 4 * cap.runs.length);
    const saved = d.summaries.capacity as Record<string, unknown>;
    assert.equal(saved.stopped, cap.stopped);
    assert.equal(saved.capacity, cap.capacity);
    // `runs list` and `runs show` read it like any run.
    const list = await runCli(["runs", "list", "--kind", "capacity", "--db", db]);
    assert.equal(list.code, 0, list.stderr);
    assert.match(list.stdout, /request_rate for ttft ≤ 60000 ms at 50 %/);
    const show = await runCli(["runs", "show", run.id, "--db", db]);
    assert.equal(show.code, 0, show.stderr);
    assert.match(show.stdout, /capacity\s+complete/);
    assert.match(show.stdout, /summaries: capacity/);
  } finally {
    s.close();
  }
});
