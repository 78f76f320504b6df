// `inferscope study`: runs the investigation end to end — metrics audit → batch-1 bench → length
// sweep → profiler trace → A/B on the NCCL protocol (server restarted per arm) → model calibrated on
// these measurements → decomposition, ceilings, what-ifs → report. Orchestration only: each phase
// calls one module's library function; the numbers come from src/study/estimate.ts (pure).
import { accessSync, constants, mkdirSync, mkdtempSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { CLI_ENTRY } from "../cli/entry.ts";
import { InferscopeError, InputError, InterruptedError, plainReason, UsageError } from "../errors.ts";
import { type ServerHandle, shellQuote, startServer } from "../experiment/variants.ts";
import { SEED_DEPLOYMENT as SEED_MODEL_INPUT } from "../model/index.ts";
import { redactSecrets } from "../report/format.ts";
import { type WrittenReport, writeReport } from "../report/index.ts";
import type { Deployment, PhaseRecord, StudyResult } from "../report/types.ts";
import { addSecret, collectEnvironment, openStore, redact, type Store } from "../store/index.ts";
import { assemble, type Measurements } from "./assemble.ts";
import { deploymentOf } from "./deployment.ts";
import { phaseAb, phaseAudit, phaseBench, phaseModel, phaseSweep, phaseTrace, Unavailable } from "./phases.ts";
import { defaultPlan, defaultTimeScale, PHASES, type PhaseName, type StudyPlan } from "./plan.ts";

export const DEFAULT_PROFILE = "glm5-8x-rtxpro6000-pcie";

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
  deployment?: Partial<Deployment>;
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
}

export interface StudyOutcome {
  result: StudyResult;
  report?: WrittenReport;
  runId?: string;
}

const BIN = CLI_ENTRY;

