// Simulator profiles: data files (YAML/JSON) describing a deployment's hidden parameters.
// Every field can be overridden with dotted keys (`--set cost.launchUs.graph=3`).
import { readdirSync, readFileSync } from "node:fs";
import { basename, dirname, extname, join } from "node:path";
import { fileURLToPath } from "node:url";
import YAML from "yaml";
import { z } from "zod";
import { CLI_ENTRY } from "../entry.ts";
import { InputError, UsageError } from "../errors.ts";
import { findModel } from "../model/architecture.ts";
import { SEED_DEPLOYMENT } from "../model/examples.ts";
import type { Gpu, Interconnect } from "../model/hardware.ts";
import { findGpu, parseInterconnect, pcieLink, requireGpu } from "../model/hardware.ts";
import type { ModelCliOptions } from "../model/options.ts";
import { shellQuote } from "../shell.ts";

/** The embedded sim's profile when none is named: the worked example's deployment (model/examples.ts). */
export const DEFAULT_PROFILE = "glm5-8x-rtxpro6000-pcie";

const num = z.number().finite();
const pos = num.positive();
const nonneg = num.nonnegative();
const int = z.number().int().positive();
const protoUs = z.object({ LL: nonneg.optional(), LL128: nonneg.optional(), Simple: nonneg.optional() }).strict();

