// `inferscope trace`: thin wrapper over analyzeTrace / captureTrace / parseNcclTests / parseTopology.
import { readFile } from "node:fs/promises";
import { availableParallelism } from "node:os";
import type { Command } from "@commander-js/extra-typings";
import { Option } from "@commander-js/extra-typings";
import { UsageError } from "../../errors.ts";
import { checkInputFile, checkInputFiles, checkNotFile } from "../../input-file.ts";
import { interruptSignal } from "../../interrupt.ts";
import { MAX_STREAMS_PER_WORKER, MAX_TOKENS } from "../../load/limits.ts";
import type { StepMode } from "../../trace/steps.ts";
import {
  API_KEY_HELP,
  type CommonOptions,
  durationFlag,
  emit,
  progressEnabled,
  resolveApiKey,
  withCommon,
} from "../common.ts";

// Loaded by the subcommand that uses them: `trace FILE --json` needs neither the HTTP client of
// capture nor the table renderer.
const trace = {
  analyze: () => import("../../trace/analyze.ts"),
  capture: () => import("../../trace/capture.ts"),
  nccl: () => import("../../trace/nccl.ts"),
  report: () => import("../../trace/report.ts"),
  topo: () => import("../../trace/topo.ts"),
};

interface AnalyzeFlags extends CommonOptions {
  rules?: string;
  capture: string[];
  stepsBy: string;
  gapUs?: number;
  top: number;
  threads?: number;
  explain?: string;
  model?: string;
  gpu?: string;
  measuredBandwidth?: string;
  batch?: number;
  context?: number;
}
interface CaptureFlags extends CommonOptions {
  dir: string;
  steps: number;
  concurrency: number;
  model?: string;
  timeout: string;
  apiKey?: string;
  apiKeyFile?: string;
  apiKeyEnv?: string;
  rules?: string;
  stepsBy: string;
}
interface TopoFlags extends CommonOptions {
  tp?: number;
  gpus?: string;
  cpu?: "intel" | "amd" | "arm";
}

const posInt =
  (name: string, max = Number.MAX_SAFE_INTEGER, why = "") =>
  (v: string) => {
    const n = Number(v);
    if (!Number.isSafeInteger(n) || n < 1) throw new UsageError(`${name}: expected a positive integer, got "${v}"`);
    if (n > max) throw new UsageError(`${name}: at most ${max}${why}, got "${v}"`);
    return n;
  };
const posNum = (name: string) => (v: string) => {
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0) throw new UsageError(`${name}: expected a positive number, got "${v}"`);
  return n;
};

/** A flag's value through its parser, the error naming the flag. */
function flagValue<T>(flag: string, parse: () => T): T {
  try {
    return parse();
  } catch (e) {
    throw new UsageError(`${flag}: ${(e as Error).message}`);
  }
}

function progress(on: boolean) {
  if (!on) return undefined;
  let last = 0;
  return (file: string, read: number, total: number) => {
    const now = Date.now();
    if (now - last < 200 && read < total) return;
    last = now;
    process.stderr.write(
      `\r${file}: ${((100 * read) / Math.max(1, total)).toFixed(0)} % of ${(total / 1e6).toFixed(0)} MB`,
    );
    if (read >= total) process.stderr.write("\n");
  };
}

/**
 * A subcommand's options with the ones the parent swallowed: `trace` has --json, --rules and --steps-by
 * too, and commander gives a flag after `trace capture URL` to the parent (a --json that printed tables).
 */
function subOpts<T>(args: any[]): T {
  const cmd = args.at(-1) as Command;
  const own = cmd.opts() as Record<string, unknown>;
  const parent = cmd.parent;
  if (!parent) return own as T;
  const mine = new Set(cmd.options.map((x) => x.attributeName()));
  for (const [k, v] of Object.entries(parent.opts()))
    if (mine.has(k) && parent.getOptionValueSource(k) === "cli" && cmd.getOptionValueSource(k) !== "cli") own[k] = v;
  return own as T;
}

const stepsBy = () =>
  new Option(
    "--steps-by <mode>",
    "how to find steps: the engines' annotations (vLLM execute_*, SGLang step[…]), ProfilerStep#N, one per CUDA/HIP graph launch, a repeating kernel sequence, or GPU idle gaps (auto: the first found, in that order)",
  )
    .choices(["auto", "annotation", "profiler-step", "graph", "period", "gap"] as const)
    .default("auto" as const);

