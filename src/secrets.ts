// Secrets are identified by where they sit, not by a list of patterns: the value of a flag or an
// environment variable whose name says it holds a credential (`--api-key`, `--hf-token`, `--token`,
// `*_TOKEN`, `*_KEY`, `*_SECRET`, `Authorization`), the word after such a flag even when it is stored
// as a separate array item, and values shaped like a hub or API token (`hf_…`, `sk-…`). Values found
// where they enter (server commands, variants, flags) are registered, so every writer — terminal, run
// store, reports, logs — cuts them out wherever they reappear. A resume compares a secret given again
// by a keyed hash (HMAC-SHA256 under a per-user key kept outside the store), never by the placeholder.
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { UsageError } from "./errors.ts";
import { secretKey } from "./secret-key.ts";
import { type ShellWord, shellQuote, shellWords } from "./shell.ts";

export const REDACTED = "[redacted]";

// Last word of a name (split at -, _, ., camelCase) that marks a credential.
const SECRET_LAST = new Set(["token", "key", "secret", "password", "passwd", "credential", "credentials", "apikey"]);
const SECRET_ANY = new Set(["authorization", "cookie", "bearer"]);
// In a field of a JSON record, `…token` and `…key` are a credential only after one of these words
// (`api_key`, `accessToken`, `hf_token`); `itl_token`, `sourceKey` or `cache_key` name data of our own.
const CREDENTIAL_QUALIFIER = new Set([
  "api",
  "access",
  "refresh",
  "auth",
  "bearer",
  "session",
  "secret",
  "private",
  "hf",
  "hub",
]);

function nameParts(name: string): string[] {
  return name
    .replace(/^-+/, "")
    .replace(/([a-z0-9])([A-Z])/g, "$1_$2")
    .toLowerCase()
    .split(/[-_.]+/)
    .filter(Boolean);
}

/**
 * A flag, environment variable, header or field name that carries a credential: `--api-key`,
 * `--hf-token`, `--token`, `HF_TOKEN`, `WANDB_API_KEY`, `AWS_SECRET_ACCESS_KEY`, `Authorization`,
 * `apiKey`. `--max-num-batched-tokens`, `--tokenizer` and `--api-key-file` (a path) are not.
 * `field`: a JSON field of our own records, where a name alone is a credential only when it cannot name
 * anything else (`apiKey`, `password`, `HF_TOKEN`); see `isSecretField` for the rest.
 */
export function isSecretName(name: string, opts: { field?: boolean } = {}): boolean {
  const parts = nameParts(name);
  if (parts.length === 0) return false;
  if (parts.some((p) => SECRET_ANY.has(p))) return true;
  const last = parts.at(-1)!;
  if (!SECRET_LAST.has(last)) return false;
  if (!opts.field || (last !== "key" && last !== "token")) return true;
  // An environment variable's name (HF_TOKEN, KEY) is all capitals; our own fields never are.
  if (/^[A-Z][A-Z0-9_]*$/.test(name)) return true;
  return parts.length > 1 && CREDENTIAL_QUALIFIER.has(parts.at(-2)!);
}

/**
 * Whether a record's field holds a credential: by a name that says so (`isSecretName(…, { field })`),
 * or a `…token`/`…key` name whose value is shaped like one (`hf_…`, `sk-…`). A field of our own is never
 * blanked by its name alone: `"itl_token": "itl.token.pooled …"` is a definition, not a secret.
 */
export function isSecretField(name: string, value: string): boolean {
  if (isSecretName(name, { field: true })) return true;
  return isSecretName(name) && looksLikeSecret(value.trim());
}

/** A value shaped like a Hugging Face or OpenAI-style token, wherever it appears. */
export function looksLikeSecret(value: string): boolean {
  // A token's tail is random: it has a digit or a capital, where a name like `hf_transfer` has neither.
  return /^(?:hf_(?=[a-z]*[A-Z0-9])[A-Za-z0-9]{10,}|sk-[A-Za-z0-9_-]{8,})$/.test(value);
}

/**
 * A secret found in a word list: characters [start, end) of word `index` are `value`; `name` says what
 * carried it. A word may hold several (`sh -c '… --hf-token A … --api-key B'`, a URL's password and key).
 */