export const ProfileSchema = z
  .object({
    name: z.string().min(1),
    description: z.string().default(""),
    vllmVersion: z.string().default("0.11.0"),
    model: z
      .object({
        servedName: z.string().min(1),
        architecture: z.string().min(1),
        layers: int,
        hidden: int,
        vocabSize: int,
        maxModelLen: int,
        /** Bytes per activation element (BF16 = 2): sets the all-reduce message size. */
        activationBytes: pos.default(2),
        attention: z.enum(["gqa", "mla"]).default("gqa"),
        /** Routed experts: bytes of one expert (all MoE layers) on one GPU, and the routing. */
        moe: z.object({ experts: int, topK: int, expertBytesPerGpu: nonneg }).strict().optional(),
      })
      .strict(),
    hardware: z
      .object({
        /** The device name the "deployment" reports (nvidia-smi / profiler deviceProperties). */
        gpu: z.string().min(1),
        /** The GPU in inferscope's catalog (`inferscope model catalog gpus`); default: `gpu`. */
        catalogGpu: z.string().min(1).optional(),
        gpuCount: int,
        /** Effective (achieved) memory bandwidth per GPU, GB/s. */
        memBandwidthGBs: pos,
        /** Effective dense GEMM throughput per GPU, TFLOP/s. */
        gemmTflops: pos,
        /** "pcie" (the GPU's own slot), "nvlink" (its own NVLink), or any `model --interconnect` name (pcie4, nvlink4, ...). */
        interconnect: z.string().min(1),
        /** Overrides the link's NCCL bus bandwidth, GB/s (catalog: PCIe Gen5 x16 48, NVLink4 370). */
        linkGBs: pos.optional(),
        /** Telemetry (src/sim/telemetry.ts): board power limit, W; default a class figure by GPU (docs/sim.md). */
        powerLimitW: pos.optional(),
        /** A lower enforced limit (`nvidia-smi -pl`), W; default the board limit. */
        enforcedPowerLimitW: pos.optional(),
        /** Power between steps with the serving process holding its context and clocks up, W. */
        idleW: nonneg.optional(),
        /** Max SM clock and the memory clock as nvidia-smi / DCGM report them, MHz. */
        smClockMaxMHz: pos.optional(),
        memClockMHz: pos.optional(),
      })
      .strict(),
    engine: z
      .object({
        tensorParallelSize: int,
        maxNumSeqs: int.default(256),
        maxNumBatchedTokens: int.default(8192),
        blockSize: int.default(16),
        numGpuBlocks: int,
        enablePrefixCaching: z.boolean().default(true),
        /** Largest decode batch captured as a full CUDA graph. */
        maxCaptureSize: int.default(512),
        customAllReduceMaxBytes: int.default(8 * 1024 * 1024),
      })
      .strict(),
    cost: z
      .object({
        /** Non-expert weight bytes read per step per GPU (attention, dense MLP, shared experts, LM head). */
        denseWeightBytes: nonneg,
        /** KV-cache bytes read per context token per sequence per GPU (all layers). */
        kvBytesPerToken: nonneg,
        /** GEMM FLOPs per processed token per GPU. */
        flopsPerToken: nonneg,
        /** Attention FLOPs per processed token per context token per GPU (prefill). */
        attnFlopsPerTokenCtx: nonneg.default(0),
        kernelsPerLayer: int,
        kernelsFixed: z.number().int().min(2).default(10),
        /** Fixed cost per kernel, µs: full CUDA graph, piecewise graph (mixed/prefill steps), eager. */
        launchUs: z.object({ graph: nonneg, piecewise: nonneg, eager: nonneg }).strict(),
        samplingUs: nonneg,
        samplingUsPerSeq: nonneg.default(0),
        schedulerUs: nonneg,
        schedulerUsPerSeq: nonneg.default(0),
        /** Per request, before it reaches the engine: HTTP, tokenization, IPC (ms). */
        frontendMs: nonneg.default(1),
        /** Speculative decoding: drafter cost per draft token per step (µs). */
        draftUsPerToken: nonneg.default(150),
        /** σ of the lognormal step-time noise (mean 1). */
        jitterSigma: nonneg.default(0.02),
      })
      .strict(),
    collectives: z
      .object({
        allReducesPerLayer: z.number().int().nonnegative().default(2),
        /** Extra all-reduces per step (vocabulary-parallel embedding). */
        extraAllReduces: z.number().int().nonnegative().default(1),
        /** Logits all-gathers per step. */
        allGathers: z.number().int().nonnegative().default(1),
        algorithm: z.enum(["Ring", "Tree"]).default("Ring"),
        /** What NCCL's automatic selection picks on this platform at decode sizes. */
        defaultProtocol: z.enum(["LL", "LL128", "Simple"]).default("LL"),
        /** Effective per-call latency in the decode loop (µs) at the profile's TP; else NCCL's model. */
        perCallUs: protoUs.default({}),
        /** Multiplies NCCL's modelled latency (platform misfit). */
        latencyScale: pos.default(1),
        /** Rank skew / sync added to every NCCL call (µs). */
        skewUs: nonneg.default(0),
        /** vLLM custom all-reduce one-shot latency under CUDA graphs (µs). */
        customUs: nonneg.default(5),
        /** Extra CPU/launch cost per collective when not captured in a graph (µs). */
        eagerCallUs: nonneg.default(18),
        /** Logits all-gather latency (µs). */
        allGatherUs: nonneg.default(20),
      })
      .strict(),
    text: z
      .object({
        /** Mean natural output length before EOS (0 = never stops on its own). */
        eosMeanTokens: nonneg.default(0),
        /** With --reasoning: share of the output sent as reasoning_content. */
        reasoningFraction: num.min(0).max(1).default(0.5),
      })
      .strict()
      .default({ eosMeanTokens: 0, reasoningFraction: 0.5 }),
  })
  .strict();

export type Profile = z.output<typeof ProfileSchema>;

/** The profile's hardware as the analytical model's catalog types (src/model/hardware.ts). */
export interface SimHardware {
  gpu: Gpu;
  link: Interconnect;
}

const hardwareCache = new WeakMap<Profile, SimHardware>();

