// Turns the phases' measurements into the StudyResult the report writers render (pure: no I/O).
import type { ChosenExperiment, Discovery, ModelInputs } from "../discover/index.ts";
import { compareSamples } from "../experiment/stats.ts";
import type { SliceResult } from "../load/slices.ts";
import { fmt } from "../report/format.ts";
import type {
  AbSection,
  AuditSection,
  Ceiling,
  Deployment,
  Headline,
  LatencySection,
  LatencySlices,
  Quantity,
  StudyMeta,
  StudyResult,
  SweepSection,
  TraceSection,
} from "../report/types.ts";
import {
  ceilingRow,
  decompose,
  estimateFromTrace,
  type Interval,
  overlaps,
  pooledMeanDraws,
  q,
  rateFromMs,
} from "./estimate.ts";
import type { AbMeasure, BenchMeasure, ModelMeasure, SweepMeasure, TraceMeasure } from "./phases.ts";
import type { StudyPlan } from "./plan.ts";
import { telemetryFindings, telemetrySection } from "./telemetry.ts";

export interface Measurements {
  /** What discovery found (engine, model, device; each with its source). */
  discovery?: Discovery;
  /** What the model phase passes to the model resolver (as `model predict` would), or what is missing. */
  modelInputs?: ModelInputs;
  /** The A/B the study runs: the --variant arms or the engine registry's first fit. */
  experiment?: ChosenExperiment;
  timeScale: number;
  plan: StudyPlan;
  seed: number;
  deployment: Deployment;
  kind: StudyMeta["target"]["kind"];
  url?: string;
  servedModel?: string;
  audit?: AuditSection;
  bench?: BenchMeasure;
  sweep?: SweepMeasure;
  trace?: TraceMeasure;
  ab?: AbMeasure;
  model?: ModelMeasure;
}

function meanCI(xs: number[], seed: number): Interval {
  const d = pooledMeanDraws(
    xs.map((v) => [v]),
    seed,
  );
  const s = Float64Array.from(d.draws).sort();
  if (s.length === 0) return { estimate: d.estimate, lo: Number.NaN, hi: Number.NaN };
  return { estimate: d.estimate, lo: s[Math.floor(0.025 * s.length)]!, hi: s[Math.floor(0.975 * (s.length - 1))]! };
}

function drawsCI(estimate: number, draws: number[]): Interval {
  const s = Float64Array.from(draws.filter(Number.isFinite)).sort();
  if (s.length === 0) return { estimate, lo: Number.NaN, hi: Number.NaN };
  return { estimate, lo: s[Math.floor(0.025 * (s.length - 1))]!, hi: s[Math.ceil(0.975 * (s.length - 1))]! };
}

/** Slices in the deployment's clock: a sim x× faster ran x× shorter, so times × x and rates ÷ x. */
export function latencySlices(s: SliceResult, x: number): LatencySlices {
  const p50 = (st: { count: number; median: number }) => (st.count > 0 ? st.median * x : undefined);
  return {
    widthS: (s.width_ms / 1000) * x,
    rule: s.rule,
    rows: s.slices.map((r) => ({
      t: r.start_s * x,
      arrivalsPerS: r.arrival_rate / x,
      completedPerS: r.request_throughput / x,
      outputTokensPerS: r.output_throughput / x,
      ttftP50Ms: p50(r.ttft_ms),
      itlP50Ms: p50(r.itl_ms),
    })),
  };
}

