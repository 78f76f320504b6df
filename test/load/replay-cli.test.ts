// `inferscope bench` with trace datasets and sessions, as a user runs it: real CLI process, real sim.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { assertRefused, runCli, STACK } from "../helpers/cli.ts";
import { type SpawnedSim, spawnSim } from "../helpers/sim.ts";

const MOONCAKE = "../shared/workloads/mooncake/conversation_trace.jsonl";
const dir = mkdtempSync(join(tmpdir(), "inferscope-replay-cli-"));
after(() => rmSync(dir, { recursive: true, force: true }));
// Nothing listens here: every refusal below happens before anything is sent.
const NOWHERE = ["--base-url", "http://127.0.0.1:9", "--connect-timeout", "1s"];

test("malformed trace rows and contradictory replay flags are refused before anything is sent (exit 2)", async () => {
  const bad = join(dir, "bad.jsonl");
  writeFileSync(
    bad,
    '{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [0, 1]}\n{"timestamp": 9, "input_length": "x", "output_length": 5, "hash_ids": [0]}\n',
  );
  const cases: Array<[string[], RegExp]> = [
    [["--dataset-name", "mooncake", "--dataset-path", bad], /bad\.jsonl:2:18: `input_length` must be an integer/],
    [["--dataset-name", "random", "--replay-speed", "2"], /--replay-speed.*need a trace dataset/],
    [["--dataset-name", "mooncake", "--dataset-path", MOONCAKE, "--num-prompts", "5"], /use --max-requests/],
    [["--dataset-name", "mooncake", "--dataset-path", MOONCAKE, "--replay-speed", "0"], /--replay-speed/],
    [
      ["--dataset-name", "mooncake", "--dataset-path", MOONCAKE, "--start-offset", "2h"],
      /no request .* falls in the window/,
    ],
    [
      ["--dataset-name", "azure", "--dataset-path", MOONCAKE],
      /expected the header TIMESTAMP,ContextTokens,GeneratedTokens/,
    ],
    [["--multi-turn"], /--multi-turn reads ShareGPT conversations/],
    [["--sessions", "2", "--warmup", "1"], /sessions have no warm-up/],
    // A timed replay may be sent by several loops; a session's turns go in order on one.
    [["--sessions", "2", "--workers", "2"], /sessions run on one event loop/],
  ];
  for (const [args, msg] of cases) {
    const r = await runCli(["bench", ...NOWHERE, ...args]);
    assertRefused(r, msg, args.join(" "));
  }
});

describe("bench replays and sessions on the sim", { timeout: 180_000 }, () => {
  let sim: SpawnedSim;
  before(async () => {
    sim = await spawnSim(["--profile", "llama3-8b-1xh100", "--set", "model.maxModelLen=131072", "--time-scale", "50"]);
  });
  after(() => sim?.stop());

  test("--dataset-name mooncake --json: completed, schedule.lagP99Ms and the length check", async () => {
    const r = await runCli(
      ["bench", "--base-url", sim.url, "--dataset-name", "mooncake", "--dataset-path", MOONCAKE].concat([
        "--max-requests",
        "20",
        "--replay-speed",
        "50",
        "--telemetry",
        "none",
        "--json",
      ]),
      { limitMs: 120_000 },
    );
    assert.equal(r.code, 0, r.stderr);
    const j = JSON.parse(r.stdout);
    assert.equal(j.completed, 20);
    assert.equal(typeof j.schedule.lagP99Ms, "number");
    assert.equal(j.schedule.source, "trace");
    assert.equal(j.schedule.speed, 50);
    assert.equal(j.inferscope.replay.lengths.prompt.checked, 20);
    assert.equal(j.inferscope.replay.lengths.prompt.mismatched, 0);
    assert.equal(j.inferscope.replay.calibration.method, "tokenize");
    assert.equal(j.inferscope.replay.ignoreEos, true);
  });

  test("synthetic sessions print the per-turn table", async () => {
    const r = await runCli(
      ["bench", "--base-url", sim.url, "--sessions", "3", "--session-turns", "2", "--session-input-len", "40"].concat([
        "--session-output-len",
        "4",
        "--think-time",
        "10ms",
        "--telemetry",
        "none",
      ]),
      { limitMs: 120_000 },
    );
    assert.equal(r.code, 0, r.stderr);
    assert.doesNotMatch(r.stderr, STACK);
    assert.match(r.stdout, /schedule: sessions/);
    assert.match(r.stdout, /turn\s+requests\s+failed\s+TTFT p50/);
    assert.match(r.stdout, /^\s+1\s+3\s+0\s/m);
    assert.match(r.stdout, /^\s+2\s+3\s+0\s/m);
  });
});
