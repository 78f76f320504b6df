// The terminal summary printed at the end of `inferscope study`.
import Table from "cli-table3";
import pc from "picocolors";
import { deploymentTitle, fmt, fmtQ, telemetryRows } from "./format.ts";
import type { StudyResult } from "./types.ts";

export function renderTerminal(r: StudyResult, opts: { color?: boolean; outDir?: string } = {}): string {
  const c = opts.color ? pc : pc.createColors(false);
  const d = r.meta.deployment;
  const lines: string[] = [];
  lines.push(c.bold(`inferscope study — ${deploymentTitle(d)}`));
  if (r.meta.timeScale !== 1)
    lines.push(c.dim(`sim time-scale ${r.meta.timeScale}×: times below are converted back to simulated time`));
  const t = new Table({ head: ["headline", "value [interval]", "how"], style: { head: [], border: [] } });
  for (const h of r.summary.headlines) t.push([h.label, fmtQ(h.value), h.value.method]);
  lines.push(t.toString());
  if (r.summary.decomposition.length) {
    const dt = new Table({ head: ["per-token time", "ms [range]", "how"], style: { head: [], border: [] } });
    for (const p of r.summary.decomposition) dt.push([p.component, fmtQ(p.ms), p.ms.method]);
    lines.push(dt.toString());
  }
  if (r.ceilings.length) {
    const ct = new Table({ head: ["ceiling", "tokens/s [range]", "assumption"], style: { head: [], border: [] } });
    // The terminal shows the measured and derived rows; every row is in the report.
    const rows = r.ceilings
      .filter((x) => x.tokensPerSecond.method !== "modelled")
      .concat(r.ceilings.filter((x) => x.tokensPerSecond.method === "modelled").slice(0, 3));
    for (const x of rows)
      ct.push([
        x.scenario,
        fmtQ(x.tokensPerSecond),
        x.assumption.length > 70 ? `${x.assumption.slice(0, 69)}…` : x.assumption,
      ]);
    lines.push(ct.toString());
  }
  const tl = r.telemetry;
  if (tl) {
    // The hardware's counters in one table: the report has the derivations and the chart.
    const tt = new Table({ head: ["telemetry", "value [bound]", "how"], style: { head: [], border: [] } });
    for (const [label, q] of telemetryRows(tl)) if (q) tt.push([label, fmtQ(q), q.method]);
    lines.push(c.dim(`telemetry: ${tl.source}, ${fmt(tl.window.seconds, 3)} s window`));
    lines.push(tt.toString());
  }
  for (const f of r.summary.findings) lines.push(`• ${f}`);
  const bad = r.meta.phases.filter((p) => p.status !== "ok");
  for (const p of bad) lines.push(c.yellow(`phase ${p.name}: ${p.status}${p.reason ? ` — ${p.reason}` : ""}`));
  if (opts.outDir) lines.push(`report: ${opts.outDir}/index.html (also report.md, results.json)`);
  return lines.join("\n");
}
