// `inferscope sim`: run the vLLM-compatible simulated server (or print its hidden truth).
import { type Command, Option } from "@commander-js/extra-typings";
import { checkInputFile } from "../../input-file.ts";
import { interruptSignal } from "../../interrupt.ts";
import { explainSim, renderExplanation } from "../../sim/explain.ts";
import { listProfiles, parseSetting, type SimOptions, startSim } from "../../sim/index.ts";
import { MAX_BLOCK_SIZE, MAX_GPU_BLOCKS } from "../../sim/kvcache.ts";
import { emit, numberArg } from "../common.ts";

export function register(program: Command): void {
  program
    .command("sim")
    .description("Run an embedded vLLM-compatible server whose timing follows a deployment model")
    .option("--json", "print machine-readable JSON (the listening line as one JSON object)")
    .option("--debug", "show stack traces and internal detail on errors")
    .option("--profile <name>", "built-in deployment profile", "glm5-8x-rtxpro6000-pcie")
    .option("--profile-file <file>", "profile YAML/JSON file (overrides --profile)")
    .option(
      "--set <key=value>",
      "override a profile field, e.g. collectives.perCallUs.LL=40 (repeatable)",
      (v, acc: string[]) => [...acc, v],
      [] as string[],
    )
    .option("--host <host>", "listen address (loopback unless --allow-remote)", "127.0.0.1")
    .option("--allow-remote", "allow a non-loopback --host")
    .option("--port <n>", "port (0 = a free one)", numberArg("--port", { integer: true, min: 0, max: 65535 }), 8000)
    .option(
      "--time-scale <x>",
      "run the clock x times faster (every simulated duration / x)",
      numberArg("--time-scale", { above: 0 }),
      1,
    )
    .addOption(
      new Option("--speed <mode>", "zero: serve tokens as fast as possible").choices(["model", "zero"] as const),
    )
    .option("--seed <n>", "seed for jitter, text and faults", numberArg("--seed", { integer: true }), 0)
    .option(
      "--max-num-seqs <n>",
      "scheduler: max running sequences",
      numberArg("--max-num-seqs", { integer: true, min: 1 }),
    )
    .option(
      "--max-num-batched-tokens <n>",
      "scheduler: token budget per step",
      numberArg("--max-num-batched-tokens", { integer: true, min: 1 }),
    )
    .option(
      "--tensor-parallel-size <n>",
      "tensor-parallel GPUs",
      numberArg("--tensor-parallel-size", { integer: true, min: 1 }),
    )
    .option("--disable-custom-all-reduce", "use NCCL for every all-reduce")
    .option("--enforce-eager", "no CUDA graphs (larger per-kernel cost)")
    .option(
      "--spec-tokens <k>",
      "speculative decoding: draft tokens per step",
      numberArg("--spec-tokens", { integer: true, min: 0 }),
    )
    .option(
      "--acceptance <p>",
      "speculative decoding: per-token acceptance probability",
      numberArg("--acceptance", { min: 0, max: 1 }),
    )
    .option(
      "--block-size <n>",
      "tokens per KV block (vLLM's --block-size; default the profile's)",
      numberArg("--block-size", { integer: true, min: 1, max: MAX_BLOCK_SIZE }),
    )
    .option(
      "--num-gpu-blocks-override <n>",
      "KV capacity in blocks, shared by running requests and the prefix cache (default the profile's)",
      numberArg("--num-gpu-blocks-override", { integer: true, min: 1, max: MAX_GPU_BLOCKS }),
    )
    .option("--enable-prefix-caching", "block-hash prefix caching (the default)")
    .option("--no-enable-prefix-caching", "turn prefix caching off")
    .option("--enable-prompt-tokens-details", "report usage.prompt_tokens_details.cached_tokens")
    .option("--reasoning", "chat: stream reasoning_content before content")
    .option(
      "--otlp-traces-endpoint <url>",
      "as vLLM: one llm_request span per request (vLLM's attribute names, the sim's own times), sent as OTLP/HTTP protobuf",
    )
    .option(
      "--otlp-layout <engine>",
      "the spans' layout: vllm (default; one llm_request span) or sglang (a trace per request: root, thread spans, stage slices; requests named by the body's rid)",
    )
    .option(
      "--collect-detailed-traces <modules>",
      "as vLLM: add time_in_scheduler and, for model / worker / all, time_in_model_forward / _execute to each span",
    )
    .option("--faults <spec>", "inject faults, e.g. http500:0.02,disconnect:0.01,stall:0.01")
    .option("--profiler-dir <dir>", "enable /start_profile and /stop_profile (default $VLLM_TORCH_PROFILER_DIR)")
    .option("--served-model-name <name>", "model name to serve (default: the profile's)")
    .option(
      "--dcgm-interval-ms <ms>",
      "/dcgm/metrics collection interval in wall ms: gauges average over it (dcgm-exporter's -c; default 100)",
      numberArg("--dcgm-interval-ms", { min: 10 }),
      100,
    )
    .option("--explain", "print the profile's true step decomposition and exit")
    .option("--list-profiles", "list the built-in profiles and exit")
    .action(async (o) => {
      if (o.listProfiles) {
        emit(listProfiles(), o, (l) => l.join("\n"));
        return;
      }
      if (o.profileFile !== undefined) checkInputFile("--profile-file", o.profileFile, "profile file");
      const overrides: Record<string, unknown> = {};
      for (const s of o.set) {
        const [k, v] = parseSetting(s);
        overrides[k] = v;
      }
      const opts: SimOptions = {
        profile: o.profile,
        profileFile: o.profileFile,
        overrides,
        host: o.host,
        allowRemote: o.allowRemote,
        port: o.port,
        timeScale: o.timeScale,
        speed: o.speed,
        seed: o.seed,
        maxNumSeqs: o.maxNumSeqs,
        maxNumBatchedTokens: o.maxNumBatchedTokens,
        tensorParallelSize: o.tensorParallelSize,
        disableCustomAllReduce: o.disableCustomAllReduce,
        enforceEager: o.enforceEager,
        specTokens: o.specTokens,
        acceptance: o.acceptance,
        reasoning: o.reasoning,
        faults: o.faults,
        profilerDir: o.profilerDir,
        servedModelName: o.servedModelName,
        dcgmIntervalMs: o.dcgmIntervalMs,
        blockSize: o.blockSize,
        numGpuBlocks: o.numGpuBlocksOverride,
        enablePrefixCaching: o.enablePrefixCaching,
        enablePromptTokensDetails: o.enablePromptTokensDetails,
        otlpTracesEndpoint: o.otlpTracesEndpoint,
        otlpLayout: o.otlpLayout,
        collectDetailedTraces: o.collectDetailedTraces,
      };
      if (o.explain) {
        emit(explainSim(opts), o, renderExplanation);
        return;
      }
      const sim = await startSim(opts);
      const name = sim.profile.name;
      if (o.json)
        process.stdout.write(
          `${JSON.stringify({ event: "listening", url: sim.url, profile: name, timeScale: o.timeScale })}\n`,
        );
      else process.stdout.write(`inferscope sim listening on ${sim.url} (profile ${name})\n`);
      if (sim.exposure) process.stderr.write(`warning: ${sim.exposure}\n`);
      // A server's normal end: SIGINT/SIGTERM close it and the command exits 0.
      const stopped = interruptSignal({ stopIsSuccess: true });
      await new Promise<void>((resolve) => {
        const stop = () => void sim.close().then(resolve, resolve);
        if (stopped.aborted) stop();
        else stopped.addEventListener("abort", stop, { once: true });
      });
    });
}
