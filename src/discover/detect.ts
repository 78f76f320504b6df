// Deployment discovery (pure): what the server answered, the user's flags, the server command and,
// for a local server, this host — combined into one set of facts, each saying where it came from.
// A fact that nobody gave and nothing detected stays null: the report shows "unknown", never a default.
import { engineById } from "../metrics/engines/index.ts";
import type { Deployment, DeploymentField, FieldSource, Provenance } from "../report/types.ts";
import type { ProfileDeployment } from "../sim/profile.ts";
import type { CommandFacts } from "./command.ts";
import type { ServerAnswers } from "./probe.ts";

export type { ProfileDeployment };

export interface Fact<T> {
  value: T | null;
  source: Provenance;
  from?: string;
}

/** What the user gave on the command line (study flags), as strings/numbers, unvalidated. */
export interface GivenDeployment {
  model?: string;
  quant?: string;
  engine?: string;
  gpu?: string;
  gpus?: number;
  tp?: number;
  interconnect?: string;
  /** `--hardware file.yaml`. */
  hardware?: string;
  /** `--cpu NAME` (a catalog CPU) or a host described by `--cpu-bandwidth` / `--cpu-cores`. */
  cpu?: string;
  cpuBandwidth?: string;
  cpuCores?: number;
  gpuBandwidth?: string;
  gpuTflopsBf16?: string;
  gpuMemory?: string;
}

/** The embedded sim's deployment, from its profile. */

/** This machine, when the server runs on it (a --server-cmd, or a loopback URL). */
export interface HostFacts {
  cpuModel: string;
  cores: number;
  memoryGB: number;
  /** Whether an NVIDIA/AMD GPU device node is present. */
  hasGpu: boolean;
  /** One-thread copy bandwidth measured here, GB/s. */
  copyBandwidthGBs?: number;
}

export interface DiscoveryInput {
  answers?: ServerAnswers;
  command?: CommandFacts;
  given: GivenDeployment;
  profile?: ProfileDeployment;
  /** Present only when the server runs on this machine. */
  host?: HostFacts;
  /** Whether a path is a readable model file here (.gguf or config.json, or a folder with one). */
  readableModel?: (path: string) => string | null;
  /** Whether a name is a catalog model. */
  catalogModel?: (name: string) => string | null;
  /** The kind of a catalog device name ("gpu" | "cpu"), or null when unknown. */
  catalogDevice?: (name: string) => "gpu" | "cpu" | null;
}

export interface Discovery {
  engine: Fact<string>;
  engineVersion: Fact<string>;
  servedModel: Fact<string>;
  maxModelLen: Fact<number>;
  /** The model as the analytical model reads it: a catalog name, a config.json or a .gguf path. */
  model: Fact<string>;
  /** The architecture's own name (GGUF general.name, config.json, catalog), once the model is read. */
  modelName: Fact<string>;
  quant: Fact<string>;
  /** The device (catalog name or a description). */
  device: Fact<string>;
  deviceKind: Fact<"gpu" | "cpu">;
  gpus: Fact<number>;
  tp: Fact<number>;
  interconnect: Fact<string>;
  threads: Fact<number>;
  /** Cores of the host the server runs on (known only for a local server). */
  hostCores: Fact<number>;
  /** Disagreements between what was given and what the server says. */
  notes: string[];
}

const unknown = <T>(): Fact<T> => ({ value: null, source: "unknown" });
const given = <T>(value: T, from: string): Fact<T> => ({ value, source: "given", from });
const detected = <T>(value: T, from: string): Fact<T> => ({ value, source: "detected", from });
const fromProfile = <T>(value: T, name: string): Fact<T> => ({ value, source: "profile", from: `profile ${name}` });

const obj = (v: unknown): Record<string, unknown> | undefined =>
  v && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
const str = (v: unknown): string | undefined => (typeof v === "string" && v.trim() ? v : undefined);
const int = (v: unknown): number | undefined => (typeof v === "number" && Number.isInteger(v) && v > 0 ? v : undefined);

