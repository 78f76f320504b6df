// inferscope sim: an embedded vLLM-compatible server whose timing follows a deployment model.

import { lookup } from "node:dns/promises";
import { accessSync, constants, existsSync, mkdirSync, statSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { isIP } from "node:net";
import { hostname } from "node:os";
import { performance } from "node:perf_hooks";
import { plainReason, UsageError } from "../errors.ts";
import type { SimRequest } from "./engine.ts";
import { Engine, type StepRecord } from "./engine.ts";
import { SimMetrics } from "./exposition.ts";
import { FaultInjector, parseFaults } from "./faults.ts";
import { MAX_BLOCK_SIZE, MAX_GPU_BLOCKS } from "./kvcache.ts";
import { DEFAULT_PROFILE, kvCapacity, loadProfile, type Profile } from "./profile.ts";
import { SimServer } from "./server.ts";
import { SimTelemetry } from "./telemetry.ts";
import { type Knobs, StepModel } from "./timing.ts";

export {
  type AllReduceDataPath,
  allReduceTxBytesPerGpu,
} from "../model/collectives.ts";
export type { RequestTruth } from "./engine.ts";
export { FAULT_KINDS, parseFaults } from "./faults.ts";
export type { PrefixCacheTruth } from "./kvcache.ts";
export {
  DEFAULT_PROFILE,
  embeddedSimCommand,
  type KvCapacity,
  kvCapacity,
  listProfiles,
  loadProfile,
  type Profile,
  type ProfileDeployment,
  parseProfile,
  parseSetting,
  profileDeployment,
  profileModelOptions,
} from "./profile.ts";
export {
  CLOCK_EVENT,
  expectedJoulesPerToken,
  FAMILIES as DCGM_FAMILIES,
  type GpuPowerSpec,
  type GpuTruth,
  gpuPowerSpec,
  POWER_MODEL,
  SimTelemetry,
  stepEffect,
  type TelemetryTruth,
} from "./telemetry.ts";
export {
  type BatchShape,
  COMPONENTS,
  decodeBatch,
  explainStep,
  type Knobs,
  ncclCallModel,
  perCallNcclUs,
  prefillBatch,
  resolveConfig,
  type StepExplanation,
  StepModel,
} from "./timing.ts";

export interface SimOptions {
  /** Built-in profile name (default glm5-8x-rtxpro6000-pcie). */
  profile?: string;
  /** A YAML/JSON profile file (wins over `profile`). */
  profileFile?: string;
  /** Dotted-key overrides of any profile field, e.g. {"collectives.perCallUs.LL": 30}. */
  overrides?: Record<string, unknown>;
  host?: string;
  /** 0 = any free port. */
  port?: number;
  allowRemote?: boolean;
  /** >1 runs the clock faster: every simulated duration is divided by it. */
  timeScale?: number;
  /** "zero": serve tokens as fast as possible (steps take no time). */
  speed?: "model" | "zero";
  seed?: number;
  maxNumSeqs?: number;
  maxNumBatchedTokens?: number;
  tensorParallelSize?: number;
  disableCustomAllReduce?: boolean;
  enforceEager?: boolean;
  specTokens?: number;
  acceptance?: number;
  reasoning?: boolean;
  faults?: string;
  /** Environment the "deployment" reads (NCCL_PROTO, NCCL_ALGO, VLLM_TORCH_PROFILER_DIR). Default process.env. */
  env?: Record<string, string | undefined>;
  profilerDir?: string;
  /** Served model name (default: the profile's). */
  servedModelName?: string;
  /** Wall ms a stall fault holds a stream (default 30 s / timeScale). */
  stallMs?: number;
  /** Wall ms a slow-headers fault delays the response headers (default 2 s / timeScale). */
  slowHeadersMs?: number;
  /** Exercise the serving path on a throwaway instance first, so JIT warm-up does not skew early timing (default true). */
  warmup?: boolean;
  /** Wall ms between telemetry collections: /dcgm/metrics gauges average over the last one (default 1000). */
  dcgmIntervalMs?: number;
  /** vLLM's --block-size (tokens per KV block; default the profile's). */
  blockSize?: number;
  /** vLLM's --num-gpu-blocks-override: the KV capacity in blocks, which the prefix cache shares with running requests. */
  numGpuBlocks?: number;
  /** vLLM's --enable-prefix-caching / --no-enable-prefix-caching (default the profile's, true). */
  enablePrefixCaching?: boolean;
  /** vLLM's --enable-prompt-tokens-details: usage.prompt_tokens_details.cached_tokens. */
  enablePromptTokensDetails?: boolean;
  /**
   * vLLM's --otlp-traces-endpoint: one "llm_request" span per finished request, with vLLM's attribute
   * names and the engine's own times, exported as OTLP/HTTP protobuf (a bare origin gets /v1/traces).
   */
  otlpTracesEndpoint?: string;
  /**
   * Whose span layout: "vllm" (default) or "sglang" (a trace per request, SGLang's --enable-trace: root, thread span
   * per TP rank, stage slices; requests named by the body's rid, as SGLang names them).
   */
  otlpLayout?: string;
  /** vLLM's --collect-detailed-traces: "model" (forward time), "worker" (execute time), "all"; a comma list. */
  collectDetailedTraces?: string;
}

export interface SimHandle {
  url: string;
  port: number;
  profile: Profile;
  model: StepModel;
  /** Stops accepting, drains open streams (up to drainMs), closes. */
  close(drainMs?: number): Promise<void>;
  /** Open HTTP exchanges right now. */
  openStreams(): number;
  /** What other hosts can reach when the sim listens beyond loopback (--allow-remote); null on loopback. */
  exposure: string | null;
}

/** The warning for a sim reachable from other hosts: what they see, and what they do not. */
export function exposureNote(host: string): string {
  return `listening on ${host}, beyond loopback: other hosts can reach /v1/*, /metrics, /tokenize and /dcgm/metrics, with no key checked; /debug/* (the sim's truth) answers loopback clients only`;
}

const LOOPBACK = new Set(["127.0.0.1", "::1", "localhost"]);

/** The slowest clock the sim runs: 1,000× slower than the deployment it models. */
export const MIN_TIME_SCALE = 0.001;

/** Resolves the profile and knobs exactly as startSim would (for --explain and tests). */
export function resolveSim(opts: SimOptions): { profile: Profile; knobs: Knobs; model: StepModel } {
  const overrides: Record<string, unknown> = { ...(opts.overrides ?? {}) };
  if (opts.maxNumSeqs !== undefined) overrides["engine.maxNumSeqs"] = opts.maxNumSeqs;
  if (opts.maxNumBatchedTokens !== undefined) overrides["engine.maxNumBatchedTokens"] = opts.maxNumBatchedTokens;
  if (opts.blockSize !== undefined) overrides["engine.blockSize"] = opts.blockSize;
  if (opts.numGpuBlocks !== undefined) overrides["engine.numGpuBlocks"] = opts.numGpuBlocks;
  if (opts.enablePrefixCaching !== undefined) overrides["engine.enablePrefixCaching"] = opts.enablePrefixCaching;
  const profile = loadProfile(opts.profileFile ?? opts.profile ?? DEFAULT_PROFILE, overrides);
  const env = opts.env ?? process.env;
  const tp = opts.tensorParallelSize;
  if (tp !== undefined && (!Number.isInteger(tp) || tp < 1))
    throw new UsageError(`--tensor-parallel-size must be a positive integer, got ${tp}`);
  if (tp !== undefined && tp > profile.hardware.gpuCount)
    throw new UsageError(`--tensor-parallel-size ${tp} exceeds the profile's ${profile.hardware.gpuCount} GPUs`);
  const specTokens = opts.specTokens ?? 0;
  if (!Number.isInteger(specTokens) || specTokens < 0) throw new UsageError(`--spec-tokens must be an integer >= 0`);
  const acc = opts.acceptance ?? 0.7;
  if (!(acc >= 0 && acc <= 1)) throw new UsageError(`--acceptance must be in [0, 1], got ${acc}`);
  checkKvCapacity(profile, specTokens);
  const knobs: Knobs = {
    tensorParallelSize: tp,
    ncclProto: env.NCCL_PROTO,
    ncclAlgo: env.NCCL_ALGO,
    disableCustomAllReduce: opts.disableCustomAllReduce,
    enforceEager: opts.enforceEager,
    specTokens,
  };
  let model: StepModel;
  try {
    model = new StepModel(profile, knobs);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  return { profile, knobs, model };
}

/**
 * The KV pool must hold one request of max_model_len (and its draft tokens), or a request the server
 * accepts could never be scheduled and would wait forever: vLLM refuses to start then, with this message.
 */
export function checkKvCapacity(profile: Profile, specTokens = 0): void {
  const { numGpuBlocks: blocks, blockSize } = profile.engine;
  if (blockSize > MAX_BLOCK_SIZE)
    throw new UsageError(
      `--block-size (engine.blockSize) ${blockSize}: the sim takes at most ${MAX_BLOCK_SIZE} tokens a block`,
    );
  if (blocks > MAX_GPU_BLOCKS)
    throw new UsageError(
      `--num-gpu-blocks-override (engine.numGpuBlocks) ${blocks}: the sim keeps at most ${MAX_GPU_BLOCKS} KV blocks`,
    );
  const need = profile.model.maxModelLen + specTokens;
  if (blocks * blockSize < need)
    throw new UsageError(
      `The model's max seq len (${profile.model.maxModelLen}${specTokens ? ` + ${specTokens} draft tokens` : ""}) is larger than the maximum number of tokens that can be stored in KV cache (${blocks * blockSize}). Try increasing \`gpu_memory_utilization\` or decreasing \`max_model_len\` when initializing the engine.`,
      {
        hint: `give --num-gpu-blocks-override ${Math.ceil(need / blockSize)} or more (${blockSize}-token blocks), or a smaller model.maxModelLen (--set)`,
      },
    );
}

/**
 * Runs a few hundred streamed tokens through a throwaway engine + server (speed zero, own metrics),
 * so the first real requests are served by optimised code and keep the model's timing.
 */
async function warmUp(model: StepModel, modelName: string, maxModelLen: number): Promise<void> {
  const metrics = new SimMetrics({
    modelName,
    maxModelLen,
    blockSize: model.profile.engine.blockSize,
    numGpuBlocks: model.profile.engine.numGpuBlocks,
    prefixCaching: model.profile.engine.enablePrefixCaching,
    specTokens: model.config.specTokens,
    faultKinds: [],
    nowUnixS: 0,
  });
  const engine = new Engine({
    model,
    metrics,
    clock: () => performance.now(),
    timeScale: 1,
    speedZero: true,
    seed: 1,
    maxNumSeqs: 64,
    maxNumBatchedTokens: 8192,
    acceptance: 0.7,
  });
  const server = new SimServer({
    engine,
    metrics,
    faults: new FaultInjector({}, 0),
    modelName,
    maxModelLen,
    vllmVersion: "",
    seed: 1,
    reasoning: false,
    reasoningFraction: 0,
    stallMs: 0,
    slowHeadersMs: 0,
    profiler: null,
  });
  await new Promise<void>((r) => server.http.listen(0, "127.0.0.1", () => r()));
  const addr = server.http.address();
  const port = typeof addr === "object" && addr ? addr.port : 0;
  const one = (i: number) =>
    new Promise<void>((resolve) => {
      const chat = i % 2 === 1;
      const body = chat
        ? { messages: [{ role: "user", content: `warm up ${i}` }], max_tokens: 48, ignore_eos: true, stream: true }
        : {
            prompt: `warm up ${i}`,
            max_tokens: 48,
            ignore_eos: true,
            stream: true,
            stream_options: { include_usage: true },
          };
      const req = httpRequest(
        {
          host: "127.0.0.1",
          port,
          method: "POST",
          path: chat ? "/v1/chat/completions" : "/v1/completions",
          agent: false,
        },
        (res) => {
          res.resume();
          res.on("end", resolve);
          res.on("error", () => resolve());
        },
      );
      req.on("error", () => resolve());
      req.end(JSON.stringify(body));
    });
  for (let round = 0; round < 3; round++) await Promise.all(Array.from({ length: 16 }, (_, i) => one(i)));
  metrics.render(false);
  await server.shutdown(1000);
  engine.close();
}

function checkedOtlpEndpoint(url: string): string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new UsageError(`--otlp-traces-endpoint ${url}: not a URL`, { hint: "e.g. http://127.0.0.1:4318" });
  }
  if (u.protocol !== "http:" && u.protocol !== "https:")
    throw new UsageError(`--otlp-traces-endpoint ${url}: OTLP/HTTP needs http:// or https://`);
  return url;
}

