// Bounds on the flags that size a bench's memory, threads and sockets. A value past one is a usage
// error before anything starts: a typo such as `--num-prompts 1e99` or `--workers 999` must not turn
// into a multi-gigabyte allocation, hundreds of threads or an "internal error".
import { availableParallelism } from "node:os";
import { UsageError } from "../errors.ts";
import { MAX_TIMER_MS } from "../sleep.ts";

/** Requests one run keeps (records, arrival times, prompt bodies are all per request). */
export const MAX_REQUESTS = 1_000_000;
/** Tokens in one prompt or one response: past the longest context any served model has. */
export const MAX_TOKENS = 1 << 20;
/** Shared prefixes (`--dataset-name shared-prefix`): each is built once and kept for the run. */
export const MAX_PREFIX_GROUPS = 100_000;
export const MAX_PREFIX_TOKENS = 1 << 26;
/**
 * Prompt tokens one trace replay builds before its clock starts (every body is kept, UTF-8, ~5.5 bytes a
 * token: 256 M tokens ≈ 1.4 GB). The whole Mooncake conversation trace is 145 M.
 */
export const MAX_REPLAY_TOKENS = 1 << 28;
/**
 * Wall time one run's schedule may span: the longest --duration, Node's longest timer (24.86 days). A
 * schedule past it (a trace row dated decades later, a rate of 1e-9 req/s) is refused before anything is sent.
 */
export const MAX_RUN_MS = MAX_TIMER_MS;

/** A wall-time span in the unit a person reads it in: "3.2 s", "25.0 days", "285,616 years". */
export function spanText(ms: number): string {
  const s = ms / 1000;
  if (!Number.isFinite(s)) return `${ms} ms`;
  if (s < 120) return `${s.toFixed(1)} s`;
  if (s < 7200) return `${(s / 60).toFixed(1)} min`;
  if (s < 172_800) return `${(s / 3600).toFixed(1)} h`;
  const days = s / 86_400;
  if (days < 730) return `${days.toFixed(1)} days`;
  const years = days / 365.25;
  return years < 1e9 ? `${Math.round(years).toLocaleString("en-US")} years` : `${years.toExponential(2)} years`;
}

/** The bound's own words, for the messages that refuse a schedule past it. */
export const RUN_BOUND_TEXT = `the ${spanText(MAX_RUN_MS)} one run may last (Node's longest timer)`;

/** Streams one worker thread's event loop is allowed; `--workers auto` gives each 256 (STREAMS_PER_WORKER). */
export const MAX_STREAMS_PER_WORKER = 4096;

/** Worker threads this host allows: one per core, no more (a thread per core is all the parallelism there is). */
export function maxWorkers(cores = availableParallelism()): number {
  return Math.max(1, cores);
}

/** `--workers N` within the cores; above them a usage error that says how many there are. */
export function checkWorkers(n: number, cores = availableParallelism()): number {
  if (!Number.isInteger(n) || n < 1) throw new UsageError(`--workers must be an integer ≥ 1 or auto, got ${n}`);
  const max = maxWorkers(cores);
  if (n > max)
    throw new UsageError(`--workers ${n}: this host has ${cores} core(s), so at most ${max} worker thread(s)`, {
      hint: `use --workers auto, or a number from 1 to ${max}`,
    });
  return n;
}

/**
 * Streams the run may hold open at once, spread over `workers` threads, within MAX_STREAMS_PER_WORKER
 * each. `flag` names where the number came from (--concurrency, --max-concurrency, --num-prompts at an
 * infinite rate).
 */
export function checkStreams(streams: number, workers: number, flag: string, cores = availableParallelism()): void {
  if (streams <= workers * MAX_STREAMS_PER_WORKER) return;
  const max = maxWorkers(cores);
  const need = Math.ceil(streams / MAX_STREAMS_PER_WORKER);
  const fixes: string[] = [];
  if (need <= max) fixes.push(`--workers ${need}`);
  fixes.push(
    flag === "--num-prompts"
      ? "--max-concurrency (every request is sent at once at an infinite rate)"
      : `${flag} ${max * MAX_STREAMS_PER_WORKER} or less`,
  );
  throw new UsageError(
    `${flag}: ${streams} streams at once on ${workers} worker thread(s) is more than ${MAX_STREAMS_PER_WORKER} per thread`,
    { hint: `this host allows ${max} worker thread(s); use ${fixes.join(", or ")}` },
  );
}
