// tune on a real engine: llama.cpp's CPU llama-server over threads × --ubatch-size × --flash-attn,
// restarted per block. The configuration it chooses is then checked by an independent A/B
// (other server starts, other prompts) against the baseline.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { runAB } from "../../src/experiment/ab.ts";
import { variantText } from "../../src/tune/knobs.ts";
import { runTune } from "../../src/tune/run.ts";
import { LLAMA_SERVER, LLAMA_SMALL, llamaSkipReason } from "../helpers/llamacpp.ts";

const SKIP = llamaSkipReason();
const dir = mkdtempSync(join(tmpdir(), "inferscope-tune-llama-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const CMD = `${LLAMA_SERVER} -m ${LLAMA_SMALL} --alias small-random-llama --host 127.0.0.1 --port {port} -c 2048 -np 1`;
const WORKLOAD = { numPrompts: 3, randomInputLen: 32, randomOutputLen: 32, warmup: 1 };

test("tune over threads × --ubatch-size × --flash-attn on llama-server; an independent A/B confirms the choice", {
  skip: SKIP,
  timeout: 400_000,
}, async (t) => {
  const threads = cpus().length >= 2 ? "1,2" : "1,1";
  const r = await runTune({
    serverCmd: CMD,
    knobs: [`--threads=${threads}`, "--ubatch-size=512,128", "--flash-attn"],
    workload: WORKLOAD,
    db: join(dir, "runs.db"),
    logDir: join(dir, "logs"),
    budget: { starts: 24 },
    seed: 3,
  });
  assert.equal(r.candidates.length, 8);
  assert.ok(r.best, "a best configuration");
  // The engine was discovered and the model could say nothing about these knobs: it says so.
  for (const k of ["--threads", "--ubatch-size", "--flash-attn"]) assert.ok(r.model.unmapped.includes(k), k);
  t.diagnostic(
    `tune: best ${r.best.id} (${r.best.name}) ${r.best.objective.estimate.toFixed(2)} ms/token; gain ${r.best.gain ? `${(r.best.gain.relative.estimate * 100).toFixed(1)} % [${(r.best.gain.relative.low * 100).toFixed(1)}, ${(r.best.gain.relative.high * 100).toFixed(1)}]` : "none (baseline)"}; ${r.restarts} starts (grid ${r.gridStarts}); stop ${r.stop.reason}`,
  );
  // Confirm against the baseline with fresh starts: the chosen configuration (or, when the baseline
  // won, the runner-up) in an ABBA A/B.
  const other =
    r.best.id !== "c0"
      ? r.candidates.find((c) => c.id === r.best!.id)!
      : r.candidates
          .filter((c) => c.id !== "c0" && c.measured)
          .sort((a, b) => a.measured!.estimate - b.measured!.estimate)[0]!;
  const ab = await runAB({
    serverCmd: CMD,
    // The baseline is tune's c0 with its own flags (--threads 1 …), not the bare command.
    variants: [`base:${variantText(r.candidates[0]!)}`, `chosen:${variantText(other)}`],
    repeats: 2,
    workload: { ...WORKLOAD, seed: 11 },
    db: join(dir, "runs.db"),
    logDir: join(dir, "logs-ab"),
  });
  const d = ab.diffs.find((x) => x.metric === "tpot_ms")!;
  t.diagnostic(`ab: ${d.verdict}`);
  // The two experiments measure the same difference (ms/token, positive = faster than the baseline):
  // their 95 % intervals must meet. tune's includes the restart-to-restart spread it measured.
  const g = other.gain!;
  assert.ok(g, "tune measured the confirmed candidate against the baseline");
  assert.ok(
    d.improvement.lo <= g.absolute.high && g.absolute.low <= d.improvement.hi,
    `tune [${g.absolute.low}, ${g.absolute.high}] vs A/B [${d.improvement.lo}, ${d.improvement.hi}]`,
  );
  // A gain tune proved is seen by the A/B too — where the A/B can see it: tune's lower bound at least the A/B's
  // minimum detectable effect (α 0.05, power 0.8). A gain proved by a hair (12 % [0.3, 22.8] on 8 candidates, the
  // winner of a selection) against an A/B that detects ≈ 1 ms/token is no test of either: both intervals meet above.
  if (g.absolute.low > 0 && g.absolute.low >= d.comparison.mde)
    assert.ok(d.improvement.estimate > 0, `A/B: ${d.verdict}`);
});
