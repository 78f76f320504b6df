// `inferscope bench --self-test`: the client's own ceiling. Spawns `inferscope sim --speed zero` (a
// separate process, so its CPU is not ours), streams through it at 1, 100 and 1,000 concurrent streams
// and reports output tokens ingested per client CPU-second and the event-loop delay reads waited. Then,
// against a model-speed sim, the delay a read waits at 1,000 streams beside the platform's floor
// (delay.ts), so a user knows how much of a measured p99 ITL is the client's.
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { existsSync } from "node:fs";
import { createInterface } from "node:readline";
import { CLI_ENTRY } from "../entry.ts";
import { InterruptedError, TargetError } from "../errors.ts";
import { type AddedDelay, measureAddedDelay } from "./delay.ts";
import { runBench } from "./runner.ts";

export interface SimProcess {
  url: string;
  pid: number;
  /** "idle" when the sim runs under SCHED_IDLE (see `idle` below). */
  scheduling: "idle" | "normal";
  stop(): Promise<void>;
}

export interface SpawnSimOptions {
  timeoutMs?: number;
  /**
   * Run the sim under SCHED_IDLE (Linux, via util-linux `chrt`): it gets only CPU the client leaves,
   * and a waking client preempts it at once. A real server runs on its own machine; on a small shared
   * host, without this a client read or send can wait a whole scheduler slice (1.5–3 ms) behind it.
   */
  idle?: boolean;
}

const CHRT = "/usr/bin/chrt";

/**
 * The command and arguments that run `argv` under SCHED_IDLE when asked and possible (Linux with
 * util-linux chrt), else as is. chrt execs in place: the pid is the program's, and every thread it
 * starts inherits the policy.
 */
export function idleCommand(argv: string[], idle: boolean): { cmd: string; args: string[]; idle: boolean } {
  const ok = idle && process.platform === "linux" && existsSync(CHRT);
  return ok
    ? { cmd: CHRT, args: ["--idle", "0", ...argv], idle: true }
    : { cmd: argv[0]!, args: argv.slice(1), idle: false };
}

const BIN = CLI_ENTRY;

// Sim process groups still running; SIGKILLed when this process exits, whatever the path (an error,
// a second Ctrl-C's process.exit), so no sim is left re-parented to init.
const simGroups = new Set<number>();
let exitHook = false;
function trackSim(pgid: number): void {
  simGroups.add(pgid);
  if (exitHook) return;
  exitHook = true;
  process.on("exit", () => {
    for (const g of simGroups) killGroup(g, "SIGKILL");
  });
}

function killGroup(pgid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(-pgid, sig);
  } catch {
    // already gone
  }
}

/** Starts `inferscope sim --port 0 --json …` in its own process and waits for its URL. */
export async function spawnSimProcess(args: string[], opts: SpawnSimOptions = {}): Promise<SimProcess> {
  const timeoutMs = opts.timeoutMs ?? 30_000;
  const {
    cmd,
    args: cmdArgs,
    idle,
  } = idleCommand([process.execPath, BIN, "sim", "--port", "0", "--json", ...args], opts.idle === true);
  const child: ChildProcess = spawn(cmd, cmdArgs, {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env },
    // Its own process group, killed whole on every way out (see simGroups): a Ctrl-C in the terminal
    // reaches us, not it, and we stop it.
    detached: true,
  });
  const pgid = child.pid;
  if (pgid !== undefined) trackSim(pgid);
  child.once("exit", () => {
    if (pgid !== undefined) simGroups.delete(pgid);
  });
  let stderr = "";
  child.stderr!.on("data", (d) => {
    stderr += d;
  });
  const rl = createInterface({ input: child.stdout! });
  const url = await new Promise<string>((resolve, reject) => {
    const t = setTimeout(
      () => reject(new TargetError(`inferscope sim did not start within ${timeoutMs} ms: ${stderr}`)),
      timeoutMs,
    );
    rl.on("line", (line) => {
      try {
        const o = JSON.parse(line);
        if (typeof o?.url === "string") {
          clearTimeout(t);
          resolve(o.url);
        }
      } catch {}
    });
    child.once("exit", (code) => {
      clearTimeout(t);
      reject(new TargetError(`inferscope sim exited (${code}) before listening: ${stderr.trim()}`));
    });
  }).catch((e) => {
    if (pgid !== undefined) killGroup(pgid, "SIGKILL");
    throw e;
  });
  return {
    url,
    pid: child.pid!,
    scheduling: idle ? "idle" : "normal",
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      killGroup(child.pid!, "SIGTERM");
      const killer = setTimeout(() => killGroup(child.pid!, "SIGKILL"), 3000);
      await once(child, "exit").catch(() => {});
      clearTimeout(killer);
    },
  };
}

export interface SelfTestPoint {
  streams: number;
  requests: number;
  outputTokens: number;
  cpuSeconds: number;
  wallSeconds: number;
  tokensPerCpuSecond: number;
  tokensPerSecond: number;
  /** Event-loop delay beyond the timer resolution (ms): how long a read could wait before being stamped. */
  loopDelayP50Ms: number;
  loopDelayP99Ms: number;
  failed: number;
}

