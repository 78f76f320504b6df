// One function per study phase. Each calls one module's library function and converts its output
// into plain measurements (times in the server's simulated time: client ms × time-scale).
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runAB } from "../experiment/ab.ts";
import { theilSenBootstrap } from "../experiment/stats.ts";
import { runBench } from "../load/runner.ts";
import { requestTpot, tokenItls } from "../load/summarize.ts";
import type { RequestRecord } from "../load/types.ts";
import { type AuditReport, auditMetrics } from "../metrics/audit.ts";
import { fmt } from "../report/format.ts";
import type { AuditSection } from "../report/types.ts";
import { openStore, type Store } from "../store/index.ts";
import type { Measurements } from "./assemble.ts";
import type { StudyPlan } from "./plan.ts";

/** A phase that cannot run for this target (not a failure: the report says why). */
export class Unavailable extends Error {}

interface Common {
  apiKey?: string;
  signal?: AbortSignal;
  onProgress?: (message: string) => void;
}

// ---------------------------------------------------------------- audit

export async function phaseAudit(url: string, o: Common & { until: Promise<void> }): Promise<AuditSection> {
  const rep = await auditMetrics(`${url}/metrics`, { windowMs: 0, sleep: () => o.until });
  return auditSection(rep);
}

function conceptValue(c: AuditReport["concepts"][number]): string {
  const v = c.value;
  if (!v) return c.note ?? "";
  const parts: string[] = [];
  const time = c.unit === "seconds";
  const f = (x: number) => (time ? `${fmt(x * 1000)} ms` : fmt(x));
  if (v.count !== undefined) parts.push(`n ${fmt(v.count)}`);
  if (v.mean !== undefined) parts.push(`mean ${f(v.mean)}`);
  if (v.p50 !== undefined) parts.push(`p50 ${f(v.p50)}`);
  if (v.p99 !== undefined) parts.push(`p99 ${f(v.p99)}`);
  if (v.rate !== undefined) parts.push(`${fmt(v.rate)}/s`);
  if (v.after !== undefined && v.count === undefined) parts.push(`now ${fmt(v.after)}`);
  if (c.resolution?.text) parts.push(c.resolution.text);
  return parts.join(", ");
}

export function auditSection(rep: AuditReport): AuditSection {
  const notes = [rep.verdict, ...rep.quirks, ...rep.warnings].filter(Boolean);
  return {
    engine: rep.engine ? rep.engine.name : "not detected",
    engineVersion: rep.engine?.version,
    windowMs: rep.windowSeconds * 1000,
    families: rep.concepts.map((c) => ({
      name: c.metric ?? "(not exposed)",
      type: c.kind ?? "",
      granularity: c.observable ? (c.granularity ?? "") : "not exposed",
      concept: c.title,
      value: conceptValue(c),
    })),
    gaps: rep.gaps.map((g) => ({ what: g.what, method: `${g.method} (${g.why})`, command: g.command })),
    notes,
  };
}

// ---------------------------------------------------------------- bench (batch 1)

export interface BenchMeasure {
  requests: number;
  outputLen: number;
  promptTokens?: number;
  ttftMs: number[];
  /** Per request, its per-token gaps (ms). */
  itlGroups: number[][];
  tpotMs: number[];
  e2eMs: number[];
  server?: { ttftMeanMs?: number; itlMeanMs?: number; steps?: number };
  warnings: string[];
  clientSaturated: boolean;
}

const measured = (rs: RequestRecord[]) => rs.filter((r) => !r.warmup && r.errorClass === null);

