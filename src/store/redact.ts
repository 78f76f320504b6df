// Secrets never reach the store, the report or the logs: every JSON value and log line passes here.

const SECRET_KEY = /(api[-_]?key|authorization|password|passwd|secret|access[-_]?token|bearer)/i;
const PATTERNS: Array<[RegExp, string]> = [
  [/(--api[-_]key[= ]+)("[^"]*"|'[^']*'|\S+)/gi, "$1[redacted]"],
  [/(Bearer\s+)[A-Za-z0-9._~+/=-]+/g, "$1[redacted]"],
  [/\b([A-Z0-9_]*(?:API_KEY|TOKEN|SECRET|PASSWORD)=)("[^"]*"|'[^']*'|[^\s,]+)/g, "$1[redacted]"],
  [/\bsk-[A-Za-z0-9_-]{8,}/g, "[redacted]"],
];

/** The secrets this process knows of: OPENAI_API_KEY and anything registered with addSecret. */
const known = new Set<string>();
export function addSecret(value: string | undefined): void {
  if (value && value.length >= 4) known.add(value);
}

function secretsNow(extra: readonly string[]): string[] {
  const s = new Set(known);
  const env = process.env.OPENAI_API_KEY;
  if (env && env.length >= 4) s.add(env);
  for (const e of extra) if (e && e.length >= 4) s.add(e);
  // Longest first, so a secret containing another is replaced whole.
  return [...s].sort((a, b) => b.length - a.length);
}

export function redactString(text: string, extra: readonly string[] = []): string {
  let out = text;
  for (const s of secretsNow(extra)) out = out.split(s).join("[redacted]");
  for (const [re, rep] of PATTERNS) out = out.replace(re, rep);
  return out;
}

/** A deep copy with secret-named fields replaced and known secret values cut out of every string. */
export function redact<T>(value: T, extra: readonly string[] = []): T {
  const secrets = secretsNow(extra);
  const walk = (v: unknown): unknown => {
    if (typeof v === "string") {
      let out = v;
      for (const s of secrets) out = out.split(s).join("[redacted]");
      for (const [re, rep] of PATTERNS) out = out.replace(re, rep);
      return out;
    }
    if (Array.isArray(v)) return v.map(walk);
    if (v && typeof v === "object" && !(v instanceof Date)) {
      const o: Record<string, unknown> = {};
      for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
        o[k] = SECRET_KEY.test(k) && x !== undefined && x !== null && x !== "" ? "[redacted]" : walk(x);
      }
      return o;
    }
    return v;
  };
  return walk(value) as T;
}