/** The engine from the server's own answers, strongest evidence first. */
export function detectEngine(a: ServerAnswers | undefined): Fact<string> {
  if (!a) return unknown();
  const props = obj(a.json["/props"]);
  if (props && (str(props.build_info) || (str(props.model_path) && props.total_slots !== undefined)))
    return detected("llamacpp", "GET /props (llama.cpp's server properties)");
  const info = obj(a.json["/info"]);
  if (info && str(info.model_id) && (str(info.router) || str(info.version)))
    return detected("tgi", `GET /info (${str(info.router) ?? "model_id, version"})`);
  for (const p of ["/get_server_info", "/server_info"]) {
    const s = obj(a.json[p]);
    if (s && (s.tp_size !== undefined || str(s.model_path)) && str(s.version)) return detected("sglang", `GET ${p}`);
  }
  const top = a.metricEngines?.[0];
  if (top && top.confidence >= 0.6)
    return detected(top.id, `/metrics families (confidence ${top.confidence.toFixed(2)})`);
  const models = obj(a.json["/v1/models"]);
  const first = obj(Array.isArray(models?.data) ? (models!.data as unknown[])[0] : undefined);
  const owned = str(first?.owned_by)?.toLowerCase();
  const byOwner: Record<string, string> = {
    vllm: "vllm",
    llamacpp: "llamacpp",
    sglang: "sglang",
    "tensorrt-llm": "trtllm",
  };
  if (owned && byOwner[owned]) return detected(byOwner[owned]!, `/v1/models owned_by "${owned}"`);
  const server = a.headers.server?.toLowerCase();
  if (server?.includes("llama.cpp")) return detected("llamacpp", `Server: ${a.headers.server} header`);
  if (top) return detected(top.id, `/metrics families (weak: confidence ${top.confidence.toFixed(2)})`);
  return unknown();
}

function engineVersion(a: ServerAnswers | undefined, engine: string | null): Fact<string> {
  if (!a || !engine) return unknown();
  const props = obj(a.json["/props"]);
  const info = obj(a.json["/info"]);
  const sgl = obj(a.json["/get_server_info"]) ?? obj(a.json["/server_info"]);
  const version = str(obj(a.json["/version"])?.version);
  if (engine === "llamacpp" && str(props?.build_info))
    return detected(str(props!.build_info)!, "GET /props build_info");
  if (engine === "tgi" && str(info?.version)) return detected(str(info!.version)!, "GET /info version");
  if (engine === "sglang" && str(sgl?.version)) return detected(str(sgl!.version)!, "GET /get_server_info version");
  if (version) return detected(version, "GET /version");
  return unknown();
}

/** Candidate model locations the server reports, best first, with where each was read. */
function reportedModels(a: ServerAnswers | undefined): Array<{ value: string; from: string }> {
  if (!a) return [];
  const out: Array<{ value: string; from: string }> = [];
  const push = (v: unknown, from: string) => {
    const s = str(v);
    if (s && !out.some((x) => x.value === s)) out.push({ value: s, from });
  };
  push(obj(a.json["/props"])?.model_path, "GET /props model_path");
  const sgl = obj(a.json["/get_server_info"]) ?? obj(a.json["/server_info"]);
  push(sgl?.model_path, "GET /get_server_info model_path");
  push(obj(a.json["/info"])?.model_id, "GET /info model_id");
  const models = obj(a.json["/v1/models"]);
  const first = obj(Array.isArray(models?.data) ? (models!.data as unknown[])[0] : undefined);
  push(first?.root, "/v1/models root");
  push(first?.id, "/v1/models id");
  return out;
}

function servedModel(a: ServerAnswers | undefined): Fact<string> {
  const models = obj(a?.json["/v1/models"]);
  const first = obj(Array.isArray(models?.data) ? (models!.data as unknown[])[0] : undefined);
  const id = str(first?.id);
  return id ? detected(id, "/v1/models id") : unknown();
}

