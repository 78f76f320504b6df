import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { interpretChunk, type SseMessage, SseParser } from "../../src/load/sse.ts";

function parseAll(chunks: Buffer[]): SseMessage[] {
  const p = new SseParser();
  const out: SseMessage[] = [];
  for (const c of chunks) p.feed(c, (m) => out.push(m));
  const last = p.finish();
  if (last) out.push(last);
  return out;
}

const STREAM =
  ": keep-alive comment\n\n" +
  'data: {"choices":[{"text":"héllo 🙂"}]}\n\n' +
  'event: message\r\ndata:{"a":1}\r\n\r\n' +
  "data: line1\ndata: line2\n\n" +
  "id: 7\nretry: 10\ndata: [DONE]\n\n";

test("messages: comments skipped, CRLF, no space after colon, multi-line data, other fields ignored", () => {
  const m = parseAll([Buffer.from(STREAM)]);
  assert.deepEqual(
    m.map((x) => x.data),
    ['{"choices":[{"text":"héllo 🙂"}]}', '{"a":1}', "line1\nline2", "[DONE]"],
  );
  assert.equal(m[1]!.event, "message");
  // Byte counts cover each message and its blank line; the comment-only block is not a message.
  assert.equal(
    m.reduce((s, x) => s + x.bytes, 0),
    Buffer.byteLength(STREAM) - ": keep-alive comment\n\n".length,
  );
});

test("any split of the byte stream (inside UTF-8 sequences too) gives the same messages", () => {
  const bytes = Buffer.from(STREAM);
  const whole = parseAll([bytes]).map((x) => x.data);
  fc.assert(
    fc.property(fc.uniqueArray(fc.integer({ min: 1, max: bytes.length - 1 }), { maxLength: 20 }), (cuts) => {
      const sorted = [...cuts].sort((a, b) => a - b);
      const parts: Buffer[] = [];
      let prev = 0;
      for (const c of sorted) {
        parts.push(bytes.subarray(prev, c));
        prev = c;
      }
      parts.push(bytes.subarray(prev));
      assert.deepEqual(
        parseAll(parts).map((x) => x.data),
        whole,
      );
    }),
    { numRuns: 300 },
  );
});

test("raw mode through a reused buffer (feedRange's callback, feedRangeTo's object) gives feed's messages, cut at every byte", () => {
  const bytes = Buffer.from(`${STREAM}data: {"x":2}\r\n\r\n:c\r\ndata: a\r\ndata: b\n\r\n`);
  const want = parseAll([bytes]).map((m) => [m.data, m.event, m.bytes]);
  // As the h1 reader hands them on: every read in one shared buffer, overwritten by the next.
  const shared = Buffer.alloc(4096, 0x41);
  for (let cut = 1; cut < bytes.length; cut++)
    for (const mode of ["range", "sink"] as const) {
      const p = new SseParser();
      const got: unknown[] = [];
      const take = (b: Buffer, s: number, e: number, n: number, ev: string) =>
        got.push([b.toString("utf8", s, e), ev, n]);
      const sink = { rawMessage: take };
      for (const part of [bytes.subarray(0, cut), bytes.subarray(cut)]) {
        shared.fill(0x41);
        part.copy(shared, 100);
        if (mode === "range") p.feedRange(shared, 100, 100 + part.length, take);
        else p.feedRangeTo(shared, 100, 100 + part.length, sink);
      }
      assert.deepEqual(got, want, `${mode}, cut at ${cut}`);
    }
});

test("a trailing message without a blank line is returned by finish()", () => {
  const m = parseAll([Buffer.from('data: {"x":1}\n\ndata: [DONE]')]);
  assert.deepEqual(
    m.map((x) => x.data),
    ['{"x":1}', "[DONE]"],
  );
});

test("interpretChunk: completions, chat, reasoning, tools, usage, errors, malformed", () => {
  const c = interpretChunk(
    '{"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":"ab","logprobs":null,"finish_reason":null}],"usage":null}',
  );
  assert.equal(c.kind, "chunk");
  assert.equal(c.hasChoices, true);
  assert.equal(c.content, 2);
  assert.equal(c.completionTokens, -1);
  const role = interpretChunk('{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}');
  assert.equal(role.hasChoices, true);
  assert.equal(role.content, 0);
  const r = interpretChunk('{"choices":[{"delta":{"reasoning_content":"think"}}]}');
  assert.equal(r.reasoning, 5);
  assert.equal(interpretChunk('{"choices":[{"delta":{"reasoning":"abc"}}]}').reasoning, 3);
  const t = interpretChunk(
    '{"choices":[{"delta":{"tool_calls":[{"function":{"name":"f","arguments":"{\\"a\\":1}"}}]}}]}',
  );
  assert.equal(t.tool, 8);
  const u = interpretChunk('{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":9,"total_tokens":16}}');
  assert.equal(u.hasChoices, false);
  assert.equal(u.completionTokens, 9);
  assert.equal(u.promptTokens, 7);
  const fin = interpretChunk('{"choices":[{"text":"","finish_reason":"length"}]}');
  assert.equal(fin.finishReason, "length");
  assert.equal(interpretChunk("[DONE]").kind, "done");
  const e = interpretChunk('{"error":{"message":"boom","type":"InternalServerError","code":500}}');
  assert.equal(e.kind, "error");
  assert.equal(e.errorMessage, "boom");
  assert.equal(interpretChunk('{"object":"error","message":"old shape"}').errorMessage, "old shape");
  const bad = interpretChunk('{"choices":[{"text":"a"');
  assert.equal(bad.kind, "malformed");
  assert.match(bad.errorMessage!, /not JSON/);
  assert.equal(interpretChunk("42").kind, "malformed");
});
