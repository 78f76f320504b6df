// The file `node FILE …` runs to start another inferscope process (the sim a study or a self-test
// spawns): the compiled main.js beside this module in a package, or the tsx launcher from sources.
import { fileURLToPath } from "node:url";

export const CLI_ENTRY = fileURLToPath(
  import.meta.url.endsWith(".ts")
    ? new URL("../../bin/inferscope.mjs", import.meta.url)
    : new URL("./main.js", import.meta.url),
);
