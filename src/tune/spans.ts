// tune with an OTLP receiver: each block's requests joined with the engine's request spans, kept in
// the block's stored summary (so a resumed run keeps them), pooled per candidate, and the winner's
// change over the baseline split into the parts that moved. Pure.
import type { SpanJoinReport } from "../otlp/bench.ts";
import { type Distribution, distribution, type JoinResult, type RequestSplit } from "../otlp/join.ts";
import type { Objective } from "./model.ts";

/** The join's per-request parts, and the client's TPOT less the server's (delivery per output token). */
export type SplitPart = keyof JoinResult["split"] | "deliveryTpotMs";

export const SPLIT_PARTS: ReadonlyArray<[SplitPart, string]> = [
  ["networkMs", "network + HTTP"],
  ["intakeMs", "server intake"],
  ["queueMs", "queue"],
  ["prefillMs", "prefill"],
  ["deliveryMs", "first-token delivery"],
  ["clientTtftMs", "client TTFT"],
  ["serverTtftMs", "server TTFT"],
  ["serverTpotMs", "server decode/token"],
  ["deliveryTpotMs", "delivery/token"],
  ["clientTpotMs", "client TPOT"],
  ["forwardMs", "model forward (detailed)"],
  ["executeMs", "model execute (detailed)"],
  ["schedulerMs", "scheduler (detailed)"],
  ["outsideModelMs", "outside the model (detailed)"],
];

/** One block's join as stored in its summary (`otlp`): counts, findings, and every joined request's parts. */
export interface BlockSpanSummary {
  requests: number;
  joined: number;
  spansReceived: number;
  complete: boolean;
  waitedMs: number;
  findings: string[];
  /** Per joined request (ms; the TPOT parts per output token); requests without a part are left out of it. */
  parts: Partial<Record<SplitPart, number[]>>;
}

export interface CandidateSpans {
  /** Blocks with a join, and their requests and joined requests. */
  blocks: number;
  requests: number;
  joined: number;
  joinRate: number;
  /** Each part over the candidate's joined requests, all blocks pooled (ms). */
  split: Partial<Record<SplitPart, Distribution>>;
}

const partOf = (q: RequestSplit, k: SplitPart): number | null =>
  k === "deliveryTpotMs"
    ? q.clientTpotMs !== null && q.serverTpotMs !== null
      ? q.clientTpotMs - q.serverTpotMs
      : null
    : (q[k] as number | null);

/** The block's join, compact for the store; findings in words (the receiver's new ones included). */
export function blockSpanSummary(r: SpanJoinReport, receiverFindings: string[]): BlockSpanSummary {
  const j = r.join;
  const parts: BlockSpanSummary["parts"] = {};
  for (const [k] of SPLIT_PARTS) {
    const xs = j.perRequest.map((q) => partOf(q, k)).filter((v): v is number => v !== null && Number.isFinite(v));
    if (xs.length) parts[k] = xs.map((x) => Math.round(x * 1e4) / 1e4);
  }
  const findings = [...receiverFindings, ...j.findings.map((f) => `${f.kind}: ${f.detail}`)];
  if (!r.complete && j.requests > 0 && j.spans > 0)
    findings.push(`waited ${(r.waitedMs / 1000).toFixed(1)} s after the block for spans; some never came`);
  return {
    requests: j.requests,
    joined: j.joined,
    spansReceived: r.spansReceived,
    complete: r.complete,
    waitedMs: Math.round(r.waitedMs),
    findings,
    parts,
  };
}

/** A candidate's blocks pooled: join rate over every request, each part's distribution over every joined one. */
export function candidateSpans(blocks: readonly BlockSpanSummary[]): CandidateSpans | null {
  if (!blocks.length) return null;
  const requests = blocks.reduce((a, b) => a + b.requests, 0);
  const joined = blocks.reduce((a, b) => a + b.joined, 0);
  const split: CandidateSpans["split"] = {};
  for (const [k] of SPLIT_PARTS) {
    const d = distribution(blocks.flatMap((b) => b.parts[k] ?? []));
    if (d) split[k] = d;
  }
  return { blocks: blocks.length, requests, joined, joinRate: requests ? joined / requests : 0, split };
}