export async function phaseBench(url: string, plan: StudyPlan, m: Measurements, o: Common): Promise<BenchMeasure> {
  const x = m.timeScale;
  const res = await runBench(
    {
      baseUrl: url,
      model: m.servedModel,
      numPrompts: plan.bench.requests,
      warmup: plan.bench.warmup,
      randomInputLen: plan.inputLen,
      randomOutputLen: plan.bench.outputLen,
      ignoreEos: true,
      concurrency: 1,
      seed: m.seed,
      apiKey: o.apiKey,
    },
    { signal: o.signal },
  );
  const rs = measured(res.requests);
  if (rs.length === 0) throw new Error(`no request succeeded (${res.warnings.join("; ") || "see the server log"})`);
  const sv = res.server;
  return {
    requests: rs.length,
    outputLen: plan.bench.outputLen,
    promptTokens: rs[0]!.promptTokens > 0 ? rs[0]!.promptTokens : undefined,
    ttftMs: rs.map((r) => r.ttftMs * x),
    itlGroups: rs.map((r) => tokenItls(r).map((v) => v * x)),
    tpotMs: rs
      .map((r) => requestTpot(r))
      .filter((v): v is number => v !== null)
      .map((v) => v * x),
    e2eMs: rs.map((r) => r.e2elMs * x),
    server: sv
      ? {
          ttftMeanMs: sv.ttft_mean_ms === null ? undefined : sv.ttft_mean_ms,
          itlMeanMs: sv.itl_mean_ms === null ? undefined : sv.itl_mean_ms,
          steps: undefined,
        }
      : undefined,
    warnings: res.warnings,
    clientSaturated: res.client.saturated,
  };
}

// ---------------------------------------------------------------- length sweep

export interface SweepMeasure {
  points: Array<{ outputTokens: number; e2eMs: number }>;
  slope: { estimate: number; lo: number; hi: number };
  intercept: { estimate: number; lo: number; hi: number };
  r2: number;
}

export async function phaseSweep(url: string, plan: StudyPlan, m: Measurements, o: Common): Promise<SweepMeasure> {
  const x = m.timeScale;
  const points: SweepMeasure["points"] = [];
  for (const n of plan.sweep.lengths) {
    o.onProgress?.(`N = ${n}`);
    const res = await runBench(
      {
        baseUrl: url,
        model: m.servedModel,
        numPrompts: plan.sweep.repeats,
        warmup: 0,
        randomInputLen: plan.inputLen,
        randomOutputLen: n,
        ignoreEos: true,
        concurrency: 1,
        seed: m.seed + n,
        apiKey: o.apiKey,
        noServerMetrics: true,
      },
      { signal: o.signal },
    );
    for (const r of measured(res.requests)) points.push({ outputTokens: r.outputTokens, e2eMs: r.e2elMs * x });
  }
  if (points.length < 3) throw new Error(`only ${points.length} sweep requests succeeded; need 3 for a fit`);
  const xs = points.map((p) => p.outputTokens - 1);
  const ys = points.map((p) => p.e2eMs);
  const fit = theilSenBootstrap(xs, ys, { seed: m.seed, resamples: 1000 });
  const meanY = ys.reduce((s, v) => s + v, 0) / ys.length;
  let ssr = 0;
  let sst = 0;
  for (let i = 0; i < xs.length; i++) {
    ssr += (ys[i]! - (fit.fit.intercept + fit.fit.slope * xs[i]!)) ** 2;
    sst += (ys[i]! - meanY) ** 2;
  }
  return {
    points,
    slope: { estimate: fit.fit.slope, lo: fit.slope.lo, hi: fit.slope.hi },
    intercept: { estimate: fit.fit.intercept, lo: fit.intercept.lo, hi: fit.intercept.hi },
    r2: sst > 0 ? 1 - ssr / sst : 1,
  };
}

// ---------------------------------------------------------------- trace, A/B, model (wired as the modules land)

export interface TraceMeasure {
  steps: import("./estimate.ts").TraceStep[];
  totalSteps: number;
  perClass: Array<{ cls: string; msPerStep: number; kernelsPerStep?: number }>;
  idleMsPerStep: number;
  kernelNames: string[];
  files: string[];
  notes: string[];
}

