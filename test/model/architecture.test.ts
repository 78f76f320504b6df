import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { InputError, UsageError } from "../../src/errors.ts";
import { fromHfConfig, paramBreakdown, requireModel } from "../../src/model/architecture.ts";
import { loadModelArg } from "../../src/model/io.ts";
import { kvFormat, moreBitsFraction, recipe } from "../../src/model/quantization.ts";
import { resolve } from "../../src/model/resolve.ts";
import { kvReadPerGpu } from "../../src/model/step.ts";

const fx = (f: string) => new URL(`./fixtures/${f}`, import.meta.url).pathname;
const B = (x: number) => x / 1e9;

test("catalog parameter totals reproduce models.md §1 (derived) to the stated digits", () => {
  const cases: [string, number, number | null][] = [
    ["llama-3.1-8b", 8.03, null],
    ["llama-3.1-70b", 70.6, null],
    ["mixtral-8x7b", 46.7, 12.9],
    ["qwen3-235b-a22b", 235.1, 22.2],
    ["gpt-oss-120b", 116.8, 5.7],
    ["deepseek-v3", 671.0, 37.5],
    ["glm-5", 743.9, 41.8],
  ];
  for (const [name, total, active] of cases) {
    const p = paramBreakdown(requireModel(name));
    const digits = total < 10 ? 2 : 1;
    assert.equal(B(p.total).toFixed(digits), total.toFixed(digits), `${name} total`);
    if (active !== null) assert.ok(Math.abs(B(p.active) - active) <= 0.06, `${name} active ${B(p.active)}`);
  }
});

test("GLM-5 per-layer breakdown matches models.md §1.2", () => {
  const p = paramBreakdown(requireModel("glm-5"));
  assert.equal((p.attentionPerLayer / 1e6).toFixed(1), "165.0");
  assert.equal((p.indexerPerLayer / 1e6).toFixed(1), "9.4");
  assert.equal(B((p.attentionPerLayer + p.indexerPerLayer) * 78).toFixed(2), "13.60");
  assert.equal(B(p.expertParams).toFixed(4), "0.0377");
  assert.equal(B(p.denseLayerCount * p.denseMlpPerLayer).toFixed(2), "0.68");
  assert.equal(B(p.lmHead).toFixed(3), "0.952");
  assert.equal(p.denseLayerCount, 3);
  assert.equal(p.moeLayerCount, 75);
});

test("config.json reader: GLM-5 (MLA + DSA + shared expert + leading dense layers + ModelOpt NVFP4)", () => {
  const a = loadModelArg(fx("glm5-config.json"));
  assert.ok(typeof a !== "string");
  assert.equal(a.attention, "mla");
  assert.deepEqual(a.mla, { qLoraRank: 2048, kvLoraRank: 512, qkNopeHeadDim: 192, qkRopeHeadDim: 64, vHeadDim: 256 });
  assert.deepEqual(a.indexer, { heads: 32, headDim: 128, topk: 2048 });
  assert.equal(a.moe?.denseLayers, 3);
  assert.equal(a.moe?.shared, 1);
  assert.equal(a.mtpLayers, 1);
  assert.equal(a.declaredQuant?.recipe, "nvfp4");
  assert.equal(B(paramBreakdown(a).total).toFixed(1), "743.9");
  assert.match(a.source, /glm5-config\.json/);
});

test("config.json reader: gpt-oss sliding windows and MXFP4", () => {
  const a = fromHfConfig(JSON.parse(readFileSync(fx("gpt-oss-120b-config.json"), "utf8")), "gpt-oss.json");
  assert.deepEqual(a.slidingWindow, { window: 128, layers: 18 });
  assert.equal(a.moe?.experts, 128);
  assert.equal(a.moe?.topk, 4);
  assert.equal(a.declaredQuant?.recipe, "mxfp4");
  // Windowed layers cap the KV read at 128 tokens.
  const r = resolve({ model: a, gpu: "h100-sxm" });
  const full = kvReadPerGpu(r, 4096).bytesPerSeq;
  assert.equal(full, (18 * 4096 + 18 * 128) * 2 * 8 * 64 * 2);
});

