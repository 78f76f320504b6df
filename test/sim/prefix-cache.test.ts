// Block-hash prefix caching: the pool's own rules (pure), then a real sim process: hits on shared
// prefixes, LRU eviction under a small capacity, TTFT lowered by the model's prefill time of the
// cached tokens, /metrics counters equal to the sim's truth, and the Mooncake trace's theoretical reuse.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import type { RequestTruth } from "../../src/sim/engine.ts";
import { explainSim } from "../../src/sim/explain.ts";
import { prefillBatch, resolveSim } from "../../src/sim/index.ts";
import { blockHashes, KvBlockPool, type KvHolder, type PrefixCacheTruth } from "../../src/sim/kvcache.ts";
import { mix32 } from "../../src/sim/rng.ts";
import { VOCAB_SIZE } from "../../src/sim/text.ts";
import { type SpawnedSim, spawnSim } from "../helpers/sim.ts";
import { post, sample } from "./util.ts";

type Truth = PrefixCacheTruth & { requestsRecent: RequestTruth[] };

const holder = (): KvHolder => ({ blockIds: [], hashes: [] });
/** `n` token ids from a seed, inside the vocabulary (one-unit pieces excluded, so they are word pieces). */
const ids = (seed: number, n: number) =>
  Array.from({ length: n }, (_, i) => 65536 + (mix32((seed * 1_000_003 + i) | 0) % (VOCAB_SIZE - 200_000)));

describe("KvBlockPool (pure)", () => {
  const bs = 4;
  const admit = (pool: KvBlockPool, tokens: number[]) => {
    const h = holder();
    const hashes = blockHashes(tokens, tokens.length, bs);
    const hit = pool.lookup(hashes, Math.floor((tokens.length - 1) / bs));
    pool.hold(h, hit);
    h.hashes.push(...hashes.slice(0, hit.length));
    pool.allocate(h, Math.ceil(tokens.length / bs) - hit.length);
    pool.nameFullBlocks(h, tokens.length, hashes, (i) => tokens[i]!);
    return { h, hit: hit.length };
  };

  test("a shared prefix hits its full blocks; the last token is always computed; a partial block never hits", () => {
    const pool = new KvBlockPool(64, bs, true);
    const a = ids(1, 18); // 4 full blocks + 2 tokens
    const r1 = admit(pool, a);
    assert.equal(r1.hit, 0);
    pool.release(r1.h);
    assert.equal(admit(pool, a).hit, 4);
    const b = [...a.slice(0, 10), ...ids(2, 10)]; // diverges inside block 2
    assert.equal(admit(pool, b).hit, 2);
    const c = a.slice(0, 16); // exactly 4 blocks: the 4th is recomputed (num_tokens - 1)
    assert.equal(admit(pool, c).hit, 3);
  });

  test("LRU over free blocks: a touched prefix survives, the least recent one is evicted; held blocks never are", () => {
    const pool = new KvBlockPool(12, bs, true);
    const [a, b, c] = [ids(10, 16), ids(11, 16), ids(12, 16)];
    for (const t of [a, b, c]) pool.release(admit(pool, t).h); // 12 blocks named, all free
    assert.equal(pool.truth().cachedBlocks, 12);
    pool.release(admit(pool, a).h); // a is now most recent (its fourth block was recomputed)
    const e0 = pool.stats.evictions;
    const d = admit(pool, ids(13, 16)); // needs 4: evicts b's, the least recent
    assert.equal(pool.stats.evictions - e0, 4);
    assert.equal(admit(pool, c).hit, 3); // c still cached (held now)
    const heldByD = d.h.blockIds.slice();
    // All that is free now is a's 4 blocks; taking them evicts a, never a held block of c or d.
    assert.equal(pool.numFree, 4);
    const e = holder();
    pool.allocate(e, 4);
    assert.deepEqual(
      e.blockIds.filter((x) => heldByD.includes(x)),
      [],
    );
    assert.equal(pool.numFree, 0);
    pool.release(e);
    assert.equal(admit(pool, a).hit, 0);
    assert.equal(admit(pool, ids(11, 16)).hit, 0); // b was evicted by d
  });

  test("freed tail first: a partial eviction keeps the shared head", () => {
    const pool = new KvBlockPool(8, bs, true);
    const a = ids(20, 32);
    pool.release(admit(pool, a).h);
    const x = holder();
    pool.allocate(x, 3); // takes 3 blocks from the LRU end: a's last three
    assert.equal(admit(pool, a).hit, 5);
  });

  test("caching off: nothing is named, nothing hits", () => {
    const pool = new KvBlockPool(16, bs, false);
    const a = ids(30, 20);
    pool.release(admit(pool, a).h);
    assert.equal(admit(pool, a).hit, 0);
    assert.equal(pool.truth().cachedBlocks, 0);
  });
});

