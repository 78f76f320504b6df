// `inferscope tune`: rank candidate configurations with the model, race them with server restarts,

// prove the best. Thin: flags → runTune → print.
import type { Command } from "@commander-js/extra-typings";
import { UsageError } from "../../errors.ts";
import { interruptSignal } from "../../experiment/variants.ts";
import { checkNotFile, checkRunStore } from "../../input-file.ts";
import { parseOtlpFlags } from "../../otlp/receiver.ts";
import { parseTelemetrySpec } from "../../telemetry/spec.ts";
import type { Objective } from "../../tune/model.ts";
import { renderTune } from "../../tune/render.ts";
import { runTune, type Slo } from "../../tune/run.ts";
import {
  API_KEY_HELP,
  durationArg,
  durationFlag,
  emit,
  numberArg,
  progressEnabled,
  resolveApiKey,
  safeLine,
  withCommon,
} from "../common.ts";
import {
  countArg,
  MAX_REQUESTS,
  MAX_STREAMS,
  MAX_TOKENS,
  numArg,
  OTLP_GRPC_HELP,
  OTLP_RECEIVER_HELP,
} from "./experiment-args.ts";

const collect = (v: string, prev: string[]) => [...prev, v];

/** `ttft:500,tpot:50` (ms), as vLLM's --goodput takes them. */
export function parseSlo(text: string | undefined): Slo | undefined {
  if (text === undefined) return undefined;
  const slo: Slo = {};
  for (const part of text
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean)) {
    const m = /^(ttft|tpot):(\d+(?:\.\d+)?)(ms)?$/i.exec(part);
    if (!m)
      throw new UsageError(`--slo "${part}" is not ttft:MS or tpot:MS`, { hint: "example: --slo ttft:500,tpot:50" });
    const v = Number(m[2]);
    if (!(v > 0)) throw new UsageError(`--slo ${part}: the bound must be > 0`);
    if (m[1]!.toLowerCase() === "ttft") slo.ttftMs = v;
    else slo.tpotMs = v;
  }
  if (slo.ttftMs === undefined && slo.tpotMs === undefined) throw new UsageError("--slo is empty");
  return slo;
}

const MAX_STARTS = 100_000;

/** `40` server starts, `30m` of wall time, or both: `40,30m`. */
export function parseBudget(text: string | undefined): { starts?: number; timeMs?: number } | undefined {
  if (text === undefined) return undefined;
  const out: { starts?: number; timeMs?: number } = {};
  for (const part of text
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean)) {
    const what = `--budget "${part}" is neither a number of server starts (a whole number from 2, e.g. 40) nor a duration (30m, 2h), or both: 40,30m`;
    if (/^\d+$/.test(part)) {
      out.starts = Number(part);
      if (!Number.isSafeInteger(out.starts) || out.starts > MAX_STARTS)
        throw new UsageError(`--budget "${part}": at most ${MAX_STARTS} server starts`);
    } else if (/^\d+(?:\.\d+)?(ms|s|m|h)$/.test(part)) out.timeMs = durationFlag("--budget", part);
    else throw new UsageError(what);
  }
  if (out.starts !== undefined && out.starts < 2) throw new UsageError("--budget needs at least 2 server starts");
  return out;
}

const OBJECTIVE_NAMES = ["tpot", "ttft", "throughput-at-slo"];

