// Which A/B fits this deployment (pure): the user's --variant arms, or the first knob of the engine's
// registry (src/metrics/engines/*.ts) whose needs the discovered deployment meets.
import { parseVariant } from "../experiment/variants.ts";
import { engineById, type Knob, type KnobNeed } from "../metrics/engines/index.ts";
import type { ExperimentPlan } from "../report/types.ts";
import { type Discovery, hasCollectives } from "./detect.ts";

export interface ChosenExperiment {
  plan: ExperimentPlan;
  /** The two arms in `ab`'s --variant grammar (baseline first), or null when none applies. */
  arms: [string, string] | null;
  mechanism?: string;
  collective: boolean;
  affects?: Knob["affects"];
}

/** Why a knob's need is not met here, or null when it is. */
export function unmetNeed(need: KnobNeed, d: Discovery): string | null {
  switch (need) {
    case "collectives": {
      const c = hasCollectives(d);
      if (c === true) return null;
      if (c === false)
        return d.engine.value === "llamacpp"
          ? "llama.cpp splits layers across devices and uses no NCCL collectives"
          : `TP ${d.tp.value}: no collectives to attribute`;
      return "TP unknown (give --tp, or a server command with its TP flag): cannot tell whether there are collectives";
    }
    case "gpu":
      return d.deviceKind.value === "gpu"
        ? null
        : d.deviceKind.value === "cpu"
          ? "the server runs on a CPU"
          : "device unknown (give --gpu or --hardware)";
    case "cpu":
      return d.deviceKind.value === "cpu"
        ? null
        : d.deviceKind.value === "gpu"
          ? "the server runs on a GPU"
          : "device unknown";
    case "threads-below-cores": {
      const t = d.threads.value;
      const c = d.hostCores.value;
      if (t === null) return "the server command does not set --threads (llama.cpp picks its own default)";
      if (c === null) return "the host's core count is unknown (the server is not on this machine)";
      return t < c ? null : `--threads ${t} already uses all ${c} cores`;
    }
    default:
      return `unknown need "${need as string}"`;
  }
}

function fill(change: string, d: Discovery): string {
  return change.replace(/\{cores\}/g, String(d.hostCores.value ?? ""));
}

const COLLECTIVE_ENV = /^(NCCL|RCCL|TORCH_NCCL|VLLM_ALLREDUCE|VLLM_USE_CUSTOM_ALL_REDUCE)/;
const COLLECTIVE_ARG = /all-reduce|allreduce|nccl/i;

/** Whether a --variant arm changes a collective (NCCL/RCCL environment, an all-reduce flag). */
export function variantTouchesCollective(text: string): boolean {
  const v = parseVariant(text);
  return Object.keys(v.env).some((k) => COLLECTIVE_ENV.test(k)) || v.args.some((a) => COLLECTIVE_ARG.test(a));
}

export function chooseExperiment(d: Discovery, variants: string[] = []): ChosenExperiment {
  const engine = d.engine.value ? engineById(d.engine.value) : undefined;
  const candidates = (engine?.knobs ?? []).map((k) => {
    const unmet = k.needs.map((n) => unmetNeed(n, d)).filter((x): x is string => x !== null);
    return {
      knob: k,
      row: {
        id: k.id,
        variant: fill(k.change, d),
        mechanism: k.mechanism,
        applies: unmet.length === 0,
        why: unmet.length ? unmet.join("; ") : `applies (${k.needs.length ? k.needs.join(", ") : "any deployment"})`,
      },
    };
  });
  const rows = candidates.map((c) => c.row);
  if (variants.length) {
    if (variants.length !== 2)
      throw new Error(`the study's A/B takes two --variant arms (baseline first); got ${variants.length}`);
    const [a, b] = variants as [string, string];
    const collective = variantTouchesCollective(a) || variantTouchesCollective(b);
    return {
      plan: {
        engine: d.engine.value,
        chosen: "given",
        reason: "arms given by --variant",
        candidates: rows,
      },
      arms: [a, b],
      mechanism: "given by --variant",
      collective: collective && hasCollectives(d) === true,
    };
  }
  if (!engine)
    return {
      plan: {
        engine: null,
        chosen: null,
        reason: "engine unknown (give --engine): no experiment registry to choose from; pass two --variant arms",
        candidates: [],
      },
      arms: null,
      collective: false,
    };
  const first =
    candidates.find((c) => c.row.applies && c.knob.affects === "decode") ?? candidates.find((c) => c.row.applies);
  if (!first)
    return {
      plan: {
        engine: engine.id,
        chosen: null,
        reason: `no ${engine.name} experiment applies here: ${rows.map((r) => `${r.id} (${r.why})`).join("; ")}`,
        candidates: rows,
      },
      arms: null,
      collective: false,
    };
  const treat = `${first.knob.arm ?? first.knob.id}:${first.row.variant}`;
  return {
    plan: {
      engine: engine.id,
      chosen: first.knob.id,
      reason: `the first ${engine.name} experiment that applies: ${first.row.why}`,
      candidates: rows,
    },
    arms: ["default:", treat],
    mechanism: first.knob.mechanism,
    collective: Boolean(first.knob.collective),
    affects: first.knob.affects,
  };
}
