// report.md: the same content as index.html as Markdown tables (charts live in the HTML).
import { deploymentRows, deploymentTitle, fmt, fmtP, fmtPct, fmtQ, mdEsc, telemetryRows } from "./format.ts";
import type { Quantity, StudyResult } from "./types.ts";

function table(head: string[], rows: string[][]): string {
  const h = `| ${head.map(mdEsc).join(" | ")} |\n| ${head.map(() => "---").join(" | ")} |\n`;
  return h + rows.map((r) => `| ${r.join(" | ")} |`).join("\n") + "\n";
}

function qRows(rows: Array<[string, Quantity | undefined]>): string {
  return table(
    ["quantity", "value [95 % interval or range]", "how", "derivation"],
    rows.filter(([, q]) => q).map(([l, q]) => [mdEsc(l), mdEsc(fmtQ(q)), q!.method, mdEsc(q!.how)]),
  );
}

function missing(r: StudyResult, phase: string, what: string): string {
  const p = r.meta.phases.find((x) => x.name === phase);
  return `_${mdEsc(what)} is not in this report${p?.reason ? `: ${mdEsc(p.reason)}` : p ? ` (phase ${p.status})` : " (phase not run)"}._\n`;
}

export function renderMarkdown(r: StudyResult): string {
  const m = r.meta;
  const d = m.deployment;
  const out: string[] = [];
  out.push(`# inferscope study — ${mdEsc(deploymentTitle(d))}\n`);
  out.push(
    `target ${m.target.kind}${m.target.profile ? ` (${mdEsc(m.target.profile)})` : ""} · ${m.startedAt} · ${fmt(m.durationMs / 1000)} s${m.quick ? " · quick run" : ""}\n`,
  );
  if (m.timeScale !== 1)
    out.push(
      `> The embedded sim ran ${m.timeScale}× faster than real time; every client-measured time below was multiplied back into simulated time (the sim's /metrics and trace record simulated time already).\n`,
    );
  out.push("## Summary\n");
  out.push(
    table(
      ["headline", "value", "interval", "how", "derivation"],
      r.summary.headlines.map((h) => [
        mdEsc(h.label),
        `${fmt(h.value.value)} ${mdEsc(h.value.unit)}`,
        h.value.low !== undefined ? `[${fmt(h.value.low)}, ${fmt(h.value.high)}]` : "",
        h.value.method,
        mdEsc(h.value.how),
      ]),
    ),
  );
  for (const f of r.summary.findings) out.push(`- ${mdEsc(f)}`);
  if (r.summary.findings.length) out.push("");
  if (r.summary.decomposition.length) {
    out.push("### Decomposition of the measured per-token time\n");
    out.push(
      table(
        ["component", "ms per token", "how", "contains"],
        r.summary.decomposition.map((p) => [
          p.component,
          mdEsc(fmtQ(p.ms)),
          p.ms.method,
          mdEsc(`${p.detail}. ${p.ms.how}`),
        ]),
      ),
    );
    out.push(`${mdEsc(r.summary.decompositionBasis)}\n`);
  }
  if (r.summary.ceiling)
    out.push(
      `**Ceiling:** ${mdEsc(fmtQ(r.summary.ceiling.tokensPerSecond))} — ${mdEsc(r.summary.ceiling.scenario)} (${mdEsc(r.summary.ceiling.assumption)}; ${r.summary.ceiling.tokensPerSecond.method})\n`,
    );

  out.push("## Deployment\n");
  out.push(
    table(
      ["field", "value", "source"],
      deploymentRows(d).map((x) => [mdEsc(x.field), mdEsc(x.value), mdEsc(x.source)]),
    ),
  );
  out.push("## What the metrics endpoint exposes\n");
  if (r.audit) {
    out.push(
      `Engine: **${mdEsc(r.audit.engine)}**${r.audit.engineVersion ? ` ${mdEsc(r.audit.engineVersion)}` : ""}.\n`,
    );
    for (const n of r.audit.notes) out.push(`> ${mdEsc(n)}\n`);
    out.push(
      table(
        ["family", "type", "granularity", "concept", "over the window"],
        r.audit.families.map((f) => [
          mdEsc(f.name),
          mdEsc(f.type),
          mdEsc(f.granularity),
          mdEsc(f.concept ?? ""),
          mdEsc(f.value ?? ""),
        ]),
      ),
    );
    if (r.audit.gaps.length)
      out.push(
        table(
          ["not exposed", "recovered by", "command"],
          r.audit.gaps.map((g) => [mdEsc(g.what), mdEsc(g.method), g.command ? mdEsc(g.command) : ""]),
        ),
      );
  } else out.push(missing(r, "audit", "The metrics audit"));

  out.push("## Latency distributions (batch 1)\n");
  if (r.latency) {
    const L = r.latency;
    out.push(`${L.requests} requests, ${L.outputTokensPerRequest} output tokens each.\n`);
    out.push(
      qRows([
        ["TTFT (mean)", L.ttftMs],
        ["ITL per token (mean)", L.itlMs],
        ["TPOT", L.tpotMs],
        ["E2E", L.e2eMs],
        ["decode rate", L.decodeRate],
      ]),
    );
    if (L.server)
      out.push(
        `Server view (/metrics deltas): TTFT mean ${fmt(L.server.ttftMeanMs)} ms, ITL mean ${fmt(L.server.itlMeanMs)} ms. ${mdEsc(L.server.note ?? "")}\n`,
      );
    for (const n of L.notes) out.push(`> ${mdEsc(n)}\n`);
    const st = r.serverTimings;
    if (st) {
      out.push(`### The server's own timing per request (${mdEsc(st.source)})\n`);
      out.push(
        qRows([
          ["server decode per token", st.serverDecodeMsPerToken],
          ["client TPOT (same requests)", st.clientTpotMs],
          ["server prompt time", st.serverPromptMs],
          ["client TTFT (same requests)", st.clientTtftMs],
        ]),
      );
      out.push(
        `Client − server per token: median ${fmt(st.diffPct)} % (median |Δ| ${fmt(st.absDiffPct)} %) over ${st.requests} requests${st.ttftOverheadMs !== undefined ? `; client TTFT − server prompt time: median ${fmt(st.ttftOverheadMs)} ms` : ""}.\n`,
      );
      for (const n of st.notes) out.push(`> ${mdEsc(n)}\n`);
    }
    const rs = r.requestSplit;
    if (rs) {
      out.push("### Where each TTFT went, per request (the engine's spans)\n");
      out.push(
        `${mdEsc(rs.source)}: ${rs.joined} of ${rs.requests} requests joined (${fmt(rs.joinRate * 100, 3)} %)${rs.clock ? `; server clock − client clock ${fmt(rs.clock.offsetMs, 3)} ms (drift ${fmt(rs.clock.skewPpm, 2)} ppm, ${rs.clock.pairs} pairs)` : ""}. The first five rows add up to the client's TTFT.\n`,
      );
      out.push("| part (ms) | mean | p50 | p90 | p99 |\n|---|---:|---:|---:|---:|");
      for (const x of rs.rows)
        out.push(`| ${mdEsc(x.label)} | ${fmt(x.mean, 3)} | ${fmt(x.p50, 3)} | ${fmt(x.p90, 3)} | ${fmt(x.p99, 3)} |`);
      out.push("");
      for (const n of rs.findings) out.push(`> ${mdEsc(n)}\n`);
    }
  } else out.push(missing(r, "bench", "The batch-1 benchmark"));

  out.push("## Hardware telemetry\n");
  const tl = r.telemetry;
  if (tl) {
    out.push(
      `${mdEsc(tl.source)} — ${mdEsc(tl.why)}. ${tl.samples} samples from ${tl.devices.length} device(s) over ${fmt(tl.window.seconds, 3)} s of the measured window.\n`,
    );
    out.push(qRows(telemetryRows(tl)));
    const th = tl.throttle;
    if (th)
      out.push(
        th.shareOfWindow > 0
          ? `Clock-limited for ${fmt(th.shareOfWindow * 100, 3)} % of the window (${th.reasons.map((x) => `${mdEsc(x.reason)} ${fmt(x.share * 100, 3)} %`).join(", ")})${th.powerCapped ? ": **power-capped**, so these figures measure the cap" : ""}.\n`
          : "No clock-limiting reason was active in the window.\n",
      );
    if (tl.unavailable.length)
      out.push(`Not available: ${tl.unavailable.map((u) => `${mdEsc(u.field)} (${mdEsc(u.why)})`).join("; ")}.\n`);
    for (const n of tl.notes) out.push(`> ${mdEsc(n)}\n`);
  } else out.push(missing(r, "telemetry", "Hardware telemetry"));

  out.push("## Length sweep\n");
  if (r.sweep) {
    out.push(
      qRows([
        ["a: fixed cost (≈ TTFT)", r.sweep.fixedMs],
        ["b: per-token cost", r.sweep.perTokenMs],
        ["converged rate", r.sweep.convergedRate],
      ]),
    );
    out.push(
      table(
        ["N", "measured ms", "fitted ms", "residual ms"],
        r.sweep.points.map((p) => [String(p.outputTokens), fmt(p.e2eMs), fmt(p.predictedMs), fmt(p.residualMs)]),
      ),
    );
    for (const n of r.sweep.notes) out.push(`> ${mdEsc(n)}\n`);
  } else out.push(missing(r, "sweep", "The length sweep"));

  out.push("## A/B comparison\n");
  if (r.ab) {
    out.push(`**${mdEsc(r.ab.verdict)}**\n`);
    if (r.ab.mechanism)
      out.push(
        `What it tests: ${mdEsc(r.ab.mechanism)}.${r.ab.chosenBecause ? ` Chosen: ${mdEsc(r.ab.chosenBecause)}.` : ""}\n`,
      );
    out.push(
      table(
        ["arm", "change", "per-token ms [95 % CI]", "TTFT ms", "E2E ms", "samples"],
        r.ab.arms.map((a) => [
          mdEsc(a.name),
          mdEsc(a.change),
          mdEsc(fmtQ(a.perTokenMs)),
          mdEsc(fmtQ(a.ttftMs)),
          mdEsc(fmtQ(a.e2eMs)),
          String(a.samples),
        ]),
      ),
    );
    out.push(
      qRows([
        ["Δ per token", r.ab.deltaPerTokenMs],
        ["Δ TTFT", r.ab.deltaTtftMs],
        ["Δ per all-reduce", r.ab.deltaPerCallUs],
      ]),
    );
    out.push(`Welch p = ${fmtP(r.ab.pWelch)}; Mann–Whitney p = ${fmtP(r.ab.pMannWhitney)}.\n`);
    for (const n of r.ab.notes) out.push(`> ${mdEsc(n)}\n`);
  } else out.push(missing(r, "ab", "The A/B experiment"));
  if (r.experiments) {
    const x = r.experiments;
    out.push(`### Experiments considered${x.engine ? ` for ${mdEsc(x.engine)}` : ""}\n`);
    out.push(`${mdEsc(x.reason)}\n`);
    if (x.candidates.length)
      out.push(
        table(
          ["knob", "change", "mechanism", "applies"],
          x.candidates.map((c) => [
            `${mdEsc(c.id)}${x.chosen === c.id ? " (run)" : ""}`,
            mdEsc(c.variant),
            mdEsc(c.mechanism),
            mdEsc(c.why),
          ]),
        ),
      );
  }

  out.push("## Profiler trace\n");
  if (r.trace) {
    const t = r.trace;
    out.push(
      qRows([
        ["GPU step time", t.stepMs],
        ["all-reduce per call", t.allReducePerCallUs],
        ["all-reduce share", t.allReduceShare],
      ]),
    );
    out.push(
      table(
        ["class", "ms per step", "share"],
        [
          ...t.perClass.map((c) => [mdEsc(c.cls), fmt(c.msPerStep), fmtPct(c.share)]),
          ["idle", fmt(t.idleMsPerStep), ""],
        ],
      ),
    );
    if (t.layers) {
      const l = t.layers;
      out.push(
        `${l.layers} layers per step, ${l.kernelsPerLayer} kernels each: ${fmt(l.layerUs.mean)} µs of kernel time per layer (min ${fmt(l.layerUs.min)}, max ${fmt(l.layerUs.max)}, cv ${fmtPct(l.layerUs.cv)}); head ${l.head.kernels} kernels ${fmt(l.head.us)} µs, tail ${l.tail.kernels} kernels ${fmt(l.tail.us)} µs.\n`,
      );
    }
    if (t.roofline) {
      const rf = t.roofline;
      const rng = (x: { low: number; mid: number; high: number }) => `${fmt(x.mid)} (${fmt(x.low)}–${fmt(x.high)})`;
      for (const g of rf.gemms) out.push(`- ${mdEsc(g.line)}`);
      if (rf.gemms.length) out.push("");
      out.push(
        table(
          ["model term", "predicted ms", "measured ms", "measured as"],
          [
            ...rf.terms.map((x) => [
              mdEsc(x.label),
              rng(x.predictedMs),
              x.measuredMs === null ? "n/a" : fmt(x.measuredMs),
              mdEsc(x.measuredIs),
            ]),
            ["step", rng(rf.predictedStepMs), fmt(rf.measuredStepMs), "mean step window"],
          ],
        ),
      );
      for (const n of rf.notes) out.push(`> ${mdEsc(n)}\n`);
    }
    for (const n of t.notes) out.push(`> ${mdEsc(n)}\n`);
  } else out.push(missing(r, "trace", "The profiler trace"));

  out.push("## Model vs measurement\n");
  if (r.model) {
    const md = r.model;
    out.push(`${mdEsc(md.description)}\n`);
    out.push(
      qRows([
        ["predicted step", md.predictedStepMs],
        ["calibrated step", md.calibratedStepMs],
        ["host contention per token", md.hostContentionMs],
        ["engine host time per step (spans)", md.hostFromSpansMs],
        ...md.fittedParams.map((p) => [p.name, p.value] as [string, Quantity]),
      ]),
    );
    if (md.residuals.length)
      out.push(
        table(
          ["measurement", "measured", "modelled", "residual %"],
          md.residuals.map((x) => [
            mdEsc(x.what),
            `${fmt(x.measured)} ${mdEsc(x.unit)}`,
            `${fmt(x.modelled)} ${mdEsc(x.unit)}`,
            fmt(x.residualPct, 2),
          ]),
        ),
      );
    for (const n of md.notes) out.push(`> ${mdEsc(n)}\n`);
  } else out.push(missing(r, "model", "The analytical model"));

  out.push("## Ceilings and what-ifs\n");
  if (r.ceilings.length)
    out.push(
      table(
        ["scenario", "assumption", "ms per token", "tokens/s", "how"],
        r.ceilings.map((c) => [
          mdEsc(c.scenario),
          mdEsc(c.assumption),
          mdEsc(fmtQ(c.msPerToken)),
          mdEsc(fmtQ(c.tokensPerSecond)),
          c.tokensPerSecond.method,
        ]),
      ),
    );
  if (r.whatIfs.length)
    out.push(
      table(
        ["what-if", "assumption", "ms per token", "tokens/s", "how"],
        r.whatIfs.map((w) => [
          mdEsc(w.scenario),
          mdEsc(w.assumption),
          mdEsc(fmtQ(w.msPerToken)),
          mdEsc(fmtQ(w.tokensPerSecond)),
          w.tokensPerSecond.method,
        ]),
      ),
    );

  out.push("## Method and environment\n");
  for (const [i, s] of r.method.entries()) out.push(`${i + 1}. ${mdEsc(s)}`);
  out.push("");
  out.push(
    table(
      ["phase", "status", "seconds", "note"],
      m.phases.map((p) => [mdEsc(p.name), p.status, fmt(p.durationMs / 1000), mdEsc(p.reason ?? "")]),
    ),
  );
  const env: string[][] = [
    ["target", mdEsc(m.target.kind)],
    ...(m.target.serverCommand ? [["server command (redacted)", mdEsc(m.target.serverCommand)]] : []),
    ...(m.target.url ? [["url", mdEsc(m.target.url)]] : []),
    ["time scale", String(m.timeScale)],
    ["seed", String(m.seed)],
    ...(m.runId ? [["run id", mdEsc(m.runId)]] : []),
    ...Object.entries(m.flags).map(([k, v]) => [`--${mdEsc(k)}`, mdEsc(v === null ? "" : String(v))]),
    ...Object.entries(m.environment).map(([k, v]) => [mdEsc(k), mdEsc(v)]),
  ];
  out.push(table(["item", "value"], env));
  return out.join("\n");
}
