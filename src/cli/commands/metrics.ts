// `inferscope metrics scrape|audit|diff|watch`: thin wrappers over src/metrics (flags → library → print).
import { writeFile } from "node:fs/promises";
import type { Command } from "@commander-js/extra-typings";
import Table from "cli-table3";
import { UsageError } from "../../errors.ts";
import { type AuditReport, auditMetrics, formatAudit } from "../../metrics/audit.ts";
import { diffSnapshots, type SnapshotDiff } from "../../metrics/diff.ts";
import { histogramQuantile } from "../../metrics/histogram.ts";
import { fleetAudit, fleetWatch } from "../../metrics/prometheus.ts";
import { fetchRaw, parseRaw, summarizeExposition } from "../../metrics/scrape.ts";
import type { Snapshot } from "../../metrics/types.ts";
import { formatWatchLine, formatWatchPanel, type WatchFrame, watchMetrics } from "../../metrics/watch.ts";
import { claimOutput } from "../../output-file.ts";
import {
  durationFlag,
  emit,
  headerFlags,
  liveView,
  MAX_DURATION_MS,
  parseDurationMs,
  progressEnabled,
  safeLine,
  withCommon,
} from "../common.ts";

function duration(flag: string) {
  return (v: string) => {
    let ms: number;
    try {
      ms = parseDurationMs(v);
    } catch {
      throw new UsageError(`${flag}: not a duration: "${v}" (examples: 500ms, 10s, 2m)`);
    }
    // A zero window measures nothing; a zero interval would scrape in a busy loop.
    if (!(ms > 0)) throw new UsageError(`${flag} must be longer than 0, got "${v}"`);
    if (ms > MAX_DURATION_MS) return durationFlag(flag, v)!;
    return ms;
  };
}

/** Plain decimal for a delta of floats: 0.00362, not 0.0036200000000000676. */
function num(x: number): string | number {
  return Number.isFinite(x) && !Number.isInteger(x) ? String(Number(x.toPrecision(12))) : x;
}

function positiveInt(flag: string) {
  return (v: string) => {
    const n = Number(v);
    if (!Number.isSafeInteger(n) || n <= 0) throw new UsageError(`${flag}: expected a positive integer, got "${v}"`);
    return n;
  };
}

// A body is decoded to one string to parse it, and V8 strings end near 2^29 characters.
const MAX_BODY_BYTES = 512e6;

function bytes(v: string): number {
  const m = /^(\d+(?:\.\d+)?)\s*(b|kb|kib|mb|mib|gb|gib)?$/i.exec(v.trim());
  if (!m) throw new UsageError(`--max-bytes: not a size: "${v}" (examples: 64MiB, 500kB)`);
  const unit = (m[2] ?? "b").toLowerCase();
  const f: Record<string, number> = { b: 1, kb: 1e3, kib: 1024, mb: 1e6, mib: 1048576, gb: 1e9, gib: 1073741824 };
  const n = Math.round(Number(m[1]) * f[unit]!);
  // Zero would refuse every body, however small, with a "0.00 MiB limit".
  if (!(n >= 1)) throw new UsageError(`--max-bytes must be at least 1 byte, got "${v}"`);
  if (n > MAX_BODY_BYTES)
    throw new UsageError(`--max-bytes must be at most 512MB (one body is parsed as one string), got "${v}"`);
  return n;
}

function fetchFlags<C extends Command<any, any, any>>(cmd: C) {
  return cmd
    .option("--timeout <duration>", "connect/headers/body timeout per request (default 10s)", duration("--timeout"))
    .option("--max-bytes <size>", "refuse bodies larger than this (default 64MiB)", bytes)
    .option(
      "--header <name:value>",
      "extra request header, e.g. 'Authorization: Bearer …' (repeatable)",
      (v: string, prev: string[] = []) => [...prev, v],
    );
}

function fetchOpts(o: { timeout?: number; maxBytes?: number; header?: string[] }) {
  return { timeoutMs: o.timeout, maxBytes: o.maxBytes, headers: headerFlags("--header", o.header) };
}

