// One place for every error a user can see. Library code throws these; only src/cli/main.ts exits.

export const ExitCode = {
  ok: 0,
  /** The command ran and found something: a regression, a failed check. */
  findings: 1,
  /** Bad flags, bad files, bad input of any kind. */
  usage: 2,
  /** The target server could not be reached or answered with an error. */
  unreachable: 3,
  /** Interrupted by the user (SIGINT); partial results were written. */
  interrupted: 130,
} as const;
export type ExitCodeValue = (typeof ExitCode)[keyof typeof ExitCode];

export interface SourcePosition {
  file?: string;
  line: number;
  column: number;
}

/** Base class: a message meant for the user, a stable code, and the exit code it maps to. */
export class InferscopeError extends Error {
  readonly code: string;
  readonly exitCode: ExitCodeValue;
  readonly hint?: string;
  constructor(code: string, message: string, opts: { exitCode?: ExitCodeValue; hint?: string; cause?: unknown } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = new.target.name;
    this.code = code;
    this.exitCode = opts.exitCode ?? ExitCode.usage;
    this.hint = opts.hint;
  }
}

/** Bad flags or contradictory options. */
export class UsageError extends InferscopeError {
  constructor(message: string, opts: { hint?: string; cause?: unknown } = {}) {
    super("E_USAGE", message, { ...opts, exitCode: ExitCode.usage });
  }
}

/** A file or body that could not be read or is not what was expected; carries its position. */
export class InputError extends InferscopeError {
  readonly position?: SourcePosition;
  constructor(
    message: string,
    opts: { position?: SourcePosition; hint?: string; cause?: unknown; code?: string } = {},
  ) {
    super(opts.code ?? "E_INPUT", withPosition(message, opts.position), { ...opts, exitCode: ExitCode.usage });
    this.position = opts.position;
  }
}

/** The text of a metrics exposition (or any line-oriented format) is malformed. */
export class ParseError extends InputError {
  readonly rawMessage: string;
  constructor(message: string, position: SourcePosition) {
    super(message, { position, code: "E_PARSE" });
    this.rawMessage = message;
  }
}

/** The target could not be reached, timed out, or answered with an HTTP error. */
export class TargetError extends InferscopeError {
  readonly url?: string;
  readonly status?: number;
  constructor(
    message: string,
    opts: { url?: string; status?: number; hint?: string; cause?: unknown; code?: string } = {},
  ) {
    super(opts.code ?? "E_TARGET", message, { ...opts, exitCode: ExitCode.unreachable });
    this.url = opts.url;
    this.status = opts.status;
  }
}

/**
 * A telemetry source could not start (nvidia-smi missing, an exporter down at start): exit 3 like an
 * unreachable target, raised before any measurement so nothing is lost.
 */
export class TelemetryError extends InferscopeError {
  constructor(message: string, opts: { hint?: string; cause?: unknown } = {}) {
    super("E_TELEMETRY", message, { ...opts, exitCode: ExitCode.unreachable });
  }
}

/** The command completed but its result is a finding (a regression, a failed check). */
export class FindingsError extends InferscopeError {
  constructor(message: string) {
    super("E_FINDINGS", message, { exitCode: ExitCode.findings });
  }
}

/** The user interrupted; partial results are already saved. */
export class InterruptedError extends InferscopeError {
  constructor(message = "interrupted") {
    super("E_INTERRUPTED", message, { exitCode: ExitCode.interrupted });
  }
}

/** A bug in inferscope itself. */
export class InternalError extends InferscopeError {
  constructor(message: string, cause?: unknown) {
    super("E_INTERNAL", message, { exitCode: ExitCode.usage, cause });
  }
}

function withPosition(message: string, pos?: SourcePosition): string {
  if (!pos) return message;
  return `${pos.file ? `${pos.file}:` : ""}${pos.line}:${pos.column}: ${message}`;
}

/** A system error's plain words without its path (for messages that already name the path). */
export function plainReason(err: unknown): string {
  const path = (err as NodeJS.ErrnoException)?.path;
  const m = describeError(err).message;
  return path && m.startsWith(`${path}: `) ? m.slice(path.length + 2) : m;
}

/** Turns any thrown value into a user-facing line, and the exit code. Node system errors get plain words. */
export function describeError(err: unknown): { message: string; exitCode: ExitCodeValue; hint?: string } {
  if (err instanceof InferscopeError) return { message: err.message, exitCode: err.exitCode, hint: err.hint };
  const e = err as NodeJS.ErrnoException;
  if (e && typeof e === "object" && typeof e.code === "string") {
    const plain: Record<string, string> = {
      ENOENT: "no such file or directory",
      EACCES: "permission denied",
      EISDIR: "is a directory",
      ENOTDIR: "not a directory (a part of the path is a file)",
      EEXIST: "already exists",
      EROFS: "read-only file system",
      ENOSPC: "no space left on device",
      EPERM: "operation not permitted",
      ECONNREFUSED: "connection refused",
      EADDRINUSE: "address already in use",
    };
    const what = plain[e.code];
    if (what) {
      const where = e.path ?? (e as { address?: string }).address ?? "";
      const exitCode = e.code === "ECONNREFUSED" ? ExitCode.unreachable : ExitCode.usage;
      return { message: `${where ? `${where}: ` : ""}${what}`, exitCode };
    }
  }
  const message = err instanceof Error ? err.message : String(err);
  return {
    message: `internal error: ${message}`,
    exitCode: ExitCode.usage,
    hint: "this is a bug in inferscope; rerun with --debug and report the stack trace",
  };
}

/**
 * One rule for every command's outcome (docs/architecture.md): 130 interrupted (partial results saved,
 * run id printed); 2 bad input, caught before any work; 3 the target could not be reached or answered
 * only errors (nothing measured: a study or sweep whose every phase failed is not a success); 1 the
 * run measured something and found a regression or a failed check; 0 something was measured.
 */
export function outcomeExitCode(o: {
  interrupted?: boolean;
  badInput?: boolean;
  /** Phases, levels or requests that produced a measurement. */
  measured: number;
  findings?: number;
}): ExitCodeValue {
  if (o.interrupted) return ExitCode.interrupted;
  if (o.badInput) return ExitCode.usage;
  if (o.measured === 0) return ExitCode.unreachable;
  if ((o.findings ?? 0) > 0) return ExitCode.findings;
  return ExitCode.ok;
}

/** The error to throw when nothing was measured: exit 3 with the first failure's words and the flag to check. */
export function nothingMeasured(firstFailure: string | undefined, flag: string): TargetError {
  return new TargetError(`nothing was measured: ${firstFailure ?? "every attempt failed"}`, {
    hint: `check the server (${flag})`,
  });
}
