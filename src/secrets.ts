// Secrets are identified by where they sit, not by a list of patterns: the value of a flag or an
// environment variable whose name says it holds a credential (`--api-key`, `--hf-token`, `--token`,
// `*_TOKEN`, `*_KEY`, `*_SECRET`, `Authorization`), the word after such a flag even when it is stored
// as a separate array item, and values shaped like a hub or API token (`hf_…`, `sk-…`). Values found
// where they enter (server commands, variants, flags) are registered, so every writer — terminal, run
// store, reports, logs — cuts them out wherever they reappear. A resume compares a secret given again
// by a keyed hash (HMAC-SHA256 with a random key kept with the run), never by the placeholder.
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { shellQuote, shellWords } from "./shell.ts";

export const REDACTED = "[redacted]";

// Last word of a name (split at -, _, ., camelCase) that marks a credential.
const SECRET_LAST = new Set(["token", "key", "secret", "password", "passwd", "credential", "credentials", "apikey"]);
const SECRET_ANY = new Set(["authorization", "cookie", "bearer"]);

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
 * `field`: a JSON field of our own records, where a bare `key` or `token` names something else.
 */
export function isSecretName(name: string, opts: { field?: boolean } = {}): boolean {
  const parts = nameParts(name);
  if (parts.length === 0) return false;
  if (parts.some((p) => SECRET_ANY.has(p))) return true;
  const last = parts.at(-1)!;
  if (!SECRET_LAST.has(last)) return false;
  // Our own records use `key` (a summary's name) and `token` (an SSE chunk) as plain fields.
  if (opts.field && parts.length === 1 && (last === "key" || last === "token")) return /^[A-Z_]+$/.test(name);
  return true;
}

/** A value shaped like a Hugging Face or OpenAI-style token, wherever it appears. */
export function looksLikeSecret(value: string): boolean {
  // A token's tail is random: it has a digit or a capital, where a name like `hf_transfer` has neither.
  return /^(?:hf_(?=[a-z]*[A-Z0-9])[A-Za-z0-9]{10,}|sk-[A-Za-z0-9_-]{8,})$/.test(value);
}

/** A secret found in a word list: word `index` is `prefix` + `value`; `name` says what carried it. */
export interface SecretSpot {
  index: number;
  prefix: string;
  value: string;
  /** `--hf-token`, `HF_TOKEN`, `Authorization`, or `a token-shaped value`. */
  name: string;
}

const FLAG = /^-{1,2}[A-Za-z][\w.-]*$/;
const FLAG_EQ = /^(-{1,2}[A-Za-z][\w.-]*)=(.*)$/s;
const ASSIGN = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/s;
const HEADER = /^([A-Za-z][\w-]*):\s*(?:(bearer|basic|token)\s+)?(.*)$/is;
// Words that stand for a value in our own hints ("--api-key …") and are no secret.
const PLACEHOLDER = /^(?:…|\.\.\.|\[redacted\]|\$\w+|<[^>]*>|\*+)$/i;

function usable(v: string): boolean {
  // "(set HF_TOKEN …)": a parenthesis opens prose, not a value.
  return v !== "" && !v.startsWith("(") && !PLACEHOLDER.test(v);
}

/**
 * The secrets in an argument list, by structure: `--secret-flag VALUE` (the value is the next item),
 * `--secret-flag=VALUE`, `SECRET_NAME=VALUE`, `Authorization: Bearer VALUE` (one item, as `-H` takes
 * it, or `Bearer` then the value), and token-shaped values anywhere.
 */
export function secretsInArgs(words: readonly string[]): SecretSpot[] {
  const out: SecretSpot[] = [];
  for (let i = 0; i < words.length; i++) {
    const w = words[i]!;
    let m: RegExpExecArray | null;
    if (FLAG.test(w) && isSecretName(w)) {
      const next = words[i + 1];
      if (next !== undefined && !FLAG.test(next) && !FLAG_EQ.test(next)) {
        if (usable(next)) out.push({ index: i + 1, prefix: "", value: next, name: w });
        i++;
      }
    } else if ((m = FLAG_EQ.exec(w))) {
      if ((isSecretName(m[1]!) || looksLikeSecret(m[2]!)) && usable(m[2]!))
        out.push({ index: i, prefix: `${m[1]}=`, value: m[2]!, name: m[1]! });
    } else if ((m = ASSIGN.exec(w))) {
      if ((isSecretName(m[1]!) || looksLikeSecret(m[2]!)) && usable(m[2]!))
        out.push({ index: i, prefix: `${m[1]}=`, value: m[2]!, name: m[1]! });
    } else if ((m = HEADER.exec(w)) && isSecretName(m[1]!)) {
      if (usable(m[3]!)) out.push({ index: i, prefix: w.slice(0, w.length - m[3]!.length), value: m[3]!, name: m[1]! });
    } else if (/^bearer$/i.test(w) && words[i + 1] !== undefined) {
      if (usable(words[i + 1]!)) out.push({ index: i + 1, prefix: "", value: words[i + 1]!, name: "Authorization" });
      i++;
    } else if (looksLikeSecret(w)) out.push({ index: i, prefix: "", value: w, name: "a token-shaped value" });
  }
  return out;
}

/** The argument list with every secret's value replaced by the placeholder (`--api-key`, `[redacted]`). */
export function redactArgs(words: readonly string[]): string[] {
  const out = [...words];
  for (const s of secretsInArgs(words)) out[s.index] = s.prefix + REDACTED;
  return out;
}

