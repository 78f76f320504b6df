// The simulator's tokenizer and deterministic text generation. A "token" is a word piece: an
// optional leading space plus up to 4 ASCII letters/digits, or one other UTF-16 code unit. Every
// generated token is one vocabulary word of <= 4 letters with a leading space, so re-counting the
// generated text gives exactly the number of tokens served.
import { mix32 } from "./rng.ts";

/** 256 short words: the generated text's vocabulary. */
export const VOCAB: readonly string[] = (
  "the of and to in is was for on as by with at from that this are be or an it not but " +
  "had has his her they were one all can more will so out up if into than its time only " +
  "new some two may also use way work each part made over most such well both form many " +
  "when high like then them year area line what used long city few very make back low " +
  "take main much near open real want sort test tool rate load node rank step fast slow " +
  "warm cold peak mean base core disk data code file page text word term list tree path " +
  "send read save copy note plan cost gain loss size type unit zone band wave beam flow " +
  "pass fail gate link port host user role goal task team hand head face side edge land " +
  "sea sky sun moon star rain snow wind fire iron gold salt milk rice corn seed leaf root " +
  "bird fish wolf bear deer lion frog king lord poet song poem tale book film game play " +
  "run walk jump swim ride fly sing draw cook wash fix add cut mix pour fill hold keep " +
  "give find show tell ask call try help move live stay turn stop wait rise fall grow " +
  "shut pull push lift drop pick hang lean rest look seem feel know mind hope wish love " +
  "fear care deal bold calm dark deep fair fine free full glad good hard just kind last " +
  "late lazy loud neat nice odd old pure rich ripe safe same sure tall thin true vast " +
  "wise"
)
  .split(" ")
  .slice(0, 256);

const VOCAB_PIECES: readonly string[] = VOCAB.map((w) => ` ${w}`);

// The token-id space. Ids are an invertible encoding of the piece, so /detokenize works without a
// vocabulary file and a prompt sent as /tokenize's ids is the same prompt as its text:
//   [0, 65536)            a one-code-unit piece (that character);
//   [65536, PIECE_END)    an ASCII letter/digit run of 2–4, or a space + a run of 1–4 (base 62);
//   [PIECE_END, VOCAB_SIZE) the chat template's special tokens.
const ALNUM = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const DIGIT = new Int8Array(128).fill(-1);
for (let i = 0; i < ALNUM.length; i++) DIGIT[ALNUM.charCodeAt(i)] = i;
/** Start of each (leading space, run length) range: index space * 5 + length. */
const RANGE = new Float64Array(10);
let nextId = 65536;
for (const space of [0, 1])
  for (let len = space ? 1 : 2; len <= 4; len++) {
    RANGE[space * 5 + len] = nextId;
    nextId += 62 ** len;
  }
const PIECE_END = nextId;
const SPECIAL = ["<|im_start|>", "<|im_sep|>", "\n", "<|im_end|>"] as const;
const START_ID = PIECE_END;
const SEP_ID = PIECE_END + 1;
const NL_ID = PIECE_END + 2;
/** Roles a chat template names; any other role is one of ROLE_HASHES hashed role tokens. */
const ROLES = ["system", "user", "assistant", "tool", "developer", "function"] as const;
const ROLE_BASE = PIECE_END + SPECIAL.length;
const ROLE_HASHES = 1 << 16;
/** One past the largest token id: prompts of token ids must stay below it (vLLM: "out of vocabulary"). */
export const VOCAB_SIZE = ROLE_BASE + ROLES.length + ROLE_HASHES;

function isAlnum(c: number): boolean {
  return c < 128 && DIGIT[c]! >= 0;
}

/**
 * Splits text into word pieces and returns their ids: an optional leading space plus up to 4 ASCII
 * letters/digits, or one other UTF-16 code unit (so a CJK character is one token). O(length).
 */
export function tokenize(text: string): Uint32Array {
  const out = new Uint32Array(text.length);
  let n = 0;
  const len = text.length;
  let i = 0;
  while (i < len) {
    const c = text.charCodeAt(i);
    let space = 0;
    let j = i;
    if (c === 32 && i + 1 < len && isAlnum(text.charCodeAt(i + 1))) {
      space = 1;
      j++;
    }
    const c0 = text.charCodeAt(j);
    if (!isAlnum(c0)) {
      out[n++] = c;
      i++;
      continue;
    }
    let v = 0;
    let k = 0;
    while (j < len && k < 4) {
      const d = text.charCodeAt(j);
      if (!isAlnum(d)) break;
      v = v * 62 + DIGIT[d]!;
      j++;
      k++;
    }
    out[n++] = space === 0 && k === 1 ? c0 : RANGE[space * 5 + k]! + v;
    i = j;
  }
  return out.subarray(0, n);
}