export interface SecretSpot {
  index: number;
  start: number;
  end: number;
  value: string;
  /** `--hf-token`, `HF_TOKEN`, `Authorization`, `a URL's password`, or `a token-shaped value`. */
  name: string;
}

type WordSpot = Omit<SecretSpot, "index">;

const FLAG = /^-{1,2}[A-Za-z][\w.-]*$/;
// A secret flag's value is the next word even when it starts with "-" (`--api-key -Xk3`); only a long
// option ends it (`--api-key --port 8000`: a flag given no value).
const LONG_FLAG = /^--[A-Za-z]/;
const FLAG_EQ = /^(-{1,2}[A-Za-z][\w.-]*)=(.*)$/s;
const ASSIGN = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/s;
const HEADER = /^([A-Za-z][\w-]*):\s*(?:(bearer|basic|token)\s+)?(.*)$/is;
// Words that stand for a value in our own hints ("--api-key …") and are no secret.
const PLACEHOLDER = /^(?:…|\.\.\.|\[redacted\]|\$\w+|\$\{\w+\}|<[^>]*>|\*+)$/i;
// Query (and fragment) parameters that carry a credential beside those named as one (`api_key`, `token`).
const QUERY_SECRET = /^(?:sig|signature|auth)$/i;
const SCRIPT_FLAG = /^-[a-z]*c$/;
const NAMED_VALUE = /^([A-Za-z0-9][\w.-]*):(?!\/\/)(.+)$/s;
// Shell scripts inside words inside words: deep enough for `sh -c "bash -c '…'"`, bounded for hostile input.
const MAX_NESTING = 4;

function usable(v: string): boolean {
  // "(set HF_TOKEN …)": a parenthesis opens prose, not a value.
  return v !== "" && !v.startsWith("(") && !PLACEHOLDER.test(v);
}

/**
 * The secrets in an argument list, by structure: `--secret-flag VALUE` (the value is the next item),
 * `--secret-flag=VALUE`, `SECRET_NAME=VALUE` (also as a flag's value: `--env=HF_TOKEN=…`),
 * `Authorization: Bearer VALUE` (one item, as `-H` takes it, or `Bearer` then the value), a URL's
 * password and its credential query parameters (`?api_key=…`), token-shaped values anywhere, and all of
 * these inside an item that is itself a shell script (`sh -c '… --hf-token hf_…'`).
 */
export function secretsInArgs(words: readonly string[], opts: { prose?: boolean } = {}): SecretSpot[] {
  return argSecrets(words, 0, opts.prose === true);
}

// In a shell script or a sentence, `(` before a word and `;`, `&`, `|`, `)`, `,`, `.` after it are not part
// of it: `HF_TOKEN=hf_…;` in `sh -c '…'` holds the token without its `;`.
const LOOSE_HEAD = /^\(+/;
const LOOSE_TAIL = /[;&|),.]+$/;

function argSecrets(words: readonly string[], depth: number, prose: boolean): SecretSpot[] {
  const loose = prose || depth > 0;
  const out: SecretSpot[] = [];
  for (let i = 0; i < words.length; i++) {
    const raw = words[i]!;
    const head = loose ? (LOOSE_HEAD.exec(raw)?.[0].length ?? 0) : 0;
    const w = loose ? raw.slice(head).replace(LOOSE_TAIL, "") : raw;
    const rawNext = words[i + 1];
    const next = loose && rawNext !== undefined ? rawNext.replace(LOOSE_TAIL, "") : rawNext;
    if ((FLAG.test(w) && isSecretName(w)) || (/^bearer$/i.test(w) && next !== undefined)) {
      if (next !== undefined && !LONG_FLAG.test(next)) {
        if (usable(next))
          out.push({ index: i + 1, start: 0, end: next.length, value: next, name: FLAG.test(w) ? w : "Authorization" });
        i++;
      }
      continue;
    }
    // The word after `sh -c` (`bash -lc` …) is a script: its own words, `HF_TOKEN=…;` ending at the `;`.
    const script = i > 0 && SCRIPT_FLAG.test(words[i - 1]!) && /\s/.test(w);
    for (const s of shift(script ? valueSecrets(w, depth) : wordSecrets(w, depth), head)) out.push({ ...s, index: i });
  }
  return out;
}

