// vLLM's /tokenize and /detokenize on a real sim process: shapes, errors, and agreement with the
// usage.prompt_tokens the same prompt gets on /v1/completions and /v1/chat/completions.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Rng } from "../../src/sim/rng.ts";
import { maxBodyBytes } from "../../src/sim/server.ts";
import { detokenize, tokenize, VOCAB_SIZE } from "../../src/sim/text.ts";
import { type SpawnedSim, spawnSim } from "../helpers/sim.ts";
import { post } from "./util.ts";

const MODEL = "zai-org/GLM-5";

/** Random text over letters, digits, spaces, punctuation, non-ASCII and emoji (UTF-16 pairs). */
function randomText(rng: Rng, len: number): string {
  const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789      .,;:!?'\"-()[]{}\n\té日本語ü";
  let s = "";
  for (let i = 0; i < len; i++) {
    const u = rng.next();
    s += u < 0.01 ? "😀" : alphabet[Math.floor(rng.next() * alphabet.length)];
  }
  return s;
}

const json = async (url: string, path: string, body: unknown) => {
  const r = await post(url, path, body);
  return { status: r.status, body: JSON.parse(r.body) };
};

test("the tokenizer is invertible: detokenize(tokenize(text)) === text, ids within the vocabulary", () => {
  const rng = new Rng(7);
  for (let i = 0; i < 200; i++) {
    const text = randomText(rng, 1 + Math.floor(rng.next() * 300));
    const ids = tokenize(text);
    assert.equal(detokenize(ids), text);
    for (const id of ids) assert.ok(id < VOCAB_SIZE);
  }
  // Word pieces: a leading space plus up to 4 ASCII letters/digits, or one other code unit.
  assert.equal(tokenize("Hello, world! internationalization").length, 11);
  assert.equal(tokenize("日本語").length, 3);
});

