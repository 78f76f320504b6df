import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { type SimHandle, startSim } from "../../src/sim/index.ts";
import { get, post, sample } from "./util.ts";

const MODEL = "zai-org/GLM-5";

describe("wire compatibility (speed zero)", () => {
  let sim: SimHandle;
  before(async () => {
    sim = await startSim({ port: 0, speed: "zero", warmup: false });
  });
  after(() => sim.close());

  test("completions stream: vLLM chunk shape, usage chunk, [DONE]", async () => {
    const r = await post(sim.url, "/v1/completions", {
      model: MODEL,
      prompt: "The quick brown fox",
      max_tokens: 7,
      ignore_eos: true,
      stream: true,
      stream_options: { include_usage: true },
    });
    assert.equal(r.status, 200);
    assert.match(String(r.headers["content-type"]), /^text\/event-stream/);
    assert.equal(r.data.at(-1), "[DONE]");
    const chunks = r.data.slice(0, -1).map((d) => JSON.parse(d));
    const usage = chunks.pop();
    assert.equal(chunks.length, 7);
    for (const [i, c] of chunks.entries()) {
      assert.deepEqual(Object.keys(c), ["id", "object", "created", "model", "choices", "usage"]);
      assert.match(c.id, /^cmpl-[0-9a-f]{32}$/);
      assert.equal(c.id, chunks[0].id);
      assert.equal(c.object, "text_completion");
      assert.ok(Number.isInteger(c.created));
      assert.equal(c.model, MODEL);
      assert.equal(c.usage, null);
      assert.deepEqual(Object.keys(c.choices[0]), ["index", "text", "logprobs", "finish_reason", "stop_reason"]);
      assert.equal(c.choices[0].finish_reason, i === 6 ? "length" : null);
      assert.equal(typeof c.choices[0].text, "string");
    }
    assert.deepEqual(usage.choices, []);
    assert.deepEqual(usage.usage, { prompt_tokens: 6, total_tokens: 13, completion_tokens: 7 });
  });

  test("chat stream: role chunk with the first token, no usage key unless asked, finish on the last token", async () => {
    const r = await post(sim.url, "/v1/chat/completions", {
      messages: [{ role: "user", content: "hello there" }],
      max_completion_tokens: 4,
      stream: true,
    });
    const chunks = r.data.slice(0, -1).map((d) => JSON.parse(d));
    assert.equal(r.data.at(-1), "[DONE]");
    assert.equal(chunks.length, 5);
    assert.deepEqual(chunks[0].choices[0].delta, { role: "assistant", content: "" });
    assert.match(chunks[0].id, /^chatcmpl-[0-9a-f]{32}$/);
    assert.equal(chunks[0].object, "chat.completion.chunk");
    for (const c of chunks) assert.ok(!("usage" in c));
    for (const c of chunks.slice(1)) assert.deepEqual(Object.keys(c.choices[0].delta), ["content"]);
    assert.equal(chunks[4].choices[0].finish_reason, "length");
    assert.equal(chunks[3].choices[0].finish_reason, null);
  });

  test("continuous_usage_stats: cumulative usage on every chunk (stream_options alone turns usage on)", async () => {
    const r = await post(sim.url, "/v1/completions", {
      prompt: "one two",
      max_tokens: 3,
      stream: true,
      stream_options: { continuous_usage_stats: true },
    });
    const chunks = r.data.slice(0, -1).map((d) => JSON.parse(d));
    assert.deepEqual(
      chunks.map((c) => c.usage.completion_tokens),
      [1, 2, 3, 3],
    );
    assert.deepEqual(chunks.at(-1).choices, []);
  });

  test("non-streaming completion and chat bodies", async () => {
    const c = JSON.parse((await post(sim.url, "/v1/completions", { prompt: "abc", max_tokens: 5 })).body);
    assert.equal(c.object, "text_completion");
    assert.equal(c.choices[0].finish_reason, "length");
    assert.equal(c.usage.completion_tokens, 5);
    assert.equal(c.usage.total_tokens, c.usage.prompt_tokens + 5);
    const h = JSON.parse(
      (await post(sim.url, "/v1/chat/completions", { messages: [{ role: "user", content: "hi" }], max_tokens: 3 }))
        .body,
    );
    assert.equal(h.object, "chat.completion");
    assert.equal(h.choices[0].message.role, "assistant");
    assert.equal(typeof h.choices[0].message.content, "string");
    assert.equal(h.usage.completion_tokens, 3);
  });

  test("text is deterministic per seed", async () => {
    const a = JSON.parse((await post(sim.url, "/v1/completions", { prompt: "x", max_tokens: 20, seed: 42 })).body);
    const b = JSON.parse((await post(sim.url, "/v1/completions", { prompt: "y", max_tokens: 20, seed: 42 })).body);
    const c = JSON.parse((await post(sim.url, "/v1/completions", { prompt: "x", max_tokens: 20, seed: 43 })).body);
    assert.equal(a.choices[0].text, b.choices[0].text);
    assert.notEqual(a.choices[0].text, c.choices[0].text);
  });

  test("stop strings end the output with finish_reason stop and stop_reason set", async () => {
    const full = JSON.parse((await post(sim.url, "/v1/completions", { prompt: "x", max_tokens: 30, seed: 5 })).body);
    const words = full.choices[0].text.trim().split(" ");
    const stopWord = words[10];
    const r = JSON.parse(
      (await post(sim.url, "/v1/completions", { prompt: "x", max_tokens: 30, seed: 5, stop: [` ${stopWord}`] })).body,
    );
    const first = words.indexOf(stopWord);
    assert.equal(r.choices[0].finish_reason, "stop");
    assert.equal(r.choices[0].stop_reason, ` ${stopWord}`);
    assert.equal(r.choices[0].text, ` ${words.slice(0, first).join(" ")}`);
    assert.equal(r.usage.completion_tokens, first + 1);
  });

  test("n > 1: one stream per choice index, usage summed", async () => {
    const r = await post(sim.url, "/v1/completions", {
      prompt: "pair",
      n: 2,
      max_tokens: 4,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = r.data.slice(0, -1).map((d) => JSON.parse(d));
    const usage = chunks.pop();
    assert.equal(chunks.filter((c) => c.choices[0].index === 0).length, 4);
    assert.equal(chunks.filter((c) => c.choices[0].index === 1).length, 4);
    assert.equal(usage.usage.completion_tokens, 8);
  });

  test("errors: vLLM's status codes and error JSON", async () => {
    const shape = (body: string, status: number, type: string) => {
      const e = JSON.parse(body).error;
      assert.deepEqual(Object.keys(e), ["message", "type", "param", "code"]);
      assert.equal(e.code, status);
      assert.equal(e.type, type);
      return e;
    };
    let r = await post(sim.url, "/v1/completions", { model: "nope", prompt: "x" });
    assert.equal(r.status, 404);
    assert.equal(shape(r.body, 404, "NotFoundError").message, "The model `nope` does not exist.");
    r = await post(sim.url, "/v1/completions", null, "{not json");
    assert.equal(r.status, 400);
    shape(r.body, 400, "BadRequestError");
    r = await post(sim.url, "/v1/completions", { prompt: "word ".repeat(40000) });
    assert.equal(r.status, 400);
    assert.match(shape(r.body, 400, "BadRequestError").message, /maximum context length is 32768 tokens/);
    r = await post(sim.url, "/v1/completions", { prompt: "x", max_tokens: 40000 });
    assert.equal(r.status, 400);
    r = await post(sim.url, "/v1/completions", { prompt: "x", stream_options: { include_usage: true } });
    assert.equal(r.status, 400);
    assert.equal(shape(r.body, 400, "BadRequestError").param, "stream_options");
    r = await post(sim.url, "/v1/completions", { prompt: "x", n: 0 });
    assert.equal(r.status, 400);
    r = await post(sim.url, "/v1/chat/completions", { max_tokens: 3 });
    assert.equal(r.status, 400);
    r = await post(sim.url, "/v1/nothing", {});
    assert.equal(r.status, 404);
    assert.deepEqual(JSON.parse(r.body), { detail: "Not Found" });
    const g = await get(sim.url, "/v1/completions");
    assert.equal(g.status, 405);
  });

  test("GET /v1/models, /version, /health, /metrics (both formats)", async () => {
    const m = JSON.parse((await get(sim.url, "/v1/models")).body);
    assert.equal(m.object, "list");
    assert.equal(m.data[0].id, MODEL);
    assert.equal(m.data[0].owned_by, "vllm");
    assert.equal(m.data[0].max_model_len, 32768);
    assert.equal(m.data[0].permission[0].object, "model_permission");
    assert.deepEqual(JSON.parse((await get(sim.url, "/version")).body), { version: "0.11.0" });
    assert.equal((await get(sim.url, "/health")).status, 200);
    const text = await get(sim.url, "/metrics");
    assert.equal(text.type, "text/plain; version=0.0.4; charset=utf-8");
    assert.match(text.body, /^# TYPE vllm:iteration_tokens_total histogram$/m);
    assert.match(text.body, /^# TYPE vllm:prompt_tokens_total counter$/m);
    assert.match(text.body, /^vllm:prompt_tokens_created\{engine="0",model_name="zai-org\/GLM-5"\} /m);
    assert.match(
      text.body,
      /^vllm:request_success_total\{engine="0",finished_reason="abort",model_name="zai-org\/GLM-5"\} /m,
    );
    const om = await get(sim.url, "/metrics", { accept: "application/openmetrics-text" });
    assert.equal(om.type, "application/openmetrics-text; version=1.0.0; charset=utf-8");
    assert.match(om.body, /# EOF\n$/);
    assert.match(om.body, /^# TYPE vllm:prompt_tokens counter$/m);
    assert.ok(sample(om.body, "vllm:prompt_tokens_total") > 0);
  });
});

describe("reasoning, speculative decoding, natural EOS", () => {
  test("--reasoning streams reasoning_content deltas before content", async () => {
    const sim = await startSim({ port: 0, speed: "zero", warmup: false, reasoning: true });
    try {
      const r = await post(sim.url, "/v1/chat/completions", {
        messages: [{ role: "user", content: "think" }],
        max_tokens: 8,
        stream: true,
      });
      const deltas = r.data.slice(1, -1).map((d) => JSON.parse(d).choices[0].delta);
      assert.deepEqual(
        deltas.map((d) => Object.keys(d)[0]),
        [
          "reasoning_content",
          "reasoning_content",
          "reasoning_content",
          "reasoning_content",
          "content",
          "content",
          "content",
          "content",
        ],
      );
    } finally {
      await sim.close();
    }
  });

  test("--spec-tokens: multi-token chunks; usage counts tokens, not chunks", async () => {
    const sim = await startSim({ port: 0, speed: "zero", warmup: false, specTokens: 3, acceptance: 0.8 });
    try {
      const r = await post(sim.url, "/v1/completions", {
        prompt: "spec",
        max_tokens: 100,
        ignore_eos: true,
        stream: true,
        stream_options: { include_usage: true },
      });
      const chunks = r.data.slice(0, -1).map((d) => JSON.parse(d));
      const usage = chunks.pop();
      assert.equal(usage.usage.completion_tokens, 100);
      assert.ok(chunks.length < 100, `${chunks.length} chunks`);
      const words = chunks.map((c) => c.choices[0].text.trim().split(" ").length);
      assert.equal(
        words.reduce((a, b) => a + b, 0),
        100,
      );
      const m = await get(sim.url, "/metrics");
      assert.ok(sample(m.body, "vllm:spec_decode_num_drafts_total") > 0);
    } finally {
      await sim.close();
    }
  });

  test("natural EOS: stops early without ignore_eos, honours ignore_eos and min_tokens", async () => {
    const sim = await startSim({ port: 0, speed: "zero", warmup: false, overrides: { "text.eosMeanTokens": 4 } });
    try {
      const reasons = new Set<string>();
      for (let seed = 0; seed < 10; seed++) {
        const r = JSON.parse((await post(sim.url, "/v1/completions", { prompt: "x", max_tokens: 200, seed })).body);
        reasons.add(r.choices[0].finish_reason);
        if (r.choices[0].finish_reason === "stop") assert.ok(r.usage.completion_tokens < 200);
        const ig = JSON.parse(
          (await post(sim.url, "/v1/completions", { prompt: "x", max_tokens: 50, seed, ignore_eos: true })).body,
        );
        assert.equal(ig.usage.completion_tokens, 50);
        const mt = JSON.parse(
          (await post(sim.url, "/v1/completions", { prompt: "x", max_tokens: 50, seed, min_tokens: 30 })).body,
        );
        assert.ok(mt.usage.completion_tokens >= 30);
      }
      assert.ok(reasons.has("stop"));
    } finally {
      await sim.close();
    }
  });
});

describe("faults", () => {
  test("each injected fault is visible to the client and counted in inferscope_sim_faults_total", async () => {
    const sim = await startSim({
      port: 0,
      speed: "zero",
      warmup: false,
      faults:
        "http500:0.1,http429:0.1,http503:0.1,disconnect:0.1,malformed:0.1,missing-usage:0.1,truncated:0.1,stall:0.1,slow-headers:0.05",
      stallMs: 20,
      slowHeadersMs: 30,
      seed: 9,
    });
    try {
      const seen: Record<string, number> = {};
      const bump = (k: string) => {
        seen[k] = (seen[k] ?? 0) + 1;
      };
      for (let i = 0; i < 80; i++) {
        let r: Awaited<ReturnType<typeof post>>;
        try {
          r = await post(sim.url, "/v1/completions", {
            prompt: "fault",
            max_tokens: 10,
            stream: true,
            stream_options: { include_usage: true },
          });
        } catch {
          bump("disconnect");
          continue;
        }
        if (r.status === 500) bump("http500");
        else if (r.status === 429) {
          bump("http429");
          assert.equal(r.headers["retry-after"], "1");
        } else if (r.status === 503) {
          bump("http503");
          assert.equal(r.headers["retry-after"], "1");
        } else {
          const done = r.data.at(-1) === "[DONE]";
          const parsed = r.data
            .filter((d) => d !== "[DONE]")
            .map((d) => {
              try {
                return JSON.parse(d);
              } catch {
                return null;
              }
            });
          // The server destroys the socket on a disconnect (an error above); a clean end without [DONE] is a truncation.
          if (!done) bump("truncated");
          if (parsed.some((p) => p === null)) bump("malformed");
          if (done && !parsed.some((p) => p && Array.isArray(p.choices) && p.choices.length === 0))
            bump("missing-usage");
        }
      }
      const m = (await get(sim.url, "/metrics")).body;
      for (const kind of ["http500", "http429", "http503", "disconnect", "truncated", "missing-usage"]) {
        assert.equal(sample(m, "inferscope_sim_faults_total", `kind="${kind}"`), seen[kind] ?? 0, kind);
        assert.ok((seen[kind] ?? 0) > 0, `${kind} fired`);
      }
      assert.ok(sample(m, "inferscope_sim_faults_total", 'kind="malformed"') >= (seen.malformed ?? 0));
      assert.ok(sample(m, "inferscope_sim_faults_total", 'kind="stall"') > 0);
    } finally {
      await sim.close();
    }
  });
});