/** Maps `hardware.{catalogGpu,gpu,interconnect,linkGBs}` onto the model's Gpu and Interconnect (memoised). */
export function profileHardware(profile: Profile): SimHardware {
  const hit = hardwareCache.get(profile);
  if (hit) return hit;
  const h = profile.hardware;
  const field = (name: string, err: unknown): InputError =>
    new InputError(`invalid profile: field "hardware.${name}": ${(err as Error).message}`, {
      position: undefined,
      hint: (err as { hint?: string }).hint,
      code: "E_PROFILE",
    });
  let gpu: Gpu;
  try {
    gpu = requireGpu(h.catalogGpu ?? h.gpu);
  } catch (err) {
    throw field(h.catalogGpu ? "catalogGpu" : "gpu", err);
  }
  let link: Interconnect;
  try {
    link =
      h.interconnect.trim().toLowerCase() === "pcie"
        ? pcieLink(gpu.pcie.gen, gpu.pcie.width, null, `profile ${profile.name}: ${gpu.name}'s own PCIe slot`)
        : parseInterconnect(h.interconnect, gpu, h.gpuCount);
  } catch (err) {
    throw field("interconnect", err);
  }
  if (h.linkGBs !== undefined)
    link = { ...link, ncclBusBwGBs: h.linkGBs, source: `${link.source}; bus bandwidth from the profile` };
  const hw = { gpu, link };
  hardwareCache.set(profile, hw);
  return hw;
}

/** vLLM's default --gpu-memory-utilization: the share of GPU memory the engine may use. */
export const GPU_MEMORY_UTILIZATION = 0.9;

/** KV capacity: the profile's own figure (vLLM's logged "# GPU blocks") and what GPU memory implies. */
export interface KvCapacity {
  blocks: number;
  blockSize: number;
  tokens: number;
  source: string;
  /**
   * memory × 0.9 − weights per GPU, over KV bytes per token per GPU (`cost.kvBytesPerToken`); it leaves
   * out activations and CUDA graphs, which vLLM's profiling run also subtracts, so it reads a few % high.
   */
  implied: { blocks: number; memoryBytes: number; weightBytesPerGpu: number; kvBytesPerTokenPerGpu: number };
}

export function kvCapacity(profile: Profile): KvCapacity {
  const { gpu } = profileHardware(profile);
  const memoryBytes = gpu.memoryGB * 1e9;
  const moe = profile.model.moe;
  const weightBytesPerGpu = profile.cost.denseWeightBytes + (moe ? moe.experts * moe.expertBytesPerGpu : 0);
  const kv = profile.cost.kvBytesPerToken;
  const bs = profile.engine.blockSize;
  const implied =
    kv > 0 ? Math.max(0, Math.floor((memoryBytes * GPU_MEMORY_UTILIZATION - weightBytesPerGpu) / (kv * bs))) : 0;
  const blocks = profile.engine.numGpuBlocks;
  return {
    blocks,
    blockSize: bs,
    tokens: blocks * bs,
    source: "profile engine.numGpuBlocks (vLLM's --num-gpu-blocks-override sets it)",
    implied: { blocks: implied, memoryBytes, weightBytesPerGpu, kvBytesPerTokenPerGpu: kv },
  };
}

const here = dirname(fileURLToPath(import.meta.url));
const builtinDir = join(here, "profiles");

/** Names of the profiles shipped with inferscope. */
export function listProfiles(): string[] {
  return readdirSync(builtinDir)
    .filter((f) => f.endsWith(".yaml"))
    .map((f) => basename(f, ".yaml"))
    .sort();
}

/** Sets `a.b.c` = value in a plain object, creating objects on the way. */
export function setPath(obj: Record<string, unknown>, path: string, value: unknown): void {
  const keys = path.split(".");
  let cur: Record<string, unknown> = obj;
  for (let i = 0; i < keys.length - 1; i++) {
    const k = keys[i]!;
    const next = cur[k];
    if (next === undefined || next === null) cur[k] = {};
    else if (typeof next !== "object")
      throw new UsageError(`--set ${path}: "${keys.slice(0, i + 1).join(".")}" is not an object`);
    cur = cur[k] as Record<string, unknown>;
  }
  cur[keys[keys.length - 1]!] = value;
}

