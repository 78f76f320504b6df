// How big each phase's workload is, per mode. Sized so --quick finishes in about 30–45 s on two
// cores against the embedded sim (time-scale 10), and the default run (real time) in about 3 minutes.

export const PHASES = ["audit", "bench", "sweep", "trace", "ab", "model"] as const;
export type PhaseName = (typeof PHASES)[number];

export interface StudyPlan {
  /** Prompt length (tokens) for every request. */
  inputLen: number;
  bench: { requests: number; outputLen: number; warmup: number };
  sweep: { lengths: number[]; repeats: number };
  trace: { steps: number; outputLen: number };
  ab: { requestsPerBlock: number; outputLen: number; repeats: number; warmup: number };
}

export function defaultPlan(quick: boolean): StudyPlan {
  return quick
    ? {
        inputLen: 64,
        bench: { requests: 8, outputLen: 256, warmup: 1 },
        sweep: { lengths: [16, 32, 64, 128, 256, 512], repeats: 2 },
        trace: { steps: 64, outputLen: 80 },
        ab: { requestsPerBlock: 4, outputLen: 128, repeats: 2, warmup: 1 },
      }
    : {
        inputLen: 64,
        bench: { requests: 12, outputLen: 256, warmup: 1 },
        sweep: { lengths: [16, 32, 64, 128, 256, 512, 1024], repeats: 1 },
        trace: { steps: 128, outputLen: 160 },
        ab: { requestsPerBlock: 6, outputLen: 128, repeats: 2, warmup: 1 },
      };
}

/** The embedded sim's default speed-up: fast for --quick, real time otherwise. */
export function defaultTimeScale(quick: boolean): number {
  return quick ? 10 : 1;
}
