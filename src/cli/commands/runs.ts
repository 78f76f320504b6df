// `inferscope runs list | show ID | compare ID ID | export ID | push ID`: the run store from the command line.
import { writeFileSync } from "node:fs";
import type { Command } from "@commander-js/extra-typings";
import Table from "cli-table3";
import { UsageError } from "../../errors.ts";
import { fmt } from "../../experiment/ab.ts";
import { checkRunStore } from "../../input-file.ts";
import { claimOutput, type OutputClaim } from "../../output-file.ts";
import {
  checkExportFormat,
  compareRuns,
  exportFiles,
  exportTables,
  listRunsView,
  openStore,
  pushOtlpMetrics,
  pushRemoteWrite,
  type Store,
  showRun,
} from "../../store/index.ts";
import { emit, withCommon } from "../common.ts";
import { countArg } from "./experiment-args.ts";

function withStore<T>(db: string | undefined, fn: (s: Store) => T): T {
  // Reading commands never create a store, nor turn some other file (even an empty one) into one.
  checkRunStore("--db", db, { mustExist: true });
  const s = openStore(db);
  let result: T;
  try {
    result = fn(s);
  } catch (e) {
    s.close();
    throw e;
  }
  // An async reader keeps the store open until it settles.
  if (result instanceof Promise) return result.finally(() => s.close()) as T;
  s.close();
  return result;
}

// Every kind a command saves (saveRun): ab, sweep (three), bench, bench --find-capacity, study, tune.
const RUN_KINDS = ["ab", "sweep-lengths", "sweep-concurrency", "sweep-rate", "bench", "capacity", "study", "tune"];

const dbOpt = <C extends Command<any, any, any>>(c: C) =>
  withCommon(c).option("--db <path>", "run store (default ~/.inferscope/runs.db)");

