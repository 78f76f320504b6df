// The self-contained HTML report: one file, inline CSS, inline SVG charts, no scripts, no network.
import type { RenderedChart } from "./charts.ts";
import { deploymentRows, deploymentTitle, esc, fmt, fmtP, fmtPct, fmtQ, telemetryRows } from "./format.ts";
import type {
  Ceiling,
  ExperimentPlan,
  PhaseRecord,
  Quantity,
  RequestSplitSection,
  ServerTimingSection,
  StudyResult,
  TelemetrySection,
  TraceLayers,
  TraceRoofline,
} from "./types.ts";

/** The report's styles, shared by every self-contained page (study and tune). */
export const REPORT_CSS = `
:root{--fg:#1d232a;--muted:#5b6570;--line:#dde2e7;--bg:#f6f7f9;--card:#fff;--acc:#d95f02}
*{box-sizing:border-box}
body{margin:0;font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg)}
header{background:#1d232a;color:#fff;padding:22px 32px}
header h1{margin:0 0 4px;font-size:22px}
header p{margin:2px 0;color:#c9d1d9;font-size:14px}
nav{background:#fff;border-bottom:1px solid var(--line);padding:8px 32px;font-size:13px;position:sticky;top:0;z-index:2}
nav a{color:var(--muted);margin-right:14px;text-decoration:none}
nav a:hover{color:var(--fg)}
main{max-width:1040px;margin:0 auto;padding:8px 24px 48px}
section{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:18px 22px;margin:18px 0}
h2{margin:0 0 10px;font-size:19px}
h3{font-size:15px;margin:18px 0 6px}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(220px,1fr));gap:12px;margin:8px 0 14px}
.card{border:1px solid var(--line);border-radius:6px;padding:10px 12px}
.card .l{font-size:12px;color:var(--muted);text-transform:uppercase;letter-spacing:.03em}
.card .v{font-size:22px;font-weight:600;margin:2px 0}
.card .r{font-size:12px;color:var(--muted)}
table{border-collapse:collapse;width:100%;font-size:13px;margin:6px 0 10px}
th,td{border-bottom:1px solid var(--line);padding:5px 8px;text-align:left;vertical-align:top}
th{background:#f0f2f5;font-weight:600}
td.n{font-variant-numeric:tabular-nums;white-space:nowrap}
.m{display:inline-block;font-size:11px;padding:0 6px;border-radius:9px;border:1px solid;white-space:nowrap}
.m-measured{color:#1b7a5e;border-color:#1b9e77}
.m-fitted{color:#5a50a8;border-color:#7570b3}
.m-modelled{color:#b04a00;border-color:#d95f02}
.m-derived{color:#37576e;border-color:#4c78a8}
.how{color:var(--muted);font-size:12px}
figure{margin:10px 0 16px}
figure svg{max-width:100%;height:auto}
figcaption{font-size:12px;color:var(--muted)}
.note{background:#fff8e6;border-left:3px solid #f0b400;padding:8px 12px;margin:8px 0;font-size:13px}
.unavail{background:#f3f4f6;border-left:3px solid #9aa4ae;padding:8px 12px;color:var(--muted);font-size:14px}
ul.findings li{margin:4px 0}
code{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12.5px;background:#f0f2f5;padding:1px 4px;border-radius:3px;word-break:break-all}
.ok{color:#1b7a5e}.bad{color:#b3261e}.skip{color:var(--muted)}
`;

function badge(method: string): string {
  return `<span class="m m-${esc(method)}">${esc(method)}</span>`;
}

function qCells(q: Quantity | undefined): string {
  if (!q) return `<td class="n">n/a</td><td></td><td></td>`;
  return `<td class="n">${esc(fmtQ(q))}</td><td>${badge(q.method)}</td><td class="how">${esc(q.how)}</td>`;
}

