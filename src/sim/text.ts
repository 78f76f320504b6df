// Tokenizer-free token counting and deterministic text generation for the simulator.
// A "token" is a word piece: an optional leading space plus up to 4 letters/digits, or one
// other character. Every generated token is one vocabulary word of <= 4 letters with a leading
// space, so re-counting the generated text gives exactly the number of tokens served.
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

function isAlnum(c: number): boolean {
  return (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c >= 128;
}

/**
 * Splits text into word pieces and returns one 32-bit id per piece (a hash of its characters).
 * Deterministic and O(length); ids feed the prefix cache's block hashes.
 */
export function tokenize(text: string): Uint32Array {
  const out: number[] = [];
  const n = text.length;
  let i = 0;
  while (i < n) {
    let h = 0x811c9dc5;
    let c = text.charCodeAt(i);
    const start = i;
    if (c === 32 && i + 1 < n && isAlnum(text.charCodeAt(i + 1))) {
      h = Math.imul(h ^ 32, 0x01000193);
      i++;
      c = text.charCodeAt(i);
    }
    if (isAlnum(c)) {
      let k = 0;
      while (i < n && k < 4 && isAlnum(text.charCodeAt(i))) {
        h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
        i++;
        k++;
      }
    } else if (i === start) {
      h = Math.imul(h ^ c, 0x01000193);
      i++;
    }
    out.push(h >>> 0);
  }
  return Uint32Array.from(out);
}

export function countTokens(text: string): number {
  return tokenize(text).length;
}

/** Token ids for a list of token ids given directly in the request (vLLM accepts int lists). */
export function idsFromList(list: readonly number[]): Uint32Array {
  const out = new Uint32Array(list.length);
  for (let i = 0; i < list.length; i++) out[i] = mix32(list[i]! | 0);
  return out;
}

export interface ChatMessage {
  role: string;
  content: unknown;
}

/** Tokens the chat template adds: per message header/footer, and the assistant prefix. */
export const CHAT_TOKENS_PER_MESSAGE = 4;
export const CHAT_TOKENS_ASSISTANT_PREFIX = 3;

/** Renders chat messages through a fixed template and tokenizes them. */
export function tokenizeChat(messages: readonly ChatMessage[]): Uint32Array {
  const parts: number[] = [];
  for (const m of messages) {
    const roleId = mix32(hashString(String(m.role)));
    parts.push(0xfffffff0, roleId, 0xfffffff1, 0xfffffff2);
    for (const id of tokenize(contentText(m.content))) parts.push(id);
  }
  parts.push(0xfffffff0, mix32(hashString("assistant")), 0xfffffff1);
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

/** The text of generated token number `index` (0-based) for a request seeded with `seed`. */
export function tokenText(seed: number, index: number): string {
  return VOCAB_PIECES[mix32((seed ^ Math.imul(index + 1, 0x9e3779b1)) | 0) & 255]!;
}
