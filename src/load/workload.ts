// Prompts and request bodies: random text of a target token length (no tokenizer: one common English
// word ≈ one token; the server's usage.prompt_tokens is what gets reported), ShareGPT JSON, a JSONL file
// of prompts, and shared-prefix groups. Deterministic for a seed: request i is the same in every run.
import { readFileSync } from "node:fs";
import { InputError, UsageError } from "../errors.ts";
import { MAX_PREFIX_GROUPS, MAX_PREFIX_TOKENS, MAX_TOKENS } from "./limits.ts";
import { Rng } from "./schedule.ts";
import type { DatasetName, Endpoint } from "./types.ts";

// Short, frequent words: one token each (with the leading space) in the common BPE vocabularies.
const WORDS = (
  "the of and to in is was for on that with as by at from his it an were are which this be or has had " +
  "not but first one their its new after who they have her she two been other when there all during into " +
  "school time may years more most only over city some world would where later up such used many can state " +
  "about national out known university united then made between part well being under team three while also " +
  "film game him high season both before through series people since south de early three work year group " +
  "north church life music own band war long day home back best around end west east way found small every " +
  "water side each line left name light road river book house place days could just because large air"
).split(" ");

export interface Prompt {
  /** Completions prompt text, or chat messages. */
  prompt?: string;
  messages?: Array<{ role: string; content: string }>;
  /** Intended input tokens (estimate when no tokenizer). */
  inputLen: number;
  /** max_tokens to request. */
  outputLen: number;
}

export interface WorkloadOptions {
  dataset?: DatasetName;
  datasetPath?: string;
  randomInputLen?: number;
  randomOutputLen?: number;
  randomRangeRatio?: number;
  prefixGroups?: number;
  prefixLen?: number;
  seed?: number;
}

export interface BodyOptions {
  model: string;
  endpoint: Endpoint;
  ignoreEos?: boolean;
  continuousUsage?: boolean;
  extraBody?: Record<string, unknown>;
  /** Each body carries this + the request's index in requestIdFields (the engine names the request after it). */
  requestIdPrefix?: string;
  requestIdFields?: readonly RequestIdField[];
}

/** The body field each engine names a request by: vLLM's request_id, SGLang's rid (both echo it in the response id). */
export type RequestIdField = "request_id" | "rid";
/** Both, where the engine is not known: each ignores the other's field (vLLM logs it as ignored). */
export const ALL_REQUEST_ID_FIELDS: readonly RequestIdField[] = ["request_id", "rid"];

function randomText(rng: Rng, tokens: number): string {
  const parts = new Array<string>(tokens);
  for (let i = 0; i < tokens; i++) parts[i] = WORDS[rng.int(0, WORDS.length - 1)]!;
  return parts.join(" ");
}

function spread(rng: Rng, len: number, ratio: number): number {
  if (!(ratio > 0)) return len;
  const lo = Math.max(1, Math.floor(len * (1 - ratio)));
  const hi = Math.max(lo, Math.ceil(len * (1 + ratio)));
  return rng.int(lo, hi);
}

/** Rough token count for text without a tokenizer (~4 characters per token in English). */
export function estimateTokens(text: string): number {
  return Math.max(1, Math.round(text.length / 4));
}

/** A source of prompts; `get(i)` is deterministic. */
export interface Workload {
  readonly name: DatasetName;
  /** Number of distinct prompts (random: unbounded → Infinity); indexes wrap. */
  readonly size: number;
  get(i: number): Prompt;
  /** Drops what only building prompts needed (called once every body is built, before the clock starts). */
  release?(): void;
}