export function register(program: Command): void {
  const cmd = withCommon(
    program
      .command("trace")
      .description(
        "decompose PyTorch/Kineto profiler traces (one file per rank) into per-step GPU time by kernel class; capture one from a server; parse nccl-tests output and GPU topology",
      )
      .argument("[files...]", "trace files (*.pt.trace.json or .json.gz), one per rank")
      .option(
        "--rules <file>",
        "extra kernel classification rules (YAML/JSON: {rules: [{id, class, match, weak?}]}), applied first",
      )
      .addOption(stepsBy())
      .option(
        "--gap-us <us>",
        "idle gap that separates steps in gap mode (default: max(100, 10 × median gap))",
        posNum("--gap-us"),
      )
      .option("--top <n>", "top kernels to list", posInt("--top"), 20)
      .option(
        "--threads <n>",
        "threads that read a large uncompressed trace (≥ 32 MiB), in segments; 1 reads it in one pass (default: the cores, at most 4, for files of 256 MiB or more)",
        posInt("--threads", availableParallelism(), " (the cores here)"),
      )
      .option(
        "--capture <file>",
        "graph-capture trace (recorded while the CUDA/HIP graphs were captured): gives graph-replayed kernels their launching op; repeatable",
        (v: string, prev: string[]) => [...prev, v],
        [] as string[],
      )
      .option(
        "--explain <kernel>",
        "show why each kernel whose name contains this text got its class (rules, op, context)",
      )
      .option(
        "--model <spec>",
        "per-GEMM roofline and the step beside the model's prediction: any model `model predict` accepts (catalog name, config.json, .gguf)",
      )
      .option("--gpu <name>", "the GPU the trace ran on (with --model), e.g. h200")
      .option(
        "--measured-bandwidth <GB/s>",
        "measured device-memory bandwidth: the roofline's ceiling (default: the spec)",
      )
      .option(
        "--batch <n>",
        "decode batch for the model (default: the steps' annotated batch, else 1)",
        posInt("--batch"),
      )
      .option("--context <n>", "KV length per sequence for the model (default: the model's)", posInt("--context")),
  ).action(async (...args: any[]) => {
    const files = args[0] as string[];
    const o = args[1] as AnalyzeFlags;
    if (!files.length) throw new UsageError("give trace files to analyse, or a subcommand (capture, nccl, topo)");
    checkInputFiles(undefined, files, "trace file");
    if (o.rules !== undefined) checkInputFile("--rules", o.rules, "rules file");
    checkInputFiles("--capture", o.capture, "trace file");
    if (o.model === undefined)
      for (const [flag, v] of [
        ["--gpu", o.gpu],
        ["--measured-bandwidth", o.measuredBandwidth],
        ["--batch", o.batch],
        ["--context", o.context],
      ] as const)
        if (v !== undefined)
          throw new UsageError(`${flag} is for the roofline, which needs --model`, {
            hint: "add --model <spec> (e.g. --model llama-3.1-8b --gpu h200)",
          });
    if (o.model !== undefined && o.gpu === undefined)
      throw new UsageError("--model needs --gpu: the roofline's ceiling and the model's hardware", {
        hint: "e.g. --gpu h200 (`inferscope model catalog` lists them)",
      });
    let roofline: import("../../trace/analyze.ts").RooflineOptions | undefined;
    if (o.model !== undefined) {
      const [{ loadModelArg }, { parseBandwidthGBs, requireGpu }] = await Promise.all([
        import("../../model/io.ts"),
        import("../../model/hardware.ts"),
      ]);
      requireGpu(o.gpu!);
      roofline = {
        model: loadModelArg(o.model),
        gpu: o.gpu!,
        ...(o.measuredBandwidth !== undefined
          ? { measuredBandwidthGBs: flagValue("--measured-bandwidth", () => parseBandwidthGBs(o.measuredBandwidth!)) }
          : {}),
        ...(o.batch !== undefined ? { batch: o.batch } : {}),
        ...(o.context !== undefined ? { contextLen: o.context } : {}),
      };
    }
    const [{ analyzeTrace, loadRuleFile }, R] = await Promise.all([trace.analyze(), o.json ? null : trace.report()]);
    const rules = o.rules ? await loadRuleFile(o.rules) : undefined;
    const a = await analyzeTrace(files, {
      ...(roofline ? { roofline } : {}),
      rules,
      stepMode: o.stepsBy as StepMode,
      gapUs: o.gapUs,
      topN: o.top,
      capture: o.capture,
      threads: o.threads,
      onProgress: progress(progressEnabled(o)),
    });
    if (o.explain !== undefined) {
      const { explainKernels, formatExplanations } = await import("../../trace/explain.ts");
      const list = explainKernels(a, o.explain, rules);
      emit({ explain: list }, o, () => formatExplanations(list));
      return;
    }
    emit(a, o, (x) => R!.formatAnalysis(x));
  });

  withCommon(
    cmd
      .command("capture")
      .description(
        "POST /start_profile, run a short workload, POST /stop_profile, and analyse the trace the server wrote",
      )
      .argument("<url>", "server base URL, e.g. http://127.0.0.1:8000")
      .requiredOption(
        "--dir <dir>",
        "the server's profiler directory (VLLM_TORCH_PROFILER_DIR / torch_profiler_dir) as seen here",
      )
      .option(
        "--steps <n>",
        "decode steps to capture (tokens generated per request)",
        posInt("--steps", MAX_TOKENS, " tokens"),
        32,
      )
      .option(
        "--concurrency <n>",
        "concurrent requests (the decode batch)",
        posInt("--concurrency", MAX_STREAMS_PER_WORKER),
        1,
      )
      .option("--model <name>", "model name (default: the first of /v1/models)")
      .option("--timeout <duration>", "limit for the workload and for the trace file to appear", "120s")
      .option("--api-key <key>", `${API_KEY_HELP.key}; sent to every endpoint`)
      .option("--api-key-file <path>", API_KEY_HELP.file)
      .option("--api-key-env <name>", API_KEY_HELP.env)
      .option("--rules <file>", "extra kernel classification rules (YAML/JSON)")
      .addOption(stepsBy()),
  ).action(async (...args: any[]) => {
    const url = args[0] as string;
    const o = subOpts<CaptureFlags>(args);
    const timeoutMs = durationFlag("--timeout", o.timeout)!;
    checkNotFile("--dir", o.dir);
    if (o.rules !== undefined) checkInputFile("--rules", o.rules, "rules file");
    const apiKey = resolveApiKey(o);
    const [{ loadRuleFile }, { captureTrace }, R] = await Promise.all([
      trace.analyze(),
      trace.capture(),
      o.json ? null : trace.report(),
    ]);
    const rules = o.rules ? await loadRuleFile(o.rules) : undefined;
    const r = await captureTrace(url, {
      dir: o.dir,
      steps: o.steps,
      concurrency: o.concurrency,
      model: o.model,
      timeoutMs,
      rules,
      stepMode: o.stepsBy as StepMode,
      apiKey,
      signal: interruptSignal(),
    });
    emit(r, o, (x) => `captured ${x.files.join(", ")} (${x.tokens} tokens)\n${R!.formatAnalysis(x.analysis)}`);
  });

  withCommon(
    cmd
      .command("nccl")
      .description(
        "parse nccl-tests output (all_reduce_perf etc., old and new layouts, or -J JSON) into latency vs size",
      )
      .argument("<file>", "nccl-tests stdout (or - for stdin)"),
  ).action(async (...args: any[]) => {
    const file = args[0] as string;
    const o = subOpts<CommonOptions>(args);
    checkInputFile(undefined, file, "nccl-tests output file");
    const text = file === "-" ? await readStdin() : await readFile(file, "utf8");
    const [{ ncclLatencyTable, parseNcclTests }, R] = await Promise.all([trace.nccl(), o.json ? null : trace.report()]);
    const r = parseNcclTests(text, file);
    emit({ ...r, latency: ncclLatencyTable(r) }, o, () => R!.formatNccl(r));
  });

  withCommon(
    cmd
      .command("topo")
      .description(
        "parse `nvidia-smi topo -m` (plus `topo -p2p r` output in the same file) and diagnose custom all-reduce and NCCL transport at a TP size",
      )
      .argument("<file>", "saved nvidia-smi output (or - for stdin)")
      .option("--tp <n>", "tensor-parallel size to diagnose", posInt("--tp"))
      .option("--gpus <list>", "GPU indices of the TP group (default 0..tp-1), e.g. 4,5,6,7")
      .addOption(
        new Option("--cpu <vendor>", "host CPU vendor (decides NCCL P2P through the CPU)").choices([
          "intel",
          "amd",
          "arm",
        ] as const),
      ),
  ).action(async (...args: any[]) => {
    const file = args[0] as string;
    const o = subOpts<TopoFlags>(args);
    checkInputFile(undefined, file, "nvidia-smi topo output file");
    const text = file === "-" ? await readStdin() : await readFile(file, "utf8");
    const [{ diagnose, parseTopology }, R] = await Promise.all([trace.topo(), o.json ? null : trace.report()]);
    const topo = parseTopology(text, file);
    let gpus: number[] | undefined;
    if (o.gpus) {
      const list = o.gpus.split(",").map((x: string) => Number(x.trim()));
      gpus = list;
      if (list.some((g) => !Number.isInteger(g) || g < 0 || g >= topo.gpus.length))
        throw new UsageError(`--gpus: indices must be 0..${topo.gpus.length - 1}, got "${o.gpus}"`);
    }
    const tp = o.tp ?? gpus?.length ?? topo.gpus.length;
    const d = diagnose(topo, tp, { gpus, cpuVendor: o.cpu });
    emit({ topology: topo, diagnosis: d }, o, () => R!.formatTopology(topo, d));
  });
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}
