import assert from "node:assert/strict";
import { test } from "node:test";
import { tuneHandoff } from "../../src/load/relieve.ts";
import { parseKnob } from "../../src/tune/knobs.ts";

const base = { serverCmd: "vllm serve m --port {port} --max-num-seqs 64", ceiling: 64, tokenBudget: null };

test("the knee's limits become tune's knobs around the current setting, in tune's own grammar", () => {
  const h = tuneHandoff({ ...base, engine: "vllm", limits: ["max-num-seqs", "kv-capacity"] });
  assert.deepEqual(h.knobs, [
    "--max-num-seqs=64,128,256",
    "--gpu-memory-utilization=0.9,0.95",
    "--kv-cache-dtype=auto,fp8",
  ]);
  // Every knob parses as tune parses --knob; the command quotes the server command and each knob.
  for (const k of h.knobs) parseKnob(k);
  assert.equal(
    h.command,
    "inferscope tune --server-cmd 'vllm serve m --port {port} --max-num-seqs 64' --knob --max-num-seqs=64,128,256 --knob --gpu-memory-utilization=0.9,0.95 --knob --kv-cache-dtype=auto,fp8",
  );
  assert.deepEqual(tuneHandoff({ ...base, engine: "vllm", limits: ["host"] }).knobs, ["--async-scheduling"]);
  assert.deepEqual(tuneHandoff({ ...base, engine: "sglang", limits: ["token-budget"], tokenBudget: 2048 }).knobs, [
    "--chunked-prefill-size=2048,4096,8192",
  ]);
});

test("what no restart relieves, or what is not known, is said, never guessed", () => {
  const c = tuneHandoff({ ...base, engine: "vllm", limits: ["compute"] });
  assert.deepEqual(c.knobs, []);
  assert.equal(c.command, null);
  assert.match(c.notes[0]!, /more GPUs/);
  const b = tuneHandoff({ ...base, engine: "vllm", limits: ["token-budget"] });
  assert.deepEqual(b.knobs, []);
  assert.match(b.notes[0]!, /--max-num-batched-tokens\) was not given/);
  const u = tuneHandoff({ ...base, engine: "tgi", limits: ["max-num-seqs"] });
  assert.match(u.notes[0]!, /no tune knob is known for tgi/);
  const url = tuneHandoff({ ...base, serverCmd: null, engine: "vllm", limits: ["max-num-seqs"] });
  assert.equal(url.command, null);
  assert.match(url.notes.at(-1)!, /needs --server-cmd/);
});