export function register(program: Command): void {
  const runs = program.command("runs").description("list, show, compare, export and push saved runs");
  dbOpt(
    runs
      .command("list")
      .description("saved runs, newest first")
      .option(
        "--kind <kind>",
        "only runs of this kind (ab, sweep-lengths, sweep-concurrency, sweep-rate, bench, capacity, study, tune)",
      )
      .option("--limit <n>", "at most this many (default 50)", countArg("--limit", 1, 1_000_000)),
  ).action((...args: any[]) => {
    const o = args.at(-2);
    if (o.kind !== undefined && !RUN_KINDS.includes(o.kind))
      throw new UsageError(`--kind: unknown run kind "${o.kind}" (one of ${RUN_KINDS.join(", ")})`);
    const rows = withStore(o.db, (s) => listRunsView(s, { kind: o.kind, limit: o.limit ?? 50 }));
    emit(rows, o, (rs) => {
      if (!rs.length) return "no runs saved yet";
      const t = new Table({
        head: ["id", "kind", "status", "created", "blocks", "requests", "what"],
        style: { head: [], border: [] },
      });
      for (const r of rs)
        t.push([r.id, r.kind, r.status, r.createdAt.replace("T", " ").slice(0, 19), r.blocks, r.requests, r.label]);
      return t.toString();
    });
  });
  dbOpt(
    runs.command("show").description("one run: configuration, environment, blocks, summaries").argument("<id>"),
  ).action((...args: any[]) => {
    const id = args[0] as string;
    const o = args.at(-2);
    const d = withStore(o.db, (s) => showRun(s, id));
    emit(d, o, (x) => {
      const out = [
        `${x.run.id}  ${x.run.kind}  ${x.run.status}`,
        `created ${x.run.createdAt}${x.run.finishedAt ? `, finished ${x.run.finishedAt}` : ""}`,
      ];
      if (x.run.error) out.push(`error: ${x.run.error}`);
      out.push(`config: ${JSON.stringify(x.run.config)}`);
      out.push(`environment: ${JSON.stringify(x.run.environment)}`);
      if (x.blocks.length) {
        const t = new Table({
          head: ["block", "variant", "status", "requests", "mean TPOT (ms)", "error"],
          style: { head: [], border: [] },
        });
        for (const b of x.blocks) {
          const s = (b.summary ?? {}) as Record<string, number>;
          t.push([
            b.index,
            b.variant,
            b.status,
            s.requests ?? "",
            s.meanTpotMs != null ? fmt(s.meanTpotMs) : "",
            (b.error ?? "").split("\n")[0],
          ]);
        }
        out.push(t.toString());
      }
      out.push(`${x.requestCount} requests stored; summaries: ${Object.keys(x.summaries).join(", ") || "none"}`);
      const ab = x.summaries.ab as { verdicts?: string[] } | undefined;
      if (ab?.verdicts) for (const v of ab.verdicts) out.push(`verdict: ${v}`);
      return out.join("\n");
    });
  });
  dbOpt(
    runs
      .command("compare")
      .description("compare two runs' requests: TPOT, TTFT, E2E with bootstrap CIs and tests")
      .argument("<a>")
      .argument("<b>")
      .option("--variant <name>", "only this variant's blocks, in both runs")
      .option("--a-variant <name>", "only this variant's blocks in run a")
      .option("--b-variant <name>", "only this variant's blocks in run b"),
  ).action((...args: any[]) => {
    const [a, b] = args as [string, string];
    const o = args.at(-2);
    const c = withStore(o.db, (s) =>
      compareRuns(s, a, b, { variantA: o.aVariant ?? o.variant, variantB: o.bVariant ?? o.variant }),
    );
    emit(c, o, (x) => {
      const t = new Table({
        head: [
          "metric (ms)",
          x.a.variant ? `${x.a.id} ${x.a.variant}` : x.a.id,
          x.b.variant ? `${x.b.id} ${x.b.variant}` : x.b.id,
          "a − b [95 % CI]",
          "Welch p",
          "MWU p",
        ],
        style: { head: [], border: [] },
      });
      for (const [k, m] of Object.entries(x.metrics)) {
        if (!m) {
          t.push([k, "n/a", "n/a", "not enough data", "", ""]);
          continue;
        }
        t.push([
          k,
          `${fmt(m.a.mean)} (n=${m.a.n})`,
          `${fmt(m.b.mean)} (n=${m.b.n})`,
          `${fmt(m.diff.estimate)} [${fmt(m.diff.lo)}, ${fmt(m.diff.hi)}]${m.detected ? "" : " (n.s.)"}`,
          m.welch.p.toPrecision(2),
          m.mannWhitney.p.toPrecision(2),
        ]);
      }
      return t.toString();
    });
  });
  dbOpt(
    runs
      .command("export")
      .description("a run's per-request records and summary as json, jsonl, csv or parquet (schema: docs/export.md)")
      .argument("<id>")
      .option("--format <fmt>", "json, jsonl, csv or parquet (default json)")
      .option(
        "-o, --out <file>",
        "write here instead of stdout; csv and parquet write FILE.requests.EXT and FILE.summary.EXT",
      )
      .option("--output <file>", "the same as --out"),
  ).action(async (...args: any[]) => {
    const id = args[0] as string;
    const o = args.at(-2);
    const format = checkExportFormat(o.format ?? "json");
    const files = await withStore(o.db, (s) => exportFiles(s, id, format, o.out ?? o.output));
    const written: string[] = [];
    const claims: OutputClaim[] = [];
    try {
      for (const f of files) {
        if (f.path === null) {
          process.stdout.write(f.data);
          continue;
        }
        // Claimed like every output file: a directory is refused, a reader never sees half a file.
        const c = claimOutput(f.path, "--out");
        claims.push(c);
        writeFileSync(c.tempPath, f.data);
        written.push(f.path);
      }
      for (const c of claims) c.commit();
    } catch (e) {
      for (const c of claims) c.abort();
      throw e;
    }
    if (o.json && written.length) process.stdout.write(`${JSON.stringify({ files: written })}\n`);
    else for (const w of written) process.stderr.write(`wrote ${w}\n`);
  });
  dbOpt(
    runs
      .command("push")
      .description("send a run's summary to Prometheus (remote write) or an OTLP collector (docs/export.md)")
      .argument("<id>")
      .option("--prometheus-remote-write <url>", "a remote-write receiver, e.g. http://127.0.0.1:9090/api/v1/write")
      .option("--otlp-metrics <url>", "an OTLP/HTTP metrics endpoint (a bare origin gets /v1/metrics)")
      .option("--timeout <s>", "seconds to wait for each receiver (default 10)", countArg("--timeout", 1, 3600)),
  ).action(async (...args: any[]) => {
    const id = args[0] as string;
    const o = args.at(-2);
    if (!o.prometheusRemoteWrite && !o.otlpMetrics)
      throw new UsageError("runs push needs --prometheus-remote-write URL, --otlp-metrics URL, or both");
    const timeoutMs = (o.timeout ?? 10) * 1000;
    const tables = withStore(o.db, (s) => exportTables(s, id));
    const out: Record<string, unknown> = { runId: tables.runId };
    if (o.prometheusRemoteWrite)
      out.prometheusRemoteWrite = await pushRemoteWrite(o.prometheusRemoteWrite, tables, { timeoutMs });
    if (o.otlpMetrics) out.otlpMetrics = await pushOtlpMetrics(o.otlpMetrics, tables, { timeoutMs });
    emit(out, o, (x) => {
      const lines: string[] = [];
      const rw = x.prometheusRemoteWrite as { url: string; series: number } | undefined;
      const ot = x.otlpMetrics as { url: string; points: number } | undefined;
      if (rw) lines.push(`${x.runId}: ${rw.series} series sent to ${rw.url}`);
      if (ot) lines.push(`${x.runId}: ${ot.points} histogram points sent to ${ot.url}`);
      return lines.join("\n");
    });
  });
}
