// Server process lifecycle for experiments: parse variants, start a server command with the
// variant's env and flags in its own process group, capture its logs, wait until it serves, and
// stop the whole group (SIGTERM, then SIGKILL after a grace period). No server outlives us: every
// started group is killed on our exit, and SIGINT/SIGTERM stop them before we return.
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createWriteStream, mkdirSync, readdirSync, readFileSync, type WriteStream } from "node:fs";
import { createServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { InterruptedError, TargetError, UsageError } from "../errors.ts";
import { onInterrupt, setInterruptNote, interruptSignal as sharedInterruptSignal } from "../interrupt.ts";
import { undici } from "../lazy.ts";
import { PROBE_REQUEST_ID_PREFIX } from "../otlp/attributes.ts";
import { REDACTED, redactString, registerArgvSecrets, registerCommandSecrets, shownWord } from "../secrets.ts";
import { shellQuote, shellSplit } from "../shell.ts";
import { registerVariantSecrets, sealVariant } from "./sealed.ts";

export { shellQuote, shellSplit };

// ---------------------------------------------------------------- variant syntax

export interface VariantSpec {
  name: string;
  /** Environment applied on top of ours when the server starts. */
  env: Record<string, string>;
  /** Extra arguments appended to the server command. */
  args: string[];
  /** An already-running server: nothing is started or stopped. */
  url?: string;
}

const NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;
const ENV_ASSIGN = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/s;

/**
 * `name:` (no changes), `name:ENV=V,ENV2=V2`, `name:--flag x`, `name:ENV=V --flag`, or
 * `name=http://host:port` for a server that is already running.
 */
export function parseVariant(text: string): VariantSpec {
  const m = /^([^:=\s]+)([:=])(.*)$/s.exec(text.trim());
  if (!m)
    throw new UsageError(`bad --variant "${text}"`, {
      hint: "write name:ENV=V,ENV2=V2 --flag, name: for the unchanged server, or name=http://host:port",
    });
  const [, name, sep, rest] = m;
  if (!NAME.test(name)) throw new UsageError(`bad variant name "${name}" (letters, digits, _ . -)`);
  if (sep === "=") {
    let u: URL;
    try {
      u = new URL(rest);
    } catch {
      throw new UsageError(`variant "${name}": "${rest}" is not a URL`, {
        hint: "use name=http://host:port for a running server, name:ENV=V for an environment change",
      });
    }
    if (u.protocol !== "http:" && u.protocol !== "https:")
      throw new UsageError(`variant "${name}": only http(s) URLs are supported, got ${u.protocol}`);
    return { name, env: {}, args: [], url: rest.replace(/\/+$/, "") };
  }
  const words = shellSplit(rest);
  const env: Record<string, string> = {};
  const args: string[] = [];
  for (const w of words) {
    // Leading non-flag words are comma-separated environment assignments; everything from the first flag on is args.
    if (args.length === 0 && !w.startsWith("-")) {
      for (const part of w.split(",").filter(Boolean)) {
        const a = ENV_ASSIGN.exec(part);
        if (!a)
          throw new UsageError(`variant "${name}": "${part}" is neither ENV=VALUE nor a --flag`, {
            hint: `example: --variant '${name}:NCCL_PROTO=LL,NCCL_ALGO=Ring --enforce-eager'`,
          });
        env[a[1]] = a[2];
      }
    } else args.push(w);
  }
  // HF_TOKEN=…, --api-key KEY, --hf-token=…: kept out of every output, stdout included.
  registerVariantSecrets({ name, env, args });
  return { name, env, args };
}

/** The variant as shown (secrets as `[redacted]`). */
export function describeVariant(spec: VariantSpec): string {
  const v = sealVariant(spec);
  if (v.url) return `${v.name} = ${redactString(v.url)}`;
  const parts = [
    ...Object.entries(v.env).map(([k, x]) => `${k}=${x}`),
    // A placeholder shown bare (`--api-key [redacted]`), not quoted as if it were the value.
    ...(v.args.length ? [v.args.map((a) => (a.includes(REDACTED) ? shownWord(a) : shellQuote(a))).join(" ")] : []),
  ];
  return `${v.name}: ${parts.length ? parts.join(" ") : "(unchanged)"}`;
}

/** Fills `{port}` and appends the variant's args (shell-quoted). */
export function buildCommand(cmd: string, port: number, args: readonly string[] = []): string {
  const base = cmd.replaceAll("{port}", String(port));
  return args.length ? `${base} ${args.map(shellQuote).join(" ")}` : base;
}

// ---------------------------------------------------------------- ports and process groups

/** A port the OS says is free on 127.0.0.1 right now. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const addr = srv.address();
      const port = typeof addr === "object" && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

/** Live (non-zombie) processes in a process group, from /proc; null where /proc is unavailable. */
export function processGroupMembers(pgid: number): number[] | null {
  let names: string[];
  try {
    names = readdirSync("/proc");
  } catch {
    return null;
  }
  const out: number[] = [];
  for (const n of names) {
    if (!/^\d+$/.test(n)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${n}/stat`, "utf8");
    } catch {
      continue;
    }
    // Fields after the parenthesised command: state ppid pgrp …
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (Number(f[2]) === pgid && f[0] !== "Z" && f[0] !== "X") out.push(Number(n));
  }
  return out;
}

/** A process that exists and is not a zombie (from /proc; signal 0 where /proc is unavailable). */
export function processAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
    return state !== "Z" && state !== "X";
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return false;
  }
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export function groupAlive(pgid: number): boolean {
  const members = processGroupMembers(pgid);
  if (members) return members.length > 0;
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

function killGroup(pgid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(-pgid, sig);
  } catch {
    // Already gone.
  }
}

// Every group we started and have not yet seen empty. Killed on exit, whatever path exit takes.
const liveGroups = new Set<number>();
let exitHookInstalled = false;
function trackGroup(pgid: number): void {
  liveGroups.add(pgid);
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.on("exit", () => {
      for (const g of liveGroups) killGroup(g, "SIGKILL");
    });
  }
}

/** Groups started by this process that may still have members. */
export function liveServerGroups(): number[] {
  return [...liveGroups];
}

// ---------------------------------------------------------------- interruption

let hooked = false;

/** What a second Ctrl-C prints before exiting at once: the run id to resume (set once a run is stored). */
export { setInterruptNote };

/**
 * The process's interrupt signal (src/interrupt.ts), with this module's hooks: on the first SIGINT or
 * SIGTERM every started server group gets SIGTERM at once; the experiment notices the abort, saves what
 * it has, stops its servers and returns. A second signal SIGKILLs the groups, prints the run to resume
 * (setInterruptNote) and exits 130.
 */
export function interruptSignal(): AbortSignal {
  if (!hooked) {
    hooked = true;
    onInterrupt({
      soft: () => {
        for (const g of liveGroups) killGroup(g, "SIGTERM");
      },
      hard: () => {
        for (const g of liveGroups) killGroup(g, "SIGKILL");
        return "servers killed";
      },
    });
  }
  return sharedInterruptSignal();
}

// ---------------------------------------------------------------- servers

export interface ServerSpec {
  /** The variant's name: every error names it. */
  name: string;
  /** Shell command; `{port}` is replaced and `$PORT` is set. */
  cmd: string;
  env?: Record<string, string>;
  /** Variables removed from the server's environment (a tune knob's empty item: "unset"). */
  unsetEnv?: string[];
  args?: string[];
  /** Default: a free port. */
  port?: number;
  cwd?: string;
  /** Where the server's stdout+stderr go. Default: a file under the OS temp dir. */
  logFile?: string;
  /** Lines kept in memory for error messages. Default 200. */
  logLines?: number;
  /** How long to wait for /health and the probe. Default 600 s (large models load slowly). */
  readyTimeoutMs?: number;
  /** SIGTERM → SIGKILL grace period. Default 10 s. */
  graceMs?: number;
  /** Send one small completion after /health says ok. Default true. */
  probe?: boolean;
  apiKey?: string;
  signal?: AbortSignal;
}

export interface ServerExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface ServerHandle {
  name: string;
  url: string;
  port: number;
  pid: number;
  pgid: number;
  /** The command as run, secrets redacted. */
  command: string;
  env: Record<string, string>;
  logFile: string;
  /** Model id reported by /v1/models (when the probe ran). */
  model: string | null;
  /** What GET /version answered (vLLM: {"version": "…"}), when it exists. */
  version: string | null;
  /** Milliseconds from spawn until /health and the probe succeeded. */
  readyMs: number;
  /** Last n log lines (redacted). */
  logTail(n?: number): string[];
  /** Set once the server's main process has exited. */
  exit: ServerExit | null;
  /** Resolves when the main process exits (whoever caused it). */
  exited: Promise<ServerExit>;
  /** True when stop() was asked for (an exit after that is expected). */
  stopping: boolean;
  /** SIGTERM the group, SIGKILL after the grace period; resolves when the group is empty. */
  stop(): Promise<void>;
  /** JSON-able description for the store. */
  describe(): Record<string, unknown>;
}

/** Splits a byte stream into lines; a line is handed on only once complete (or at flush). */
function lineSplitter(onLine: (line: string) => void) {
  let partial = "";
  return {
    push(chunk: string) {
      const parts = (partial + chunk).split(/\r?\n/);
      partial = parts.pop() ?? "";
      for (const p of parts) onLine(p);
    },
    flush() {
      if (partial) onLine(partial);
      partial = "";
    },
  };
}

function formatTail(lines: string[]): string {
  return lines.length
    ? `\n  last log lines:\n${lines.map((l) => `    | ${l}`).join("\n")}`
    : "\n  (the server wrote no log lines)";
}

async function httpGet(url: string, timeoutMs: number, headers: Record<string, string>) {
  const r = await undici().request(url, { method: "GET", headers, headersTimeout: timeoutMs, bodyTimeout: timeoutMs });
  const body = await r.body.text();
  return { status: r.statusCode, body };
}

/**
 * The shell script that runs a server command. A watchdog in the server's process group reads a
 * pipe (fd 3); the pipe closes when inferscope dies by any means (even SIGKILL), and the watchdog then
 * SIGKILLs the whole group, so no server outlives us. A normal stop's SIGTERM ends the watchdog too.
 * A simple command is exec'd so the server itself is the process whose exit we watch.
 */
export function serverScript(command: string): string {
  // fd 3 is a pipe only we write to. Node closes a child's stdin when the child exits but leaves
  // fd 3 alone, so EOF there means inferscope itself is gone.
  const watchdog = "( while read -r _; do :; done; kill -KILL 0 ) <&3 &";
  const simple = !/[;&|()`\n<>]/.test(command);
  // `exec NCCL_PROTO=LL vllm …` would look for a program named "NCCL_PROTO=LL"; env(1) applies the
  // assignments and execs in place, so the server stays the process we watch.
  const prefix = /^\s*[A-Za-z_][A-Za-z0-9_]*=/.test(command) ? "env " : "";
  return simple
    ? `${watchdog}\nexec ${prefix}${command.trimStart()} </dev/null 3<&-`
    : `${watchdog}\n{ ${command}\n} </dev/null 3<&-`;
}

function withoutKeys(env: NodeJS.ProcessEnv, keys: readonly string[] | undefined): NodeJS.ProcessEnv {
  for (const k of keys ?? []) delete env[k];
  return env;
}

/** Starts one server and resolves once it answers /health and a probe completion. */
export async function startServer(spec: ServerSpec): Promise<ServerHandle> {
  const port = spec.port ?? (await freePort());
  const command = buildCommand(spec.cmd, port, spec.args ?? []);
  const env = { ...(spec.env ?? {}) };
  // A library caller may start a server without parsing a variant: its secrets are found here too.
  registerCommandSecrets(command);
  registerArgvSecrets(Object.entries(env).map(([k, v]) => `${k}=${v}`));
  const logFile =
    spec.logFile ?? join(tmpdir(), "inferscope-logs", `${spec.name}-${port}-${Date.now().toString(36)}.log`);
  mkdirSync(dirname(logFile), { recursive: true });
  const log: WriteStream = createWriteStream(logFile, { flags: "a" });
  const secrets = spec.apiKey ? [spec.apiKey] : [];
  const t0 = performance.now();

  let child: ChildProcess;
  try {
    child = spawn("/bin/sh", ["-c", serverScript(command)], {
      cwd: spec.cwd,
      env: withoutKeys({ ...process.env, ...env, PORT: String(port) }, spec.unsetEnv),
      detached: true, // own session and process group: we signal the whole group, Ctrl-C in the terminal does not
      // fd 3 is the watchdog's lifeline (see serverScript); we never write to it.
      stdio: ["ignore", "pipe", "pipe", "pipe"],
    });
    // The lifeline must not keep our event loop alive.
    (child.stdio[3] as Socket | null)?.unref();
  } catch (err) {
    log.end();
    throw new TargetError(
      `variant "${spec.name}": could not start "${redactString(command, secrets)}": ${(err as Error).message}`,
    );
  }
  const pid = child.pid;
  if (pid === undefined) {
    log.end();
    throw new TargetError(`variant "${spec.name}": could not start "${redactString(command, secrets)}"`);
  }
  const pgid = pid;
  trackGroup(pgid);

  // Whole lines are redacted before they reach the ring buffer or the file, so a secret split
  // across two reads is still caught.
  const maxLines = spec.logLines ?? 200;
  const ring: string[] = [];
  const onLine = (line: string) => {
    const red = redactString(line, secrets);
    ring.push(red);
    if (ring.length > maxLines) ring.shift();
    if (!log.writableEnded) log.write(`${red}\n`);
  };
  const outLines = lineSplitter(onLine);
  const errLines = lineSplitter(onLine);
  const note = (text: string) => onLine(`[inferscope] ${text}`);
  child.stdout?.setEncoding("utf8");
  child.stderr?.setEncoding("utf8");
  child.stdout?.on("data", (c: string) => outLines.push(c));
  child.stderr?.on("data", (c: string) => errLines.push(c));
  const flushLines = () => {
    outLines.flush();
    errLines.flush();
  };
  child.on("close", flushLines);

  let exit: ServerExit | null = null;
  const exited = new Promise<ServerExit>((resolve) => {
    child.on("exit", (code, signal) => {
      exit = { code, signal };
      resolve(exit);
    });
    child.on("error", (err) => {
      note(`spawn error: ${err.message}`);
      exit = { code: null, signal: null };
      resolve(exit);
    });
  });

  const graceMs = spec.graceMs ?? 10_000;
  let stopPromise: Promise<void> | null = null;
  const handle: ServerHandle = {
    name: spec.name,
    url: `http://127.0.0.1:${port}`,
    port,
    pid,
    pgid,
    command: redactString(command, secrets),
    env,
    logFile,
    model: null,
    version: null,
    readyMs: Number.NaN,
    logTail: (n = 20) => ring.slice(-n),
    get exit() {
      return exit;
    },
    exited,
    stopping: false,
    stop() {
      if (stopPromise) return stopPromise;
      handle.stopping = true;
      stopPromise = (async () => {
        killGroup(pgid, "SIGTERM");
        const deadline = performance.now() + graceMs;
        while (groupAlive(pgid) && performance.now() < deadline) await sleep(25);
        if (groupAlive(pgid)) {
          note(`still running ${graceMs} ms after SIGTERM: SIGKILL to the process group`);
          killGroup(pgid, "SIGKILL");
          const hard = performance.now() + 5000;
          while (groupAlive(pgid) && performance.now() < hard) await sleep(10);
        }
        await Promise.race([exited, sleep(1000)]);
        liveGroups.delete(pgid);
        flushLines();
        (child.stdio[3] as Socket | null)?.destroy();
        await new Promise<void>((r) => log.end(r));
      })();
      return stopPromise;
    },
    describe() {
      return {
        name: spec.name,
        url: handle.url,
        port,
        pid,
        command: handle.command,
        env,
        logFile,
        model: handle.model,
        version: handle.version,
        readyMs: handle.readyMs,
        exit,
      };
    },
  };

  const fail = async (why: string, opts: { unreachable?: boolean } = {}): Promise<never> => {
    await handle.stop();
    const msg = `variant "${spec.name}": ${why}${formatTail(ring.slice(-20))}\n  full log: ${logFile}`;
    if (opts.unreachable === false) throw new UsageError(msg);
    throw new TargetError(msg, { url: handle.url });
  };

  // Wait for /health: poll, racing the server's exit and our interruption.
  const readyTimeoutMs = spec.readyTimeoutMs ?? 600_000;
  const deadline = t0 + readyTimeoutMs;
  const headers: Record<string, string> = spec.apiKey ? { authorization: `Bearer ${spec.apiKey}` } : {};
  let delay = 50;
  for (;;) {
    if (spec.signal?.aborted) {
      await handle.stop();
      throw spec.signal.reason instanceof Error ? spec.signal.reason : new InterruptedError();
    }
    if (exit) {
      const e = exit as ServerExit;
      return fail(`server exited (${e.signal ? `signal ${e.signal}` : `code ${e.code}`}) before it was ready`);
    }
    if (performance.now() > deadline) return fail(`server not ready after ${Math.round(readyTimeoutMs / 1000)} s`);
    try {
      const r = await httpGet(`${handle.url}/health`, 2000, headers);
      if (r.status === 200) break;
    } catch {
      // Not listening yet.
    }
    await Promise.race([exited, sleep(delay, undefined, { signal: spec.signal }).catch(() => {})]);
    delay = Math.min(delay * 1.5, 500);
  }

  if (spec.probe !== false) {
    try {
      const models = await httpGet(`${handle.url}/v1/models`, 30_000, headers);
      if (models.status !== 200) return fail(`GET /v1/models answered ${models.status}: ${models.body.slice(0, 300)}`);
      handle.model = (JSON.parse(models.body) as { data?: Array<{ id?: string }> }).data?.[0]?.id ?? null;
      const r = await undici().request(`${handle.url}/v1/completions`, {
        method: "POST",
        // Named, so an engine's request span for it is known as the probe's, not a stranger's (otlp/bench.ts).
        headers: {
          "content-type": "application/json",
          "x-request-id": `${PROBE_REQUEST_ID_PREFIX}${randomBytes(4).toString("hex")}`,
          ...headers,
        },
        body: JSON.stringify({ model: handle.model, prompt: "Hello", max_tokens: 1, stream: false }),
        headersTimeout: 120_000,
        bodyTimeout: 120_000,
      });
      const body = await r.body.text();
      if (r.statusCode !== 200) return fail(`probe completion answered ${r.statusCode}: ${body.slice(0, 300)}`);
    } catch (err) {
      if (err instanceof TargetError || err instanceof UsageError) throw err;
      return fail(`probe request failed: ${(err as Error).message}`);
    }
  }
  handle.readyMs = performance.now() - t0;
  // Record the engine version beside every number (seed scenario §3.5); optional endpoint.
  try {
    const v = await httpGet(`${handle.url}/version`, 2000, headers);
    if (v.status === 200) {
      const body = v.body.trim();
      let parsed: unknown = body;
      try {
        parsed = (JSON.parse(body) as { version?: unknown }).version ?? body;
      } catch {
        // Plain text.
      }
      handle.version = String(parsed).slice(0, 200);
    }
  } catch {
    // No /version: fine.
  }
  return handle;
}
