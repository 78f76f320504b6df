// What a run stores of its target (server command, variants) has its secrets replaced by the placeholder
// and remembered as keyed hashes; a resume takes each secret again — from the same flag given again or
// from the environment — checks it against the hash, and never starts a server with the placeholder.
import { UsageError } from "../errors.ts";
import {
  addSecret,
  envNameFor,
  fillPlaceholders,
  newSeal,
  placeholderCount,
  REDACTED,
  redactArgs,
  type SecretSeal,
  sameSecret,
  sealCommand,
  sealSecret,
  secretsInArgs,
  unsealCommand,
} from "../secrets.ts";
import type { VariantSpec } from "./variants.ts";

/** A secret of a variant: where it sits and the name that carried it (`HF_TOKEN`, `--api-key`). */
interface VariantSecret {
  slot: string;
  name: string;
  value: string;
}

/** The slot of the k-th secret in a variant's argument `i` (`…|arg|3|--api-key`; `…|arg|3.1|…` for a second one there). */
function argSlotHead(variant: string, i: number, k: number): string {
  return `variant|${variant}|arg|${k === 0 ? i : `${i}.${k}`}|`;
}

/** The slot of the k-th secret in a variant's environment variable (`…|env|HF_TOKEN`; `…|env|DB_URL#1` for a second one). */
function envSlot(variant: string, name: string, k: number): string {
  return `variant|${variant}|env|${name}${k === 0 ? "" : `#${k}`}`;
}

function variantSecrets(v: VariantSpec): VariantSecret[] {
  const out: VariantSecret[] = [];
  // `NAME=VALUE` by the rules of an argument: the whole value (HF_TOKEN=…), or what sits inside it (a URL's password).
  for (const [name, value] of Object.entries(v.env))
    secretsInArgs([`${name}=${value}`]).forEach((s, k) => {
      out.push({ slot: envSlot(v.name, name, k), name, value: s.value });
    });
  let word = -1;
  let k = 0;
  for (const s of secretsInArgs(v.args)) {
    k = s.index === word ? k + 1 : 0;
    word = s.index;
    out.push({ slot: `${argSlotHead(v.name, s.index, k)}${s.name}`, name: s.name, value: s.value });
  }
  return out;
}

/** A variant with its secrets replaced by the placeholder (what is shown and stored). */
export function sealVariant(v: VariantSpec): VariantSpec {
  const env: Record<string, string> = {};
  for (const [k, value] of Object.entries(v.env)) env[k] = redactArgs([`${k}=${value}`])[0]!.slice(k.length + 1);
  return { ...v, env, args: redactArgs(v.args) };
}

/** Registers a variant's secrets, so every output of this process cuts them out. */
export function registerVariantSecrets(v: VariantSpec): void {
  for (const s of variantSecrets(v)) addSecret(s.value);
}

/** The target as stored: command and variants sealed, and the keyed hashes (null when there is no secret). */
export interface SealedTarget {
  serverCmd: string | null;
  variants: VariantSpec[];
  sealed: SecretSeal | null;
}

export function sealTarget(serverCmd: string | null | undefined, variants: readonly VariantSpec[]): SealedTarget {
  const seal = newSeal();
  let shown: string | null = null;
  if (serverCmd != null) {
    const c = sealCommand(serverCmd);
    shown = c.shown;
    c.secrets.forEach((s, i) => {
      addSecret(s.value);
      sealSecret(seal, `server-cmd|${i}|${s.name}`, s.value);
    });
  }
  const out = variants.map((v) => {
    for (const s of variantSecrets(v)) {
      addSecret(s.value);
      sealSecret(seal, s.slot, s.value);
    }
    return sealVariant(v);
  });
  return { serverCmd: shown, variants: out, sealed: seal.slots.length ? seal : null };
}

/** How a secret may be given again, for the message that asks for it. */
function howToGive(name: string, flag: string): string {
  const env = envNameFor(name);
  return env ? `set ${env} in the environment or pass the same ${flag} again` : `pass the same ${flag} again`;
}

/**
 * The stored target with its secrets restored for a resume. Each comes from `given` (the same
 * `--server-cmd` / `--variant` passed again; its shape must match the stored one) or from the
 * environment (`HF_TOKEN` for `HF_TOKEN=…`, `HF_TOKEN` for `--hf-token …`), and must match the run's
 * keyed hash. A secret nowhere to be found, or a different one, is a usage error naming it.
 */
