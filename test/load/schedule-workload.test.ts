import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { parseGoodput } from "../../src/cli/commands/bench.ts";
import { resolveOptions } from "../../src/load/runner.ts";
import { arrivalTimesMs, Rng, sweepRates } from "../../src/load/schedule.ts";
import { createWorkload, requestBody } from "../../src/load/workload.ts";

function gaps(t: Float64Array): number[] {
  const g: number[] = [t[0]!];
  for (let i = 1; i < t.length; i++) g.push(t[i]! - t[i - 1]!);
  return g;
}
const mean = (a: number[]) => a.reduce((x, y) => x + y, 0) / a.length;
const cv = (a: number[]) => {
  const m = mean(a);
  return Math.sqrt(mean(a.map((x) => (x - m) ** 2))) / m;
};

test("open-loop schedule: last arrival at N/r (vLLM rescaling), CV of gaps = 1/√burstiness", () => {
  const n = 20_000;
  for (const b of [0.25, 1, 4]) {
    const t = arrivalTimesMs(n, { rate: 100, burstiness: b, seed: 3 });
    assert.ok(Math.abs(t[n - 1]! - (n / 100) * 1000) < 1e-6);
    const g = gaps(t);
    assert.ok(Math.abs(mean(g) - 10) < 1e-6);
    assert.ok(Math.abs(cv(g) - 1 / Math.sqrt(b)) < 0.05 / Math.sqrt(b), `b=${b} cv=${cv(g)}`);
  }
  const c = arrivalTimesMs(5, { rate: 10, burstiness: Number.POSITIVE_INFINITY });
  assert.deepEqual(
    [...c].map((x) => Math.round(x * 1e9) / 1e9),
    [100, 200, 300, 400, 500],
  );
  assert.deepEqual([...arrivalTimesMs(3, { rate: Number.POSITIVE_INFINITY })], [0, 0, 0]);
});

test("same seed, same schedule and prompts; different seed, different", () => {
  assert.deepEqual(arrivalTimesMs(50, { rate: 5, seed: 1 }), arrivalTimesMs(50, { rate: 5, seed: 1 }));
  assert.notDeepEqual(arrivalTimesMs(50, { rate: 5, seed: 1 }), arrivalTimesMs(50, { rate: 5, seed: 2 }));
  const w1 = createWorkload({ seed: 4, randomInputLen: 32, randomOutputLen: 8 });
  const w2 = createWorkload({ seed: 4, randomInputLen: 32, randomOutputLen: 8 });
  assert.equal(w1.get(17).prompt, w2.get(17).prompt);
  assert.notEqual(w1.get(17).prompt, w1.get(18).prompt);
  assert.equal(w1.get(3).prompt!.split(" ").length, 32);
  // Gamma sampler mean for shape < 1 and > 1.
  const r = new Rng(9);
  for (const k of [0.5, 3]) {
    let s = 0;
    for (let i = 0; i < 40_000; i++) s += r.gamma(k, 2);
    assert.ok(Math.abs(s / 40_000 - 2 * k) < 0.05 * 2 * k);
  }
});

test("request bodies follow vllm bench serve", () => {
  const p = { prompt: "hi", inputLen: 1, outputLen: 9 };
  const c = JSON.parse(requestBody(p, { model: "m", endpoint: "/v1/completions", ignoreEos: true }));
  assert.deepEqual(c, {
    model: "m",
    prompt: "hi",
    repetition_penalty: 1,
    max_tokens: 9,
    logprobs: null,
    stream: true,
    stream_options: { include_usage: true, continuous_usage_stats: true },
    ignore_eos: true,
  });
  const ch = JSON.parse(requestBody(p, { model: "m", endpoint: "/v1/chat/completions", continuousUsage: false }));
  assert.deepEqual(ch.messages, [{ role: "user", content: "hi" }]);
  assert.equal(ch.max_completion_tokens, 9);
  assert.deepEqual(ch.stream_options, { include_usage: true });
});

