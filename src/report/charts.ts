// Vega-Lite chart specs for the report, compiled and rendered to SVG in Node (no canvas, no network).
import type { StudyResult } from "./types.ts";

export interface ChartSpec {
  id: string;
  section: string;
  title: string;
  caption: string;
  spec: Record<string, unknown>;
}

export interface RenderedChart extends Omit<ChartSpec, "spec"> {
  svg: string;
}

const WIDTH = 620;
const COLORS = { communication: "#d95f02", compute: "#1b9e77", overhead: "#7570b3" } as const;

const CONFIG = {
  font: "system-ui, -apple-system, Segoe UI, Roboto, sans-serif",
  view: { stroke: null },
  axis: { labelFontSize: 11, titleFontSize: 12, gridColor: "#e8e8e8", domainColor: "#888", tickColor: "#888" },
  legend: { labelFontSize: 11, titleFontSize: 12, orient: "bottom" },
  bar: { color: "#4c78a8" },
  background: "white",
};

function base(height: number, values: unknown[]): Record<string, unknown> {
  return {
    $schema: "https://vega.github.io/schema/vega-lite/v6.json",
    width: WIDTH,
    height,
    data: { values },
    config: CONFIG,
  };
}

/** Bins samples into equal-width bins (pre-binned so the spec stays small whatever the sample count). */
export function binSamples(samples: number[], maxBins = 40): Array<{ lo: number; hi: number; count: number }> {
  const xs = samples.filter((x) => Number.isFinite(x));
  if (xs.length === 0) return [];
  xs.sort((a, b) => a - b);
  // Trim the far tail (beyond p99.5) into the last bin so one outlier does not flatten the chart.
  const lo = xs[0]!;
  const hiAll = xs[xs.length - 1]!;
  const p995 = xs[Math.min(xs.length - 1, Math.floor(xs.length * 0.995))]!;
  const hi = p995 > lo ? p995 : hiAll;
  if (hi <= lo) return [{ lo: lo - 0.5, hi: lo + 0.5, count: xs.length }];
  const n = Math.max(5, Math.min(maxBins, Math.ceil(Math.sqrt(xs.length))));
  const w = (hi - lo) / n;
  const bins = Array.from({ length: n }, (_, i) => ({ lo: lo + i * w, hi: lo + (i + 1) * w, count: 0 }));
  for (const x of xs) bins[Math.min(n - 1, Math.max(0, Math.floor((x - lo) / w)))]!.count++;
  return bins;
}

function histogram(id: string, section: string, title: string, caption: string, samples: number[], unit: string) {
  const bins = binSamples(samples);
  return {
    id,
    section,
    title,
    caption,
    spec: {
      ...base(180, bins),
      mark: { type: "rect", color: "#4c78a8", stroke: "white", strokeWidth: 0.5 },
      encoding: {
        x: { field: "lo", type: "quantitative", title: unit, scale: { zero: false } },
        x2: { field: "hi" },
        y: { field: "count", type: "quantitative", title: "count" },
        y2: { datum: 0 },
        tooltip: [{ field: "lo", format: ".3f" }, { field: "hi", format: ".3f" }, { field: "count" }],
      },
    },
  } satisfies ChartSpec;
}

/** Range bars: a bar to the value, and a rule spanning [low, high]. */
function rangeBars(
  rows: Array<{ label: string; value: number; low: number; high: number; color?: string }>,
  axisTitle: string,
) {
  return {
    ...base(Math.max(60, rows.length * 34), rows),
    layer: [
      {
        mark: { type: "bar", height: 18 },
        encoding: {
          y: { field: "label", type: "nominal", title: null, sort: null, axis: { labelLimit: 260 } },
          x: { field: "value", type: "quantitative", title: axisTitle },
          color: rows.some((r) => r.color)
            ? { field: "color", type: "nominal", scale: null, legend: null }
            : { value: "#4c78a8" },
        },
      },
      {
        mark: { type: "rule", color: "#222", strokeWidth: 2 },
        encoding: {
          y: { field: "label", type: "nominal", sort: null },
          x: { field: "low", type: "quantitative" },
          x2: { field: "high" },
        },
      },
      {
        mark: { type: "text", align: "left", dx: 6, fontSize: 11 },
        encoding: {
          y: { field: "label", type: "nominal", sort: null },
          x: { field: "high", type: "quantitative" },
          text: { field: "value", type: "quantitative", format: ".3~r" },
        },
      },
    ],
  };
}