function traceLayersHtml(l: TraceLayers): string {
  const u = l.layerUs;
  return `<h3>Layers</h3>
<p>${esc(l.layers)} layers per step, ${esc(l.kernelsPerLayer)} kernels each: ${esc(fmt(u.mean))} µs of kernel time per layer (min ${esc(fmt(u.min))}, max ${esc(fmt(u.max))}, cv ${esc(fmtPct(u.cv))}); head ${esc(l.head.kernels)} kernels, ${esc(fmt(l.head.us))} µs; tail (final norm, LM head, sampling) ${esc(l.tail.kernels)} kernels, ${esc(fmt(l.tail.us))} µs.</p>
${l.ops.length ? `<table><thead><tr><th>#</th><th>op in the layer</th><th>class</th><th>mean µs</th><th>min</th><th>max</th><th>cv</th></tr></thead><tbody>${l.ops.map((o) => `<tr><td class="n">${esc(o.index)}</td><td><code>${esc(o.name.length > 70 ? `${o.name.slice(0, 67)}...` : o.name)}</code></td><td>${esc(o.cls)}</td><td class="n">${esc(fmt(o.meanUs))}</td><td class="n">${esc(fmt(o.minUs))}</td><td class="n">${esc(fmt(o.maxUs))}</td><td class="n">${esc(fmtPct(o.cv))}</td></tr>`).join("")}</tbody></table>` : ""}`;
}

function traceRooflineHtml(r: TraceRoofline): string {
  const rng = (x: { low: number; mid: number; high: number }) => `${fmt(x.mid)} (${fmt(x.low)}–${fmt(x.high)})`;
  return `<h3>Weight-GEMM roofline</h3>
<p class="how">${esc(r.model)} on ${esc(r.gpu)}; ceiling ${esc(fmt(r.ceilingGBs / 1000))} TB/s (${esc(r.ceilingIs)}).</p>
${r.gemms.length ? `<table><thead><tr><th>weight GEMM</th><th>MB</th><th>µs per call</th><th>TB/s</th><th>of ceiling</th></tr></thead><tbody>${r.gemms.map((g) => `<tr><td>${esc(g.name)}</td><td class="n">${esc(fmt(g.mb))}</td><td class="n">${esc(fmt(g.us))}</td><td class="n">${esc(fmt(g.achievedGBs / 1000))}</td><td class="n">${esc(fmtPct(g.share))}</td></tr>`).join("")}</tbody></table>` : ""}
<table><thead><tr><th>model term</th><th>predicted ms</th><th>measured ms</th><th>measured as</th></tr></thead><tbody>${r.terms.map((t) => `<tr><td>${esc(t.label)}</td><td class="n">${esc(rng(t.predictedMs))}</td><td class="n">${t.measuredMs === null ? "n/a" : esc(fmt(t.measuredMs))}</td><td class="how">${esc(t.measuredIs)}</td></tr>`).join("")}<tr><td>step</td><td class="n">${esc(rng(r.predictedStepMs))}</td><td class="n">${esc(fmt(r.measuredStepMs))}</td><td class="how">mean step window</td></tr></tbody></table>
${notes(r.notes)}`;
}

function qTable(rows: Array<[string, Quantity | undefined]>): string {
  const body = rows
    .filter(([, q]) => q !== undefined)
    .map(([label, q]) => `<tr><td>${esc(label)}</td>${qCells(q)}</tr>`)
    .join("");
  return `<table><thead><tr><th>quantity</th><th>value [95 % interval or range]</th><th>how</th><th>derivation</th></tr></thead><tbody>${body}</tbody></table>`;
}

function charts(all: RenderedChart[], section: string): string {
  // Summary charts are placed by id (decomposition in the summary, ceilings with the ceilings table).
  return figures(all.filter((c) => c.section === section));
}

function figures(list: RenderedChart[]): string {
  return list
    .map(
      (c) =>
        `<figure class="chart" id="chart-${esc(c.id)}" data-chart="${esc(c.id)}"><h3>${esc(c.title)}</h3>${c.svg}<figcaption>${esc(c.caption)}</figcaption></figure>`,
    )
    .join("");
}