test("KV capacity: the profile's stated pool, and the one GPU memory implies beside it", () => {
  // llama3-8b on one H100: 80 GB × 0.9 − 16.06 GB weights over 131,072 B/token × 16 = 26,674 blocks.
  const e = explainSim({ profile: "llama3-8b-1xh100" });
  assert.equal(e.kv.blocks, 27_000);
  assert.equal(e.kv.implied.blocks, Math.floor((80e9 * 0.9 - 16.06e9) / (131072 * 16)));
  assert.equal(e.kv.prefixCaching, true);
  // 16,000 tokens of KV hold one request of at most that many (vLLM refuses to start otherwise).
  const off = explainSim({
    profile: "llama3-8b-1xh100",
    enablePrefixCaching: false,
    numGpuBlocks: 500,
    blockSize: 32,
    overrides: { "model.maxModelLen": 16_000 },
  });
  assert.deepEqual([off.kv.blocks, off.kv.blockSize, off.kv.tokens, off.kv.prefixCaching], [500, 32, 16_000, false]);
});

async function truth(url: string): Promise<Truth> {
  return (await (await fetch(`${url}/debug/prefix_cache_truth`)).json()) as Truth;
}
async function counters(url: string): Promise<{ queries: number; hits: number; ttftSum: number; ttftCount: number }> {
  const text = await (await fetch(`${url}/metrics`)).text();
  return {
    queries: sample(text, "vllm:prefix_cache_queries_total"),
    hits: sample(text, "vllm:prefix_cache_hits_total"),
    ttftSum: sample(text, "vllm:time_to_first_token_seconds_sum"),
    ttftCount: sample(text, "vllm:time_to_first_token_seconds_count"),
  };
}
async function complete(url: string, prompt: number[] | string, maxTokens = 1) {
  const r = await post(url, "/v1/completions", { prompt, max_tokens: maxTokens, ignore_eos: true });
  assert.equal(r.status, 200, r.body);
  return JSON.parse(r.body) as {
    usage: { prompt_tokens: number; prompt_tokens_details: { cached_tokens: number } | null };
  };
}

