// `bench --db`: one benchmark saved to the run store (kind "bench"), and `bench --find-capacity --db` the
// whole search (kind "capacity"), as ab and sweep save theirs, so `runs list|show|export|compare` see them.
// The API key never reaches the store (the store redacts).
import { describeError, ExitCode } from "../errors.ts";
import { collectEnvironment, openStore, type StoredRequest } from "../store/index.ts";
import type { CapacityResult, CapacityRun } from "./capacity.ts";
import { type BenchDeps, type BenchResult, runBench } from "./runner.ts";
import { requestTpot } from "./summarize.ts";
import type { BenchOptions } from "./types.ts";

/** A run's measured requests as the store keeps them. */
function storedRequests(res: BenchResult): StoredRequest[] {
  return res.requests
    .filter((r) => !r.warmup)
    .map((r) => {
      const ok = r.errorClass === null;
      const tpot = requestTpot(r);
      return {
        index: r.index,
        ok,
        ttftMs: Number.isFinite(r.ttftMs) ? r.ttftMs : null,
        e2elMs: Number.isFinite(r.e2elMs) ? r.e2elMs : null,
        tpotMs: tpot !== undefined && tpot !== null && Number.isFinite(tpot) ? tpot : null,
        outputTokens: r.outputTokens,
        promptTokens: r.promptTokens,
        error: ok ? null : `${r.errorClass}${r.errorMessage ? `: ${r.errorMessage}` : ""}`,
      };
    });
}

/** Saves a finished (or interrupted) bench run, and any further summaries by key (the span join: "otlp"); returns its id. */
export function storeBenchRun(
  dbPath: string,
  opts: BenchOptions,
  res: BenchResult,
  extra: Record<string, unknown> = {},
): { id: string; path: string } {
  const store = openStore(dbPath);
  try {
    const { apiKey: _key, ...config } = opts;
    const id = store.saveRun({
      kind: "bench",
      config: config as Record<string, unknown>,
      environment: collectEnvironment(),
    }).id;
    store.addRequests(id, null, storedRequests(res));
    const { inferscope: _ours, ...vllm } = res.summary as unknown as Record<string, unknown>;
    store.setSummary(id, "bench", { setup: res.setup, summary: vllm, warnings: res.warnings, partial: res.partial });
    for (const [k, v] of Object.entries(extra)) store.setSummary(id, k, v);
    const t = res.telemetry;
    if (t?.summary)
      store.addTelemetry(id, null, {
        source: `${t.source.kind} ${t.source.detail}`,
        summary: { ...t.summary, why: t.source.why, notes: t.notes },
        samples: t.samples as unknown as Record<string, unknown>[],
      });
    store.finishRun(id, res.partial ? "partial" : res.summary.completed === 0 ? "failed" : "complete");
    return { id, path: store.path };
  } finally {
    store.close();
  }
}

/** Opens (creating if needed) and closes the store: a bad --db is an error before anything is sent. */
export function checkStore(dbPath: string): void {
  openStore(dbPath).close();
}

/** How the CLI's capacity search saves itself: the trial runner to search with, and the search's ends. */
export interface CapacityRecorder {
  id: string;
  path: string;
  /** Runs one trial's bench and saves it as a block with its requests (pass to benchTrial). */
  run: (o: BenchOptions, d: BenchDeps) => Promise<BenchResult>;
  /** The search's verdict on the trial just run: the block's summary. */
  onRun: (r: CapacityRun) => void;
  /** The search's result: the "capacity" summary; the run is complete, partial (interrupted) or failed (nothing finished). */
  finish: (result: CapacityResult & Record<string, unknown>) => void;
  /** The search ended by an error: the run is failed (or partial when interrupted), with the error's words. */
  fail: (err: unknown) => void;
}

/**
 * `bench --find-capacity --db`: the search saved as it goes (kind "capacity") — the run with its flags
 * and the search's settings, one block per trial (its load, its requests, then the search's verdict on
 * it), and the result as the "capacity" summary — so `runs show|export|compare` read it like any run.
 */
export function capacityRecorder(
  dbPath: string,
  opts: BenchOptions,
  search: { knob: string; unit: string; target: number; start: number },
): CapacityRecorder {
  const store = openStore(dbPath);
  const { apiKey: _key, ...config } = opts;
  const id = store.saveRun({
    kind: "capacity",
    config: { ...(config as Record<string, unknown>), capacity: search },
    environment: collectEnvironment(),
  }).id;
  let index = 0;
  // The last trial's block and what it measured, until the search says what it made of it.
  let pending: { block: number; measured: Record<string, unknown> } | null = null;
  let open = true;
  const close = (status: "complete" | "partial" | "failed", error: string | null) => {
    if (!open) return;
    open = false;
    try {
      store.finishRun(id, status, error);
    } finally {
      store.close();
    }
  };
  return {
    id,
    path: store.path,
    async run(o, d) {
      const res = await runBench(o, d);
      const load = search.knob === "replay_speed" ? o.replaySpeed : o.requestRate;
      const requests = storedRequests(res);
      // The keys `runs show` prints for every kind's blocks.
      const measured = { load, requests: requests.length, meanTpotMs: res.summary.mean_tpot_ms };
      const block = store.addBlock(id, {
        index: index++,
        variant: `${load ?? "?"} ${search.unit}`,
        // An interrupted trial does not count in the search.
        status: res.partial ? "discarded" : "running",
        summary: measured,
      });
      store.addRequests(id, block, requests);
      pending = res.partial ? null : { block, measured };
      return res;
    },
    onRun(r) {
      if (pending === null) return;
      store.updateBlock(pending.block, {
        status: "complete",
        finishedAt: new Date().toISOString(),
        summary: { ...pending.measured, ...r },
      });
      pending = null;
    },
    finish(result) {
      const { runs: _runs, ...summary } = result;
      store.setSummary(id, "capacity", summary);
      close(
        result.stopped === "interrupted" ? "partial" : result.runs.every((r) => r.total === 0) ? "failed" : "complete",
        null,
      );
    },
    fail(err) {
      const { message, exitCode } = describeError(err);
      close(exitCode === ExitCode.interrupted ? "partial" : "failed", message);
    },
  };
}