/** Parses `key=value` (value as JSON when it parses, else a string). */
export function parseSetting(text: string): [string, unknown] {
  const eq = text.indexOf("=");
  if (eq <= 0) throw new UsageError(`--set expects key=value, got "${text}"`);
  const key = text.slice(0, eq).trim();
  const raw = text.slice(eq + 1).trim();
  let value: unknown = raw;
  try {
    value = JSON.parse(raw);
  } catch {
    /* a bare string */
  }
  return [key, value];
}

/** Validates raw profile data; errors name the source file and the field path. */
export function parseProfile(raw: unknown, source: string, overrides: Record<string, unknown> = {}): Profile {
  const data = structuredClone(raw ?? {}) as Record<string, unknown>;
  for (const [k, v] of Object.entries(overrides)) setPath(data, k, v);
  const r = ProfileSchema.safeParse(data);
  if (!r.success) {
    const issue = r.error.issues[0]!;
    const path = issue.path.join(".") || "(root)";
    throw new InputError(`invalid profile: field "${path}": ${issue.message}`, {
      position: undefined,
      hint: `${source}: fix "${path}" (see docs/sim.md for every field)`,
      code: "E_PROFILE",
    });
  }
  profileHardware(r.data);
  return r.data;
}

/** Loads a built-in profile by name, or a YAML/JSON file by path. */
export function loadProfile(nameOrPath: string, overrides: Record<string, unknown> = {}): Profile {
  const isPath = nameOrPath.includes("/") || /\.(ya?ml|json)$/i.test(nameOrPath);
  const file = isPath ? nameOrPath : join(builtinDir, `${nameOrPath}.yaml`);
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    if (!isPath)
      throw new UsageError(`unknown profile "${nameOrPath}"`, { hint: `available: ${listProfiles().join(", ")}` });
    throw new InputError(`${file}: cannot read profile (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
  }
  let raw: unknown;
  if (extname(file).toLowerCase() === ".json") {
    try {
      raw = JSON.parse(text);
    } catch (err) {
      throw new InputError(`${file}: not valid JSON: ${(err as Error).message}`);
    }
  } else {
    const doc = YAML.parseDocument(text, { prettyErrors: true });
    if (doc.errors.length) {
      const e = doc.errors[0]!;
      const pos = e.linePos?.[0];
      throw new InputError(`not valid YAML: ${e.message.split("\n")[0]}`, {
        position: pos ? { file, line: pos.line, column: pos.col } : undefined,
      });
    }
    raw = doc.toJS();
  }
  try {
    return parseProfile(raw, file, overrides);
  } catch (err) {
    if (err instanceof InputError && err.code === "E_PROFILE") {
      const field = /field "([^"]+)"/.exec(err.message)?.[1] ?? "";
      // A bad --set is the user's flag, not the profile file: name the flag, never a path into the package.
      if (Object.keys(overrides).length && profileParses(raw, file)) {
        const keys = Object.keys(overrides);
        const culprit =
          keys.find((k) => field !== "(root)" && (field.startsWith(k) || k.startsWith(field))) ??
          keys.find((k) => err.message.includes(`"${k.split(".")[0]}"`)) ??
          keys.join(", ");
        throw new UsageError(`--set ${culprit}: ${err.message.replace(/^invalid profile: /, "")}`, {
          hint: "see docs/sim.md for every profile field (dotted keys, e.g. --set cost.launchUs.graph=3)",
        });
      }
      if (!isPath)
        throw new InputError(`built-in profile "${nameOrPath}": ${err.message.replace(/^invalid profile: /, "")}`, {
          code: "E_PROFILE",
        });
      const line = isPath ? lineOfField(text, field) : undefined;
      throw new InputError(`${err.message.replace(/^invalid profile: /, "")}`, {
        position: line ? { file, line, column: 1 } : undefined,
        hint: line ? undefined : `in ${file}`,
        code: "E_PROFILE",
      });
    }
    throw err;
  }
}

function profileParses(raw: unknown, file: string): boolean {
  try {
    parseProfile(raw, file);
    return true;
  } catch {
    return false;
  }
}

/** Best-effort line of a dotted field in YAML text (for error positions). */
function lineOfField(text: string, field: string): number | undefined {
  if (!field) return undefined;
  const doc = YAML.parseDocument(text, { keepSourceTokens: true });
  const keys = field.split(".");
  for (let n = keys.length; n > 0; n--) {
    const node = doc.getIn(keys.slice(0, n), true) as { range?: [number, number, number] } | undefined;
    const parentPair = n > 0 ? findPairRange(doc, keys.slice(0, n)) : undefined;
    const off = parentPair ?? node?.range?.[0];
    if (off !== undefined) return text.slice(0, off).split("\n").length;
  }
  return undefined;
}

function findPairRange(doc: YAML.Document, keys: string[]): number | undefined {
  const parent = keys.length > 1 ? doc.getIn(keys.slice(0, -1), true) : doc.contents;
  if (!parent || !YAML.isMap(parent)) return undefined;
  for (const item of parent.items) {
    if (YAML.isScalar(item.key) && String(item.key.value) === keys[keys.length - 1]) return item.key.range?.[0];
  }
  return undefined;
}

/** What a profile says about the deployment it simulates, as the study and tune record it. */
export interface ProfileDeployment {
  name: string;
  model?: string;
  quant?: string;
  gpu?: string;
  gpus?: number;
  tp?: number;
  interconnect?: string;
  engine?: string;
}

/**
 * A profile's deployment: the worked example's for the default profile (it simulates that deployment, whose
 * quantization a profile does not name), else the catalog names of the profile's model, GPU and link.
 */
export function profileDeployment(name: string): ProfileDeployment {
  if (name === DEFAULT_PROFILE) {
    const s = SEED_DEPLOYMENT;
    const str = (v: unknown) => (typeof v === "string" ? v : undefined);
    return {
      name,
      model: str(s.model),
      quant: s.quant,
      gpu: str(s.gpu),
      gpus: s.gpus ?? s.tp,
      tp: s.tp,
      interconnect: str(s.interconnect),
      engine: s.engine,
    };
  }
  const p = loadProfile(name);
  const gpuName = p.hardware.catalogGpu ?? p.hardware.gpu;
  const gpu = findGpu(gpuName);
  const ic = p.hardware.interconnect;
  const interconnect =
    ic === "pcie" ? `pcie${gpu?.pcie.gen ?? 5}` : ic === "nvlink" ? `nvlink${gpu?.scaleUp?.gen ?? 4}` : ic;
  return {
    name: p.name,
    model: findModel(p.model.servedName)?.name,
    gpu: gpu ? gpu.id : gpuName,
    gpus: p.hardware.gpuCount,
    tp: p.engine.tensorParallelSize,
    interconnect,
    engine: "vllm",
  };
}

/** A profile's deployment as `model` flags (the study's and tune's model inputs for the embedded sim). */
export function profileModelOptions(p: ProfileDeployment): ModelCliOptions {
  return {
    model: p.model,
    quant: p.quant,
    gpu: p.gpu,
    gpus: p.gpus !== undefined ? String(p.gpus) : undefined,
    tp: p.tp !== undefined ? String(p.tp) : undefined,
    interconnect: p.interconnect,
    engine: p.engine,
  };
}

/** The embedded sim's server command, started through the same server-command path a real server uses. */
export function embeddedSimCommand(
  profile: string,
  timeScale: number,
  seed: number,
  set: Record<string, string | number> = {},
): string {
  const words = [
    process.execPath,
    CLI_ENTRY,
    "sim",
    "--profile",
    profile,
    "--port",
    "{port}",
    "--time-scale",
    String(timeScale),
    "--seed",
    String(seed),
  ];
  for (const [k, v] of Object.entries(set)) words.push("--set", `${k}=${v}`);
  return words.map((w) => (w === "{port}" ? w : shellQuote(w))).join(" ");
}