export function createWorkload(o: WorkloadOptions): Workload {
  const seed = o.seed ?? 0;
  const ds = o.dataset ?? "random";
  const inLen = o.randomInputLen ?? 1024;
  const outLen = o.randomOutputLen ?? 128;
  const ratio = o.randomRangeRatio ?? 0;
  for (const [flag, v] of [
    ["--random-input-len", inLen],
    ["--random-output-len", outLen],
  ] as const)
    if (!(Number.isInteger(v) && v >= 1 && v <= MAX_TOKENS))
      throw new UsageError(`${flag} expects an integer in [1, ${MAX_TOKENS}], got ${v}`);
  // vLLM's rule too: a ratio of 1 or more would draw lengths of zero or below.
  if (!(ratio >= 0 && ratio < 1)) throw new UsageError(`--random-range-ratio must be in [0, 1), got ${ratio}`);
  if (ds === "random") {
    return {
      name: ds,
      size: Number.POSITIVE_INFINITY,
      get(i) {
        const rng = new Rng((seed * 1_000_003 + i) | 0);
        const n = spread(rng, inLen, ratio);
        return { prompt: randomText(rng, n), inputLen: n, outputLen: spread(rng, outLen, ratio) };
      },
    };
  }
  if (ds === "shared-prefix") {
    const groups = o.prefixGroups ?? 4;
    const plen = o.prefixLen ?? 512;
    if (!(Number.isInteger(groups) && groups >= 1 && groups <= MAX_PREFIX_GROUPS))
      throw new UsageError(`--prefix-groups expects an integer in [1, ${MAX_PREFIX_GROUPS}], got ${groups}`);
    if (!(Number.isInteger(plen) && plen >= 0 && plen <= MAX_TOKENS))
      throw new UsageError(`--prefix-len expects an integer in [0, ${MAX_TOKENS}], got ${plen}`);
    // Every prefix is built up front and kept for the run.
    if (groups * plen > MAX_PREFIX_TOKENS)
      throw new UsageError(
        `--prefix-groups ${groups} × --prefix-len ${plen} is ${groups * plen} prefix tokens held at once, more than ${MAX_PREFIX_TOKENS}`,
      );
    const prefixes: string[] = [];
    for (let g = 0; g < groups; g++) prefixes.push(randomText(new Rng((seed * 7919 + g + 1) | 0), plen));
    return {
      name: ds,
      size: Number.POSITIVE_INFINITY,
      get(i) {
        const rng = new Rng((seed * 1_000_003 + i) | 0);
        const n = spread(rng, inLen, ratio);
        const g = i % groups;
        return {
          prompt: `${prefixes[g]} ${randomText(rng, n)}`,
          inputLen: plen + n,
          outputLen: spread(rng, outLen, ratio),
        };
      },
    };
  }
  if (!o.datasetPath) throw new UsageError(`--dataset-name ${ds} needs --dataset-path`);
  const prompts = ds === "sharegpt" ? loadShareGpt(o.datasetPath, o.randomOutputLen) : loadJsonl(o.datasetPath, outLen);
  if (prompts.length === 0) throw new InputError(`${o.datasetPath}: no usable prompts`);
  // Seeded shuffle, as vLLM samples its dataset.
  const rng = new Rng(seed);
  for (let i = prompts.length - 1; i > 0; i--) {
    const j = rng.int(0, i);
    [prompts[i], prompts[j]] = [prompts[j]!, prompts[i]!];
  }
  return { name: ds, size: prompts.length, get: (i) => prompts[i % prompts.length]! };
}

/** ShareGPT: a JSON array of `{conversations: [{from, value}, …]}`; the first turn is the prompt, the
 * second's length (estimated) the output length unless one is given. vLLM's filters apply. */
export function loadShareGpt(path: string, fixedOutputLen?: number): Prompt[] {
  const text = readText(path);
  let data: any;
  try {
    data = JSON.parse(text);
  } catch (e) {
    throw new InputError(`not valid JSON: ${(e as Error).message}`, { position: positionOf(path, text, e) });
  }
  if (!Array.isArray(data)) throw new InputError(`${path}: expected a JSON array of conversations`);
  const out: Prompt[] = [];
  for (const entry of data) {
    const conv = entry?.conversations ?? entry?.conversation;
    if (!Array.isArray(conv) || conv.length < 2) continue;
    const p = conv[0]?.value ?? conv[0]?.content;
    const c = conv[1]?.value ?? conv[1]?.content;
    if (typeof p !== "string" || typeof c !== "string") continue;
    const inputLen = estimateTokens(p);
    const outputLen = fixedOutputLen ?? estimateTokens(c);
    // vLLM's sample_sharegpt_requests filters.
    if (inputLen < 4 || (fixedOutputLen === undefined && outputLen < 4)) continue;
    if (inputLen > 1024 || inputLen + outputLen > 2048) continue;
    out.push({ prompt: p, inputLen, outputLen });
  }
  return out;
}

