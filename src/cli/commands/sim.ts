// Placeholder until the sim capability lands; replaced by its own module.
import type { Command } from "@commander-js/extra-typings";
import { UsageError } from "../../errors.ts";

export function register(program: Command): void {
  program
    .command("sim")
    .description("(not yet available)")
    .action(() => {
      throw new UsageError("'sim' is not available in this build yet");
    });
}