function isLoopbackIp(a: string): boolean {
  return a === "::1" || /^127\./.test(a) || /^::ffff:127\./i.test(a);
}

/** A listen address: an IP or a host name; "999.1.1.1" (looks like IPv4, is not) is refused at once. */
function checkHost(host: string): void {
  if (isIP(host)) return;
  if (/^[\d.]+$/.test(host) || host.includes(":") || !/^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$/.test(host))
    throw new UsageError(`--host ${host} is not an IP address or host name`, {
      hint: "e.g. --host 127.0.0.1 (the default), ::1, or with --allow-remote 0.0.0.0",
    });
}

/**
 * The profiler directory, checked at start (not at the first /stop_profile): made if missing, and it
 * must be a writable directory. `from` is the flag or variable that named it.
 */
function checkProfilerDir(dir: string, from: string): void {
  try {
    if (existsSync(dir) && !statSync(dir).isDirectory())
      throw new UsageError(`${from} ${dir}: is a file, not a directory`, {
        hint: "give the directory the traces go to; it is made if missing",
      });
    mkdirSync(dir, { recursive: true });
    accessSync(dir, constants.W_OK);
  } catch (e) {
    if (e instanceof UsageError) throw e;
    throw new UsageError(`${from} ${dir}: cannot write traces there: ${plainReason(e)}`);
  }
}