function formatFamilies(s: ReturnType<typeof summarizeExposition>): string {
  const t = new Table({ head: ["family", "type", "series", "samples", "help"], style: { head: [], border: [] } });
  for (const f of s.families) t.push([f.name, f.type, f.series, f.samples, (f.help ?? "").slice(0, 60)]);
  const warn = s.warnings.length
    ? `\n${s.warnings.length} lenient-mode warning(s):\n${s.warnings.slice(0, 10).join("\n")}`
    : "";
  return `${s.source}: ${s.format}, ${s.families.length} families, ${s.samples} samples\n${t.toString()}${warn}`;
}

function formatDiff(d: SnapshotDiff, all: boolean): string {
  const lines = [
    `window ${Number.isFinite(d.windowSeconds) ? `${d.windowSeconds.toFixed(1)} s` : `unknown${d.windowUnknown ? `: ${d.windowUnknown}` : ""}`}`,
  ];
  const labels = (l: Record<string, string>) => {
    const s = Object.entries(l)
      .map(([k, v]) => `${k}="${v}"`)
      .join(",");
    return s ? `{${s}}` : "";
  };
  const counters = d.counters.filter((c) => all || c.delta !== 0);
  if (counters.length) {
    const t = new Table({ head: ["counter", "delta", "per second", "note"], style: { head: [], border: [] } });
    for (const c of counters)
      t.push([
        `${c.name}${labels(c.labels)}`,
        num(c.delta),
        Number.isFinite(c.rate) ? c.rate.toFixed(3) : "–",
        c.reset ? "reset" : c.added ? "new" : "",
      ]);
    lines.push(t.toString());
  }
  const hist = d.histograms.filter((h) => all || h.count !== 0);
  if (hist.length) {
    const t = new Table({ head: ["histogram", "n", "mean", "p50", "p99", "note"], style: { head: [], border: [] } });
    const q = (p: number, h: (typeof hist)[number]) => {
      const v = histogramQuantile(p, h.buckets);
      return Number.isNaN(v) ? "–" : String(Number(v.toPrecision(4)));
    };
    for (const h of hist)
      t.push([
        `${h.family}${labels(h.labels)}`,
        h.count,
        Number.isFinite(h.mean) ? String(Number(h.mean.toPrecision(4))) : "–",
        q(0.5, h),
        q(0.99, h),
        h.reset ? "reset" : h.boundsChanged ? "re-bucketed" : "",
      ]);
    lines.push(t.toString());
  }
  const gauges = d.gauges.filter((g) => all || g.change !== 0);
  if (gauges.length) {
    const t = new Table({ head: ["gauge", "before", "after", "change"], style: { head: [], border: [] } });
    for (const g of gauges) t.push([`${g.name}${labels(g.labels)}`, num(g.before), num(g.after), num(g.change)]);
    lines.push(t.toString());
  }
  if (d.removed.length) lines.push(`${d.removed.length} series disappeared`);
  if (lines.length === 1) lines.push("nothing changed");
  return lines.join("\n");
}

