// RecordStore keeps finished requests column-wise; a record read back must equal the one put in,
// whether the store was sized for the run or had to grow past its first guess.
import assert from "node:assert/strict";
import { test } from "node:test";
import { blankRecord } from "../../src/load/client.ts";
import { ChunkArena, ChunkRows, ChunkScratch, RecordStore } from "../../src/load/records.ts";
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

// A stream's rows (ChunkRows) become the same columns as the eight-column scratch would hold,
// through growth and a negative token count; and a put that copies a scratch's whole columns (past
// its n) leaves the requests put before it as they were.
test("ChunkRows into the arena: every column as pushed, across growth, earlier requests untouched", () => {
  const arena = new ChunkArena();
  const rows = new ChunkRows(2);
  const want: number[][] = [];
  for (let k = 0; k < 37; k++) {
    const row = [k * 1.5 + 0.25, 100 + k, 7 + (k >> 2), k % 5 === 0 ? -1 : k, k * 3, k % 2, k % 3, k % 8];
    want.push(row);
    rows.push(row[0]!, row[1]!, row[2]!, row[3]!, row[4]!, row[5]!, row[6]!, row[7]!);
  }
  assert.ok(rows.capacity >= 37);
  const a = rows.moveTo(arena);
  assert.equal(rows.n, 0);
  const cols = [a.tMs, a.bytes, a.read, a.tokens, a.content, a.reasoning, a.tool, a.flags];
  for (let k = 0; k < 37; k++)
    for (let c = 0; c < 8; c++) assert.equal(cols[c]![k], want[k]![c], `row ${k} column ${c}`);
  // A scratch copied whole (capacity ≤ 2n + 64) writes past its n in the block: the next request's
  // room. Requests before it must not change, and the next one must read back its own values.
  const s = new ChunkScratch(100);
  for (let k = 0; k < 60; k++) s.push(1000 + k, 1, 1, 1, 1, 1, 1, 1);
  const b = s.moveTo(arena);
  const s2 = new ChunkScratch(100);
  for (let k = 0; k < 3; k++) s2.push(2000 + k, 2, 2, 2, 2, 2, 2, 2);
  const c2 = s2.moveTo(arena);
  for (let k = 0; k < 37; k++) assert.equal(a.tMs[k], want[k]![0]);
  assert.deepEqual(
    Array.from(b.tMs),
    Array.from({ length: 60 }, (_, k) => 1000 + k),
  );
  assert.deepEqual(Array.from(c2.tMs), [2000, 2001, 2002]);
  assert.deepEqual(Array.from(c2.flags), [2, 2, 2]);
});

test("ChunkArena.reserve: blocks made ahead are used before new ones, and read back like any other", () => {
  const arena = new ChunkArena();
  arena.reserve(3 * 65536);
  const rows = new ChunkRows(300);
  const got: Array<ReturnType<ChunkRows["moveTo"]>> = [];
  for (let r = 0; r < 700; r++) {
    for (let k = 0; k < 300; k++) rows.push(r + k / 1000, k, r, 1, 1, 0, 0, 1);
    got.push(rows.moveTo(arena));
  }
  for (let r = 0; r < 700; r += 97) {
    assert.equal(got[r]!.tMs.length, 300);
    assert.equal(got[r]!.tMs[299], r + 0.299);
    assert.equal(got[r]!.read[5], r);
    assert.ok(arena.locate(got[r]!) !== null);
  }
});

// The load loops keep only where a stream's rows went (moveToArena + addAt, no views): what the store
// reads back must equal the columns moveTo would have made, chunk for chunk.
test("rows kept by location (moveToArena, addAt) read back like columns kept by view (moveTo, add)", () => {
  const arena = new ChunkArena();
  const byLoc = new RecordStore(arena, 8);
  const byView = new RecordStore(arena, 8);
  const rows = new ChunkRows(4);
  for (let i = 0; i < 300; i++) {
    const n = (i * 37) % 300;
    const fill = () => {
      for (let k = 0; k < n; k++) rows.push(i + k / 8, 9 + k, k >> 1, k % 3 ? 1 : -1, k, i % 2, 0, k & 15);
    };
    const a = blankRecord();
    a.index = i;
    fill();
    const m = rows.moveToArena(arena);
    assert.equal(m, n);
    byLoc.addAt(a, arena.lastBlock, arena.lastAt, m);
    const b = blankRecord();
    b.index = i;
    fill();
    b.chunks = rows.moveTo(arena);
    byView.add(b);
  }
  const x = byLoc.materialize();
  const y = byView.materialize();
  for (let i = 0; i < 300; i++)
    for (const col of ["tMs", "bytes", "read", "tokens", "content", "reasoning", "tool", "flags"] as const)
      assert.deepEqual(Array.from(x[i]!.chunks[col]), Array.from(y[i]!.chunks[col]), `record ${i} ${col}`);
});
