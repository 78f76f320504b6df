import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { parseRecordsJsonl, recordToJson } from "../../src/load/records.ts";
import { chunkItls, computeMetrics, peakConcurrency, requestTpot, tokenItls } from "../../src/load/summarize.ts";

// Recorded against `inferscope sim --time-scale 10`: two /v1/completions requests (5 tokens), one chat
// request (4 tokens, role chunk first), one HTTP 500 and one warmup request.
const path = new URL("./fixtures/recorded.jsonl", import.meta.url).pathname;
const recs = parseRecordsJsonl(readFileSync(path, "utf8"), path);
const close = (a: number, b: number, eps = 1e-9) => assert.ok(Math.abs(a - b) <= eps, `${a} ≠ ${b}`);

test("the recorded fixture parses (header skipped, NaN restored from null)", () => {
  assert.equal(recs.length, 5);
  assert.equal(recs[3]!.errorClass, "http");
  assert.ok(Number.isNaN(recs[3]!.ttftMs));
  assert.equal(recs[4]!.warmup, true);
});

test("per-request TPOT, ITL and E2EL match a hand computation", () => {
  const [a, b, c] = recs;
  // A: TTFT 79.874, last chunk 107.953, n = 5 → TPOT = 28.079 / 4.
  close(a!.ttftMs, 79.874);
  close(a!.e2elMs, 107.953);
  close(requestTpot(a!)!, 7.01975);
  const ia = chunkItls(a!);
  assert.equal(ia.length, 4);
  [9.271, 11.819, 2.572, 4.417].forEach((v, i) => {
    close(ia[i]!, v);
  });
  // B: 6.982 / 4.
  close(requestTpot(b!)!, 1.7455);
  [0.09, 0.019, 0.196, 6.677].forEach((v, i) => {
    close(chunkItls(b!)[i]!, v);
  });
  // C (chat): vLLM anchors TTFT on the role chunk (48.489), so 4 tokens give 4 ITL samples.
  close(c!.ttftMs, 48.489);
  close(requestTpot(c!)!, 8.807 / 3);
  const ic = chunkItls(c!);
  assert.equal(ic.length, 4);
  [0.336, 3.388, 5.031, 0.052].forEach((v, i) => {
    close(ic[i]!, v);
  });
  // Per-token ITL skips the 0-token role chunk: n − 1 samples.
  const tc = tokenItls(c!);
  assert.equal(tc.length, 3);
  [3.388, 5.031, 0.052].forEach((v, i) => {
    close(tc[i]!, v);
  });
});

test("run summary: vLLM field names and values, failures and warmup excluded", () => {
  const { summary: s, warnings, perRequest } = computeMetrics(recs, { durationMs: 1000, percentiles: [50, 99] });
  assert.equal(s.completed, 3);
  assert.equal(s.failed, 1);
  assert.equal(s.total_input_tokens, 15 + 18 + 22);
  assert.equal(s.total_output_tokens, 14);
  assert.equal(s.duration, 1);
  assert.equal(s.request_throughput, 3);
  assert.equal(s.output_throughput, 14);
  assert.equal(s.total_token_throughput, 69);
  assert.equal(s.request_goodput, null);
  close(s.mean_ttft_ms as number, (79.874 + 31.461 + 48.489) / 3);
  close(s.median_ttft_ms as number, 48.489);
  close(s.mean_tpot_ms as number, (7.01975 + 1.7455 + 8.807 / 3) / 3);
  // 12 pooled ITL samples; sorted: 0.019 0.052 0.09 0.196 0.336 2.572 3.388 4.417 5.031 6.677 9.271 11.819
  const itl = [9.271, 11.819, 2.572, 4.417, 0.09, 0.019, 0.196, 6.677, 0.336, 3.388, 5.031, 0.052];
  close(s.mean_itl_ms as number, itl.reduce((x, y) => x + y) / 12, 1e-12);
  close(s.median_itl_ms as number, (2.572 + 3.388) / 2);
  // np.percentile linear: rank 0.99·11 = 10.89 → 9.271 + 0.89·(11.819 − 9.271)
  close(s.p99_itl_ms as number, 11.819 - (11.819 - 9.271) * (1 - 0.89), 1e-9);
  close(s.p50_e2el_ms as number, 57.296);
  // A [5.177, 113.130) and C [0.296, 57.592) overlap (they come from separate runs): peak 2.
  assert.equal(s.max_concurrent_requests, 2);
  assert.ok(s.inferscope.itl_under_100us >= 2);
  assert.equal(s.inferscope.warmup_excluded, 1);
  assert.deepEqual(s.inferscope.errors, { http: 1 });
  assert.ok(warnings.some((w) => /1 of 4 requests failed/.test(w)));
  assert.equal(perRequest.latencies.length, 4);
  assert.equal(perRequest.errors[3], "http: HTTP 500: injected fault");
});

