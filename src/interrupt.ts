// One interrupt path for every command. The CLI installs it first thing (src/cli/signals-first.ts), so
// SIGINT and SIGTERM are ours from the first line that runs, never Node's default (exit 143 or death by
// signal). Until a command arms it, a signal exits 130 at once: such a command has nothing partial to
// save (claimed output files are still committed by their exit hook). A command that saves partial
// results arms it (interruptSignal()); the first signal then aborts that signal, runs the soft hooks
// (SIGTERM to started servers) and the command saves and exits 130; a second signal runs the hard hooks
// (SIGKILL), prints the note (the run to resume) and exits 130 now.
import { InterruptedError } from "./errors.ts";

// The development launcher (bin/inferscope.mjs) installs a stand-in before tsx loads anything; it
// leaves its handler here so the real one can remove it.
const EARLY = Symbol.for("inferscope.earlySignalHandler");

let installed = false;
let armed = false;
let stopIsSuccess = false;
let count = 0;
let controller = new AbortController();
let noteFn: (() => string | undefined) | null = null;
const softHooks = new Set<(sig: NodeJS.Signals) => void>();
const hardHooks = new Set<(sig: NodeJS.Signals) => string | undefined>();

function onSignal(sig: NodeJS.Signals): void {
  count++;
  if (count === 1 && armed) {
    controller.abort(new InterruptedError(`interrupted by ${sig}`));
    for (const h of softHooks) safe(h, sig);
    return;
  }
  const done = [...hardHooks].map((h) => safe(h, sig)).filter(Boolean);
  const n = noteFn?.();
  const what = `${done.length ? done.join("; ") : "stopping now"}${n ? `; ${n}` : ""}`;
  process.stderr.write(
    count === 1 ? `inferscope: interrupted by ${sig}\n` : `inferscope: interrupted again (${sig}): ${what}\n`,
  );
  // Exit hooks still run: started process groups are killed, claimed output files committed.
  process.exit(130);
}

function safe(h: (sig: NodeJS.Signals) => unknown, sig: NodeJS.Signals): string | undefined {
  try {
    const r = h(sig);
    return typeof r === "string" && r ? r : undefined;
  } catch {
    // A hook must not keep the others (or the exit) from running.
    return undefined;
  }
}

/** Takes SIGINT and SIGTERM for this process (idempotent). The CLI calls it before loading any command. */
export function installInterrupts(): void {
  if (installed) return;
  installed = true;
  const early = (globalThis as Record<symbol, unknown>)[EARLY] as ((s: NodeJS.Signals) => void) | undefined;
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  if (early) {
    process.off("SIGINT", early);
    process.off("SIGTERM", early);
    // A signal the stand-in saw before we were here counts as ours.
    const seen = (early as { seen?: NodeJS.Signals }).seen;
    if (seen) onSignal(seen);
  }
}

/**
 * The process's interrupt signal, armed: from now on the first SIGINT/SIGTERM aborts it (reason: an
 * InterruptedError naming the signal) instead of exiting, and the caller saves what it has. One signal
 * for the whole process, whichever command or phase asks. `stopIsSuccess`: a live view, which a Ctrl-C
 * simply ends (exit 0).
 */
export function interruptSignal(o: { stopIsSuccess?: boolean } = {}): AbortSignal {
  installInterrupts();
  armed = true;
  if (o.stopIsSuccess) stopIsSuccess = true;
  return controller.signal;
}

/** The signal that ended the run early, if one did ("SIGINT"), for the exit code and the closing line. */
export function interruptedBy(): string | null {
  if (!controller.signal.aborted || stopIsSuccess) return null;
  const r = controller.signal.reason;
  return r instanceof Error ? (/\b(SIG[A-Z]+)\b/.exec(r.message)?.[1] ?? "a signal") : "a signal";
}

/**
 * Hooks run on an interrupt: `soft` on the first signal of an armed run (stop servers gently), `hard` on
 * the signal that exits (kill them; it may return words for the exit line, "servers killed"). Returns the remover.
 */
export function onInterrupt(h: {
  soft?: (sig: NodeJS.Signals) => void;
  hard?: (sig: NodeJS.Signals) => string | undefined;
}) {
  if (h.soft) softHooks.add(h.soft);
  if (h.hard) hardHooks.add(h.hard);
  return () => {
    if (h.soft) softHooks.delete(h.soft);
    if (h.hard) hardHooks.delete(h.hard);
  };
}

/** What the exiting signal prints after "stopping now": where the finished work is (a run id to resume). */
export function setInterruptNote(note: string | null | (() => string | undefined)): void {
  noteFn = note === null ? null : typeof note === "string" ? () => note : note;
}

/** Tests in one process: a fresh, unarmed signal. */
export function resetInterruptsForTest(): void {
  armed = false;
  stopIsSuccess = false;
  count = 0;
  controller = new AbortController();
  noteFn = null;
}
