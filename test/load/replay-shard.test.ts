// A timed replay dealt over worker threads: the main thread's bodies are moved to the shards (byte-identical
// prompts: exact usage.prompt_tokens, and the sim's prefix cache finds the shared blocks), and --workers auto
// picks several loops for a replay only on hosts with ≥ 4 cores.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { runBench } from "../../src/load/runner.ts";
import { bodyTransfer, ownedUtf8, REPLAY_SENDS_PER_LOOP, replayWorkersChoice } from "../../src/load/shard.ts";
import { type SpawnedSim, spawnSim } from "../helpers/sim.ts";

test("replayWorkersChoice: one loop below 4 cores, says why; else ≤ 4 sends of an instant per loop", () => {
  const two = replayWorkersChoice(16, 1, "http://127.0.0.1:8000", 2);
  assert.equal(two.workers, 1);
  assert.match(two.why, /2 core\(s\).*16 request\(s\) due at one instant go out one after another/);
  // The server on this host keeps a core.
  assert.equal(replayWorkersChoice(16, 1, "http://127.0.0.1:8000", 8).workers, 16 / REPLAY_SENDS_PER_LOOP);
  assert.equal(replayWorkersChoice(16, 1, "http://127.0.0.1:8000", 4).workers, 3);
  assert.equal(replayWorkersChoice(16, 1, "http://10.0.0.5:8000", 4).workers, 4);
  assert.equal(replayWorkersChoice(1, 1, "http://127.0.0.1:8000", 16).workers, 1);
});

test("bodyTransfer: moves only the ArrayBuffers a body owns whole; a long body is built to own its own", () => {
  // As the runner encodes a long body (Buffer.from would not do on Node 24: a view of a 3×-sized store).
  const own = ownedUtf8("é".repeat(10_000));
  assert.equal(own.toString(), "é".repeat(10_000));
  const pooled = Buffer.from("short");
  const moved = bodyTransfer([
    { inputLen: 1, outputLen: 1, body: own },
    { inputLen: 1, outputLen: 1, body: pooled },
    { inputLen: 1, outputLen: 1, body: "text" },
  ]);
  assert.equal(pooled.byteLength < pooled.buffer.byteLength, true, "a small Buffer is a slice of Node's pool");
  assert.deepEqual(moved, [own.buffer]);
});

describe("replay over 2 worker threads on the sim", { timeout: 120_000 }, () => {
  let sim: SpawnedSim;
  let dir: string;
  before(async () => {
    sim = await spawnSim(["--time-scale", "4"]);
    dir = mkdtempSync(join(tmpdir(), "inferscope-rshard-"));
  });
  after(async () => {
    await sim?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test("every request once, the trace's lengths exact, shared blocks found by the prefix cache", async () => {
    // 5 instants of 8; every row starts with the blocks 1 and 2 (1,024 tokens), then its own 76 tokens.
    const lines: string[] = [];
    for (let b = 0; b < 5; b++)
      for (let k = 0; k < 8; k++)
        lines.push(
          JSON.stringify({
            timestamp: b * 200,
            input_length: 1100,
            output_length: 16,
            hash_ids: [1, 2, 100 + 8 * b + k],
          }),
        );
    const path = join(dir, "shared.jsonl");
    writeFileSync(path, `${lines.join("\n")}\n`);
    const res = await runBench({
      baseUrl: sim.url,
      dataset: "jsonl",
      datasetPath: path,
      telemetry: "none",
      workers: 2,
    });
    assert.equal(res.client.workers, 2);
    assert.equal(res.summary.completed, 40);
    const recs = res.requests.filter((r) => !r.warmup).sort((a, b) => a.index - b.index);
    assert.deepEqual(
      recs.map((r) => r.index),
      Array.from({ length: 40 }, (_, i) => i),
    );
    for (const r of recs) {
      assert.equal(r.scheduledMs, Math.floor(r.index / 8) * 200);
      assert.ok(Math.abs(r.promptTokens - 1100) <= 1, `request ${r.index}: ${r.promptTokens} prompt tokens`);
      assert.equal(r.completionTokens, 16);
    }
    // Bodies re-made differently in a shard would share no text across loops; the main thread's, moved, do.
    // Each of the 32 requests after the first instant finds at least the two shared blocks (16-token pages).
    const pc = res.server?.prefix_cache;
    assert.ok(pc, "the sim's /metrics delta has prefix-cache counters");
    assert.ok(pc.hits >= 32 * 1008, `prefix cache hits ${pc.hits}`);
    assert.equal(res.schedule!.maxDueAtOnce, 8);
    assert.ok(res.schedule!.maxDueBodyBytes! > 8 * 1100);
  });
});