export async function startSim(opts: SimOptions = {}): Promise<SimHandle> {
  const host = opts.host ?? "127.0.0.1";
  checkHost(host);
  let loopbackName = false;
  // A name is resolved first: one that does not resolve is a typo, not a remote address.
  if (!LOOPBACK.has(host) && !isIP(host)) {
    let addrs: string[];
    try {
      addrs = (await lookup(host, { all: true })).map((a) => a.address);
    } catch (e) {
      throw new UsageError(
        `--host ${host}: could not be resolved (${(e as NodeJS.ErrnoException).code ?? plainReason(e)})`,
        {
          hint: "give an IP address (127.0.0.1, the default) or a host name this machine resolves",
        },
      );
    }
    if (addrs.length && addrs.every(isLoopbackIp)) {
      // e.g. a name in /etc/hosts for 127.0.0.1: loopback all the same.
      loopbackName = true;
    } else if (!opts.allowRemote)
      throw new UsageError(`--host ${host} (${addrs.join(", ")}) is not a loopback address`, {
        hint: "the simulator is a test server; pass --allow-remote to listen on other interfaces",
      });
  }
  if (!LOOPBACK.has(host) && isIP(host) && !isLoopbackIp(host) && !opts.allowRemote)
    throw new UsageError(`--host ${host} is not a loopback address`, {
      hint: "the simulator is a test server; pass --allow-remote to listen on other interfaces",
    });
  const timeScale = opts.timeScale ?? 1;
  if (!(timeScale > 0) || !Number.isFinite(timeScale))
    throw new UsageError(`--time-scale must be > 0, got ${timeScale}`);
  // Slower than 1000× real time, a step's wait outgrows any run (a 20 ms step at 1e-9 took 231 days).
  if (timeScale < MIN_TIME_SCALE)
    throw new UsageError(`--time-scale ${timeScale} is below ${MIN_TIME_SCALE} (1,000× slower than the deployment)`);
  const seed = opts.seed ?? 0;
  const { profile, model } = resolveSim(opts);
  const env = opts.env ?? process.env;
  if (opts.profilerDir ?? env.VLLM_TORCH_PROFILER_DIR)
    checkProfilerDir(
      (opts.profilerDir ?? env.VLLM_TORCH_PROFILER_DIR)!,
      opts.profilerDir ? "--profiler-dir" : "$VLLM_TORCH_PROFILER_DIR",
    );
  const faultSpec = parseFaults(opts.faults);
  const faults = new FaultInjector(faultSpec, seed);
  const modelName = opts.servedModelName ?? profile.model.servedName;
  const metrics = new SimMetrics({
    modelName,
    maxModelLen: profile.model.maxModelLen,
    blockSize: profile.engine.blockSize,
    numGpuBlocks: profile.engine.numGpuBlocks,
    prefixCaching: profile.engine.enablePrefixCaching,
    specTokens: model.config.specTokens,
    faultKinds: faults.kinds,
    nowUnixS: Date.now() / 1000,
  });
  if (opts.warmup !== false) await warmUp(model, modelName, profile.model.maxModelLen);
  const profilerDir = opts.profilerDir ?? env.VLLM_TORCH_PROFILER_DIR;
  let onStep: ((r: StepRecord) => void) | undefined;
  let profiler: { start(): Promise<void>; stop(): Promise<void> } | null = null;
  let truth: (() => unknown) | undefined;
  if (profilerDir) {
    const { Profiler } = await import("./trace.ts");
    const p = new Profiler({ dir: profilerDir, model, timeScale, vllmVersion: profile.vllmVersion });
    onStep = (r) => p.record(r);
    profiler = p;
    truth = () => p.lastTruth;
  }
  const dcgmIntervalMs = opts.dcgmIntervalMs ?? 100;
  if (!(dcgmIntervalMs >= 10) || !Number.isFinite(dcgmIntervalMs))
    throw new UsageError(`--dcgm-interval-ms must be at least 10, got ${dcgmIntervalMs}`);
  const speedZero = opts.speed === "zero";
  const telemetry = new SimTelemetry({
    model,
    timeScale,
    speedZero,
    seed,
    hostname: hostname(),
    startMs: performance.now(),
  });
  // The SDK loads only when spans are asked for.
  const layout = spanLayout(opts.otlpLayout, Boolean(opts.otlpTracesEndpoint), opts.collectDetailedTraces);
  const spans = opts.otlpTracesEndpoint
    ? (await import("./otlp.ts")).createSpanEmitter(checkedOtlpEndpoint(opts.otlpTracesEndpoint), {
        layout,
        tpRanks: opts.tensorParallelSize ?? 1,
      })
    : null;
  const detailed = detailedTraces(opts.collectDetailedTraces, Boolean(opts.otlpTracesEndpoint));
  const wall = (ms: number) => performance.timeOrigin + ms;
  // Durations in the engine's (simulated) seconds, as its histograms observe them; times on the epoch.
  const simS = (speedZero ? 1 : timeScale) / 1000;
  const onFinished = spans
    ? (req: SimRequest, now: number) => {
        if (req.name === null) return;
        spans.emit({
          requestId: req.name,
          arrivalUnixMs: performance.timeOrigin + req.arrival,
          endUnixMs: performance.timeOrigin + now,
          promptTokens: req.promptLen,
          completionTokens: req.generated,
          maxTokens: req.paramsMaxTokens,
          n: req.n,
          queue: (req.scheduledAt - req.queuedAt) * simS,
          ttft: (req.firstTokenAt - req.arrival) * simS,
          e2e: (now - req.arrival) * simS,
          prefill: (req.firstTokenAt - req.scheduledAt) * simS,
          decode: (now - req.firstTokenAt) * simS,
          inference: (now - req.scheduledAt) * simS,
          ...(layout === "sglang"
            ? {
                sglang: {
                  queuedUnixMs: wall(req.queuedAt),
                  scheduledUnixMs: wall(req.scheduledAt),
                  firstTokenUnixMs: wall(req.firstTokenAt),
                  stepEndsUnixMs: (req.stepEnds ?? []).map(wall),
                },
              }
            : {}),
          ...(detailed.size
            ? {
                scheduler: req.schedulerMs / 1000,
                ...(detailed.has("model") ? { forward: req.forwardMs / 1000 } : {}),
                ...(detailed.has("worker") ? { execute: req.executeMs / 1000 } : {}),
              }
            : {}),
        });
      }
    : undefined;
  const engine = new Engine({
    model,
    metrics,
    clock: () => performance.now(),
    timeScale,
    speedZero,
    seed,
    maxNumSeqs: profile.engine.maxNumSeqs,
    maxNumBatchedTokens: profile.engine.maxNumBatchedTokens,
    acceptance: opts.acceptance ?? 0.7,
    onStep,
    onStepBegin: (r, meanMs) => telemetry.onStepBegin(r.startMs, r.endMs, r.shape, meanMs, r.jitter),
    onIdle: () => telemetry.onIdle(),
    onFinished,
    recordSteps: layout === "sglang",
  });
  // Like dcgm-exporter's collect interval: gauges are averages over the last closed interval.
  const collector = setInterval(
    () => telemetry.collect(performance.now(), Date.now() / 1000, metrics.generationTokens),
    dcgmIntervalMs,
  );
  collector.unref();
  const telemetryTruth = () => ({
    ...telemetry.truth(performance.now(), Date.now() / 1000, metrics.generationTokens),
    collection: telemetry.lastCollection,
    collectIntervalMs: dcgmIntervalMs,
    bootEnergyJ: telemetry.bootEnergyJ,
    servingGpus: telemetry.serving,
    link: telemetry.link,
    power: telemetry.spec,
  });
  const server = new SimServer({
    engine,
    metrics,
    faults,
    modelName,
    maxModelLen: profile.model.maxModelLen,
    vllmVersion: profile.vllmVersion,
    seed,
    reasoning: !!opts.reasoning,
    reasoningFraction: profile.text.reasoningFraction,
    promptTokensDetails: !!opts.enablePromptTokensDetails,
    sglangNaming: layout === "sglang",
    stallMs: opts.stallMs ?? 30_000 / timeScale,
    slowHeadersMs: opts.slowHeadersMs ?? 2_000 / timeScale,
    profiler,
    extraGet: {
      ...(truth ? { "/debug/profile_truth": truth } : {}),
      "/debug/telemetry_truth": telemetryTruth,
      "/debug/prefix_cache_truth": () => ({ ...engine.prefixCacheTruth(), capacity: kvCapacity(profile) }),
      "/debug/limit_truth": () => ({ ...engine.limitTruth(), timeScale, numGpuBlocks: profile.engine.numGpuBlocks }),
    },
    extraText: { "/dcgm/metrics": () => telemetry.render() },
  });
  const port = await new Promise<number>((resolve, reject) => {
    const onErr = (err: NodeJS.ErrnoException) => {
      if (err.code === "EADDRINUSE")
        reject(
          new UsageError(`port ${opts.port} on ${host} is already in use`, {
            hint: "pick another --port, or --port 0 for a free one",
          }),
        );
      else if (err.code === "EADDRNOTAVAIL") reject(new UsageError(`cannot listen on ${host}: address not available`));
      else if (err.code === "EACCES") reject(new UsageError(`no permission to listen on ${host}:${opts.port}`));
      else if (err.code === "ENOTFOUND" || err.code === "EAI_AGAIN")
        reject(new UsageError(`--host ${host}: no such host (the name does not resolve here)`));
      else reject(err);
    };
    server.http.once("error", onErr);
    server.http.listen(opts.port ?? 8000, host, () => {
      server.http.off("error", onErr);
      const addr = server.http.address();
      resolve(typeof addr === "object" && addr ? addr.port : 0);
    });
  });
  const urlHost = host.includes(":") ? `[${host}]` : host;
  let closing: Promise<void> | null = null;
  return {
    url: `http://${urlHost}:${port}`,
    port,
    profile,
    model,
    openStreams: () => server.openStreams,
    exposure: LOOPBACK.has(host) || (isIP(host) ? isLoopbackIp(host) : loopbackName) ? null : exposureNote(host),
    close(drainMs = 60_000) {
      clearInterval(collector);
      closing ??= server
        .shutdown(drainMs)
        .then(() => engine.close())
        .then(() => spans?.shutdown());
      return closing;
    },
  };
}

