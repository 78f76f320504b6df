// Fault injection for reliability tests: `--faults 'http500:0.02,disconnect:0.01,...'`.
import { UsageError } from "../errors.ts";
import { Rng } from "./rng.ts";

export const FAULT_KINDS = [
  "http500",
  "http429",
  "http503",
  "disconnect",
  "stall",
  "malformed",
  "slow-headers",
  "missing-usage",
  "truncated",
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

export type FaultSpec = Partial<Record<FaultKind, number>>;

/** Parses `kind:prob,kind:prob`; probabilities in [0, 1]. */
export function parseFaults(text: string | undefined): FaultSpec {
  const spec: FaultSpec = {};
  if (!text?.trim()) return spec;
  for (const part of text.split(",")) {
    const p = part.trim();
    if (!p) continue;
    const [kind, probText] = p.split(":").map((s) => s.trim()) as [string, string | undefined];
    if (!(FAULT_KINDS as readonly string[]).includes(kind))
      throw new UsageError(`--faults: unknown fault "${kind}"`, { hint: `known: ${FAULT_KINDS.join(", ")}` });
    const prob = probText === undefined ? Number.NaN : Number(probText);
    if (!Number.isFinite(prob) || prob < 0 || prob > 1)
      throw new UsageError(`--faults: "${p}": probability must be a number in [0, 1]`);
    spec[kind as FaultKind] = prob;
  }
  return spec;
}

/** Faults chosen for one request. At most one of the HTTP-status faults; stream faults independent. */
export interface RequestFaults {
  status: 500 | 429 | 503 | null;
  slowHeaders: boolean;
  /** Token index after which the fault fires (stream faults). */
  disconnectAt: number;
  stallAt: number;
  malformedAt: number;
  missingUsage: boolean;
  truncated: boolean;
}

export const NO_FAULTS: RequestFaults = {
  status: null,
  slowHeaders: false,
  disconnectAt: -1,
  stallAt: -1,
  malformedAt: -1,
  missingUsage: false,
  truncated: false,
};

export class FaultInjector {
  readonly spec: FaultSpec;
  readonly kinds: FaultKind[];
  private readonly rng: Rng;
  constructor(spec: FaultSpec, seed: number) {
    this.spec = spec;
    this.kinds = FAULT_KINDS.filter((k) => spec[k] !== undefined);
    this.rng = new Rng(seed ^ 0xfa17);
  }
  get enabled(): boolean {
    return this.kinds.length > 0;
  }
  /** Draws the faults for a request that will generate up to `maxTokens` tokens. */
  draw(maxTokens: number): RequestFaults {
    if (!this.enabled) return NO_FAULTS;
    const s = this.spec;
    const hit = (k: FaultKind) => (s[k] ?? 0) > 0 && this.rng.next() < s[k]!;
    const at = () => Math.max(0, Math.floor(this.rng.next() * Math.max(1, maxTokens - 1)));
    const status = hit("http500") ? 500 : hit("http429") ? 429 : hit("http503") ? 503 : null;
    return {
      status,
      slowHeaders: hit("slow-headers"),
      disconnectAt: hit("disconnect") ? at() : -1,
      stallAt: hit("stall") ? at() : -1,
      malformedAt: hit("malformed") ? at() : -1,
      missingUsage: hit("missing-usage"),
      truncated: hit("truncated"),
    };
  }
}
