// Placeholder until the report capability lands; replaced by its own module.
import type { Command } from "@commander-js/extra-typings";
import { UsageError } from "../../errors.ts";

export function register(program: Command): void {
  program
    .command("report")
    .description("(not yet available)")
    .action(() => {
      throw new UsageError("'report' is not available in this build yet");
    });
}
