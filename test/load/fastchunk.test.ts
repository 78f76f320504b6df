import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { ChunkShape, fastInterpret, newFastFacts } from "../../src/load/fastchunk.ts";
import { interpretChunk } from "../../src/load/sse.ts";

const FACT_KEYS = [
  "hasChoices",
  "content",
  "reasoning",
  "tool",
  "completionTokens",
  "promptTokens",
  "finishReason",
] as const;

function both(json: string) {
  const b = Buffer.from(`xx${json}yy`);
  const f = newFastFacts();
  const ok = fastInterpret(b, 2, b.length - 2, f);
  return { ok, fast: { ...f }, slow: interpretChunk(json) };
}

const same = (json: string) => {
  const { ok, fast, slow } = both(json);
  assert.ok(ok, `fast path refused ${json}`);
  for (const k of FACT_KEYS) assert.equal(fast[k], slow[k], `${k} in ${json}`);
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

/** One stream's chunks through one ChunkShape: every answer must be the full parser's. */
function throughShape(chunks: string[]): ChunkShape {
  const shape = new ChunkShape();
  const fs = newFastFacts();
  const fu = newFastFacts();
  for (const c of chunks) {
    // In a larger buffer, as the client reads them (the shape compares ranges, not whole buffers).
    const b = Buffer.from(`data: ${c}\n\n`);
    const ok = fastInterpret(b, 6, b.length - 2, fu);
    const okShaped = fastInterpret(b, 6, b.length - 2, fs, shape);
    assert.equal(okShaped, ok, `accepted ${c}`);
    if (ok) for (const k of FACT_KEYS) assert.equal(fs[k], fu[k], `${k} in ${c}`);
  }
  return shape;
}

test("a stream's chunks read through its last chunk's shape give the full parser's facts", () => {
  const word = fc.oneof(fc.string({ unit: "binary", maxLength: 6 }), fc.constantFrom("\u0000", '"', "\\", "é", "😀"));
  fc.assert(
    fc.property(
      fc.array(
        fc.record({
          text: word,
          shape: fc.constantFrom("completions", "chat", "reasoning", "two"),
          finish: fc.option(fc.constantFrom("stop", "length"), { nil: null }),
          tokens: fc.option(fc.nat({ max: 300 }), { nil: null }),
          raw: fc.constantFrom("json", "control", "truncated", "unescaped-quote"),
        }),
        { minLength: 1, maxLength: 30 },
      ),
      (items) => {
        const chunks = items.map(({ text, shape, finish, tokens, raw }) => {
          const usage =
            tokens === null ? null : { prompt_tokens: 5, completion_tokens: tokens, total_tokens: 5 + tokens };
          const o =
            shape === "completions"
              ? { id: "cmpl-1", choices: [{ index: 0, text, logprobs: null, finish_reason: finish }], usage }
              : shape === "chat"
                ? { id: "c", choices: [{ index: 0, delta: { content: text }, finish_reason: finish }], usage }
                : shape === "reasoning"
                  ? { id: "c", choices: [{ index: 0, delta: { reasoning_content: text }, finish_reason: finish }] }
                  : { id: "c", choices: [{ index: 0, delta: { reasoning_content: text, content: text } }] };
          const j = JSON.stringify(o);
          // Broken variants of the same shape: a raw control character or a bare quote inside the
          // string, or the chunk cut short. The shaped read must refuse exactly what the full one does.
          if (raw === "control") return j.replace(JSON.stringify(text), '"a\u0001b"');
          if (raw === "truncated") return j.slice(0, Math.max(2, j.length - 3));
          if (raw === "unescaped-quote") return j.replace(JSON.stringify(text), '"a"b"');
          return j;
        });
        throughShape(chunks);
      },
    ),
    { numRuns: 400 },
  );
});

test("vLLM's token chunks hit the shape; the finish chunk scans only its bytes after the text", () => {
  const tok = (t: string) =>
    JSON.stringify({
      id: "cmpl-9",
      object: "text_completion",
      created: 1733,
      model: "m",
      choices: [{ index: 0, text: t, logprobs: null, finish_reason: null, stop_reason: null }],
      usage: null,
    });
  const chunks = [" The", " quick", " brown", " fox\n", ' "jumps"', " é😀"].map(tok);
  chunks.push(
    JSON.stringify({
      id: "cmpl-9",
      object: "text_completion",
      created: 1733,
      model: "m",
      choices: [{ index: 0, text: "", logprobs: null, finish_reason: "length", stop_reason: null }],
      usage: null,
    }),
  );
  const shape = throughShape(chunks);
  assert.equal(shape.misses, 1, "only the first chunk is read in full");
  assert.equal(shape.hits, 5, "every token chunk after it: two compares and its text");
  assert.equal(shape.suffixScans, 1, "the finish chunk: its bytes after the text scanned alone");
});

test("with continuous usage stats (counts after the text change every chunk), only the bytes after the text are scanned", () => {
  const chunks: string[] = [];
  for (let n = 1; n <= 20; n++)
    chunks.push(
      JSON.stringify({
        id: "chatcmpl-3",
        object: "chat.completion.chunk",
        created: 1733,
        model: "m",
        choices: [
          { index: 0, delta: { content: ` w${n}` }, logprobs: null, finish_reason: n === 20 ? "length" : null },
        ],
        usage: { prompt_tokens: 17, total_tokens: 17 + n, completion_tokens: n },
      }),
    );
  const shape = throughShape(chunks);
  assert.equal(shape.misses, 1);
  assert.equal(shape.hits, 18, "the counts' digits differ, the bytes around them do not");
  assert.equal(shape.suffixScans, 1, "the finish chunk");
});

test("numbers after the text whose digits change (counts, others, in strings or not) give the full parser's facts", () => {
  // Per stream: a layout of the bytes after the text with numbers in many places, then chunks that change
  // the digits (any length, zero digits too), the signs and fractions around them, or digits inside strings.
  const num = fc.oneof(fc.nat({ max: 99999 }), fc.constantFrom(-1, 0, 1.5, 1e21, -0.25));
  fc.assert(
    fc.property(
      fc.array(
        fc.record({
          text: fc.string({ unit: "binary", maxLength: 4 }),
          prompt: num,
          completion: num,
          total: num,
          index: fc.nat({ max: 12 }),
          stop: fc.oneof(fc.constant(null), fc.nat({ max: 300 }), fc.constantFrom("12", "a1", "")),
          raw: fc.constantFrom("json", "json", "json", "no-digits", "spaces", "count-twice", "string-count"),
        }),
        { minLength: 1, maxLength: 25 },
      ),
      fc.constantFrom("completions", "chat"),
      (items, kind) => {
        const chunks = items.map(({ text, prompt, completion, total, index, stop, raw }) => {
          const usage = { prompt_tokens: prompt, total_tokens: total, completion_tokens: completion };
          const o =
            kind === "completions"
              ? { id: "cmpl-7", created: 17, choices: [{ index, text, finish_reason: null, stop_reason: stop }], usage }
              : { id: "c-7", choices: [{ delta: { content: text }, index, stop_reason: stop }], usage, n: [index, 3] };
          const j = JSON.stringify(o);
          if (raw === "no-digits")
            return j.replace(`"completion_tokens":${JSON.stringify(completion)}`, '"completion_tokens":');
          if (raw === "spaces") return j.replace('"prompt_tokens":', '"prompt_tokens" : ');
          if (raw === "count-twice") return j.replace("}}", `,"completion_tokens":${index}}}`);
          if (raw === "string-count")
            return j.replace(`"prompt_tokens":${JSON.stringify(prompt)}`, `"prompt_tokens":"${index}"`);
          return j;
        });
        throughShape(chunks);
      },
    ),
    { numRuns: 500 },
  );
});
