// Plain-text rendering of a tune result for the terminal.
import Table from "cli-table3";
import type { Interval3, TuneResult } from "./run.ts";
import { spanColumns } from "./spans.ts";

function f(x: number | null | undefined): string {
  if (x === null || x === undefined || !Number.isFinite(x)) return "n/a";
  const a = Math.abs(x);
  return x.toFixed(a >= 100 ? 0 : a >= 10 ? 1 : 2);
}

const iv = (i: Interval3 | null) => (i ? `${f(i.estimate)} [${f(i.low)}, ${f(i.high)}]` : "—");
const pct = (x: number) => `${(x * 100).toFixed(1)} %`;

export function renderTune(r: TuneResult): string {
  const out: string[] = [];
  const u = r.objective.unit;
  out.push(`tune run ${r.runId} (${r.status}) — objective: ${r.objective.label}, ${u}`);
  if (r.best) {
    out.push(
      `Best: ${r.best.id} ${r.best.name} — ${iv(r.best.objective)} ${u}, P(best) ${pct(r.best.probabilityBest)}`,
    );
    if (r.best.gain)
      out.push(
        `  measured gain over the baseline: ${f(r.best.gain.absolute.estimate)} ${u} [${f(r.best.gain.absolute.low)}, ${f(r.best.gain.absolute.high)}] = ${pct(r.best.gain.relative.estimate)} [${pct(r.best.gain.relative.low)}, ${pct(r.best.gain.relative.high)}]${r.best.gain.relative.low > 0 ? "" : " — not proven: the interval includes no gain"}`,
      );
    else if (r.best.id === "c0") out.push("  the baseline is the best configuration found");
    out.push(`  run it: ${r.best.command}`);
  }
  out.push(`Stopped: ${r.stop.message}`);
  if (r.stop.unseparated.length) out.push(`  not separated from the best: ${r.stop.unseparated.join(", ")}`);
  out.push(
    `Server starts: ${r.restarts} (a full grid at the best's ${r.gridStarts / Math.max(1, r.candidates.filter((c) => c.status !== "skipped").length)} blocks per candidate: ${r.gridStarts}); ${f(r.elapsedS)} s`,
  );
  const t = new Table({
    head: ["id", "candidate", "predicted (model)", "posterior 95 %", "measured 95 %", "blocks", "P(best)", "status"],
    style: { head: [], border: [] },
  });
  for (const c of r.candidates)
    t.push([
      c.id,
      c.name,
      c.predicted ? iv(c.predicted) : "—",
      c.status === "skipped" ? "—" : iv(c.posterior),
      c.measured ? iv(c.measured) : "—",
      String(c.measured?.blocks ?? 0),
      c.status === "skipped" ? "" : pct(c.probabilityBest),
      c.status === "skipped"
        ? `skipped: ${c.skipped}`
        : c.dropped
          ? `dropped after block ${c.dropped.afterBlock + 1}: ${c.dropped.reason}`
          : c.status,
    ]);
  out.push(t.toString());
  if (r.otlp) out.push(...renderSpans(r));
  if (!r.model.available) out.push(`Model: none (${r.model.reason})`);
  for (const n of [...r.model.notes, ...r.model.assumptions]) out.push(`  model: ${n}`);
  for (const w of r.warnings) out.push(`warning: ${w}`);
  for (const e of r.errors) out.push(`error: ${e.split("\n")[0]}`);
  out.push(`Method: ${r.method}`);
  return out.join("\n");
}

/** Findings listed in the terminal; the rest are counted (all of them are in --json and the report). */
const FINDINGS_SHOWN = 10;

function renderSpans(r: TuneResult): string[] {
  const o = r.otlp!;
  const out = [
    `Engine spans (OTLP${o.endpoint ? `, receiver ${o.endpoint}` : ""}): ${o.hint ?? `each server got ${o.serverFlags}`}`,
    "  each candidate's joined requests, all its blocks pooled: p50 / p99 in ms",
  ];
  const cols = spanColumns(r.candidates);
  const t = new Table({
    head: ["id", "joined", ...cols.map(([, label]) => label)],
    style: { head: [], border: [] },
  });
  for (const c of r.candidates) {
    const s = c.spans;
    if (!s) continue;
    t.push([
      c.id,
      `${s.joined}/${s.requests} (${pct(s.joinRate)})`,
      ...cols.map(([k]) => (s.split[k] ? `${f(s.split[k].p50)} / ${f(s.split[k].p99)}` : "—")),
    ]);
  }
  out.push(t.toString());
  if (o.comparison) out.push(`  ${o.comparison}`);
  for (const x of o.findings.slice(0, FINDINGS_SHOWN)) out.push(`  finding: ${x}`);
  if (o.findings.length > FINDINGS_SHOWN) out.push(`  … ${o.findings.length - FINDINGS_SHOWN} more findings (--json)`);
  return out;
}
