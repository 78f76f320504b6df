// Multi-turn sessions: each turn resends the history, a session's turns in order, sessions side by
// side; the per-turn table shows the cached prompt tokens the server reports — the sim's vLLM
// usage.prompt_tokens_details and the real llama.cpp server's timings.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { blankRecord, StreamClient } from "../../src/load/client.ts";
import { PromptSynth } from "../../src/load/datasets/synth.ts";
import { formatReplay } from "../../src/load/replay.ts";
import { runBench, toVllmJson } from "../../src/load/runner.ts";
import { notSentText, runSessions, sharegptSessions, syntheticSessions, turnPrompt } from "../../src/load/sessions.ts";
import { calibrate, findTokenizer } from "../../src/load/tokenizer.ts";
import { requestBody } from "../../src/load/workload.ts";
import { type LlamaServer, llamaSkipReason, startLlamaServer } from "../helpers/llamacpp.ts";
import { type SpawnedSim, spawnSim } from "../helpers/sim.ts";

const SHAREGPT = "../shared/workloads/sharegpt-fastchat/dummy_conversation.json";

test("ShareGPT conversations become sessions whose turns resend the growing history", () => {
  const s = sharegptSessions(SHAREGPT, readFileSync(SHAREGPT, "utf8"));
  const raw = JSON.parse(readFileSync(SHAREGPT, "utf8"));
  assert.equal(s.length, 500);
  // 2,000 messages in pairs: 1,000 turns.
  assert.equal(
    s.reduce((a, x) => a + x.turns.length, 0),
    1000,
  );
  const three = s.find((x) => x.turns.length === 3)!;
  const conv = raw.find((c: any) => c.id === three.id).conversations;
  const p = turnPrompt(three, 2);
  assert.deepEqual(
    p.messages!.map((m) => m.content),
    conv.slice(0, 5).map((c: any) => c.value),
  );
  assert.deepEqual(
    p.messages!.map((m) => m.role),
    ["user", "assistant", "user", "assistant", "user"],
  );
  // Each turn's messages start with the previous turn's: the history only grows.
  const p1 = turnPrompt(three, 1).messages!;
  assert.deepEqual(p.messages!.slice(0, p1.length), p1);
});

/** A synthesizer over three one-token words, sized by assumption (no server). */
const abcSynth = () =>
  new PromptSynth({
    words: ["a", "b", "c"],
    offset: 0,
    tokensPerWord: 1,
    method: "assumed",
    tokenizer: null,
    notes: [],
  });

test("synthetic sessions: the spec's counts and lengths", () => {
  const synth = abcSynth();
  const s = syntheticSessions({ sessions: 3, turns: 4, inputLen: 20, outputLen: 7 }, synth);
  assert.equal(s.length, 3);
  for (const x of s) {
    assert.equal(x.turns.length, 4);
    for (const t of x.turns) {
      assert.equal(t.user.trim().split(" ").length, 20);
      assert.equal(t.outputLen, 7);
    }
  }
  assert.throws(() => syntheticSessions({ sessions: 0, turns: 1, inputLen: 1, outputLen: 1 }, synth), /--sessions/);
});

test("turns never sent are counted by reason: after a failed turn, and after the run stopped", async () => {
  const synth = abcSynth();
  const sessions = syntheticSessions({ sessions: 2, turns: 200, inputLen: 2, outputLen: 1 }, synth);
  // Session 0's turn 9 (index 8) fails; session 1 runs until the run stops after its 50th turn.
  let sent = 0;
  let stopped = false;
  const run = await runSessions(sessions, {
    concurrency: 1,
    now: () => 0,
    stopped: () => stopped,
    send: async (index, scheduledMs) => {
      const rec = blankRecord();
      rec.index = index;
      rec.scheduledMs = scheduledMs;
      rec.sendMs = 0;
      rec.endMs = 0;
      sent++;
      if (sent === 9) rec.errorClass = "http";
      if (sent === 9 + 50) stopped = true;
      return rec;
    },
  });
  assert.equal(run.turnOf.size, 59);
  assert.deepEqual(run.notSent, { afterFailedTurn: 191, runStopped: 150 });
  assert.equal(run.sessionsEnded, 1);
  assert.equal(
    notSentText(run.notSent, run.sessionsEnded),
    "341 turns not sent: 191 after a failed turn ended its session (1 session), 150 because the run stopped first",
  );
  assert.equal(notSentText({ afterFailedTurn: 0, runStopped: 0 }, 0), null);
});