export function register(program: Command): void {
  withCommon(
    program
      .command("tune")
      .description(
        "Find the best server configuration: the model ranks candidates, restarted blocks race them, the best is proven with a CI",
      )
      .option("--server-cmd <cmd>", "command that starts the server; {port} is replaced (default: the embedded sim)")
      .option(
        "--knob <spec>",
        "ENV=a,b (empty item = unset), --flag=a,b or --switch; repeat; the first value of each is the baseline (default: the engine's registry)",
        collect,
        [] as string[],
      )
      .option("--objective <name>", "tpot (default), ttft or throughput-at-slo")
      .option("--slo <bounds>", "for throughput-at-slo: ttft:MS,tpot:MS (vLLM --goodput)")
      .option(
        "--budget <n|duration>",
        "server starts and/or wall time, e.g. 40, 30m or 40,30m (default 3 × candidates)",
      )
      .option("--tolerance <pct>", "differences below this count as equal (default 1 %)", numArg)
      .option("--error-rate <delta>", "chance of dropping the true best, over all candidates (default 0.05)", numArg)
      .option("--min-blocks <n>", "blocks the winner needs at least (default 2)", countArg("--min-blocks", 1, 1000))
      .option(
        "--num-prompts <n>",
        "measured requests per block (default 10)",
        countArg("--num-prompts", 1, MAX_REQUESTS),
      )
      .option("--random-input-len <n>", "prompt tokens (default 32)", countArg("--random-input-len", 1, MAX_TOKENS))
      .option(
        "--random-output-len <n>",
        "output tokens per request, ignore_eos (default 128)",
        countArg("--random-output-len", 1, MAX_TOKENS),
      )
      .option("--concurrency <n>", "closed-loop users per block (default 1)", countArg("--concurrency", 1, MAX_STREAMS))
      .option("--warmup <n>", "warm-up requests per block, excluded (default 1)", countArg("--warmup", 0, MAX_REQUESTS))
      .option(
        "--seed <n>",
        "seeds prompts, block order and sampling (default 0)",
        numberArg("--seed", { integer: true, min: 0 }),
      )
      .option("--served-model <name>", "model name in requests (default: first of /v1/models)")
      .option("--api-key <key>", API_KEY_HELP.key)
      .option("--api-key-file <path>", API_KEY_HELP.file)
      .option("--api-key-env <name>", API_KEY_HELP.env)
      .option("--profile <name>", "embedded sim: deployment profile (default glm5-8x-rtxpro6000-pcie)")
      .option("--time-scale <x>", "embedded sim: run its clock x times faster (default 10)", numArg)
      .option("--set <key=value>", "embedded sim: override a profile field; repeat", collect, [] as string[])
      .option("--model <name|path>", "the model, for the prediction (catalog name, config.json or .gguf)")
      .option("--gpu <name>", "GPU (catalog name), for the prediction")
      .option("--gpus <n>", "GPU count", countArg("--gpus", 1, 4096))
      .option("--tp <n>", "tensor-parallel size", countArg("--tp", 1, 4096))
      .option("--interconnect <kind>", "pcie4, pcie5, nvlink4 …")
      .option("--engine <name>", "vllm, sglang, llamacpp, trtllm, tgi")
      .option("--ready-timeout <duration>", "how long a server may take to become ready (default 10m)")
      .option("--stall-timeout <duration>", "fail a stream with no data for this long (default 60s)")
      .option(
        "--telemetry <source>",
        "hardware counters during the measurement: auto (default), none, nvidia-smi, dcgm:URL, prometheus:URL, amd-smi, cpu (optional @interval, e.g. nvidia-smi@200ms)",
      )
      .option(
        "--otlp-receiver <[host:]port>",
        `${OTLP_RECEIVER_HELP}; every started server is given the flags where its engine is known (the embedded sim: at --time-scale 1), and each candidate gets the split`,
      )
      .option("--otlp-grpc-receiver <[host:]port>", OTLP_GRPC_HELP)
      .option(
        "--otlp-wait <d>",
        "after each block, wait up to this long for spans the engine has not sent yet (default 10s; vLLM batches every 5 s)",
        durationArg("--otlp-wait"),
      )
      .option("--grace <duration>", "SIGTERM → SIGKILL grace period (default 10s)")
      .option("--log-dir <dir>", "server logs (default ~/.inferscope/logs/RUN_ID)")
      .option("--out <dir>", "also write the report (index.html, report.md, results.json) here")
      .option("--db <path>", "run store (default ~/.inferscope/runs.db)")
      .option("--resume <run-id>", "continue an interrupted tune run; finished blocks are kept"),
  ).action(async (...args: any[]) => {
    const o = args.at(-2) as Record<string, any>;
    const apiKey = resolveApiKey(o, { envDefault: false });
    // Folders named with their flag before any server starts, not as ENOTDIR from the first write.
    if (o.logDir !== undefined) checkNotFile("--log-dir", o.logDir);
    if (o.out !== undefined) checkNotFile("--out", o.out);
    checkRunStore("--db", o.db);
    if (o.objective !== undefined && !OBJECTIVE_NAMES.includes(o.objective))
      throw new UsageError(`--objective ${o.objective} is not one of ${OBJECTIVE_NAMES.join(", ")}`);
    const simSet: Record<string, string> = {};
    for (const s of o.set as string[]) {
      const i = s.indexOf("=");
      if (i <= 0) throw new UsageError(`--set "${s}" is not key=value`);
      simSet[s.slice(0, i)] = s.slice(i + 1);
    }
    const otlp = parseOtlpFlags(o);
    if (!otlp && o.otlpWait !== undefined) throw new UsageError("--otlp-wait goes with --otlp-receiver");
    const tolerance = o.tolerance === undefined ? undefined : o.tolerance > 0.5 ? o.tolerance / 100 : o.tolerance;
    const progress = progressEnabled(o);
    const result = await runTune({
      serverCmd: o.serverCmd,
      knobs: o.knob,
      objective: o.objective as Objective | undefined,
      slo: parseSlo(o.slo),
      budget: parseBudget(o.budget),
      tolerance,
      errorRate: o.errorRate,
      minBlocks: o.minBlocks,
      workload: {
        numPrompts: o.numPrompts,
        randomInputLen: o.randomInputLen,
        randomOutputLen: o.randomOutputLen,
        concurrency: o.concurrency,
        warmup: o.warmup,
        seed: o.seed,
        model: o.servedModel,
        stallTimeoutMs: durationFlag("--stall-timeout", o.stallTimeout),
        // Given only when set: a resumed run keeps its own (the default, auto, is applied by runTune).
        telemetry: o.telemetry === undefined ? undefined : parseTelemetrySpec(o.telemetry),
      },
      given: {
        model: o.model,
        gpu: o.gpu,
        gpus: o.gpus,
        tp: o.tp,
        interconnect: o.interconnect,
        engine: o.engine,
      },
      profile: o.profile,
      timeScale: o.timeScale,
      simSet: o.set.length ? simSet : undefined,
      seed: o.seed,
      apiKey,
      readyTimeoutMs: durationFlag("--ready-timeout", o.readyTimeout),
      graceMs: durationFlag("--grace", o.grace),
      logDir: o.logDir,
      db: o.db,
      resume: o.resume,
      otlp: otlp ? { ...otlp, waitMs: o.otlpWait } : undefined,
      outDir: o.out,
      signal: interruptSignal(),
      // The receiver's line always: it may say what to give the engine by hand.
      onProgress: (e) => {
        if (progress || e.phase === "otlp") process.stderr.write(`[tune] ${safeLine(e.message.split("\n")[0]!)}\n`);
      },
    });
    emit(result, o, (r) => (r.report ? `${renderTune(r)}\nreport: ${r.report.html}` : renderTune(r)));
    // Printed and stored above; a run that could choose nothing is not a success.
    if (result.status === "inconclusive")
      throw new UsageError(`tune run ${result.runId} chose nothing: ${result.stop.message}`, {
        hint: "allow more server starts or time (--budget N, --budget 2h, or both: --budget 40,2h)",
      });
  });
}