test("goodput follows vLLM: every given SLO must hold; TPOT of a 1-token request counts as 0", () => {
  const g = computeMetrics(recs, { durationMs: 1000, goodput: { ttft: 50 } }).summary;
  assert.equal(g.request_goodput, 2); // B (31.5 ms) and C (48.5 ms)
  const g2 = computeMetrics(recs, { durationMs: 1000, goodput: { ttft: 50, tpot: 2 } }).summary;
  assert.equal(g2.request_goodput, 1); // only B: C's TPOT is 2.94 ms
  const g3 = computeMetrics(recs, { durationMs: 2000, goodput: { e2el: 1000 } }).summary;
  assert.equal(g3.request_goodput, 1.5);
});

test("multi-token chunks: chunk ITL > TPOT, per-token ITL splits each gap", () => {
  const base = recs[0]!;
  const r = structuredClone(recordToJson(base)) as any;
  // 3 chunks carrying 1, 3, 2 tokens: n = 6.
  r.chunks = {
    tMs: [10, 16, 20],
    bytes: [1, 1, 1],
    read: [0, 1, 2],
    tokens: [1, 3, 2],
    content: [1, 3, 2],
    reasoning: [0, 0, 0],
    tool: [0, 0, 0],
    flags: [3, 3, 7],
  };
  Object.assign(r, { ttftMs: 10, firstChunkMs: 10, e2elMs: 20, lastChunkMs: 20, outputTokens: 6, completionTokens: 6 });
  const rec = parseRecordsJsonl(JSON.stringify(r))[0]!;
  assert.equal(requestTpot(rec), 2); // (20 − 10) / 5
  assert.deepEqual(chunkItls(rec), [6, 4]); // mean 5 > TPOT 2
  assert.deepEqual(tokenItls(rec), [2, 2, 2, 2, 2]);
  const m = computeMetrics([rec], { durationMs: 1000 });
  assert.equal(m.summary.inferscope.multi_token_chunks, 2);
  assert.ok(m.warnings.some((w) => /more than one token/.test(w)));
});

test("peak concurrency: departures before arrivals on ties", () => {
  assert.equal(
    peakConcurrency([
      [0, 10],
      [10, 20],
      [5, 12],
    ]),
    2,
  );
  assert.equal(peakConcurrency([]), 0);
});

test("OSL mismatch and missing usage are warned about", () => {
  const r = structuredClone(recordToJson(recs[0]!)) as any;
  Object.assign(r, { targetOutputLen: 100, completionTokens: -1, outputTokensFromUsage: false });
  const m = computeMetrics([parseRecordsJsonl(JSON.stringify(r))[0]!], { durationMs: 1000 });
  assert.ok(m.warnings.some((w) => /output length differs/.test(w)));
  assert.ok(m.warnings.some((w) => /no usage.completion_tokens/.test(w)));
});

test("a bad records line is reported as path:line", () => {
  assert.throws(() => parseRecordsJsonl('{"index":0}\n{oops\n', "r.jsonl"), /r\.jsonl:2:1: not a JSON record/);
});

test("a request cut by an interrupt counts as aborted, not failed; the server's failures stay failed", () => {
  // The HTTP 500 stays a failure; a copy of a successful request cut by Ctrl-C is aborted.
  const cut = { ...recs[0]!, index: 99, errorClass: "aborted" as const, errorMessage: "interrupted" };
  const { summary: s, warnings } = computeMetrics([...recs, cut], { durationMs: 1000 });
  assert.equal(s.completed, 3);
  assert.equal(s.failed, 1);
  assert.equal(s.aborted, 1);
  assert.ok(
    warnings.some((w) => /1 of 5 requests were aborted by us \(interrupted\)/.test(w)),
    warnings.join("; "),
  );
  // Nothing but cut requests: not "all requests failed".
  const only = computeMetrics([cut], { durationMs: 1000 });
  assert.equal(only.summary.failed, 0);
  assert.deepEqual(only.warnings.slice(0, 1), ["every request was aborted before it finished"]);
});
