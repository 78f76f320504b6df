// Builds a ModelInput from command-line options (strings), reading the files they name through io.ts.
import { existsSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { InputError, UsageError } from "../errors.ts";
import { checkInputFile } from "../input-file.ts";
import { loadJsonl, loadShareGpt } from "../load/workload.ts";
import { type Architecture, findModel } from "./architecture.ts";
import type { Engine } from "./collectives.ts";
import type { CustomGpuSpec } from "./hardware.ts";
import { findGpu, parseBandwidthGBs } from "./hardware.ts";
import { loadHardwareFile, loadJson, loadModelArg, loadTopo } from "./io.ts";
import type { Calibration, ModelInput } from "./resolve.ts";
import { ENGINES } from "./resolve.ts";
import { interconnectFromTopo } from "./topology.ts";
import type { LengthDist, WorkloadSpec } from "./workload.ts";
import { parseLengths } from "./workload.ts";

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
  ncclFallback?: string;
  customAllReduce?: boolean;
  batch?: string;
  context?: string;
  inputLen?: string;
  outputLen?: string;
  calibration?: string;
}

// Every count here (GPUs, parallel sizes, batch, lengths, cores) is 1 or more: a zero would model nothing.
function intOpt(flag: string, v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (v.trim() === "" || !Number.isSafeInteger(n) || n < 1)
    throw new UsageError(`${flag} expects a whole number ≥ 1 (got "${v}")`);
  return n;
}

function yesNoOpt(flag: string, v: string | undefined): boolean | undefined {
  if (v === undefined) return undefined;
  const t = v.trim().toLowerCase();
  if (t === "yes" || t === "true") return true;
  if (t === "no" || t === "false") return false;
  throw new UsageError(`${flag} expects yes or no (got "${v}")`);
}