function unavailable(r: StudyResult, phase: string, what: string): string {
  const p = r.meta.phases.find((x) => x.name === phase);
  const why = p?.reason ? `: ${p.reason}` : p ? ` (phase ${p.status})` : " (phase not run)";
  return `<p class="unavail">${esc(what)} is not in this report${esc(why)}.</p>`;
}

function notes(list: string[] | undefined): string {
  return (list ?? []).map((n) => `<p class="note">${esc(n)}</p>`).join("");
}

function ceilingRows(list: Ceiling[]): string {
  return `<table><thead><tr><th>scenario</th><th>assumption</th><th>ms per token</th><th>tokens/s</th><th>how</th></tr></thead><tbody>${list
    .map(
      (c) =>
        `<tr><td>${esc(c.scenario)}</td><td class="how">${esc(c.assumption)}</td><td class="n">${esc(fmtQ(c.msPerToken))}</td><td class="n">${esc(fmtQ(c.tokensPerSecond))}</td><td>${badge(c.tokensPerSecond.method)}</td></tr>`,
    )
    .join("")}</tbody></table>`;
}

function phaseRow(p: PhaseRecord): string {
  const cls = p.status === "ok" ? "ok" : p.status === "failed" ? "bad" : "skip";
  return `<tr><td>${esc(p.name)}</td><td class="${cls}">${esc(p.status)}</td><td class="n">${esc(fmt(p.durationMs / 1000, 3))} s</td><td class="how">${esc(p.reason ?? "")}</td></tr>`;
}

