// Deployment discovery: ask the server, read the command and (for a local server) this host, then
// combine with the user's flags. `discover()` does the I/O; everything it decides is in detect.ts.
import { type Architecture, findModel } from "../model/architecture.ts";
import { findGpu } from "../model/hardware.ts";
import { loadModelArg } from "../model/io.ts";
import type { ModelCliOptions } from "../model/options.ts";
import { commandFacts } from "./command.ts";
import {
  type Discovery,
  discoverDeployment,
  type GivenDeployment,
  type HostFacts,
  type ProfileDeployment,
} from "./detect.ts";
import { hostFacts, isLocalUrl, readableModel } from "./host.ts";
import { probeServer, type ServerAnswers } from "./probe.ts";

export { type CommandFacts, commandFacts } from "./command.ts";
export * from "./detect.ts";
export * from "./experiments.ts";
export { hostFacts, isLocalUrl, measureCopyBandwidthGBs, readableModel } from "./host.ts";
export { INFO_PATHS, type ProbeOptions, probeServer, type ServerAnswers } from "./probe.ts";

export interface DiscoverOptions {
  url: string;
  serverCmd?: string;
  given: GivenDeployment;
  profile?: ProfileDeployment;
  apiKey?: string;
  signal?: AbortSignal;
  /** Host facts to use instead of reading this machine (tests). */
  host?: HostFacts | null;
}

export interface DiscoverResult {
  discovery: Discovery;
  answers: ServerAnswers;
  host?: HostFacts;
}

export async function discover(o: DiscoverOptions): Promise<DiscoverResult> {
  const answers = await probeServer(o.url, { apiKey: o.apiKey, signal: o.signal });
  const command = commandFacts(o.serverCmd);
  const local = Boolean(o.serverCmd) || isLocalUrl(o.url);
  const base = {
    answers,
    command,
    given: o.given,
    profile: o.profile,
    readableModel: (p: string) => readableModel(p),
    catalogModel: (n: string) => findModel(n)?.name ?? null,
    catalogDevice: (n: string) => findGpu(n)?.kind ?? null,
  };
  let host: HostFacts | undefined = o.host === null ? undefined : o.host;
  if (host === undefined && local) host = hostFacts({ measure: false });
  let discovery = discoverDeployment({ ...base, host });
  // The copy bandwidth is measured only when it is what the model will run on (a detected CPU host).
  if (
    discovery.deviceKind.source === "detected" &&
    discovery.deviceKind.value === "cpu" &&
    host &&
    o.host === undefined
  ) {
    host = hostFacts({ measure: true });
    discovery = discoverDeployment({ ...base, host });
  }
  describeModel(discovery);
  return { discovery, answers, host };
}

/** Reads the discovered model (GGUF header, config.json, catalog) for its name and declared quantization. */
export function describeModel(d: Discovery): void {
  if (!d.model.value) return;
  let arch: Architecture | undefined;
  try {
    const a = loadModelArg(d.model.value);
    arch = typeof a === "string" ? findModel(a) : a;
  } catch (err) {
    d.notes.push(`the model ${d.model.value} could not be read: ${(err as Error).message}`);
    return;
  }
  if (!arch) return;
  d.modelName = {
    value: arch.name,
    source: d.model.source === "given" ? "given" : "detected",
    from: arch.source,
  };
  if (d.quant.value === null) {
    if (arch.ggufBytes) d.quant = { value: "gguf", source: "detected", from: "GGUF header: per-tensor types" };
    else if (arch.declaredQuant)
      d.quant = {
        value: arch.declaredQuant.recipe,
        source: "detected",
        from: `config.json quantization_config (${arch.declaredQuant.method})`,
      };
  }
}