/** Power and tokens/s (and the SM clock where known) on one time axis: each series on its own y scale. */
function telemetryChart(series: NonNullable<StudyResult["telemetry"]>["series"]): ChartSpec | null {
  const rows: Array<{ t: number; series: string; value: number }> = [];
  for (const p of series) {
    if (p.powerW !== undefined) rows.push({ t: p.t, series: "power (W)", value: p.powerW });
    if (p.tokensPerS !== undefined) rows.push({ t: p.t, series: "output tokens/s", value: p.tokensPerS });
    if (p.smClockMHz !== undefined) rows.push({ t: p.t, series: "SM clock (MHz)", value: p.smClockMHz });
  }
  const kinds = [...new Set(rows.map((r) => r.series))];
  if (rows.length < 2 || kinds.length === 0) return null;
  return {
    id: "telemetry-over-time",
    section: "telemetry",
    title: "Power and throughput over the measured window",
    caption:
      "Each series against time from the start of the measured window (warm-up excluded); each panel has its own scale.",
    spec: {
      $schema: "https://vega.github.io/schema/vega-lite/v6.json",
      data: { values: rows },
      config: CONFIG,
      facet: { row: { field: "series", type: "nominal", title: null, sort: kinds } },
      resolve: { scale: { y: "independent" } },
      spec: {
        width: WIDTH,
        height: 90,
        mark: { type: "line", interpolate: "step-after", strokeWidth: 1.5 },
        encoding: {
          x: { field: "t", type: "quantitative", title: "seconds into the window" },
          y: { field: "value", type: "quantitative", title: null, scale: { zero: false }, axis: { format: ",~r" } },
          color: { field: "series", type: "nominal", legend: null },
        },
      },
    },
  };
}

/** The bench's time slices: arrivals beside completions, output tokens/s and median TTFT, one panel each. */
function slicesChart(sl: NonNullable<NonNullable<StudyResult["latency"]>["slices"]>): ChartSpec | null {
  const rows: Array<{ t: number; series: string; value: number }> = [];
  const panel: Record<string, string> = {
    "arrivals/s": "requests/s",
    "completed/s": "requests/s",
    "output tokens/s": "output tokens/s",
    "TTFT p50 (ms)": "TTFT p50 (ms)",
  };
  for (const r of sl.rows) {
    rows.push({ t: r.t, series: "arrivals/s", value: r.arrivalsPerS });
    rows.push({ t: r.t, series: "completed/s", value: r.completedPerS });
    rows.push({ t: r.t, series: "output tokens/s", value: r.outputTokensPerS });
    if (r.ttftP50Ms !== undefined) rows.push({ t: r.t, series: "TTFT p50 (ms)", value: r.ttftP50Ms });
  }
  if (sl.rows.length < 2) return null;
  const values = rows.map((r) => ({ ...r, panel: panel[r.series]! }));
  return {
    id: "slices",
    section: "latency",
    title: "The bench in time slices",
    caption: `Slices of ${fmtS(sl.widthS)} s: ${sl.rule}. Arrivals and completions share a panel; warm-up and drift show as steps.`,
    spec: {
      $schema: "https://vega.github.io/schema/vega-lite/v6.json",
      data: { values },
      config: CONFIG,
      facet: {
        row: { field: "panel", type: "nominal", title: null, sort: ["requests/s", "output tokens/s", "TTFT p50 (ms)"] },
      },
      resolve: { scale: { y: "independent" } },
      spec: {
        width: WIDTH,
        height: 80,
        mark: { type: "line", interpolate: "step-after", strokeWidth: 1.5 },
        encoding: {
          x: { field: "t", type: "quantitative", title: "seconds into the measured window" },
          y: { field: "value", type: "quantitative", title: null, axis: { format: ",~r" } },
          color: { field: "series", type: "nominal", title: null },
        },
      },
    },
  };
}

const fmtS = (s: number) => String(Number(s.toPrecision(3)));

