// `runs show` and `runs compare`: read-only views over the store.
import { UsageError } from "../errors.ts";
import { type Comparison, compareSamples } from "../experiment/stats.ts";
import type { RunDetail, RunRecord, Store } from "./store.ts";

export interface RunListing {
  id: string;
  kind: string;
  status: string;
  createdAt: string;
  finishedAt: string | null;
  blocks: number;
  requests: number;
  label: string;
}

export function listRunsView(store: Store, opts: { kind?: string; limit?: number } = {}): RunListing[] {
  return store.listRuns(opts).map((r) => {
    const d = store.getRun(r.id);
    return {
      id: r.id,
      kind: r.kind,
      status: r.status,
      createdAt: r.createdAt,
      finishedAt: r.finishedAt,
      blocks: d.blocks.filter((b) => b.status === "complete").length,
      requests: d.requestCount,
      label: describeRun(r),
    };
  });
}

function describeRun(r: RunRecord): string {
  const c = r.config as Record<string, any>;
  if (r.kind === "ab" && Array.isArray(c.variants)) return c.variants.map((v: any) => v.name).join(" vs ");
  if (r.kind === "sweep-lengths" && Array.isArray(c.outLens)) return `out ${c.outLens.join(",")}`;
  if (Array.isArray(c.levels)) return `${c.mode} ${c.levels.join(",")}`;
  if (r.kind === "capacity" && c.capacity && c.goodput) {
    const slo = Object.entries(c.goodput as Record<string, number>).map(([k, ms]) => `${k} ≤ ${ms} ms`);
    return `${c.capacity.knob} for ${slo.join(", ")} at ${100 * c.capacity.target} %`;
  }
  return typeof c.label === "string" ? c.label : "";
}

export function showRun(store: Store, id: string): RunDetail {
  return store.getRun(id);
}

export interface RunComparison {
  a: { id: string; kind: string; status: string; variant: string | null; requests: number };
  b: { id: string; kind: string; status: string; variant: string | null; requests: number };
  /** a − b for each metric, over successful requests; positive = b is lower. */
  metrics: Record<"tpot_ms" | "ttft_ms" | "e2el_ms", Comparison | null>;
}

/**
 * Compares the successful requests of two runs (any kinds) on TPOT, TTFT and E2EL. `variantA` /
 * `variantB` restrict each side to the blocks of one variant (so two arms of one A/B run compare too).
 */
export function compareRuns(
  store: Store,
  idA: string,
  idB: string,
  opts: { seed?: number; variantA?: string; variantB?: string } = {},
): RunComparison {
  const seed = opts.seed ?? 0;
  const A = store.getRun(idA);
  const B = store.getRun(idB);
  const okReqs = (d: RunDetail, variant: string | undefined) => {
    const blocks = d.blocks.filter((b) => b.status === "complete" && (variant === undefined || b.variant === variant));
    if (variant !== undefined && blocks.length === 0)
      throw new UsageError(`run ${d.run.id} has no complete blocks of variant "${variant}"`, {
        hint: `its variants: ${[...new Set(d.blocks.map((b) => b.variant))].join(", ") || "none"}`,
      });
    const good = new Set(blocks.map((b) => b.id));
    return store
      .getRequests(d.run.id)
      .filter((r) => r.ok && (r.blockId == null ? variant === undefined : good.has(r.blockId)));
  };
  const ra = okReqs(A, opts.variantA);
  const rb = okReqs(B, opts.variantB);
  const pick = (rs: typeof ra, k: "tpotMs" | "ttftMs" | "e2elMs") =>
    rs.map((r) => r[k]).filter((x): x is number => x != null && Number.isFinite(x));
  const cmp = (k: "tpotMs" | "ttftMs" | "e2elMs", i: number) => {
    const a = pick(ra, k);
    const b = pick(rb, k);
    return a.length >= 2 && b.length >= 2 ? compareSamples(a, b, { seed: seed + i }) : null;
  };
  return {
    a: { id: A.run.id, kind: A.run.kind, status: A.run.status, variant: opts.variantA ?? null, requests: ra.length },
    b: { id: B.run.id, kind: B.run.kind, status: B.run.status, variant: opts.variantB ?? null, requests: rb.length },
    metrics: { tpot_ms: cmp("tpotMs", 1), ttft_ms: cmp("ttftMs", 2), e2el_ms: cmp("e2elMs", 3) },
  };
}
