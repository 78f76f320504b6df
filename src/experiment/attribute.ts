// Per-operation attribution: a per-token time difference divided by the operations per token.
// If the variant only changes how each all-reduce runs, Δ per token ÷ all-reduces per token is the
// change in cost per all-reduce. The ops count is exact (from the architecture), so the CI scales.
import type { Interval } from "./stats.ts";

export interface Attribution {
  /** What one operation is, e.g. "all-reduce". */
  op: string;
  opsPerToken: number;
  /** Δ per operation in microseconds, with the CI carried over from the per-token Δ. */
  perOpUs: Interval;
  /** Δ per token in milliseconds that was divided. */
  perTokenMs: Interval;
  formula: string;
}

export function attributePerOp(perTokenDiffMs: Interval, opsPerToken: number, op = "all-reduce"): Attribution {
  if (!(opsPerToken > 0)) throw new RangeError(`ops per token must be positive, got ${opsPerToken}`);
  const k = 1000 / opsPerToken;
  return {
    op,
    opsPerToken,
    perOpUs: {
      estimate: perTokenDiffMs.estimate * k,
      lo: perTokenDiffMs.lo * k,
      hi: perTokenDiffMs.hi * k,
      level: perTokenDiffMs.level,
    },
    perTokenMs: perTokenDiffMs,
    formula: `Δ per token (ms) × 1000 ÷ ${opsPerToken} ${op}s per token`,
  };
}