export function unsealTarget(
  runId: string,
  stored: SealedTarget,
  given: { serverCmd?: string; variants?: readonly VariantSpec[] },
  env: NodeJS.ProcessEnv = process.env,
): { serverCmd: string | null; variants: VariantSpec[] } {
  const seal = stored.sealed;
  const missing: string[] = [];
  const wrong: string[] = [];
  const pick = (slot: string, what: string, name: string, flag: string, again: string | undefined): string | null => {
    if (!seal) {
      // A run stored before secrets were hashed: the same flag given again is taken on trust.
      if (again !== undefined) {
        addSecret(again);
        return again;
      }
      missing.push(`${what} (this run stored no hash of it: pass the same ${flag} again)`);
      return null;
    }
    const envName = envNameFor(name);
    const fromEnv = envName ? env[envName] : undefined;
    const value = again ?? (fromEnv !== undefined && fromEnv !== "" ? fromEnv : undefined);
    if (value === undefined) {
      missing.push(`${what} (${howToGive(name, flag)})`);
      return null;
    }
    if (!sameSecret(seal, slot, value)) {
      const from = again !== undefined ? `the ${flag} given` : `${envName} in the environment`;
      wrong.push(`${what}: ${from} is not the secret the run started with (compared by keyed hash)`);
      return null;
    }
    addSecret(value);
    return value;
  };

  let serverCmd = stored.serverCmd;
  if (serverCmd?.includes(REDACTED)) {
    const again = given.serverCmd !== undefined ? sealCommand(given.serverCmd) : null;
    const same = again && again.shown === serverCmd ? again : null;
    const slots = seal?.slots.filter((s) => s.slot.startsWith("server-cmd|")) ?? [];
    const count = seal ? slots.length : (serverCmd.match(/\[redacted\]/g) ?? []).length;
    const values: string[] = [];
    for (let i = 0; i < count; i++) {
      const name = slots[i]?.slot.split("|").slice(2).join("|") ?? "a hidden value";
      const v = pick(
        slots[i]?.slot ?? "",
        `--server-cmd's ${name}`,
        name,
        "--server-cmd",
        same ? same.secrets[i]?.value : undefined,
      );
      if (v !== null) values.push(v);
    }
    if (!missing.length && !wrong.length) {
      // The command given again is the original text itself; from the environment, the values go back in place.
      if (same) serverCmd = given.serverCmd!;
      else {
        try {
          serverCmd = unsealCommand(serverCmd, values);
        } catch {
          missing.push("--server-cmd (its stored text hides values this run has no hash for: pass it again)");
        }
      }
    }
  }

  const variants = stored.variants.map((v) => {
    const holes = variantSecretSlots(v, seal);
    if (!holes.length) return v;
    const g = given.variants?.find((x) => x.name === v.name);
    const same = g && describeSealed(sealVariant(g)) === describeSealed(v) ? variantSecrets(g) : null;
    const out: VariantSpec = { ...v, env: { ...v.env }, args: [...v.args] };
    for (const h of holes) {
      const again = same?.find((s) => s.slot === h.slot)?.value;
      const value = pick(h.slot, `variant "${v.name}": ${h.name}`, h.name, `--variant ${v.name}:…`, again);
      if (value !== null) h.put(out, value);
    }
    return out;
  });

  if (missing.length || wrong.length)
    throw new UsageError(
      `--resume ${runId}: ${[
        ...(missing.length
          ? [`the run needs ${missing.length === 1 ? "a secret" : "secrets"} it does not store: ${missing.join("; ")}`]
          : []),
        ...wrong,
      ].join("; ")}`,
      { hint: "secrets are never stored; the run keeps only a keyed hash of each to check the one given again" },
    );
  return { serverCmd, variants };
}

/** A placeholder of a stored variant and how to fill it. */
interface VariantHole {
  slot: string;
  name: string;
  put: (v: VariantSpec, value: string) => void;
}

/** The placeholders of a stored (sealed) variant, with how to fill each; names come from the seal's slots. */
function variantSecretSlots(v: VariantSpec, seal: SecretSeal | null): VariantHole[] {
  const out: VariantHole[] = [];
  for (const [k, value] of Object.entries(v.env))
    for (let n = 0; n < placeholderCount(value); n++)
      out.push({ slot: envSlot(v.name, k, n), name: k, put: (x, val) => (x.env[k] = fillFirst(x.env[k]!, val)) });
  v.args.forEach((a, i) => {
    for (let k = 0; k < placeholderCount(a); k++) {
      const head = argSlotHead(v.name, i, k);
      const slot =
        seal?.slots.find((s) => s.slot.startsWith(head))?.slot ?? `${head}${v.args[i - 1] ?? "a hidden value"}`;
      out.push({
        slot,
        name: slot.slice(head.length),
        put: (x, val) => {
          x.args[i] = fillFirst(x.args[i]!, val);
        },
      });
    }
  });
  return out;
}

/** Holes are filled in order, so the first placeholder left in a word is the one to fill. */
function fillFirst(word: string, value: string): string {
  let n = 0;
  return fillPlaceholders(word, () => (n++ === 0 ? value : REDACTED));
}

function describeSealed(v: VariantSpec): string {
  return JSON.stringify([v.url ?? null, Object.entries(v.env).sort(), v.args]);
}
