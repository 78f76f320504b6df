// Prompt synthesis (pure): exact word counts per the calibration, block identity by hash id, prefixes
// for partial blocks, the offset taken from block 0; trace sessions grouped by session_id.
import assert from "node:assert/strict";
import { test } from "node:test";
import { type Calibration, PromptSynth } from "../../src/load/datasets/synth.ts";
import type { Trace } from "../../src/load/datasets/trace.ts";
import { traceSessions, turnPrompt } from "../../src/load/sessions.ts";

const cal = (offset: number, tokensPerWord = 1): Calibration => ({
  words: ["alpha", "beta", "gamma", "delta", "eps"],
  offset,
  tokensPerWord,
  method: "tokenize",
  tokenizer: "test",
  notes: [],
});
const words = (s: string) => s.split(" ").slice(1);

test("compose: inputLen − offset words; block k of equal ids is the same text; a partial block is a prefix", () => {
  const s = new PromptSynth(cal(3), 7);
  const a = s.compose({ inputLen: 1300, hashIds: [10, 11, 12] }, 1);
  const b = s.compose({ inputLen: 1100, hashIds: [10, 11, 99] }, 2);
  assert.equal(words(a).length, 1297);
  assert.equal(words(b).length, 1097);
  // Block 0 gives up the 3 tokens the request form adds: blocks 1.. still start at token 512·k.
  const block0 = 509;
  assert.deepEqual(words(a).slice(0, block0 + 512), words(b).slice(0, block0 + 512));
  assert.notDeepEqual(words(a).slice(block0 + 512, block0 + 600), words(b).slice(block0 + 512, block0 + 600));
  // A shorter request with the same first id: its partial block is the full block's prefix.
  const c = s.compose({ inputLen: 200, hashIds: [10] }, 3);
  assert.deepEqual(words(c), words(a).slice(0, 197));
  // Blocks with no id are unique to their row, and the same for that row on every call.
  const u1 = s.compose({ inputLen: 600, hashIds: null }, 4);
  assert.equal(u1, s.compose({ inputLen: 600, hashIds: null }, 4));
  assert.notEqual(u1, s.compose({ inputLen: 600, hashIds: null }, 5));
  // Another seed, other text; release() forgets the cache but not the text.
  assert.notEqual(new PromptSynth(cal(3), 8).compose({ inputLen: 1300, hashIds: [10, 11, 12] }, 1), a);
  s.release();
  assert.equal(s.compose({ inputLen: 1300, hashIds: [10, 11, 12] }, 1), a);
});

test("compose with an estimate: words = tokens ÷ tokens per word", () => {
  const s = new PromptSynth(cal(0, 1.25));
  assert.equal(words(s.compose({ inputLen: 1000, hashIds: null }, 0)).length, 800);
});

test("trace sessions: rows grouped by session_id in file order, each turn at its time ÷ speed", () => {
  const trace: Trace = {
    format: "jsonl",
    path: "t.jsonl",
    timed: true,
    rows: [
      { timestampMs: 0, inputLen: 10, outputLen: 3, hashIds: null, sessionId: "a", line: 1 },
      { timestampMs: 100, inputLen: 12, outputLen: 4, hashIds: null, sessionId: "b", line: 2 },
      { timestampMs: 400, inputLen: 8, outputLen: 5, hashIds: null, sessionId: "a", line: 3 },
    ],
  };
  const ss = traceSessions(trace, new PromptSynth(cal(0)), 2);
  assert.deepEqual(
    ss.map((s) => [s.id, s.turns.map((t) => [t.atMs, t.outputLen, words(t.user).length])]),
    [
      [
        "a",
        [
          [0, 3, 10],
          [200, 5, 8],
        ],
      ],
      ["b", [[50, 4, 12]]],
    ],
  );
  // Turn 2 of "a" resends turn 1 with a reply of turn 1's output length.
  const p = turnPrompt(ss[0]!, 1).messages!;
  assert.equal(p.length, 3);
  assert.equal(words(p[1]!.content).length, 3);
});