/** A bandwidth flag's value checked with its own name: > 0 and a bandwidth (the flag's text is kept). */
function bandwidthOpt(flag: string, v: string | undefined): string | undefined {
  if (v === undefined) return undefined;
  let gbs: number;
  try {
    gbs = parseBandwidthGBs(v);
  } catch {
    throw new UsageError(`${flag}: not a bandwidth: "${v}" (examples: 936GB/s, 1.8TB/s)`);
  }
  if (!(gbs > 0)) throw new UsageError(`${flag} must be more than 0, got "${v}"`);
  return v;
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
  // Files first, each named by its flag: a directory or a missing file is refused before any work.
  for (const [flag, path] of [
    ["--hardware", o.hardware],
    ["--topo", o.topo],
    ["--calibration", o.calibration],
  ] as const)
    if (path !== undefined) checkInputFile(flag, path);
  const model = modelArg(o.model);
  let gpu: ModelInput["gpu"];
  let gpus = intOpt("--gpus", o.gpus);
  let interconnect: ModelInput["interconnect"] = o.interconnect;
  if (o.hardware) {
    const hw = loadHardwareFile(o.hardware);
    gpu = hw.gpu;
    gpus ??= hw.gpus;
    interconnect ??= hw.interconnect;
  } else if (o.cpuBandwidth || o.cpuCores) {
    bandwidthOpt("--cpu-bandwidth", o.cpuBandwidth);
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
    bandwidthOpt("--gpu-bandwidth", o.gpuBandwidth);
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
  const pp = intOpt("--pp", o.pp);
  const dp = intOpt("--dp", o.dp);
  checkParallelism({ tp, pp, dp, gpus, gpusFrom: o.gpus !== undefined ? "--gpus" : "--hardware" });
  return {
    model,
    quant: o.quant,
    kvDtype: o.kvDtype,
    gpu,
    gpus,
    tp,
    ep: intOpt("--ep", o.ep),
    pp,
    dp,
    interconnect,
    engine,
    engineVersion: o.engineVersion,
    cudaGraphs: o.eager ? false : undefined,
    ncclProto: ncclListFlag("--nccl-proto", o.ncclProto),
    ncclAlgo: ncclListFlag("--nccl-algo", o.ncclAlgo),
    ncclFallback: yesNoOpt("--nccl-fallback", o.ncclFallback),
    customAllReduce: o.customAllReduce,
    batch: intOpt("--batch", o.batch),
    contextLen: intOpt("--context", o.context),
    inputLen: intOpt("--input-len", o.inputLen),
    outputLen: intOpt("--output-len", o.outputLen),
    measuredBandwidthGBs: o.measuredBandwidth
      ? parseBandwidthGBs(bandwidthOpt("--measured-bandwidth", o.measuredBandwidth)!)
      : undefined,
    calibration,
  };
}

/**
 * A --model value: a path that exists (a folder must hold config.json), else a catalog name or
 * Hugging Face id ("zai-org/GLM-5" has a slash but is no path), else a missing file named with its flag.
 */
export function checkModelArg(arg: string): void {
  let dir = false;
  try {
    dir = statSync(arg).isDirectory();
  } catch {
    if (findModel(arg)) return;
    if (/[/\\]|\.json$|\.gguf$/i.test(arg))
      throw new InputError(`--model ${arg}: no such file or directory, and not a catalog model`, {
        hint: "give a catalog name or Hugging Face id (`inferscope model catalog models`), a model folder, a config.json or a .gguf file",
      });
    return;
  }
  if (dir && !existsSync(join(arg, "config.json")))
    throw new UsageError(`--model ${arg}: is a directory without config.json`, {
      hint: "give a catalog name, a Hugging Face model folder (with config.json), a config.json, or a .gguf file",
    });
  if (!dir) checkInputFile("--model", arg);
}

/** The --model value as the resolver takes it: an architecture read from a file, or a catalog name. */
export function modelArg(arg: string): string | Architecture {
  checkModelArg(arg);
  return existsSync(arg) ? loadModelArg(arg) : arg;
}

/**
 * The parallel layout against the GPU count: one replica spans TP × PP GPUs, so TP × PP must divide
 * --gpus (TP 3 on 8 GPUs leaves 2 idle: not a deployment any engine makes), and TP × PP × DP must fit.
 */
export function checkParallelism(p: {
  tp?: number;
  pp?: number;
  dp?: number;
  gpus?: number;
  /** The flag the GPU count came from (--gpus, or --hardware's `gpus`). */
  gpusFrom?: string;
}): void {
  for (const [flag, v] of [
    ["--tp", p.tp],
    ["--pp", p.pp],
    ["--dp", p.dp],
    ["--gpus", p.gpus],
  ] as const)
    if (v === 0) throw new UsageError(`${flag} must be ≥ 1, got 0`);
  if (p.gpus === undefined) return;
  const tp = p.tp ?? 1;
  const pp = p.pp ?? 1;
  const dp = p.dp ?? 1;
  const from = p.gpusFrom ?? "--gpus";
  const replica = tp * pp;
  const layout = pp > 1 ? `TP ${tp} × PP ${pp} = ${replica} GPUs per replica` : `--tp ${tp}`;
  if (p.gpus % replica !== 0) {
    const lower = Math.floor(p.gpus / replica) * replica;
    throw new UsageError(`${layout} does not divide ${from} ${p.gpus}: ${p.gpus % replica} GPU(s) would be left idle`, {
      hint: `one replica is ${replica} GPUs: give --gpus ${replica}${lower > replica ? ` (or ${lower} with --dp ${lower / replica})` : ""}${from === "--gpus" ? "" : " to override the hardware file"}, or a --tp that divides ${p.gpus}`,
    });
  }
  if (replica * dp > p.gpus)
    throw new UsageError(`TP ${tp} × PP ${pp} × DP ${dp} = ${replica * dp} GPUs, but ${from} is ${p.gpus}`);
}

const NCCL_FUNCS = ["Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce"] as const;
const NCCL_LISTS = {
  "--nccl-proto": { env: "NCCL_PROTO", names: ["LL", "LL128", "Simple"], example: "^LL128;allreduce:LL" },
  "--nccl-algo": {
    env: "NCCL_ALGO",
    names: ["Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT"],
    example: "ring;allreduce:tree,ring",
  },
} as const;

/**
 * Checks an NCCL_PROTO / NCCL_ALGO value as NCCL (≥ 2.24) parses it, and returns what the model uses: the
 * all-reduce's list. Grammar: `[^]a,b[;func:[^]a,b]…`: comma lists, case-insensitive names, `^` excludes,
 * entries after the first prefixed by a collective (allreduce, allgather, …), later entries win. NCCL
 * refuses unknown names (older releases ignored them, silently changing nothing); so do we, naming the flag.
 * A value with no all-reduce entry leaves the all-reduce on auto (undefined).
 */
export function ncclListFlag(
  flag: keyof typeof NCCL_LISTS,
  value: string | undefined,
  label: string = flag,
): string | undefined {
  if (value === undefined) return undefined;
  const { env, names, example } = NCCL_LISTS[flag];
  const bad = (why: string): never => {
    throw new UsageError(`${label} "${value}": ${why}`, {
      hint: `${env} takes a comma list of ${names.join(", ")} (any case), ^ to exclude, and per-collective entries such as "${example}"`,
    });
  };
  const entries = value.split(";").filter((e) => e !== "");
  if (!entries.length) bad("empty");
  let allReduce: string | undefined;
  entries.forEach((entry, i) => {
    const parts = entry.split(":").filter((x) => x !== "");
    if (parts.length > 2) bad(`"${entry}" has more than one ":"`);
    let func: string | undefined;
    let list = parts[0] ?? "";
    if (parts.length === 2) {
      func = NCCL_FUNCS.find((f) => f.toLowerCase() === parts[0]!.toLowerCase());
      if (!func) bad(`unknown collective "${parts[0]}" (one of ${NCCL_FUNCS.join(", ")})`);
      list = parts[1]!;
    } else if (i > 0) bad(`every entry after the first needs a collective prefix (e.g. allreduce:${entry})`);
    const exclude = list.startsWith("^");
    const items = (exclude ? list.slice(1) : list).split(",").filter((x) => x !== "");
    const canon = items.map((x) => {
      const n = names.find((a) => a.toLowerCase() === x.toLowerCase());
      if (!n)
        bad(
          /\s/.test(x)
            ? `"${x}" has spaces (NCCL splits on commas only)`
            : `unknown ${env === "NCCL_PROTO" ? "protocol" : "algorithm"} "${x}" (one of ${names.join(", ")})`,
        );
      return n!;
    });
    if (!canon.length) bad(`"${entry}" names nothing`);
    // NCCL marks a collective forced only when a name matched, which every accepted entry has.
    if (func === undefined || func === "AllReduce") allReduce = `${exclude ? "^" : ""}${canon.join(",")}`;
  });
  // A plain list is passed on as written (it is what reports show); a per-collective one as its all-reduce part.
  return entries.length === 1 && !value.includes(":") ? value : allReduce;
}

/** NCCL_PROTO / NCCL_ALGO in a server's environment (a --variant arm), checked as NCCL parses them. */
export function checkNcclEnv(env: Record<string, string | undefined>, where: string): void {
  if (env.NCCL_PROTO !== undefined) ncclListFlag("--nccl-proto", env.NCCL_PROTO, `${where}: NCCL_PROTO`);
  if (env.NCCL_ALGO !== undefined) ncclListFlag("--nccl-algo", env.NCCL_ALGO, `${where}: NCCL_ALGO`);
}

// ---------------------------------------------------------------- workload (what a benchmark measures)

export interface WorkloadCliOptions {
  concurrency?: string;
  requestRate?: string;
  lengths?: string;
  /** `sharegpt` or `jsonl` with datasetPath: the lengths bench would send from that file (its estimate and filters). */
  dataset?: string;
  datasetPath?: string;
  inputLen?: string;
  outputLen?: string;
  maxNumBatchedTokens?: string;
  maxNumSeqs?: string;
  requests?: string;
}

/** The workload flags → a WorkloadSpec, or undefined when neither --concurrency nor --request-rate is given. */
export function workloadFromOptions(o: WorkloadCliOptions): WorkloadSpec | undefined {
  if (o.concurrency === undefined && o.requestRate === undefined) {
    for (const [flag, v] of [
      ["--lengths", o.lengths],
      ["--dataset", o.dataset],
      ["--dataset-path", o.datasetPath],
      ["--max-num-batched-tokens", o.maxNumBatchedTokens],
      ["--max-num-seqs", o.maxNumSeqs],
      ["--requests", o.requests],
    ] as const)
      if (v !== undefined)
        throw new UsageError(`${flag} describes a workload: give --concurrency C or --request-rate R`);
    return undefined;
  }
  const c = intOpt("--concurrency", o.concurrency);
  // The schedule simulates max(200, 25 × C) requests unless --requests says otherwise, and --requests stops at 100000.
  if (c !== undefined && c > 4000 && o.requests === undefined)
    throw new UsageError(
      `--concurrency ${c}: at most 4000 without --requests (25 × C requests are simulated, at most 100000)`,
    );
  let inputLen: LengthDist;
  let outputLen: LengthDist;
  if (o.dataset !== undefined || o.datasetPath !== undefined) {
    if (o.lengths) throw new UsageError("give --lengths or --dataset/--dataset-path, not both");
    const ds = (o.dataset ?? "sharegpt").toLowerCase();
    if (ds !== "sharegpt" && ds !== "jsonl")
      throw new UsageError(`--dataset "${o.dataset}": sharegpt or jsonl (random lengths: --input-len/--output-len)`);
    if (!o.datasetPath)
      throw new UsageError(`--dataset ${ds} needs --dataset-path FILE (no ${ds} file ships with inferscope)`);
    checkInputFile("--dataset-path", o.datasetPath);
    const fixedOut = intOpt("--output-len", o.outputLen);
    const prompts =
      ds === "sharegpt" ? loadShareGpt(o.datasetPath, fixedOut) : loadJsonl(o.datasetPath, fixedOut ?? 256);
    if (!prompts.length)
      throw new InputError(
        `${o.datasetPath}: no usable ${ds} requests (vLLM's filters: 4 ≤ input ≤ 1024, input + output ≤ 2048)`,
      );
    const ins = prompts.map((x) => x.inputLen);
    const outs = prompts.map((x) => x.outputLen);
    const stat = (xs: number[]) => {
      const mu = xs.reduce((a, b) => a + b, 0) / xs.length;
      return { mean: mu, sd: Math.sqrt(xs.reduce((a, b) => a + (b - mu) ** 2, 0) / xs.length) };
    };
    const src = `${ds} ${o.datasetPath} (${prompts.length} requests; bench's token estimate and vLLM's filters)`;
    inputLen = { ...stat(ins), samples: ins, source: src };
    outputLen = { ...stat(outs), samples: outs, source: src };
  } else if (o.lengths) {
    if (o.inputLen !== undefined || o.outputLen !== undefined)
      throw new UsageError("--lengths gives the request lengths: drop --input-len/--output-len");
    checkInputFile("--lengths", o.lengths);
    const l = parseLengths(readFileSync(o.lengths, "utf8"), o.lengths);
    inputLen = l.input;
    outputLen = l.output;
  } else {
    const i = intOpt("--input-len", o.inputLen) ?? 1024;
    const n = intOpt("--output-len", o.outputLen) ?? 256;
    if (i < 1 || n < 1) throw new UsageError("--input-len and --output-len must be ≥ 1 for a workload");
    inputLen = { mean: i, sd: 0, source: o.inputLen ? "--input-len (fixed)" : "default 1024 (fixed)" };
    outputLen = { mean: n, sd: 0, source: o.outputLen ? "--output-len (fixed)" : "default 256 (fixed)" };
  }
  const mnbt = intOpt("--max-num-batched-tokens", o.maxNumBatchedTokens);
  if (mnbt === 0) throw new UsageError("--max-num-batched-tokens must be ≥ 1");
  const mns = intOpt("--max-num-seqs", o.maxNumSeqs);
  if (mns === 0) throw new UsageError("--max-num-seqs must be ≥ 1");
  const req = intOpt("--requests", o.requests);
  if (req !== undefined && (req < 1 || req > 100_000)) throw new UsageError("--requests must be 1–100000");
  return {
    concurrency: c,
    requestRate: numOpt("--request-rate", o.requestRate),
    inputLen,
    outputLen,
    maxNumBatchedTokens: mnbt,
    maxNumSeqs: mns,
    requests: req,
  };
}
