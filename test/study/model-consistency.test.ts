// The study's model section against the trace: the fit gets the trace's per-call all-reduce time, so
// the zero-comm what-if agrees with the trace-measured ceiling; a model that did not see this trace
// is flagged as disagreeing, with the reason that applies.
import assert from "node:assert/strict";
import { test } from "node:test";
import { SEED_DEPLOYMENT } from "../../src/model/index.ts";
import type { StudyMeta } from "../../src/report/types.ts";
import { deploymentOf } from "../../src/study/deployment.ts";
import type { TraceStep } from "../../src/study/estimate.ts";
import { assemble, defaultPlan, type Measurements } from "../../src/study/index.ts";
import { phaseModel, type TraceMeasure } from "../../src/study/phases.ts";

// The seed sim profile's shape: 157 all-reduces of ≈ 86.6 µs in a ≈ 20.9 ms step, with a little jitter.
function traceOf(perCallUs: number, computeMs = 5.6, n = 24): TraceMeasure {
  const steps: TraceStep[] = Array.from({ length: n }, (_, i) => {
    const j = Math.sin(i * 1.7) * 0.01;
    const ar = (157 * perCallUs * (1 + j)) / 1000;
    const compute = computeMs * (1 - j);
    return { periodMs: ar + compute + 1.6, allReduceMs: ar, allReduceCalls: 157, otherCommMs: 0, computeMs: compute };
  });
  return { steps, totalSteps: n + 2, perClass: [], idleMsPerStep: 1.6, kernelNames: [], files: [], notes: [] };
}

const base = (): Measurements => ({
  timeScale: 1,
  plan: defaultPlan(true),
  seed: 1,
  deployment: deploymentOf(SEED_DEPLOYMENT),
  kind: "embedded-sim",
});

const meta = (m: Measurements): StudyMeta => ({
  tool: { name: "inferscope", version: "test" },
  startedAt: "2026-12-02T00:00:00.000Z",
  finishedAt: "2026-12-02T00:00:01.000Z",
  durationMs: 1000,
  quick: true,
  seed: 1,
  target: { kind: "embedded-sim" },
  timeScale: 1,
  deployment: m.deployment,
  flags: {},
  environment: {},
  phases: [],
});

const disagreement = (f: string) => /disagrees with the trace-measured ceiling/.test(f);

test("the trace's per-call all-reduce time pins the model: zero-comm what-if and trace ceiling agree", async () => {
  const m = base();
  m.trace = traceOf(86.6);
  m.model = await phaseModel(m);
  assert.equal(m.model.arFromTrace, true);
  const r = assemble(m, meta(m));
  const zc = r.whatIfs.find((w) => w.scenario === "zero-comm")!.tokensPerSecond;
  const free = r.ceilings.find((c) => c.scenario === "communication free")!.tokensPerSecond;
  assert.ok(zc.low! <= free.high! && free.low! <= zc.high!, `${zc.low}–${zc.high} vs ${free.low}–${free.high}`);
  // The fitted model's ceiling row is the same what-if.
  const fz = r.ceilings.find((c) => c.scenario === "fitted model: zero-cost communication")!.tokensPerSecond;
  assert.ok(Math.abs(fz.low! - zc.low!) < 0.01 && Math.abs(fz.high! - zc.high!) < 0.01);
  assert.ok(!r.summary.findings.some(disagreement));
  assert.match(
    r.model!.notes[0]!,
    /^Consistent: .* overlap; the model's per-call all-reduce cost is fitted to the trace/,
  );
  const row = r.model!.residuals.find((x) => x.what.startsWith("all-reduce per call (trace)"))!;
  assert.ok(Math.abs(row.measured - 86.6) < 1 && Math.abs(row.residualPct) < 2, JSON.stringify(row));
});

test("a genuine disagreement is still flagged, saying whether the per-call cost came from a trace", async () => {
  // Model fitted to another run's trace (30 µs per call, 12 ms of compute), compared with this one.
  const other = base();
  other.trace = traceOf(30, 12);
  const fittedElsewhere = await phaseModel(other);
  const m = base();
  m.trace = traceOf(86.6);
  m.model = fittedElsewhere;
  const r = assemble(m, meta(m));
  const f = r.summary.findings.find(disagreement);
  assert.ok(f, "flagged");
  assert.match(f!, /per-call all-reduce cost is fitted to the trace, so the gap is in what else it removes/);
  // No measurements at all: the uncalibrated model, its collective cost at the prior.
  const bare = base();
  bare.model = await phaseModel(bare);
  assert.equal(bare.model.arFromTrace, false);
  const m2 = base();
  // A trace whose non-communication time (40 ms) the uncalibrated model cannot reach (its interval is wider since
  // the serving corpus: 20 ms is now inside it).
  m2.trace = traceOf(86.6, 40);
  m2.model = bare.model;
  const r2 = assemble(m2, meta(m2));
  assert.match(r2.summary.findings.find(disagreement)!, /its collective cost is not pinned by these measurements/);
});
