// The tune report: one self-contained HTML page (the study report's styles, an inline SVG chart,
// no scripts), a Markdown twin and the JSON result, written into a directory.

import { UsageError } from "../errors.ts";
import { renderSvg } from "../report/charts.ts";
import { storedSummary, type WrittenReportFiles, writeReportFiles } from "../report/files.ts";
import { esc, fmt } from "../report/format.ts";
import { REPORT_CSS } from "../report/html.ts";
import { redact } from "../secrets.ts";
import type { Interval3, TuneCandidate, TuneResult } from "./run.ts";
import { type CandidateSpans, type SplitPart, spanColumns } from "./spans.ts";

const iv = (i: Interval3 | null | undefined) => (i ? `${fmt(i.estimate)} [${fmt(i.low)}, ${fmt(i.high)}]` : "—");
const pct = (x: number) => `${fmt(x * 100, 3)} %`;

/** The span table's cells per candidate (those with a join): id, joined, each column's "p50 / p99". */
function spanRows(r: TuneResult): { cols: Array<[SplitPart, string]>; rows: string[][] } {
  const cols = spanColumns(r.candidates);
  const cell = (s: CandidateSpans, k: SplitPart) => {
    const d = s.split[k];
    return d ? `${fmt(d.p50)} / ${fmt(d.p99)}` : "—";
  };
  const rows = r.candidates.flatMap((c) =>
    c.spans
      ? [
          [
            c.id,
            `${c.spans.joined}/${c.spans.requests} (${pct(c.spans.joinRate)})`,
            ...cols.map(([k]) => cell(c.spans!, k)),
          ],
        ]
      : [],
  );
  return { cols, rows };
}

const spanIntro = (r: TuneResult) =>
  `Each block's requests joined with the engine's request spans (OTLP${r.otlp!.endpoint ? `, ${r.otlp!.endpoint}` : ""}): ${r.otlp!.hint ?? `each server got ${r.otlp!.serverFlags}`}. p50 / p99 over every joined request of the candidate's blocks, ms.`;

function fate(c: TuneCandidate): string {
  if (c.status === "skipped") return `skipped: ${c.skipped}`;
  if (c.dropped) return `dropped after block ${c.dropped.afterBlock + 1}: ${c.dropped.reason}`;
  return c.status;
}

/** Every candidate's measured (or, unmeasured, posterior) interval on one axis, the best highlighted. */
export function tuneChartSpec(r: TuneResult): Record<string, unknown> {
  const values = r.candidates
    .filter((c) => c.status !== "skipped")
    .flatMap((c) => {
      const rows = [
        {
          candidate: `${c.id} ${c.name}`,
          kind: "posterior (model + measurements)",
          est: c.posterior.estimate,
          low: c.posterior.low,
          high: c.posterior.high,
        },
      ];
      if (c.measured)
        rows.push({
          candidate: `${c.id} ${c.name}`,
          kind: "measured",
          est: c.measured.estimate,
          low: c.measured.low,
          high: c.measured.high,
        });
      return rows;
    })
    .filter((v) => Number.isFinite(v.est));
  const y = { field: "candidate", type: "nominal", title: null, sort: null };
  const color = {
    field: "kind",
    type: "nominal",
    title: null,
    scale: { range: ["#9aa4ae", "#1b9e77"] },
  };
  return {
    $schema: "https://vega.github.io/schema/vega-lite/v6.json",
    width: 560,
    height: { step: 26 },
    data: { values },
    config: {
      font: "system-ui, sans-serif",
      view: { stroke: null },
      background: "white",
      legend: { orient: "bottom" },
    },
    encoding: { y, yOffset: { field: "kind" }, color },
    layer: [
      {
        mark: { type: "rule", strokeWidth: 2 },
        encoding: {
          x: { field: "low", type: "quantitative", title: `${r.objective.label} (${r.objective.unit}), 95 %` },
          x2: { field: "high" },
        },
      },
      { mark: { type: "point", filled: true, size: 50 }, encoding: { x: { field: "est", type: "quantitative" } } },
    ],
  };
}

