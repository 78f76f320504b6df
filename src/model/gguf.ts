// A small GGUF header reader (v1–v3): metadata key/values and every tensor's name, shape and ggml type, then an
// Architecture with per-group bytes from the real tensor types. Pure: parses a Buffer holding the file's start.
import { InputError } from "../errors.ts";
import type { Architecture, GgufGroupBytes } from "./architecture.ts";
import { GGML_TYPES, ggmlTypeBpw } from "./quantization.ts";

/** Thrown when the buffer ends before the header does; the reader retries with more bytes. */
export class GgufNeedMore extends Error {}

export interface GgufTensor {
  name: string;
  dims: number[];
  type: number;
  typeName: string;
  elements: number;
  bytes: number;
}

export interface GgufHeader {
  version: number;
  metadata: Record<string, unknown>;
  tensors: GgufTensor[];
}

const MAGIC = 0x46554747; // "GGUF" little-endian

export function parseGgufHeader(buf: Buffer, file = "model.gguf"): GgufHeader {
  let off = 0;
  const need = (n: number) => {
    if (off + n > buf.length) throw new GgufNeedMore();
  };
  const u32 = () => {
    need(4);
    const v = buf.readUInt32LE(off);
    off += 4;
    return v;
  };
  const u64 = () => {
    need(8);
    const v = buf.readBigUInt64LE(off);
    off += 8;
    if (v > BigInt(Number.MAX_SAFE_INTEGER))
      throw new InputError(`${file}: implausible 64-bit count ${v} at byte ${off - 8}`);
    return Number(v);
  };
  if (buf.length < 4) throw new GgufNeedMore();
  if (buf.readUInt32LE(0) !== MAGIC) throw new InputError(`${file}: not a GGUF file (magic bytes are not "GGUF")`);
  off = 4;
  const version = u32();
  if (version < 1 || version > 3) throw new InputError(`${file}: unsupported GGUF version ${version}`);
  const count = version === 1 ? u32 : u64;
  const nTensors = count();
  const nKv = count();
  const str = () => {
    const len = count();
    need(len);
    const s = buf.toString("utf8", off, off + len);
    off += len;
    return s;
  };
  const SIZES: Record<number, number> = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
  const scalar = (t: number): unknown => {
    const sz = SIZES[t];
    if (sz === undefined) throw new InputError(`${file}: unknown GGUF value type ${t} at byte ${off}`);
    need(sz);
    let v: unknown;
    switch (t) {
      case 0:
        v = buf.readUInt8(off);
        break;
      case 1:
        v = buf.readInt8(off);
        break;
      case 2:
        v = buf.readUInt16LE(off);
        break;
      case 3:
        v = buf.readInt16LE(off);
        break;
      case 4:
        v = buf.readUInt32LE(off);
        break;
      case 5:
        v = buf.readInt32LE(off);
        break;
      case 6:
        v = buf.readFloatLE(off);
        break;
      case 7:
        v = buf.readUInt8(off) !== 0;
        break;
      case 10:
        v = Number(buf.readBigUInt64LE(off));
        break;
      case 11:
        v = Number(buf.readBigInt64LE(off));
        break;
      case 12:
        v = buf.readDoubleLE(off);
        break;
    }
    off += sz;
    return v;
  };
  const value = (t: number): unknown => {
    if (t === 8) return str();
    if (t === 9) {
      const et = u32();
      const n = count();
      // Keep short arrays; long ones (tokenizer vocabularies) are skipped and remembered by length.
      if (et === 8) {
        const keep: string[] = [];
        for (let i = 0; i < n; i++) {
          const s = str();
          if (i < 16) keep.push(s);
        }
        return { arrayOf: "string", length: n, head: keep };
      }
      const sz = SIZES[et];
      if (sz === undefined) throw new InputError(`${file}: unknown GGUF array element type ${et}`);
      if (n > 4096) {
        need(n * sz);
        off += n * sz;
        return { arrayOf: et, length: n };
      }
      const out: unknown[] = [];
      for (let i = 0; i < n; i++) out.push(scalar(et));
      return out;
    }
    return scalar(t);
  };
  const metadata: Record<string, unknown> = {};
  for (let i = 0; i < nKv; i++) {
    const key = str();
    const t = u32();
    metadata[key] = value(t);
  }
  const tensors: GgufTensor[] = [];
  for (let i = 0; i < nTensors; i++) {
    const name = str();
    const nd = u32();
    if (nd > 8) throw new InputError(`${file}: tensor "${name}" has ${nd} dimensions`);
    const dims: number[] = [];
    for (let d = 0; d < nd; d++) dims.push(u64());
    const type = u32();
    u64(); // data offset
    const elements = dims.reduce((a, b) => a * b, 1);
    const bpw = ggmlTypeBpw(type);
    if (bpw === undefined) throw new InputError(`${file}: tensor "${name}" has unknown ggml type ${type}`);
    tensors.push({
      name,
      dims,
      type,
      typeName: GGML_TYPES[type] ?? String(type),
      elements,
      bytes: (elements * bpw) / 8,
    });
  }
  return { version, metadata, tensors };
}