export function renderHtml(r: StudyResult, rendered: RenderedChart[]): string {
  const m = r.meta;
  const dep = m.deployment;
  const title = `inferscope study — ${deploymentTitle(dep)}`;
  const parts: string[] = [];

  // Summary
  const cards = r.summary.headlines
    .map(
      (h) =>
        `<div class="card"><div class="l">${esc(h.label)}</div><div class="v">${esc(fmt(h.value.value))} <small>${esc(h.value.unit)}</small></div><div class="r">${
          h.value.low !== undefined && h.value.high !== undefined
            ? `[${esc(fmt(h.value.low))}, ${esc(fmt(h.value.high))}] · `
            : ""
        }${badge(h.value.method)}</div><div class="how">${esc(h.value.how)}</div></div>`,
    )
    .join("");
  const decomp = r.summary.decomposition.length
    ? `<table><thead><tr><th>component</th><th>ms per token</th><th>how</th><th>what it contains</th></tr></thead><tbody>${r.summary.decomposition
        .map(
          (d) =>
            `<tr><td>${esc(d.component)}</td><td class="n">${esc(fmtQ(d.ms))}</td><td>${badge(d.ms.method)}</td><td class="how">${esc(d.detail)}. ${esc(d.ms.how)}</td></tr>`,
        )
        .join("")}</tbody></table>`
    : `<p class="unavail">No decomposition: it needs the batch-1 measurement.</p>`;
  parts.push(`<section id="summary"><h2>Summary</h2>
<div class="cards">${cards}</div>
${r.summary.findings.length ? `<ul class="findings">${r.summary.findings.map((f) => `<li>${esc(f)}</li>`).join("")}</ul>` : ""}
${figures(rendered.filter((c) => c.id === "decomposition"))}
${decomp}
<p class="how">${esc(r.summary.decompositionBasis)}</p>
${r.summary.ceiling ? `<h3>Ceiling</h3><p><b>${esc(fmtQ(r.summary.ceiling.tokensPerSecond))}</b> — ${esc(r.summary.ceiling.scenario)} (${esc(r.summary.ceiling.assumption)}) ${badge(r.summary.ceiling.tokensPerSecond.method)}</p>` : ""}
</section>`);

  // Deployment: every field with where it came from
  parts.push(`<section id="deployment"><h2>Deployment</h2>
<p>${esc(deploymentTitle(dep))}</p>
<table><thead><tr><th>field</th><th>value</th><th>source</th></tr></thead><tbody>${deploymentRows(dep)
    .map(
      (x) =>
        `<tr><td>${esc(x.field)}</td><td${x.value === "unknown" ? ' class="skip"' : ""}>${esc(x.value)}</td><td class="how">${esc(x.source)}</td></tr>`,
    )
    .join("")}</tbody></table>
</section>`);

  // Audit
  if (r.audit) {
    const a = r.audit;
    parts.push(`<section id="audit"><h2>What the metrics endpoint exposes</h2>
<p>Engine detected: <b>${esc(a.engine)}</b>${a.engineVersion ? ` ${esc(a.engineVersion)}` : ""}; two scrapes ${esc(fmt(a.windowMs / 1000))} s apart ${badge("measured")}.</p>
${notes(a.notes)}
<table><thead><tr><th>metric family</th><th>type</th><th>granularity</th><th>concept</th><th>over the window</th></tr></thead><tbody>${a.families
      .map(
        (f) =>
          `<tr><td><code>${esc(f.name)}</code></td><td>${esc(f.type)}</td><td>${esc(f.granularity)}</td><td>${esc(f.concept ?? "")}</td><td class="how">${esc(f.value ?? "")}</td></tr>`,
      )
      .join("")}</tbody></table>
${a.gaps.length ? `<h3>Not exposed, and how inferscope recovers it</h3><table><thead><tr><th>missing</th><th>method</th><th>command</th></tr></thead><tbody>${a.gaps.map((g) => `<tr><td>${esc(g.what)}</td><td>${esc(g.method)}</td><td>${g.command ? `<code>${esc(g.command)}</code>` : ""}</td></tr>`).join("")}</tbody></table>` : ""}
</section>`);
  } else
    parts.push(
      `<section id="audit"><h2>What the metrics endpoint exposes</h2>${unavailable(r, "audit", "The metrics audit")}</section>`,
    );

  // Latency
  if (r.latency) {
    const L = r.latency;
    parts.push(`<section id="latency"><h2>Latency distributions (batch 1)</h2>
<p>${esc(L.requests)} streaming requests, one at a time, ${esc(L.outputTokensPerRequest)} output tokens each${L.promptTokens ? `, ${esc(L.promptTokens)}-token prompt` : ""}.</p>
${qTable([
  ["TTFT (mean)", L.ttftMs],
  ["ITL per token (mean)", L.itlMs],
  ["TPOT (vLLM definition)", L.tpotMs],
  ["E2E request time", L.e2eMs],
  ["decode rate", L.decodeRate],
])}
${L.server ? `<p class="how">Server's own view over the same window (from /metrics <code>_sum/_count</code> deltas): TTFT mean ${esc(fmt(L.server.ttftMeanMs))} ms, ITL mean ${esc(fmt(L.server.itlMeanMs))} ms${L.server.steps !== undefined ? `, ${esc(L.server.steps)} engine steps` : ""}. ${esc(L.server.note ?? "")}</p>` : ""}
${notes(L.notes)}
${r.serverTimings ? serverTimingsHtml(r.serverTimings) : ""}
${r.requestSplit ? requestSplitHtml(r.requestSplit) : ""}
${charts(rendered, "latency")}
</section>`);
  } else
    parts.push(
      `<section id="latency"><h2>Latency distributions</h2>${unavailable(r, "bench", "The batch-1 benchmark")}</section>`,
    );

  // Telemetry: the hardware's counters over the same window
  if (r.telemetry) parts.push(telemetryHtml(r.telemetry, rendered));
  else
    parts.push(
      `<section id="telemetry"><h2>Hardware telemetry</h2>${unavailable(r, "telemetry", "Hardware telemetry")}</section>`,
    );

  // Sweep
  if (r.sweep) {
    const s = r.sweep;
    parts.push(`<section id="sweep"><h2>Length sweep: T(N) = a + b·(N − 1)</h2>
${qTable([
  ["a: fixed cost per request (≈ TTFT)", s.fixedMs],
  ["b: per-token decode cost", s.perTokenMs],
  ["converged decode rate 1000/b", s.convergedRate],
])}
${s.r2 !== undefined ? `<p class="how">R² = ${esc(fmt(s.r2, 5))} over ${esc(s.points.length)} requests.</p>` : ""}
${notes(s.notes)}
${charts(rendered, "sweep")}
</section>`);
  } else
    parts.push(`<section id="sweep"><h2>Length sweep</h2>${unavailable(r, "sweep", "The length sweep")}</section>`);

  // A/B
  if (r.ab) {
    const ab = r.ab;
    parts.push(`<section id="ab"><h2>A/B: ${esc(ab.arms.map((a) => a.name).join(" vs "))}, server restarted per arm</h2>
<p><b>${esc(ab.verdict)}</b></p>
${ab.mechanism ? `<p class="how">What it tests: ${esc(ab.mechanism)}.${ab.chosenBecause ? ` Chosen: ${esc(ab.chosenBecause)}.` : ""}</p>` : ""}
<table><thead><tr><th>arm</th><th>change</th><th>per-token ms [95 % CI]</th><th>TTFT ms</th><th>E2E ms</th><th>samples</th></tr></thead><tbody>${ab.arms
      .map(
        (a) =>
          `<tr><td>${esc(a.name)}</td><td><code>${esc(a.change)}</code></td><td class="n">${esc(fmtQ(a.perTokenMs))}</td><td class="n">${esc(fmtQ(a.ttftMs))}</td><td class="n">${esc(fmtQ(a.e2eMs))}</td><td class="n">${esc(a.samples)}</td></tr>`,
      )
      .join("")}</tbody></table>
${qTable([
  ["Δ per token (baseline − treatment)", ab.deltaPerTokenMs],
  ["Δ TTFT", ab.deltaTtftMs],
  ...(ab.deltaPerCallUs
    ? ([[`Δ per all-reduce (÷ ${ab.callsPerToken ?? "?"} calls/token)`, ab.deltaPerCallUs]] as Array<
        [string, Quantity | undefined]
      >)
    : []),
])}
<p class="how">Welch's t p = ${esc(fmtP(ab.pWelch))}; Mann–Whitney p = ${esc(fmtP(ab.pMannWhitney))}${ab.order?.length ? `; block order ${esc(ab.order.join(" "))}` : ""}.</p>
${notes(ab.notes)}
${charts(rendered, "ab")}
</section>`);
  } else parts.push(`<section id="ab"><h2>A/B comparison</h2>${unavailable(r, "ab", "The A/B experiment")}</section>`);
  if (r.experiments) parts.push(experimentsHtml(r.experiments));

  // Trace
  if (r.trace) {
    const t = r.trace;
    parts.push(`<section id="trace"><h2>Profiler trace</h2>
<p>${esc(t.decodeSteps)} decode steps of ${esc(t.steps)} captured; ${esc(fmt(t.allReduceCallsPerStep))} all-reduce kernels per step.</p>
${qTable([
  ["GPU step time", t.stepMs],
  ["all-reduce time per call", t.allReducePerCallUs],
  ["all-reduce share of the step", t.allReduceShare],
])}
<table><thead><tr><th>kernel class</th><th>ms per step</th><th>share of step</th><th>kernels per step</th></tr></thead><tbody>${t.perClass
      .map(
        (c) =>
          `<tr><td>${esc(c.cls)}</td><td class="n">${esc(fmt(c.msPerStep))}</td><td class="n">${esc(fmtPct(c.share))}</td><td class="n">${esc(c.kernelsPerStep !== undefined ? fmt(c.kernelsPerStep) : "")}</td></tr>`,
      )
      .join(
        "",
      )}<tr><td>idle (GPU)</td><td class="n">${esc(fmt(t.idleMsPerStep))}</td><td></td><td></td></tr></tbody></table>
${t.layers ? traceLayersHtml(t.layers) : ""}
${t.roofline ? traceRooflineHtml(t.roofline) : ""}
${t.kernelNames.length ? `<p class="how">Communication kernels seen: ${t.kernelNames.map((k) => `<code>${esc(k)}</code>`).join(" ")}</p>` : ""}
${notes(t.notes)}
${charts(rendered, "trace")}
</section>`);
  } else
    parts.push(`<section id="trace"><h2>Profiler trace</h2>${unavailable(r, "trace", "The profiler trace")}</section>`);

  // Model
  if (r.model) {
    const md = r.model;
    parts.push(`<section id="model"><h2>Model vs measurement</h2>
<p>${esc(md.description)}</p>
${qTable([
  ["predicted decode step (catalog inputs)", md.predictedStepMs],
  ["calibrated decode step", md.calibratedStepMs],
  ["host contention (run-queue wait per token, measured)", md.hostContentionMs],
  ["engine host time per step (engine spans, measured)", md.hostFromSpansMs],
  ...md.fittedParams.map((p) => [p.name, p.value] as [string, Quantity]),
])}
${md.collectives ? `<p>Collectives per token: <b>${esc(md.collectives.countPerToken)}</b> all-reduces of ${esc(md.collectives.bytesEach.toLocaleString("en-US"))} B${md.collectives.algorithm ? `, ${esc(md.collectives.algorithm)}` : ""}${md.collectives.protocol ? `/${esc(md.collectives.protocol)}` : ""}${md.collectives.latencyUs !== undefined ? `, ${esc(fmt(md.collectives.latencyUs))} µs each (modelled)` : ""}. ${esc(md.collectives.note ?? "")}</p>` : ""}
${md.terms.length ? `<table><thead><tr><th>model term</th><th>ms per step</th><th>share</th><th>detail</th></tr></thead><tbody>${md.terms.map((t) => `<tr><td>${esc(t.name)}</td><td class="n">${esc(fmt(t.ms))}</td><td class="n">${esc(fmtPct(t.share))}</td><td class="how">${esc(t.detail ?? "")}</td></tr>`).join("")}</tbody></table>` : ""}
${md.residuals.length ? `<h3>Calibration residuals</h3><table><thead><tr><th>measurement</th><th>measured</th><th>modelled</th><th>residual</th></tr></thead><tbody>${md.residuals.map((x) => `<tr><td>${esc(x.what)}</td><td class="n">${esc(fmt(x.measured))} ${esc(x.unit)}</td><td class="n">${esc(fmt(x.modelled))} ${esc(x.unit)}</td><td class="n">${esc(fmt(x.residualPct, 2))} %</td></tr>`).join("")}</tbody></table>` : ""}
${notes(md.notes)}
${charts(rendered, "model")}
</section>`);
  } else
    parts.push(
      `<section id="model"><h2>Model vs measurement</h2>${unavailable(r, "model", "The analytical model")}</section>`,
    );

  // Ceilings and what-ifs
  const ceilingChart = rendered.filter((c) => c.id === "ceilings");
  parts.push(`<section id="whatifs"><h2>Ceilings and what-ifs</h2>
${r.ceilings.length ? ceilingRows(r.ceilings) : `<p class="unavail">No ceilings: they need the batch-1 measurement.</p>`}
${figures(ceilingChart)}
${r.whatIfs.length ? `<h3>What-ifs</h3><table><thead><tr><th>scenario</th><th>assumption</th><th>ms per token</th><th>tokens/s</th><th>vs measured</th><th>how</th></tr></thead><tbody>${r.whatIfs.map((w) => `<tr><td>${esc(w.scenario)}</td><td class="how">${esc(w.assumption)}</td><td class="n">${esc(fmtQ(w.msPerToken))}</td><td class="n">${esc(fmtQ(w.tokensPerSecond))}</td><td class="n">${w.speedup !== undefined ? `${esc(fmt(w.speedup))}×` : ""}</td><td>${badge(w.tokensPerSecond.method)}</td></tr>`).join("")}</tbody></table>` : unavailable(r, "model", "What-ifs")}
${charts(rendered, "whatifs")}
</section>`);

  // Method and environment
  parts.push(`<section id="method"><h2>Method and environment</h2>
<ol>${r.method.map((s) => `<li>${esc(s)}</li>`).join("")}</ol>
<h3>Phases</h3>
<table><thead><tr><th>phase</th><th>status</th><th>time</th><th>note</th></tr></thead><tbody>${m.phases.map(phaseRow).join("")}</tbody></table>
<h3>Target</h3>
<table><tbody>
<tr><td>kind</td><td>${esc(m.target.kind)}</td></tr>
${m.target.profile ? `<tr><td>sim profile</td><td><code>${esc(m.target.profile)}</code></td></tr>` : ""}
${m.target.url ? `<tr><td>URL</td><td><code>${esc(m.target.url)}</code></td></tr>` : ""}
${m.target.serverCommand ? `<tr><td>server command (secrets redacted)</td><td><code>${esc(m.target.serverCommand)}</code></td></tr>` : ""}
<tr><td>time scale</td><td>${esc(m.timeScale)}${m.timeScale !== 1 ? " — the sim ran this many times faster than real time; every client-measured time was multiplied back into simulated time (the sim's /metrics and trace record simulated time already)" : ""}</td></tr>
<tr><td>deployment</td><td>${esc(deploymentTitle(dep))}</td></tr>
<tr><td>seed</td><td>${esc(m.seed)}</td></tr>
${m.runId ? `<tr><td>run id</td><td><code>${esc(m.runId)}</code> (rebuild with <code>inferscope report ${esc(m.runId)}</code>)</td></tr>` : ""}
</tbody></table>
<h3>Flags</h3>
<table><tbody>${Object.entries(m.flags)
    .map(([k, v]) => `<tr><td><code>--${esc(k)}</code></td><td>${esc(v === null ? "" : String(v))}</td></tr>`)
    .join("")}</tbody></table>
<h3>Environment</h3>
<table><tbody>${Object.entries(m.environment)
    .map(([k, v]) => `<tr><td>${esc(k)}</td><td>${esc(v)}</td></tr>`)
    .join("")}</tbody></table>
</section>`);

  const nav = [
    ["summary", "Summary"],
    ["deployment", "Deployment"],
    ["audit", "Metrics"],
    ["latency", "Latency"],
    ["sweep", "Sweep"],
    ["ab", "A/B"],
    ["trace", "Trace"],
    ["model", "Model"],
    ["whatifs", "Ceilings"],
    ["method", "Method"],
  ]
    .map(([id, label]) => `<a href="#${id}">${label}</a>`)
    .join("");

  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<title>${esc(title)}</title>
<style>${REPORT_CSS}</style></head>
<body>
<header><h1>${esc(title)}</h1>
<p>${esc(`${dep.quant} · TP ${dep.tp} · ${dep.interconnect} · ${dep.engine}`)} · target: ${esc(m.target.kind)}${m.target.profile ? ` (${esc(m.target.profile)})` : ""}</p>
<p>${esc(m.startedAt)} · ${esc(fmt(m.durationMs / 1000))} s${m.quick ? " · quick run" : ""}${m.timeScale !== 1 ? ` · sim time-scale ${esc(m.timeScale)}× (times shown in simulated time)` : ""}</p></header>
<nav>${nav}</nav>
<main>
${parts.join("\n")}
</main></body></html>
`;
}

function serverTimingsHtml(t: ServerTimingSection): string {
  return `<h3>The server's own timing per request (${esc(t.source)})</h3>
${qTable([
  ["server decode per token", t.serverDecodeMsPerToken],
  ["client TPOT (same requests)", t.clientTpotMs],
  ["server prompt time", t.serverPromptMs],
  ["client TTFT (same requests)", t.clientTtftMs],
])}
<p class="how">Client − server per token: median ${esc(fmt(t.diffPct))} % (median |Δ| ${esc(fmt(t.absDiffPct))} %) over ${esc(t.requests)} requests${t.ttftOverheadMs !== undefined ? `; client TTFT − server prompt time: median ${esc(fmt(t.ttftOverheadMs))} ms (transit, queueing, tokenisation and the client)` : ""}.</p>
${notes(t.notes)}`;
}

function requestSplitHtml(t: RequestSplitSection): string {
  const row = (x: RequestSplitSection["rows"][number]) =>
    `<tr><td>${esc(x.label)}</td>${[x.mean, x.p50, x.p90, x.p99].map((v) => `<td class="n">${esc(fmt(v, 3))}</td>`).join("")}</tr>`;
  return `<h3 id="request-split">Where each TTFT went, per request (the engine's spans)</h3>
<p class="how">${esc(t.source)}: ${esc(t.joined)} of ${esc(t.requests)} requests joined (${esc(fmt(t.joinRate * 100, 3))} %)${t.clock ? `; server clock − client clock ${esc(fmt(t.clock.offsetMs, 3))} ms (drift ${esc(fmt(t.clock.skewPpm, 2))} ppm, from ${esc(t.clock.pairs)} pairs)` : ""}. The first five rows add up to the client's TTFT.</p>
<table><thead><tr><th>part (ms)</th><th>mean</th><th>p50</th><th>p90</th><th>p99</th></tr></thead><tbody>${t.rows.map(row).join("")}</tbody></table>
${notes(t.findings)}`;
}

function telemetryHtml(t: TelemetrySection, rendered: RenderedChart[]): string {
  const th = t.throttle;
  const throttle = th
    ? th.shareOfWindow > 0
      ? `Clock-limited for ${esc(fmt(th.shareOfWindow * 100, 3))} % of the window (${esc(
          th.reasons.map((x) => `${x.reason} ${fmt(x.share * 100, 3)} %`).join(", "),
        )})${th.powerCapped ? ": <b>power-capped</b>, so these figures measure the cap" : ""}.`
      : "No clock-limiting reason was active in the window."
    : "";
  const clock = t.smClockMHz
    ? ` SM clock median ${esc(fmt(t.smClockMHz.median ?? undefined))} MHz of ${esc(fmt(t.smClockMHz.max ?? undefined))} MHz.`
    : "";
  return `<section id="telemetry"><h2>Hardware telemetry</h2>
<p>${esc(t.source)} — ${esc(t.why)}. ${esc(t.samples)} samples from ${esc(t.devices.length)} device${t.devices.length === 1 ? "" : "s"} over the measured window of ${esc(fmt(t.window.seconds, 3))} s.</p>
${qTable(telemetryRows(t))}
<p class="how">${throttle}${clock}</p>
${t.unavailable.length ? `<p class="how">Not available: ${esc(t.unavailable.map((u) => `${u.field} (${u.why})`).join("; "))}.</p>` : ""}
${notes(t.notes)}
${charts(rendered, "telemetry")}
</section>`;
}

function experimentsHtml(x: ExperimentPlan): string {
  return `<section id="experiments"><h3>Experiments considered${x.engine ? ` for ${esc(x.engine)}` : ""}</h3>
<p class="how">${esc(x.reason)}</p>
${x.candidates.length ? `<table><thead><tr><th>knob</th><th>change</th><th>mechanism</th><th>applies</th></tr></thead><tbody>${x.candidates.map((c) => `<tr><td>${esc(c.id)}${x.chosen === c.id ? " (run)" : ""}</td><td><code>${esc(c.variant)}</code></td><td class="how">${esc(c.mechanism)}</td><td class="${c.applies ? "ok" : "skip"}">${esc(c.why)}</td></tr>`).join("")}</tbody></table>` : ""}
</section>`;
}