const signed = (x: number) => `${x < 0 ? "−" : "+"}${Math.abs(x).toFixed(2)}`;

/**
 * Which parts moved between the baseline and the winner (medians): the objective's client figure, the parts
 * that make it up, and (for TPOT) the queue. A part is unchanged when it moved less than a tenth of the whole change, or
 * less than 2 % of its own baseline value (or 0.01 ms).
 */
export function compareSpans(
  base: CandidateSpans,
  best: CandidateSpans,
  name: string,
  objective: Objective,
): string | null {
  const d = (k: SplitPart) => {
    const a = base.split[k]?.p50;
    const b = best.split[k]?.p50;
    return a === undefined || b === undefined ? null : { delta: b - a, base: a };
  };
  const ttft = objective === "ttft";
  const total = d(ttft ? "clientTtftMs" : "clientTpotMs");
  if (!total) return null;
  const unit = ttft ? "ms" : "ms/token";
  const parts: Array<[SplitPart, string]> = ttft
    ? [
        ["networkMs", "network"],
        ["intakeMs", "intake"],
        ["queueMs", "queue"],
        ["prefillMs", "prefill"],
        ["deliveryMs", "delivery"],
      ]
    : [
        ["serverTpotMs", "server decode"],
        ["deliveryTpotMs", "delivery"],
      ];
  const still = (x: { delta: number; base: number }, whole: number) =>
    Math.abs(x.delta) < Math.max(0.1 * Math.abs(whole), 0.02 * Math.abs(x.base), 0.01);
  const moved: Array<[string, number]> = [];
  const unchanged: string[] = [];
  for (const [k, label] of parts) {
    const x = d(k);
    if (!x) continue;
    if (still(x, total.delta)) unchanged.push(label);
    else moved.push([label, x.delta]);
  }
  const head = `${name}: ${signed(total.delta)} ${unit} ${ttft ? "TTFT" : "TPOT"} (client, median)`;
  const same = Math.abs(total.delta) < 0.02 * Math.abs(total.base);
  let where: string;
  if (!moved.length) where = same ? "no part moved" : "no single part moved";
  else if (moved.length === 1 && Math.sign(moved[0]![1]) === Math.sign(total.delta))
    where = `all of it in ${moved[0]![0]}`;
  else where = moved.map(([l, x]) => `${l} ${signed(x)}`).join(", ");
  const out = [`${head}, ${where}`];
  if (unchanged.length) out.push(`${unchanged.join(", ")} unchanged`);
  const q = d("queueMs");
  const t0 = base.split.clientTtftMs?.p50;
  if (!ttft && q && t0 !== undefined) {
    // Decode changes should leave the queue alone; one that moved the TTFT by 2 % says the load changed too.
    out.push(Math.abs(q.delta) < Math.max(0.02 * t0, 0.01) ? "queue unchanged" : `queue ${signed(q.delta)} ms`);
  }
  return out.join("; ");
}

/** The parts a table shows: queue, prefill, the TPOT split, and the detailed-trace parts where any candidate has them. */
export function spanColumns(cands: ReadonlyArray<{ spans?: CandidateSpans | null }>): Array<[SplitPart, string]> {
  const always: SplitPart[] = ["queueMs", "prefillMs", "serverTpotMs", "deliveryTpotMs", "clientTpotMs"];
  const detailed: SplitPart[] = ["forwardMs", "executeMs", "schedulerMs", "outsideModelMs"];
  const has = (k: SplitPart) => cands.some((c) => c.spans?.split[k]);
  return SPLIT_PARTS.filter(([k]) => always.includes(k) || (detailed.includes(k) && has(k)));
}
