// The flags a load loop needs from the process's start, and the one re-execution that gives them to the
// CLI. V8's memory reducer starts a mark-compact ~8 s after a full collection when allocation is slow,
// inside a measured window (docs/metrics.md); it is made with the heap, so only a flag at start turns it
// off (v8.setFlagsFromString is too late, and Node refuses V8 flags in NODE_OPTIONS). Plain JavaScript,
// so the development launcher (bin/inferscope.mjs) runs it before tsx loads, as the package's bin does.

export const LOAD_LOOP_FLAGS = Object.freeze(["--no-memory-reducer"]);

/** The commands that run a load loop (the others start faster without a second start). */
export const LOAD_LOOP_COMMANDS = Object.freeze(["ab", "bench", "study", "sweep", "tune"]);

/** Whether `args` (the CLI's, after the script) run a load loop: the command is the first non-option word. */
export function runsLoadLoop(args) {
  const cmd = args.find((a) => !a.startsWith("-"));
  return cmd !== undefined && LOAD_LOOP_COMMANDS.includes(cmd) && !args.includes("--help") && !args.includes("-h");
}

/**
 * The argv to re-execute this process with (the Node binary first), or null where it stays as it is: no
 * process.execve (Node before 22.15 and 23.11), a say on the memory reducer already given (either way),
 * an inspector asked for (a debugger would lose its session), or no script.
 */
export function relaunchArgv(p) {
  if (!p.canExec || !p.argv[1]) return null;
  if (p.execArgv.some((a) => /^--(no[-_])?memory[-_]reducer$/.test(a))) return null;
  if (p.execArgv.some((a) => a.startsWith("--inspect")) || /--inspect/.test(p.nodeOptions ?? "")) return null;
  return [p.execPath, ...p.execArgv, ...LOAD_LOOP_FLAGS, ...p.argv.slice(1)];
}

/**
 * Replaces this process with itself started with LOAD_LOOP_FLAGS (same pid, stdio, environment and exit
 * status); returns only where relaunchArgv says it stays. A signal in the second start, before the CLI's
 * handlers are back, gets Node's default (there is nothing to save yet).
 */
export function execWithLoadLoopFlags() {
  const argv = relaunchArgv({
    canExec: typeof process.execve === "function",
    execPath: process.execPath,
    execArgv: process.execArgv,
    argv: process.argv,
    nodeOptions: process.env.NODE_OPTIONS,
  });
  if (argv) process.execve(argv[0], argv);
}
