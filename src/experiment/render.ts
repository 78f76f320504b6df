// Plain-text renderings of experiment results for the terminal (the CLI prints these).
import Table from "cli-table3";
import type { ABResult, MetricName } from "./ab.ts";
import { fmt, METRICS } from "./ab.ts";
import type { LoadSweepResult, SweepResult } from "./sweep.ts";

const ci = (lo: number, hi: number) => `[${fmt(lo)}, ${fmt(hi)}]`;

export function renderAB(r: ABResult): string {
  const out: string[] = [];
  out.push(`A/B run ${r.runId} (${r.status}) — baseline ${r.baseline}`);
  for (const v of r.variants) out.push(`  ${v.description}: ${v.blocks} blocks, ${v.requests} requests`);
  const t = new Table({ head: ["metric", ...r.variants.map((v) => v.name)], style: { head: [], border: [] } });
  for (const m of Object.keys(METRICS) as MetricName[]) {
    t.push([
      `${METRICS[m].label} (${METRICS[m].unit})`,
      ...r.variants.map((v) => {
        const s = v.metrics[m];
        return s.n ? `${fmt(s.mean)} ${ci(s.ci.lo, s.ci.hi)}` : "n/a";
      }),
    ]);
  }
  out.push(t.toString());
  if (r.diffs.length) {
    const d = new Table({
      head: ["vs " + r.baseline, "metric", "improvement [95 % CI]", "Welch p", "MWU p", "detectable ≈"],
      style: { head: [], border: [] },
    });
    for (const x of r.diffs)
      d.push([
        x.variant,
        `${METRICS[x.metric].label} (${x.unit})`,
        `${fmt(x.improvement.estimate)} ${ci(x.improvement.lo, x.improvement.hi)}`,
        pf(x.comparison.welch.p),
        pf(x.comparison.mannWhitney.p),
        fmt(x.comparison.mde),
      ]);
    out.push(d.toString());
  }
  out.push("Verdict:");
  for (const v of r.verdicts) out.push(`  ${v}`);
  for (const a of r.attribution)
    out.push(
      `  ${a.variant}: ≈ ${fmt(a.perOpUs.estimate, 1)} µs per ${a.op} ${ci(a.perOpUs.lo, a.perOpUs.hi)} ` +
        `(${fmt(a.perTokenMs.estimate)} ms/token ÷ ${a.opsPerToken} ${a.op}s per token)`,
    );
  if (r.telemetry?.length) {
    out.push("Telemetry (the hardware's counters over each block's measured window, mean over blocks):");
    for (const v of r.telemetry)
      out.push(
        `  ${v.variant}: ${v.joulesPerToken !== null ? `${fmt(v.joulesPerToken, 3)} J/token` : "J/token unknown"}, ` +
          `${v.avgPowerW !== null ? `avg ${fmt(v.avgPowerW, 0)} W` : "power unknown"}, clock-limited ${fmt(v.limitedShare * 100, 0)} % of the window` +
          `${v.smClockMedianMHz !== null ? `, SM clock median ${fmt(v.smClockMedianMHz, 0)} MHz` : ""} (${v.blocks} blocks)`,
      );
  }
  for (const w of r.warnings ?? []) out.push(`  warning: ${w}`);
  if (r.errors.length) {
    out.push("Errors:");
    for (const e of r.errors) out.push(`  block ${e.block} (${e.variant}): ${e.message.replace(/\n/g, "\n    ")}`);
  }
  out.push(`Blocks: ${r.blocks.map((b) => `${b.variant}${b.status === "complete" ? "" : `(${b.status})`}`).join(" ")}`);
  out.push(`Method: ${r.method}`);
  out.push(`Saved as run ${r.runId} in ${r.dbPath}`);
  return out.join("\n");
}

function pf(p: number): string {
  if (!Number.isFinite(p)) return "n/a";
  return p < 1e-4 ? p.toExponential(1) : p.toPrecision(2);
}