test("datasets: JSONL bad line → path:line:column; ShareGPT filters; shared prefix", () => {
  const dir = mkdtempSync(join(tmpdir(), "inferscope-load-"));
  const jl = join(dir, "p.jsonl");
  writeFileSync(
    jl,
    '{"prompt":"a b c","max_tokens":5}\n\n{"messages":[{"role":"user","content":"x"}]}\n{"prompt": oops}\n',
  );
  assert.throws(
    () => createWorkload({ dataset: "jsonl", datasetPath: jl }),
    (e: Error) => {
      assert.match(e.message, new RegExp(`^${jl.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")}:4:\\d+: not valid JSON`));
      return true;
    },
  );
  writeFileSync(jl, '{"prompt":"a b c","max_tokens":5}\n{"text":"no prompt"}\n');
  assert.throws(
    () => createWorkload({ dataset: "jsonl", datasetPath: jl }),
    /p\.jsonl:2:1: expected a string `prompt`/,
  );
  writeFileSync(
    jl,
    '{"prompt":"a b c","max_tokens":5}\n{"messages":[{"role":"user","content":"x y"}],"output_len":3}\n',
  );
  const w = createWorkload({ dataset: "jsonl", datasetPath: jl, seed: 1 });
  assert.equal(w.size, 2);
  const sg = join(dir, "sg.json");
  writeFileSync(
    sg,
    JSON.stringify([
      {
        conversations: [
          { from: "human", value: "x".repeat(100) },
          { from: "gpt", value: "y".repeat(200) },
        ],
      },
      {
        conversations: [
          { from: "human", value: "hi" },
          { from: "gpt", value: "short" },
        ],
      },
      { conversations: [{ from: "human", value: "only one turn" }] },
    ]),
  );
  const s = createWorkload({ dataset: "sharegpt", datasetPath: sg });
  assert.equal(s.size, 1);
  assert.equal(s.get(0).outputLen, 50);
  assert.throws(() => createWorkload({ dataset: "sharegpt", datasetPath: join(dir, "none.json") }), /no such file/);
  const sp = createWorkload({ dataset: "shared-prefix", prefixGroups: 2, prefixLen: 10, randomInputLen: 5 });
  const a = sp.get(0).prompt!.split(" ");
  const b = sp.get(2).prompt!.split(" ");
  assert.deepEqual(a.slice(0, 10), b.slice(0, 10));
  assert.notDeepEqual(a.slice(0, 10), sp.get(1).prompt!.split(" ").slice(0, 10));
});

test("contradictory or invalid options are usage errors", () => {
  const base = { baseUrl: "http://127.0.0.1:1" };
  assert.throws(() => resolveOptions({ ...base, concurrency: 4, requestRate: 10 }), /contradict/);
  assert.throws(() => resolveOptions({ ...base, concurrency: 4, maxConcurrency: 2 }), /not both/);
  assert.throws(() => resolveOptions({ ...base, numPrompts: 4, durationMs: 1000 }), /not both/);
  assert.throws(() => resolveOptions({ ...base, burstiness: 0.5 }), /finite --request-rate/);
  assert.throws(() => resolveOptions({ ...base, durationMs: 1000 }), /--duration needs/);
  assert.throws(() => resolveOptions({ ...base, percentiles: [0] }), /percentiles/);
  assert.throws(() => resolveOptions({ baseUrl: "ftp://x" }), /not an http/);
  assert.equal(resolveOptions({ ...base, durationMs: 2000, requestRate: 5 }).numPrompts, 10);
  assert.deepEqual(parseGoodput(["ttft:200", "tpot:50"]), { ttft: 200, tpot: 50 });
  assert.deepEqual(parseGoodput(["ttft=200,e2el=900"], "="), { ttft: 200, e2el: 900 });
  assert.throws(() => parseGoodput(["foo:1"]), /must be one of/);
  assert.throws(() => parseGoodput(["ttft:-1"]), /≥ 0/);
  assert.deepEqual(sweepRates(1, 5, 3), [2, 3, 4]);
  assert.throws(() => createWorkload({ randomRangeRatio: 1 }), /--random-range-ratio must be in \[0, 1\), got 1/);
  assert.throws(() => createWorkload({ randomRangeRatio: -0.1 }), /--random-range-ratio/);
  assert.equal(createWorkload({ randomRangeRatio: 0.99, randomInputLen: 10 }).get(0).inputLen >= 1, true);
});