function maxModelLen(a: ServerAnswers | undefined): Fact<number> {
  if (!a) return unknown();
  const models = obj(a.json["/v1/models"]);
  const first = obj(Array.isArray(models?.data) ? (models!.data as unknown[])[0] : undefined);
  if (int(first?.max_model_len)) return detected(int(first!.max_model_len)!, "/v1/models max_model_len");
  const props = obj(a.json["/props"]);
  const slot = obj(props?.default_generation_settings);
  if (int(slot?.n_ctx)) return detected(int(slot!.n_ctx)!, "GET /props n_ctx (per slot)");
  const info = obj(a.json["/info"]);
  if (int(info?.max_total_tokens)) return detected(int(info!.max_total_tokens)!, "GET /info max_total_tokens");
  const sgl = obj(a.json["/get_server_info"]) ?? obj(a.json["/server_info"]);
  if (int(sgl?.context_length)) return detected(int(sgl!.context_length)!, "GET /get_server_info context_length");
  return unknown();
}

function sglangTp(a: ServerAnswers | undefined): number | undefined {
  const sgl = obj(a?.json["/get_server_info"]) ?? obj(a?.json["/server_info"]);
  return int(sgl?.tp_size);
}

export function discoverDeployment(input: DiscoveryInput): Discovery {
  const { answers: a, given: g, profile: p, host } = input;
  const cmd = input.command;
  const notes: string[] = [];

  // ---- engine
  const seen = detectEngine(a);
  let engine: Fact<string>;
  if (g.engine) {
    engine = given(g.engine, "--engine");
    if (seen.value && seen.value !== g.engine)
      notes.push(`--engine ${g.engine} was given, but the server looks like ${seen.value} (${seen.from})`);
  } else if (seen.value) engine = seen;
  else if (cmd?.engine) engine = given(cmd.engine, `server command (${cmd.program})`);
  else if (p?.engine) engine = fromProfile(p.engine, p.name);
  else engine = unknown();

  // ---- model
  const readable = input.readableModel ?? (() => null);
  const inCatalog = input.catalogModel ?? (() => null);
  let model: Fact<string> = unknown();
  if (g.model) model = given(g.model, "--model");
  else {
    const candidates = [
      ...(cmd?.model ? [{ value: cmd.model.value, from: `server command ${cmd.model.flag}`, given: true }] : []),
      ...reportedModels(a).map((x) => ({ ...x, given: false })),
    ];
    for (const c of candidates) {
      const file = readable(c.value);
      if (file) {
        model = c.given ? given(file, c.from) : detected(file, `${c.from}, readable here`);
        break;
      }
    }
    if (model.value === null)
      for (const c of candidates) {
        const name = inCatalog(c.value);
        if (name) {
          model = c.given ? given(name, `${c.from} → catalog`) : detected(name, `${c.from} → catalog model ${name}`);
          break;
        }
      }
    if (model.value === null && p?.model) model = fromProfile(p.model, p.name);
  }

  // ---- quant: given, the profile, or (later) the model file's own header; never assumed here
  const quant: Fact<string> = g.quant ? given(g.quant, "--quant") : p?.quant ? fromProfile(p.quant, p.name) : unknown();

  // ---- device
  const kindOf = input.catalogDevice ?? (() => null);
  let device: Fact<string> = unknown();
  let deviceKind: Fact<"gpu" | "cpu"> = unknown();
  const localCpu =
    host && engine.value === "llamacpp" && !host.hasGpu && !((cmd?.gpuLayers?.value ?? 0) > 0) ? host : undefined;
  if (g.hardware) {
    device = given(g.hardware, "--hardware");
  } else if (g.cpu || g.cpuBandwidth) {
    device = given(g.cpu ?? "CPU host", g.cpu ? "--cpu" : "--cpu-bandwidth");
    deviceKind = given("cpu", g.cpu ? "--cpu" : "--cpu-bandwidth");
  } else if (g.gpu || g.gpuBandwidth) {
    device = given(g.gpu ?? "custom device", g.gpu ? "--gpu" : "--gpu-bandwidth");
    const k = g.gpu ? kindOf(g.gpu) : "gpu";
    if (k) deviceKind = given(k, g.gpu ? `--gpu (a catalog ${k.toUpperCase()})` : "--gpu-bandwidth");
  } else if (localCpu) {
    device = detected(
      `${localCpu.cpuModel} (this host, ${localCpu.cores} cores)`,
      `this host: the server runs here, no GPU device${cmd?.gpuLayers ? `, ${cmd.gpuLayers.flag} ${cmd.gpuLayers.value}` : ""}`,
    );
    deviceKind = detected("cpu", "llama.cpp on this host with no GPU offload");
  } else if (p?.gpu) {
    device = fromProfile(p.gpu, p.name);
    deviceKind = fromProfile("gpu", p.name);
  }

  // ---- parallelism
  let tp: Fact<number> = unknown();
  if (g.tp !== undefined) tp = given(g.tp, "--tp");
  else if (cmd?.tp) tp = given(cmd.tp.value, `server command ${cmd.tp.flag}`);
  else if (sglangTp(a)) tp = detected(sglangTp(a)!, "GET /get_server_info tp_size");
  else if (p?.tp) tp = fromProfile(p.tp, p.name);
  else if (deviceKind.value === "cpu") tp = { value: 1, source: deviceKind.source, from: "one CPU host" };
  let gpus: Fact<number> = unknown();
  if (g.gpus !== undefined) gpus = given(g.gpus, "--gpus");
  else if (p?.gpus) gpus = fromProfile(p.gpus, p.name);
  else if (deviceKind.value === "cpu") gpus = { value: 1, source: deviceKind.source, from: "one CPU host" };
  else if (tp.value !== null && tp.source !== "unknown") gpus = { ...tp, from: `${tp.from} (one device per rank)` };
  const interconnect: Fact<string> = g.interconnect
    ? given(g.interconnect, "--interconnect")
    : p?.interconnect
      ? fromProfile(p.interconnect, p.name)
      : (gpus.value ?? 0) === 1
        ? { value: "none", source: gpus.source, from: "a single device" }
        : unknown();

  const threads: Fact<number> = cmd?.threads
    ? given(cmd.threads.value, `server command ${cmd.threads.flag}`)
    : unknown();
  const hostCores: Fact<number> = host ? detected(host.cores, "this host (the server runs here)") : unknown();

  return {
    engine,
    engineVersion: engineVersion(a, engine.value),
    servedModel: servedModel(a),
    maxModelLen: maxModelLen(a),
    model,
    modelName: unknown(),
    quant,
    device,
    deviceKind,
    gpus,
    tp,
    interconnect,
    threads,
    hostCores,
    notes,
  };
}

