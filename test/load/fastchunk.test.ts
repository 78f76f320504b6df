import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { fastInterpret, newFastFacts } from "../../src/load/fastchunk.ts";
import { interpretChunk } from "../../src/load/sse.ts";

function both(json: string) {
  const b = Buffer.from(`xx${json}yy`);
  const f = newFastFacts();
  const ok = fastInterpret(b, 2, b.length - 2, f);
  return { ok, fast: { ...f }, slow: interpretChunk(json) };
}

const same = (json: string) => {
  const { ok, fast, slow } = both(json);
  assert.ok(ok, `fast path refused ${json}`);
  for (const k of [
    "hasChoices",
    "content",
    "reasoning",
    "tool",
    "completionTokens",
    "promptTokens",
    "finishReason",
  ] as const)
    assert.equal(fast[k], slow[k], `${k} in ${json}`);
};

test("the byte reader agrees with JSON.parse on vLLM chunk shapes, any text", () => {
  fc.assert(
    fc.property(
      fc.string({ unit: "binary" }),
      fc.constantFrom("completions", "chat", "reasoning", "role", "usage-only"),
      fc.option(fc.constantFrom("stop", "length"), { nil: null }),
      fc.option(fc.nat({ max: 100000 }), { nil: null }),
      (text, shape, finish, tokens) => {
        const usage =
          tokens === null ? null : { prompt_tokens: 12, total_tokens: 12 + tokens, completion_tokens: tokens };
        let o: unknown;
        if (shape === "completions")
          o = {
            id: "cmpl-1",
            object: "text_completion",
            created: 1,
            model: "m",
            choices: [{ index: 0, text, logprobs: null, finish_reason: finish, stop_reason: null }],
            usage,
          };
        else if (shape === "chat")
          o = {
            id: "c",
            choices: [{ index: 0, delta: { content: text }, logprobs: null, finish_reason: finish }],
            usage,
          };
        else if (shape === "reasoning") o = { choices: [{ index: 0, delta: { reasoning_content: text } }] };
        else if (shape === "role") o = { choices: [{ index: 0, delta: { role: "assistant", content: "" } }], usage };
        else o = { id: "x", choices: [], usage: usage ?? { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 } };
        same(JSON.stringify(o));
      },
    ),
    { numRuns: 500 },
  );
});

test("whitespace and key order do not matter", () => {
  same(
    '{ "usage" : { "completion_tokens" : 7 , "prompt_tokens" : 3 } , "choices" : [ { "text" : "a\\"b\\u00e9" , "finish_reason" : "stop" } ] }',
  );
});

test("it refuses what it cannot vouch for, so JSON.parse decides", () => {
  for (const bad of [
    '{"id":"x","choices":[{"index":0,"text":"\u0000broken', // the simulator's malformed fault
    '{"choices":[{"text":"a"}]', // unbalanced
    '{"choices":[{"text":"a"}]}}',
    '{"error":{"message":"boom"}}',
    '{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"{}"}}]}}]}',
    '{"choices":[{"text":"a","logprobs":{"tokens":["a"]}}]}',
    "[DONE]",
    "",
  ]) {
    const b = Buffer.from(bad);
    assert.equal(fastInterpret(b, 0, b.length, newFastFacts()), false, bad);
  }
});
