// An in-process stand-in for `startServer` that starts the real simulator (startSim, a real HTTP
// server on loopback) with a candidate's flags and env, and its hidden parameters; plus the sim's
// own truth for a candidate. Tests that restart a server dozens of times per draw use it; the
// process path (`--server-cmd`) is covered by its own end-to-end test.
import type { ServerHandle, ServerSpec } from "../../src/experiment/variants.ts";
import { decodeBatch, resolveSim, startSim } from "../../src/sim/index.ts";
import type { Rng } from "../../src/sim/rng.ts";
import type { Store } from "../../src/store/index.ts";
import { tokensPerStep } from "../../src/tune/model.ts";
import { runTune } from "../../src/tune/run.ts";

export interface Hidden {
  overrides: Record<string, unknown>;
  acceptance: number;
}

interface SimArgs {
  specTokens: number;
  enforceEager: boolean;
  env: Record<string, string | undefined>;
}

function simArgs(args: readonly string[], env: Record<string, string>, unset: readonly string[]): SimArgs {
  let specTokens = 0;
  let enforceEager = false;
  for (let i = 0; i < args.length; i++) {
    if (args[i] === "--spec-tokens") specTokens = Number(args[++i]);
    else if (args[i] === "--enforce-eager") enforceEager = true;
    else throw new Error(`tune-sim: unexpected argument ${args[i]}`);
  }
  const e: Record<string, string | undefined> = { ...env };
  for (const u of unset) e[u] = undefined;
  return { specTokens, enforceEager, env: e };
}

/**
 * tune's draws on the sim (test/tune/sim.test.ts, bench:tune): the acceptance rate, the protocol costs, NCCL's
 * default protocol and the eager penalty, drawn at random, decide which of the candidates is best.
 */
export const TUNE_KNOBS = ["NCCL_PROTO=,LL,Simple", "--spec-tokens=0,2", "--enforce-eager"];
export const TUNE_TIME_SCALE = 20;
export const TUNE_WORKLOAD = { numPrompts: 4, randomInputLen: 32, randomOutputLen: 48, warmup: 1 };
/** The mean decode context of that workload: the prompt and half the answer. */
export const TUNE_CTX = 32 + 24;
/** The seed of the draws' generator (new Rng(TUNE_DRAW_SEED)); draw d runs tune with seed d. */
export const TUNE_DRAW_SEED = 20261203;

export function drawHidden(rng: Rng): Hidden {
  const u = (a: number, b: number) => a + (b - a) * rng.next();
  return {
    acceptance: u(0.15, 0.9),
    overrides: {
      "collectives.perCallUs.LL": u(30, 100),
      "collectives.perCallUs.Simple": u(30, 100),
      "collectives.defaultProtocol": rng.next() < 0.5 ? "LL" : "Simple",
      "collectives.eagerCallUs": u(5, 40),
      "cost.launchUs.eager": u(4, 30),
      "cost.draftUsPerToken": u(300, 3000),
    },
  };
}

/** The sim's true TPOT (ms, unscaled) for a candidate: its decode step ÷ expected tokens per step. */
export function trueTpotMs(hidden: Hidden, args: readonly string[], env: Record<string, string>, ctx: number): number {
  const a = simArgs(args, env, []);
  const { model } = resolveSim({
    overrides: hidden.overrides,
    specTokens: a.specTokens,
    enforceEager: a.enforceEager,
    env: a.env,
    acceptance: hidden.acceptance,
  });
  return model.stepMs(decodeBatch(1, ctx)) / tokensPerStep(a.specTokens, hidden.acceptance);
}

/** A `startServer` whose servers are in-process sims with these hidden parameters. */
export function simStarter(hidden: Hidden, timeScale: number, seed = 0) {
  let n = 0;
  return async (spec: ServerSpec): Promise<ServerHandle> => {
    const a = simArgs(spec.args ?? [], spec.env ?? {}, spec.unsetEnv ?? []);
    const sim = await startSim({
      port: 0,
      timeScale,
      seed: seed + n++,
      overrides: hidden.overrides,
      acceptance: hidden.acceptance,
      specTokens: a.specTokens,
      enforceEager: a.enforceEager,
      env: a.env,
    });
    let stopping = false;
    const h: ServerHandle = {
      name: spec.name,
      url: sim.url,
      port: sim.port,
      pid: process.pid,
      pgid: process.pid,
      command: `in-process sim ${(spec.args ?? []).join(" ")}`,
      env: spec.env ?? {},
      logFile: "",
      model: null,
      version: null,
      readyMs: 0,
      logTail: () => [],
      exit: null,
      exited: new Promise(() => {}),
      get stopping() {
        return stopping;
      },
      set stopping(v: boolean) {
        stopping = v;
      },
      async stop() {
        stopping = true;
        await sim.close(1000);
      },
      describe: () => ({ name: spec.name, url: sim.url, inProcess: true }),
    };
    return h;
  };
}

export interface DrawScore {
  /** The chosen candidate's true TPOT over the true best's, less 1. */
  gap: number;
  chosen: string;
  chosenName: string;
  trueBest: string;
  candidates: number;
  restarts: number;
  gridStarts: number;
  stop: string;
}

/** tune on draw d (seed d) against in-process sims with `hidden`, scored against the sim's own truth. */
export async function tuneOnDraw(hidden: Hidden, d: number, store: Store, starts = 24): Promise<DrawScore> {
  const r = await runTune(
    {
      knobs: TUNE_KNOBS,
      timeScale: TUNE_TIME_SCALE,
      workload: TUNE_WORKLOAD,
      seed: d,
      db: store,
      budget: { starts },
    },
    { startServer: simStarter(hidden, TUNE_TIME_SCALE, d * 100) },
  );
  if (!r.best) throw new Error(`draw ${d}: tune chose no candidate (stop: ${r.stop.reason})`);
  // The sim's truth for every candidate, from the run's own candidate list (env/args).
  const stored = store.getRun(r.runId).run.config as {
    candidates: Array<{ env: Record<string, string>; args: string[] }>;
  };
  const tpot = stored.candidates.map((c) => trueTpotMs(hidden, c.args, c.env, TUNE_CTX));
  const bestTrue = Math.min(...tpot);
  return {
    gap: tpot[Number(r.best.id.slice(1))]! / bestTrue - 1,
    chosen: r.best.id,
    chosenName: r.best.name,
    trueBest: `c${tpot.indexOf(bestTrue)}`,
    candidates: r.candidates.length,
    restarts: r.restarts,
    gridStarts: r.gridStarts,
    stop: r.stop.reason,
  };
}