export function tuneHtml(r: TuneResult, chartSvg: string): string {
  const b = r.best;
  const cards = [
    ["best configuration", b ? `${b.id}` : "none", b ? b.name : ""],
    [
      r.objective.label,
      b ? `${fmt(b.objective.estimate)} ${r.objective.unit}` : "n/a",
      b ? `95 %: [${fmt(b.objective.low)}, ${fmt(b.objective.high)}]` : "",
    ],
    [
      "measured gain over the baseline",
      b?.gain ? pct(b.gain.relative.estimate) : b?.id === "c0" ? "baseline is best" : "n/a",
      b?.gain
        ? `${fmt(b.gain.absolute.estimate)} ${r.objective.unit} [${fmt(b.gain.absolute.low)}, ${fmt(b.gain.absolute.high)}]${b.gain.relative.low > 0 ? "" : " — not proven"}`
        : "",
    ],
    ["server starts", String(r.restarts), `a full grid at the best's precision: ${r.gridStarts}; ${fmt(r.elapsedS)} s`],
  ]
    .map(
      ([l, v, x]) =>
        `<div class="card"><div class="l">${esc(l)}</div><div class="v">${esc(v)}</div><div class="r">${esc(x)}</div></div>`,
    )
    .join("");
  const rows = r.candidates
    .map(
      (c) =>
        `<tr${c.status === "best" ? ' class="ok"' : ""}><td>${esc(c.id)}</td><td><code>${esc(c.name)}</code></td><td class="n">${esc(iv(c.predicted))}</td><td class="n">${esc(c.status === "skipped" ? "—" : iv(c.posterior))}</td><td class="n">${esc(iv(c.measured))}</td><td class="n">${esc(c.measured?.blocks ?? 0)}</td><td class="n">${esc(c.status === "skipped" ? "" : pct(c.probabilityBest))}</td><td class="how">${esc(fate(c))}</td></tr>`,
    )
    .join("");
  const blocks = r.blocks
    .map(
      (x) =>
        `<tr><td class="n">${esc(x.index + 1)}</td><td class="n">${esc(x.round)}</td><td>${esc(x.candidate)}</td><td class="n">${esc(x.value === null ? "—" : fmt(x.value))}</td><td>${esc(x.status)}</td><td class="how">${esc(x.error ?? "")}</td></tr>`,
    )
    .join("");
  const notes = [...r.model.notes, ...r.model.assumptions, ...r.warnings, ...r.errors.map((e) => e.split("\n")[0]!)]
    .map((n) => `<p class="note">${esc(n)}</p>`)
    .join("");
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>inferscope tune ${esc(r.runId)}</title><style>${REPORT_CSS}</style></head>
<body><header><h1>inferscope tune — ${esc(r.objective.label)}</h1><p>run ${esc(r.runId)} (${esc(r.status)}); ${esc(r.candidates.length)} candidates, ${esc(r.restarts)} server starts</p></header>
<main>
<section id="tune"><h2>Tuning</h2>
<div class="cards">${cards}</div>
${b ? `<p>Run it: <code>${esc(b.command)}</code></p>` : ""}
<p>${esc(r.stop.message)}${r.stop.unseparated.length ? ` — not separated from the best: ${esc(r.stop.unseparated.join(", "))}` : ""}.</p>
<figure class="chart" id="chart-tune" data-chart="tune">${chartSvg}<figcaption>Each candidate's measured 95 % interval (green) and the refitted surrogate's (grey; model + every block). ${r.objective.lowerIsBetter ? "Lower" : "Higher"} is better.</figcaption></figure>
<h3>Candidates</h3>
<table id="tune-candidates"><thead><tr><th>id</th><th>candidate</th><th>predicted (model, 80 %)</th><th>posterior 95 %</th><th>measured 95 %</th><th>blocks</th><th>P(best)</th><th>fate</th></tr></thead><tbody>${rows}</tbody></table>
${notes}
${r.otlp ? spansHtml(r) : ""}
<h3>Blocks (one server start each)</h3>
<table id="tune-blocks"><thead><tr><th>block</th><th>round</th><th>candidate</th><th>${esc(r.objective.unit)}</th><th>status</th><th>error</th></tr></thead><tbody>${blocks}</tbody></table>
<h3>Method</h3><p class="how">${esc(r.method)} Objective: ${esc(r.objective.define)}.</p>
</section></main></body></html>
`;
}

function spansHtml(r: TuneResult): string {
  const { cols, rows } = spanRows(r);
  const head = ["id", "joined", ...cols.map(([, l]) => l)].map((h) => `<th>${esc(h)}</th>`).join("");
  const body = rows
    .map((x) => `<tr>${x.map((v, i) => `<td${i ? ' class="n"' : ""}>${esc(v)}</td>`).join("")}</tr>`)
    .join("");
  const o = r.otlp!;
  return `<h3>Where the time went (engine spans)</h3>
<p>${esc(spanIntro(r))}</p>
<table id="tune-spans"><thead><tr>${head}</tr></thead><tbody>${body}</tbody></table>
${o.comparison ? `<p>${esc(o.comparison)}.</p>` : ""}${o.findings.map((f) => `<p class="note">${esc(f)}</p>`).join("")}`;
}

export function tuneMarkdown(r: TuneResult): string {
  const b = r.best;
  const out = [`# inferscope tune — ${r.objective.label}`, "", `Run ${r.runId} (${r.status}).`, ""];
  if (b) {
    out.push(
      `**Best:** ${b.id} \`${b.name}\` — ${iv(b.objective)} ${r.objective.unit}, P(best) ${pct(b.probabilityBest)}.`,
    );
    if (b.gain)
      out.push(
        `Measured gain over the baseline: ${fmt(b.gain.absolute.estimate)} ${r.objective.unit} [${fmt(b.gain.absolute.low)}, ${fmt(b.gain.absolute.high)}] = ${pct(b.gain.relative.estimate)} [${pct(b.gain.relative.low)}, ${pct(b.gain.relative.high)}].`,
      );
    out.push("", "```sh", b.command, "```", "");
  }
  out.push(
    `${r.stop.message}. Server starts: ${r.restarts} (a full grid at the best's precision: ${r.gridStarts}).`,
    "",
  );
  out.push(
    "| id | candidate | predicted | posterior 95 % | measured 95 % | blocks | P(best) | fate |",
    "|---|---|---|---|---|---|---|---|",
  );
  for (const c of r.candidates)
    out.push(
      `| ${c.id} | \`${c.name}\` | ${iv(c.predicted)} | ${c.status === "skipped" ? "—" : iv(c.posterior)} | ${iv(c.measured)} | ${c.measured?.blocks ?? 0} | ${c.status === "skipped" ? "" : pct(c.probabilityBest)} | ${fate(c).replace(/\|/g, "\\|")} |`,
    );
  if (r.otlp) {
    const { cols, rows } = spanRows(r);
    out.push("", "## Where the time went (engine spans)", "", spanIntro(r), "");
    out.push(`| id | joined | ${cols.map(([, l]) => l).join(" | ")} |`);
    out.push(`|${"---|".repeat(cols.length + 2)}`);
    for (const x of rows) out.push(`| ${x.join(" | ")} |`);
    if (r.otlp.comparison) out.push("", `${r.otlp.comparison}.`);
    if (r.otlp.findings.length) out.push("", ...r.otlp.findings.map((f) => `- ${f}`));
  }
  out.push("", `Method: ${r.method}`, "");
  return out.join("\n");
}

export type WrittenTuneReport = WrittenReportFiles;

export async function writeTuneReport(result: TuneResult, dir: string): Promise<WrittenTuneReport> {
  // The writer redacts: no caller can hand it a secret that reaches a file.
  const r = redact(result);
  const svg = await renderSvg(tuneChartSpec(r));
  return writeReportFiles(dir, { html: tuneHtml(r, svg), markdown: tuneMarkdown(r), json: r });
}

/** Rewrites a stored tune run's report (for `inferscope report ID`). */
export async function rebuildTuneReport(
  id: string,
  opts: { dbPath?: string; outDir: string },
): Promise<{ result: TuneResult; report: WrittenTuneReport }> {
  const result = storedSummary<TuneResult>(id, opts.dbPath, {
    kinds: ["tune"],
    what: "tune run",
    key: "tune",
    missing: (d) => new UsageError(`tune run ${id} has no stored result (status ${d.run.status}: no block finished)`),
  });
  return { result, report: await writeTuneReport(result, opts.outDir) };
}