/** Every chart the result supports, in report order. Sections with no data get no chart. */
export function chartSpecs(r: StudyResult): ChartSpec[] {
  const out: ChartSpec[] = [];
  const d = r.summary.decomposition;
  if (d.length > 0) {
    const rows = d.map((p, i) => ({ component: p.component, ms: Math.max(0, p.ms.value), order: i }));
    out.push({
      id: "decomposition",
      section: "summary",
      title: "Where one token's time goes",
      caption: `One batch-1 decode step split into ${d.map((p) => p.component).join(" / ")}; ranges in the table below.`,
      spec: {
        ...base(70, rows),
        mark: { type: "bar", height: 34 },
        encoding: {
          x: { field: "ms", type: "quantitative", stack: "zero", title: "ms per token" },
          color: {
            field: "component",
            type: "nominal",
            title: null,
            scale: { domain: Object.keys(COLORS), range: Object.values(COLORS) },
          },
          order: { field: "order", type: "quantitative" },
          tooltip: [{ field: "component" }, { field: "ms", format: ".3f" }],
        },
      },
    });
  }
  if (r.ceilings.length > 0) {
    out.push({
      id: "ceilings",
      section: "summary",
      title: "Ceilings: tokens/s under named assumptions",
      caption: "Bars are the central value, black lines the range (interval or assumption range).",
      spec: rangeBars(
        r.ceilings.map((c) => ({
          label: c.scenario,
          value: c.tokensPerSecond.value,
          low: c.tokensPerSecond.low ?? c.tokensPerSecond.value,
          high: c.tokensPerSecond.high ?? c.tokensPerSecond.value,
        })),
        "tokens/s (batch 1)",
      ),
    });
  }
  if (r.latency) {
    const L = r.latency;
    if (L.ttftSamplesMs.length > 0)
      out.push(
        histogram(
          "ttft-hist",
          "latency",
          "Time to first token",
          `${L.ttftSamplesMs.length} requests, client-measured.`,
          L.ttftSamplesMs,
          "TTFT (ms)",
        ),
      );
    if (L.itlSamplesMs.length > 0)
      out.push(
        histogram(
          "itl-hist",
          "latency",
          "Inter-token latency",
          `${L.itlSamplesMs.length} per-token gaps, client-measured.`,
          L.itlSamplesMs,
          "ITL (ms)",
        ),
      );
    const sc = L.slices ? slicesChart(L.slices) : null;
    if (sc) out.push(sc);
    if (L.itlOverTime.length > 0)
      out.push({
        id: "itl-time",
        section: "latency",
        title: "ITL over the generation",
        caption: "Per-token gap against token index (one line per request): drift with context length shows here.",
        spec: {
          ...base(200, L.itlOverTime),
          mark: { type: "line", strokeWidth: 1, opacity: 0.8 },
          encoding: {
            x: { field: "token", type: "quantitative", title: "output token index" },
            y: { field: "ms", type: "quantitative", title: "gap (ms)", scale: { zero: false } },
            color: { field: "request", type: "nominal", legend: null },
          },
        },
      });
  }
  if (r.sweep && r.sweep.points.length > 0) {
    const pts = r.sweep.points;
    const maxN = Math.max(...pts.map((p) => p.outputTokens));
    const line = [
      { outputTokens: 1, ms: r.sweep.fixedMs.value },
      { outputTokens: maxN, ms: r.sweep.fixedMs.value + r.sweep.perTokenMs.value * (maxN - 1) },
    ];
    out.push({
      id: "sweep-fit",
      section: "sweep",
      title: "Request time against output length",
      caption: "Points: measured requests. Line: fitted T(N) = a + b·(N − 1).",
      spec: {
        ...base(220, []),
        layer: [
          {
            data: { values: line },
            mark: { type: "line", color: "#d95f02" },
            encoding: {
              x: { field: "outputTokens", type: "quantitative", title: "output tokens N" },
              y: { field: "ms", type: "quantitative", title: "request time (ms)" },
            },
          },
          {
            data: { values: pts },
            mark: { type: "point", filled: true, color: "#4c78a8", size: 40 },
            encoding: {
              x: { field: "outputTokens", type: "quantitative" },
              y: { field: "e2eMs", type: "quantitative" },
            },
          },
        ],
      },
    });
    out.push({
      id: "sweep-residuals",
      section: "sweep",
      title: "Fit residuals",
      caption:
        "Measured minus fitted request time; a pattern here means T(N) is not linear (e.g. ITL drifts with context).",
      spec: {
        ...base(140, pts),
        layer: [
          {
            mark: { type: "rule", color: "#888" },
            encoding: { y: { datum: 0, type: "quantitative" } },
          },
          {
            mark: { type: "point", filled: true, color: "#7570b3", size: 40 },
            encoding: {
              x: { field: "outputTokens", type: "quantitative", title: "output tokens N", scale: { type: "log" } },
              y: { field: "residualMs", type: "quantitative", title: "residual (ms)" },
            },
          },
        ],
      },
    });
  }
  const rs = r.requestSplit;
  if (rs && rs.perRequest.length > 0) {
    const parts = [
      ["networkMs", "network + HTTP", "#9e9e9e"],
      ["intakeMs", "server intake", "#7570b3"],
      ["queueMs", "queue", "#d95f02"],
      ["prefillMs", "prefill", "#1b9e77"],
      ["deliveryMs", "first-token delivery", "#e7298a"],
    ] as const;
    const rows = rs.perRequest.flatMap((q) =>
      parts.map(([k, label], order) => ({ request: q.index, part: label, ms: Math.max(0, q[k]), order })),
    );
    out.push({
      id: "ttft-split",
      section: "latency",
      title: "Each request's TTFT, split by the engine's spans",
      caption: `One bar per request (${rs.perRequest.length} of ${rs.joined} joined shown), stacked in the order the time passes; the bar's height is the client's TTFT.`,
      spec: {
        ...base(220, rows),
        mark: { type: "bar" },
        encoding: {
          x: { field: "request", type: "ordinal", title: "request (send order)", axis: { labelOverlap: true } },
          y: { field: "ms", type: "quantitative", stack: "zero", title: "ms" },
          color: {
            field: "part",
            type: "nominal",
            title: null,
            scale: { domain: parts.map((p) => p[1]), range: parts.map((p) => p[2]) },
          },
          order: { field: "order", type: "quantitative" },
          tooltip: [{ field: "request" }, { field: "part" }, { field: "ms", format: ".3f" }],
        },
      },
    });
  }
  if (r.ab && r.ab.arms.length > 0) {
    out.push({
      id: "ab-arms",
      section: "ab",
      title: "A/B: per-token decode time per arm",
      caption: "Bars: mean per-token time; black lines: bootstrap 95 % CI.",
      spec: rangeBars(
        r.ab.arms.map((a) => ({
          label: `${a.name} (${a.change})`,
          value: a.perTokenMs.value,
          low: a.perTokenMs.low ?? a.perTokenMs.value,
          high: a.perTokenMs.high ?? a.perTokenMs.value,
        })),
        "ms per token",
      ),
    });
  }
  if (r.trace && r.trace.perClass.length > 0) {
    const rows = r.trace.perClass.map((c) => ({ cls: c.cls, ms: c.msPerStep }));
    rows.push({ cls: "idle", ms: r.trace.idleMsPerStep });
    out.push({
      id: "trace-classes",
      section: "trace",
      title: "Profiler trace: GPU time per decode step by kernel class",
      caption: `Mean over ${r.trace.decodeSteps} decode steps.`,
      spec: {
        ...base(Math.max(60, rows.length * 24), rows),
        mark: { type: "bar" },
        encoding: {
          y: { field: "cls", type: "nominal", title: null, sort: "-x" },
          x: { field: "ms", type: "quantitative", title: "ms per step" },
          color: {
            condition: { test: "datum.cls === 'communication'", value: COLORS.communication },
            value: "#4c78a8",
          },
        },
      },
    });
  }
  if (r.model && r.model.residuals.length > 0) {
    out.push({
      id: "model-residuals",
      section: "model",
      title: "Model vs measurement",
      caption: "Residual = (modelled − measured) / measured, after calibration.",
      spec: {
        ...base(Math.max(60, r.model.residuals.length * 28), r.model.residuals),
        layer: [
          { mark: { type: "rule", color: "#888" }, encoding: { x: { datum: 0, type: "quantitative" } } },
          {
            mark: { type: "bar", height: 16 },
            encoding: {
              y: { field: "what", type: "nominal", title: null, sort: null, axis: { labelLimit: 260 } },
              x: { field: "residualPct", type: "quantitative", title: "residual (%)" },
              color: {
                condition: { test: "abs(datum.residualPct) > 10", value: "#d95f02" },
                value: "#1b9e77",
              },
            },
          },
        ],
      },
    });
  }
  if (r.telemetry) {
    const c = telemetryChart(r.telemetry.series);
    if (c) out.push(c);
  }
  if (r.whatIfs.length > 0) {
    out.push({
      id: "whatifs",
      section: "whatifs",
      title: "What-ifs: tokens/s at batch 1",
      caption: "Modelled from the calibrated model; lines show the range from the model's efficiency ranges.",
      spec: rangeBars(
        r.whatIfs.map((w) => ({
          label: w.scenario,
          value: w.tokensPerSecond.value,
          low: w.tokensPerSecond.low ?? w.tokensPerSecond.value,
          high: w.tokensPerSecond.high ?? w.tokensPerSecond.value,
        })),
        "tokens/s",
      ),
    });
  }
  return out;
}

/** Compiles a Vega-Lite spec and renders it to an SVG string, headless. */
export async function renderSvg(spec: Record<string, unknown>): Promise<string> {
  // Loaded here, not at import: vega and vega-lite take ~300 ms, and only reports draw charts.
  const [vega, vl] = await Promise.all([import("vega"), import("vega-lite")]);
  const compiled = vl.compile(spec as any).spec;
  // A loader that refuses all I/O: specs carry inline data only.
  const loader = vega.loader();
  loader.load = async () => {
    throw new Error("charts are rendered from inline data only");
  };
  const view = new vega.View(vega.parse(compiled), { renderer: "none", loader });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}

export async function renderCharts(r: StudyResult): Promise<RenderedChart[]> {
  const out: RenderedChart[] = [];
  for (const c of chartSpecs(r)) {
    const { spec, ...rest } = c;
    out.push({ ...rest, svg: await renderSvg(spec) });
  }
  return out;
}
