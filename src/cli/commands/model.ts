// Placeholder until the model capability lands; replaced by its own module.
import type { Command } from "@commander-js/extra-typings";
import { UsageError } from "../../errors.ts";

export function register(program: Command): void {
  program
    .command("model")
    .description("(not yet available)")
    .action(() => {
      throw new UsageError("'model' is not available in this build yet");
    });
}
