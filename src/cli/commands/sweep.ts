// `inferscope sweep lengths|concurrency|rate`: one server, one variable. Thin: flags → library → print.

import type { Command } from "@commander-js/extra-typings";
import { renderLoadSweep, renderSweep } from "../../experiment/render.ts";
import { runLengthSweep, runLoadSweep, type TargetOptions } from "../../experiment/sweep.ts";
import { interruptSignal, parseVariant } from "../../experiment/variants.ts";
import { checkRunStore } from "../../input-file.ts";
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
import { countArg, listArg, MAX_REQUESTS, MAX_TOKENS } from "./experiment-args.ts";

function target<C extends Command<any, any, any>>(cmd: C) {
  return withCommon(cmd)
    .option("--url <url>", "a running server")
    .option("--server-cmd <cmd>", "or a command that starts one; {port} is replaced and $PORT set")
    .option("--variant <spec>", "env/flags for the started server: name:ENV=V --flag")
    .option("--model <name>", "model name (default: first of /v1/models)")
    .option("--api-key <key>", API_KEY_HELP.key)
    .option("--api-key-file <path>", API_KEY_HELP.file)
    .option("--api-key-env <name>", API_KEY_HELP.env)
    .option("--random-input-len <n>", "prompt tokens (default 32)", countArg("--random-input-len", 1, MAX_TOKENS))
    .option("--warmup <n>", "warm-up requests per level, excluded (default 1)", countArg("--warmup", 0, MAX_REQUESTS))
    .option("--seed <n>", "seeds prompts and level order (default 0)", numberArg("--seed", { integer: true, min: 0 }))
    .option("--ready-timeout <duration>", "how long the server may take to become ready (default 10m)")
    .option("--stall-timeout <duration>", "fail a stream with no data (tokens) for this long (default 60s)")
    .option(
      "--telemetry <source>",
      "hardware counters during the measurement: auto, none, nvidia-smi, dcgm:URL, prometheus:URL, amd-smi, cpu (optional @interval, e.g. nvidia-smi@200ms)",
      "auto",
    )
    .option(
      "--server-sample <duration>",
      "scrape the server's /metrics this often through each level, for the binding limit (default 200ms; off to skip)",
    )
    .option("--db <path>", "run store (default ~/.inferscope/runs.db)")
    .option(
      "--resume <run-id>",
      "continue an interrupted sweep: its stored options apply, finished levels are kept; a finished run is re-analysed",
    );
}

function common(o: Record<string, any>): TargetOptions {
  const apiKey = resolveApiKey(o, { envDefault: false });
  checkRunStore("--db", o.db);
  if (o.variant) checkNcclEnv(parseVariant(o.variant).env, `--variant ${o.variant}`);
  return {
    url: o.url,
    serverCmd: o.serverCmd,
    variant: o.variant,
    model: o.model,
    apiKey,
    seed: o.seed,
    db: o.db,
    resume: o.resume,
    readyTimeoutMs: durationFlag("--ready-timeout", o.readyTimeout),
    stallTimeoutMs: durationFlag("--stall-timeout", o.stallTimeout),
    telemetry: parseTelemetrySpec(o.telemetry ?? "auto"),
    serverSampleMs: o.serverSample === "off" ? 0 : durationFlag("--server-sample", o.serverSample),
    signal: interruptSignal(),
    onProgress: progressEnabled(o) ? (e) => process.stderr.write(`[sweep] ${safeLine(e.message)}\n`) : undefined,
  };
}

export function register(program: Command): void {
  const sweep = program
    .command("sweep")
    .description("sweep output length, concurrency or request rate against one server");
  target(
    sweep
      .command("lengths")
      .description("E2E against output length → per-token decode cost and fixed cost (robust fit, CIs, residuals)")
      .option("--out <list>", "output lengths (default 16,32,64,128,256,512)", listArg)
      .option("--requests <n>", "measured requests per length (default 5)", countArg("--requests", 1, MAX_REQUESTS)),
  ).action(async (...args: any[]) => {
    const o = args.at(-2);
    const r = await runLengthSweep({
      ...common(o),
      outLens: o.out,
      requestsPerLength: o.requests,
      randomInputLen: o.randomInputLen,
      warmup: o.warmup,
    });
    emit(r, o, renderSweep);
  });
  for (const mode of ["concurrency", "rate"] as const)
    target(
      sweep
        .command(mode)
        .description(
          `throughput–latency curve over ${mode === "rate" ? "request rates (open loop)" : "concurrency levels (closed loop)"}`,
        )
        .option(
          "--levels <list>",
          `${mode === "rate" ? "request rates, req/s (e.g. 1,2,4,8)" : "users (e.g. 1,2,4,8)"}; required unless --resume`,
          listArg,
        )
        .option("--num-prompts <n>", "measured requests per level", countArg("--num-prompts", 1, MAX_REQUESTS))
        .option("--random-output-len <n>", "output tokens (default 64)", countArg("--random-output-len", 1, MAX_TOKENS))
        .option(
          "--gpus <n>",
          "GPUs serving the target, for tok/s/GPU on the frontier (default 1)",
          countArg("--gpus", 1, 1_000_000),
        )
        .option(
          "--max-num-seqs <n>",
          "the server's running-batch ceiling, when --server-cmd does not show it (--max-num-seqs, -np)",
          countArg("--max-num-seqs", 1, 1_000_000),
        )
        .option(
          "--max-num-batched-tokens <n>",
          "the server's step token budget, when --server-cmd does not show it",
          countArg("--max-num-batched-tokens", 1, 100_000_000),
        ),
    ).action(async (...args: any[]) => {
      const o = args.at(-2);
      const r = await runLoadSweep({
        ...common(o),
        mode,
        levels: o.levels,
        numPrompts: o.numPrompts,
        randomInputLen: o.randomInputLen,
        randomOutputLen: o.randomOutputLen,
        warmup: o.warmup,
        gpus: o.gpus,
        maxNumSeqs: o.maxNumSeqs,
        maxNumBatchedTokens: o.maxNumBatchedTokens,
      });
      emit(r, o, renderLoadSweep);
    });
}
