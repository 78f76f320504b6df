// Knobs and candidates for `inferscope tune`: the --knob grammar, the product of the knobs, and the
// rules that prune impossible or redundant candidates (each skip says why). The first value of every
// knob is the baseline's.
import { UsageError } from "../errors.ts";
import { shellQuote } from "../experiment/variants.ts";

export interface KnobValue {
  /** What the value is called in tables: "unset", "LL", "2", "on", "off". */
  label: string;
  /** The value the knob takes: an env value, a flag argument; null = unset / flag absent / switch off. */
  value: string | null;
}

export interface KnobSpec {
  /** The --knob text as given (or the registry's). */
  text: string;
  kind: "env" | "flag" | "switch";
  /** NCCL_PROTO, --spec-tokens, --enforce-eager. */
  name: string;
  values: KnobValue[];
}

export interface Candidate {
  /** c0 = the baseline. */
  id: string;
  /** Human name: "baseline", or the changes from it ("NCCL_PROTO=LL --spec-tokens 2"). */
  name: string;
  /** The value label each knob takes, by knob name. */
  settings: Record<string, string>;
  /** Environment set for the server. */
  env: Record<string, string>;
  /** Environment variables removed (an empty knob item). */
  unset: string[];
  /** Arguments appended to the server command. */
  args: string[];
  /** Why the candidate is not run (impossible, or the same server as another), or null. */
  skipped: string | null;
}

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const FLAG_NAME = /^--?[A-Za-z0-9][A-Za-z0-9_.-]*$/;

/**
 * One --knob: `ENV=a,b,c` (an empty item = unset), `--flag=a,b` (`--flag a`; an empty item = the flag
 * left out) or `--switch` (off, then on).
 */
export function parseKnob(text: string): KnobSpec {
  const t = text.trim();
  if (!t) throw new UsageError("--knob is empty", { hint: "write ENV=a,b, --flag=a,b or --switch" });
  const eq = t.indexOf("=");
  if (t.startsWith("-")) {
    const name = eq < 0 ? t : t.slice(0, eq);
    if (!FLAG_NAME.test(name))
      throw new UsageError(`--knob "${text}": "${name}" is not a flag name`, { hint: "write --flag=a,b or --switch" });
    if (eq < 0)
      return {
        text: t,
        kind: "switch",
        name,
        values: [
          { label: "off", value: null },
          { label: "on", value: "" },
        ],
      };
    return { text: t, kind: "flag", name, values: items(text, t.slice(eq + 1), "absent") };
  }
  if (eq <= 0)
    throw new UsageError(`--knob "${text}" is neither ENV=a,b nor --flag=a,b nor --switch`, {
      hint: "examples: --knob NCCL_PROTO=,LL,Simple --knob --spec-tokens=0,2 --knob --enforce-eager",
    });
  const name = t.slice(0, eq);
  if (!ENV_NAME.test(name)) throw new UsageError(`--knob "${text}": "${name}" is not an environment variable name`);
  return { text: t, kind: "env", name, values: items(text, t.slice(eq + 1), "unset") };
}

function items(text: string, list: string, emptyLabel: string): KnobValue[] {
  const raw = list.split(",").map((s) => s.trim());
  if (raw.length < 2)
    throw new UsageError(`--knob "${text}" has one value: a knob needs at least two`, {
      hint: "give the values to compare, e.g. NCCL_PROTO=,LL (an empty item means unset)",
    });
  const seen = new Set<string>();
  return raw.map((v) => {
    if (seen.has(v)) throw new UsageError(`--knob "${text}": value "${v || "(empty)"}" is given twice`);
    seen.add(v);
    if (/[\0\r\n]/.test(v)) throw new UsageError(`--knob "${text}": a value holds a control character`);
    return v === "" ? { label: emptyLabel, value: null } : { label: v, value: v };
  });
}

/** What the deployment is known to be, for the pruning rules (null = unknown: the rule does not fire). */
export interface PruneContext {
  engine: string | null;
  tp: number | null;
  gpus: number | null;
  hostCores: number | null;
  /** Whether the deployment runs collectives (TP or EP > 1 on an NCCL engine); null = unknown. */
  collectives: boolean | null;
}

interface Setting {
  knob: KnobSpec;
  value: KnobValue;
}

/** The product of the knobs, the baseline (every first value) first; pruned by the rules. */
export function candidates(knobs: KnobSpec[], ctx: PruneContext, maxCandidates = 256): Candidate[] {
  if (!knobs.length) throw new UsageError("tune needs at least one --knob (or a deployment whose engine has knobs)");
  const names = new Set<string>();
  for (const k of knobs) {
    if (names.has(k.name)) throw new UsageError(`--knob ${k.name} is given twice: put all its values in one --knob`);
    names.add(k.name);
  }
  const total = knobs.reduce((n, k) => n * k.values.length, 1);
  if (total > maxCandidates)
    throw new UsageError(`the knobs make ${total} candidates (more than ${maxCandidates})`, {
      hint: "give fewer values, or tune in two passes",
    });
  const out: Candidate[] = [];
  for (let i = 0; i < total; i++) {
    let rest = i;
    const settings: Setting[] = knobs.map((k) => {
      const v = k.values[rest % k.values.length]!;
      rest = Math.floor(rest / k.values.length);
      return { knob: k, value: v };
    });
    const c = build(`c${i}`, settings);
    c.skipped = pruneReason(settings, ctx);
    out.push(c);
  }
  return out;
}

