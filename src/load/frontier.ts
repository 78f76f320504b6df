// The throughput–interactivity frontier (pure): per load level, output tokens per second per GPU
// against tokens per second per user (1000 ÷ TPOT p50), and which points no other point beats on both.
export interface FrontierInput {
  /** The load level (req/s or users) and the run it came from, for labels. */
  level: number;
  run?: string;
  outputThroughput: number;
  tpotP50Ms: number;
  /** The binding limit(s) at the level, for the label; null when none binds. */
  limit: string | null;
}

export interface FrontierPoint {
  level: number;
  run?: string;
  tokPerSecPerGpu: number;
  tokPerSecPerUser: number;
  limit: string | null;
  /** No other point has at least as much of both and more of one. */
  pareto: boolean;
}

/** Indexes of the Pareto-optimal points (both axes maximised); ties on both axes are all kept. */
export function paretoIndexes(xy: ReadonlyArray<{ x: number; y: number }>): Set<number> {
  const out = new Set<number>();
  for (let i = 0; i < xy.length; i++) {
    const a = xy[i]!;
    const beaten = xy.some((b, j) => j !== i && b.x >= a.x && b.y >= a.y && (b.x > a.x || b.y > a.y));
    if (!beaten) out.add(i);
  }
  return out;
}

/** Frontier points from sweep levels (several runs may be passed together to overlay them). */
export function frontierPoints(levels: readonly FrontierInput[], gpus: number): FrontierPoint[] {
  if (!(gpus > 0)) throw new RangeError(`gpus must be > 0, got ${gpus}`);
  const pts = levels
    .filter((l) => Number.isFinite(l.outputThroughput) && l.tpotP50Ms > 0 && Number.isFinite(l.tpotP50Ms))
    .map((l) => ({
      level: l.level,
      ...(l.run !== undefined ? { run: l.run } : {}),
      tokPerSecPerGpu: l.outputThroughput / gpus,
      tokPerSecPerUser: 1000 / l.tpotP50Ms,
      limit: l.limit,
      pareto: false,
    }));
  const best = paretoIndexes(pts.map((p) => ({ x: p.tokPerSecPerUser, y: p.tokPerSecPerGpu })));
  for (const i of best) pts[i]!.pareto = true;
  return pts;
}

/**
 * Several runs' frontier points on one chart (two server variants, two GPUs): each point keeps its
 * own run's per-GPU rate and is tagged with its run; the Pareto set is taken over all of them.
 */
export function overlayFrontiers(
  runs: ReadonlyArray<{ run: string; points: readonly FrontierPoint[] }>,
): FrontierPoint[] {
  const all = runs.flatMap((r) => r.points.map((p) => ({ ...p, run: r.run, pareto: false })));
  for (const i of paretoIndexes(all.map((p) => ({ x: p.tokPerSecPerUser, y: p.tokPerSecPerGpu }))))
    all[i]!.pareto = true;
  return all;
}

/** TTFT p90 against the offered request rate, per level of a rate sweep (the curve beside the frontier). */
export interface TtftRatePoint {
  /** The offered rate (req/s): the level. */
  level: number;
  run?: string;
  ttftP90Ms: number;
  /** Requests completed per second at that level. */
  completedRate: number;
  limit: string | null;
}

/** TTFT points from rate-sweep levels, sorted by rate; a level with no TTFT (nothing finished) has none. */
export function ttftRatePoints(
  levels: ReadonlyArray<{
    level: number;
    run?: string;
    ttftP90Ms: number;
    completedRate: number;
    limit: string | null;
  }>,
): TtftRatePoint[] {
  return levels
    .filter((l) => Number.isFinite(l.ttftP90Ms) && l.ttftP90Ms >= 0 && l.level > 0)
    .map((l) => ({
      level: l.level,
      ...(l.run !== undefined ? { run: l.run } : {}),
      ttftP90Ms: l.ttftP90Ms,
      completedRate: l.completedRate,
      limit: l.limit,
    }))
    .sort((a, b) => a.level - b.level);
}
