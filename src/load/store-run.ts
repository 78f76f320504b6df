// `bench --db`: one benchmark saved to the run store (kind "bench"), as ab and sweep save theirs, so
// `runs list|show|export|compare` see it. The API key never reaches the store (the store redacts).
import { collectEnvironment, openStore } from "../store/index.ts";
import type { BenchResult } from "./runner.ts";
import { requestTpot } from "./summarize.ts";
import type { BenchOptions } from "./types.ts";

/** Saves a finished (or interrupted) bench run; returns its id. */
export function storeBenchRun(dbPath: string, opts: BenchOptions, res: BenchResult): { id: string; path: string } {
  const store = openStore(dbPath);
  try {
    const { apiKey: _key, ...config } = opts;
    const id = store.saveRun({
      kind: "bench",
      config: config as Record<string, unknown>,
      environment: collectEnvironment(),
    }).id;
    const measured = res.requests.filter((r) => !r.warmup);
    store.addRequests(
      id,
      null,
      measured.map((r) => {
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
      }),
    );
    const { inferscope: _ours, ...vllm } = res.summary as unknown as Record<string, unknown>;
    store.setSummary(id, "bench", { setup: res.setup, summary: vllm, warnings: res.warnings, partial: res.partial });
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