/** Whether the deployment has collectives to change (TP > 1 on an engine that uses NCCL/RCCL). */
export function hasCollectives(d: Discovery): boolean | null {
  const e = d.engine.value ? engineById(d.engine.value) : undefined;
  if (e && !e.usesNccl) return false;
  if (d.tp.value === null) return null;
  return d.tp.value > 1;
}

/** The report's Deployment record: values, and per field where it came from. */
export function deploymentRecord(d: Discovery): Deployment {
  const facts: Record<DeploymentField, Fact<unknown>> = {
    model: d.model,
    quant: d.quant,
    gpu: d.device,
    gpus: d.gpus,
    tp: d.tp,
    interconnect: d.interconnect,
    engine: d.engine,
    engineVersion: d.engineVersion,
    deviceKind: d.deviceKind,
    servedModel: d.servedModel,
    maxModelLen: d.maxModelLen,
    modelName: d.modelName,
  };
  const sources: Partial<Record<DeploymentField, FieldSource>> = {};
  for (const [k, f] of Object.entries(facts) as Array<[DeploymentField, Fact<unknown>]>)
    sources[k] = f.from ? { source: f.source, from: f.from } : { source: f.source };
  return {
    model: d.model.value,
    quant: d.quant.value,
    gpu: d.device.value,
    gpus: d.gpus.value,
    tp: d.tp.value,
    interconnect: d.interconnect.value,
    engine: d.engine.value,
    engineVersion: d.engineVersion.value,
    deviceKind: d.deviceKind.value,
    servedModel: d.servedModel.value,
    maxModelLen: d.maxModelLen.value,
    modelName: d.modelName.value,
    sources,
  };
}