type Group = keyof GgufGroupBytes["params"] | "other";

export function tensorGroup(name: string): Group {
  if (name === "token_embd.weight") return "embedding";
  if (name === "output.weight") return "lmHead";
  if (!name.startsWith("blk.")) return "other";
  if (/norm|\.bias$|sinks/.test(name)) return "other";
  if (/ffn_gate_inp|exp_probs_b/.test(name)) return "router";
  if (/_exps\./.test(name)) return "experts";
  if (/_shexp\./.test(name)) return "shared";
  if (/\.ffn_(gate|up|down)(\.|_)/.test(name) || /\.ffn_(gate|up|down)\.weight$/.test(name)) return "denseMlp";
  if (/\.(attn_|indexer)/.test(name)) return "attention";
  return "other";
}

/** Architecture from GGUF metadata; group bytes from the tensors themselves. */
export function ggufToArchitecture(h: GgufHeader, file = "model.gguf"): Architecture {
  const md = h.metadata;
  const arch = md["general.architecture"];
  if (typeof arch !== "string") throw new InputError(`${file}: missing key "general.architecture"`);
  const k = (s: string) => `${arch}.${s}`;
  const num = (key: string, fallback?: number): number => {
    const v = md[k(key)];
    if (typeof v === "number") return v;
    if (Array.isArray(v) && typeof v[0] === "number") return Math.max(...(v as number[]));
    if (fallback !== undefined) return fallback;
    throw new InputError(`${file}: missing key "${k(key)}" (needed for the decode model)`);
  };
  const opt = (key: string): number | undefined => {
    const v = md[k(key)];
    if (typeof v === "number") return v;
    if (Array.isArray(v) && typeof v[0] === "number") return Math.max(...(v as number[]));
    return undefined;
  };
  const layers = num("block_count");
  const hidden = num("embedding_length");
  const heads = num("attention.head_count");
  const kvHeads = num("attention.head_count_kv", heads);
  const headDim = opt("attention.key_length") ?? Math.floor(hidden / heads);
  const embd = h.tensors.find((t) => t.name === "token_embd.weight");
  const tokens = md["tokenizer.ggml.tokens"] as { length?: number } | undefined;
  const vocab = opt("vocab_size") ?? embd?.dims[1] ?? tokens?.length;
  if (!vocab)
    throw new InputError(
      `${file}: cannot find the vocabulary size (no ${k("vocab_size")}, token_embd.weight or tokenizer.ggml.tokens)`,
    );
  const experts = opt("expert_count");
  const kvLora = opt("attention.kv_lora_rank");
  const ropeDim = opt("rope.dimension_count") ?? headDim;
  const groups: GgufGroupBytes = {
    attention: 0,
    denseMlp: 0,
    router: 0,
    shared: 0,
    experts: 0,
    embedding: 0,
    lmHead: 0,
    other: 0,
    params: { attention: 0, denseMlp: 0, router: 0, shared: 0, experts: 0, embedding: 0, lmHead: 0 },
    typeCounts: {},
    bpwOverall: 0,
  };
  let totalBytes = 0;
  let totalEl = 0;
  for (const t of h.tensors) {
    const gname = tensorGroup(t.name);
    groups[gname] += t.bytes;
    if (gname !== "other") groups.params[gname] += t.elements;
    groups.typeCounts[t.typeName] = (groups.typeCounts[t.typeName] ?? 0) + 1;
    totalBytes += t.bytes;
    totalEl += t.elements;
  }
  const tied = !h.tensors.some((t) => t.name === "output.weight");
  if (tied) {
    groups.lmHead = groups.embedding;
    groups.params.lmHead = groups.params.embedding;
  }
  groups.bpwOverall = totalEl ? (totalBytes * 8) / totalEl : 0;
  const expertFfn = opt("expert_feed_forward_length");
  const ffn = opt("feed_forward_length") ?? expertFfn;
  if (ffn === undefined) throw new InputError(`${file}: missing key "${k("feed_forward_length")}"`);
  const swa = opt("attention.sliding_window");
  return {
    name: typeof md["general.name"] === "string" ? (md["general.name"] as string) : file,
    source: `GGUF header: ${file} (v${h.version}, ${h.tensors.length} tensors)`,
    layers,
    hidden,
    vocab,
    tiedEmbeddings: tied,
    heads,
    kvHeads: kvLora ? heads : kvHeads,
    headDim,
    attention: kvLora ? "mla" : "gqa",
    mla: kvLora
      ? {
          qLoraRank: opt("attention.q_lora_rank") ?? null,
          kvLoraRank: kvLora,
          qkNopeHeadDim: headDim - ropeDim,
          qkRopeHeadDim: ropeDim,
          vHeadDim: opt("attention.value_length") ?? headDim - ropeDim,
        }
      : undefined,
    slidingWindow: swa ? { window: swa, layers: Math.floor(layers / 2) } : undefined,
    qkNorm: h.tensors.some((t) => /attn_q_norm/.test(t.name)),
    ffn,
    moe:
      experts && experts > 1
        ? {
            experts,
            topk: num("expert_used_count"),
            shared: opt("expert_shared_count") ?? (h.tensors.some((t) => /_shexp\./.test(t.name)) ? 1 : 0),
            expertFfn: expertFfn ?? ffn,
            sharedFfn: expertFfn ?? ffn,
            denseLayers: opt("leading_dense_block_count") ?? 0,
          }
        : undefined,
    mtpLayers: opt("nextn_predict_layers") ?? 0,
    dtype: "gguf",
    ggufBytes: groups,
  };
}

