// `inferscope model predict|explain|whatif|fit|catalog`: flags → src/model → print.
import type { Command } from "@commander-js/extra-typings";
import { InputError, UsageError } from "../../errors.ts";
import { checkInputFiles } from "../../input-file.ts";
import type { Measurement } from "../../model/measurements.ts";
import type { ModelCliOptions } from "../../model/options.ts";
import { SCENARIO_HELP } from "../../model/whatif.ts";
import { emit, withCommon } from "../common.ts";

// Each action loads what it uses: scripts call `model predict --json` in loops, and it needs no fit,
// no measurement readers and no table renderer.
const model = {
  catalog: () => import("../../model/catalog.ts"),
  explain: () => import("../../model/explain.ts"),
  fit: () => import("../../model/fit.ts"),
  io: () => import("../../model/io.ts"),
  options: () => import("../../model/options.ts"),
  predict: () => import("../../model/predict.ts"),
  whatif: () => import("../../model/whatif.ts"),
};

/** The text renderers, only when text is printed. */
async function renderers(o: { json?: boolean }) {
  return o.json ? undefined : await import("../../model/render.ts");
}

function modelFlags<C extends Command<any, any, any>>(cmd: C) {
  return withCommon(cmd)
    .option(
      "--model <name|path>",
      "catalog model (glm-5, llama-3.1-8b, …), a config.json / model folder, or a .gguf file",
    )
    .option(
      "--quant <name>",
      "bf16, fp8, nvfp4 (attention+head BF16), nvfp4-all, nvfp4-routed, mxfp4, int4-awq, int4-gptq, int8, q4_k_m, …",
    )
    .option("--kv-dtype <dtype>", "KV-cache dtype: auto, bf16, fp8 (fp8_ds_mla for MLA), q8_0 …")
    .option("--gpu <name>", "catalog GPU (rtx-pro-6000, h100-sxm, …) or a name for custom numbers")
    .option("--gpu-bandwidth <bw>", "custom device memory bandwidth, e.g. 936GB/s")
    .option("--gpu-tflops-bf16 <n>", "custom device dense BF16 TFLOPS")
    .option("--gpu-memory <size>", "custom device memory, e.g. 24GB")
    .option("--cpu <name>", "catalog CPU (epyc-9654, m3-max, …), or a name for a CPU host described below")
    .option("--cpu-bandwidth <bw>", "CPU host memory bandwidth, e.g. 40GB/s")
    .option("--cpu-cores <n>", "CPU host cores (dense TFLOPS estimated at 0.1 a core)")
    .option("--cpu-memory <size>", "CPU host memory, e.g. 64GB")
    .option("--measured-bandwidth <bw>", "measured copy bandwidth per GPU, e.g. 1458GB/s (replaces spec × efficiency)")
    .option("--hardware <file>", "YAML/JSON hardware file ({gpu: {bandwidth, tflopsBf16, memory}, gpus, interconnect})")
    .option("--gpus <n>", "GPU count (default TP × PP × DP)")
    .option("--tp <n>", "tensor-parallel size")
    .option("--ep <n>", "expert-parallel size")
    .option("--pp <n>", "pipeline-parallel size")
    .option("--dp <n>", "data-parallel replicas")
    .option(
      "--interconnect <link>",
      "pcie4, pcie5, pcie5x8, pcie5-sys (some GPU pair crosses CPU sockets), pcie5-node (none does), nvlink3/4/5, nvlink-bridge, xgmi",
    )
    .option("--topo <file>", "`nvidia-smi topo -m` output to derive the interconnect from")
    .option("--engine <name>", "vllm, sglang, trtllm, llamacpp, gptfast, mlx (default vllm)")
    .option(
      "--engine-version <v>",
      "engine release (v0.4.1, 0.11.0, b6918, v0.5.1.post3) or date (2025-08): sets the engine-maturity factor; without it the factor is a mixture over the releases the corpus spans; a release outside them is named and widens the interval",
    )
    .option("--eager", "no CUDA graphs (vLLM --enforce-eager)")
    .option("--nccl-proto <list>", "NCCL_PROTO value, e.g. LL, Simple, ^LL128")
    .option("--nccl-algo <list>", "NCCL_ALGO value, e.g. Ring, Tree")
    .option(
      "--nccl-fallback <yes|no>",
      'whether NCCL\'s log says "Could not find a path for pattern 4, falling back to simple order" (NCCL_DEBUG=INFO); without it the model derives it, or says unknown',
    )
    .option("--custom-all-reduce", "force custom all-reduce on (what-if when the engine would refuse)")
    .option("--disable-custom-all-reduce", "custom all-reduce off (vLLM --disable-custom-all-reduce)")
    .option("--batch <n>", "sequences decoding together (default 1)")
    .option("--context <n>", "context length during decode (default input + output/2)")
    .option("--input-len <n>", "prompt tokens (default 1024)")
    .option("--output-len <n>", "generated tokens (default 256)")
    .option("--calibration <file>", "apply a calibration (the JSON written by `model fit --json`)");
}