/** The secrets inside one word (offsets within it). */
function wordSecrets(w: string, depth: number): WordSpot[] {
  const m = FLAG_EQ.exec(w) ?? ASSIGN.exec(w);
  if (m) {
    const [, name, value] = m as unknown as [string, string, string];
    const at = name.length + 1;
    if (isSecretName(name) || looksLikeSecret(value))
      return usable(value) ? [{ start: at, end: w.length, value, name }] : [];
    // `--env=HF_TOKEN=…`, `--url=http://u:p@h`: the value by the same rules.
    return depth < MAX_NESTING ? shift(wordSecrets(value, depth + 1), at) : [];
  }
  const h = HEADER.exec(w);
  if (h && isSecretName(h[1]!)) {
    const value = h[3]!;
    return usable(value) ? [{ start: w.length - value.length, end: w.length, value, name: h[1]! }] : [];
  }
  if (looksLikeSecret(w)) return [{ start: 0, end: w.length, value: w, name: "a token-shaped value" }];
  // `NAME:VALUE` that is not a URL (a variant `tok:HF_TOKEN=…`): the value by the same rules.
  const nv = NAMED_VALUE.exec(w);
  if (nv && depth < MAX_NESTING) return shift(wordSecrets(nv[2]!, depth + 1), nv[1]!.length + 1);
  return valueSecrets(w, depth);
}

/** Secrets inside a value that is no secret as a whole: a shell script's words, or a URL's credentials. */
function valueSecrets(text: string, depth: number): WordSpot[] {
  if (!/\s/.test(text)) return urlSecrets(text);
  if (depth >= MAX_NESTING) return [];
  let inner: ShellWord[];
  try {
    inner = shellWords(text);
  } catch {
    inner = plainWords(text);
  }
  const out: WordSpot[] = [];
  for (const [i, spots] of byWord(
    argSecrets(
      inner.map((x) => x.text),
      depth + 1,
      false,
    ),
  )) {
    const iw = inner[i]!;
    const raw = text.slice(iw.start, iw.end);
    if (raw === iw.text) {
      out.push(...shift(spots, iw.start));
      continue;
    }
    // A quoted or escaped word: each value where its characters stand as they are, else the whole word.
    const found: WordSpot[] = [];
    let from = 0;
    for (const s of spots) {
      const at = raw.indexOf(s.value, from);
      if (at < 0) break;
      found.push({ ...s, start: iw.start + at, end: iw.start + at + s.value.length });
      from = at + s.value.length;
    }
    out.push(
      ...(found.length === spots.length ? found : [{ start: iw.start, end: iw.end, value: raw, name: spots[0]!.name }]),
    );
  }
  return out;
}

function shift(spots: readonly WordSpot[], by: number): WordSpot[] {
  return spots.map((s) => ({ start: s.start + by, end: s.end + by, value: s.value, name: s.name }));
}

function plainWords(text: string): ShellWord[] {
  return [...text.matchAll(/\S+/g)].map((m) => ({ text: m[0], start: m.index!, end: m.index! + m[0].length }));
}