/** --otlp-layout: vLLM's (default) or SGLang's; it needs the endpoint, and SGLang has no detailed traces. */
export function spanLayout(
  value: string | undefined,
  endpoint: boolean,
  detailed: string | undefined,
): "vllm" | "sglang" {
  if (value === undefined) return "vllm";
  if (value !== "vllm" && value !== "sglang")
    throw new UsageError(`--otlp-layout: expected vllm or sglang, got "${value}"`);
  if (!endpoint) throw new UsageError("--otlp-layout needs --otlp-traces-endpoint");
  if (value === "sglang" && detailed !== undefined)
    throw new UsageError("--collect-detailed-traces is vLLM's: SGLang's traces have no forward / execute split");
  return value;
}

/** vLLM's --collect-detailed-traces value as the modules it names ("all" = model and worker); needs the endpoint. */
export function detailedTraces(value: string | undefined, endpoint: boolean): Set<"model" | "worker"> {
  const out = new Set<"model" | "worker">();
  if (value === undefined) return out;
  if (!endpoint) throw new UsageError("--collect-detailed-traces needs --otlp-traces-endpoint (as in vLLM)");
  for (const w of value.split(",").map((x) => x.trim())) {
    if (w === "all") {
      out.add("model");
      out.add("worker");
    } else if (w === "model" || w === "worker") out.add(w);
    else throw new UsageError(`--collect-detailed-traces: unknown module "${w}" (model, worker or all, as vLLM)`);
  }
  return out;
}