function build(id: string, settings: Setting[]): Candidate {
  const env: Record<string, string> = {};
  const unset: string[] = [];
  const args: string[] = [];
  const changes: string[] = [];
  const bySettings: Record<string, string> = {};
  for (const { knob, value } of settings) {
    bySettings[knob.name] = value.label;
    const isBase = value === knob.values[0];
    if (knob.kind === "env") {
      if (value.value === null) unset.push(knob.name);
      else env[knob.name] = value.value;
      if (!isBase) changes.push(value.value === null ? `${knob.name} unset` : `${knob.name}=${value.value}`);
    } else if (knob.kind === "switch") {
      if (value.value !== null) args.push(knob.name);
      if (!isBase) changes.push(value.value === null ? `no ${knob.name}` : knob.name);
    } else {
      if (value.value !== null) args.push(knob.name, value.value);
      if (!isBase) changes.push(value.value === null ? `no ${knob.name}` : `${knob.name} ${shellQuote(value.value)}`);
    }
  }
  return {
    id,
    name: changes.length ? changes.join(" ") : "baseline",
    settings: bySettings,
    env,
    unset,
    args,
    skipped: null,
  };
}

const COLLECTIVE_ENV = /^(NCCL|RCCL)_/;

/** Why a combination cannot run, or is the baseline's server under another name; null when it may run. */
export function pruneReason(settings: Setting[], ctx: PruneContext): string | null {
  const val = (name: string) => settings.find((s) => s.knob.name === name)?.value.value;
  for (const { knob, value } of settings) {
    const isBase = value === knob.values[0];
    if (knob.kind === "env" && COLLECTIVE_ENV.test(knob.name) && !isBase && ctx.collectives === false)
      return `${knob.name} only changes collectives, and this deployment runs none (${ctx.engine === "llamacpp" ? "llama.cpp uses no NCCL" : `TP ${ctx.tp ?? 1}`})`;
    if (knob.name === "NCCL_PROTO" && value.value !== null) {
      const bad = value.value
        .replace(/^\^/, "")
        .split(",")
        .filter((p) => !/^(LL|LL128|Simple)$/i.test(p));
      if (bad.length) return `NCCL_PROTO=${value.value}: NCCL knows LL, LL128 and Simple`;
    }
    if (knob.name === "NCCL_ALGO" && value.value !== null) {
      const bad = value.value
        .replace(/^\^/, "")
        .split(",")
        .filter((p) => !/^(Ring|Tree|CollNetDirect|CollNetChain|NVLS|NVLSTree|PAT)$/i.test(p));
      if (bad.length) return `NCCL_ALGO=${value.value}: not an NCCL algorithm`;
    }
  }
  const num = (name: string) => {
    const v = val(name);
    return v === undefined || v === null ? null : Number(v);
  };
  const threads = num("--threads") ?? num("-t");
  if (threads !== null && ctx.hostCores !== null && threads > ctx.hostCores)
    return `--threads ${threads} is more than the host's ${ctx.hostCores} cores`;
  if (threads !== null && !(Number.isInteger(threads) && threads >= 1)) return `--threads ${threads} is not a count`;
  const ub = num("--ubatch-size") ?? num("-ub");
  const b = num("--batch-size") ?? num("-b");
  if (ub !== null && b !== null && ub > b) return `--ubatch-size ${ub} is larger than --batch-size ${b}`;
  const tp = num("--tensor-parallel-size") ?? num("--tp") ?? num("-tp") ?? num("--tp-size");
  if (tp !== null && ctx.gpus !== null && (tp > ctx.gpus || ctx.gpus % tp !== 0))
    return `TP ${tp} does not divide the ${ctx.gpus} GPUs`;
  const spec = num("--spec-tokens") ?? num("--num-speculative-tokens");
  if (spec !== null && !(Number.isInteger(spec) && spec >= 0)) return `--spec-tokens ${spec} is not a count`;
  return null;
}

/** A candidate's changes in the `ab` --variant grammar (for a confirming A/B), without the name. */
export function variantText(c: Pick<Candidate, "env" | "args">): string {
  const parts = [...Object.entries(c.env).map(([k, v]) => `${k}=${v}`)];
  const env = parts.join(",");
  const args = c.args.map(shellQuote).join(" ");
  return [env, args].filter(Boolean).join(" ");
}

/** The exact command that runs a candidate: its env, the server command, its flags. */
export function commandFor(c: Candidate, serverCmd: string): string {
  const env = Object.entries(c.env).map(([k, v]) => `${k}=${shellQuote(v)}`);
  const unset = c.unset.length ? [`env ${c.unset.map((u) => `-u ${u}`).join(" ")}`] : [];
  return [...unset, ...env, serverCmd, ...c.args.map(shellQuote)].join(" ");
}
