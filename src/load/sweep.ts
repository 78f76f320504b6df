// Sweeps: one benchmark per concurrency or rate, or `auto` (GuideLLM's shape: synchronous, then
// maximum throughput, then rates between them), stopping once the server (or client) saturates.
import { UsageError } from "../errors.ts";
import { type BenchDeps, type BenchResult, runBench } from "./runner.ts";
import { sweepRates } from "./schedule.ts";
import type { BenchOptions } from "./types.ts";

export interface SweepSpec {
  concurrency?: number[];
  rates?: number[];
  auto?: boolean;
  /** Rates tried between synchronous and max throughput in auto mode. Default 5. */
  autoSteps?: number;
}

export interface SweepPoint {
  kind: "concurrency" | "rate" | "synchronous" | "throughput";
  value: number;
  result: BenchResult;
  /** Achieved ÷ target request rate (open loop only). */
  achievedRatio: number | null;
}

export interface SweepResult {
  points: SweepPoint[];
  stoppedEarly: string | null;
  partial: boolean;
}

/** A point is saturated when the achieved rate falls below 90 % of the target, failures exceed 10 %, or the client saturated. */
export function saturationReason(p: SweepPoint): string | null {
  const s = p.result.summary;
  const n = s.completed + s.failed;
  if (p.result.client.saturated) return `client saturated at ${p.kind} ${p.value}`;
  if (n > 0 && s.failed / n > 0.1) return `${s.failed} of ${n} requests failed at ${p.kind} ${p.value}`;
  if (p.achievedRatio !== null && p.achievedRatio < 0.9)
    return `achieved ${s.request_throughput.toFixed(2)} req/s of ${p.value} req/s requested`;
  return null;
}

export async function runSweep(base: BenchOptions, spec: SweepSpec, deps: BenchDeps = {}): Promise<SweepResult> {
  const points: SweepPoint[] = [];
  const one = async (kind: SweepPoint["kind"], value: number, o: BenchOptions): Promise<SweepPoint> => {
    const result = await runBench({ ...o, saveResult: undefined, recordsPath: undefined }, deps);
    const achievedRatio = kind === "rate" ? result.summary.request_throughput / value : null;
    const p = { kind, value, result, achievedRatio };
    points.push(p);
    return p;
  };
  const stripLoad = (o: BenchOptions): BenchOptions => ({
    ...o,
    concurrency: undefined,
    requestRate: undefined,
    maxConcurrency: undefined,
  });
  const given = [spec.concurrency, spec.rates, spec.auto ? [1] : undefined].filter((x) => x !== undefined);
  if (given.length !== 1)
    throw new UsageError("a sweep needs exactly one of --concurrency LIST, --request-rate LIST, --sweep auto");
  if (spec.concurrency) {
    for (const c of spec.concurrency) {
      const p = await one("concurrency", c, { ...stripLoad(base), concurrency: c });
      if (p.result.partial) return { points, stoppedEarly: "interrupted", partial: true };
    }
    return { points, stoppedEarly: null, partial: false };
  }
  if (spec.rates) {
    for (const r of spec.rates) {
      const p = await one("rate", r, { ...stripLoad(base), requestRate: r, maxConcurrency: base.maxConcurrency });
      if (p.result.partial) return { points, stoppedEarly: "interrupted", partial: true };
      const why = saturationReason(p);
      if (why) return { points, stoppedEarly: why, partial: false };
    }
    return { points, stoppedEarly: null, partial: false };
  }
  // auto
  const sync = await one("synchronous", 1, { ...stripLoad(base), concurrency: 1 });
  if (sync.result.partial) return { points, stoppedEarly: "interrupted", partial: true };
  const max = await one("throughput", Number.POSITIVE_INFINITY, {
    ...stripLoad(base),
    maxConcurrency: base.maxConcurrency,
  });
  if (max.result.partial) return { points, stoppedEarly: "interrupted", partial: true };
  const rates = sweepRates(
    sync.result.summary.request_throughput,
    max.result.summary.request_throughput,
    spec.autoSteps ?? 5,
  );
  for (const r of rates) {
    const p = await one("rate", r, { ...stripLoad(base), requestRate: r, maxConcurrency: base.maxConcurrency });
    if (p.result.partial) return { points, stoppedEarly: "interrupted", partial: true };
    const why = saturationReason(p);
    if (why) return { points, stoppedEarly: why, partial: false };
  }
  return { points, stoppedEarly: null, partial: false };
}
