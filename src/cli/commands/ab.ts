// `inferscope ab`: A/B experiment with server restarts. Thin: flags → runAB → print.

import type { Command } from "@commander-js/extra-typings";
import { runAB } from "../../experiment/ab.ts";
import { renderAB } from "../../experiment/render.ts";
import { interruptSignal, parseVariant } from "../../experiment/variants.ts";
import { checkNotFile, checkRunStore } from "../../input-file.ts";
import { checkNcclEnv } from "../../model/options.ts";
import { parseTelemetrySpec } from "../../telemetry/spec.ts";
import {
  API_KEY_HELP,
  durationFlag,
  emit,
  numberArg,
  progressEnabled,
  resolveApiKey,
  safeLine,
  withCommon,
} from "../common.ts";
import { countArg, MAX_REQUESTS, MAX_STREAMS, MAX_TOKENS, numArg } from "./experiment-args.ts";

interface ABFlags {
  json?: boolean;
  serverCmd?: string;
  variant: string[];
  repeats?: number;
  numPrompts?: number;
  randomInputLen?: number;
  randomOutputLen?: number;
  concurrency?: number;
  requestRate?: number;
  warmup?: number;
  seed?: number;
  model?: string;
  apiKey?: string;
  apiKeyFile?: string;
  apiKeyEnv?: string;
  opsPerToken?: number;
  opName?: string;
  resamples?: number;
  readyTimeout?: string;
  stallTimeout?: string;
  telemetry?: string;
  grace?: string;
  logDir?: string;
  db?: string;
  resume?: string;
}

const collect = (v: string, prev: string[]) => [...prev, v];

export function register(program: Command): void {
  withCommon(
    program
      .command("ab")
      .description("A/B experiment: restart the server per variant, interleave blocks (ABBA…), compare with CIs")
      .option("--server-cmd <cmd>", "command that starts the server; {port} is replaced and $PORT set")
      .option(
        "--variant <spec>",
        "name:ENV=V,ENV2=V2 --flag …, name: (unchanged) or name=http://host:port; repeat; the first is the baseline",
        collect,
        [] as string[],
      )
      .option("--repeats <n>", "rounds; each runs every variant once (default 2)", countArg("--repeats", 1, 1000))
      .option(
        "--num-prompts <n>",
        "measured requests per block (default 20)",
        countArg("--num-prompts", 1, MAX_REQUESTS),
      )
      .option("--random-input-len <n>", "prompt tokens (default 32)", countArg("--random-input-len", 1, MAX_TOKENS))
      .option(
        "--random-output-len <n>",
        "output tokens per request, ignore_eos (default 128)",
        countArg("--random-output-len", 1, MAX_TOKENS),
      )
      .option("--concurrency <n>", "closed-loop users per block (default 1)", countArg("--concurrency", 1, MAX_STREAMS))
      .option("--request-rate <r>", "open loop instead: requests per second", numArg)
      .option("--warmup <n>", "warm-up requests per block, excluded (default 2)", countArg("--warmup", 0, MAX_REQUESTS))
      .option(
        "--seed <n>",
        "seeds prompts, block order and bootstrap (default 0)",
        numberArg("--seed", { integer: true, min: 0 }),
      )
      .option("--model <name>", "model name (default: first of /v1/models)")
      .option("--api-key <key>", API_KEY_HELP.key)
      .option("--api-key-file <path>", API_KEY_HELP.file)
      .option("--api-key-env <name>", API_KEY_HELP.env)
      .option("--ops-per-token <n>", "operations per token (e.g. 156 all-reduces) → cost per operation", numArg)
      .option("--op-name <name>", "what one operation is called (default all-reduce)")
      .option("--resamples <n>", "bootstrap resamples (default 2000)", countArg("--resamples", 1, 1_000_000))
      .option("--ready-timeout <duration>", "how long a server may take to become ready (default 10m)")
      .option("--stall-timeout <duration>", "fail a stream with no data (tokens) for this long (default 60s)")
      .option(
        "--telemetry <source>",
        "hardware counters during the measurement: auto, none, nvidia-smi, dcgm:URL, prometheus:URL, amd-smi, cpu (optional @interval, e.g. nvidia-smi@200ms)",
        "auto",
      )
      .option("--grace <duration>", "SIGTERM → SIGKILL grace period (default 10s)")
      .option("--log-dir <dir>", "server logs (default ~/.inferscope/logs/RUN_ID)")
      .option("--db <path>", "run store (default ~/.inferscope/runs.db)")
      .option("--resume <run-id>", "continue an interrupted A/B run; finished blocks are kept"),
  ).action(async (...args: any[]) => {
    const o = args.at(-2) as ABFlags;
    // Refused before any server starts: a header-splitting key, a --db that is no store, NCCL_PROTO=WAT.
    const apiKey = resolveApiKey(o, { envDefault: false });
    checkRunStore("--db", o.db);
    if (o.logDir !== undefined) checkNotFile("--log-dir", o.logDir);
    for (const v of o.variant) checkNcclEnv(parseVariant(v).env, `--variant ${v}`);
    const progress = progressEnabled(o);
    const result = await runAB({
      serverCmd: o.serverCmd,
      variants: o.variant,
      repeats: o.repeats,
      workload: {
        numPrompts: o.numPrompts,
        randomInputLen: o.randomInputLen,
        randomOutputLen: o.randomOutputLen,
        concurrency: o.concurrency,
        requestRate: o.requestRate,
        warmup: o.warmup,
        seed: o.seed,
        model: o.model,
        stallTimeoutMs: durationFlag("--stall-timeout", o.stallTimeout),
        telemetry: parseTelemetrySpec(o.telemetry ?? "auto"),
      },
      seed: o.seed,
      apiKey,
      opsPerToken: o.opsPerToken,
      opName: o.opName,
      resamples: o.resamples,
      readyTimeoutMs: durationFlag("--ready-timeout", o.readyTimeout),
      graceMs: durationFlag("--grace", o.grace),
      logDir: o.logDir,
      db: o.db,
      resume: o.resume,
      signal: interruptSignal(),
      onProgress: progress ? (e) => process.stderr.write(`[ab] ${safeLine(e.message.split("\n")[0]!)}\n`) : undefined,
    });
    emit(result, o, renderAB);
  });
}