export function renderSweep(r: SweepResult): string {
  const out: string[] = [];
  out.push(`Length sweep ${r.runId} (${r.status}${r.resumed ? ", resumed" : ""}) against ${r.target}`);
  const t = new Table({
    head: ["output len", "n", "E2E mean (ms)", "95 % CI", "TTFT (ms)", "TPOT (ms)", "tok/s", "median residual (ms)"],
    style: { head: [], border: [] },
  });
  for (const p of r.points)
    t.push([
      p.outputLen,
      p.n,
      fmt(p.e2elMs.mean),
      ci(p.e2elMs.ci.lo, p.e2elMs.ci.hi),
      fmt(p.ttftMs),
      fmt(p.tpotMs),
      fmt(p.tokPerS, 1),
      fmt(p.medianResidualMs),
    ]);
  out.push(t.toString());
  const f = r.fit;
  out.push(`Fit (${f.method}): ${f.formula}`);
  out.push(
    `  per-token decode cost b = ${fmt(f.perTokenMs.estimate, 3)} ms ${ci(f.perTokenMs.lo, f.perTokenMs.hi)} → converges to ${fmt(f.convergedTokPerS, 1)} tok/s`,
  );
  out.push(
    `  fixed cost a = ${fmt(f.fixedMs.estimate)} ms ${ci(f.fixedMs.lo, f.fixedMs.hi)} (measured mean TTFT ${fmt(r.measuredTtftMs)} ms)`,
  );
  out.push(`  residuals: median |r| ${fmt(f.medianAbsResidualMs)} ms, max |r| ${fmt(f.maxAbsResidualMs)} ms`);
  for (const w of r.warnings) out.push(`  warning: ${w}`);
  out.push(`Saved as run ${r.runId} in ${r.dbPath}`);
  return out.join("\n");
}

function limitCell(d: LoadSweepResult["points"][number]["diagnosis"]): string {
  if (d.binding.length) return d.binding.map((b) => b.limit).join(" + ");
  if (d.unknown) return "unknown";
  return d.server.samples ? "none" : "—";
}

export function renderLoadSweep(r: LoadSweepResult): string {
  const out: string[] = [];
  out.push(`${r.mode} sweep ${r.runId} (${r.status}${r.resumed ? ", resumed" : ""}) against ${r.target}`);
  const t = new Table({
    head: [
      r.mode === "rate" ? "rate (req/s)" : "concurrency",
      "n",
      "output tok/s",
      "req/s",
      "TTFT p50 (ms)",
      "TTFT p99",
      "TPOT p50 (ms)",
      "TPOT p99",
      "E2E p50 (ms)",
      "binding limit",
    ],
    style: { head: [], border: [] },
  });
  for (const p of r.points)
    t.push([
      p.level,
      p.n,
      fmt(p.outputThroughput, 1),
      fmt(p.requestThroughput),
      fmt(p.ttftMs.p50),
      fmt(p.ttftMs.p99),
      fmt(p.tpotMs.p50),
      fmt(p.tpotMs.p99),
      fmt(p.e2elMs.p50),
      limitCell(p.diagnosis),
    ]);
  out.push(t.toString());
  if (r.knee) {
    const at = r.points.find((p) => p.level === r.knee!.level)!;
    out.push(
      `Knee at ${r.mode === "rate" ? `${r.knee.level} req/s` : `${r.knee.level} users`}: onset ${fmt(r.knee.onsetRate)} req/s completed`,
    );
    for (const b of at.diagnosis.binding) out.push(`  ${b.evidence}\n    relieve with: ${b.knobs.join("; ") || "—"}`);
    if (r.tune?.command) out.push(`Search them with restarts: ${r.tune.command}`);
    for (const n of r.tune?.notes ?? []) out.push(`  note: ${n}`);
  } else if (r.points.some((p) => p.diagnosis.unknown))
    out.push(`Binding limit unknown: ${r.points.find((p) => p.diagnosis.unknown)!.diagnosis.unknown}`);
  else out.push("No limit binds at any level.");
  const fr = r.frontier.points.filter((p) => p.pareto).sort((a, b) => a.tokPerSecPerUser - b.tokPerSecPerUser);
  if (fr.length)
    out.push(
      `Frontier (tok/s/GPU @ tok/s/user, ${r.frontier.gpus} GPU${r.frontier.gpus > 1 ? "s" : ""}): ${fr
        .map((p) => `${fmt(p.tokPerSecPerGpu, 1)} @ ${fmt(p.tokPerSecPerUser, 1)} (level ${p.level})`)
        .join(", ")}`,
    );
  out.push(`Saved as run ${r.runId} in ${r.dbPath}`);
  return out.join("\n");
}
