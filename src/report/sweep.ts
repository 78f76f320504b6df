// The load-sweep report: the throughput–interactivity frontier (tok/s/GPU against tok/s/user, one
// point per level labelled with its load and binding limit, the Pareto frontier drawn), the levels'
// table with their binding limits, and the knee. One self-contained HTML page, a Markdown twin and the JSON.
import { UsageError } from "../errors.ts";
import { type LoadSweepResult, ttftRateOf } from "../experiment/sweep.ts";
import { type FrontierPoint, overlayFrontiers, type TtftRatePoint } from "../load/frontier.ts";
import { fmtRate } from "../load/sweep.ts";
import { redact } from "../secrets.ts";
import { renderSvg } from "./charts.ts";
import { storedSummary, type WrittenReportFiles, writeReportFiles } from "./files.ts";
import { esc, fmt } from "./format.ts";
import { REPORT_CSS } from "./html.ts";

/** A point's label on the charts: its load, and its binding limit when one binds. */
export function pointLabel(p: { level: number; limit: string | null }, mode: "rate" | "concurrency"): string {
  return `${fmtRate(p.level)}${mode === "rate" ? " req/s" : " users"}${p.limit ? ` · ${p.limit}` : ""}`;
}

/** The sweep charts' shared frame: size, font, white background, legend below. */
function chartFrame(height: number): Record<string, unknown> {
  return {
    $schema: "https://vega.github.io/schema/vega-lite/v6.json",
    width: 620,
    height,
    config: {
      font: "system-ui, sans-serif",
      view: { stroke: null },
      background: "white",
      legend: { orient: "bottom" },
    },
  };
}

/** Vega-Lite: every level as a point (colour = run, for overlays), the Pareto frontier as a line, labels beside. */
export function frontierChartSpec(
  points: readonly FrontierPoint[],
  mode: "rate" | "concurrency",
): Record<string, unknown> {
  const values = points.map((p) => ({
    x: p.tokPerSecPerUser,
    y: p.tokPerSecPerGpu,
    run: p.run ?? "this run",
    label: pointLabel(p, mode),
    pareto: p.pareto,
  }));
  const frontier = values.filter((v) => v.pareto).sort((a, b) => a.x - b.x);
  const runs = new Set(values.map((v) => v.run)).size;
  const x = { field: "x", type: "quantitative", title: "tok/s per user (1000 ÷ TPOT p50)" };
  const y = { field: "y", type: "quantitative", title: "output tok/s per GPU" };
  return {
    ...chartFrame(320),
    layer: [
      {
        data: { values: frontier },
        mark: { type: "line", color: "#d95f02", strokeDash: [4, 3] },
        encoding: { x, y },
      },
      {
        data: { values },
        mark: { type: "point", filled: true, size: 60 },
        encoding: {
          x,
          y,
          // One colour per run (overlays); a single run needs no legend.
          color: { field: "run", type: "nominal", title: null, legend: runs > 1 ? { labelLimit: 400 } : null },
        },
      },
      {
        data: { values },
        mark: { type: "text", align: "left", dx: 7, dy: -7, fontSize: 10 },
        encoding: { x, y, text: { field: "label" } },
      },
    ],
  };
}

/** Vega-Lite: TTFT p90 against the offered rate, one line per run, each point labelled with its rate and limit. */
export function ttftRateChartSpec(points: readonly TtftRatePoint[]): Record<string, unknown> {
  const values = points.map((p) => ({
    x: p.level,
    y: p.ttftP90Ms,
    run: p.run ?? "this run",
    label: pointLabel(p, "rate"),
  }));
  const runs = new Set(values.map((v) => v.run)).size;
  const x = { field: "x", type: "quantitative", title: "offered request rate (req/s)" };
  const y = { field: "y", type: "quantitative", title: "TTFT p90 (ms)" };
  const color = { field: "run", type: "nominal", title: null, legend: runs > 1 ? { labelLimit: 400 } : null };
  return {
    ...chartFrame(260),
    data: { values },
    layer: [
      { mark: { type: "line", point: { filled: true, size: 60 } }, encoding: { x, y, color, order: { field: "x" } } },
      {
        mark: { type: "text", align: "left", dx: 7, dy: -7, fontSize: 10 },
        encoding: { x, y, text: { field: "label" } },
      },
    ],
  };
}

const limitsOf = (p: LoadSweepResult["points"][number]) =>
  p.diagnosis.binding.map((b) => b.limit).join(" + ") || (p.diagnosis.unknown ? "unknown" : "none");