/** Writes a minimal GGUF (v3) for tests and fixtures: metadata scalars/strings and tensor infos (no data). */
export function buildGguf(
  metadata: Record<string, number | string | string[]>,
  tensors: { name: string; dims: number[]; type: number }[],
): Buffer {
  const parts: Buffer[] = [];
  const u32 = (v: number) => {
    const b = Buffer.alloc(4);
    b.writeUInt32LE(v);
    parts.push(b);
  };
  const u64 = (v: number) => {
    const b = Buffer.alloc(8);
    b.writeBigUInt64LE(BigInt(v));
    parts.push(b);
  };
  const str = (s: string) => {
    const b = Buffer.from(s, "utf8");
    u64(b.length);
    parts.push(b);
  };
  u32(MAGIC);
  u32(3);
  u64(tensors.length);
  u64(Object.keys(metadata).length);
  for (const [key, v] of Object.entries(metadata)) {
    str(key);
    if (typeof v === "string") {
      u32(8);
      str(v);
    } else if (Array.isArray(v)) {
      u32(9);
      u32(8);
      u64(v.length);
      for (const s of v) str(s);
    } else if (Number.isInteger(v)) {
      u32(4);
      u32(v);
    } else {
      u32(6);
      const b = Buffer.alloc(4);
      b.writeFloatLE(v);
      parts.push(b);
    }
  }
  let offset = 0;
  for (const t of tensors) {
    str(t.name);
    u32(t.dims.length);
    for (const d of t.dims) u64(d);
    u32(t.type);
    u64(offset);
    offset += 32;
  }
  return Buffer.concat(parts);
}
