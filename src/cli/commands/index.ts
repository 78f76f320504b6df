// The command registry: one module per top-level command, each exporting register(program).
// Loaded lazily so `inferscope sim` does not pay for vega, SQLite and every other capability.
import type { Command } from "@commander-js/extra-typings";

type CommandModule = { register(program: Command): void };

export const commandLoaders: Record<string, () => Promise<CommandModule>> = {
  study: () => import("./study.ts"),
  metrics: () => import("./metrics.ts"),
  bench: () => import("./bench.ts"),
  ab: () => import("./ab.ts"),
  sweep: () => import("./sweep.ts"),
  tune: () => import("./tune.ts"),
  model: () => import("./model.ts"),
  trace: () => import("./trace.ts"),
  telemetry: () => import("./telemetry.ts"),
  sim: () => import("./sim.ts"),
  runs: () => import("./runs.ts"),
  report: () => import("./report.ts"),
};

/** The modules needed for argv: only the named command's, or all of them for help and errors. */
export async function loadCommands(argv: string[]): Promise<CommandModule[]> {
  const first = argv.find((a) => !a.startsWith("-"));
  if (!first && (argv.includes("--version") || argv.includes("-V"))) return [];
  const loaders = first && first in commandLoaders ? [commandLoaders[first]!] : Object.values(commandLoaders);
  return Promise.all(loaders.map((load) => load()));
}
