// `inferscope bench`: thin wrapper over runBench / runSweep / runSelfTest. Flag names follow vllm bench serve.
import type { Command } from "@commander-js/extra-typings";
import { Option } from "@commander-js/extra-typings";
import Table from "cli-table3";
import { createLogUpdate } from "log-update";
import { InputError, InterruptedError, TargetError, UsageError } from "../../errors.ts";
import { checkInputFile, checkRunStore } from "../../input-file.ts";
import { type CapacityResult, DEFAULT_CAPACITY_MAX_TIME_MS, minRunRequests } from "../../load/capacity.ts";
import type { BenchTrialDetail } from "../../load/capacity-bench.ts";
import { formatConsole } from "../../load/console.ts";
import { checkWorkers, MAX_PREFIX_GROUPS, MAX_REQUESTS, MAX_TOKENS } from "../../load/limits.ts";
import { formatReplay } from "../../load/replay.ts";
import { type BenchResult, checkWritable, isTimedReplay, runBench, toVllmJson } from "../../load/runner.ts";
import { formatSelfTest, runSelfTest } from "../../load/selftest.ts";
import type { SampledServer } from "../../load/server-sampler.ts";
import { computeSlices, formatSlices, type SliceResult } from "../../load/slices.ts";
import {
  diagnoseSlices,
  fmtRate,
  runSampled,
  runSweep,
  SWEEP_SERVER_SAMPLE_MS,
  type SweepResult,
} from "../../load/sweep.ts";
import type {
  BenchOptions,
  BenchProgress,
  DatasetName,
  Endpoint,
  GoodputSlo,
  PercentileMetric,
  SessionSpec,
  Stats,
} from "../../load/types.ts";
import { benchWithSpans, type SpanJoinReport } from "../../otlp/bench.ts";
import { parseOtlpFlags } from "../../otlp/receiver.ts";
import { formatSpanJoin, spanJoinJson } from "../../otlp/render.ts";
import { claimOutput, type OutputClaim } from "../../output-file.ts";
import { parseTelemetrySpec } from "../../telemetry/spec.ts";
import {
  API_KEY_HELP,
  durationArg,
  emit,
  interruptOnSignals,
  jsonReplacer,
  numberArg,
  progressEnabled,
  resolveApiKey,
  safeLine,
  terminalSafe,
  withCommon,
} from "../common.ts";
import { OTLP_GRPC_HELP, OTLP_RECEIVER_HELP } from "./experiment-args.ts";

const num = (name: string) => (v: string) => {
  const n = Number(v);
  if (v.trim() === "" || Number.isNaN(n)) throw new UsageError(`${name}: not a number: "${v}"`);
  return n;
};
// Counts that size memory (records, prompt text, sockets) have a range; see src/load/limits.ts.
const count = (name: string, min: number, max: number) => numberArg(name, { integer: true, min, max });
const rateValue = (v: string) =>
  /^inf(inity)?$/i.test(v.trim()) ? Number.POSITIVE_INFINITY : numberArg("--request-rate", { above: 0 })(v);
const list =
  <T>(parse: (s: string) => T) =>
  (v: string) =>
    v
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean)
      .map(parse);

/** vLLM's `--goodput ttft:200 tpot:50` (any subset of ttft, tpot, e2el; ms). */
export function parseGoodput(items: string[], sep: ":" | "=" = ":"): GoodputSlo {
  const out: GoodputSlo = {};
  for (const item of items.flatMap((s) => s.split(sep === "=" ? "," : /\s+/)))
    if (item.trim()) addSlo(out, item, sep, "");
  return out;
}

/**
 * `--slo`: the bounds as `ttft:200,tpot:50` (vLLM's separator, as tune's --slo) or `ttft=200,tpot=50`, items
 * split by commas or spaces.
 */
export function parseSlo(text: string): GoodputSlo {
  const out: GoodputSlo = {};
  const items = text.split(/[\s,]+/).filter(Boolean);
  if (items.length === 0) throw new UsageError("--slo is empty: expected e.g. ttft:200,tpot:50");
  for (const item of items) addSlo(out, item, ":=", "--slo: ");
  return out;
}

/** One SLO item, NAME<sep>MS with any separator in `seps`: the one grammar of --goodput and --slo. */
function addSlo(out: GoodputSlo, item: string, seps: string, prefix: string): void {
  const [k, v, ...rest] = item.split(new RegExp(`[${seps}]`));
  const val = Number(v);
  if (rest.length || v === undefined || v.trim() === "" || Number.isNaN(val) || val < 0)
    throw new UsageError(
      `${prefix}bad SLO "${item}": expected ${[...seps].map((s) => `NAME${s}MS`).join(" or ")} with a value ≥ 0 (e.g. ttft${seps[0]}200)`,
    );
  const key = k!.trim().toLowerCase();
  if (key !== "ttft" && key !== "tpot" && key !== "e2el" && key !== "itl")
    throw new UsageError(`${prefix}bad SLO "${item}": the metric must be one of ttft, tpot, e2el, itl`);
  out[key] = val;
}

/**
 * `--goodput` holds either vLLM's SLO list (`ttft:200 tpot:50`) or, as one bare number, the target share of
 * requests that must meet the --slo bounds (0.99, or 99%): a value with no `:` is a share, anything else an SLO.
 */
