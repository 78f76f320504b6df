// The span join as evidence for the model (pure): the engine's own decode step, its host part per step (detailed
// traces) and the queue wait, means over the joined requests with Student-t 95 % CIs, as a `server-split`
// measurement for `model fit`; or why the join is not enough to use.
import { mean, sd, studentTQuantile } from "../experiment/stats.ts";
import type { Measurement } from "../model/measurements.ts";
import type { JoinResult } from "./join.ts";

export type ServerSplitMeasurement = Measurement & { kind: "server-split" };

export interface SpanEvidence {
  measurement: ServerSplitMeasurement | null;
  /** What it rests on, or why there is none. */
  why: string;
}

export interface SpanEvidenceOptions {
  /** Clients in flight during the run. */
  concurrency: number;
  inputLen?: number;
  outputLen?: number;
  /** Below these the join is not used (a join that lost requests may have lost the slow ones). */
  minRequests?: number;
  minJoinRate?: number;
  /** Steps a prompt takes before its first token (1: prompts within the engine's token budget). */
  prefillSteps?: number;
  source?: string;
}

type Vci = { value: number; ci: [number, number] };

/** Mean with its Student-t 95 % interval; null under 2 values. */
function meanCi(xs: number[]): Vci | null {
  const v = xs.filter(Number.isFinite);
  if (v.length < 2) return null;
  const m = mean(v);
  const h = (studentTQuantile(0.975, v.length - 1) * sd(v)) / Math.sqrt(v.length);
  return { value: m, ci: [m - h, m + h] };
}

export function spanEvidence(j: JoinResult, o: SpanEvidenceOptions): SpanEvidence {
  const minN = o.minRequests ?? 10;
  const minRate = o.minJoinRate ?? 0.9;
  const rs = j.perRequest;
  if (j.joinRate < minRate)
    return {
      measurement: null,
      why: `the join matched ${j.joined} of ${j.requests} requests (${(100 * j.joinRate).toFixed(0)} % < ${(100 * minRate).toFixed(0)} %)`,
    };
  if (rs.length < minN)
    return { measurement: null, why: `${rs.length} requests joined with their timings (< ${minN})` };
  const pre = o.prefillSteps ?? 1;
  // The host part of each step: inference time outside the model (scheduler, output processing, waits between
  // steps), spread over the steps the request rode in (its prefill steps + one per further token).
  const host = rs
    .filter((q) => q.outsideModelMs !== null && q.outputTokens >= 2)
    .map((q) => q.outsideModelMs! / (pre + q.outputTokens - 1));
  const step = meanCi(rs.map((q) => q.serverTpotMs).filter((v): v is number => v !== null));
  const hostCi = host.length >= minN ? meanCi(host) : null;
  const queue = meanCi(rs.map((q) => q.queueMs));
  if (!step && !hostCi) return { measurement: null, why: "the spans carry no decode time (requests of one token?)" };
  const detailed = hostCi !== null;
  const by = rs.some((q) => q.executeMs !== null) ? "execute" : "forward";
  const source = `engine spans, ${rs.length} requests${detailed ? ", detailed traces" : ""}`;
  return {
    measurement: {
      kind: "server-split",
      requests: rs.length,
      stepMs: step ?? undefined,
      hostMs: hostCi ?? undefined,
      executeMs: step && hostCi ? { value: step.value - hostCi.value } : undefined,
      queueMs: queue ?? undefined,
      concurrency: o.concurrency,
      inputLen: o.inputLen,
      outputLen: o.outputLen,
      source: o.source ?? source,
    },
    why: `${source}: server decode step = time_in_model_decode ÷ (tokens − 1)${detailed ? `; host per step = (time_in_model_inference − time_in_model_${by}) ÷ (${pre} + tokens − 1)` : "; no detailed traces, so no host part"}; queue = time_in_queue; means with Student-t 95 % CIs over the requests`,
  };
}
