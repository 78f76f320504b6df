// A small load sweep analysed from made-up levels (no server): 1, 2 and 4 req/s (or users), the last
// with a queue behind a batch pinned at its ceiling of 4, so it is labelled max-num-seqs.
import type { BlockSample } from "../../src/experiment/blocks.ts";
import { analyseLoadSweep, type LoadSweepConfig, type LoadSweepResult } from "../../src/experiment/sweep.ts";
import type { LevelData } from "../../src/experiment/sweep-run.ts";

/** A level of `n` requests with TTFT `ttft + i` ms and TPOT `tpot`; a queue behind a batch pinned at 4 when `pinned`. */
function level(n: number, ttft: number, tpot: number, out: number, pinned: boolean): LevelData {
  const samples: BlockSample[] = Array.from({ length: n }, (_, i) => ({
    index: i,
    ok: true,
    ttftMs: ttft + i,
    e2elMs: ttft + 400,
    tpotMs: tpot,
    outputTokens: 32,
    promptTokens: 32,
    error: null,
  }));
  const rows: NonNullable<LevelData["server"]>["rows"] = Array.from({ length: 10 }, (_, i) => [
    i * 200,
    pinned ? 4 : 1,
    pinned ? 2 + i : 0,
    null,
    null,
  ]);
  return {
    samples,
    outputThroughput: out,
    requestThroughput: out / 32,
    server: { engine: "llamacpp", error: null, rows },
    achieved: { rate: out / 32, ratio: pinned ? 0.75 : 1 },
  };
}

export function rateSweep(mode: "rate" | "concurrency", runId = `sweep-${mode}-x`): LoadSweepResult {
  const config: LoadSweepConfig = {
    mode,
    levels: [1, 2, 4],
    numPrompts: 10,
    randomInputLen: 32,
    randomOutputLen: 32,
    warmup: 0,
    seed: 0,
    url: "http://127.0.0.1:9",
    serverCmd: null,
    variant: null,
    model: null,
    gpus: 1,
    maxNumSeqs: 4,
  };
  const results = new Map([
    [1, level(10, 40, 10, 32, false)],
    [2, level(10, 60, 11, 62, false)],
    [4, level(10, 900, 16, 90, true)],
  ]);
  return analyseLoadSweep(runId, ":memory:", "http://127.0.0.1:9", config, results, { partial: false });
}