export function parseGoodputFlag(items: string[]): { slo: GoodputSlo } | { target: number } {
  const one = items.length === 1 ? items[0]!.trim() : "";
  const m = /^(\d*\.?\d+)(%?)$/.exec(one);
  if (m) {
    const v = Number(m[1]) / (m[2] ? 100 : 1);
    if (!(v > 0 && v <= 1))
      throw new UsageError(`--goodput ${one}: a target share must be in (0, 1] (or 0–100 %), e.g. --goodput 0.99`);
    return { target: v };
  }
  return { slo: parseGoodput(items, ":") };
}

/** --multi-turn (ShareGPT), --sessions N (synthetic) or nothing (a trace's session_id needs no flag). */
function sessionSpec(o: any): SessionSpec | undefined {
  if (o.multiTurn && o.sessions !== undefined)
    throw new UsageError("give --multi-turn (ShareGPT) or --sessions (synthetic), not both");
  const conc = o.sessionConcurrency;
  if (o.multiTurn) {
    if (o.datasetName !== "sharegpt")
      throw new UsageError(
        "--multi-turn reads ShareGPT conversations: add --dataset-name sharegpt --dataset-path FILE",
      );
    return { source: "sharegpt", concurrency: conc, thinkMs: o.thinkTime, maxSessions: o.numPrompts };
  }
  if (o.sessions !== undefined)
    return {
      source: "synthetic",
      sessions: o.sessions,
      turns: o.sessionTurns,
      inputLen: o.sessionInputLen,
      outputLen: o.sessionOutputLen,
      thinkMs: o.thinkTime ?? 0,
      thinkDist: o.thinkTimeDist,
      concurrency: conc,
    };
  if (conc !== undefined || o.thinkTime !== undefined) return { source: "trace", concurrency: conc };
  return undefined;
}

function defaultResultName(o: BenchOptions, model: string): string {
  const d = new Date();
  const p = (n: number) => String(n).padStart(2, "0");
  const ts = `${d.getFullYear()}${p(d.getMonth() + 1)}${p(d.getDate())}-${p(d.getHours())}${p(d.getMinutes())}${p(d.getSeconds())}`;
  const rate =
    o.requestRate === undefined || o.requestRate === Number.POSITIVE_INFINITY ? "inf" : String(o.requestRate);
  const conc = o.maxConcurrency ?? o.concurrency;
  const base = o.label ?? (o.endpoint === "/v1/chat/completions" ? "openai-chat" : "openai");
  return `${base}-${rate}qps${conc ? `-concurrency${conc}` : ""}-${model.split("/").pop() || "model"}-${ts}.json`;
}

function progressPrinter(enabled: boolean) {
  if (!enabled) return { onProgress: undefined, done: () => {} };
  const log = createLogUpdate(process.stderr);
  let lastTok = 0;
  let lastT = 0;
  const onProgress = (p: BenchProgress) => {
    const dt = (p.elapsedMs - lastT) / 1000;
    const rate = dt > 0 ? (p.outputTokens - lastTok) / dt : 0;
    lastTok = p.outputTokens;
    lastT = p.elapsedMs;
    log(
      `bench: ${p.done}${p.total ? `/${p.total}` : ""} done, ${p.failed} failed, ${p.inFlight} in flight, ` +
        `${rate.toFixed(0)} output tok/s, ${(p.elapsedMs / 1000).toFixed(1)} s`,
    );
  };
  return { onProgress, done: () => log.clear() };
}

const ms = (s: Stats, x: number) => (s.count === 0 ? "n/a" : x.toFixed(2));

/** The slices' --json fields: `slices[]` beside the run's own, with the width used and the assignment rule. */
function sliceFields(sl: SliceResult): Record<string, unknown> {
  return { slice_width_ms: sl.width_ms, slice_rule: sl.rule, slice_notes: sl.notes, slices: sl.slices };
}

function sliceJson(res: BenchResult, widthMs: number, opts: BenchOptions): Record<string, unknown> {
  return sliceFields(computeSlices(res.requests, { widthMs, percentiles: res.percentiles, goodput: opts.goodput }));
}

/** Which limit bound each slice (only the ones that saturated), and the lowest offered rate where one did. */
function sliceLimitsText(sl: SliceResult, d: ReturnType<typeof diagnoseSlices>): string {
  const rows = d.levels.flatMap((l, i) => {
    const x = sl.slices[i]!;
    const what = l.binding.length
      ? l.binding.map((b) => b.evidence).join("; ")
      : l.unknown
        ? `unknown: ${l.unknown}`
        : null;
    return what
      ? [
          `  slice ${i} (${x.start_s.toFixed(1)}–${x.end_s.toFixed(1)} s, ${fmtRate(x.arrival_rate)} req/s offered): ${what}`,
        ]
      : [];
  });
  if (!rows.length) return "Binding limit per slice: none saturated.";
  return ["Binding limit per slice (the server's /metrics inside each):", ...rows].join("\n");
}

const sloText = (slo: GoodputSlo) =>
  Object.entries(slo)
    .map(([k, v]) => `${k} ≤ ${v} ms`)
    .join(", ");

