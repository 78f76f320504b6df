// Placeholder until the study capability lands; replaced by its own module.
import type { Command } from "@commander-js/extra-typings";
import { UsageError } from "../../errors.ts";

export function register(program: Command): void {
  program
    .command("study")
    .description("(not yet available)")
    .action(() => {
      throw new UsageError("'study' is not available in this build yet");
    });
}