export function register(program: Command): void {
  const metrics = program
    .command("metrics")
    .description("scrape, parse, audit, diff and watch an inference server's Prometheus metrics");

  fetchFlags(
    withCommon(
      metrics
        .command("scrape")
        .description(
          "fetch a /metrics URL (a server root means its /metrics), or read a file (- for stdin), and list its families",
        )
        .argument("<target>", "URL, file path, or - for stdin")
        .option("--strict", "apply the OpenMetrics rules; a violation is an error with line:column (exit 2)")
        .option("--out <file>", "also save the exposition text as received"),
    ),
  ).action(async (...args: any[]) => {
    const [target, o] = args as [string, Record<string, any>];
    // Claimed before the scrape: a bad path or a file another run is writing fails first.
    const out = o.out ? claimOutput(o.out, "--out") : null;
    try {
      const raw = await fetchRaw(target, fetchOpts(o));
      const snap = parseRaw(raw, o.strict);
      if (out) {
        await writeFile(out.tempPath, raw.body);
        out.commit();
      }
      if (o.json) emit(snap, o, () => "");
      else emit(summarizeExposition(snap), o, formatFamilies);
    } finally {
      out?.abort();
    }
  });

  fetchFlags(
    withCommon(
      metrics
        .command("audit")
        .description("what the endpoint exposes, at which granularity, over a window, and how to recover the rest")
        .argument("[url]", "the server's metrics URL (not needed with --prometheus)")
        .option(
          "--window <duration>",
          "time between the two scrapes (default 10s; fleet mode: 60s)",
          duration("--window"),
        )
        .option("--prometheus <url>", "fleet mode: read through this Prometheus server instead of scraping")
        .option("--selector <selector>", "fleet mode: series selector, e.g. '{job=\"vllm\"}'"),
    ),
  ).action(async (...args: any[]) => {
    const [url, o] = args as [string | undefined, Record<string, any>];
    let report: AuditReport;
    if (o.prometheus && url)
      throw new UsageError("give a metrics URL or --prometheus, not both", {
        hint: "fleet mode reads through Prometheus: select the servers with --selector",
      });
    if (o.prometheus) {
      report = await fleetAudit({
        prometheusUrl: o.prometheus,
        selector: o.selector,
        windowMs: o.window,
        timeoutMs: o.timeout,
      });
    } else {
      if (!url) throw new UsageError("metrics audit needs a URL (or --prometheus URL --selector …)");
      const progress = progressEnabled(o);
      report = await auditMetrics(url, {
        ...fetchOpts(o),
        windowMs: o.window,
        onProgress: progress ? (m) => process.stderr.write(`[audit] ${safeLine(m)}\n`) : undefined,
      });
    }
    emit(report, o, (r) => formatAudit(r, { color: Boolean(process.stdout.isTTY) }));
  });

  fetchFlags(
    withCommon(
      metrics
        .command("diff")
        .description("what changed between two expositions (files or URLs): counter deltas, bucket deltas, gauges")
        .argument("<a>", "before: URL or file")
        .argument("<b>", "after: URL or file")
        .option("--all", "also list series that did not change"),
    ),
  ).action(async (...args: any[]) => {
    const [a, b, o] = args as [string, string, Record<string, any>];
    const snaps: Snapshot[] = [];
    for (const t of [a, b]) snaps.push(parseRaw(await fetchRaw(t, fetchOpts(o))));
    const d = diffSnapshots(snaps[0]!, snaps[1]!);
    emit(d, o, (x) => formatDiff(x, Boolean(o.all)));
  });

  fetchFlags(
    withCommon(
      metrics
        .command("watch")
        .description("live view: token rates, running/waiting, KV usage, windowed ITL/TTFT quantiles (Ctrl-C stops)")
        .argument("[url]", "the server's metrics URL (not needed with --prometheus)")
        .option("--interval <duration>", "time between scrapes (default 1s; at least 100ms)", duration("--interval"))
        .option(
          "--window <duration>",
          "rates and quantiles over this trailing window (default 10s)",
          duration("--window"),
        )
        .option("--iterations <n>", "stop after this many updates", positiveInt("--iterations"))
        .option("--prometheus <url>", "fleet mode: read through this Prometheus server")
        .option("--selector <selector>", "fleet mode: series selector, e.g. '{job=\"vllm\"}'"),
    ),
  ).action(async (...args: any[]) => {
    const [url, o] = args as [string | undefined, Record<string, any>];
    if (o.prometheus && url) throw new UsageError("give a metrics URL or --prometheus, not both");
    const label = o.prometheus ? `${o.prometheus} ${o.selector ?? ""}`.trim() : (url ?? "");
    const format = { panel: (f: WatchFrame) => formatWatchPanel(f, label), line: formatWatchLine };
    await liveView(o, format, async (signal, onFrame) => {
      if (o.prometheus)
        await fleetWatch({
          prometheusUrl: o.prometheus,
          selector: o.selector,
          windowMs: o.window,
          intervalMs: o.interval,
          iterations: o.iterations,
          timeoutMs: o.timeout,
          signal,
          onFrame,
        });
      else {
        if (!url) throw new UsageError("metrics watch needs a URL (or --prometheus URL --selector …)");
        await watchMetrics(url, {
          ...fetchOpts(o),
          intervalMs: o.interval,
          windowMs: o.window,
          iterations: o.iterations,
          signal,
          onFrame,
        });
      }
    });
  });
}