export interface SelfTestResult {
  simUrl: string;
  /** How the spawned sim was scheduled ("idle": SCHED_IDLE, so it only used CPU the client left). */
  simScheduling: "idle" | "normal" | "external";
  outputLen: number;
  points: SelfTestPoint[];
  /** Added delay at model speed, client and platform floor (absent when skipped or interrupted). */
  delay?: AddedDelay & { profile: string };
  /** Interrupted: only the points before the interrupt. */
  partial?: boolean;
}

export interface SelfTestOptions {
  streams?: number[];
  outputLen?: number;
  /** Requests per stream at each level. */
  requestsPerStream?: number;
  /** Use this server instead of spawning one. */
  url?: string;
  /** Stops the test: the sim is stopped and the points measured so far come back with `partial`. */
  signal?: AbortSignal;
  /**
   * The added-delay check against a model-speed sim (default 1,000 streams × 128 tokens, one rep,
   * sim profile llama3-8b-1xh100); false skips it.
   */
  delay?: false | { streams?: number; outputLen?: number; reps?: number; profile?: string };
}

export async function runSelfTest(o: SelfTestOptions = {}): Promise<SelfTestResult> {
  const outputLen = o.outputLen ?? 256;
  const sim = o.url ? null : await spawnSimProcess(["--speed", "zero"], { idle: true });
  if (o.signal?.aborted) {
    await sim?.stop();
    throw o.signal.reason instanceof InterruptedError ? o.signal.reason : new InterruptedError();
  }
  const url = o.url ?? sim!.url;
  const points: SelfTestPoint[] = [];
  let partial = false;
  try {
    for (const streams of o.streams ?? [1, 100, 1000]) {
      if (o.signal?.aborted) {
        partial = true;
        break;
      }
      const perStream = o.requestsPerStream ?? (streams === 1 ? 200 : streams === 100 ? 4 : 2);
      const run = (numPrompts: number) =>
        runBench(
          {
            baseUrl: url,
            concurrency: streams,
            numPrompts,
            randomInputLen: 16,
            randomOutputLen: outputLen,
            ignoreEos: true,
            noServerMetrics: true,
            connectTimeoutMs: 10_000,
          },
          { signal: o.signal, graceMs: 1000 },
        );
      // A short unmeasured pass first: the ceiling of compiled code, not of the JIT warming up.
      await run(Math.max(streams, Math.ceil((streams * perStream) / 4)));
      const res = await run(streams * perStream);
      if (res.partial || o.signal?.aborted) {
        partial = true;
        break;
      }
      const s = res.summary;
      points.push({
        streams,
        requests: s.completed,
        outputTokens: s.total_output_tokens,
        cpuSeconds: res.client.cpuSeconds,
        wallSeconds: s.duration,
        tokensPerCpuSecond: res.client.cpuSeconds > 0 ? s.total_output_tokens / res.client.cpuSeconds : 0,
        tokensPerSecond: s.output_throughput,
        loopDelayP50Ms: res.client.eventLoopDelayMs.p50,
        loopDelayP99Ms: res.client.eventLoopDelayMs.p99,
        failed: s.failed,
      });
    }
  } finally {
    await sim?.stop();
  }
  let delay: SelfTestResult["delay"];
  if (o.delay !== false && !partial && !o.signal?.aborted) {
    const d = o.delay ?? {};
    const profile = d.profile ?? DELAY_PROFILE;
    const real = await spawnSimProcess(["--profile", profile, "--max-num-seqs", "1024"], { idle: true });
    try {
      const m = await measureAddedDelay({
        url: real.url,
        streams: d.streams ?? 1000,
        outputLen: d.outputLen ?? 128,
        reps: d.reps ?? 1,
        signal: o.signal,
      });
      if (o.signal?.aborted || m.reps === 0) partial = true;
      else delay = { ...m, profile };
    } finally {
      await real.stop();
    }
  }
  return {
    simUrl: url,
    simScheduling: sim?.scheduling ?? "external",
    outputLen,
    points,
    ...(delay ? { delay } : {}),
    ...(partial ? { partial } : {}),
  };
}

/** A sim profile whose steps are paced like a real engine's: a token per stream every few ms. */
const DELAY_PROFILE = "llama3-8b-1xh100";

export function formatSelfTest(r: SelfTestResult): string {
  const sched = r.simScheduling === "idle" ? ", sim under SCHED_IDLE" : "";
  const L = [
    `client self-test against ${r.simUrl} (sim --speed zero${sched}, ${r.outputLen} output tokens per request)`,
  ];
  L.push("streams  requests  tokens/CPU-s  tokens/s   loop delay p50/p99 (ms)  failed");
  for (const p of r.points)
    L.push(
      `${String(p.streams).padStart(7)}  ${String(p.requests).padStart(8)}  ${p.tokensPerCpuSecond.toFixed(0).padStart(12)}  ${p.tokensPerSecond.toFixed(0).padStart(8)}   ${`${p.loopDelayP50Ms.toFixed(2)} / ${p.loopDelayP99Ms.toFixed(2)}`.padStart(22)}  ${p.failed}`,
    );
  const d = r.delay;
  if (d)
    L.push(
      `added delay of a read at ${d.streams} streams at model speed (sim ${d.profile}, p99): platform floor ${d.floorP99Ms.toFixed(2)} ms (raw sockets: Node + libuv + kernel), this client ${d.clientP99Ms.toFixed(2)} ms, client − floor ${d.excessP99Ms.toFixed(2)} ms`,
    );
  return L.join("\n");
}