export async function phaseTrace(
  _url: string,
  _plan: StudyPlan,
  _m: Measurements,
  _o: Common & { embedded: boolean },
): Promise<TraceMeasure> {
  throw new Unavailable("the trace module (captureTrace/analyzeTrace) is not in this build");
}

export interface AbMeasure {
  arms: Array<{ name: string; change: string; perTokenMs: number[]; ttftMs: number[]; e2eMs: number[] }>;
  order: string[];
  notes: string[];
  runId: string;
}

/**
 * A/B on the communication knob: the server restarted per block, baseline (NCCL's own protocol
 * choice) against NCCL_PROTO=LL, blocks in a seeded ABBA order (experiment/runAB). Raw per-request
 * samples are read back from the run store so the study can scale them to simulated time.
 */
export async function phaseAb(
  serverCmd: string,
  plan: StudyPlan,
  m: Measurements,
  o: Common & { embedded: boolean; store: Store | null },
): Promise<AbMeasure> {
  const x = m.timeScale;
  const ownStore = o.store ? null : openStore(join(mkdtempSync(join(tmpdir(), "inferscope-study-")), "ab.db"));
  const store = (o.store ?? ownStore)!;
  try {
    const res = await runAB({
      serverCmd,
      variants: ["default:", "ll:NCCL_PROTO=LL"],
      repeats: plan.ab.repeats,
      workload: {
        numPrompts: plan.ab.requestsPerBlock,
        randomInputLen: plan.inputLen,
        randomOutputLen: plan.ab.outputLen,
        warmup: plan.ab.warmup,
        concurrency: 1,
        seed: m.seed,
        model: m.servedModel,
      },
      seed: m.seed,
      db: store,
      readyTimeoutMs: o.embedded ? 60_000 : 600_000,
      graceMs: o.embedded ? 3000 : 10_000,
      logDir: join(tmpdir(), "inferscope-logs"),
      apiKey: o.apiKey,
      signal: o.signal,
      onProgress: (e) => o.onProgress?.(e.message),
    });
    const detail = store.getRun(res.runId);
    const variantOf = new Map(detail.blocks.filter((b) => b.status === "complete").map((b) => [b.id, b.variant]));
    const reqs = store.getRequests(res.runId).filter((r) => r.ok && r.blockId !== null && variantOf.has(r.blockId));
    const arms = [
      { name: "default", change: "(NCCL's automatic protocol choice)" },
      { name: "ll", change: "NCCL_PROTO=LL" },
    ].map((a) => {
      const mine = reqs.filter((r) => variantOf.get(r.blockId!) === a.name);
      return {
        ...a,
        perTokenMs: mine
          .map((r) => r.tpotMs)
          .filter((v): v is number => v !== null && Number.isFinite(v))
          .map((v) => v * x),
        ttftMs: mine
          .map((r) => r.ttftMs)
          .filter((v): v is number => v !== null)
          .map((v) => v * x),
        e2eMs: mine
          .map((r) => r.e2elMs)
          .filter((v): v is number => v !== null)
          .map((v) => v * x),
      };
    });
    const notes = [
      `Each block restarted the server; ${plan.ab.warmup} warm-up request(s) per block excluded. Stored as A/B run ${res.runId}.`,
      ...res.errors.map((e) => `block ${e.block} (${e.variant}): ${e.message}`),
    ];
    return { arms, order: res.config.design.map((b) => b.variant), notes, runId: res.runId };
  } finally {
    ownStore?.close();
  }
}

export interface ModelMeasure {
  section: import("../report/types.ts").ModelSection;
  whatIfs: import("../report/types.ts").WhatIf[];
  ceilings: import("../report/types.ts").Ceiling[];
  callsPerToken?: number;
}

export async function phaseModel(_m: Measurements): Promise<ModelMeasure> {
  throw new Unavailable("the analytical model (predict/fit) is not in this build");
}
