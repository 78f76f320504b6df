#!/usr/bin/env node
// The CLI entry: builds the command tree, runs it, and is the only place that sets the exit code.
// A load loop's command is first started again with the flags it needs (launch.mjs); then the signal
// handlers go first, before any other module is evaluated.
import "./launch-first.mjs";
import "./signals-first.ts";
import { readFileSync } from "node:fs";
import type { Command } from "@commander-js/extra-typings";
import { describeError, ExitCode, InterruptedError } from "../errors.ts";
import { interruptedBy } from "../interrupt.ts";
import { registerArgvSecrets } from "../secrets.ts";
import { hideArgvSecrets } from "./argv-secrets.ts";
import { loadCommands } from "./commands/index.ts";
import { safeLine } from "./common.ts";

/** The package's version: package.json is two levels up from both src/cli and dist/cli. */
export function packageVersion(): string {
  return JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")).version;
}

export async function buildProgram(argv: string[] = []): Promise<Command> {
  const { Command } = await import("@commander-js/extra-typings");
  const program = new Command()
    .name("inferscope")
    .description("Where each token's time goes in LLM inference serving, and how fast it could be.")
    .version(packageVersion())
    .showHelpAfterError("(run with --help for usage)")
    .exitOverride();
  for (const mod of await loadCommands(argv)) mod.register(program);
  return program;
}

export async function main(argv: string[]): Promise<number> {
  const debug = argv.includes("--debug");
  // Scripts probe an install with `--version`: answer it without loading commander.
  if (argv.length === 1 && (argv[0] === "--version" || argv[0] === "-V")) {
    process.stdout.write(`${packageVersion()}\n`);
    return ExitCode.ok;
  }
  // Whatever a secret in our own arguments (a key, a URL's password, a token in --server-cmd) is passed on
  // to, it is cut out of every output of this process.
  registerArgvSecrets(argv);
  // …and hidden from `ps` for the rest of the run (src/cli/argv-secrets.ts).
  hideArgvSecrets();
  try {
    const program = await buildProgram(argv);
    await program.parseAsync(argv, { from: "user" });
    // A signal that came after the command's interruptible work still means "interrupted".
    const sig = interruptedBy();
    if (sig && process.exitCode !== ExitCode.interrupted)
      throw new InterruptedError(`interrupted by ${sig} as the command finished; what it printed above is complete`);
    return typeof process.exitCode === "number" ? process.exitCode : ExitCode.ok;
  } catch (err) {
    const { CommanderError } = await import("@commander-js/extra-typings");
    if (err instanceof CommanderError) {
      // --help and --version land here with exit code 0.
      if (err.exitCode === 0) return ExitCode.ok;
      return ExitCode.usage;
    }
    const { message, exitCode, hint } = describeError(err);
    // Messages quote servers (error bodies, model ids): escaped and redacted like every other output.
    process.stderr.write(`inferscope: error: ${safeLine(message)}\n`);
    if (hint) process.stderr.write(`  hint: ${safeLine(hint)}\n`);
    if (debug && err instanceof Error && err.stack) process.stderr.write(`${err.stack}\n`);
    return exitCode;
  }
}

/**
 * Resolves once everything written to `s` has reached the OS. A pipe whose reader is slower than us
 * holds the rest in Node's queue, and process.exit() would drop it (a --json document cut at 64 KiB).
 */
function drained(s: NodeJS.WriteStream): Promise<void> {
  if (s.writableLength === 0 || s.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    s.once("error", () => resolve());
    s.write("", () => resolve());
  });
}

// A reader that went away (`| head`) is not an error of ours: stop writing, keep the exit code.
for (const s of [process.stdout, process.stderr])
  s.on("error", (e: NodeJS.ErrnoException) => {
    if (e.code !== "EPIPE") throw e;
    s.destroy();
  });

// A promise that rejects with no one awaiting it is a bug of ours; still, the user gets one line and the
// error's exit code (an interrupt's 130), not Node's stack trace and exit 1.
process.on("unhandledRejection", (err) => {
  const { message, exitCode } = describeError(err);
  process.stderr.write(`inferscope: error: ${safeLine(message)}\n`);
  if (process.argv.includes("--debug") && err instanceof Error && err.stack) process.stderr.write(`${err.stack}\n`);
  process.exit(exitCode);
});

const code = await main(process.argv.slice(2));
process.exitCode = code;
// Servers started by commands have their own shutdown paths; everything else ends once output drained.
if (!process.env.INFERSCOPE_NO_EXIT)
  await Promise.all([drained(process.stdout), drained(process.stderr)]).then(() => process.exit(code));