describe("/tokenize and /detokenize on a sim process", () => {
  let sim: SpawnedSim;
  before(async () => {
    sim = await spawnSim(["--speed", "zero", "--set", "text.eosMeanTokens=20"]);
  });
  after(() => sim.stop());

  test("completion prompt: vLLM's response shape, count == usage.prompt_tokens for random texts", async () => {
    const models = (await (await fetch(`${sim.url}/v1/models`)).json()) as { data: [{ max_model_len: number }] };
    const rng = new Rng(11);
    for (let i = 0; i < 25; i++) {
      const prompt = randomText(rng, 1 + Math.floor(rng.next() * 2000));
      const t = await json(sim.url, "/tokenize", { model: MODEL, prompt });
      assert.equal(t.status, 200);
      assert.deepEqual(Object.keys(t.body), ["count", "max_model_len", "tokens", "token_strs"]);
      assert.equal(t.body.count, t.body.tokens.length);
      assert.equal(t.body.max_model_len, models.data[0].max_model_len);
      assert.equal(t.body.token_strs, null);
      const c = await json(sim.url, "/v1/completions", { model: MODEL, prompt, max_tokens: 2, ignore_eos: true });
      assert.equal(c.status, 200);
      assert.equal(c.body.usage.prompt_tokens, t.body.count, `prompt ${i}`);
      assert.equal(c.body.usage.completion_tokens, 2);
      // The ids as a prompt are the same prompt.
      const ids = await json(sim.url, "/v1/completions", { prompt: t.body.tokens, max_tokens: 1 });
      assert.equal(ids.body.usage.prompt_tokens, t.body.count);
      const d = await json(sim.url, "/detokenize", { model: MODEL, tokens: t.body.tokens });
      assert.deepEqual(d, { status: 200, body: { prompt } });
    }
  });

  test("chat messages: count == usage.prompt_tokens; add_generation_prompt adds the assistant prefix", async () => {
    const rng = new Rng(12);
    for (let i = 0; i < 15; i++) {
      const messages = Array.from({ length: 1 + Math.floor(rng.next() * 5) }, (_, k) => ({
        role: k === 0 ? "system" : k % 2 ? "user" : "assistant",
        content: randomText(rng, 1 + Math.floor(rng.next() * 500)),
      }));
      const t = await json(sim.url, "/tokenize", { model: MODEL, messages });
      assert.equal(t.status, 200);
      const c = await json(sim.url, "/v1/chat/completions", { model: MODEL, messages, max_tokens: 2 });
      assert.equal(c.status, 200);
      assert.equal(c.body.usage.prompt_tokens, t.body.count, `conversation ${i}`);
      const s = await post(sim.url, "/v1/chat/completions", {
        messages,
        max_tokens: 1,
        stream: true,
        stream_options: { include_usage: true },
      });
      assert.equal(JSON.parse(s.data.at(-2)!).usage.prompt_tokens, t.body.count);
      const bare = await json(sim.url, "/tokenize", { messages, add_generation_prompt: false });
      assert.equal(bare.body.count, t.body.count - 4);
    }
    const strs = await json(sim.url, "/tokenize", { prompt: "Hello world", return_token_strs: true });
    assert.deepEqual(strs.body.token_strs, ["Hell", "o", " worl", "d"]);
  });

  test("errors as vLLM returns them", async () => {
    const err =
      (status: number, type: string, param: string | null, message: RegExp) =>
      (r: {
        status: number;
        body: { error: { message: string; type: string; param: string | null; code: number } };
      }) => {
        assert.equal(r.status, status);
        assert.equal(r.body.error.type, type);
        assert.equal(r.body.error.code, status);
        assert.equal(r.body.error.param, param);
        assert.match(r.body.error.message, message);
      };
    err(
      404,
      "NotFoundError",
      "model",
      /The model `nope` does not exist\./,
    )(await json(sim.url, "/tokenize", { model: "nope", prompt: "x" }));
    err(400, "BadRequestError", "prompt", /Field required/)(await json(sim.url, "/tokenize", {}));
    err(
      400,
      "BadRequestError",
      null,
      /Cannot set both/,
    )(
      await json(sim.url, "/tokenize", {
        messages: [{ role: "user", content: "x" }],
        add_generation_prompt: true,
        continue_final_message: true,
      }),
    );
    err(400, "BadRequestError", "tokens", /Field required/)(await json(sim.url, "/detokenize", {}));
    err(
      400,
      "BadRequestError",
      "tokens",
      new RegExp(`Token id ${VOCAB_SIZE} is out of vocabulary`),
    )(await json(sim.url, "/detokenize", { tokens: [1, VOCAB_SIZE] }));
    err(
      400,
      "BadRequestError",
      "prompt",
      /Token id -1 is out of vocabulary/,
    )(await json(sim.url, "/v1/completions", { prompt: [5, -1], max_tokens: 1 }));
    const wrong = await fetch(`${sim.url}/tokenize`);
    assert.equal(wrong.status, 405);
  });

  test("wrong types are vLLM's 400 naming the field, never a 500 (issue 42)", async () => {
    const cases: Array<[string, unknown, string, RegExp]> = [
      ["/tokenize", { messages: [null] }, "messages", /^messages\.0: Input should be a valid dictionary/],
      ["/tokenize", { messages: [1, 2] }, "messages", /^messages\.0: Input should be a valid dictionary/],
      [
        "/tokenize",
        { messages: [{ role: 1, content: "x" }] },
        "messages",
        /^messages\.0\.role: Input should be a valid string/,
      ],
      ["/tokenize", { messages: [{ role: "user", content: 5 }] }, "messages", /^messages\.0\.content: /],
      ["/tokenize", { messages: [{ role: "user", content: [1] }] }, "messages", /^messages\.0\.content\.0: /],
      [
        "/tokenize",
        { messages: [{ role: "user", content: [{ type: "text", text: 5 }] }] },
        "messages",
        /^messages\.0\.content\.0\.text: Input should be a valid string/,
      ],
      ["/tokenize", { prompt: "x", return_token_strs: "yes" }, "return_token_strs", /valid boolean/],
      ["/tokenize", { prompt: "x", add_special_tokens: 3 }, "add_special_tokens", /valid boolean/],
      ["/tokenize", { messages: [], add_generation_prompt: "x" }, "add_generation_prompt", /valid boolean/],
      ["/v1/chat/completions", { messages: [null], max_tokens: 1 }, "messages", /^messages\.0: /],
      [
        "/v1/chat/completions",
        { messages: "hi", max_tokens: 1 },
        "messages",
        /^messages: Input should be a valid list/,
      ],
      [
        "/v1/chat/completions",
        { messages: [{ role: "user", content: "x" }], continue_final_message: 1, max_tokens: 1 },
        "continue_final_message",
        /valid boolean/,
      ],
    ];
    for (const [path, body, param, msg] of cases) {
      const r = await json(sim.url, path, body);
      assert.equal(r.status, 400, `${path} ${JSON.stringify(body)}: ${JSON.stringify(r.body)}`);
      assert.equal(r.body.error.param, param, JSON.stringify(body));
      assert.match(r.body.error.message, msg, JSON.stringify(body));
    }
  });

  test("a body past the sim's limit is a 413 at once, not a huge answer (was: 60 MB → 283 MB, 17 s block)", async () => {
    const models = (await (await fetch(`${sim.url}/v1/models`)).json()) as { data: [{ max_model_len: number }] };
    const limit = maxBodyBytes(models.data[0].max_model_len);
    assert.equal(limit, 2 * 1024 * 1024);
    for (const path of ["/tokenize", "/v1/completions"]) {
      const r = await post(sim.url, path, { prompt: "x ".repeat(limit / 2) });
      assert.equal(r.status, 413, path);
      const e = JSON.parse(r.body).error;
      assert.equal(e.code, 413);
      assert.match(
        e.message,
        /Request body is larger than 2097152 bytes \(64 bytes per token of max_model_len 32768\)/,
      );
    }
    // Just under it is read and answered as before (JSON whitespace: the bytes count, not the tokens).
    const under = await post(sim.url, "/tokenize", null, `{"prompt": "hello"${" ".repeat(limit - 100)}}`);
    assert.equal(under.status, 200);
    assert.equal(JSON.parse(under.body).count, 2);
    // And the sim still serves after refusing.
    assert.equal((await json(sim.url, "/tokenize", { prompt: "hello" })).body.count, 2);
  });

  test("ignore_eos runs to max_tokens on a model that stops on its own (mean 20 tokens here)", async () => {
    const free = await json(sim.url, "/v1/completions", { prompt: "go", max_tokens: 300, seed: 3 });
    assert.equal(free.body.choices[0].finish_reason, "stop");
    assert.ok(free.body.usage.completion_tokens < 300);
    const c = await json(sim.url, "/v1/completions", { prompt: "go", max_tokens: 300, seed: 3, ignore_eos: true });
    assert.equal(c.body.usage.completion_tokens, 300);
    assert.equal(c.body.choices[0].finish_reason, "length");
  });
});