/** A shell command split into its secrets and the command as it may be shown and stored. */
export interface SealedCommand {
  /** The command with each secret word written as `PREFIX[redacted]`. */
  shown: string;
  secrets: SecretSpot[];
}

/** Finds the secrets in a shell command by its words; an unsplittable command falls back to plain words. */
export function sealCommand(cmd: string): SealedCommand {
  let words: Array<{ text: string; start: number; end: number }>;
  try {
    words = shellWords(cmd);
  } catch {
    words = [...cmd.matchAll(/\S+/g)].map((m) => ({ text: m[0], start: m.index!, end: m.index! + m[0].length }));
  }
  const secrets = secretsInArgs(words.map((w) => w.text));
  let shown = cmd;
  // Right to left, so earlier spans stay valid.
  for (const s of [...secrets].reverse()) {
    const w = words[s.index]!;
    shown = shown.slice(0, w.start) + placeholderWord(s.prefix) + shown.slice(w.end);
  }
  return { shown, secrets };
}

function placeholderWord(prefix: string): string {
  return (prefix === "" || /^[A-Za-z0-9_@%+=:,./-]+$/.test(prefix) ? prefix : shellQuote(prefix)) + REDACTED;
}

/**
 * Puts secrets back into a command stored as `sealCommand(...).shown`: the n-th placeholder word gets
 * `values[n]`. Throws when the counts differ (the stored command was not sealed by us).
 */
export function unsealCommand(shown: string, values: readonly string[]): string {
  const words = shellWords(shown);
  const slots = words.filter((w) => w.text.endsWith(REDACTED));
  if (slots.length !== values.length)
    throw new Error(`the stored command has ${slots.length} hidden values, ${values.length} were given`);
  let out = shown;
  for (let i = slots.length - 1; i >= 0; i--) {
    const w = slots[i]!;
    out = out.slice(0, w.start) + shellQuote(w.text.slice(0, -REDACTED.length) + values[i]!) + out.slice(w.end);
  }
  return out;
}

// ---------------------------------------------------------------- the process's known secrets

const known = new Set<string>();

/** Registers a secret value: from now on it is cut out of every output of this process. */
export function addSecret(value: string | undefined | null): void {
  if (value && value.length >= 4 && usable(value)) known.add(value);
}

/** Registers every secret in a shell command and returns the command as it may be shown. */
export function registerCommandSecrets(cmd: string | undefined): string | undefined {
  if (cmd === undefined) return undefined;
  const s = sealCommand(cmd);
  for (const x of s.secrets) addSecret(x.value);
  return s.shown;
}

function secretsNow(extra: readonly string[]): string[] {
  const s = new Set(known);
  addTo(s, process.env.OPENAI_API_KEY);
  for (const e of extra) addTo(s, e);
  // Longest first, so a secret containing another is replaced whole.
  return [...s].sort((a, b) => b.length - a.length);
}

function addTo(s: Set<string>, v: string | undefined): void {
  if (v && v.length >= 4 && usable(v)) s.add(v);
}

const URL_PASSWORD = /(\/\/[^/\s:@]+):[^@\s/]+@/g;

function redactWithin(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const s of secrets) if (out.includes(s)) out = out.split(s).join(REDACTED);
  // Free text (a log line, an error body, a message quoting a command): the same structural rules on its
  // whitespace-separated words, a value's surrounding quotes and punctuation kept.
  const parts = out.split(/(\s+)/);
  const words: string[] = [];
  const index: number[] = [];
  for (let i = 0; i < parts.length; i += 2) {
    // Quotes are not part of a value; other punctuation is kept, so `(--api-key …)` or `--api-key,` in a
    // sentence is prose, not a flag with its value.
    words.push(parts[i]!.replace(/^["']+/, "").replace(/["']+$/, ""));
    index.push(i);
  }
  const spots = secretsInArgs(words);
  for (const s of spots) {
    const i = index[s.index]!;
    const raw = parts[i]!;
    const at = raw.indexOf(s.prefix + s.value);
    parts[i] =
      at >= 0
        ? raw.slice(0, at) + s.prefix + REDACTED + raw.slice(at + s.prefix.length + s.value.length)
        : s.prefix + REDACTED;
  }
  return (spots.length ? parts.join("") : out).replace(URL_PASSWORD, `$1:${REDACTED}@`);
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
      o[k] = typeof x === "string" && x !== "" && isSecretName(k, { field: true }) ? REDACTED : walk(x, depth + 1);
    return o;
  };
  return walk(value, 0) as T;
}

// ---------------------------------------------------------------- keyed hashes for resume

/**
 * How a run remembers its secrets: a random key and, per secret, HMAC-SHA256(key, value), never the
 * value. The key lives beside the hashes (in the run's config) so a resume can hash a value given again;
 * it makes the hashes differ between runs and stores, so one run's hash says nothing about another's.
 */
export interface SecretSeal {
  /** 32 random bytes, hex. (Named so the redactor, which blanks fields named `…key`, keeps it.) */
  hmacKeyHex: string;
  /** One entry per secret: where it sits (`variant tok HF_TOKEN`) and the hex HMAC of its value. */
  slots: Array<{ slot: string; hash: string }>;
}

export function newSeal(): SecretSeal {
  return { hmacKeyHex: randomBytes(32).toString("hex"), slots: [] };
}

export function secretHash(seal: SecretSeal, value: string): string {
  return createHmac("sha256", Buffer.from(seal.hmacKeyHex, "hex")).update(value, "utf8").digest("hex");
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
