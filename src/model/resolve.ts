// Turns a ModelInput (names or objects) into resolved catalog entries and checked parallelism. Pure.
import { UsageError } from "../errors.ts";
import type { Architecture } from "./architecture.ts";
import { requireModel } from "./architecture.ts";
import type { Engine } from "./collectives.ts";
import { engineDate, hostOverlap } from "./engines.ts";
import type { CustomGpuSpec, Gpu, Interconnect } from "./hardware.ts";
import { customGpu, defaultInterconnect, parseInterconnect, requireGpu } from "./hardware.ts";
import type { KvFormat, Recipe } from "./quantization.ts";
import { kvFormat, recipe } from "./quantization.ts";

export const ENGINES: Engine[] = ["vllm", "sglang", "trtllm", "llamacpp", "gptfast", "mlx"];

export interface Calibration {
  /** Posterior mean and sd per fitted parameter (see fit.ts PARAMS). */
  params: Partial<Record<CalibParam, { mean: number; sd: number }>>;
  source: string;
  /** The measured bandwidth 1/η_m was fitted against (applies when the input gives none). */
  measuredBandwidthGBs?: number;
}
export type CalibParam = "invEta" | "invEtaExperts" | "arLatUs" | "arUsPerKB" | "skewUs" | "fixedMs" | "prefillScale";

export interface ModelInput {
  model: string | Architecture;
  quant?: string;
  kvDtype?: string;
  gpu: string | Gpu | CustomGpuSpec;
  gpus?: number;
  tp?: number;
  ep?: number;
  pp?: number;
  dp?: number;
  interconnect?: string | Interconnect;
  engine?: Engine;
  /** Engine release (e.g. "v0.11.0", "b6918", "0.28.2") or a date (YYYY-MM or YYYY-MM-DD): sets the engine-maturity
   * factor. Without it the prediction interval covers the spread across releases. */
  engineVersion?: string;
  cudaGraphs?: boolean;
  /** Server flags that change how a step runs (`--async-scheduling`, `--disable-overlap-schedule`, …). */
  engineFlags?: string[];
  ncclProto?: string;
  ncclAlgo?: string;
  /** Whether NCCL's ring search falls back (its log: "falling back to simple order"); unset: derived, maybe unknown. */
  ncclFallback?: boolean;
  customAllReduce?: boolean;
  batch?: number;
  contextLen?: number;
  inputLen?: number;
  outputLen?: number;
  /** Measured device-memory copy bandwidth, GB/s (replaces spec × efficiency). */
  measuredBandwidthGBs?: number;
  calibration?: Calibration;
  /** What-if: communication costs nothing. */
  zeroComm?: boolean;
  /** Speculative decoding: mean tokens accepted per step (MTP); 1 = off. */
  tokensPerStep?: number;
}

export interface Resolved {
  input: ModelInput;
  arch: Architecture;
  recipe: Recipe;
  kv: KvFormat;
  gpu: Gpu;
  link: Interconnect;
  engine: Engine;
  cudaGraphs: boolean;
  /** Whether the engine's host work overlaps the GPU step (engines.ts hostOverlap), and why. */
  hostOverlap: { overlap: boolean; why: string };
  gpus: number;
  tp: number;
  ep: number;
  pp: number;
  dp: number;
  /** Tensor-parallel degree inside each expert. */
  moeTp: number;
  /** All-to-all MoE (DP attention + EP beyond the TP group). */
  moeAllToAll: boolean;
  batch: number;
  contextLen: number;
  inputLen: number;
  outputLen: number;
  tokensPerStep: number;
}

function int(name: string, v: number | undefined, dflt: number, min = 1): number {
  const x = v ?? dflt;
  if (!Number.isInteger(x) || x < min) throw new UsageError(`--${name} must be an integer ≥ ${min} (got ${v})`);
  return x;
}

export function resolve(input: ModelInput): Resolved {
  const arch = typeof input.model === "string" ? requireModel(input.model) : input.model;
  const gpu =
    typeof input.gpu === "string"
      ? requireGpu(input.gpu)
      : "tflops" in input.gpu && "bandwidthGBs" in input.gpu
        ? (input.gpu as Gpu)
        : customGpu(input.gpu as CustomGpuSpec);
  const engine = (input.engine ?? "vllm") as Engine;
  if (!ENGINES.includes(engine)) throw new UsageError(`unknown engine "${engine}"; one of ${ENGINES.join(", ")}`);
  let tp = int("tp", input.tp, 1);
  let pp = int("pp", input.pp, 1);
  if (engine === "mlx" && (tp > 1 || (input.ep ?? 1) > 1))
    throw new UsageError("--engine mlx is modelled on one device (mlx-lm has no tensor/expert parallelism here)");
  // llama.cpp's default multi-GPU mode splits layers (--split-mode layer): a pipeline, not tensor parallelism.
  if (engine === "llamacpp" && tp > 1) {
    pp *= tp;
    tp = 1;
  }
  const dp = int("dp", input.dp, 1);
  const ep = int("ep", input.ep, 1);
  const gpus = int("gpus", input.gpus, tp * pp * dp);
  if (tp * pp * dp > gpus)
    throw new UsageError(`TP ${tp} × PP ${pp} × DP ${dp} = ${tp * pp * dp} GPUs, but --gpus is ${gpus}`);
  if (arch.moe === undefined && ep > 1)
    throw new UsageError(`--ep ${ep} needs a mixture-of-experts model (${arch.name} is dense)`);
  if (ep > tp * dp) throw new UsageError(`--ep ${ep} exceeds TP × DP = ${tp * dp} devices per pipeline stage`);
  if (ep <= tp && tp % ep !== 0)
    throw new UsageError(`--ep ${ep} must divide --tp ${tp} (experts TP ${tp}/${ep} × EP ${ep})`);
  if (arch.moe && arch.moe.experts % ep !== 0)
    throw new UsageError(`--ep ${ep} must divide the expert count ${arch.moe.experts}`);
  const moeAllToAll = ep > tp;
  const moeTp = moeAllToAll ? 1 : tp / ep;
  const quantName = input.quant ?? arch.declaredQuant?.recipe ?? (arch.ggufBytes ? "gguf" : "bf16");
  const rec = recipe(quantName, arch);
  const kv = kvFormat(input.kvDtype ?? "auto", arch);
  const n = tp;
  const link =
    input.interconnect === undefined
      ? defaultInterconnect(gpu, n)
      : typeof input.interconnect === "string"
        ? parseInterconnect(input.interconnect, gpu, n)
        : input.interconnect;
  const cudaGraphs = input.cudaGraphs ?? true;
  const date = input.engineVersion ? engineDate(engine, input.engineVersion).date : undefined;
  const batch = int("batch", input.batch, 1);
  const inputLen = int("input-len", input.inputLen, 1024, 0);
  const outputLen = int("output-len", input.outputLen, 256, 1);
  const contextLen = int("context", input.contextLen, inputLen + Math.floor(outputLen / 2), 0);
  const tokensPerStep = input.tokensPerStep ?? 1;
  if (!(tokensPerStep >= 1)) throw new UsageError("tokens per step must be ≥ 1");
  return {
    input,
    arch,
    recipe: rec,
    kv,
    gpu,
    link,
    engine,
    cudaGraphs,
    hostOverlap: hostOverlap(engine, date, input.engineFlags),
    gpus,
    tp,
    ep,
    pp,
    dp,
    moeTp,
    moeAllToAll,
    batch,
    contextLen,
    inputLen,
    outputLen,
    tokensPerStep,
  };
}
