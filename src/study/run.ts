// `inferscope study`: runs the investigation end to end — metrics audit → batch-1 bench → length
// sweep → profiler trace → A/B on the NCCL protocol (server restarted per arm) → model calibrated on
// these measurements → decomposition, ceilings, what-ifs → report. Orchestration only: each phase
// calls one module's library function; the numbers come from src/study/estimate.ts (pure).

import { mkdtempSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import {
  chooseExperiment,
  deploymentRecord,
  discover,
  type GivenDeployment,
  type HostFacts,
  modelInputsFor,
} from "../discover/index.ts";
import { InferscopeError, InputError, InterruptedError, plainReason, TargetError, UsageError } from "../errors.ts";
import { parseVariant, type ServerHandle, shellQuote, startServer } from "../experiment/variants.ts";
import { checkInputFile, checkNotFile, checkRunStore } from "../input-file.ts";
import { engineById } from "../metrics/engines/index.ts";
import { type Architecture, listModels, requireModel } from "../model/architecture.ts";
import { findGpu, parseInterconnect } from "../model/hardware.ts";
import { SEED_DEPLOYMENT as SEED_MODEL_INPUT } from "../model/index.ts";
import { checkNcclEnv, checkParallelism, modelArg } from "../model/options.ts";
import { recipe } from "../model/quantization.ts";
import { type OtlpReceiver, startOtlpReceiver } from "../otlp/receiver.ts";
import { requestSpanFlags } from "../otlp/server-flags.ts";
import { claimOutputDir } from "../output-file.ts";
import { redactSecrets } from "../report/format.ts";
import { type WrittenReport, writeReport } from "../report/index.ts";
import type { Deployment, PhaseRecord, StudyResult } from "../report/types.ts";
import { registerCommandSecrets } from "../secrets.ts";
import {
  DEFAULT_PROFILE,
  embeddedSimCommand,
  type ProfileDeployment,
  profileDeployment,
  profileModelOptions,
} from "../sim/profile.ts";
import { addSecret, collectEnvironment, openStore, redact, type Store } from "../store/index.ts";
import type { TelemetrySpec } from "../telemetry/types.ts";
import { assemble, type Measurements } from "./assemble.ts";
import { deploymentOf } from "./deployment.ts";
import {
  auditContext,
  phaseAb,
  phaseAudit,
  phaseBench,
  phaseModel,
  phaseSweep,
  phaseTrace,
  Unavailable,
} from "./phases.ts";
import { defaultPlan, defaultTimeScale, PHASES, type PhaseName, type StudyPlan } from "./plan.ts";

/** The worked example's deployment (model/examples.ts), as the study records it. */
export const SEED_DEPLOYMENT: Deployment = deploymentOf(SEED_MODEL_INPUT);

export interface StudyOptions {
  /** An already-running server (no restarts: the A/B is unavailable). */
  url?: string;
  /** A server command with `{port}` (or $PORT); inferscope starts it and restarts it per A/B arm. */
  serverCmd?: string;
  /** Embedded sim profile (default glm5-8x-rtxpro6000-pcie) when neither url nor serverCmd is given. */
  profile?: string;
  /** Extra `--set key=value` overrides for the embedded sim (hidden parameters; tests draw them). */
  simSet?: Record<string, string | number>;
  /** What the user gave about the deployment (flags); everything else is detected or unknown. */
  given?: GivenDeployment;
  /** The A/B arms in `ab`'s --variant grammar (two, baseline first); default: the engine registry's first fit. */
  variants?: string[];
  /** Host facts instead of reading this machine (tests); null: treat the server as remote. */
  host?: HostFacts | null;
  quick?: boolean;
  /** Report directory; omit to skip writing files. */
  outDir?: string;
  /** Run store path; null = do not store. Default: the store's default path. */
  dbPath?: string | null;
  /** Embedded sim only: run the sim's clock this many times faster; measured times are scaled back. */
  timeScale?: number;
  seed?: number;
  apiKey?: string;
  /** --url targets: the server's profiler directory, readable here (default $VLLM_TORCH_PROFILER_DIR). */
  profilerDir?: string;
  /** Run only these phases (tests); default all. */
  phases?: PhaseName[];
  plan?: Partial<StudyPlan>;
  /** Flags as the user gave them, for the report's method section. */
  flags?: Record<string, string | number | boolean | null>;
  onProgress?: (phase: string, message: string) => void;
  signal?: AbortSignal;
  /** A stream with no data (tokens) for this long fails as a stall, in every phase that streams; default 60 s. */
  stallTimeoutMs?: number;
  /** Hardware telemetry during the bench (`auto|none|nvidia-smi|dcgm:URL|…`); default auto. */
  telemetry?: string | TelemetrySpec;
}

export interface StudyOutcome {
  result: StudyResult;
  report?: WrittenReport;
  runId?: string;
}

export async function runStudy(opts: StudyOptions): Promise<StudyOutcome> {
  if (opts.url && opts.serverCmd) throw new UsageError("give either --url or --server-cmd, not both");
  // Checked before any phase: an ftp:// or mistyped URL is a usage error, not five phases that each fail.
  if (opts.url !== undefined) {
    const u = URL.canParse(opts.url) ? new URL(opts.url) : null;
    if (!u || (u.protocol !== "http:" && u.protocol !== "https:"))
      throw new UsageError(`--url is not an http(s) URL: ${opts.url}`, {
        hint: "give the server's root, e.g. --url http://127.0.0.1:8000",
      });
  }
  if (opts.timeScale !== undefined && (opts.url || opts.serverCmd))
    throw new UsageError("--time-scale applies to the embedded sim only", {
      hint: "a real server runs in real time; drop --time-scale or the --url/--server-cmd",
    });
  if (opts.timeScale !== undefined && !(opts.timeScale > 0 && opts.timeScale <= 1000))
    throw new UsageError(`--time-scale must be in (0, 1000], got ${opts.timeScale}`);
  // The profiler directory is read here while a --url server writes it; a started server (or the
  // embedded sim) gets a fresh one from us, so a given one would be silently ignored.
  if (opts.profilerDir !== undefined) {
    if (!opts.url)
      throw new UsageError(
        "--profiler-dir needs --url: it names the profiler directory of a server that is already running",
        {
          hint: opts.serverCmd
            ? "with --server-cmd the study makes its own directory and sets VLLM_TORCH_PROFILER_DIR for the server; drop --profiler-dir"
            : "add --url http://HOST:PORT of the server writing traces there, or drop --profiler-dir (the embedded sim traces into its own directory)",
        },
      );
    checkNotFile("--profiler-dir", opts.profilerDir);
  }
  if (opts.outDir) checkNotFile("--out", opts.outDir);
  if (opts.dbPath) checkRunStore("--db", opts.dbPath);
  const quick = Boolean(opts.quick);
  const seed = opts.seed ?? 1;
  const embedded = !opts.url && !opts.serverCmd;
  const timeScale = embedded ? (opts.timeScale ?? defaultTimeScale(quick)) : 1;
  const profile = opts.profile ?? DEFAULT_PROFILE;
  const plan: StudyPlan = { ...defaultPlan(quick), ...opts.plan };
  const wanted = new Set<PhaseName>(opts.phases ?? PHASES);
  const given: GivenDeployment = opts.given ?? {};
  checkGiven(given, opts.variants);
  const profileDep = embedded ? profileDeployment(profile) : undefined;
  // Until the server has answered: what was given, and the profile for the embedded sim.
  const deployment: Deployment = initialDeployment(given, profileDep);
  if (opts.apiKey) addSecret(opts.apiKey);
  const progress = (phase: string, msg: string) => opts.onProgress?.(phase, msg);
  // The report directory is made and locked now: a path that cannot hold it must not cost a whole
  // study, and a second study naming it is refused (with our pid) instead of overwriting our report.
  const outLock = opts.outDir ? claimOutputDir(opts.outDir, "--out") : null;
  try {
    return await studyClaimed(opts, {
      quick,
      seed,
      embedded,
      timeScale,
      profile,
      plan,
      wanted,
      given,
      profileDep,
      deployment,
      progress,
    });
  } finally {
    outLock?.release();
  }
}

interface Prepared {
  quick: boolean;
  seed: number;
  embedded: boolean;
  timeScale: number;
  profile: string;
  plan: StudyPlan;
  wanted: Set<PhaseName>;
  given: GivenDeployment;
  profileDep: ProfileDeployment | undefined;
  deployment: Deployment;
  progress: (phase: string, msg: string) => void;
}

async function studyClaimed(opts: StudyOptions, prep: Prepared): Promise<StudyOutcome> {
  const { quick, seed, embedded, timeScale, profile, plan, wanted, given, profileDep, progress } = prep;
  let deployment = prep.deployment;

  const serverCmd = embedded ? embeddedSimCommand(profile, timeScale, seed, opts.simSet) : opts.serverCmd;
  // Its secrets (--hf-token …, HF_TOKEN=…) are cut out of every output from here on.
  registerCommandSecrets(serverCmd);
  const kind: StudyResult["meta"]["target"]["kind"] = embedded ? "embedded-sim" : opts.url ? "url" : "server-cmd";
  const startedAt = new Date();
  const t0 = performance.now();
  const phases: PhaseRecord[] = [];
  const m: Measurements = { timeScale, plan, seed, deployment, kind };
  if (profileDep) m.modelInputs = { options: profileModelOptions(profileDep), missing: [], assumptions: [] };

  let store: Store | null = null;
  let runId: string | undefined;
  if (opts.dbPath !== null) {
    store = openStore(opts.dbPath);
    runId = store.saveRun({
      kind: "study",
      config: redact({
        ...opts.flags,
        target: kind,
        profile: embedded ? profile : undefined,
        quick,
        seed,
        timeScale,
        plan,
      }),
      environment: collectEnvironment({ timeScale }),
    }).id;
  }
  const save = (key: string, value: unknown) => {
    if (store && runId) store.setSummary(runId, key, redact(value, opts.apiKey ? [opts.apiKey] : []));
  };

  // Every phase promise, settled or not: on an interrupt the study waits for all of them before writing
  // the report. A phase left running alongside (the audit spans the bench) must never be dropped: its
  // rejection would be unhandled and end the process with a stack trace and no report.
  const running = new Set<Promise<unknown>>();
  const interrupted = () =>
    opts.signal?.reason instanceof Error ? opts.signal.reason : new InterruptedError("interrupted");
  function phase<T>(name: string, fn: () => Promise<T>): Promise<T | undefined> {
    const p = runPhase(name, fn);
    running.add(p);
    // Handled here as well as by whoever awaits it, so an early exit of the sequence leaves no orphan.
    p.catch(() => {}).finally(() => running.delete(p));
    return p;
  }
  async function runPhase<T>(name: string, fn: () => Promise<T>): Promise<T | undefined> {
    if (opts.signal?.aborted) {
      phases.push({ name, status: "skipped", reason: "interrupted before it started", durationMs: 0 });
      throw interrupted();
    }
    const p0 = performance.now();
    progress(name, "started");
    try {
      const out = await fn();
      // Work that returned partial data on an interrupt is kept, and says so.
      const cut = opts.signal?.aborted;
      phases.push({
        name,
        status: cut ? "interrupted" : "ok",
        reason: cut ? "stopped by the interrupt; what it measured before is kept" : undefined,
        durationMs: performance.now() - p0,
      });
      progress(name, `${cut ? "interrupted" : "done"} in ${((performance.now() - p0) / 1000).toFixed(1)} s`);
      save(`phase:${name}`, out);
      return out;
    } catch (err) {
      if (opts.signal?.aborted) {
        phases.push({
          name,
          status: "interrupted",
          reason: "stopped by the interrupt before it had a result",
          durationMs: performance.now() - p0,
        });
        throw interrupted();
      }
      const status = err instanceof Unavailable ? "unavailable" : "failed";
      const reason = studyWords(err instanceof Error ? err.message : String(err));
      phases.push({ name, status, reason: redactSecrets(reason), durationMs: performance.now() - p0 });
      progress(name, `${status}: ${reason}`);
      return undefined;
    }
  }
  const skip = (name: string, reason: string) => phases.push({ name, status: "skipped", reason, durationMs: 0 });

  let server: ServerHandle | null = null;
  const profilerDir = serverCmd
    ? mkdtempSync(join(tmpdir(), "inferscope-trace-"))
    : (opts.profilerDir ?? process.env.VLLM_TORCH_PROFILER_DIR);
  let baseUrl = opts.url?.replace(/\/+$/, "");
  let serverCommandShown = serverCmd ? redactSecrets(serverCmd) : undefined;
  let failure: unknown = null;
  // The embedded sim sends vLLM's request spans here, so the bench splits each TTFT by the engine's own
  // times. Only at time-scale 1: the spans carry the sim's clock, which the client's lines up with only then.
  // A started vLLM or SGLang gets its flags from its catalog entry (requestSpans); the sim takes vLLM's.
  const spanFlags = wanted.has("bench") && serverCmd ? requestSpanFlags(embedded, serverCmd, timeScale) : null;
  let spans: OtlpReceiver | null = null;
  try {
    if (spanFlags) spans = await startOtlpReceiver({ host: "127.0.0.1", port: 0, maxSpans: 100_000 });
    if (serverCmd) {
      progress(
        "server",
        embedded ? `starting the embedded sim (${profile}, time-scale ${timeScale}×)` : "starting the server",
      );
      server = await startServer({
        name: "baseline",
        // The baseline only: the A/B's restarts send no spans (nothing would read them).
        cmd:
          spans && spanFlags ? `${serverCmd} ${spanFlags.args(spans.endpoint).map(shellQuote).join(" ")}` : serverCmd,
        // vLLM (before --profiler-config) and the sim enable /start_profile from this variable.
        env: { VLLM_TORCH_PROFILER_DIR: profilerDir!, ...(spans && spanFlags ? spanFlags.env : {}) },
        apiKey: opts.apiKey,
        readyTimeoutMs: embedded ? 60_000 : 600_000,
        graceMs: embedded ? 3000 : 10_000,
        signal: opts.signal,
      });
      baseUrl = server.url;
      serverCommandShown = redactSecrets(server.command);
      m.servedModel = server.model ?? undefined;
    }
    const url = baseUrl!;
    m.url = url;

    // What the server is: engine, version, model, and (for a local server) the host it runs on.
    const found = await phase("discover", async () => {
      const r = await discover({
        url,
        serverCmd: embedded ? undefined : opts.serverCmd,
        given,
        profile: profileDep,
        apiKey: opts.apiKey,
        signal: opts.signal,
        host: embedded ? null : opts.host,
      });
      return { ...r, answers: { status: r.answers.status, metricEngines: r.answers.metricEngines } };
    });
    if (found) {
      const rec = deploymentRecord(found.discovery);
      deployment = rec;
      m.deployment = rec;
      m.discovery = found.discovery;
      m.modelInputs = modelInputsFor(found.discovery, given, found.host);
      m.experiment = chooseExperiment(found.discovery, opts.variants);
      for (const n of found.discovery.notes) progress("discover", n);
    }

    // The audit's window is the batch-1 bench: its second scrape waits for the bench to finish.
    let benchDone: () => void = () => {};
    const benchFinished = new Promise<void>((r) => (benchDone = r));
    const auditP = wanted.has("audit")
      ? phase("audit", () =>
          phaseAudit(url, {
            apiKey: opts.apiKey,
            until: benchFinished,
            signal: opts.signal,
            timeScale,
            context: auditContext(m, embedded ? undefined : opts.serverCmd),
          }),
        )
      : Promise.resolve(undefined).then(() => {
          skip("audit", "not requested");
          return undefined;
        });
    if (wanted.has("bench")) {
      m.bench = await phase("bench", () =>
        phaseBench(url, plan, m, {
          apiKey: opts.apiKey,
          signal: opts.signal,
          telemetry: opts.telemetry,
          stallTimeoutMs: opts.stallTimeoutMs,
          spans: spans ?? undefined,
          spanIdField: spanFlags?.idField,
        }),
      ).finally(benchDone);
      // Telemetry rides on the bench's window: its own row says what was read, or why nothing was.
      const t = m.bench?.telemetry;
      if (t?.summary) phases.push({ name: "telemetry", status: "ok", reason: t.source.why, durationMs: 0 });
      else
        phases.push({
          name: "telemetry",
          status: "unavailable",
          reason: redactSecrets(
            t ? [t.source.why, ...t.notes].join("; ") : m.bench ? "--telemetry none" : "the bench did not run",
          ),
          durationMs: 0,
        });
    } else {
      benchDone();
      skip("bench", "not requested");
      skip("telemetry", "it records during the bench, which was not requested");
    }
    m.audit = await auditP;

    // The sweep sends the bench's requests, longer, to the same server: after a bench in which no
    // request succeeded it would only repeat the failure (a stalling server: once per length).
    const benchFailed = phases.find((p) => p.name === "bench")?.status === "failed";
    if (wanted.has("sweep") && benchFailed)
      skip("sweep", "not run: no bench request succeeded against this server (the bench's failure says why)");
    else if (wanted.has("sweep"))
      m.sweep = await phase("sweep", () =>
        phaseSweep(url, plan, m, {
          apiKey: opts.apiKey,
          signal: opts.signal,
          stallTimeoutMs: opts.stallTimeoutMs,
          onProgress: (s) => progress("sweep", s),
        }),
      );
    else skip("sweep", "not requested");

    if (wanted.has("trace"))
      m.trace = await phase("trace", () => {
        const e = m.deployment.engine ? engineById(m.deployment.engine) : undefined;
        if (!embedded && e && !e.profiler)
          throw new Unavailable(
            `${e.name} has no profiler endpoint (/start_profile): per-operation time comes from the model instead`,
          );
        return phaseTrace(url, plan, m, { dir: profilerDir, apiKey: opts.apiKey, signal: opts.signal });
      });
    else skip("trace", "not requested");

    // The A/B restarts the server per arm, so the baseline server goes first.
    if (server) {
      await server.stop();
      server = null;
    }
    if (wanted.has("ab"))
      m.ab = await phase("ab", () => {
        const ex = m.experiment;
        if (!serverCmd)
          throw new Unavailable(
            `the server was given by --url, so inferscope cannot restart it for an A/B${ex?.arms ? ` (${ex.arms[1]})` : ""}; pass --server-cmd to run one`,
          );
        if (!ex?.arms)
          throw new Unavailable(
            ex ? `no experiment: ${ex.plan.reason}` : "no experiment: the server was not described",
          );
        return phaseAb(serverCmd, plan, m, {
          apiKey: opts.apiKey,
          signal: opts.signal,
          stallTimeoutMs: opts.stallTimeoutMs,
          embedded,
          store,
          onProgress: (s) => progress("ab", s),
        });
      });
    else skip("ab", "not requested");

    if (wanted.has("model")) m.model = await phase("model", () => phaseModel(m));
    else skip("model", "not requested");
  } catch (err) {
    failure = err;
  } finally {
    // Phases still running (the audit beside an interrupted bench) finish or fail before the report.
    await Promise.allSettled([...running]);
    if (server) await server.stop().catch(() => {});
    await spans?.close().catch(() => {});
  }
  // Phases the interrupt never reached are in the report too, each with its status.
  if (failure && opts.signal?.aborted)
    for (const name of PHASES)
      if (wanted.has(name) && !phases.some((p) => p.name === name))
        skip(name, "not reached: the study was interrupted");

  const finishedAt = new Date();
  const result = redact(
    assemble(m, {
      tool: { name: "inferscope", version: "0.1.0" },
      startedAt: startedAt.toISOString(),
      finishedAt: finishedAt.toISOString(),
      durationMs: performance.now() - t0,
      quick,
      seed,
      target: {
        kind,
        url: opts.url,
        serverCommand: serverCommandShown,
        profile: embedded ? profile : undefined,
      },
      timeScale,
      deployment: m.deployment,
      flags: opts.flags ?? {},
      environment: environmentStrings(),
      phases,
      runId,
    }),
    opts.apiKey ? [opts.apiKey] : [],
  );
  let report: WrittenReport | undefined;
  try {
    // Stored first: if the report cannot be written, `inferscope report ID` rebuilds it.
    save("result", result);
    if (store && runId)
      store.finishRun(
        runId,
        failure ? "partial" : "complete",
        failure ? String((failure as Error).message ?? failure) : null,
      );
    if (opts.outDir) {
      progress("report", `writing ${opts.outDir}`);
      try {
        report = await writeReport(result, opts.outDir);
      } catch (e) {
        throw new InputError(`${opts.outDir}: cannot write the report: ${plainReason(e)}`, {
          hint: runId
            ? `the study is stored; rebuild its report with: inferscope report ${runId} --out DIR`
            : undefined,
        });
      }
    }
  } finally {
    store?.close();
  }
  if (failure && opts.signal?.aborted)
    failure = new InterruptedError(
      `${interruptWords(opts.signal.reason)}; the finished phases are saved${runId ? ` in run ${runId}` : ""}${report ? `, partial report in ${report.dir}` : ""}`,
    );
  else if (failure) {
    // Keep the typed error (interrupt → 130, unreachable → 3) and say where the partial report is.
    if (failure instanceof InferscopeError && report)
      throw Object.assign(failure, { message: `${failure.message}; partial report in ${report.dir}` });
  }
  if (failure) throw failure;
  // A study in which no request succeeded is not a success (exit 3), though its report says why: an
  // answered /metrics (the audit) or a detected host is no measurement of serving.
  const requesting = phases.filter((p) => REQUESTING.has(p.name));
  // Every failure is named, the audit's too: it often says best what is wrong with the server.
  const measuring = phases.filter((p) => p.name !== "discover" && p.name !== "model");
  if (
    requesting.length > 0 &&
    !requesting.some((p) => p.status === "ok") &&
    requesting.some((p) => p.status === "failed")
  )
    throw new TargetError(
      `the study measured nothing: no request succeeded (${measuring
        .filter((p) => p.status === "failed")
        .map((p) => `${p.name}: ${p.reason}`)
        .join("; ")})${report ? `; report in ${report.dir}` : ""}`,
      {
        url: m.url,
        hint: measuring.some((p) => /HTTP 40[13]\b/.test(p.reason ?? ""))
          ? opts.apiKey
            ? "the server rejected the key given (--api-key or $OPENAI_API_KEY): check it"
            : "the server wants a key: pass --api-key KEY (or set $OPENAI_API_KEY)"
          : kind === "url"
            ? "is --url an OpenAI-compatible server that is up and answering?"
            : "the server started but answered nothing usable: see its log (the report's server section)",
      },
    );
  return { result, report, runId };
}

/** The phases that send requests to the server: a study succeeds only if one of them did. */
const REQUESTING = new Set(["bench", "sweep", "trace", "ab"]);

function environmentStrings(): Record<string, string> {
  const env = collectEnvironment();
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (v !== null && v !== undefined) out[k] = String(v);
  out.host = hostname();
  return out;
}

/** Rebuilds the report of a stored study run (`inferscope report ID`). */
export async function rebuildReport(
  id: string,
  opts: { dbPath?: string; outDir: string },
): Promise<{ result: StudyResult; report: WrittenReport }> {
  // A reader: never creates a store, nor opens a directory or another file as one.
  checkRunStore("--db", opts.dbPath, { mustExist: true });
  const store = openStore(opts.dbPath);
  let result: StudyResult;
  try {
    const detail = store.getRun(id);
    if (detail.run.kind !== "study")
      throw new UsageError(`run ${id} is a ${detail.run.kind} run, not a study`, {
        hint: "`inferscope runs list --kind study` lists the studies",
      });
    const stored = detail.summaries.result as StudyResult | undefined;
    if (stored?.schema !== "inferscope.study/1")
      throw new UsageError(`run ${id} has no stored study result (status ${detail.run.status}: it did not finish)`);
    result = stored;
  } finally {
    store.close();
  }
  const lock = claimOutputDir(opts.outDir, "--out");
  try {
    return { result, report: await writeReport(result, opts.outDir) };
  } finally {
    lock.release();
  }
}

/** The deployment before the server has answered: the given fields, the profile's, and unknown for the rest. */
function initialDeployment(g: GivenDeployment, p: ProfileDeployment | undefined): Deployment {
  const pick = <T>(gv: T | undefined, pv: T | undefined, flag: string) =>
    gv !== undefined
      ? { value: gv, src: { source: "given" as const, from: flag } }
      : pv !== undefined
        ? { value: pv, src: { source: "profile" as const, from: `profile ${p!.name}` } }
        : { value: null, src: { source: "unknown" as const } };
  const f = {
    model: pick(g.model, p?.model, "--model"),
    quant: pick(g.quant, p?.quant, "--quant"),
    gpu: pick(g.gpu ?? g.cpu ?? g.hardware, p?.gpu, g.gpu ? "--gpu" : g.cpu ? "--cpu" : "--hardware"),
    gpus: pick(g.gpus, p?.gpus, "--gpus"),
    tp: pick(g.tp, p?.tp, "--tp"),
    interconnect: pick(g.interconnect, p?.interconnect, "--interconnect"),
    engine: pick(g.engine, p?.engine, "--engine"),
  };
  const d: Deployment = {
    model: f.model.value,
    quant: f.quant.value,
    gpu: f.gpu.value,
    gpus: f.gpus.value,
    tp: f.tp.value,
    interconnect: f.interconnect.value,
    engine: f.engine.value,
    sources: {},
  };
  for (const [k, v] of Object.entries(f)) d.sources![k as keyof typeof f] = v.src;
  return d;
}

/**
 * The phases' engines (bench, scrape, capture) name their own flags; a study has --url, no
 * --base-url, --timeout or --connect-timeout, so their limits are stated without a flag.
 */
function studyWords(text: string): string {
  return (
    text
      .replace(/ \((?:--connect-timeout|--timeout)\)/g, "")
      .replace("(--base-url)", "(--url)")
      .replaceAll("--base-url", "--url")
      // The study's --model is the architecture, not the served name /v1/models would give.
      .replaceAll("; pass --model", "")
  );
}

/** Runs a catalog lookup; its UsageError is re-raised naming the flag the value came from. */
function flagged<T>(flag: string, fn: () => T): T {
  try {
    return fn();
  } catch (e) {
    if (e instanceof UsageError && !e.message.startsWith(flag))
      throw new UsageError(`${flag}: ${e.message}`, { hint: e.hint });
    throw e;
  }
}

/** Given flags that name nothing real fail now, before any server starts. */
function checkGiven(g: GivenDeployment, variants: string[] | undefined): void {
  // Each named value is resolved now as the model phase will, so a typo costs seconds, not a study.
  let arch: Architecture | undefined;
  if (g.model) {
    const m = modelArg(g.model);
    arch = typeof m === "string" ? flagged("--model", () => requireModel(m)) : m;
  }
  if (g.quant && g.quant.toLowerCase() !== "gguf") flagged("--quant", () => recipe(g.quant!, arch ?? listModels()[0]!));
  if (g.interconnect) flagged("--interconnect", () => parseInterconnect(g.interconnect!));
  if (g.gpu && !findGpu(g.gpu) && !g.gpuBandwidth)
    throw new UsageError(`--gpu "${g.gpu}" is not in the catalog`, {
      hint: "`inferscope model catalog` lists the GPUs and CPUs; or describe it: --gpu-bandwidth 936GB/s --gpu-tflops-bf16 71",
    });
  if (g.cpu && findGpu(g.cpu)?.kind !== "cpu" && !g.cpuBandwidth)
    throw new UsageError(`--cpu "${g.cpu}" is not a catalog CPU`, {
      hint: "`inferscope model catalog` lists the CPUs; or describe the host: --cpu-bandwidth 40GB/s --cpu-cores 16",
    });
  if (g.engine && !engineById(g.engine))
    throw new UsageError(`unknown --engine "${g.engine}"`, {
      hint: "one of vllm, sglang, tgi, llamacpp, trtllm, triton, dynamo",
    });
  if (g.hardware !== undefined) checkInputFile("--hardware", g.hardware);
  if (g.tp !== undefined && g.gpus !== undefined && g.tp > g.gpus)
    throw new UsageError(`--tp ${g.tp} needs at least ${g.tp} GPUs, but --gpus is ${g.gpus}`);
  checkParallelism({ tp: g.tp, gpus: g.gpus });
  if (variants?.length) {
    if (variants.length !== 2)
      throw new UsageError(
        `the study's A/B takes exactly two --variant arms (baseline first), got ${variants.length}`,
        {
          hint: "for more arms use `inferscope ab --variant … --variant … --variant …`",
        },
      );
    const names = variants.map((v) => parseVariant(v).name);
    if (names[0] === names[1]) throw new UsageError(`the two --variant arms are both named "${names[0]}"`);
    for (const v of variants) {
      const spec = parseVariant(v);
      if (spec.url)
        throw new UsageError(
          `--variant ${v}: the study restarts the server per arm; URL arms belong to \`inferscope ab\``,
        );
      checkNcclEnv(spec.env, `--variant ${spec.name}`);
    }
  }
}

/** "interrupted by SIGINT" where the abort says which signal, else "interrupted". */
function interruptWords(reason: unknown): string {
  const m = reason instanceof Error ? /^interrupted by SIG[A-Z]+/.exec(reason.message) : null;
  return m ? m[0] : "interrupted";
}