/** Workload flags (predict, explain): what a benchmark measures, beside the pure decode step of --batch. */
function workloadFlags<C extends Command<any, any, any>>(cmd: C) {
  return cmd
    .option("--concurrency <n>", "closed loop of N clients (bench serve --max-concurrency): predict TPOT/ITL/TTFT")
    .option("--request-rate <r>", "Poisson arrivals, requests/s: predict TPOT/ITL/TTFT")
    .option(
      "--lengths <file>",
      "request lengths: bench result JSON (input_lens/output_lens), JSONL input_length/output_length, or CSV (Azure ContextTokens/GeneratedTokens)",
    )
    .option("--dataset <name>", "sharegpt or jsonl: request lengths as bench would send them from --dataset-path")
    .option("--dataset-path <file>", "the ShareGPT JSON or JSONL prompts file for --dataset")
    .option("--max-num-batched-tokens <n>", "token budget per step (default: the engine's)")
    .option("--max-num-seqs <n>", "sequences per step (default: the engine's)")
    .option("--requests <n>", "requests simulated (default max(200, 25·C))");
}

/** Adds the workload prediction when the flags ask for one. */
async function withWorkload<P extends { workload?: unknown }>(p: P, input: unknown, o: any): Promise<P> {
  const { workloadFromOptions } = await model.options();
  const spec = workloadFromOptions(o);
  if (!spec) return p;
  const { predictWorkload } = await import("../../model/workload.ts");
  p.workload = predictWorkload(input as any, spec);
  return p;
}

type Opts = ModelCliOptions & { json?: boolean; disableCustomAllReduce?: boolean; customAllReduce?: boolean };

async function toInput(o: Opts) {
  if (o.customAllReduce && o.disableCustomAllReduce)
    throw new UsageError("--custom-all-reduce and --disable-custom-all-reduce contradict each other");
  const { inputFromOptions } = await model.options();
  return inputFromOptions({
    ...o,
    customAllReduce: o.disableCustomAllReduce ? false : o.customAllReduce ? true : undefined,
  });
}

async function readMeasurements(files: string[] | undefined): Promise<Measurement[]> {
  if (!files?.length)
    throw new UsageError(
      "--measurements FILE is required (JSON/YAML list, bench --save-result JSON, or nccl-tests output)",
    );
  checkInputFiles("--measurements", files, "measurements file");
  const { loadMeasurements } = await model.io();
  return files.flatMap((f) => loadMeasurements(f));
}

/** A trace's decode steps as a measurement: kernels per step, their fixed cost, host gaps (trace-evidence.ts). */
async function traceMeasurements(files: string[]): Promise<Measurement[]> {
  checkInputFiles("--trace", files, "trace file");
  const [{ analyzeTrace }, { traceStepEvidence }] = await Promise.all([
    import("../../trace/analyze.ts"),
    import("../../model/trace-evidence.ts"),
  ]);
  const a = await analyzeTrace(files);
  const e = traceStepEvidence(a);
  if (!e) throw new InputError(`${files.join(", ")}: no steps found in the trace (nothing to take kernel counts from)`);
  const batch = a.steps.find((s) => s.kind === e.kind)?.batch?.requests;
  return [
    {
      kind: "trace-fixed",
      label: `fixed per-step cost (trace ${files.join(", ")}: ${e.kernels.toFixed(0)} kernels × ${e.perKernelUs.toFixed(2)} µs)`,
      kernels: e.kernels,
      fixedMs: e.fixedMs,
      perKernelUs: e.perKernelUs,
      hostGapMs: e.hostGapMs,
      stepMs: e.stepMs,
      ...(batch ? { batch } : {}),
      file: files.join(", "),
    },
  ];
}

/** `proto=WAT` in a what-if is the --nccl-proto mistake in another spelling: refused the same way. */
function checkScenarioNccl(
  scenarios: string[],
  check: (flag: "--nccl-proto" | "--nccl-algo", value: string, label: string) => unknown,
): void {
  for (const s of scenarios)
    for (const term of s.split("+")) {
      const i = term.indexOf("=");
      if (i < 0) continue;
      const k = term.slice(0, i).trim().toLowerCase();
      const v = term.slice(i + 1).trim();
      if (k === "proto" || k === "nccl_proto") check("--nccl-proto", v, `--scenario ${term.trim()}`);
      if (k === "algo" || k === "nccl_algo") check("--nccl-algo", v, `--scenario ${term.trim()}`);
    }
}

