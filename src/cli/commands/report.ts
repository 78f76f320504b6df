// `inferscope report ID`: rebuilds a study's or a tune run's report (HTML, Markdown, JSON) from the run store.
import type { Command } from "@commander-js/extra-typings";
import { UsageError } from "../../errors.ts";
import { checkNotFile } from "../../input-file.ts";
import { renderTerminal } from "../../report/index.ts";
import { rebuildReport } from "../../study/index.ts";
import { emit } from "../common.ts";

export function register(program: Command): void {
  program
    .command("report")
    .description("Rebuild a study's, a tune run's or a rate/concurrency sweep's report from the run store")
    .argument("<id>", "run id (see `inferscope runs list`)")
    .option("--db <path>", "run store (SQLite) path")
    .option("--out <dir>", "report directory (default ./inferscope-report-<id>)")
    .option(
      "--overlay <ids>",
      "sweeps only: other rate/concurrency sweeps whose frontier points share the chart (comma-separated run ids)",
    )
    .option("--json", "print machine-readable JSON instead of tables")
    .option("--debug", "show stack traces and internal detail on errors")
    .action(async (id, o) => {
      const outDir = o.out ?? `./inferscope-report-${id}`;
      // A file named as the report folder is named with its flag, not as ENOTDIR from a write.
      checkNotFile(o.out !== undefined ? "--out" : "the report folder", outDir);
      if (id.startsWith("tune-")) {
        const [{ rebuildTuneReport }, { renderTune }] = await Promise.all([
          import("../../tune/report.ts"),
          import("../../tune/render.ts"),
        ]);
        const t = await rebuildTuneReport(id, { dbPath: o.db, outDir });
        emit(
          o.json ? { runId: id, report: { dir: t.report.dir, html: t.report.html }, result: t.result } : t,
          o,
          () => `${renderTune(t.result)}
report: ${t.report.html}`,
        );
        return;
      }
      const isSweep = id.startsWith("sweep-rate-") || id.startsWith("sweep-concurrency-");
      if (o.overlay !== undefined && !isSweep)
        throw new UsageError(`--overlay applies to rate and concurrency sweeps; ${id} is not one`);
      if (isSweep) {
        const [{ rebuildSweepReport }, { renderLoadSweep }] = await Promise.all([
          import("../../report/sweep.ts"),
          import("../../experiment/render.ts"),
        ]);
        const overlay = o.overlay ? o.overlay.split(",").filter(Boolean) : undefined;
        const t = await rebuildSweepReport(id, { dbPath: o.db, outDir, overlay });
        emit(
          o.json ? { runId: id, report: { dir: t.report.dir, html: t.report.html }, result: t.result } : t,
          o,
          () => `${renderLoadSweep(t.result)}
report: ${t.report.html}`,
        );
        return;
      }
      const out = await rebuildReport(id, { dbPath: o.db, outDir });
      emit(
        o.json ? { runId: id, report: { dir: out.report.dir, html: out.report.html }, result: out.result } : out,
        o,
        () => renderTerminal(out.result, { color: Boolean(process.stdout.isTTY), outDir: out.report.dir }),
      );
    });
}