describe("prefix caching on a sim process (speed zero, block size 16)", () => {
  let sim: SpawnedSim;
  before(async () => {
    sim = await spawnSim([
      "--speed",
      "zero",
      "--block-size",
      "16",
      "--num-gpu-blocks-override",
      "40",
      // A context the 640-token pool holds, as vLLM requires to start.
      "--set",
      "model.maxModelLen=640",
      "--enable-prompt-tokens-details",
    ]);
  });
  after(() => sim.stop());

  test("identical prefixes hit; usage.prompt_tokens_details and /metrics agree with the truth", async () => {
    const m0 = await counters(sim.url);
    const a = ids(100, 100);
    const first = await complete(sim.url, a);
    assert.equal(first.usage.prompt_tokens_details, null); // vLLM leaves it out (null) at 0 cached
    const again = await complete(sim.url, a);
    assert.deepEqual(again.usage.prompt_tokens_details, { cached_tokens: 96 });
    const fork = await complete(sim.url, [...a.slice(0, 70), ...ids(101, 50)]);
    assert.deepEqual(fork.usage.prompt_tokens_details, { cached_tokens: 64 });
    // A chat's text prompt and its /tokenize ids are one prompt: the ids hit the text's blocks.
    const text = "the cached conversation ".repeat(20);
    await complete(sim.url, text);
    const tok = JSON.parse((await post(sim.url, "/tokenize", { prompt: text })).body) as { tokens: number[] };
    const viaIds = await complete(sim.url, tok.tokens);
    assert.equal(viaIds.usage.prompt_tokens_details?.cached_tokens, Math.floor((tok.tokens.length - 1) / 16) * 16);
    const m1 = await counters(sim.url);
    const t = await truth(sim.url);
    assert.equal(m1.queries - m0.queries, 100 + 100 + 120 + 2 * tok.tokens.length);
    assert.equal(m1.hits - m0.hits, 96 + 64 + viaIds.usage.prompt_tokens_details!.cached_tokens);
    assert.equal(t.queries, m1.queries);
    assert.equal(t.hits, m1.hits);
    const rows = t.requestsRecent.slice(-5);
    assert.deepEqual(
      rows.map((r) => r.cachedTokens),
      [0, 96, 64, 0, viaIds.usage.prompt_tokens_details!.cached_tokens],
    );
  });

  test("LRU eviction within the capacity: the least recently used prefix goes, a touched one stays", async () => {
    // 40 blocks; each prompt 112 tokens = 7 blocks (+1 for its output token). Five prompts fill the pool.
    const p = [0, 1, 2, 3, 4].map((k) => ids(200 + k, 112));
    for (const x of p) await complete(sim.url, x);
    const e0 = (await truth(sim.url)).evictions;
    assert.equal((await complete(sim.url, p[0]!)).usage.prompt_tokens_details?.cached_tokens, 96); // touch p0
    // A new 8-block request evicts the least recently used blocks: p1's (freed tail first).
    await complete(sim.url, ids(299, 112));
    const t = await truth(sim.url);
    assert.ok(t.evictions > e0, "the pool was full, so the new request evicted named blocks");
    assert.equal((await complete(sim.url, p[4]!)).usage.prompt_tokens_details?.cached_tokens, 96);
    assert.equal((await complete(sim.url, p[0]!)).usage.prompt_tokens_details?.cached_tokens, 96);
    const p1 = await complete(sim.url, p[1]!);
    assert.ok((p1.usage.prompt_tokens_details?.cached_tokens ?? 0) < 96, "p1 was the least recently used");
    assert.ok(t.cachedBlocks <= 40);
  });
});