test("catalog models default to their official checkpoint's precision, as a config.json does; --quant wins", () => {
  // A user who names the model and not its precision gets what `--model deepseek-r1` downloads (FP8 blocks),
  // not BF16 at twice the bytes; gpt-oss ships MXFP4 experts.
  for (const [name, want] of [
    ["deepseek-r1", "fp8-block"],
    ["deepseek-v3.2", "fp8-block"],
    ["gpt-oss-20b", "mxfp4"],
    ["gpt-oss-120b", "mxfp4"],
    ["qwen3-8b", "bf16"],
  ] as const) {
    assert.equal(resolve({ model: name, gpu: "h200" }).recipe.name, want, name);
  }
  assert.equal(resolve({ model: "deepseek-r1", gpu: "h200", quant: "nvfp4" }).recipe.name, "nvfp4");
  // The same checkpoint read from its config.json gives the same recipe.
  const dsv3 = fromHfConfig(
    {
      ...JSON.parse(readFileSync(fx("gpt-oss-120b-config.json"), "utf8")),
      quantization_config: { quant_method: "fp8", weight_block_size: [128, 128] },
    },
    "fp8.json",
  );
  assert.equal(dsv3.declaredQuant?.recipe, "fp8-block");
});

test("a config.json missing a needed key names the key and the file", () => {
  assert.throws(
    () => loadModelArg(fx("qwen3-8b-missing-hidden.json")),
    (e: unknown) =>
      e instanceof InputError && /qwen3-8b-missing-hidden\.json/.test(e.message) && /"hidden_size"/.test(e.message),
  );
  assert.throws(() => loadModelArg("nope/config.json"), /no such file/);
});

test("unknown model names get a did-you-mean list", () => {
  assert.throws(
    () => requireModel("glm5.x"),
    (e: unknown) => e instanceof UsageError && /did you mean: .*glm/.test(e.message),
  );
  assert.throws(() => requireModel("lama-3.1-8b"), /did you mean: llama-3\.1-8b/);
});

test("KV bytes per token reproduce models.md §3", () => {
  const kib = (name: string, dtype = "auto") => {
    const a = requireModel(name);
    const r = resolve({ model: a, gpu: "h100-sxm", kvDtype: dtype });
    return kvReadPerGpu(r, 1).bytesPerTokenAllLayers / 1024;
  };
  assert.equal(kib("llama-3.1-8b"), 128);
  assert.equal(kib("llama-3.1-70b"), 320);
  assert.equal(kib("qwen3-235b-a22b"), 188);
  assert.equal(kib("deepseek-v3").toFixed(1), "68.6");
  assert.equal(kib("deepseek-v3", "fp8").toFixed(1), "39.1");
  // GLM-5: 87.8 KiB latent + 10.1 KiB indexer; 60.0 KiB with fp8_ds_mla + indexer.
  assert.equal(((78 * 1152) / 1024).toFixed(1), "87.8");
  assert.equal(((78 * 132) / 1024).toFixed(1), "10.1");
  assert.equal(kib("glm-5"), (78 * (1152 + 132)) / 1024);
  assert.equal(kib("glm-5", "fp8").toFixed(1), "60.0");
  assert.equal(kvFormat("fp8", requireModel("glm-5")).mlaBytesPerLayer, 656);
});

test("GLM-5 DSA read per GPU per step at batch 1 (fp8_ds_mla) matches models.md §3", () => {
  const r = resolve({ model: "glm-5", gpu: "rtx-pro-6000", tp: 8, gpus: 8, kvDtype: "fp8" });
  // models.md counts 1K = 1000 tokens here.
  const mb = (ctx: number) => kvReadPerGpu(r, ctx).bytesPerSeq / 1e6;
  assert.ok(Math.abs(mb(1000) - 62) <= 1, String(mb(1000)));
  assert.ok(Math.abs(mb(8000) - 187) <= 1, String(mb(8000)));
  assert.ok(Math.abs(mb(32000) - 434) <= 1, String(mb(32000)));
  assert.equal((mb(128000) / 1000).toFixed(2), "1.42");
  assert.equal((mb(8000) / 1458).toFixed(2), "0.13");
  assert.equal((mb(128000) / 1458).toFixed(2), "0.98");
});

test("GGUF k-quant mix: Llama-2-7B Q4_K_M streams ≈ 4.0 GB (validation V4)", () => {
  const a = requireModel("llama-2-7b");
  assert.equal(moreBitsFraction(32), 0.5);
  const rec = recipe("q4_k_m", a);
  const p = paramBreakdown(a);
  const bytes =
    (p.attentionPerLayer * a.layers * rec.groups.attention.bpw +
      p.denseMlpPerLayer * a.layers * rec.groups.denseMlp.bpw +
      p.lmHead * rec.groups.lmHead.bpw) /
    8;
  assert.equal((bytes / 1e9).toFixed(1), "4.0");
  assert.throws(() => recipe("q4_k_n", a), /did you mean: .*q4_k_m/);
});
