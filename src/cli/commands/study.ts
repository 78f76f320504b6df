// `inferscope study`: the whole investigation in one command, written as an HTML/Markdown/JSON report.
import type { Command } from "@commander-js/extra-typings";
import { interruptSignal } from "../../experiment/variants.ts";
import { renderTerminal } from "../../report/index.ts";
import { runStudy } from "../../study/index.ts";
import { emit, numberArg, progressEnabled } from "../common.ts";

export function register(program: Command): void {
  program
    .command("study")
    .description(
      "Run the whole investigation (metrics audit, batch-1 bench, length sweep, profiler trace, A/B on NCCL_PROTO, model, ceilings) and write a report",
    )
    .option("--url <url>", "an already-running OpenAI-compatible server (no restarts: the A/B is skipped)")
    .option(
      "--server-cmd <cmd>",
      "command that starts the server; {port} or $PORT is filled in (restarted per A/B arm)",
    )
    .option("--profile <name>", "embedded sim profile (when neither --url nor --server-cmd)", "glm5-8x-rtxpro6000-pcie")
    .option("--model <name>", "model for the analytical model (catalog name or config.json)", "glm-5")
    .option("--quant <q>", "weight quantization", "nvfp4")
    .option("--gpu <name>", "GPU (catalog name)", "rtx-pro-6000")
    .option("--gpus <n>", "GPU count", numberArg("--gpus", { integer: true, min: 1 }), 8)
    .option("--tp <n>", "tensor-parallel size", numberArg("--tp", { integer: true, min: 1 }), 8)
    .option("--interconnect <x>", "interconnect (pcie5, pcie4, nvlink4, …)", "pcie5")
    .option("--engine <name>", "serving engine", "vllm")
    .option("--quick", "small workloads: about a minute on the embedded sim")
    .option("--out <dir>", "report directory", "./inferscope-report")
    .option("--db <path>", "run store (SQLite) path")
    .option("--no-store", "do not save the run in the store")
    .option(
      "--time-scale <x>",
      "embedded sim only: run its clock x times faster (times are converted back)",
      numberArg("--time-scale", { above: 0 }),
    )
    .option("--profiler-dir <dir>", "--url only: the server's profiler (trace) directory, readable here")
    .option("--seed <n>", "seed for workloads, block order and bootstrap", numberArg("--seed", { integer: true }), 1)
    .option("--api-key <key>", "API key for the server (default $OPENAI_API_KEY); never stored")
    // Same as withCommon(); spelled out so commander's typings keep every option's type.
    .option("--json", "print machine-readable JSON instead of tables")
    .option("--debug", "show stack traces and internal detail on errors")
    .action(async (o) => {
      const show = progressEnabled(o);
      const t0 = performance.now();
      const flags: Record<string, string | number | boolean | null> = {};
      for (const [k, v] of Object.entries(o)) {
        if (k === "apiKey" || k === "json" || k === "debug" || v === undefined) continue;
        flags[k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)] = v as string | number | boolean;
      }
      const out = await runStudy({
        url: o.url,
        serverCmd: o.serverCmd,
        profilerDir: o.profilerDir,
        signal: interruptSignal(),
        profile: o.profile,
        deployment: {
          model: o.model,
          quant: o.quant,
          gpu: o.gpu,
          gpus: o.gpus,
          tp: o.tp,
          interconnect: o.interconnect,
          engine: o.engine,
        },
        quick: o.quick,
        outDir: o.out,
        dbPath: o.store === false ? null : o.db,
        timeScale: o.timeScale,
        seed: o.seed,
        apiKey: o.apiKey ?? process.env.OPENAI_API_KEY,
        flags,
        onProgress: show
          ? (phase, msg) =>
              process.stderr.write(`[${((performance.now() - t0) / 1000).toFixed(1).padStart(5)} s] ${phase}: ${msg}\n`)
          : undefined,
      });
      emit(
        o.json ? { ...out.result, report: out.report ? { dir: out.report.dir, html: out.report.html } : null } : out,
        o,
        (r) =>
          renderTerminal((r as typeof out).result, { color: Boolean(process.stdout.isTTY), outDir: out.report?.dir }),
      );
    });
}
