// `inferscope study`: the whole investigation in one command, written as an HTML/Markdown/JSON report.

import type { Command } from "@commander-js/extra-typings";
import { interruptSignal } from "../../experiment/variants.ts";
import { renderTerminal } from "../../report/index.ts";
import { runStudy } from "../../study/index.ts";
import { parseTelemetrySpec } from "../../telemetry/spec.ts";
import { API_KEY_HELP, durationFlag, emit, numberArg, progressEnabled, resolveApiKey } from "../common.ts";

const collect = (v: string, prev: string[]) => [...prev, v];

export function register(program: Command): void {
  program
    .command("study")
    .description(
      "Run the whole investigation (discovery, metrics audit, batch-1 bench, length sweep, profiler trace, an A/B that fits the engine, model, ceilings) and write a report",
    )
    .option("--url <url>", "an already-running OpenAI-compatible server (no restarts: the A/B is skipped)")
    .option(
      "--server-cmd <cmd>",
      "command that starts the server; {port} or $PORT is filled in (restarted per A/B arm)",
    )
    .option("--profile <name>", "embedded sim profile (when neither --url nor --server-cmd)", "glm5-8x-rtxpro6000-pcie")
    .option(
      "--variant <spec>",
      "an A/B arm, as in `ab` (name:ENV=V --flag); give two, baseline first (default: the engine's first applicable experiment)",
      collect,
      [] as string[],
    )
    .option(
      "--model <name|path>",
      "model: catalog name, config.json / folder, or .gguf (default: detected from the server)",
    )
    .option("--quant <q>", "weight quantization (default: from the GGUF header or config.json)")
    .option("--gpu <name>", "GPU (catalog name), or a name for --gpu-bandwidth numbers")
    .option("--gpu-bandwidth <bw>", "custom GPU memory bandwidth, e.g. 936GB/s")
    .option("--gpu-tflops-bf16 <n>", "custom GPU dense BF16 TFLOPS")
    .option("--gpus <n>", "GPU count", numberArg("--gpus", { integer: true, min: 1 }))
    .option(
      "--tp <n>",
      "tensor-parallel size (default: from the server command)",
      numberArg("--tp", { integer: true, min: 1 }),
    )
    .option("--interconnect <x>", "interconnect (pcie5, pcie4, nvlink4, …)")
    .option("--cpu <name>", "a catalog CPU (epyc-9654, m3-max, …) or the name of a CPU host described below")
    .option("--cpu-bandwidth <bw>", "CPU host memory bandwidth, e.g. 40GB/s")
    .option("--cpu-cores <n>", "CPU host cores", numberArg("--cpu-cores", { integer: true, min: 1 }))
    .option("--hardware <file>", "YAML/JSON hardware file ({gpu: {bandwidth, tflopsBf16, memory}, gpus, interconnect})")
    .option(
      "--engine <name>",
      "serving engine (default: detected: vllm, sglang, tgi, llamacpp, trtllm, triton, dynamo)",
    )
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
    .option(
      "--telemetry <source>",
      "hardware counters during the measurement: auto (default), none, nvidia-smi, dcgm:URL, prometheus:URL, amd-smi, cpu (optional @interval, e.g. nvidia-smi@200ms)",
    )
    .option(
      "--stall-timeout <duration>",
      "fail a stream with no data (tokens) for this long, in every phase that streams (default 60s)",
    )
    .option("--api-key <key>", API_KEY_HELP.key)
    .option("--api-key-file <path>", API_KEY_HELP.file)
    .option("--api-key-env <name>", API_KEY_HELP.env)
    // Same as withCommon(); spelled out so commander's typings keep every option's type.
    .option("--json", "print machine-readable JSON instead of tables")
    .option("--debug", "show stack traces and internal detail on errors")
    .action(async (o) => {
      const show = progressEnabled(o);
      const t0 = performance.now();
      const flags: Record<string, string | number | boolean | null> = {};
      for (const [k, v] of Object.entries(o)) {
        if (k === "apiKey" || k === "json" || k === "debug" || v === undefined) continue;
        if (Array.isArray(v)) {
          if (v.length) flags[k] = v.join(" | ");
          continue;
        }
        flags[k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)] = v as string | number | boolean;
      }
      const out = await runStudy({
        url: o.url,
        serverCmd: o.serverCmd,
        profilerDir: o.profilerDir,
        signal: interruptSignal(),
        profile: o.profile,
        given: {
          model: o.model,
          quant: o.quant,
          gpu: o.gpu,
          gpuBandwidth: o.gpuBandwidth,
          gpuTflopsBf16: o.gpuTflopsBf16,
          gpus: o.gpus,
          tp: o.tp,
          interconnect: o.interconnect,
          engine: o.engine?.toLowerCase().replace(/[^a-z]/g, ""),
          cpu: o.cpu,
          cpuBandwidth: o.cpuBandwidth,
          cpuCores: o.cpuCores,
          hardware: o.hardware,
        },
        variants: o.variant.length ? o.variant : undefined,
        quick: o.quick,
        outDir: o.out,
        dbPath: o.store === false ? null : o.db,
        timeScale: o.timeScale,
        seed: o.seed,
        stallTimeoutMs: durationFlag("--stall-timeout", o.stallTimeout),
        // Unset: auto (at 100 ms on the embedded sim).
        telemetry: o.telemetry === undefined ? undefined : parseTelemetrySpec(o.telemetry),
        apiKey: resolveApiKey(o),
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
