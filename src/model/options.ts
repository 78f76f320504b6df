// Builds a ModelInput from command-line options (strings), reading the files they name through io.ts.
import { UsageError } from "../errors.ts";
import type { Engine } from "./collectives.ts";
import type { CustomGpuSpec } from "./hardware.ts";
import { findGpu, parseBandwidthGBs } from "./hardware.ts";
import { loadHardwareFile, loadJson, loadModelArg, loadTopo } from "./io.ts";
import type { Calibration, ModelInput } from "./resolve.ts";
import { ENGINES } from "./resolve.ts";
import { interconnectFromTopo } from "./topology.ts";

export interface ModelCliOptions {
  model?: string;
  quant?: string;
  kvDtype?: string;
  gpu?: string;
  gpuBandwidth?: string;
  gpuTflopsBf16?: string;
  gpuMemory?: string;
  /** A catalog CPU (epyc-9654, m3-max, …), or the name of a CPU host described by the numbers below. */
  cpu?: string;
  /** A CPU host's memory bandwidth (e.g. 40GB/s). */
  cpuBandwidth?: string;
  /** A CPU host's cores (its dense TFLOPS are estimated from them when not given). */
  cpuCores?: string;
  cpuMemory?: string;
  measuredBandwidth?: string;
  hardware?: string;
  gpus?: string;
  tp?: string;
  ep?: string;
  pp?: string;
  dp?: string;
  interconnect?: string;
  topo?: string;
  engine?: string;
  /** Engine release or date (sets the engine-maturity factor). */
  engineVersion?: string;
  eager?: boolean;
  ncclProto?: string;
  ncclAlgo?: string;
  customAllReduce?: boolean;
  batch?: string;
  context?: string;
  inputLen?: string;
  outputLen?: string;
  calibration?: string;
}

function intOpt(flag: string, v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new UsageError(`${flag} expects a whole number (got "${v}")`);
  return n;
}

function numOpt(flag: string, v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0) throw new UsageError(`${flag} expects a positive number (got "${v}")`);
  return n;
}

export function inputFromOptions(o: ModelCliOptions): ModelInput {
  if (!o.model)
    throw new UsageError("--model is required (a catalog name such as glm-5, a config.json path, or a .gguf file)");
  const model = loadModelArg(o.model);
  let gpu: ModelInput["gpu"];
  let gpus = intOpt("--gpus", o.gpus);
  let interconnect: ModelInput["interconnect"] = o.interconnect;
  if (o.hardware) {
    const hw = loadHardwareFile(o.hardware);
    gpu = hw.gpu;
    gpus ??= hw.gpus;
    interconnect ??= hw.interconnect;
  } else if (o.cpuBandwidth || o.cpuCores) {
    if (!o.cpuBandwidth)
      throw new UsageError("a CPU host needs its memory bandwidth: --cpu-bandwidth 40GB/s (with --cpu-cores N)");
    const cores = intOpt("--cpu-cores", o.cpuCores);
    // AVX2 FMA: 2 units × 8 FP32 lanes × 2 flops × ~3 GHz ≈ 0.1 TFLOPS a core (decode is bandwidth-bound anyway).
    gpu = {
      name: o.cpu ?? "CPU host",
      arch: "cpu",
      bandwidth: o.cpuBandwidth,
      tflopsBf16: (cores && cores > 0 ? cores : 1) * 0.1,
      memory: o.cpuMemory,
    };
  } else if (o.cpu) {
    const c = findGpu(o.cpu);
    if (c?.kind !== "cpu")
      throw new UsageError(`--cpu "${o.cpu}" is not a catalog CPU`, {
        hint: "give a catalog CPU (inferscope model catalog), or describe the host: --cpu-bandwidth 40GB/s --cpu-cores 16",
      });
    gpu = o.cpu;
  } else if (o.gpuBandwidth || o.gpuTflopsBf16 || o.gpuMemory) {
    const spec: CustomGpuSpec = {
      base: o.gpu && findGpu(o.gpu) ? o.gpu : undefined,
      name: o.gpu && !findGpu(o.gpu) ? o.gpu : undefined,
      bandwidth: o.gpuBandwidth,
      tflopsBf16: numOpt("--gpu-tflops-bf16", o.gpuTflopsBf16),
      memory: o.gpuMemory,
    };
    gpu = spec;
  } else {
    if (!o.gpu)
      throw new UsageError(
        "--gpu is required (a catalog name such as rtx-pro-6000, or --gpu-bandwidth/--gpu-tflops-bf16/--gpu-memory, or --hardware file.yaml; for a CPU: --cpu NAME or --cpu-bandwidth/--cpu-cores)",
      );
    gpu = o.gpu;
  }
  const tp = intOpt("--tp", o.tp);
  if (o.topo) {
    const topo = loadTopo(o.topo);
    const n = tp ?? gpus ?? topo.gpus.length;
    const base = typeof gpu === "string" ? findGpu(gpu) : undefined;
    interconnect = interconnectFromTopo(
      topo,
      n,
      base?.pcie.gen ?? 5,
      base?.scaleUp?.gen ?? 4,
      `nvidia-smi topo ${o.topo}`,
    );
  }
  const engine = o.engine?.toLowerCase().replace(/[^a-z]/g, "") as Engine | undefined;
  if (engine && !ENGINES.includes(engine))
    throw new UsageError(`unknown engine "${o.engine}"; one of ${ENGINES.join(", ")}`);
  let calibration: Calibration | undefined;
  if (o.calibration) {
    const doc = loadJson(o.calibration) as { calibration?: Calibration } & Calibration;
    calibration = doc.calibration ?? doc;
    if (!calibration?.params)
      throw new UsageError(`${o.calibration}: not a calibration (expected the JSON of \`model fit --json\`)`);
  }
  return {
    model,
    quant: o.quant,
    kvDtype: o.kvDtype,
    gpu,
    gpus,
    tp,
    ep: intOpt("--ep", o.ep),
    pp: intOpt("--pp", o.pp),
    dp: intOpt("--dp", o.dp),
    interconnect,
    engine,
    engineVersion: o.engineVersion,
    cudaGraphs: o.eager ? false : undefined,
    ncclProto: o.ncclProto,
    ncclAlgo: o.ncclAlgo,
    customAllReduce: o.customAllReduce,
    batch: intOpt("--batch", o.batch),
    contextLen: intOpt("--context", o.context),
    inputLen: intOpt("--input-len", o.inputLen),
    outputLen: intOpt("--output-len", o.outputLen),
    measuredBandwidthGBs: o.measuredBandwidth ? parseBandwidthGBs(o.measuredBandwidth) : undefined,
    calibration,
  };
}
