// Calibrates prompt synthesis against the server's tokenizer: POST /tokenize where the server has one
// (vLLM and SGLang: {model, prompt} → {count, tokens}; llama.cpp: {content} → {tokens}), and one or two
// probe requests of the real request form for the tokens that form adds (BOS, chat template). A server
// with no /tokenize gets a calibrated estimate from two probes (tokens per word and the offset, fitted).
import { undici } from "../lazy.ts";
import { CANDIDATE_WORDS, type Calibration } from "./datasets/synth.ts";

export interface TokenCounter {
  /** e.g. "POST /tokenize (vLLM/SGLang form)". */
  readonly name: string;
  count(text: string): Promise<number>;
}

/** usage.prompt_tokens of one real request (max_tokens 1) with this prompt text, or null when unreported. */
export type Probe = (prompt: string) => Promise<number | null>;

async function postJson(url: string, body: unknown, timeoutMs: number, apiKey?: string): Promise<unknown> {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (apiKey) headers.authorization = `Bearer ${apiKey}`;
  const res = await undici().request(url, {
    method: "POST",
    headers,
    body: JSON.stringify(body),
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
    signal: AbortSignal.timeout(timeoutMs),
  });
  const text = await res.body.text();
  if (res.statusCode !== 200) return null;
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

/** The server's /tokenize, in whichever of the two known forms it answers; null when it has none. */
export async function findTokenizer(
  baseUrl: string,
  model: string,
  opts: { apiKey?: string; timeoutMs?: number } = {},
): Promise<TokenCounter | null> {
  const url = `${baseUrl}/tokenize`;
  const t = opts.timeoutMs ?? 5000;
  let lastError = "";
  const tryPost = async (body: unknown, timeoutMs = t) => {
    try {
      return (await postJson(url, body, timeoutMs, opts.apiKey)) as { count?: unknown; tokens?: unknown } | null;
    } catch (e) {
      lastError = e instanceof Error ? e.message : String(e);
      return null;
    }
  };
  // Once the form is known, a miss is a busy server (a loaded host, slots all decoding): ask again, waiting longer,
  // before calling the endpoint gone.
  const countWith = async (
    body: unknown,
    countOf: (r: { count?: unknown; tokens?: unknown } | null) => number | null,
  ) => {
    for (let attempt = 0; attempt < 3; attempt++) {
      const n = countOf(await tryPost(body, t * 2 ** attempt));
      if (n !== null) return n;
    }
    throw new Error(`/tokenize stopped answering (3 tries${lastError ? `; last: ${lastError}` : ""})`);
  };
  const countOf = (r: { count?: unknown; tokens?: unknown } | null): number | null =>
    r && typeof r.count === "number" ? r.count : r && Array.isArray(r.tokens) ? r.tokens.length : null;
  // vLLM / SGLang: no special tokens, so only the text's own tokens are counted. A server that answers
  // with no tokens did not read the field (llama.cpp reads `content`): it is not this form.
  if ((countOf(await tryPost({ model, prompt: " the", add_special_tokens: false })) ?? 0) > 0)
    return {
      name: "POST /tokenize {model, prompt} (vLLM/SGLang form)",
      count: (text) => countWith({ model, prompt: text, add_special_tokens: false }, countOf),
    };
  if ((countOf(await tryPost({ content: " the", add_special: false })) ?? 0) > 0)
    return {
      name: "POST /tokenize {content} (llama.cpp form)",
      count: (text) => countWith({ content: text, add_special: false }, countOf),
    };
  return null;
}

/** Fixed text before each candidate word, so the word is counted as it occurs: after other words. */
const ANCHOR = " the of and";
const MIN_WORDS = 16;

async function mapLimit<T, R>(xs: readonly T[], limit: number, f: (x: T) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(xs.length);
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < xs.length; i = next++) out[i] = await f(xs[i]!);
  };
  await Promise.all(Array.from({ length: Math.min(limit, xs.length) }, worker));
  return out;
}

function sample(words: readonly string[], n: number, salt: number): string {
  let s = "";
  for (let i = 0; i < n; i++) s += ` ${words[(i * 7919 + salt * 104729 + ((i * i) % 13)) % words.length]}`;
  return s;
}

/**
 * Words that are one token after other words (each checked once: count(anchor + word) − count(anchor)),
 * a check that long joins of them add up, and the request form's offset from one probe. Without a
 * tokenizer, two probes fit tokens per word and the offset (an estimate, said in the notes).
 */
export async function calibrate(counter: TokenCounter | null, probe: Probe): Promise<Calibration> {
  const notes: string[] = [];
  if (counter) {
    const base = await counter.count(ANCHOR);
    const deltas = await mapLimit(CANDIDATE_WORDS, 8, async (w) => (await counter.count(`${ANCHOR} ${w}`)) - base);
    const words = CANDIDATE_WORDS.filter((_, i) => deltas[i] === 1);
    if (words.length >= MIN_WORDS) {
      // Additivity over long joins (block boundaries included): 2.25 blocks of words must count as many tokens.
      const n = 1152;
      const zero = (await counter.count(" the")) - 1;
      const got = (await counter.count(sample(words, n, 1))) - zero;
      let tokensPerWord = 1;
      if (got !== n) {
        tokensPerWord = got / n;
        notes.push(
          `${n} one-token words counted ${got} tokens together (boundary merges): lengths are estimates at ${tokensPerWord.toFixed(4)} tokens/word`,
        );
      }
      const pw = 32;
      const p = await probe(sample(words, pw, 2));
      let offset = 0;
      if (p === null)
        notes.push("the probe request reported no usage.prompt_tokens: no offset for BOS/template assumed");
      else offset = Math.round(p - pw * tokensPerWord);
      if (offset < 0) {
        notes.push(`the probe counted ${p} tokens for ${pw} words: offset ${offset} clamped to 0`);
        offset = 0;
      }
      return { words, offset, tokensPerWord, method: "tokenize", tokenizer: counter.name, notes };
    }
    notes.push(
      `/tokenize found only ${words.length} one-token words of ${CANDIDATE_WORDS.length}; using probes instead`,
    );
  }
  // Two probes: prompt_tokens = offset + words × tokensPerWord.
  const a = 32;
  const b = 544;
  const pa = await probe(sample(CANDIDATE_WORDS, a, 3));
  const pb = await probe(sample(CANDIDATE_WORDS, b, 4));
  if (pa === null || pb === null || !(pb > pa)) {
    notes.push("no /tokenize and the probes reported no usable usage.prompt_tokens: one word is taken as one token");
    return { words: CANDIDATE_WORDS, offset: 0, tokensPerWord: 1, method: "assumed", tokenizer: null, notes };
  }
  const tokensPerWord = (pb - pa) / (b - a);
  const offset = Math.max(0, Math.round(pa - a * tokensPerWord));
  notes.push(
    `no /tokenize: lengths are a calibrated estimate (${tokensPerWord.toFixed(4)} tokens/word, offset ${offset}, from two probe requests)`,
  );
  return { words: CANDIDATE_WORDS, offset, tokensPerWord, method: "probe", tokenizer: null, notes };
}
