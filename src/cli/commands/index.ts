// The command registry: one module per top-level command, each exporting register(program).
import type { Command } from "@commander-js/extra-typings";
import { register as ab } from "./ab.ts";
import { register as bench } from "./bench.ts";
import { register as metrics } from "./metrics.ts";
import { register as model } from "./model.ts";
import { register as report } from "./report.ts";
import { register as runs } from "./runs.ts";
import { register as sim } from "./sim.ts";
import { register as study } from "./study.ts";
import { register as sweep } from "./sweep.ts";
import { register as trace } from "./trace.ts";

export const commands: Array<(program: Command) => void> = [
  study,
  metrics,
  bench,
  ab,
  sweep,
  model,
  trace,
  sim,
  runs,
  report,
];