describe("sessions on the sim (prefix caching, vLLM cached_tokens)", { timeout: 120_000 }, () => {
  let sim: SpawnedSim;
  before(async () => {
    // The 8B profile caches in blocks of 16 tokens (blockSize in its YAML).
    sim = await spawnSim(["--profile", "llama3-8b-1xh100", "--time-scale", "20", "--enable-prompt-tokens-details"]);
  });
  after(() => sim?.stop());

  test("turns are sequential per session, concurrent across sessions; later turns read cached tokens", async () => {
    const res = await runBench({
      baseUrl: sim.url,
      sessions: { source: "synthetic", sessions: 4, turns: 3, inputLen: 200, outputLen: 8, thinkMs: 5 },
      noServerMetrics: true,
    });
    assert.equal(res.summary.completed, 12);
    assert.equal(res.setup.endpoint, "/v1/chat/completions");
    const turns = res.turns!;
    assert.deepEqual(
      turns.map((t) => [t.turn, t.requests, t.failed]),
      [
        [0, 4, 0],
        [1, 4, 0],
        [2, 4, 0],
      ],
    );
    // Each turn holds the previous turn's prompt (and its resent reply and a new message): prompts grow.
    assert.ok(turns[1]!.promptTokensMean! > turns[0]!.promptTokensMean! + 200);
    assert.ok(turns[2]!.promptTokensMean! > turns[1]!.promptTokensMean! + 200);
    // The sim's prefix cache holds the earlier turn's prompt blocks (16 tokens each): a later turn reuses
    // at least all but the last partial block of the previous prompt.
    for (const k of [1, 2]) {
      assert.equal(turns[k]!.cachedSource, "vllm-usage");
      assert.ok(
        turns[k]!.cachedTokensMean! >= turns[k - 1]!.promptTokensMean! - 16,
        `turn ${k}: cached ${turns[k]!.cachedTokensMean}, previous prompt ${turns[k - 1]!.promptTokensMean}`,
      );
    }
    // Turn k's prompt is k turns of history: its length tells the turn (~207, ~424, ~640 tokens here).
    const turnOfRec = (pt: number) => (pt < 300 ? 0 : pt < 530 ? 1 : 2);
    const by = [0, 1, 2].map((k) => res.requests.filter((r) => turnOfRec(r.promptTokens) === k));
    assert.deepEqual(
      by.map((g) => g.length),
      [4, 4, 4],
    );
    // Sequential within a session: every turn-k send can be matched to a distinct turn k−1 that had ended
    // (the i-th earliest send after the i-th earliest end), plus the 5 ms think time.
    for (const k of [1, 2]) {
      const ends = by[k - 1]!.map((r) => r.sendMs + r.endMs).sort((a, b) => a - b);
      const sends = by[k]!.map((r) => r.sendMs).sort((a, b) => a - b);
      for (let i = 0; i < 4; i++)
        assert.ok(sends[i]! >= ends[i]! + 5, `turn ${k}: send ${sends[i]} before end ${ends[i]}`);
    }
    // Concurrent across sessions: every first turn was sent before any of them ended.
    const firstEnd = Math.min(...by[0]!.map((r) => r.sendMs + r.endMs));
    assert.ok(by[0]!.every((r) => r.sendMs < firstEnd));
    const json = toVllmJson(res, false) as any;
    assert.equal(json.inferscope.turns.length, 3);
    assert.equal(json.schedule.source, "sessions");
    assert.match(formatReplay(res), /turn\s+requests/);
  });
});

