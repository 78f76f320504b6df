// From a sweep's knee to tune's search space (pure): the binding limits' knobs, as `--knob` values around the
// server's current setting (from its command, or the ceiling the sweep saw), and the `inferscope tune` command
// that searches them with restarts. A limit no restart of the same server can relieve (compute: more GPUs) is
// named in the notes instead.
import { shellQuote } from "../shell.ts";
import type { LimitId } from "./diagnose.ts";

export interface TuneHandoff {
  /** `--knob` values for `inferscope tune` (its grammar: `--flag=a,b`, `--switch` off then on). */
  knobs: string[];
  /** The tune command to run, or null without a server command to restart. */
  command: string | null;
  notes: string[];
}

export interface HandoffInput {
  engine: string | null;
  limits: readonly LimitId[];
  serverCmd: string | null;
  /** The batch ceiling now (given, stated by the server or observed) and the step token budget, when known. */
  ceiling: number | null;
  tokenBudget: number | null;
}

const times = (x: number, ks: number[]) => ks.map((k) => String(Math.round(x * k))).join(",");

/** Per engine and limit: the knob values to try, from the current setting (null: none can be formed). */
const KNOBS: Record<string, Partial<Record<LimitId, (i: HandoffInput) => string[] | string | null>>> = {
  vllm: {
    "max-num-seqs": (i) => (i.ceiling ? [`--max-num-seqs=${times(i.ceiling, [1, 2, 4])}`] : null),
    "kv-capacity": () => ["--gpu-memory-utilization=0.9,0.95", "--kv-cache-dtype=auto,fp8"],
    "token-budget": (i) =>
      i.tokenBudget
        ? [`--max-num-batched-tokens=${times(i.tokenBudget, [1, 2, 4])}`]
        : "the token budget (--max-num-batched-tokens) was not given: give it in --server-cmd to search around it",
    host: () => ["--async-scheduling"],
  },
  sglang: {
    "max-num-seqs": (i) => (i.ceiling ? [`--max-running-requests=${times(i.ceiling, [1, 2, 4])}`] : null),
    "kv-capacity": () => ["--mem-fraction-static=0.85,0.9", "--kv-cache-dtype=auto,fp8_e5m2"],
    "token-budget": (i) =>
      i.tokenBudget
        ? [`--chunked-prefill-size=${times(i.tokenBudget, [1, 2, 4])}`]
        : "the chunked-prefill size was not given: give --chunked-prefill-size in --server-cmd to search around it",
  },
  llamacpp: {
    "max-num-seqs": (i) =>
      i.ceiling
        ? [`--parallel=${times(i.ceiling, [1, 2, 4])}`]
        : "the slot count (-np) is unknown: give it in --server-cmd",
    "token-budget": (i) => (i.tokenBudget ? [`--batch-size=${times(i.tokenBudget, [1, 2, 4])}`] : null),
  },
};

const NOT_BY_RESTART: Partial<Record<LimitId, string>> = {
  compute:
    "compute binds: no flag of the same server relieves it; more GPUs (tensor or data parallel), a lower-precision checkpoint or a faster device do",
  client: "the client binds: run inferscope with more --workers or from a second host, then sweep again",
  power: "power binds: the board's power limit and cooling, not a server flag",
};

export function tuneHandoff(i: HandoffInput): TuneHandoff {
  const knobs: string[] = [];
  const notes: string[] = [];
  const table = KNOBS[i.engine ?? ""] ?? {};
  for (const l of i.limits) {
    const why = NOT_BY_RESTART[l];
    if (why) {
      notes.push(why);
      continue;
    }
    const k = table[l]?.(i);
    if (Array.isArray(k)) knobs.push(...k.filter((x) => !knobs.includes(x)));
    else if (typeof k === "string") notes.push(k);
    else notes.push(`${l}: no tune knob is known for ${i.engine ?? "this engine"}`);
  }
  if (
    knobs.length &&
    (i.limits.includes("kv-capacity") || i.limits.includes("max-num-seqs")) &&
    i.engine === "llamacpp"
  )
    notes.push("llama.cpp splits --ctx-size over its slots: raise -c with --parallel, or each slot's context shrinks");
  const command =
    knobs.length && i.serverCmd
      ? `inferscope tune --server-cmd ${shellQuote(i.serverCmd)} ${knobs.map((k) => `--knob ${shellQuote(k)}`).join(" ")}`
      : null;
  if (knobs.length && !i.serverCmd) notes.push("tune restarts the server per candidate: it needs --server-cmd");
  return { knobs, command, notes };
}
