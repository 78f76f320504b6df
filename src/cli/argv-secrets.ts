// A secret on inferscope's own command line (`--api-key K`, a URL's password, a token in --server-cmd)
// is readable by every local user in `ps` and /proc/PID/cmdline while the process runs. Linux lets a
// process rewrite that area (Node's process.title, at most as long as the original), so at start each
// secret there is overwritten by a placeholder no longer than itself. Measured on Linux (Node 20): after
// the rewrite `ps -o args` and /proc/PID/cmdline show `--api-key [redacted]`; before it — the time Node
// and the CLI take to load: 1.5–2.7 s through tsx on a 2-core host at load 12 — the key is visible,
// and the shell's history keeps it.
// The process name (`ps -o comm`) becomes the first 15 bytes of the rewritten line.
import { readFileSync } from "node:fs";
import { REDACTED, secretsInArgs } from "../secrets.ts";

let hidden: boolean | null = null;

/**
 * Overwrites the secrets in this process's command line as `ps` shows it. Returns whether the line now
 * holds none (false where the platform has no /proc to rewrite and read back), or null when it held none.
 */
export function hideArgvSecrets(): boolean | null {
  let words: string[];
  try {
    words = readFileSync("/proc/self/cmdline", "latin1").split("\0");
  } catch {
    return (hidden = secretsInArgs(process.argv).length ? false : null);
  }
  if (words.at(-1) === "") words.pop();
  const spots = secretsInArgs(words);
  if (!spots.length) return (hidden = null);
  const values = spots.map((s) => s.value);
  const out = [...words];
  // Right to left within a word, so earlier offsets stay valid.
  for (const s of [...spots].sort((a, b) => b.index - a.index || b.start - a.start)) {
    const len = s.end - s.start;
    // Never longer than the value: the rewritten line may not outgrow the original.
    const mark = REDACTED.length <= len ? REDACTED : "*".repeat(len);
    out[s.index] = out[s.index]!.slice(0, s.start) + mark + out[s.index]!.slice(s.end);
  }
  try {
    process.title = out.join(" ");
    const now = readFileSync("/proc/self/cmdline", "latin1");
    hidden = !values.some((v) => now.includes(v));
  } catch {
    hidden = false;
  }
  return hidden;
}

/** What hideArgvSecrets did in this process (null: nothing to hide, or not called). */
export function argvSecretsHidden(): boolean | null {
  return hidden;
}