describe("TTFT on a sim process: cached tokens skip prefill (llama3-8b, jitter 0)", () => {
  const PROFILE = "llama3-8b-1xh100";
  const settings = { "cost.jitterSigma": 0 };
  let on: SpawnedSim;
  let off: SpawnedSim;
  before(async () => {
    const common = ["--profile", PROFILE, "--set", "cost.jitterSigma=0"];
    [on, off] = await Promise.all([spawnSim(common), spawnSim([...common, "--no-enable-prefix-caching"])]);
  });
  after(async () => {
    await Promise.all([on.stop(), off.stop()]);
  });

  test("a repeated 4,000-token prompt's TTFT is lower by the model's prefill time of its 3,984 cached tokens", async () => {
    const { model, profile } = resolveSim({ profile: PROFILE, overrides: settings });
    const prompt = ids(400, 4000);
    const m0 = await counters(on.url);
    await complete(on.url, prompt);
    await complete(on.url, prompt);
    const m1 = await counters(on.url);
    const [cold, warm] = (await truth(on.url)).requestsRecent.slice(-2) as [RequestTruth, RequestTruth];
    assert.equal(cold.cachedTokens, 0);
    assert.equal(warm.cachedTokens, 3984);
    // The engine's prefill steps are the model's steps for the uncached tokens only.
    const coldModel = model.stepMs(prefillBatch(4000, 0));
    const warmModel = model.stepMs(prefillBatch(16, 3984));
    assert.ok(Math.abs(cold.prefillModelMs - coldModel) < 1e-9);
    assert.ok(Math.abs(warm.prefillModelMs - warmModel) < 1e-9);
    const saved = coldModel - warmModel;
    assert.ok(saved > 10, `a 4,000-token prefill saves well over 10 ms on this profile (${saved})`);
    // TTFT from the server's own stamps = frontend + model prefill + the engine's lateness, which its
    // stamps measure apart: admission after the frontend, and the first token's send after its step's deadline.
    const late = (r: RequestTruth) =>
      r.scheduledMs - (r.arrivalMs + profile.cost.frontendMs) + (r.firstTokenMs - r.firstTokenDueMs);
    const noise = late(cold) + late(warm) + 0.2;
    assert.ok(
      Math.abs(cold.ttftMs - warm.ttftMs - saved) <= noise,
      `TTFT cold ${cold.ttftMs} − warm ${warm.ttftMs} vs model ${saved} (± ${noise})`,
    );
    // The exported histogram holds the same TTFTs.
    assert.equal(m1.ttftCount - m0.ttftCount, 2);
    assert.ok(Math.abs((m1.ttftSum - m0.ttftSum) * 1000 - (cold.ttftMs + warm.ttftMs)) < 0.01);

    // Caching off: the same repeat pays the full prefill again, and nothing is counted.
    const o0 = await counters(off.url);
    await complete(off.url, prompt);
    await complete(off.url, prompt);
    const [c2, w2] = (await truth(off.url)).requestsRecent.slice(-2) as [RequestTruth, RequestTruth];
    assert.equal(w2.cachedTokens, 0);
    assert.ok(Math.abs(w2.prefillModelMs - coldModel) < 1e-9 && Math.abs(c2.prefillModelMs - coldModel) < 1e-9);
    const o1 = await counters(off.url);
    assert.equal(o1.queries - o0.queries, 0);
  });
});

describe("Mooncake conversation trace: hit rate = the trace's theoretical reuse", () => {
  const file = join(
    import.meta.dirname,
    "..",
    "..",
    "..",
    "shared",
    "workloads",
    "mooncake",
    "conversation_trace.jsonl",
  );
  const rows = readFileSync(file, "utf8")
    .split("\n")
    .filter((l) => l.trim())
    .slice(0, 300)
    .map((l) => JSON.parse(l) as { input_length: number; output_length: number; hash_ids: number[] });
  let sim: SpawnedSim;
  before(async () => {
    const maxLen = Math.max(...rows.map((r) => r.input_length)) + 16;
    const blocks = rows.reduce((a, r) => a + Math.ceil((r.input_length + 1) / 16) + 1, 0);
    sim = await spawnSim([
      "--speed",
      "zero",
      "--block-size",
      "16",
      "--num-gpu-blocks-override",
      String(blocks),
      "--set",
      `model.maxModelLen=${maxLen}`,
    ]);
  });
  after(() => sim.stop());

  test("first 300 requests, cache large enough for all: metrics hit rate = truth = Σ min(512k, len) / Σ len to three decimals", async (t) => {
    // Each hash id is one deterministic 512-token block; a request's prompt is its blocks cut to input_length.
    const blockOf = new Map<number, number[]>();
    const block = (h: number) => {
      let b = blockOf.get(h);
      if (!b) blockOf.set(h, (b = ids(h + 7_000_000, 512)));
      return b;
    };
    const seen = new Set<number>();
    let reusable = 0;
    let fullBlocks = 0;
    let total = 0;
    const m0 = await counters(sim.url);
    for (const r of rows) {
      let k = 0;
      while (k < r.hash_ids.length && seen.has(r.hash_ids[k]!)) k++;
      reusable += Math.min(512 * k, r.input_length);
      // What vLLM can reuse of it: whole 16-token blocks, and never the last token (it is always computed).
      fullBlocks += Math.min(512 * k, 16 * Math.floor((r.input_length - 1) / 16));
      total += r.input_length;
      for (const h of r.hash_ids) seen.add(h);
      const prompt = r.hash_ids.flatMap(block).slice(0, r.input_length);
      const res = await complete(sim.url, prompt);
      assert.equal(res.usage.prompt_tokens, r.input_length);
    }
    const m1 = await counters(sim.url);
    const tr = await truth(sim.url);
    const rate = (m1.hits - m0.hits) / (m1.queries - m0.queries);
    assert.equal(m1.queries - m0.queries, total);
    assert.equal(tr.hits, m1.hits);
    assert.equal(tr.queries, m1.queries);
    assert.equal(tr.evictions, 0);
    const theory = reusable / total;
    t.diagnostic(
      `sim hit rate ${(rate * 100).toFixed(3)} % vs theoretical reuse ${(theory * 100).toFixed(3)} %; hits ${m1.hits - m0.hits} of ${reusable} reusable`,
    );
    // Exact, token for token: the reuse less the partial blocks vLLM computes again (14 of 4.27 M tokens here),
    // and so the trace's reuse to three decimals of a percent (docs/sim.md).
    assert.equal(m1.hits - m0.hits, fullBlocks);
    assert.ok(Math.abs(rate - theory) < 0.5e-5, `sim hit rate ${rate} vs theoretical reuse ${theory}`);
  });
});

