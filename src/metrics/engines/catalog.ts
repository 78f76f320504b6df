// What an engine catalog is, and the name matching every catalog shares.
import type { Concept, ConceptBinding, FamilyLike } from "../concepts.ts";

export type EngineId = "vllm" | "sglang" | "tgi" | "llamacpp" | "trtllm" | "triton" | "dynamo";

export interface Quirk {
  /** True when this exposition shows the quirk. */
  when: (names: NameIndex) => boolean;
  text: string;
}

/** A condition a knob needs; `applicability()` (src/discover/experiments.ts) explains each one that fails. */
export type KnobNeed =
  /** More than one device in a tensor-parallel group: there are collectives to change. */
  | "collectives"
  /** The server runs on a GPU. */
  | "gpu"
  /** The server runs on a CPU. */
  | "cpu"
  /** The server command sets a thread count below the host's cores. */
  | "threads-below-cores";

/**
 * One experiment an engine supports: a change to the server's environment or flags (the `ab`
 * --variant grammar, without the name), what mechanism it tests, and when it applies.
 * `{cores}` in the change is the host's core count.
 */
export interface Knob {
  id: string;
  /** Short name of the treatment arm in the A/B (default: the id). */
  arm?: string;
  /** `ENV=V` and/or `--flag value`, appended to the server command for the treatment arm. */
  change: string;
  mechanism: string;
  needs: KnobNeed[];
  /** The change acts on a collective (all-reduce): the A/B delta is also shown per all-reduce. */
  collective?: boolean;
  /** What the knob moves: per-token decode time or the first token. */
  affects: "decode" | "prefill";
}

/** The NCCL protocol knob every NCCL-based engine shares (the seed scenario's experiment). */
export const NCCL_PROTO_LL: Knob = {
  id: "nccl-proto-ll",
  arm: "ll",
  change: "NCCL_PROTO=LL",
  mechanism:
    "NCCL's low-latency protocol against its own choice, for the small all-reduces of a decode step (latency-bound at batch 1)",
  needs: ["collectives", "gpu"],
  collective: true,
  affects: "decode",
};

/** A recovery hint that works on this engine (shown by the audit and the study). */
export interface EngineHint {
  what: string;
  why: string;
  method: string;
  /** `{url}`, `{model}`, `{device}` and `{cmd}` are filled in. */
  command: string;
  needs?: KnobNeed[];
}

/** Where an engine reports per-request timings of its own. */
export interface ServerTimingSpec {
  /** "llamacpp-timings" (last stream chunk) or "tgi-headers" (x-* response headers). */
  kind: "llamacpp-timings" | "tgi-headers";
  note: string;
}

/** Endpoints that describe the server (engine, version, model), probed by discovery. */
export interface InfoEndpoint {
  path: string;
  /** What it reveals. */
  gives: string;
}

export interface EngineCatalog {
  id: EngineId;
  name: string;
  /** Where the engine serves Prometheus text by default. */
  metricsPath: string;
  /** 0 (not this engine) … 1 (certainly this engine). */
  detect(families: FamilyLike[]): number;
  /** A sub-version the names reveal (vLLM V1 vs V0), if any. */
  variant?(families: FamilyLike[]): string | undefined;
  /** Candidates per concept, best first; the first whose metrics are present is used. */
  concepts: Partial<Record<Concept, ConceptBinding[]>>;
  /** Labels whose children repeat the same quantity (tensor-parallel ranks): read only the lowest. */
  replicaLabels: string[];
  /** Labels whose children are separate workloads (data-parallel engines): summed. */
  shardLabels: string[];
  /** How a profiler trace can be taken, when the engine has one behind HTTP. */
  profiler?: { enable: string };
  /**
   * How the engine sends the request spans src/otlp reads (vLLM's llm_request span, SGLang's request trace): the
   * arguments and environment a started server gets to export to an OTLP/HTTP receiver (`endpoint` without a path),
   * and the body field it names a request by (what the client sends so the spans join its records).
   */
  requestSpans?: {
    args(endpoint: string): string[];
    env: Record<string, string>;
    idField: "request_id" | "rid";
    note: string;
  };
  /** Whether its multi-device decode uses NCCL/RCCL collectives (llama.cpp's layer split does not). */
  usesNccl: boolean;
  /** Experiments worth running on this engine, best first (the study runs the first that applies). */
  knobs: Knob[];
  /** Engine-specific ways to recover what the metrics do not show. */
  hints?: EngineHint[];
  serverTimings?: ServerTimingSpec;
  /** Engine-specific info endpoints beyond /version and /v1/models. */
  info?: InfoEndpoint[];
  /** Where the server states its running batch's ceiling (JSON, a top-level integer field), for the binding-limit diagnosis. */
  batchCeiling?: { path: string; field: string };
  /** Where a concept is missing, what the engine offers instead (shown in the audit). */
  missing?: Partial<Record<Concept, string>>;
  quirks: Quirk[];
}

/** Looks names up the way engines spell them: with or without the counter `_total`. */
export class NameIndex {
  private readonly byName = new Map<string, FamilyLike>();
  constructor(families: FamilyLike[]) {
    for (const f of families) {
      if (!this.byName.has(f.name)) this.byName.set(f.name, f);
    }
  }
  get(name: string): FamilyLike | undefined {
    return (
      this.byName.get(name) ??
      (name.endsWith("_total") ? this.byName.get(name.slice(0, -6)) : this.byName.get(`${name}_total`))
    );
  }
  has(name: string): boolean {
    return this.get(name) !== undefined;
  }
  /** Whether any family name starts with the prefix. */
  hasPrefix(prefix: string): boolean {
    for (const n of this.byName.keys()) if (n.startsWith(prefix)) return true;
    return false;
  }
  names(): string[] {
    return [...this.byName.keys()];
  }
}

/**
 * Confidence from signature names: three or more present is certain; a bare prefix match is weak
 * evidence (renamed or very new builds).
 */
export function detectBySignature(families: FamilyLike[], prefixes: string[], signature: string[]): number {
  const idx = new NameIndex(families);
  const hits = signature.filter((n) => idx.has(n)).length;
  if (hits > 0) return Math.min(1, 0.4 + 0.2 * hits);
  return prefixes.some((p) => idx.hasPrefix(p)) ? 0.3 : 0;
}