/** The capacity search's result and runs as text. */
export function capacityText(
  c: CapacityResult,
  slo: GoodputSlo,
  unit = "req/s",
  knee: SweepResult["knee"] = null,
): string {
  const L: string[] = [];
  const what = unit === "req/s" ? "rate" : "speed";
  const share = `${(100 * c.target).toFixed(c.target >= 0.999 ? 2 : 1)} %`;
  if (c.capacity !== null && c.interval)
    L.push(
      `Capacity: ${fmtRate(c.capacity)} ${unit} [95 % interval ${fmtRate(c.interval.lo)}, ${fmtRate(c.interval.hi)}] with ${share} of requests meeting ${sloText(slo)}`,
    );
  else if (c.lowerBound !== null)
    L.push(
      `Capacity: at least ${fmtRate(c.lowerBound)} ${unit} (every ${what} tried met ${share} of requests within ${sloText(slo)})`,
    );
  else if (c.stopped === "all-failed" && c.failure)
    L.push(
      `Capacity: not found: every request of run ${c.failure.run + 1} at ${fmtRate(c.failure.load)} ${unit} failed${c.failure.error ? `: ${c.failure.error}` : ""}`,
    );
  else if (c.stopped === "too-small") {
    const r = c.runs[c.runs.length - 1]!;
    L.push(
      `Capacity: inconclusive: run ${r.index + 1} at ${fmtRate(r.load)} ${unit} finished ${r.total} request${r.total === 1 ? "" : "s"}, too few to judge a ${share} share (at least ${c.minRunRequests} a run)`,
    );
  } else
    L.push(
      `Capacity: not found: no ${what} tried met ${share} of requests within ${sloText(slo)}${c.stopped === "below-min" ? "" : ` (stopped: ${c.stopped})`}`,
    );
  L.push(
    `Bracket: pass ${c.bracket.pass === null ? "none" : fmtRate(c.bracket.pass)}, fail ${c.bracket.fail === null ? "none" : fmtRate(c.bracket.fail)}; ${c.runs.length} runs, stopped: ${c.stopped}`,
  );
  const t = new Table({
    head: ["run", "phase", `${unit} asked`, "good/total", "good %", "req/s done", "TTFT p", "TPOT p", "limit"],
    style: { head: [], border: [] },
  });
  for (const r of c.runs) {
    const d = r.detail as BenchTrialDetail | undefined;
    t.push([
      r.index + 1,
      r.phase,
      fmtRate(r.load),
      `${r.good}/${r.total}`,
      (100 * r.share).toFixed(1),
      d ? d.request_throughput.toFixed(2) : "n/a",
      d?.ttft_p_ms != null ? d.ttft_p_ms.toFixed(1) : "n/a",
      d?.tpot_p_ms != null ? d.tpot_p_ms.toFixed(1) : "n/a",
      d?.limits === undefined ? "-" : d.limits.length ? d.limits.join(", ") : "none",
    ]);
  }
  L.push(t.toString());
  if (knee) L.push(`Binding limit from ${fmtRate(knee.level)} ${unit}: ${knee.evidence.join("; ")}`);
  L.push(`Method: ${c.method}.`);
  for (const n of c.notes) L.push(`note: ${n}`);
  return L.join("\n");
}

const pointName = (p: SweepResult["points"][number]) =>
  p.kind === "throughput" ? "max throughput" : `${p.kind} ${p.kind === "rate" ? fmtRate(p.value) : p.value}`;

/** The point's binding limit(s), "unknown" when saturated with none named, "-" when nothing binds or was sampled. */
function limitCell(p: SweepResult["points"][number]): string {
  const d = p.diagnosis;
  if (!d) return "-";
  if (d.binding.length) return d.binding.map((b) => b.limit).join(", ");
  return d.unknown ? "unknown" : "-";
}

export function sweepTable(s: SweepResult): string {
  const t = new Table({
    head: [
      "point",
      "ok",
      "fail",
      "req/s",
      "out tok/s",
      "TTFT mean",
      "TPOT mean",
      "ITL mean",
      "ITL p99",
      "client",
      "limit",
    ],
    style: { head: [], border: [] },
  });
  for (const p of s.points) {
    const m = p.result.summary;
    const ins = m.inferscope;
    t.push([
      pointName(p),
      m.completed,
      m.failed,
      m.request_throughput.toFixed(2),
      m.output_throughput.toFixed(1),
      // A level where every request failed measured no latency: n/a, not 0.00.
      ms(ins.ttft_ms, ins.ttft_ms.mean),
      ms(ins.tpot_ms, ins.tpot_ms.mean),
      ms(ins.itl_ms, ins.itl_ms.mean),
      ms(ins.itl_ms, ins.itl_ms.percentiles.p99 ?? ins.itl_ms.max),
      p.result.client.saturated ? "SATURATED" : "ok",
      limitCell(p),
    ]);
  }
  let out = t.toString();
  if (s.stoppedEarly) out += `\nstopped: ${s.stoppedEarly}`;
  if (s.knee) out += `\nknee: ${s.knee.evidence.join("; ")}`;
  for (const p of s.points)
    if (p.diagnosis?.unknown) out += `\n${pointName(p)}: saturated, limit unknown: ${p.diagnosis.unknown}`;
  return out;
}

