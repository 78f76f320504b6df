// The binding limit on a real engine: llama.cpp's CPU llama-server with 4 slots (-np 4), swept at 2, 4
// and 8 users through the CLI. Only the level above the slot count queues (llamacpp:requests_deferred),
// with the batch (llamacpp:requests_processing) pinned at the 4 the command sets: the diagnosis names
// max-num-seqs there and nowhere else, and the frontier (--json, and the SVG `inferscope report` draws
// from the store) has every level, labelled with its load and limit.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import type { LoadSweepResult } from "../../src/experiment/sweep.ts";
import { pointLabel } from "../../src/report/sweep.ts";
import { runCli } from "../helpers/cli.ts";
import { LLAMA_SERVER, LLAMA_SMALL, llamaSkipReason, startLlamaServer } from "../helpers/llamacpp.ts";

const SKIP = llamaSkipReason();
const dir = mkdtempSync(join(tmpdir(), "inferscope-limits-llama-"));
after(() => rmSync(dir, { recursive: true, force: true }));

// --threads-http 16: llama-server's HTTP pool defaults to max(np + 2, cores − 1) threads, and a request
// beyond it waits in the kernel's accept queue, where no gauge sees it (docs/metrics.md "Binding limit").
const CMD = `${LLAMA_SERVER} -m ${LLAMA_SMALL} --alias small-random-llama --host 127.0.0.1 --port {port} --metrics --threads 1 -c 2048 -np 4 --threads-http 16`;

/** `sweep concurrency` on `target` at `levels`: 24 requests of 16 → 32 tokens per level, /metrics every 50 ms. */
function sweepArgs(target: string[], levels: string, db: string): string[] {
  return ["sweep", "concurrency", ...target, "--levels", levels, "--num-prompts", "24"].concat([
    "--random-input-len",
    "16",
    "--random-output-len",
    "32",
    "--server-sample",
    "50ms",
    "--db",
    db,
    "--json",
  ]);
}

test("llama-server -np 4 at 2, 4 and 8 users: max-num-seqs (the 4 slots) binds at 8 only; the frontier is drawn from the run", {
  skip: SKIP,
  timeout: 180_000,
}, async () => {
  const db = join(dir, "runs.db");
  const sweep = await runCli(sweepArgs(["--server-cmd", CMD], "2,4,8", db), { limitMs: 150_000 });
  assert.equal(sweep.code, 0, sweep.stderr);
  const r = JSON.parse(sweep.stdout) as LoadSweepResult;
  assert.deepEqual(
    r.points.map((p) => p.level),
    [2, 4, 8],
  );
  for (const p of r.points) {
    const d = p.diagnosis;
    // The engine was recognised and its gauges read at every level; the ceiling is the command's -np.
    assert.ok(d.server.samples > 0 && d.server.running && d.server.waiting, `level ${p.level}: ${JSON.stringify(d)}`);
    assert.equal(d.server.ceiling, 4);
    assert.equal(d.server.ceilingSource, "given");
    assert.ok(d.server.running.max <= 4, `level ${p.level}: running ${d.server.running.max} > 4 slots`);
  }
  // The client's own limit is left out: on a loaded 2-core host its self-check may flag any level.
  const server = r.points.map((p) => p.diagnosis.binding.map((b) => b.limit).filter((l) => l !== "client"));
  assert.deepEqual(server, [[], [], ["max-num-seqs"]], JSON.stringify(r.points.map((p) => p.diagnosis)));
  // Read over the measured window only: at 2 users the batch runs 2 (idle warm-up scrapes left out).
  assert.ok(
    r.points[0]!.diagnosis.server.running!.mean > 1.5,
    `running mean ${r.points[0]!.diagnosis.server.running!.mean} at 2 users`,
  );
  const at8 = r.points[2]!.diagnosis;
  assert.equal(at8.server.running!.max, 4);
  assert.ok(at8.server.waiting!.mean >= 1, `waiting ${at8.server.waiting!.mean}`);
  assert.match(at8.binding.find((b) => b.limit === "max-num-seqs")!.evidence, /^max-num-seqs: running pinned at 4 in /);
  assert.ok(at8.binding.find((b) => b.limit === "max-num-seqs")!.knobs.some((k) => k.startsWith("--parallel")));
  assert.ok(r.knee);
  assert.equal(r.knee.level, 8);
  assert.deepEqual(r.knee.limits, ["max-num-seqs"]);
  // Handed to tune: the slot count around the server's own, and the command that restarts it per candidate.
  assert.deepEqual(r.tune?.knobs, ["--parallel=4,8,16"]);
  assert.match(
    r.tune?.command ?? "",
    /^inferscope tune --server-cmd '.*llama-server.*-np 4.*' --knob --parallel=4,8,16$/,
  );

  // The frontier's data: every level, its limit in the label, tokens per second on both axes.
  assert.equal(r.frontier.points.length, 3);
  for (const [i, f] of r.frontier.points.entries()) {
    assert.equal(f.level, r.points[i]!.level);
    assert.ok(f.tokPerSecPerGpu > 0 && f.tokPerSecPerUser > 0, JSON.stringify(f));
  }
  assert.match(r.frontier.points[2]!.limit!, /(^|\+)max-num-seqs$/);
  assert.ok(r.frontier.points.some((f) => f.pareto));

  // The report, rebuilt from the store by the CLI: the SVG has each point's label.
  const rep = await runCli(["report", r.runId, "--db", db, "--out", join(dir, "report"), "--json"]);
  assert.equal(rep.code, 0, rep.stderr);
  const out = JSON.parse(rep.stdout) as { report: { html: string }; result: LoadSweepResult };
  assert.deepEqual(out.result.frontier, r.frontier);
  const html = readFileSync(out.report.html, "utf8");
  const chart = html.slice(html.indexOf('id="chart-frontier"'), html.indexOf("</figure>"));
  assert.match(chart, /<svg[^>]*>/);
  for (const f of r.frontier.points) {
    const label = pointLabel(f, "concurrency");
    assert.ok(chart.includes(`>${label}<`), `the chart labels ${label}`);
  }
  assert.match(pointLabel(r.frontier.points[2]!, "concurrency"), /^8 users · (client\+)?max-num-seqs$/);
});

test("--url against llama-server -np 4 (default HTTP pool): the ceiling from its /props total_slots, max-num-seqs named at 8 users", {
  skip: SKIP,
  timeout: 120_000,
}, async () => {
  const server = await startLlamaServer("small-random-llama");
  try {
    const sweep = await runCli(sweepArgs(["--url", server.url], "8", join(dir, "url.db")), { limitMs: 100_000 });
    assert.equal(sweep.code, 0, sweep.stderr);
    const d = (JSON.parse(sweep.stdout) as LoadSweepResult).points[0]!.diagnosis;
    // No command to read -np from: the server said it has 4 slots.
    assert.equal(d.server.ceiling, 4);
    assert.equal(d.server.ceilingSource, "server");
    const b = d.binding.find((x) => x.limit === "max-num-seqs");
    assert.ok(b, JSON.stringify(d));
    assert.match(b.evidence, /^max-num-seqs: running pinned at 4 \(the server's stated slots\) in /);
  } finally {
    server.stop();
  }
});