/** JSONL: one object per line with `prompt` (string) or `messages`, optional `max_tokens` / `output_len`. */
export function loadJsonl(path: string, defaultOutputLen: number): Prompt[] {
  const text = readText(path);
  const out: Prompt[] = [];
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i]!;
    if (!raw.trim()) continue;
    let o: any;
    try {
      o = JSON.parse(raw);
    } catch (e) {
      const m = /position (\d+)/.exec((e as Error).message);
      const column = m ? Number(m[1]) + 1 : 1;
      throw new InputError(`not valid JSON: ${(e as Error).message}`, {
        position: { file: path, line: i + 1, column },
      });
    }
    const pos = { file: path, line: i + 1, column: 1 };
    if (!o || typeof o !== "object" || Array.isArray(o))
      throw new InputError("expected an object with a `prompt` or `messages` field", { position: pos });
    const outputLen = o.max_tokens ?? o.output_len ?? o.output_tokens ?? defaultOutputLen;
    if (typeof outputLen !== "number" || !(outputLen >= 1))
      throw new InputError("max_tokens / output_len must be a number ≥ 1", { position: pos });
    if (typeof o.prompt === "string") out.push({ prompt: o.prompt, inputLen: estimateTokens(o.prompt), outputLen });
    else if (Array.isArray(o.messages) && o.messages.every((m: any) => typeof m?.content === "string"))
      out.push({
        messages: o.messages.map((m: any) => ({ role: String(m.role ?? "user"), content: m.content })),
        inputLen: estimateTokens(o.messages.map((m: any) => m.content).join(" ")),
        outputLen,
      });
    else throw new InputError("expected a string `prompt` or a `messages` array of {role, content}", { position: pos });
  }
  return out;
}

function readText(path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch (e: any) {
    throw new InputError(`${path}: ${e?.code === "ENOENT" ? "no such file" : (e?.message ?? String(e))}`);
  }
}

function positionOf(path: string, text: string, e: unknown) {
  const m = /position (\d+)/.exec((e as Error).message);
  if (!m) return { file: path, line: 1, column: 1 };
  const off = Number(m[1]);
  const before = text.slice(0, off);
  const line = before.split("\n").length;
  const column = off - before.lastIndexOf("\n");
  return { file: path, line, column };
}

/** The JSON body vLLM bench serve sends, for one prompt. */
export function requestBody(p: Prompt, o: BodyOptions, index?: number): string {
  const streamOptions: Record<string, boolean> = { include_usage: true };
  if (o.continuousUsage ?? true) streamOptions.continuous_usage_stats = true;
  let body: Record<string, unknown>;
  if (o.endpoint === "/v1/chat/completions") {
    body = {
      model: o.model,
      messages: p.messages ?? [{ role: "user", content: p.prompt ?? "" }],
      max_completion_tokens: p.outputLen,
      // llama.cpp ignores max_completion_tokens; vLLM accepts both.
      max_tokens: p.outputLen,
      stream: true,
      stream_options: streamOptions,
    };
  } else {
    const prompt = p.prompt ?? (p.messages ?? []).map((m) => m.content).join("\n");
    body = {
      model: o.model,
      prompt,
      repetition_penalty: 1.0,
      max_tokens: p.outputLen,
      logprobs: null,
      stream: true,
      stream_options: streamOptions,
    };
  }
  if (o.ignoreEos) body.ignore_eos = true;
  if (o.extraBody) Object.assign(body, o.extraBody);
  if (o.requestIdPrefix !== undefined && index !== undefined)
    for (const f of o.requestIdFields ?? ALL_REQUEST_ID_FIELDS) body[f] = `${o.requestIdPrefix}${index}`;
  return JSON.stringify(body);
}