export function assemble(m: Measurements, meta: StudyMeta): StudyResult {
  const x = m.timeScale;
  const scaled = x !== 1 ? ` (client time × ${x}: the sim ran ${x}× faster than real time)` : "";
  const findings: string[] = [];
  const headlines: Headline[] = [];
  const method: string[] = [];
  const ceilings: Ceiling[] = [];

  // ---- latency (batch 1)
  let latency: LatencySection | undefined;
  let token: { estimate: number; draws: number[] } | undefined;
  if (m.bench) {
    const b = m.bench;
    const itl = pooledMeanDraws(b.itlGroups, m.seed);
    token = itl;
    const itlI = drawsCI(itl.estimate, itl.draws);
    const ttftI = meanCI(b.ttftMs, m.seed + 1);
    const tpotI = b.tpotMs.length ? meanCI(b.tpotMs, m.seed + 2) : undefined;
    const e2eI = meanCI(b.e2eMs, m.seed + 3);
    const tokens = b.itlGroups.reduce((s, g) => s + g.length, 0);
    const notes: string[] = [];
    if (b.clientSaturated)
      notes.push("The client reported itself saturated during this run: latencies may include client delay.");
    for (const w of b.warnings) notes.push(w);
    if (x !== 1 && b.clientOverheadMs > 0)
      notes.push(
        `The client's own wall time per request (${b.clientOverheadMs.toFixed(2)} ms real: client TTFT − the server's TTFT over the same window) is not part of the sim's clock, so TTFT and request times count it once instead of ${x}×.`,
      );
    if (b.server?.itlMeanMs !== undefined && x !== 1)
      notes.push(
        `The sim's /metrics record simulated time (gauge inferscope_sim_time_scale = ${x}), so the server view's means are shown as exported, beside the client's times multiplied by ${x}.`,
      );
    latency = {
      requests: b.requests,
      outputTokensPerRequest: b.outputLen,
      promptTokens: b.promptTokens,
      ttftMs: q(
        ttftI,
        "ms",
        "measured",
        `mean client TTFT over ${b.ttftMs.length} requests, t-interval${scaled}${x !== 1 ? ", client wall overhead counted once" : ""}`,
      ),
      itlMs: q(
        itlI,
        "ms",
        "measured",
        `mean of ${tokens} client per-token gaps, cluster (per-request) t-interval${scaled}`,
      ),
      tpotMs: tpotI && q(tpotI, "ms", "measured", "vLLM TPOT = (E2EL − TTFT)/(n − 1), mean over requests"),
      e2eMs: q(e2eI, "ms", "measured", `mean request time for ${b.outputLen} tokens`),
      decodeRate: q(rateFromMs(itlI), "tok/s", "derived", "1000 ÷ mean per-token gap (one token per chunk, batch 1)"),
      ttftSamplesMs: b.ttftMs,
      itlSamplesMs: b.itlGroups.flat().slice(0, 20_000),
      itlOverTime: b.itlGroups.slice(0, 3).flatMap((g, request) => g.map((ms, i) => ({ request, token: i + 2, ms }))),
      server: b.server
        ? {
            ttftMeanMs: b.server.ttftMeanMs,
            itlMeanMs: b.server.itlMeanMs,
            steps: b.server.steps,
            note: "exact window means from _sum/_count deltas, not bucket quantiles",
          }
        : undefined,
      slices: b.slices ? latencySlices(b.slices, x) : undefined,
      notes,
    };
    headlines.push({ label: "decode rate (batch 1)", value: latency.decodeRate });
    headlines.push({ label: "time per token", value: latency.itlMs });
    headlines.push({ label: "time to first token", value: latency.ttftMs });
    findings.push(
      `One request decodes at ${fmt(latency.decodeRate.value)} tok/s: ${fmt(itlI.estimate)} ms per token [${fmt(itlI.lo)}, ${fmt(itlI.hi)}], TTFT ${fmt(ttftI.estimate)} ms.`,
    );
    method.push(
      `Batch-1 benchmark: ${b.requests} streaming requests one at a time (${m.plan.inputLen}-token prompt, ${b.outputLen} output tokens, ignore_eos), per-chunk client timestamps; per-token time = chunk gap ÷ tokens in the chunk.`,
    );
    ceilings.push(ceilingRow("measured (as run)", "this server, batch 1", itlI, "measured", "client per-token gap"));
    const st = b.serverTimings;
    if (st)
      findings.push(
        `The server's own timing (${st.source}): decode ${fmt(st.serverDecodeMsPerToken.value)} ms/token vs client TPOT ${fmt(st.clientTpotMs.value)} ms (${st.diffPct >= 0 ? "+" : ""}${fmt(st.diffPct)} %), median of ${st.requests} requests${st.ttftOverheadMs !== undefined ? `; TTFT exceeds the server's prompt time by ${fmt(st.ttftOverheadMs)} ms` : ""}.`,
      );
  }

  // ---- sweep
  let sweep: SweepSection | undefined;
  if (m.sweep) {
    const s = m.sweep;
    const pts = s.points.map((p) => {
      const pred = s.intercept.estimate + s.slope.estimate * (p.outputTokens - 1);
      return { ...p, predictedMs: pred, residualMs: p.e2eMs - pred };
    });
    const notes: string[] = [];
    if (latency && !overlaps(s.slope, { estimate: 0, lo: latency.itlMs.low!, hi: latency.itlMs.high! }))
      notes.push(
        `The fitted per-token cost (${fmt(s.slope.estimate)} ms) and the batch-1 mean gap (${fmt(latency.itlMs.value)} ms) disagree beyond their intervals: per-token time drifts with context length, or the runs differed.`,
      );
    sweep = {
      points: pts,
      fixedMs: q(
        s.intercept,
        "ms",
        "fitted",
        `Theil–Sen intercept of T(N) over ${pts.length} requests, bootstrap 95 % CI${scaled}`,
      ),
      perTokenMs: q(s.slope, "ms", "fitted", "Theil–Sen slope of T(N) against N − 1, bootstrap 95 % CI"),
      convergedRate: q(rateFromMs(s.slope), "tok/s", "fitted", "1000 ÷ slope: the rate long generations converge to"),
      r2: s.r2,
      notes,
    };
    const short = m.plan.sweep.lengths[0]!;
    const rateShort = (1000 * short) / (s.intercept.estimate + s.slope.estimate * (short - 1));
    findings.push(
      `Long generations converge to ${fmt(1000 / s.slope.estimate)} tok/s; a ${short}-token request sees only ${fmt(rateShort)} tok/s because the fixed ${fmt(s.intercept.estimate)} ms (≈ TTFT) is spread over few tokens.`,
    );
    method.push(
      `Length sweep: N ∈ {${m.plan.sweep.lengths.join(", ")}} × ${m.plan.sweep.repeats}; robust (Theil–Sen) fit of T(N) = a + b·(N − 1), bootstrap CIs over requests.`,
    );
  }

  // ---- trace
  let trace: TraceSection | undefined;
  let tr: ReturnType<typeof estimateFromTrace> | undefined;
  if (m.trace && m.trace.steps.length > 0) {
    const t = m.trace;
    tr = estimateFromTrace(t.steps, m.seed + 7);
    const period = tr.periodMs.estimate;
    const notes = [...t.notes];
    trace = {
      steps: t.totalSteps,
      decodeSteps: t.steps.length,
      stepMs: q(
        tr.periodMs,
        "ms",
        "measured",
        "trace: median window of regular batch-1 decode steps (last kernel end to last kernel end), bootstrap over steps",
      ),
      perClass: t.perClass.map((c) => ({ ...c, share: c.msPerStep / period })),
      idleMsPerStep: t.idleMsPerStep,
      allReduceCallsPerStep: tr.callsPerStep,
      allReducePerCallUs: q(
        tr.perCallUs,
        "µs",
        "measured",
        "trace: all-reduce kernel time ÷ all-reduce kernel count per step, mean over steps, Student-t 95 % interval",
      ),
      allReduceShare: q(
        tr.share,
        "%",
        "measured",
        "trace: median over steps of all-reduce kernel time ÷ step window, bootstrap over steps",
        100,
      ),
      kernelNames: t.kernelNames,
      files: t.files,
      notes,
      ...(t.stepMode ? { stepMode: t.stepMode } : {}),
      ...(t.layers ? { layers: t.layers } : {}),
      ...(t.roofline ? { roofline: t.roofline } : {}),
    };
    method.push(
      `Profiler trace: /start_profile → ${t.steps.length} batch-1 decode steps → /stop_profile; kernels classified by name (communication, GEMM, attention, MoE, …); per-step sums; all-reduce kernels counted per step.`,
    );
  }

  // ---- decomposition, share, ceilings
  const decomposition: StudyResult["summary"]["decomposition"] = [];
  let decompositionBasis =
    "No decomposition: it needs the batch-1 benchmark and a profiler trace (or the A/B plus the model).";
  let ceiling: Ceiling | undefined;
  if (tr && trace) {
    const d = decompose(tr);
    decomposition.push(...d.parts);
    decompositionBasis = `Per batch-1 decode step from the profiler trace: median step ${fmt(tr.periodMs.estimate)} ms [${fmt(tr.periodMs.lo)}, ${fmt(tr.periodMs.hi)}] = communication + compute kernels + GPU idle (overhead).`;
    if (token) {
      const tokI = drawsCI(token.estimate, token.draws);
      decompositionBasis += ` The client measured ${fmt(tokI.estimate)} ms per token [${fmt(tokI.lo)}, ${fmt(tokI.hi)}].`;
      if (!overlaps(tokI, tr.periodMs)) {
        const why =
          x !== 1
            ? `at time-scale ${x}× every millisecond of client-side delay (event loop, HTTP, a busy CPU) counts as ${x} ms, so the client's figure is inflated; the decomposition uses the server's own step timeline`
            : "the difference is time between the server's step and the client seeing the token (frontend, detokenization, network, client)";
        trace.notes.push(`Client per-token time and trace step period differ beyond their intervals: ${why}.`);
      }
    }
    const shareTrace = trace.allReduceShare;
    headlines.push({ label: "all-reduce share of each step", value: shareTrace });
    headlines.push({ label: "cost per all-reduce", value: trace.allReducePerCallUs });
    const ceilNoAr = q(
      d.ceilingNoAllReduce,
      "tok/s",
      "derived",
      "1000 ÷ (step time − all-reduce time), step time without all-reduce = mean all-reduce time × (1 − share) ÷ share, bootstrap over steps",
    );
    ceiling = {
      scenario: "all-reduce free",
      assumption: "every all-reduce costs zero; everything else as measured",
      msPerToken: q(tr.nonAllReduceMs, "ms", "derived", "mean all-reduce time per step × (1 − share) ÷ share (trace)"),
      tokensPerSecond: ceilNoAr,
    };
    headlines.push({ label: "ceiling without all-reduce cost", value: ceilNoAr });
    ceilings.push(ceiling);
    ceilings.push({
      scenario: "communication free",
      assumption: "all collectives (all-reduce, all-gather) cost zero",
      msPerToken: q(
        tr.nonCommMs,
        "ms",
        "derived",
        "median over trace steps of step period − communication kernel time",
      ),
      tokensPerSecond: q(d.ceilingNoComm, "tok/s", "derived", "1000 ÷ median(step period − communication time)"),
    });
    findings.push(
      `All-reduce takes ${fmt(shareTrace.value)} % [${fmt(shareTrace.low)}, ${fmt(shareTrace.high)}] of each decode step: ${fmt(tr.callsPerStep)} calls × ${fmt(tr.perCallUs.estimate)} µs [${fmt(tr.perCallUs.lo)}, ${fmt(tr.perCallUs.hi)}].`,
    );
    findings.push(
      `With zero-cost all-reduce one request would decode at ${fmt(ceilNoAr.value)} tok/s [${fmt(ceilNoAr.low)}, ${fmt(ceilNoAr.high)}] instead of ${fmt(1000 / tr.periodMs.estimate)}.`,
    );
  }

  // ---- A/B
  let ab: AbSection | undefined;
  if (m.ab && m.ab.arms.length >= 2) {
    const [base, treat] = m.ab.arms as [AbMeasure["arms"][number], AbMeasure["arms"][number]];
    const cmp = compareSamples(base.perTokenMs, treat.perTokenMs, { seed: m.seed + 11 });
    // Per-all-reduce attribution only for a change that acts on a collective, with a count to divide by.
    const collective = m.experiment ? m.experiment.collective : true;
    const rawCalls = tr && tr.callsPerStep > 0 ? Math.round(tr.callsPerStep) : m.model?.callsPerToken;
    const calls = collective && rawCalls ? rawCalls : undefined;
    const callsSrc = tr ? "counted in the trace" : "from the model's architecture";
    const armQ = (a: AbMeasure["arms"][number]) => {
      const s = compareSamples(a.perTokenMs, a.perTokenMs, { seed: m.seed + 13 }).a;
      return q(
        { estimate: s.mean, lo: s.ci.lo, hi: s.ci.hi },
        "ms",
        "measured",
        `mean per-request TPOT over ${a.perTokenMs.length} requests, bootstrap 95 % CI${scaled}`,
      );
    };
    const diff = cmp.diff;
    const faster = diff.estimate > 0 ? treat.name : base.name;
    const verdict = cmp.detected
      ? `${faster} is faster by ${fmt(Math.abs(diff.estimate))} ms/token [${fmt(Math.min(Math.abs(diff.lo), Math.abs(diff.hi)))}, ${fmt(Math.max(Math.abs(diff.lo), Math.abs(diff.hi)))}]${calls ? ` ≈ ${fmt((Math.abs(diff.estimate) * 1000) / calls)} µs per all-reduce` : ""}`
      : `No detectable difference at this sample size (Δ ${fmt(diff.estimate)} ms/token [${fmt(diff.lo)}, ${fmt(diff.hi)}]); detectable effect ≈ ${fmt(cmp.mde)} ms/token`;
    const ttftCmp =
      base.ttftMs.length > 1 && treat.ttftMs.length > 1
        ? compareSamples(base.ttftMs, treat.ttftMs, { seed: m.seed + 17 })
        : undefined;
    ab = {
      arms: m.ab.arms.map((a) => ({
        name: a.name,
        change: a.change,
        perTokenMs: armQ(a),
        ttftMs: a.ttftMs.length > 1 ? q(meanCI(a.ttftMs, m.seed + 19), "ms", "measured", "mean TTFT") : undefined,
        e2eMs: a.e2eMs.length > 1 ? q(meanCI(a.e2eMs, m.seed + 23), "ms", "measured", "mean request time") : undefined,
        samples: a.perTokenMs.length,
      })),
      deltaPerTokenMs: q(
        diff,
        "ms",
        "measured",
        `mean TPOT(${base.name}) − mean TPOT(${treat.name}), bootstrap 95 % CI`,
      ),
      deltaTtftMs: ttftCmp ? q(ttftCmp.diff, "ms", "measured", "mean TTFT difference, bootstrap 95 % CI") : undefined,
      deltaPerCallUs: calls
        ? q(diff, "µs", "derived", `Δ per token × 1000 ÷ ${calls} all-reduces per token (${callsSrc})`, 1000 / calls)
        : undefined,
      callsPerToken: calls,
      pWelch: cmp.welch.p,
      pMannWhitney: cmp.mannWhitney.p,
      verdict,
      order: m.ab.order,
      notes: m.ab.notes,
      mechanism: m.experiment?.mechanism,
      chosenBecause: m.experiment?.plan.reason,
      collective,
    };
    findings.push(`A/B with restarts: ${verdict}.`);
    // seed-scenario §3.5: which arm does the un-tweaked baseline look like?
    const baseMs = tr ? tr.periodMs.estimate : token?.estimate;
    if (baseMs !== undefined && cmp.detected) {
      const near = Math.abs(baseMs - cmp.a.mean) <= Math.abs(baseMs - cmp.b.mean) ? base : treat;
      findings.push(
        `The baseline's per-token time (${fmt(baseMs)} ms${tr ? ", trace" : ""}) matches the "${near.name}" arm (${near.change}) — every number here carries the configuration it was measured under.`,
      );
    }
    method.push(
      `A/B: the server restarted per block with each arm's environment (${m.ab.arms.map((a) => `${a.name}: ${a.change}`).join("; ")}), blocks in the order ${m.ab.order.join(" ")}, warm-up per block; per-request TPOT compared with a bootstrap CI of the difference, Welch's t and Mann–Whitney.`,
    );
  }

  // ---- no trace: the split comes from the calibrated model (modelled, and labelled so)
  if (!tr && m.model && token) {
    const groups = {
      communication: [] as typeof m.model.terms,
      compute: [] as typeof m.model.terms,
      overhead: [] as typeof m.model.terms,
    };
    for (const t of m.model.terms) {
      if (/all-reduce|gather|all-to-all|collective|p2p/i.test(t.name)) groups.communication.push(t);
      else if (/weight|kv|compute|matmul|attention|expert/i.test(t.name)) groups.compute.push(t);
      else groups.overhead.push(t);
    }
    const modelMid = m.model.terms.reduce((a, t) => a + t.mid, 0);
    // Scale the model's split to the measured per-token time (the fit already targets it).
    const k = modelMid > 0 ? token.estimate / modelMid : 1;
    for (const [component, ts] of Object.entries(groups) as Array<
      ["communication" | "compute" | "overhead", typeof m.model.terms]
    >) {
      // A single device has no collectives: no communication row of zeros.
      if (component === "communication" && ts.length === 0) continue;
      const sum = (f: (t: (typeof ts)[number]) => number) => ts.reduce((a, t) => a + f(t), 0) * k;
      decomposition.push({
        component,
        ms: {
          value: sum((t) => t.mid),
          low: sum((t) => Math.min(t.low, t.high)),
          high: sum((t) => Math.max(t.low, t.high)),
          unit: "ms",
          method: "modelled",
          how: `calibrated model terms (${ts.map((t) => t.name).join(", ") || "none"}) scaled to the measured per-token time; range from the model's efficiency ranges`,
        },
        detail:
          component === "communication"
            ? "collectives per the model"
            : component === "compute"
              ? "weight/KV reads and math per the model"
              : "per-kernel and engine overhead per the model",
      });
    }
    decompositionBasis =
      "No profiler trace: this split is modelled (the analytical model calibrated on this run's measurements), not measured. Capture a trace (--server-cmd, or --profiler-dir with --url) to measure it.";
  }

  // ---- model
  const model = m.model?.section;
  if (m.model && model && tr) {
    // The measured ceiling outranks a model that could not pin the collective cost.
    const zc = m.model.whatIfs.find((w) => w.scenario === "zero-comm");
    const measuredNoComm = rateFromMs(tr.nonCommMs);
    const zcText = zc
      ? `the calibrated model's zero-communication what-if (${fmt(zc.tokensPerSecond.value)} tok/s [${fmt(zc.tokensPerSecond.low)}, ${fmt(zc.tokensPerSecond.high)}])`
      : "";
    const measText = `the trace-measured ceiling (${fmt(measuredNoComm.estimate)} tok/s [${fmt(measuredNoComm.lo)}, ${fmt(measuredNoComm.hi)}])`;
    if (zc && (zc.tokensPerSecond.high! < measuredNoComm.lo || zc.tokensPerSecond.low! > measuredNoComm.hi)) {
      // Why they can still differ: without the trace row the model's collective cost is a prior; with it,
      // the per-call cost is fitted, so a gap means the model's call count or its other terms do not match.
      const why = m.model.arFromTrace
        ? "its per-call all-reduce cost is fitted to the trace, so the gap is in what else it removes or keeps (call count, other collectives, the fixed per-step term) — see the residuals"
        : "its collective cost is not pinned by these measurements";
      const msg = `${zcText[0]!.toUpperCase()}${zcText.slice(1)} disagrees with ${measText}: the model splits the measured step differently from the trace (${why}). Read the model's what-ifs as relative changes; the measured ceilings come first.`;
      model.notes.unshift(msg);
      findings.push(msg);
    } else if (zc)
      model.notes.unshift(
        `Consistent: ${zcText} and ${measText} overlap${m.model.arFromTrace ? "; the model's per-call all-reduce cost is fitted to the trace" : ""}.`,
      );
  }
  if (m.model) {
    ceilings.push(...m.model.ceilings);
    method.push(`Model: ${m.model.section.description}; calibrated on this run's measurements (see residuals).`);
  }

  method.push(
    "Every interval is 95 %: t-intervals over requests for client timing, percentile bootstrap over steps for the trace, bootstrap of the difference for the A/B; derived numbers combine the draws of their inputs.",
  );
  if (x !== 1)
    method.push(
      `The embedded sim ran ${x}× faster than real time; every client-measured time was multiplied by ${x}. The sim's own /metrics and profiler trace record simulated time and are used as exported.`,
    );

  // ---- telemetry: the hardware's counters over the batch-1 bench's window
  const telemetry = m.bench?.telemetry
    ? telemetrySection({
        run: m.bench.telemetry,
        tokenRate: m.bench.tokenRate,
        stepMs: token?.estimate,
        model: m.model?.hardware,
        fittedBandwidthGBs: m.model?.telemetryBandwidthGBs,
        promptTokens: m.bench.promptTokens,
        outputTokens: m.bench.outputLen,
        timeScale: x,
      })
    : undefined;
  if (telemetry) {
    findings.push(...telemetryFindings(telemetry));
    const on: string[] = [];
    if (telemetry.energyJ) on.push("energy per token (the hardware's energy or power readings)");
    if (m.model?.telemetryBandwidthGBs)
      on.push(
        `the weights/KV term's bandwidth (${fmt(m.model.telemetryBandwidthGBs)} GB/s from DRAM active ÷ memory busy)`,
      );
    if (telemetry.interconnect) on.push("the interconnect bytes per token (PCIe/NVLink counters)");
    if (on.length) decompositionBasis += ` Resting on hardware counters: ${on.join("; ")}.`;
    method.push(
      `Telemetry: ${telemetry.source}, ${telemetry.samples} readings cut to the bench's measured window (warm-up excluded); definitions in docs/telemetry.md.`,
    );
  }

  return {
    schema: "inferscope.study/1",
    telemetry,
    meta,
    experiments: m.experiment?.plan,
    serverTimings: m.bench?.serverTimings,
    requestSplit: m.bench?.requestSplit,
    summary: { headlines, decomposition, decompositionBasis, ceiling, findings },
    audit:
      m.audit && x !== 1
        ? {
            ...m.audit,
            notes: [
              `The sim ran ${x}× faster than real time; its /metrics record simulated seconds (gauge inferscope_sim_time_scale = ${x}), so the values and bucket remarks here read as on the simulated deployment; the scrape window and the per-second rates are in simulated time too.`,
              ...m.audit.notes,
            ],
          }
        : m.audit,
    latency,
    sweep,
    ab,
    trace,
    model,
    ceilings,
    whatIfs: m.model?.whatIfs ?? [],
    method,
  };
}

export type { Quantity };
