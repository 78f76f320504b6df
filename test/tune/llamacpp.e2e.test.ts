// tune on a real engine: llama.cpp's CPU llama-server, restarted per block, on a knob whose effect is
// certain on any host (the model file: micro decodes ~10× faster than small on one thread), so the check
// holds however loaded the host is: tune must measure both, prove a gain and choose micro. Whether tune's
// choice among close configurations (threads × --ubatch-size × --flash-attn) survives an independent A/B is
// a statistical check: `npm run bench:tune`.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { runTune } from "../../src/tune/run.ts";
import { LLAMA_MICRO, LLAMA_SERVER, LLAMA_SMALL, llamaSkipReason } from "../helpers/llamacpp.ts";

const SKIP = llamaSkipReason();
const dir = mkdtempSync(join(tmpdir(), "inferscope-tune-llama-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const CMD = `${LLAMA_SERVER} --alias small-random-llama --host 127.0.0.1 --port {port} -c 2048 -np 1 --threads 1`;

test("tune restarts llama-server per block, measures both models and chooses the faster one with a proved gain", {
  skip: SKIP,
  timeout: 240_000,
}, async (t) => {
  const r = await runTune({
    serverCmd: CMD,
    knobs: [`-m=${LLAMA_SMALL},${LLAMA_MICRO}`],
    workload: { numPrompts: 2, randomInputLen: 16, randomOutputLen: 24, warmup: 1 },
    db: join(dir, "runs.db"),
    logDir: join(dir, "logs"),
    budget: { starts: 6 },
    seed: 3,
  });
  t.diagnostic(
    `best ${r.best?.id} (${r.best?.name}); ${r.candidates.map((c) => `${c.id} ${c.measured?.estimate.toFixed(2) ?? "-"} ms/token`).join(", ")}; ${r.restarts} starts; stop ${r.stop.reason}`,
  );
  assert.equal(r.candidates.length, 2);
  // The engine was discovered, and the model could say nothing about this knob: it says so.
  assert.ok(r.model.unmapped.includes("-m"), JSON.stringify(r.model));
  assert.ok(r.restarts >= 2, "a server start per block");
  assert.ok(
    r.candidates.every((c) => c.measured && c.measured.blocks >= 1),
    "both measured",
  );
  assert.equal(r.best?.id, "c1", `chose ${r.best?.name}`);
  const g = r.best.gain!;
  assert.ok(g.relative.low > 0, `gain ${g.relative.estimate} [${g.relative.low}, ${g.relative.high}]`);
});