/** The analytical model's engine for a serving engine (the model has constants for these five). */
const MODEL_ENGINE: Record<string, { engine: string; note?: string }> = {
  vllm: { engine: "vllm" },
  sglang: { engine: "sglang" },
  trtllm: { engine: "trtllm" },
  llamacpp: { engine: "llamacpp" },
  gptfast: { engine: "gptfast" },
  tgi: { engine: "vllm", note: "the model has no TGI constants: vLLM's per-kernel and engine costs are used" },
  triton: { engine: "trtllm", note: "Triton serves TensorRT-LLM here: its constants are used" },
  dynamo: { engine: "vllm", note: "Dynamo's workers are modelled with vLLM's constants" },
};

export interface ModelInputs {
  /** The options `model predict` would take for this deployment, or null when something is missing. */
  options: ModelCliOptions | null;
  /** For each missing input, the flag that gives it. */
  missing: string[];
  /** Assumptions the model must make, stated in the report. */
  assumptions: string[];
}

/** The `model predict` options for a discovered deployment (pure): nothing the discovery lacks is invented. */
export function modelInputsFor(d: Discovery, g: GivenDeployment, host?: HostFacts): ModelInputs {
  const missing: string[] = [];
  const assumptions: string[] = [];
  if (!d.model.value)
    missing.push(
      `the model: give --model (a catalog name, a config.json or a .gguf file)${d.servedModel.value ? `; the server serves "${d.servedModel.value}", which is neither in the catalog nor readable here` : ""}`,
    );
  const o: ModelCliOptions = { model: d.model.value ?? undefined, quant: d.quant.value ?? undefined };
  if (g.hardware) o.hardware = g.hardware;
  else if (g.cpu || g.cpuBandwidth) {
    o.cpu = g.cpu;
    o.cpuBandwidth = g.cpuBandwidth;
    o.cpuCores = g.cpuCores !== undefined ? String(g.cpuCores) : undefined;
  } else if (g.gpu || g.gpuBandwidth) {
    o.gpu = g.gpu;
    o.gpuBandwidth = g.gpuBandwidth;
    o.gpuTflopsBf16 = g.gpuTflopsBf16;
    o.gpuMemory = g.gpuMemory;
  } else if (d.deviceKind.source === "detected" && d.deviceKind.value === "cpu" && host?.copyBandwidthGBs) {
    o.cpu = d.device.value ?? "this host";
    o.cpuBandwidth = `${host.copyBandwidthGBs}GB/s`;
    o.measuredBandwidth = `${host.copyBandwidthGBs}GB/s`;
    o.cpuCores = String(host.cores);
    o.cpuMemory = `${host.memoryGB}GB`;
    assumptions.push(
      `device: this host's CPU, bandwidth ${host.copyBandwidthGBs} GB/s measured by a one-thread 64 MiB copy (a floor: several threads may stream more); dense TFLOPS ≈ 0.1 × ${host.cores} cores`,
    );
  } else if (d.device.source === "profile" && d.device.value) o.gpu = d.device.value;
  else
    missing.push(
      d.engine.value === "llamacpp"
        ? "the hardware: give --cpu NAME, --cpu-bandwidth GB/s with --cpu-cores N, --gpu NAME, or --hardware file.yaml"
        : "the hardware: give --gpu NAME (with --gpus N and --tp N), --hardware file.yaml, or --cpu / --cpu-bandwidth for a CPU host",
    );
  if (d.tp.value !== null) o.tp = String(d.tp.value);
  else if (o.gpu || o.gpuBandwidth || o.hardware) {
    const n = d.gpus.value ?? 1;
    o.tp = String(n);
    assumptions.push(`TP neither given nor detected: the model assumes TP ${n} (give --tp)`);
  }
  if (d.gpus.value !== null) o.gpus = String(d.gpus.value);
  if (d.interconnect.value && d.interconnect.value !== "none") o.interconnect = d.interconnect.value;
  if (d.engine.value) {
    const m = MODEL_ENGINE[d.engine.value];
    if (m) {
      o.engine = m.engine;
      if (m.note) assumptions.push(m.note);
    }
  } else missing.push("the engine: give --engine (vllm, sglang, llamacpp, trtllm, tgi)");
  return { options: missing.length ? null : o, missing, assumptions };
}
