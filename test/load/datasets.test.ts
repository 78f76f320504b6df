// Trace readers against the real files in ../shared/workloads (counts, times, lengths), and malformed
// rows refused with file:line:column. Expected values are computed here by other means than the
// readers (string comparison of Azure's fixed-width stamps, plain JSON.parse of each Mooncake line).
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { InputError, UsageError } from "../../src/errors.ts";
import { readAzure } from "../../src/load/datasets/azure.ts";
import { isJsonlTrace, readJsonlTrace } from "../../src/load/datasets/jsonl.ts";
import { readMooncake } from "../../src/load/datasets/mooncake.ts";
import { planReplay } from "../../src/load/replay.ts";

const W = "../shared/workloads";
const MOONCAKE = `${W}/mooncake/conversation_trace.jsonl`;
const AZURE_CODE = `${W}/azure-llm-2023/AzureLLMInferenceTrace_code.csv`;

test("mooncake: every line of both traces, ms timestamps, hash_ids as given", () => {
  const t = readMooncake(MOONCAKE);
  const lines = readFileSync(MOONCAKE, "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));
  assert.equal(t.rows.length, lines.length);
  assert.equal(t.rows.length, 12_031);
  assert.equal(t.timed, true);
  let inSum = 0;
  for (const l of lines) inSum += l.input_length;
  assert.equal(
    t.rows.reduce((a, r) => a + r.inputLen, 0),
    inSum,
  );
  assert.equal(t.rows.at(-1)!.timestampMs, 3_536_999);
  assert.deepEqual(t.rows[5]!.hashIds, lines[5].hash_ids);
  assert.equal(readMooncake(`${W}/mooncake/synthetic_trace.jsonl`).rows.length, 3_993);
});

test("azure: CRLF, no final newline, 7-digit fractions kept to 100 ns", () => {
  const t = readAzure(AZURE_CODE);
  assert.equal(t.rows.length, 8_819);
  // 18:17:03.9799600 → 19:14:19.9280160 (README): 3,435,948.056 ms.
  assert.equal(t.rows.at(-1)!.timestampMs!.toFixed(4), "3435948.0560");
  const text = readFileSync(AZURE_CODE, "utf8");
  assert.ok(text.includes("\r\n") && !text.endsWith("\n"));
  const cells = text
    .split("\r\n")
    .slice(1)
    .map((l) => l.split(","));
  assert.equal(t.rows[1]!.inputLen, Number(cells[1]![1]));
  assert.equal(t.rows[1]!.outputLen, Number(cells[1]![2]));
  assert.equal(readAzure(`${W}/azure-llm-2023/AzureLLMInferenceTrace_conv.csv`).rows.length, 19_366);
});

test("a replay window of the Azure code trace: the file's rows in its first 10 minutes, their token totals", () => {
  const t = readAzure(AZURE_CODE);
  const plan = planReplay(t, { replaySpeed: 50, durationMs: 600_000 });
  // Fixed-width stamps compare as strings: 18:17:03.9799600 + 10 min = 18:27:03.9799600.
  const cells = readFileSync(AZURE_CODE, "utf8")
    .split("\r\n")
    .slice(1)
    .map((l) => l.split(","))
    .filter((c) => c[0]! < "2023-11-16 18:27:03.9799600");
  assert.equal(plan.rows.length, cells.length);
  assert.equal(
    plan.rows.reduce((a, r) => a + r.inputLen, 0),
    cells.reduce((a, c) => a + Number(c[1]), 0),
  );
  assert.equal(
    plan.rows.reduce((a, r) => a + r.outputLen, 0),
    cells.reduce((a, c) => a + Number(c[2]), 0),
  );
  // Send times are the trace's ÷ 50: the window's last arrival lands before 12 s.
  assert.ok(plan.timesMs.at(-1)! < 12_000 && plan.timesMs.at(-1)! > 11_000);
  for (let i = 1; i < plan.timesMs.length; i++) assert.ok(plan.timesMs[i]! >= plan.timesMs[i - 1]!);
  // An offset shifts the window and the clock: the first selected row is sent at 0 + its distance from the offset.
  const later = planReplay(t, { startOffsetMs: 60_000, maxRequests: 5, replaySpeed: 2 });
  assert.equal(later.rows.length, 5);
  assert.ok(later.rows[0]!.timestampMs! >= 60_000);
  assert.equal(later.timesMs[0], (later.rows[0]!.timestampMs! - 60_000) / 2);
  assert.throws(() => planReplay(t, { startOffsetMs: 1e9 }), UsageError);
  assert.throws(() => planReplay(t, { replaySpeed: 0 }), UsageError);
});

function withFile(name: string, text: string, f: (path: string) => void) {
  const dir = mkdtempSync(join(tmpdir(), "inferscope-ds-"));
  try {
    const p = join(dir, name);
    writeFileSync(p, text);
    f(p);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function refused(f: () => unknown, where: RegExp, what: RegExp) {
  assert.throws(f, (e: unknown) => {
    assert.ok(e instanceof InputError, String(e));
    assert.match(e.message, where);
    assert.match(e.message, what);
    return true;
  });
}

test("malformed Mooncake rows are refused at their line and column", () => {
  const ok = '{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [0, 1]}';
  const cases: Array<[string, RegExp]> = [
    ['{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [0, 1, 2]}', /3 blocks.*only 2/],
    ['{"timestamp": -3, "input_length": 600, "output_length": 5, "hash_ids": [0]}', /`timestamp` must be an integer/],
    ['{"timestamp": 0, "input_length": 600, "output_length": 0, "hash_ids": [0]}', /`output_length`/],
    ['{"timestamp": 0, "input_length": 600, "hash_ids": [0]}', /missing `output_length`/],
    ['{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [4, 4]}', /repeats id 4/],
    ['{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [0], "x": 1}', /unknown field `x`/],
    ['{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [0]', /not valid JSON/],
  ];
  for (const [bad, what] of cases)
    withFile("t.jsonl", `${ok}\n${bad}\n`, (p) => {
      const col = bad.includes('"x"') ? bad.indexOf('"x"') + 1 : null;
      refused(() => readMooncake(p), new RegExp(`t\\.jsonl:2:${col ?? "\\d+"}`), what);
    });
  // The column points at the offending key.
  withFile("t.jsonl", '{"timestamp": 0, "input_length": 600, "output_length": 0, "hash_ids": [0]}\n', (p) =>
    refused(() => readMooncake(p), /t\.jsonl:1:39\b/, /output_length/),
  );
});

test("malformed Azure rows are refused at their line and column", () => {
  const head = "TIMESTAMP,ContextTokens,GeneratedTokens\r\n";
  const row = "2023-11-16 18:17:03.9799600,374,44";
  withFile("a.csv", `${head}${row}\r\n2023-11-16 18:17:04.1,12,x`, (p) =>
    refused(() => readAzure(p), /a\.csv:3:26\b/, /GeneratedTokens must be an integer/),
  );
  withFile("a.csv", `${head}${row}\r\n2023-11-16 18:17:04.12345678,12,3`, (p) =>
    refused(() => readAzure(p), /a\.csv:3:1\b/, /TIMESTAMP must be/),
  );
  withFile("a.csv", `${head}${row}\r\n2023-02-30 18:17:04.1,12,3`, (p) =>
    refused(() => readAzure(p), /a\.csv:3:1\b/, /TIMESTAMP/),
  );
  withFile("a.csv", `${head}${row},9`, (p) => refused(() => readAzure(p), /a\.csv:2:1\b/, /3 comma-separated/));
  withFile("a.csv", `time,in,out\r\n${row}`, (p) => refused(() => readAzure(p), /a\.csv:1:1\b/, /header/));
  // LF files and a final newline are read the same (only the values are strict).
  withFile("a.csv", `${head.trim()}\n${row}\n2023-11-16 18:17:04.0799600,10,2\n`, (p) => {
    const t = readAzure(p);
    assert.equal(t.rows.length, 2);
    assert.equal(t.rows[1]!.timestampMs!.toFixed(4), "100.0000");
  });
});

test("jsonl traces: optional timestamp, lengths, hash_ids and session_id; text rows keep their text", () => {
  const text = [
    '{"timestamp": 1500, "input_length": 700, "output_length": 9, "hash_ids": [3, 4], "session_id": "a"}',
    '{"timestamp": 500, "prompt": "hello there", "max_tokens": 4, "session_id": 7}',
  ].join("\n");
  assert.ok(isJsonlTrace(text));
  assert.ok(!isJsonlTrace('{"prompt": "hi"}'));
  withFile("j.jsonl", text, (p) => {
    const t = readJsonlTrace(p, 128);
    assert.equal(t.timed, true);
    // Sorted by time and shifted to start at 0.
    assert.deepEqual(
      t.rows.map((r) => [r.timestampMs, r.sessionId, r.outputLen]),
      [
        [0, "7", 4],
        [1000, "a", 9],
      ],
    );
    assert.equal(t.rows[0]!.prompt, "hello there");
    assert.deepEqual(t.rows[1]!.hashIds, [3, 4]);
  });
  withFile("j.jsonl", '{"timestamp": 0, "input_length": 5}\n{"input_length": 5}\n', (p) =>
    refused(() => readJsonlTrace(p, 8), /j\.jsonl:2:1\b/, /timestamp.*on 1 rows but not on all/),
  );
  withFile("j.jsonl", '{"input_length": 5, "session_id": [1]}\n', (p) =>
    refused(() => readJsonlTrace(p, 8), /j\.jsonl:1:21\b/, /session_id/),
  );
  withFile("j.jsonl", '{"prompt": "x", "hash_ids": [1]}\n', (p) =>
    refused(() => readJsonlTrace(p, 8), /j\.jsonl:1:\d+/, /hash_ids.*input_length/),
  );
});
