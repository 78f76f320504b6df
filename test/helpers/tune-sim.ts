// An in-process stand-in for `startServer` that starts the real simulator (startSim, a real HTTP
// server on loopback) with a candidate's flags and env, and its hidden parameters; plus the sim's
// own truth for a candidate. Tests that restart a server dozens of times per draw use it; the
// process path (`--server-cmd`) is covered by its own end-to-end test.
import type { ServerHandle, ServerSpec } from "../../src/experiment/variants.ts";
import { decodeBatch, resolveSim, startSim } from "../../src/sim/index.ts";
import { tokensPerStep } from "../../src/tune/model.ts";

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