/** The embedded sim, started through the same server-command path a real server uses. */
export function embeddedSimCommand(
  profile: string,
  timeScale: number,
  seed: number,
  set: Record<string, string | number> = {},
): string {
  const words = [
    process.execPath,
    BIN,
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

export async function runStudy(opts: StudyOptions): Promise<StudyOutcome> {
  if (opts.url && opts.serverCmd) throw new UsageError("give either --url or --server-cmd, not both");
  if (opts.timeScale !== undefined && (opts.url || opts.serverCmd))
    throw new UsageError("--time-scale applies to the embedded sim only", {
      hint: "a real server runs in real time; drop --time-scale or the --url/--server-cmd",
    });
  if (opts.timeScale !== undefined && !(opts.timeScale > 0 && opts.timeScale <= 1000))
    throw new UsageError(`--time-scale must be in (0, 1000], got ${opts.timeScale}`);
  const quick = Boolean(opts.quick);
  const seed = opts.seed ?? 1;
  const embedded = !opts.url && !opts.serverCmd;
  const timeScale = embedded ? (opts.timeScale ?? defaultTimeScale(quick)) : 1;
  const profile = opts.profile ?? DEFAULT_PROFILE;
  const plan: StudyPlan = { ...defaultPlan(quick), ...opts.plan };
  const wanted = new Set<PhaseName>(opts.phases ?? PHASES);
  const deployment: Deployment = { ...SEED_DEPLOYMENT, ...opts.deployment };
  if (opts.apiKey) addSecret(opts.apiKey);
  const progress = (phase: string, msg: string) => opts.onProgress?.(phase, msg);
  // The report directory is made now: a path that cannot hold it must not cost a whole study.
  if (opts.outDir) {
    try {
      mkdirSync(opts.outDir, { recursive: true });
      accessSync(opts.outDir, constants.W_OK);
    } catch (e) {
      throw new InputError(`${opts.outDir}: cannot write the report there: ${plainReason(e)}`);
    }
  }

  const serverCmd = embedded ? embeddedSimCommand(profile, timeScale, seed, opts.simSet) : opts.serverCmd;
  const kind: StudyResult["meta"]["target"]["kind"] = embedded ? "embedded-sim" : opts.url ? "url" : "server-cmd";
  const startedAt = new Date();
  const t0 = performance.now();
  const phases: PhaseRecord[] = [];
  const m: Measurements = { timeScale, plan, seed, deployment, kind };

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

  async function phase<T>(name: string, fn: () => Promise<T>): Promise<T | undefined> {
    if (opts.signal?.aborted) throw opts.signal.reason instanceof Error ? opts.signal.reason : new InterruptedError();
    const p0 = performance.now();
    progress(name, "started");
    try {
      const out = await fn();
      phases.push({ name, status: "ok", durationMs: performance.now() - p0 });
      progress(name, `done in ${((performance.now() - p0) / 1000).toFixed(1)} s`);
      save(`phase:${name}`, out);
      return out;
    } catch (err) {
      if (opts.signal?.aborted) throw err;
      const status = err instanceof Unavailable ? "unavailable" : "failed";
      const reason = err instanceof Error ? err.message : String(err);
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
  try {
    if (serverCmd) {
      progress(
        "server",
        embedded ? `starting the embedded sim (${profile}, time-scale ${timeScale}×)` : "starting the server",
      );
      server = await startServer({
        name: "baseline",
        cmd: serverCmd,
        // vLLM (before --profiler-config) and the sim enable /start_profile from this variable.
        env: { VLLM_TORCH_PROFILER_DIR: profilerDir! },
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

    // The audit's window is the batch-1 bench: its second scrape waits for the bench to finish.
    let benchDone: () => void = () => {};
    const benchFinished = new Promise<void>((r) => (benchDone = r));
    const auditP = wanted.has("audit")
      ? phase("audit", () =>
          phaseAudit(url, { apiKey: opts.apiKey, until: benchFinished, signal: opts.signal, timeScale }),
        )
      : Promise.resolve(undefined).then(() => {
          skip("audit", "not requested");
          return undefined;
        });
    if (wanted.has("bench"))
      m.bench = await phase("bench", () =>
        phaseBench(url, plan, m, { apiKey: opts.apiKey, signal: opts.signal }),
      ).finally(benchDone);
    else {
      benchDone();
      skip("bench", "not requested");
    }
    m.audit = await auditP;

    if (wanted.has("sweep"))
      m.sweep = await phase("sweep", () =>
        phaseSweep(url, plan, m, { apiKey: opts.apiKey, signal: opts.signal, onProgress: (s) => progress("sweep", s) }),
      );
    else skip("sweep", "not requested");

    if (wanted.has("trace"))
      m.trace = await phase("trace", () =>
        phaseTrace(url, plan, m, { dir: profilerDir, apiKey: opts.apiKey, signal: opts.signal }),
      );
    else skip("trace", "not requested");

    // The A/B restarts the server per arm, so the baseline server goes first.
    if (server) {
      await server.stop();
      server = null;
    }
    if (wanted.has("ab"))
      m.ab = await phase("ab", () => {
        if (!serverCmd)
          throw new Unavailable(
            "the server was given by --url, so inferscope cannot restart it with NCCL_PROTO=LL; pass --server-cmd to run the A/B",
          );
        return phaseAb(serverCmd, plan, m, {
          apiKey: opts.apiKey,
          signal: opts.signal,
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
    if (server) await server.stop().catch(() => {});
  }

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
      deployment,
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
      `interrupted; the finished phases are saved${runId ? ` in run ${runId}` : ""}${report ? `, partial report in ${report.dir}` : ""}`,
    );
  else if (failure) {
    // Keep the typed error (interrupt → 130, unreachable → 3) and say where the partial report is.
    if (failure instanceof InferscopeError && report)
      throw Object.assign(failure, { message: `${failure.message}; partial report in ${report.dir}` });
  }
  if (failure) throw failure;
  return { result, report, runId };
}

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
  return { result, report: await writeReport(result, opts.outDir) };
}