export function sweepHtml(r: LoadSweepResult, svg: string, ttftSvg: string | null = null): string {
  const unit = r.mode === "rate" ? "req/s" : "users";
  const rows = r.points
    .map(
      (p) =>
        `<tr><td class="n">${esc(fmtRate(p.level))}</td><td class="n">${esc(fmt(p.requestThroughput))}</td><td class="n">${esc(fmt(p.outputThroughput))}</td><td class="n">${esc(fmt(p.tpotMs.p50))}</td><td class="n">${esc(fmt(p.ttftMs.p90))}</td><td>${esc(limitsOf(p))}</td><td class="how">${esc([...p.diagnosis.binding.map((b) => b.evidence), ...(p.diagnosis.unknown ? [`unknown: ${p.diagnosis.unknown}`] : [])].join("; "))}</td></tr>`,
    )
    .join("");
  const knee = r.points.find((p) => p.level === r.knee?.level);
  const kneeHtml =
    r.knee && knee
      ? `<p id="sweep-knee">Knee at ${esc(fmtRate(r.knee.level))} ${unit}: ${esc(fmt(r.knee.onsetRate))} req/s completed.</p><ul>${knee.diagnosis.binding
          .filter((b) => b.limit !== "client")
          .map((b) => `<li>${esc(b.evidence)} — relieve with: ${esc(b.knobs.join("; "))}</li>`)
          .join("")}</ul>`
      : `<p id="sweep-knee">No server-side limit binds at any level.</p>`;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>inferscope sweep ${esc(r.runId)}</title><style>${REPORT_CSS}</style></head>
<body><header><h1>inferscope ${esc(r.mode)} sweep</h1><p>run ${esc(r.runId)} (${esc(r.status)}) against ${esc(r.target)}</p></header>
<main>
<section id="frontier"><h2>Throughput against interactivity</h2>
<figure class="chart" id="chart-frontier" data-chart="frontier">${svg}<figcaption>One point per level (${esc(unit)}), labelled with its binding limit; dashed: the Pareto frontier. ${esc(r.frontier.gpus)} GPU${r.frontier.gpus > 1 ? "s" : ""}.</figcaption></figure>
${
  ttftSvg
    ? `<figure class="chart" id="chart-ttft-rate" data-chart="ttft-rate">${ttftSvg}<figcaption>TTFT p90 against the offered request rate, one point per level, labelled with its binding limit.</figcaption></figure>`
    : ""
}
${kneeHtml}
<h3>Levels</h3>
<table id="sweep-levels"><thead><tr><th>${esc(unit)}</th><th>completed req/s</th><th>output tok/s</th><th>TPOT p50 (ms)</th><th>TTFT p90 (ms)</th><th>binding limit</th><th>evidence</th></tr></thead><tbody>${rows}</tbody></table>
</section></main></body></html>
`;
}

export function sweepMarkdown(r: LoadSweepResult): string {
  const out = [`# inferscope ${r.mode} sweep`, "", `Run ${r.runId} (${r.status}) against ${r.target}.`, ""];
  out.push(
    "| level | req/s | output tok/s | TPOT p50 (ms) | TTFT p90 (ms) | binding limit | evidence |",
    "|---|---|---|---|---|---|---|",
  );
  for (const p of r.points)
    out.push(
      `| ${fmt(p.level)} | ${fmt(p.requestThroughput)} | ${fmt(p.outputThroughput)} | ${fmt(p.tpotMs.p50)} | ${fmt(p.ttftMs.p90)} | ${limitsOf(p)} | ${p.diagnosis.binding
        .map((b) => b.evidence)
        .join("; ")
        .replace(/\|/g, "\\|")} |`,
    );
  out.push(
    "",
    r.knee ? `Knee at ${fmt(r.knee.level)}: ${r.knee.evidence.join("; ")}.` : "No server-side limit binds.",
    "",
  );
  return out.join("\n");
}

export type WrittenSweepReport = WrittenReportFiles;

export async function writeSweepReport(
  result: LoadSweepResult,
  dir: string,
  overlay: readonly LoadSweepResult[] = [],
): Promise<WrittenSweepReport> {
  // The writer redacts: no caller can hand it a secret that reaches a file.
  const r = redact(result);
  // Overlaid runs share the chart (the Pareto set taken over all of them); the tables are this run's.
  const points = overlay.length
    ? overlayFrontiers([r, ...overlay].map((x) => ({ run: x.runId, points: x.frontier.points })))
    : r.frontier.points;
  const svg = await renderSvg(frontierChartSpec(points, r.mode));
  // Rate sweeps: TTFT p90 against the offered rate beside it (overlaid runs tagged with their ids).
  const ttft =
    r.mode === "rate"
      ? [r, ...overlay].flatMap((x) =>
          (x.ttftRate ?? ttftRateOf(x.mode, x.points))!.points.map((p) =>
            overlay.length ? { ...p, run: x.runId } : p,
          ),
        )
      : null;
  const ttftSvg = ttft ? await renderSvg(ttftRateChartSpec(ttft)) : null;
  return writeReportFiles(dir, { html: sweepHtml(r, svg, ttftSvg), markdown: sweepMarkdown(r), json: r });
}

/** Rewrites a stored rate or concurrency sweep's report (for `inferscope report ID`). */
export async function rebuildSweepReport(
  id: string,
  opts: { dbPath?: string; outDir: string; overlay?: string[] },
): Promise<{ result: LoadSweepResult; report: WrittenSweepReport }> {
  const read = (id: string) =>
    storedSummary<LoadSweepResult>(id, opts.dbPath, {
      kinds: ["sweep-rate", "sweep-concurrency"],
      what: "rate or concurrency sweep",
      key: "sweep",
      valid: (r) => Boolean(r.frontier),
      missing: (d) =>
        new UsageError(`sweep run ${id} has no stored frontier (no level finished, or stored by an older version)`, {
          hint: `re-analyse it: inferscope sweep ${d.run.kind === "sweep-rate" ? "rate" : "concurrency"} --resume ${id}`,
        }),
    });
  const result = read(id);
  // Runs stored before the TTFT curve existed get it from their levels.
  if (result.ttftRate === undefined) result.ttftRate = ttftRateOf(result.mode, result.points);
  const others = (opts.overlay ?? []).map((o) => {
    const x = read(o);
    if (x.mode !== result.mode)
      throw new UsageError(`--overlay ${o}: a ${x.mode} sweep cannot share a chart with ${id}, a ${result.mode} sweep`);
    return x;
  });
  return { result, report: await writeSweepReport(result, opts.outDir, others) };
}
