// RecordStore keeps finished requests column-wise; a record read back must equal the one put in,
// whether the store was sized for the run or had to grow past its first guess.
import assert from "node:assert/strict";
import { test } from "node:test";
import { blankRecord } from "../../src/load/client.ts";
import { ChunkArena, ChunkScratch, RecordStore } from "../../src/load/records.ts";
import type { RequestRecord } from "../../src/load/types.ts";

function record(i: number, arena: ChunkArena): RequestRecord {
  const r = blankRecord();
  r.index = i;
  r.scheduledMs = i * 1.25;
  r.sendMs = i * 1.25 + 0.5;
  r.status = i % 7 === 0 ? 503 : 200;
  r.errorClass = i % 7 === 0 ? "http" : null;
  r.errorMessage = i % 7 === 0 ? `HTTP 503 #${i}` : null;
  r.finishReason = i % 7 === 0 ? null : i % 2 ? "length" : "stop";
  r.outputTokens = i % 13;
  const s = new ChunkScratch(4);
  for (let k = 0; k < i % 13; k++) s.push(i + k * 0.5, 10 + k, 1 + k, 1, k, 0, 0, 0);
  r.chunks = s.moveTo(arena);
  return r;
}

for (const expected of [16, 1000]) {
  test(`sized for ${expected}, 1,000 records in: every field and chunk column reads back the same`, () => {
    const arena = new ChunkArena();
    const store = new RecordStore(arena, expected);
    const put: RequestRecord[] = [];
    for (let i = 0; i < 1000; i++) {
      const r = record(i, arena);
      put.push(r);
      store.add(r);
    }
    const got = store.materialize();
    assert.equal(got.length, 1000);
    for (let i = 0; i < 1000; i++) {
      const a = put[i]!;
      const b = got[i]!;
      for (const k of [
        "index",
        "scheduledMs",
        "sendMs",
        "status",
        "errorClass",
        "errorMessage",
        "finishReason",
      ] as const)
        assert.equal(b[k], a[k], `record ${i} ${k}`);
      assert.deepEqual(Array.from(b.chunks.tMs), Array.from(a.chunks.tMs), `record ${i} chunk times`);
      assert.deepEqual(Array.from(b.chunks.bytes), Array.from(a.chunks.bytes), `record ${i} chunk bytes`);
    }
  });
}