const URL_IN_TEXT = /[A-Za-z][A-Za-z0-9+.-]*:\/\/[^\s"'<>`]*/g;
// A telemetry source's sampling interval after its URL (`dcgm:http://host:9400@200ms`): not user info.
const INTERVAL_SUFFIX = /@\d+(?:\.\d+)?(?:ms|s|m|h)?$/;
// A bare user name (`git@`, `admin@`) is no secret; a user-info part shaped otherwise (`ghp_…@`) is.
const PLAIN_USER = /^[a-z][a-z0-9._-]{0,15}$/;

/** A URL's password (or a token given as its user), and its query and fragment parameters named as credentials. */
function urlSecrets(text: string): WordSpot[] {
  const out: WordSpot[] = [];
  for (const m of text.matchAll(URL_IN_TEXT)) {
    // A sentence's punctuation after a URL is not part of it.
    const url = m[0].replace(/[),.;:!?\]}]+$/, "");
    const base = m.index! + url.indexOf("://") + 3;
    const body = text.slice(base, m.index! + url.length);
    const authEnd = body.search(/[/?#]/);
    let auth = authEnd < 0 ? body : body.slice(0, authEnd);
    if (authEnd < 0) auth = auth.replace(INTERVAL_SUFFIX, "");
    const at = auth.lastIndexOf("@");
    if (at > 0) {
      const info = auth.slice(0, at);
      const colon = info.indexOf(":");
      const start = colon >= 0 ? colon + 1 : 0;
      const value = info.slice(start);
      if (usable(value) && (colon >= 0 || !PLAIN_USER.test(value)))
        out.push({
          start: base + start,
          end: base + at,
          value,
          name: colon >= 0 ? "a URL's password" : "a URL's user info",
        });
    }
    if (authEnd < 0) continue;
    for (const q of body.slice(authEnd).matchAll(/[?&#;]([^=&#;?]+)=([^&#;]*)/g)) {
      const [, rawName, value] = q as unknown as [string, string, string];
      let name = rawName;
      try {
        name = decodeURIComponent(rawName);
      } catch {}
      if (!usable(value) || !(isSecretName(name) || QUERY_SECRET.test(name) || looksLikeSecret(value))) continue;
      const start = base + authEnd + q.index! + 1 + rawName.length + 1;
      out.push({ start, end: start + value.length, value, name: `a URL's ${name}` });
    }
  }
  return out;
}

/** A word with the spots given (offsets within it, not overlapping) replaced by `put(spot)`. */
function replaceSpots(word: string, spots: readonly WordSpot[], put: (s: WordSpot) => string): string {
  let out = word;
  for (const s of [...spots].sort((a, b) => b.start - a.start)) out = out.slice(0, s.start) + put(s) + out.slice(s.end);
  return out;
}

/** Spots grouped by the word that holds them. */
function byWord(spots: readonly SecretSpot[]): Map<number, SecretSpot[]> {
  const m = new Map<number, SecretSpot[]>();
  for (const s of spots) {
    const list = m.get(s.index);
    if (list) list.push(s);
    else m.set(s.index, [s]);
  }
  return m;
}

/** The argument list with every secret's value replaced by the placeholder (`--api-key`, `[redacted]`). */
export function redactArgs(words: readonly string[]): string[] {
  const out = [...words];
  for (const [i, spots] of byWord(secretsInArgs(words))) out[i] = replaceSpots(words[i]!, spots, () => REDACTED);
  return out;
}

/** Puts values back into the placeholders of a word, in order; `next` gives each one's value. */
export function fillPlaceholders(word: string, next: () => string): string {
  return word.split(REDACTED).reduce((acc, part, i) => (i === 0 ? part : acc + next() + part), "");
}

/** How many placeholders a stored word holds. */
export function placeholderCount(word: string): number {
  return word.split(REDACTED).length - 1;
}

/** A shell command split into its secrets and the command as it may be shown and stored. */
export interface SealedCommand {
  /** The command with each secret written as `[redacted]` (`--api-key [redacted]`, `'… --hf-token [redacted] …'`). */
  shown: string;
  secrets: SecretSpot[];
}

/** Finds the secrets in a shell command by its words; an unsplittable command falls back to plain words. */
export function sealCommand(cmd: string): SealedCommand {
  let words: ShellWord[];
  try {
    words = shellWords(cmd);
  } catch {
    words = plainWords(cmd);
  }
  const secrets = secretsInArgs(words.map((w) => w.text));
  let shown = cmd;
  // Right to left, so earlier spans stay valid.
  for (const [i, spots] of [...byWord(secrets)].reverse()) {
    const w = words[i]!;
    shown = shown.slice(0, w.start) + shownWord(replaceSpots(w.text, spots, () => REDACTED)) + shown.slice(w.end);
  }
  return { shown, secrets };
}

/** A word holding placeholders as a shell reads it back: `--api-key=[redacted]` bare, a script quoted whole. */
export function shownWord(text: string): string {
  return text.split(REDACTED).every((p) => /^[A-Za-z0-9_@%+=:,./-]*$/.test(p)) ? text : shellQuote(text);
}

/**
 * Puts secrets back into a command stored as `sealCommand(...).shown`: the n-th placeholder gets
 * `values[n]`. Throws when the counts differ (the stored command was not sealed by us).
 */
export function unsealCommand(shown: string, values: readonly string[]): string {
  const words = shellWords(shown);
  const slots = words.filter((w) => w.text.includes(REDACTED));
  const count = slots.reduce((n, w) => n + placeholderCount(w.text), 0);
  if (count !== values.length)
    throw new Error(`the stored command has ${count} hidden values, ${values.length} were given`);
  let k = 0;
  const filled = slots.map((w) => fillPlaceholders(w.text, () => values[k++]!));
  let out = shown;
  for (let i = slots.length - 1; i >= 0; i--) {
    const w = slots[i]!;
    out = out.slice(0, w.start) + shellQuote(filled[i]!) + out.slice(w.end);
  }
  return out;
}

// ---------------------------------------------------------------- the process's known secrets

const known = new Set<string>();
// The secrets as they were when `sorted` was made: rebuilt only when one is added.
let sorted: string[] | null = null;

/**
 * Registers a secret value: from now on it is cut out of every output of this process, as given and
 * as a URL or a form would encode it (`p=ss` is `p%3Dss` in a URL's user info).
 */
export function addSecret(value: string | undefined | null): void {
  for (const v of encodedForms(value))
    if (!known.has(v)) {
      known.add(v);
      sorted = null;
    }
}

/** A value and the forms it takes in a URL: percent-encoded, form-encoded, and decoded when it was encoded. */
function encodedForms(value: string | undefined | null): string[] {
  if (!value || value.length < 4 || !usable(value)) return [];
  const out = new Set([value, encodeURIComponent(value), new URLSearchParams({ v: value }).toString().slice(2)]);
  try {
    const u = new URL("http://h");
    u.password = value;
    out.add(u.password);
    const d = decodeURIComponent(value);
    if (d.length >= 4 && usable(d)) out.add(d);
  } catch {}
  return [...out];
}

/** Registers every secret in a shell command and returns the command as it may be shown. */
export function registerCommandSecrets(cmd: string | undefined): string | undefined {
  if (cmd === undefined) return undefined;
  const s = sealCommand(cmd);
  for (const x of s.secrets) addSecret(x.value);
  return s.shown;
}

/**
 * Registers every secret in this process's own arguments (`--api-key K`, `--base-url http://u:P@h/?key=Q`,
 * `--telemetry dcgm:http://u:P@…`, `--server-cmd '… --hf-token T'`, `--header 'Authorization: …'`), so no
 * output of the run shows them, whatever path a value takes to get there.
 */
export function registerArgvSecrets(argv: readonly string[]): void {
  for (const s of secretsInArgs(argv)) addSecret(s.value);
}

let envKey: string | undefined;

function secretsNow(extra: readonly string[]): string[] {
  // OPENAI_API_KEY is every command's default key.
  const env = process.env.OPENAI_API_KEY;
  if (env !== envKey) {
    envKey = env;
    addSecret(env);
  }
  if (extra.length === 0) return (sorted ??= byLength([...known]));
  const s = new Set(known);
  for (const e of extra) for (const v of encodedForms(e)) s.add(v);
  return byLength([...s]);
}

// Longest first, so a secret containing another is replaced whole.
function byLength(list: string[]): string[] {
  return list.sort((a, b) => b.length - a.length);
}

function redactWithin(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const s of secrets) if (out.includes(s)) out = out.split(s).join(REDACTED);
  // Free text (a log line, an error body, a message quoting a command): the same structural rules on its
  // whitespace-separated words, a value's surrounding quotes and punctuation kept.
  const parts = out.split(/(\s+)/);
  const words: string[] = [];
  const lead: number[] = [];
  for (let i = 0; i < parts.length; i += 2) {
    // Quotes are not part of a value; other punctuation is kept, so `(--api-key …)` or `--api-key,` in a
    // sentence is prose, not a flag with its value.
    const p = parts[i]!;
    const w = p.replace(/^["']+/, "");
    lead.push(p.length - w.length);
    words.push(w.replace(/["']+$/, ""));
  }
  const spots = secretsInArgs(words, { prose: true });
  if (!spots.length) return out;
  for (const [k, list] of byWord(spots)) {
    const at = lead[k]!;
    parts[2 * k] = replaceSpots(parts[2 * k]!, shift(list, at), () => REDACTED);
  }
  return parts.join("");
}

/** Text with every known secret and every structurally marked secret value replaced by `[redacted]`. */
export function redactString(text: string, extra: readonly string[] = []): string {
  return redactWithin(text, secretsNow(extra));
}

/**
 * A deep copy with secrets removed: fields named as credentials (`apiKey`, `HF_TOKEN`, `authorization`)
 * blanked, argument lists redacted by structure (`["--api-key", "KEY"]`), every string redacted.
 */
export function redact<T>(value: T, extra: readonly string[] = []): T {
  const secrets = secretsNow(extra);
  const walk = (v: unknown, depth: number): unknown => {
    if (typeof v === "string") return redactWithin(v, secrets);
    if (depth > 64 || v === null || typeof v !== "object" || v instanceof Date) return v;
    if (Array.isArray(v)) {
      const args = v.every((x) => typeof x === "string") ? redactArgs(v as string[]) : v;
      return args.map((x) => walk(x, depth + 1));
    }
    const o: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v as Record<string, unknown>))
      o[k] = typeof x === "string" && x !== "" && isSecretField(k, x) ? REDACTED : walk(x, depth + 1);
    return o;
  };
  return walk(value, 0) as T;
}

// ---------------------------------------------------------------- keyed hashes for resume

/**
 * How a run remembers its secrets: per secret, HMAC-SHA256 of a per-run salt and the value under this
 * user's key (src/secret-key.ts), never the value. The key stays outside the store, in a file only its
 * owner reads: a store alone cannot test a guess of a short secret. The salt makes one run's hashes say
 * nothing about another's.
 */
export interface SecretSeal {
  /** Which user key made the hashes (its id, not the key). */
  keyId?: string;
  /** 16 random bytes per run, hex. */
  salt?: string;
  /** Runs sealed before the key left the store kept it here: still read, never written. */
  hmacKeyHex?: string;
  /** One entry per secret: where it sits (`variant tok HF_TOKEN`) and the hex HMAC of its value. */
  slots: Array<{ slot: string; hash: string }>;
}

/** A seal for a new run; the user key is read (or made) only once a secret is sealed. */
export function newSeal(): SecretSeal {
  return { salt: randomBytes(16).toString("hex"), slots: [] };
}

export function secretHash(seal: SecretSeal, value: string): string {
  if (seal.hmacKeyHex)
    return createHmac("sha256", Buffer.from(seal.hmacKeyHex, "hex")).update(value, "utf8").digest("hex");
  const k = secretKey();
  seal.keyId ??= k.id;
  if (seal.keyId !== k.id)
    throw new UsageError(
      `this run's secrets were hashed with another key (id ${seal.keyId}) than this user's ${k.path} (id ${k.id})`,
      {
        hint: "resume as the user, on the host, that started the run, or set INFERSCOPE_SECRET_KEY_FILE to a copy of that key file",
      },
    );
  return createHmac("sha256", k.key)
    .update(Buffer.from(seal.salt ?? "", "hex"))
    .update(value, "utf8")
    .digest("hex");
}

/** Records a secret's hash under `slot` (replacing an earlier one). */
export function sealSecret(seal: SecretSeal, slot: string, value: string): void {
  seal.slots = seal.slots.filter((s) => s.slot !== slot);
  seal.slots.push({ slot, hash: secretHash(seal, value) });
}

/** Whether `value` is the secret whose hash the seal holds under `slot` (constant-time compare). */
export function sameSecret(seal: SecretSeal, slot: string, value: string): boolean {
  const want = seal.slots.find((s) => s.slot === slot)?.hash;
  if (!want) return false;
  const a = Buffer.from(secretHash(seal, value), "hex");
  const b = Buffer.from(want, "hex");
  return a.length === b.length && timingSafeEqual(a, b);
}

/** The environment variable a secret may be given in on resume: `HF_TOKEN` for itself, `--hf-token` → `HF_TOKEN`. */
export function envNameFor(name: string): string | null {
  if (/^[A-Za-z_][A-Za-z0-9_]*$/.test(name) && name === name.toUpperCase()) return name;
  if (FLAG.test(name))
    return name
      .replace(/^-+/, "")
      .toUpperCase()
      .replace(/[^A-Z0-9]+/g, "_");
  return null;
}