describe("multi-turn and trace lengths on the real llama.cpp server", { timeout: 180_000 }, () => {
  const SKIP = llamaSkipReason();
  let server: LlamaServer | undefined;
  let url = "";
  before(async () => {
    if (SKIP) return;
    server = await startLlamaServer("small-random-llama");
    url = server.url;
  });
  after(() => server?.stop());

  test("ShareGPT sessions: later turns show the history as cached prompt tokens", { skip: SKIP }, async () => {
    const res = await runBench({
      baseUrl: url,
      dataset: "sharegpt",
      datasetPath: SHAREGPT,
      // Three-turn conversations only would need a filter; the first 6 hold turns 1–3.
      sessions: { source: "sharegpt", maxSessions: 6, concurrency: 2 },
      noServerMetrics: true,
    });
    assert.equal(res.summary.failed, 0);
    const turns = res.turns!;
    assert.ok(turns.length >= 2, `turns: ${turns.length}`);
    for (const t of turns.slice(1)) {
      assert.equal(t.cachedSource, "llamacpp-timings");
      // The previous turn's prompt (same slot, same prefix) is not evaluated again.
      const prev = turns[t.turn - 1]!;
      assert.ok(
        t.cachedTokensMean! >= prev.promptTokensMean! * 0.5,
        `turn ${t.turn + 1}: cached ${t.cachedTokensMean} of ${t.promptTokensMean}; previous prompt ${prev.promptTokensMean}`,
      );
    }
    assert.match(formatReplay(res), /cached tok/);
  });

  test("a jsonl trace's lengths are exact on llama.cpp's own tokenizer, both endpoints", { skip: SKIP }, async () => {
    const dir = mkdtempSync(join(tmpdir(), "inferscope-llama-trace-"));
    try {
      const path = join(dir, "t.jsonl");
      // Lengths around block edges (512) and shared ids, within the 1,024-token slots of llamaSmallArgs.
      writeFileSync(
        path,
        [
          '{"timestamp": 0, "input_length": 300, "output_length": 8, "hash_ids": [1]}',
          '{"timestamp": 100, "input_length": 700, "output_length": 8, "hash_ids": [1, 2]}',
          '{"timestamp": 200, "input_length": 129, "output_length": 4}',
          '{"timestamp": 250, "input_length": 513, "output_length": 4, "hash_ids": [1]}',
        ].join("\n"),
      );
      for (const endpoint of ["/v1/completions", "/v1/chat/completions"] as const) {
        const res = await runBench({
          baseUrl: url,
          dataset: "jsonl",
          datasetPath: path,
          endpoint,
          noServerMetrics: true,
        });
        assert.equal(res.summary.completed, 4, endpoint);
        const info = res.replay!;
        assert.equal(info.calibration!.method, "tokenize", endpoint);
        assert.match(info.calibration!.tokenizer!, /llama\.cpp form/);
        assert.deepEqual(
          res.requests.map((r) => r.promptTokens - r.targetInputLen),
          [0, 0, 0, 0],
          endpoint,
        );
        assert.equal(info.lengths.output.mismatched, 0, endpoint);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("without a tokenizer: two probe requests calibrate tokens per word and the request form's offset", {
    skip: SKIP,
  }, async () => {
    const client = new StreamClient(url, { stallTimeoutMs: 30_000 });
    try {
      const probe = async (text: string) => {
        const rec = blankRecord();
        rec.targetOutputLen = 1;
        const body = requestBody(
          { prompt: text, inputLen: 0, outputLen: 1 },
          { model: "small-random-llama", endpoint: "/v1/completions" },
        );
        await client.stream("/v1/completions", body, rec, performance.now());
        return rec.promptTokens >= 0 ? rec.promptTokens : null;
      };
      const cal = await calibrate(null, probe);
      assert.equal(cal.method, "probe");
      assert.match(cal.notes.join(" "), /calibrated estimate/);
      // The same words' exact figures from llama.cpp's /tokenize (above): one token each, and the form's offset.
      const exact = await calibrate(await findTokenizer(url, "small-random-llama"), probe);
      assert.ok(
        Math.abs(cal.tokensPerWord - exact.tokensPerWord) < 0.05,
        `${cal.tokensPerWord} vs ${exact.tokensPerWord}`,
      );
      assert.ok(Math.abs(cal.offset - exact.offset) <= 1, `${cal.offset} vs ${exact.offset}`);
    } finally {
      await client.close();
    }
  });
});