export function register(program: Command): void {
  const cmd = program
    .command("bench")
    .description("streaming load generator for OpenAI-compatible servers (vllm bench serve's flags and results)")
    .option("--base-url <url>", "server root URL", "http://127.0.0.1:8000")
    .option("--model <name>", "model name (default: first of GET /v1/models)")
    .addOption(
      new Option("--endpoint <path>", "API endpoint")
        .choices(["/v1/completions", "/v1/chat/completions"] as const)
        .default("/v1/completions" as const),
    )
    .addOption(
      new Option("--dataset-name <name>", "prompt source")
        .choices(["random", "sharegpt", "jsonl", "shared-prefix", "mooncake", "azure"] as const)
        .default("random" as const),
    )
    .option("--dataset-path <path>", "ShareGPT JSON, JSONL prompts or trace, Mooncake JSONL or Azure CSV file")
    .option(
      "--replay-speed <n>",
      "trace replay: N× the trace's pace (timestamped datasets replay on their own schedule)",
      numberArg("--replay-speed", { above: 0 }),
    )
    .option(
      "--start-offset <d>",
      "trace replay: start this far into the trace (e.g. 5m)",
      durationArg("--start-offset"),
    )
    .option(
      "--max-requests <n>",
      "trace replay: at most N of the trace's requests",
      count("--max-requests", 1, MAX_REQUESTS),
    )
    .option("--multi-turn", "ShareGPT: each conversation is a session; each turn resends the history")
    .option(
      "--sessions <n>",
      "synthetic multi-turn sessions (with --session-turns, …)",
      count("--sessions", 1, 100_000),
    )
    .option("--session-turns <n>", "synthetic sessions: turns each", count("--session-turns", 1, 1000), 4)
    .option(
      "--session-input-len <n>",
      "synthetic sessions: tokens of each new user message",
      count("--session-input-len", 1, MAX_TOKENS),
      128,
    )
    .option(
      "--session-output-len <n>",
      "synthetic sessions: max_tokens of each reply",
      count("--session-output-len", 1, MAX_TOKENS),
      64,
    )
    .option(
      "--think-time <d>",
      "sessions: mean pause between a reply and the next turn (e.g. 2s)",
      durationArg("--think-time"),
    )
    .addOption(
      new Option("--think-time-dist <dist>", "sessions: think-time distribution")
        .choices(["constant", "exponential"] as const)
        .default("constant" as const),
    )
    .option(
      "--session-concurrency <n>",
      "sessions in flight at once (default all)",
      count("--session-concurrency", 1, MAX_REQUESTS),
    )
    .option("--num-prompts <n>", "requests to measure (default 100)", count("--num-prompts", 1, MAX_REQUESTS))
    .option("--duration <d>", "send for this long instead of a count (e.g. 30s)", durationArg("--duration"))
    .option(
      "--random-input-len <n>",
      "input tokens per random prompt",
      count("--random-input-len", 1, MAX_TOKENS),
      1024,
    )
    .option(
      "--random-output-len <n>",
      "output tokens (max_tokens) per request",
      count("--random-output-len", 1, MAX_TOKENS),
      128,
    )
    .option("--random-range-ratio <r>", "spread lengths uniformly in [L(1-r), L(1+r)]", num("--random-range-ratio"), 0)
    .option("--prefix-groups <n>", "shared-prefix: number of prefixes", count("--prefix-groups", 1, MAX_PREFIX_GROUPS))
    .option("--prefix-len <n>", "shared-prefix: prefix tokens", count("--prefix-len", 0, MAX_TOKENS))
    .option("--request-rate <r>", "requests/s (inf = all at once), or a list for a sweep", list(rateValue))
    .option("--rate <r>", "alias of --request-rate", list(rateValue))
    .option("--burstiness <b>", "gamma shape of arrival gaps: 1 Poisson, <1 burstier, inf constant", (v: string) =>
      /^inf(inity)?$/i.test(v.trim()) ? Number.POSITIVE_INFINITY : numberArg("--burstiness", { above: 0 })(v),
    )
    .option(
      "--max-concurrency <n>",
      "cap on in-flight requests (open loop; the wait is client queue time)",
      count("--max-concurrency", 1, MAX_REQUESTS),
    )
    .option(
      "--concurrency <n>",
      "closed loop with N users, or a list for a sweep (1,2,4,8)",
      list(count("--concurrency", 1, MAX_REQUESTS)),
    )
    .addOption(
      new Option("--sweep <mode>", "automatic sweep: synchronous, max throughput, rates between").choices([
        "auto",
      ] as const),
    )
    .option("--seed <n>", "seed for prompts and arrivals", numberArg("--seed", { integer: true }), 0)
    .option("--warmup <n>", "warm-up requests, excluded from metrics", count("--warmup", 0, MAX_REQUESTS), 0)
    .option("--num-warmups <n>", "alias of --warmup", count("--num-warmups", 0, MAX_REQUESTS))
    .option("--ignore-eos", "send ignore_eos so every request generates max_tokens (default on for traces)")
    .option("--no-ignore-eos", "traces: do not send ignore_eos")
    .option("--percentile-metrics <list>", "metrics printed with percentiles", "ttft,tpot,itl")
    .option(
      "--metric-percentiles <list>",
      "percentiles to report (e.g. 50,90,99)",
      list(numberArg("--metric-percentiles", { above: 0, max: 100 })),
    )
    .option(
      "--percentiles <list>",
      "alias of --metric-percentiles",
      list(numberArg("--percentiles", { above: 0, max: 100 })),
    )
    .option(
      "--goodput <slo...>",
      "SLOs as vLLM: ttft:200 tpot:50 e2el:1000 (ms); or one bare share (0.99) with --slo: the target of --find-capacity",
    )
    .option("--slo <list>", "SLOs as ttft:200,tpot:50 or ttft=200,tpot=50 (ms)")
    .option(
      "--slice <d>",
      "also report per time slice of this width (e.g. 30s): rates, goodput, latency percentiles",
      durationArg("--slice"),
    )
    .option("--find-capacity", "search the highest request rate at which the --goodput share of requests meets --slo")
    .option(
      "--capacity-start <r>",
      "first rate the capacity search tries (default: --request-rate, else 1)",
      numberArg("--capacity-start", { above: 0 }),
    )
    .option(
      "--capacity-max-runs <n>",
      "capacity search: at most this many bench runs",
      count("--capacity-max-runs", 2, 1000),
      30,
    )
    .option(
      "--capacity-max-time <d>",
      `capacity search: the whole search's time bound; each run is cut at what is left of it (default ${DEFAULT_CAPACITY_MAX_TIME_MS / 60_000}m)`,
      durationArg("--capacity-max-time"),
    )
    .option(
      "--capacity-replicates <n>",
      "capacity search: runs per load next to the boundary",
      count("--capacity-replicates", 1, 100),
      3,
    )
    .option(
      "--capacity-tolerance <f>",
      "capacity search: stop when the bracket's hi/lo ≤ 1 + f",
      numberArg("--capacity-tolerance", { above: 0, max: 10 }),
      0.05,
    )
    .option("--save-result [path]", "write vLLM-compatible result JSON (default name as vLLM's)")
    .option("--save-detailed", "include per-request lists (ttfts, itls, …) in the result JSON")
    .option("--records <path>", "stream per-request records (JSONL) here")
    .option("--label <text>", "label stored in the result")
    .option("--db <path>", "also save the run to this run store (see `inferscope runs`)")
    .option("--api-key <key>", API_KEY_HELP.key)
    .option("--api-key-file <path>", API_KEY_HELP.file)
    .option("--api-key-env <name>", API_KEY_HELP.env)
    .option(
      "--stall-timeout <d>",
      "fail a stream with no data (tokens) for this long; keepalive comments do not count",
      durationArg("--stall-timeout"),
      60_000,
    )
    .option("--connect-timeout <d>", "connect timeout", durationArg("--connect-timeout"), 5000)
    .option("--no-continuous-usage", "do not ask for per-chunk usage (continuous_usage_stats)")
    .option("--extra-body <json>", "JSON merged into every request body")
    .option("--no-server-metrics", "do not scrape /metrics before and after")
    .option(
      "--workers <n>",
      "worker threads to spread streams over, at most one per core (auto: one per 256 streams; a timed replay: one per 4 requests due at one instant; one loop on < 4 cores)",
      (v: string) => {
        if (v === "auto") return "auto" as const;
        const n = Number(v);
        if (v.trim() === "" || !Number.isInteger(n) || n < 1)
          throw new UsageError(`--workers must be an integer ≥ 1 or auto, got ${v}`);
        return checkWorkers(n);
      },
      "auto" as const,
    )
    .addOption(
      new Option("--http-client <name>", "HTTP client: h1 (ours; http only) or undici; auto picks h1 for http")
        .choices(["auto", "h1", "undici"])
        .default("auto"),
    )
    .option(
      "--telemetry <source>",
      "hardware counters over the measured window: auto, none, nvidia-smi, dcgm:URL, prometheus:URL, amd-smi, cpu (optional @interval, e.g. nvidia-smi@200ms)",
      "auto",
    )
    .option(
      "--telemetry-interval <d>",
      "sampling interval of the telemetry source (e.g. 100ms, 1s)",
      durationArg("--telemetry-interval"),
    )
    .option("--otlp-receiver <[host:]port>", OTLP_RECEIVER_HELP)
    .option("--otlp-grpc-receiver <[host:]port>", OTLP_GRPC_HELP)
    .option(
      "--otlp-wait <d>",
      "after the run, wait up to this long for spans the engine has not sent yet (vLLM batches every 5 s)",
      durationArg("--otlp-wait"),
    )
    .option("--self-test", "measure this client's ceiling against `inferscope sim --speed zero`");
  // Too many options for extra-typings' inference; the parsers above do the validation.
  withCommon(cmd).action(async (...args: any[]) => {
    const o = args[args.length - 2] as any;
    if (o.selfTest) {
      const { signal, dispose } = interruptOnSignals();
      try {
        const r = await runSelfTest({ signal });
        emit(r, o, formatSelfTest);
        if (r.partial)
          throw new InterruptedError(
            `${(signal.reason as Error)?.message ?? "interrupted"}: the self-test's sim is stopped; ${r.points.length} of 3 levels measured (printed above)${r.delay ? "" : "; the added-delay check did not run"}`,
          );
      } finally {
        dispose();
      }
      return;
    }
    const rates = o.requestRate ?? o.rate;
    if (o.requestRate && o.rate) throw new UsageError("give --request-rate or --rate, not both");
    const metrics = o.percentileMetrics
      .split(",")
      .map((s: string) => s.trim())
      .filter(Boolean);
    for (const m of metrics)
      if (!["ttft", "tpot", "itl", "e2el"].includes(m))
        throw new UsageError(`--percentile-metrics: unknown metric "${m}" (ttft, tpot, itl, e2el)`);
    let goodput: GoodputSlo | undefined;
    let target: number | undefined;
    const g = o.goodput ? parseGoodputFlag(o.goodput) : undefined;
    if (g && "slo" in g && o.slo)
      throw new UsageError("give the SLOs once: --goodput ttft:200 tpot:50 or --slo ttft:200,tpot:50", {
        hint: "with --slo, --goodput takes the target share (e.g. --goodput 0.99)",
      });
    if (g && "slo" in g) goodput = g.slo;
    if (g && "target" in g) {
      if (!o.slo)
        throw new UsageError(
          `--goodput ${o.goodput[0]} is a target share: give the SLOs with --slo (e.g. ttft:200,tpot:50)`,
        );
      target = g.target;
    }
    if (o.slo) goodput = parseSlo(o.slo);
    // Parsed before anything is sent; a sweep or search would mix several runs' spans.
    const otlpListen = parseOtlpFlags(o);
    if (otlpListen && (o.findCapacity || o.sweep || (o.concurrency?.length ?? 0) > 1 || (rates?.length ?? 0) > 1))
      throw new UsageError("--otlp-receiver joins the spans of a single run: drop --sweep, --find-capacity and lists");
    if (o.findCapacity) {
      if (!goodput || Object.keys(goodput).length === 0)
        throw new UsageError(
          "--find-capacity needs the SLOs: --slo ttft:MS,tpot:MS (and --goodput SHARE, default 0.99)",
        );
      if (o.concurrency || o.sweep || (rates?.length ?? 0) > 1)
        throw new UsageError(
          "--find-capacity searches the request rate itself: drop --concurrency, --sweep and rate lists",
        );
      if (o.saveResult !== undefined || o.records)
        throw new UsageError("--save-result and --records apply to a single run, not a capacity search (use --json)");
      // Runs too small to judge the target share would let a few lucky requests decide the search.
      const share = target ?? 0.99;
      const need = minRunRequests(share);
      if (!Number.isFinite(need))
        throw new UsageError(
          `--goodput ${o.goodput[0]}: a capacity search cannot judge a share of 100 % from runs of any size`,
          { hint: `give a share below 1, e.g. --goodput 0.999 (needs ${minRunRequests(0.999)} requests a run)` },
        );
      if (o.numPrompts !== undefined && o.numPrompts < need)
        throw new UsageError(
          `--num-prompts ${o.numPrompts} is too few to judge a ${share} share: a capacity run needs at least ${need} requests`,
          {
            hint: `give --num-prompts ${need} or more, or --duration (the 95 % binomial interval of a run's share must fit inside [0, 1])`,
          },
        );
    } else {
      if (target !== undefined)
        throw new UsageError(`--goodput ${o.goodput[0]} (a target share) applies to --find-capacity`, {
          hint: "for vLLM's goodput give the SLOs: --goodput ttft:200 tpot:50, or --slo ttft:200,tpot:50",
        });
      for (const f of ["capacityStart", "capacityMaxTime"] as const)
        if (o[f] !== undefined)
          throw new UsageError(`--${f.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)} applies to --find-capacity`);
    }
    let extraBody: Record<string, unknown> | undefined;
    if (o.extraBody) {
      try {
        extraBody = JSON.parse(o.extraBody);
      } catch (e) {
        throw new UsageError(`--extra-body is not JSON: ${(e as Error).message}`);
      }
      // It is merged into the request object: an array or a number would be silently dropped.
      if (extraBody === null || typeof extraBody !== "object" || Array.isArray(extraBody))
        throw new UsageError(`--extra-body must be a JSON object, e.g. '{"temperature": 0}', got ${o.extraBody}`);
    }
    // Files named on the command line, and header values, before anything is sent.
    if (o.datasetPath !== undefined) checkInputFile("--dataset-path", o.datasetPath, "prompts file");
    checkRunStore("--db", o.db);
    const opts: BenchOptions = {
      baseUrl: o.baseUrl,
      model: o.model,
      endpoint: o.endpoint as Endpoint,
      apiKey: resolveApiKey(o),
      numPrompts: o.numPrompts,
      durationMs: o.duration,
      dataset: o.datasetName as DatasetName,
      datasetPath: o.datasetPath,
      randomInputLen: o.randomInputLen,
      randomOutputLen: o.randomOutputLen,
      randomRangeRatio: o.randomRangeRatio,
      prefixGroups: o.prefixGroups,
      prefixLen: o.prefixLen,
      ignoreEos: o.ignoreEos,
      replaySpeed: o.replaySpeed,
      startOffsetMs: o.startOffset,
      maxRequests: o.maxRequests,
      sessions: sessionSpec(o),
      burstiness: o.burstiness,
      maxConcurrency: o.maxConcurrency,
      seed: o.seed,
      warmup: o.numWarmups ?? o.warmup,
      percentiles: o.metricPercentiles ?? o.percentiles,
      percentileMetrics: metrics as PercentileMetric[],
      goodput,
      saveDetailed: o.saveDetailed,
      recordsPath: o.records,
      label: o.label,
      stallTimeoutMs: o.stallTimeout,
      connectTimeoutMs: o.connectTimeout,
      continuousUsage: o.continuousUsage,
      extraBody,
      noServerMetrics: !o.serverMetrics,
      workers: o.workers as number | "auto",
      transport: o.httpClient as "auto" | "h1" | "undici",
      telemetry: parseTelemetrySpec(o.telemetry, { intervalMs: o.telemetryInterval }),
    };
    const ac = interruptOnSignals();
    const claims: OutputClaim[] = [];
    const claim = (path: string, flag: string) => {
      const c = claimOutput(path, flag);
      claims.push(c);
      return c;
    };
    const progress = progressPrinter(progressEnabled(o));
    try {
      if (o.findCapacity) {
        const { findCapacity } = await import("../../load/capacity.ts");
        const { benchTrial, diagnoseTrials } = await import("../../load/capacity-bench.ts");
        // A trace replay searches its own speed (× the trace's arrival rate); anything else the request rate.
        const replay = isTimedReplay(opts);
        const unit = replay ? "× trace speed" : "req/s";
        const start =
          o.capacityStart ??
          (replay ? (opts.replaySpeed ?? 1) : rates?.[0] !== undefined && Number.isFinite(rates[0]) ? rates[0] : 1);
        const onRun = progressEnabled(o)
          ? (r: { index: number; load: number; share: number; good: number; total: number }) => {
              progress.done();
              process.stderr.write(
                `capacity: run ${r.index + 1} at ${fmtRate(r.load)} ${unit}: ${r.good}/${r.total} met the SLO (${(100 * r.share).toFixed(1)} %)\n`,
              );
            }
          : undefined;
        const knob = replay ? "replay_speed" : "request_rate";
        const share = target ?? 0.99;
        // Without a size, a rate run gets enough requests to judge the share (vLLM's default 100 is too few for 0.99).
        const sized =
          replay || opts.numPrompts !== undefined || opts.durationMs !== undefined
            ? opts
            : { ...opts, numPrompts: Math.max(100, minRunRequests(share)) };
        // --db: the search is saved as it goes, each run at a load a block with its requests.
        const rec = o.db
          ? (await import("../../load/store-run.ts")).capacityRecorder(o.db, sized, {
              knob,
              unit,
              target: share,
              start,
            })
          : null;
        let cap: Awaited<ReturnType<typeof findCapacity>>;
        // Each run also scrapes the server's gauges, so the search can say which limit bent it.
        const trial = benchTrial(
          { ...sized, requestRate: undefined },
          replay ? { kind: "replay" } : { kind: "rate" },
          goodput!,
          { signal: ac.signal, onProgress: progress.onProgress },
          rec?.run,
          SWEEP_SERVER_SAMPLE_MS,
        );
        try {
          cap = await findCapacity(
            trial,
            {
              target: share,
              start,
              replicates: o.capacityReplicates,
              maxRuns: o.capacityMaxRuns,
              maxTimeMs: o.capacityMaxTime,
              tolerance: o.capacityTolerance,
              seed: opts.seed,
            },
            {
              now: () => performance.now(),
              signal: ac.signal,
              onRun: (r) => {
                rec?.onRun(r);
                onRun?.(r);
              },
            },
          );
        } catch (e) {
          rec?.fail(e);
          throw e;
        }
        progress.done();
        if (!opts.warmup)
          cap.notes.push(
            "the runs had no warm-up requests: each run's first requests include a cold start (see --warmup)",
          );
        const { knee, frontier } = diagnoseTrials(trial, cap.runs as Array<{ detail?: BenchTrialDetail }>);
        const json = { capacity: { knob, unit, slo: goodput, ...cap, knee, frontier } };
        rec?.finish(json.capacity);
        if (rec && !o.json) process.stderr.write(`run ${rec.id} saved in ${rec.path}\n`);
        emit(json, o, () => capacityText(cap, goodput!, unit, knee));
        if (cap.stopped === "interrupted")
          throw new InterruptedError("interrupted: the capacity search so far is printed above");
        if (cap.stopped === "all-failed" && cap.failure) {
          const f = cap.failure;
          throw new TargetError(
            `every request of capacity run ${f.run + 1} at ${fmtRate(f.load)} ${unit} failed${f.error ? ` (${f.error})` : ""}; the search stopped there`,
            { hint: `check the server at ${opts.baseUrl} (--base-url)` },
          );
        }
        if (cap.stopped === "too-small") {
          const r = cap.runs[cap.runs.length - 1]!;
          const need = cap.minRunRequests;
          throw new UsageError(
            `the capacity search is inconclusive: run ${r.index + 1} at ${fmtRate(r.load)} ${unit} finished ${r.total} request${r.total === 1 ? "" : "s"}, and judging a ${share} share needs at least ${need} a run`,
            {
              hint: replay
                ? "replay more of the trace per run (--max-requests, --duration), or a lower --goodput share"
                : opts.durationMs !== undefined
                  ? `lengthen --duration to at least ${Math.ceil(need / r.load)}s (${need} requests at ${fmtRate(r.load)} req/s), or give a lower --goodput share`
                  : `give --num-prompts ${need} or more`,
            },
          );
        }
        return;
      }
      const isSweep = o.sweep === "auto" || (o.concurrency?.length ?? 0) > 1 || (rates?.length ?? 0) > 1;
      if (isSweep) {
        if (o.saveResult !== undefined || o.records)
          throw new UsageError("--save-result and --records apply to a single run, not a sweep (use --json)");
        const s = await runSweep(
          { ...opts, requestRate: undefined },
          {
            auto: o.sweep === "auto",
            concurrency: (o.concurrency?.length ?? 0) > 1 ? o.concurrency : undefined,
            rates: (rates?.length ?? 0) > 1 ? rates : undefined,
          },
          { signal: ac.signal, onProgress: progress.onProgress },
        );
        progress.done();
        const json = {
          points: s.points.map((p) => ({
            kind: p.kind,
            value: p.value,
            achievedRatio: p.achievedRatio,
            achievedRate: p.achievedRate,
            ...toVllmJson(p.result, false),
            ...(o.slice ? { slices: sliceJson(p.result, o.slice, opts) } : {}),
            diagnosis: p.diagnosis ?? null,
          })),
          stoppedEarly: s.stoppedEarly,
          partial: s.partial,
          knee: s.knee,
          frontier: s.frontier,
        };
        if (o.json) process.stdout.write(`${JSON.stringify(json, jsonReplacer, 2)}\n`);
        else process.stdout.write(`${sweepTable(terminalSafe(s))}\n`);
        if (s.partial) throw new InterruptedError("interrupted: partial sweep printed");
        return;
      }
      if (o.concurrency) opts.concurrency = o.concurrency[0];
      if (rates) opts.requestRate = rates[0];
      if (o.saveResult !== undefined) {
        // The file name needs the model; resolve it lazily through a first pass-through run option.
        opts.saveResult = typeof o.saveResult === "string" ? o.saveResult : undefined;
      }
      // The default file name needs the model: the directory is checked now, the file written after.
      if (o.saveResult === true) checkWritable(".", "the result file here", true);
      // A bad --db fails before anything is sent, as a bad --records does.
      // SQLite is loaded only when asked for.
      const store = o.db ? await import("../../load/store-run.ts") : null;
      if (store) store.checkStore(o.db);
      // Output files are written beside their names and renamed into place; another run writing the
      // same file makes this one refuse to start.
      if (opts.recordsPath) opts.recordsPath = claim(opts.recordsPath, "--records").tempPath;
      if (opts.saveResult) opts.saveResult = claim(opts.saveResult, "--save-result").tempPath;
      const benchDeps = {
        signal: ac.signal,
        onProgress: progress.onProgress,
        onTelemetryNote: progressEnabled(o) ? (line: string) => process.stderr.write(`${safeLine(line)}\n`) : undefined,
      };
      let spans: SpanJoinReport | null = null;
      let res: BenchResult;
      let sampledServer: SampledServer | null = null;
      let originPerf = Number.NaN;
      if (otlpListen) {
        const out = await benchWithSpans(opts, benchDeps, {
          ...otlpListen,
          waitMs: o.otlpWait,
          onListening: (endpoint, hint) => {
            process.stderr.write(`OTLP receiver on ${endpoint}: ${hint}\n`);
          },
        });
        res = out.result;
        spans = out.spans;
      } else if (o.slice && !opts.noServerMetrics) {
        // Slices (a replay's bursts, drift) each say which limit bound them: the server's gauges through the run.
        const r = await runSampled(opts, { ...benchDeps, onOrigin: (p) => (originPerf = p) }, SWEEP_SERVER_SAMPLE_MS);
        res = r.result;
        sampledServer = r.server;
      } else res = await runBench(opts, benchDeps);
      progress.done();
      for (const c of claims) c.commit();
      opts.recordsPath = o.records;
      opts.saveResult = typeof o.saveResult === "string" ? o.saveResult : undefined;
      const saved = store ? store.storeBenchRun(o.db, opts, res, spans ? { otlp: spanJoinJson(spans) } : {}) : null;
      if (saved && !o.json) process.stderr.write(`run ${saved.id} saved in ${saved.path}\n`);
      // Results are printed first, so a failed write (disk full) does not lose them.
      const sl = o.slice
        ? computeSlices(res.requests, { widthMs: o.slice, percentiles: res.percentiles, goodput: opts.goodput })
        : null;
      const sliceDiag =
        sl && sampledServer && Number.isFinite(originPerf)
          ? diagnoseSlices(sl, res, sampledServer, performance.timeOrigin + originPerf)
          : null;
      if (o.json)
        emit(
          {
            ...toVllmJson(res, opts.saveDetailed ?? false),
            ...(sl ? sliceFields(sl) : {}),
            ...(sliceDiag
              ? {
                  slice_diagnosis: sliceDiag.levels.map((d, i) => ({ index: i, ...d })),
                  slice_knee: sliceDiag.knee,
                }
              : {}),
            ...(spans ? { otlp: spanJoinJson(spans) } : {}),
          },
          o,
          () => "",
        );
      else
        emit(res, o, (r) =>
          [
            formatConsole(r),
            formatReplay(r),
            sl ? formatSlices(terminalSafe(sl), r.percentiles) : "",
            sl && sliceDiag ? sliceLimitsText(sl, sliceDiag) : "",
            spans ? formatSpanJoin(terminalSafe(spans)) : "",
          ]
            .filter(Boolean)
            .join("\n"),
        );
      if (o.saveResult === true) {
        const { writeFileSync } = await import("node:fs");
        const name = defaultResultName(opts, res.setup.model_id);
        const c = claimOutput(name, "--save-result");
        try {
          writeFileSync(c.tempPath, `${JSON.stringify(toVllmJson(res, opts.saveDetailed ?? false), null, 2)}\n`);
          c.commit();
        } catch (e: any) {
          c.abort();
          if (e instanceof InputError) throw e;
          throw new InputError(`${name}: cannot write result: ${e?.message ?? e}`);
        }
        if (!o.json) process.stderr.write(`result written to ${name}\n`);
      }
      // Nothing measured is not a benchmark: exit 3 with the first failure's own words.
      if (!res.partial && res.summary.completed === 0) {
        const first = res.requests.find((r) => !r.warmup && r.errorClass !== null) ?? res.requests[0];
        const why = first ? `${first.errorClass}: ${first.errorMessage}` : "no request was sent";
        throw new TargetError(`every request failed (${why}); nothing was measured`, {
          hint: `check the server at ${opts.baseUrl} (--base-url)${first?.errorClass === "stall" ? " or raise --stall-timeout" : ""}`,
        });
      }
      if (res.partial) {
        const files = [opts.saveResult, opts.recordsPath, saved && `run ${saved.id} (${saved.path})`].filter(Boolean);
        const why = (ac.signal.reason as Error)?.message ?? "interrupted";
        throw new InterruptedError(
          `${why}: partial results ${files.length ? `written to ${files.join(" and ")}` : "printed above (no output file was asked for)"}`,
        );
      }
    } finally {
      // An error mid-run keeps what was written, under the name asked for.
      for (const c of claims) c.commit();
      progress.done();
      ac.dispose();
    }
  });
}
