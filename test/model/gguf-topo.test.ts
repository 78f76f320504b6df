import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { InputError } from "../../src/errors.ts";
import { buildGguf, parseGgufHeader, tensorGroup } from "../../src/model/gguf.ts";
import { loadGguf, loadTopo } from "../../src/model/io.ts";
import { predict } from "../../src/model/predict.ts";
import { interconnectFromTopo, parseTopo } from "../../src/model/topology.ts";

const fx = (f: string) => new URL(`./fixtures/${f}`, import.meta.url).pathname;

/** A Llama-2-7B-shaped GGUF header with llama.cpp's Q4_K_M tensor types (no tensor data). */
function llamaQ4km(): Buffer {
  const L = 32;
  const h = 4096;
  const ffn = 11008;
  const tensors: { name: string; dims: number[]; type: number }[] = [
    { name: "token_embd.weight", dims: [h, 32000], type: 12 },
    { name: "output_norm.weight", dims: [h], type: 0 },
    { name: "output.weight", dims: [h, 32000], type: 14 },
  ];
  for (let i = 0; i < L; i++) {
    const more = i < L / 8 || i >= (7 * L) / 8 || (i - L / 8) % 3 === 2;
    tensors.push(
      { name: `blk.${i}.attn_norm.weight`, dims: [h], type: 0 },
      { name: `blk.${i}.attn_q.weight`, dims: [h, h], type: 12 },
      { name: `blk.${i}.attn_k.weight`, dims: [h, h], type: 12 },
      { name: `blk.${i}.attn_v.weight`, dims: [h, h], type: more ? 14 : 12 },
      { name: `blk.${i}.attn_output.weight`, dims: [h, h], type: 12 },
      { name: `blk.${i}.ffn_norm.weight`, dims: [h], type: 0 },
      { name: `blk.${i}.ffn_gate.weight`, dims: [h, ffn], type: 12 },
      { name: `blk.${i}.ffn_up.weight`, dims: [h, ffn], type: 12 },
      { name: `blk.${i}.ffn_down.weight`, dims: [ffn, h], type: more ? 14 : 12 },
    );
  }
  return buildGguf(
    {
      "general.architecture": "llama",
      "general.name": "LLaMA v2 7B (test header)",
      "llama.block_count": L,
      "llama.embedding_length": h,
      "llama.feed_forward_length": ffn,
      "llama.attention.head_count": 32,
      "llama.attention.head_count_kv": 32,
      "llama.rope.dimension_count": 128,
      "tokenizer.ggml.tokens": ["<unk>", "<s>", "</s>"],
    },
    tensors,
  );
}

test("GGUF header: architecture keys and every tensor's type; bytes match the Q4_K_M recipe", () => {
  const dir = mkdtempSync(join(tmpdir(), "inferscope-gguf-"));
  try {
    const file = join(dir, "llama-2-7b.Q4_K_M.gguf");
    writeFileSync(file, llamaQ4km());
    const a = loadGguf(file);
    assert.equal(a.layers, 32);
    assert.equal(a.hidden, 4096);
    assert.equal(a.vocab, 32000);
    assert.equal(a.kvHeads, 32);
    assert.equal(a.ggufBytes?.typeCounts.q6_k, 33);
    const viaFile = predict({ model: a, gpu: "h100-pcie", engine: "llamacpp" });
    const viaRecipe = predict({ model: "llama-2-7b", quant: "q4_k_m", gpu: "h100-pcie", engine: "llamacpp" });
    assert.equal(viaFile.input.quant, "gguf");
    assert.equal(
      (viaFile.decode.weightBytesPerGpu / 1e9).toFixed(2),
      (viaRecipe.decode.weightBytesPerGpu / 1e9).toFixed(2),
    );
    assert.match(viaFile.quantization.description, /GGUF header/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("GGUF errors: bad magic, truncated header, missing keys", () => {
  assert.throws(() => parseGgufHeader(Buffer.from("GGML0000000000000000000000"), "x.gguf"), /x\.gguf: not a GGUF file/);
  const dir = mkdtempSync(join(tmpdir(), "inferscope-gguf-"));
  try {
    const cut = join(dir, "cut.gguf");
    writeFileSync(cut, llamaQ4km().subarray(0, 900));
    assert.throws(() => loadGguf(cut), /cut\.gguf: truncated GGUF header/);
    const nokey = join(dir, "nokey.gguf");
    writeFileSync(nokey, buildGguf({ "general.architecture": "llama", "llama.block_count": 2 }, []));
    assert.throws(
      () => loadGguf(nokey),
      (e: unknown) => e instanceof InputError && /nokey\.gguf: missing key "llama\.embedding_length"/.test(e.message),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("GGUF tensor names map to groups (experts, shared experts, router, attention, dense MLP)", () => {
  assert.equal(tensorGroup("blk.3.ffn_gate_exps.weight"), "experts");
  assert.equal(tensorGroup("blk.3.ffn_down_shexp.weight"), "shared");
  assert.equal(tensorGroup("blk.3.ffn_gate_inp.weight"), "router");
  assert.equal(tensorGroup("blk.0.ffn_up.weight"), "denseMlp");
  assert.equal(tensorGroup("blk.9.attn_kv_a_mqa.weight"), "attention");
  assert.equal(tensorGroup("blk.9.attn_norm.weight"), "other");
  assert.equal(tensorGroup("output.weight"), "lmHead");
});

test("nvidia-smi topo -m: 8 PCIe GPUs across two sockets, and 4 NVLink GPUs", () => {
  const t = loadTopo(fx("topo-pcie-8gpu.txt"));
  assert.equal(t.gpus.length, 8);
  assert.equal(t.matrix[0][1], "PIX");
  assert.equal(t.matrix[0][4], "SYS");
  const link = interconnectFromTopo(t, 8, 5);
  assert.equal(link.kind, "pcie");
  assert.equal(link.allPairsNvlink, false);
  assert.equal(link.crossSocket, true);
  assert.match(link.label, /worst path SYS, cross-socket/);
  // GPU0 and GPU1 share a PCIe switch: no socket crossing within that pair.
  assert.equal(interconnectFromTopo(t, 2, 5).crossSocket, false);
  const p = predict({ model: "glm-5", quant: "nvfp4", gpu: "rtx-pro-6000", tp: 8, gpus: 8, interconnect: link });
  assert.equal(p.collectives.customAllReduce.used, false);
  assert.deepEqual(p.collectives.protocolMenu, ["LL", "Simple"]);
  const nv = parseTopo(readFileSync(fx("topo-nvlink-4gpu.txt"), "utf8"));
  assert.equal(nv.links[0].nvlinks, 18);
  assert.equal(interconnectFromTopo(nv, 4).allPairsNvlink, true);
  const p4 = predict({
    model: "llama-3.1-70b",
    gpu: "h100-sxm",
    tp: 4,
    gpus: 4,
    interconnect: interconnectFromTopo(nv, 4),
  });
  assert.equal(p4.collectives.implementation, "vllm-custom");
});

test("topo errors carry file:line:column", () => {
  assert.throws(
    () => loadTopo(fx("topo-bad.txt")),
    /topo-bad\.txt:3:\d+: unknown link type "PXQ" between GPU1 and GPU0/,
  );
  assert.throws(
    () => parseTopo("hello\n", "t.txt"),
    /t\.txt:1:1: no GPU matrix found: no header line with GPU0 columns/,
  );
});