export function register(program: Command): void {
  const cmd = program
    .command("model")
    .description("Analytical decode-step model: predict, explain, what-if, calibrate");

  workloadFlags(
    modelFlags(cmd.command("predict").description("decode step time and tokens/s, split into named terms, with TTFT")),
  ).action(async (...args: any[]) => {
    const o = args[args.length - 2] as any;
    const [{ predict }, input, R] = await Promise.all([model.predict(), toInput(o as Opts), renderers(o)]);
    emit(await withWorkload(predict(input), input, o), o, (p) => R!.renderPrediction(p));
  });

  workloadFlags(
    modelFlags(
      cmd.command("explain").description("one sentence per term; with --measurements also the calibration arithmetic"),
    ),
  )
    .option("--measurements <file...>", "fit these first and explain the calibrated model")
    .action(async (...args: any[]) => {
      const o = args[args.length - 2] as any;
      const input = await toInput(o as Opts);
      const { ceilingSentence, explain } = await model.explain();
      if (o.measurements) {
        const [{ fit }, { ceilings }, ms] = await Promise.all([
          model.fit(),
          model.whatif(),
          readMeasurements(o.measurements),
        ]);
        const f = fit(input, ms);
        const rows = ceilings(input, f);
        const lines = [...explain(f.prediction, f), ...rows.map(ceilingSentence)];
        emit({ sentences: lines, fit: f, ceilings: rows }, o, (r) => r.sentences.map((s) => `• ${s}`).join("\n"));
      } else {
        const [{ predict }, R] = await Promise.all([model.predict(), renderers(o)]);
        const p = await withWorkload(predict(input), input, o);
        emit({ sentences: explain(p), prediction: p }, o, () => R!.renderExplain(p));
      }
    });

  modelFlags(cmd.command("whatif").description(`re-run under changed assumptions (${SCENARIO_HELP.join("; ")})`))
    .option("--scenario <s...>", "scenarios, e.g. zero-comm custom-ar nvlink protocols batch=1,8,32")
    .option("--ceilings", "also print the ceiling table")
    .action(async (...args: any[]) => {
      const o = args[args.length - 2] as any;
      const [input, { ceilings, whatif }, R] = await Promise.all([toInput(o as Opts), model.whatif(), renderers(o)]);
      const scenarios = o.scenario ?? ["zero-comm", "custom-ar", "nvlink", "protocols", "kv=fp8", "batch=1,4,16,64"];
      checkScenarioNccl(scenarios, (await model.options()).ncclListFlag);
      const rows = whatif(input, scenarios);
      const ceil = o.ceilings ? ceilings(input) : undefined;
      emit({ rows, ceilings: ceil }, o, (r) =>
        [R!.renderWhatIf(r.rows), r.ceilings ? R!.renderCeilings(r.ceilings) : ""].filter(Boolean).join("\n"),
      );
    });

  modelFlags(
    cmd
      .command("fit")
      .description("calibrate on measurements: bench ITL/TTFT, A/B deltas, length sweeps, nccl-tests output"),
  )
    .option(
      "--measurements <file...>",
      "JSON/YAML measurements, bench --save-result JSON, or nccl-tests all_reduce_perf text",
    )
    .option(
      "--trace <file...>",
      "profiler traces (Kineto JSON, .gz) of the deployment's decode steps: kernels per step, their fixed cost and host gaps",
    )
    .action(async (...args: any[]) => {
      const o = args[args.length - 2] as any;
      const input = await toInput(o as Opts);
      const fromTrace = o.trace ? await traceMeasurements(o.trace) : [];
      const [{ fit }, { ceilings }, ms, R] = await Promise.all([
        model.fit(),
        model.whatif(),
        o.measurements || !fromTrace.length ? readMeasurements(o.measurements) : Promise.resolve([]),
        renderers(o),
      ]);
      ms.push(...fromTrace);
      const f = fit(input, ms);
      const rows = ceilings(input, f);
      emit({ ...f, ceilings: rows }, o, () => R!.renderFit(f, rows));
    });

  withCommon(cmd.command("catalog").description("list GPUs, CPUs, models, quantizations and interconnects"))
    .argument("[what]", "gpus, models, quant, interconnects or all", "all")
    .action(async (...args: any[]) => {
      const what = args[0];
      const o = args[args.length - 2] as any;
      const w = String(what);
      if (!["all", "gpus", "models", "quant", "interconnects"].includes(w))
        throw new UsageError(`unknown catalog "${w}": gpus, models, quant, interconnects or all`);
      const [{ catalog }, R] = await Promise.all([model.catalog(), renderers(o)]);
      emit(catalog(), o, (c) => R!.renderCatalog(c, w));
    });
}
