// The file `node FILE …` runs to start another inferscope process (the sim a study, a tune or a self-test
// spawns): the compiled cli/main.js beside this module in a package, or the tsx launcher from sources.
// Kept below the commands and the capabilities that spawn it (sim/profile.ts, load/selftest.ts).
import { fileURLToPath } from "node:url";

export const CLI_ENTRY = fileURLToPath(
  import.meta.url.endsWith(".ts")
    ? new URL("../bin/inferscope.mjs", import.meta.url)
    : new URL("./cli/main.js", import.meta.url),
);