describe("multi-turn chat on a sim process: each turn hits the previous turn's prompt and reply", () => {
  let sim: SpawnedSim;
  before(async () => {
    sim = await spawnSim(["--speed", "zero", "--block-size", "16", "--enable-prompt-tokens-details"]);
  });
  after(() => sim.stop());

  test("8 concurrent sessions × 4 turns: cached = the previous prompt + output less its last token, in full blocks; Σ = Δhits = truth", async () => {
    const m0 = await counters(sim.url);
    const OUT = 40;
    let cachedSum = 0;
    const session = async (s: number) => {
      const messages: Array<{ role: string; content: string }> = [
        { role: "system", content: `You are session ${s}. ${"Answer briefly and well. ".repeat(10)}` },
      ];
      let prev: { prompt: number; out: number } | null = null;
      for (let turn = 0; turn < 4; turn++) {
        messages.push({ role: "user", content: `question ${turn} of session ${s}: ${"why so ".repeat(5 + turn)}?` });
        const r = await post(sim.url, "/v1/chat/completions", { messages, max_tokens: OUT, ignore_eos: true });
        assert.equal(r.status, 200, r.body);
        const body = JSON.parse(r.body) as {
          choices: [{ message: { content: string } }];
          usage: {
            prompt_tokens: number;
            completion_tokens: number;
            prompt_tokens_details: { cached_tokens: number } | null;
          };
        };
        const cached = body.usage.prompt_tokens_details?.cached_tokens ?? 0;
        // The system prompt alone is shared by no other session (it names the session), so a first turn misses.
        const want: number = prev ? Math.floor((prev.prompt + prev.out - 1) / 16) * 16 : 0;
        assert.equal(cached, want, `session ${s} turn ${turn}`);
        cachedSum += cached;
        prev = { prompt: body.usage.prompt_tokens, out: body.usage.completion_tokens };
        messages.push({ role: "assistant", content: body.choices[0].message.content });
      }
    };
    await Promise.all(Array.from({ length: 8 }, (_, s) => session(s)));
    const m1 = await counters(sim.url);
    const t = await truth(sim.url);
    assert.equal(m1.hits - m0.hits, cachedSum);
    assert.equal(t.hits, m1.hits);
    assert.equal(t.queries, m1.queries);
    assert.equal(t.preemptedRequests, 0);
  });
});