export function countTokens(text: string): number {
  return tokenize(text).length;
}

/** The text of one token id, or null when the id is outside the vocabulary. */
export function tokenPiece(id: number): string | null {
  if (!Number.isInteger(id) || id < 0 || id >= VOCAB_SIZE) return null;
  if (id < 65536) return String.fromCharCode(id);
  if (id < PIECE_END) {
    let r = 9;
    while (RANGE[r] === 0 || RANGE[r]! > id) r--;
    const space = r >= 5 ? 1 : 0;
    const k = r - space * 5;
    let v = id - RANGE[r]!;
    let s = "";
    for (let q = 0; q < k; q++) {
      s = ALNUM[v % 62]! + s;
      v = Math.floor(v / 62);
    }
    return space ? ` ${s}` : s;
  }
  if (id < ROLE_BASE) return SPECIAL[id - PIECE_END]!;
  if (id < ROLE_BASE + ROLES.length) return ROLES[id - ROLE_BASE]!;
  return `<|role_${(id - ROLE_BASE - ROLES.length).toString(16).padStart(4, "0")}|>`;
}

/** Text of a list of token ids; throws a RangeError naming the first id outside the vocabulary. */
export function detokenize(ids: ArrayLike<number>): string {
  let s = "";
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i]!;
    const p = tokenPiece(id);
    if (p === null) throw new RangeError(`Token id ${id} is out of vocabulary`);
    s += p;
  }
  return s;
}

/** A prompt given as token ids (vLLM accepts int lists); ids outside the vocabulary are refused. */
export function idsFromList(list: readonly number[]): Uint32Array {
  const out = new Uint32Array(list.length);
  for (let i = 0; i < list.length; i++) {
    const id = list[i]!;
    if (!(id >= 0 && id < VOCAB_SIZE)) throw new RangeError(`Token id ${id} is out of vocabulary`);
    out[i] = id;
  }
  return out;
}

export interface ChatMessage {
  role: string;
  content: unknown;
}

/** Tokens the chat template adds: per message header/footer, and the assistant prefix. */
export const CHAT_TOKENS_PER_MESSAGE = 4;
// The generation prompt is the assistant message's own header, so a next turn that resends the
// reply matches the previous request's prompt + output token for token (its blocks hit the cache).
export const CHAT_TOKENS_ASSISTANT_PREFIX = 4;

function roleId(role: string): number {
  const k = (ROLES as readonly string[]).indexOf(role);
  return k >= 0 ? ROLE_BASE + k : ROLE_BASE + ROLES.length + (hashString(role) & (ROLE_HASHES - 1));
}

/**
 * Renders chat messages through a fixed template (<|im_start|> role <|im_sep|> \n content per message)
 * and tokenizes them; `addGenerationPrompt` appends the assistant prefix, as vLLM's default does.
 */
export function tokenizeChat(messages: readonly ChatMessage[], addGenerationPrompt = true): Uint32Array {
  const parts: number[] = [];
  for (const m of messages) {
    parts.push(START_ID, roleId(String(m.role)), SEP_ID, NL_ID);
    for (const id of tokenize(contentText(m.content))) parts.push(id);
  }
  if (addGenerationPrompt) parts.push(START_ID, roleId("assistant"), SEP_ID, NL_ID);
  return Uint32Array.from(parts);
}

/** Flattens OpenAI content (string or parts list) to text. */
export function contentText(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    let s = "";
    for (const p of content)
      if (p && typeof p === "object" && typeof (p as any).text === "string") s += (p as any).text;
    return s;
  }
  return "";
}

export function hashString(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

let vocabIds: Uint32Array | null = null;

/** The token id of generated token number `index` (its text re-tokenizes to exactly this id). */
export function generatedTokenId(seed: number, index: number): number {
  vocabIds ??= Uint32Array.from(VOCAB_PIECES, (p) => tokenize(p)[0]!);
  return vocabIds[mix32((seed ^ Math.imul(index + 1, 0x9e3779b1)) | 0) & 255]!;
}

/** The text of generated token number `index` (0-based) for a request seeded with `seed`. */
export function tokenText(seed: number, index: number): string {
  return VOCAB_PIECES[mix32((seed ^ Math.imul(index + 1, 0x9e3779b1)) | 0) & 255]!;
}
