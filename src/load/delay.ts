// The delay a read waits in this process's event loop, against the platform's own floor. A probe
// process writes a line every 2 ms stamped with CLOCK_MONOTONIC (process.hrtime is system-wide on
// Linux); we read it on our own connection, in the same event loop as the load (instrument.ts: in every
// loop that reads streams), and stamp each line on receipt. Receive − write is loopback + the wait behind our own work; the median with no load is
// subtracted. The floor: the same streams read by raw sockets whose read callback only counts (no HTTP,
// SSE or JSON), so what it costs is Node + libuv + the kernel before any client code runs; the client's
// p99 minus the floor's is what the client's own code adds. Used by bench:client and `bench --self-test`.
import { type ChildProcess, spawn } from "node:child_process";
import net from "node:net";
import { performance } from "node:perf_hooks";
import { Worker } from "node:worker_threads";
import { HeapWindow, type HeapWindowResult } from "./heapwindow.ts";
import { hrNowMs, ProbeReader } from "./instrument.ts";
import { runBench } from "./runner.ts";

// One line per event, its CLOCK_MONOTONIC write time in ns: plain TCP, so the reader (instrument.ts)
// parses digits off its own buffer and adds no garbage to the loop it measures.
const PROBE = `
const net = require("node:net");
const srv = net.createServer((sock) => {
  sock.setNoDelay(true);
  const t = setInterval(() => sock.write(process.hrtime.bigint() + "\\n"), 2);
  sock.on("close", () => clearInterval(t));
  sock.on("error", () => clearInterval(t));
});
srv.listen(0, "127.0.0.1", () => console.log(srv.address().port));
process.on("disconnect", () => process.exit(0));
`;

export interface Probe {
  port: number;
  stop(): void;
}

/**
 * Starts the probe server. It keeps normal priority: under SCHED_IDLE beside a busy sim it was
 * preempted between its stamp and its write, a wait (several ms at p99) that is the probe's, not ours.
 * It has an IPC channel, so it exits when this process does, however that happens.
 */
export async function startProbe(): Promise<Probe> {
  const child: ChildProcess = spawn(process.execPath, ["-e", PROBE], { stdio: ["ignore", "pipe", "inherit", "ipc"] });
  child.unref();
  (child.channel as { unref?: () => void } | undefined)?.unref?.();
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout!.once("data", (d) => resolve(Number(String(d).trim())));
    child.once("exit", (code) => reject(new Error(`the delay probe exited (${code}) before listening`)));
  });
  (child.stdout as net.Socket).unref?.();
  return { port, stop: () => child.kill("SIGTERM") };
}

/**
 * Reads the probe in this thread's loop for as long as `until` is pending; returns each event's write
 * time (performance.now()'s clock) and delay (ms).
 */
export async function probeEvents(port: number, until: Promise<unknown>): Promise<{ at: number[]; delays: number[] }> {
  const reader = new ProbeReader(port);
  await reader.connected;
  await until.catch(() => {});
  const { writtenHrMs, delayMs } = reader.stop();
  const off = hrNowMs() - performance.now();
  return { at: Array.from(writtenHrMs, (w) => w - off), delays: Array.from(delayMs) };
}

/**
 * Per-event delays (ms) while `until` is pending. With `window`, only events written inside it count
 * (the run itself: not its connecting, nor the summary computed after it).
 */
export async function probeDelays(
  port: number,
  until: Promise<unknown>,
  window?: () => [number, number] | null,
): Promise<number[]> {
  const { at, delays } = await probeEvents(port, until);
  const w = window?.();
  return w ? delays.filter((_, i) => at[i]! >= w[0] && at[i]! <= w[1]) : delays;
}

/**
 * The platform's floor for the same traffic: n raw sockets, all connected before the clock starts, each
 * sending one streaming request, read into one shared buffer by a callback that only counts.
 */
export async function rawFloor(
  url: string,
  model: string,
  n: number,
  outLen: number,
  timeoutMs = 120_000,
  signal?: AbortSignal,
): Promise<{ reads: number; cpuMs: number; window: [number, number]; heap: HeapWindowResult }> {
  const u = new URL(url);
  const body = JSON.stringify({
    model,
    prompt: "hello world ".repeat(8),
    max_tokens: outLen,
    ignore_eos: true,
    stream: true,
  });
  const req = `POST /v1/completions HTTP/1.1\r\nhost: ${u.host}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
  const shared = Buffer.alloc(65536);
  let reads = 0;
  let done = 0;
  let connected = 0;
  const socks: net.Socket[] = [];
  let r0 = process.resourceUsage();
  let t0 = 0;
  const hw = new HeapWindow();
  let heap: HeapWindowResult | null = null;
  // Like the client's preconnect: every socket is open before the clock starts and the requests go out.
  const start = () => {
    hw.start();
    r0 = process.resourceUsage();
    t0 = performance.now();
    for (const s of socks) s.write(req);
  };
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`the raw-socket floor did not finish in ${timeoutMs} ms`)),
        timeoutMs,
      );
      signal?.addEventListener(
        "abort",
        () => {
          clearTimeout(timer);
          reject(signal.reason ?? new Error("interrupted"));
        },
        { once: true },
      );
      for (let i = 0; i < n; i++) {
        const s = net.connect({
          host: u.hostname,
          port: Number(u.port),
          noDelay: true,
          onread: {
            buffer: shared,
            callback: (len: number, b: Uint8Array) => {
              reads++;
              // The chunked body's last chunk "0\r\n\r\n" ends a read: this stream is done.
              if (len >= 5 && b[len - 5] === 48 && b[len - 4] === 13 && b[len - 3] === 10 && b[len - 1] === 10)
                if (++done === n) {
                  heap = hw.end();
                  clearTimeout(timer);
                  resolve();
                }
              return true;
            },
          },
        });
        s.on("connect", () => {
          if (++connected === n) start();
        });
        s.on("error", (e) => {
          clearTimeout(timer);
          reject(e);
        });
        socks.push(s);
      }
    });
  } finally {
    for (const s of socks) s.destroy();
  }
  const r1 = process.resourceUsage();
  return {
    reads,
    cpuMs: (r1.userCPUTime - r0.userCPUTime + r1.systemCPUTime - r0.systemCPUTime) / 1000,
    window: [t0, performance.now()],
    heap: heap ?? hw.end(),
  };
}

/** rawFloor with the probe read beside it: the delays of events written while its clock ran. */
export async function floorDelays(
  port: number,
  url: string,
  model: string,
  n: number,
  outLen: number,
  signal?: AbortSignal,
): Promise<{ delays: number[]; reads: number; cpuMs: number; heap: HeapWindowResult }> {
  const f = rawFloor(url, model, n, outLen, 120_000, signal);
  let w: [number, number] | null = null;
  const delays = await probeDelays(
    port,
    f.then((x) => {
      w = x.window;
    }),
    () => w,
  );
  const { reads, cpuMs, heap } = await f;
  return { delays, reads, cpuMs, heap };
}

export const median = (a: number[]): number => {
  if (a.length === 0) return Number.NaN;
  const s = [...a].sort((x, y) => x - y);
  const h = s.length >> 1;
  return s.length % 2 ? s[h]! : (s[h - 1]! + s[h]!) / 2;
};

export const pct = (a: number[], p: number): number => {
  const s = [...a].sort((x, y) => x - y);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? 0;
};

export interface AddedDelay {
  streams: number;
  outputLen: number;
  reps: number;
  /** The probe's loopback delay with nothing else running (subtracted from every figure below). */
  idleMedianMs: number;
  idleP99Ms: number;
  /** Raw sockets reading the same streams: what Node, libuv and the kernel add. Medians over reps. */
  floorP50Ms: number;
  floorP99Ms: number;
  floorCpuPerReadUs: number;
  /** This client (h1 or undici, one thread) reading them. */
  clientP50Ms: number;
  clientP99Ms: number;
  clientCpuPerReadUs: number;
  /** clientP99Ms − floorP99Ms: what the client's own code adds at p99. */
  excessP99Ms: number;
}

export interface AddedDelayOptions {
  /** A model-speed server (tokens paced like a real engine's steps), OpenAI-compatible. */
  url: string;
  streams?: number;
  outputLen?: number;
  reps?: number;
  transport?: "h1" | "undici";
  /** A probe already started (bench:client shares one); else one is started and stopped here. */
  probe?: Probe;
  /** Called before each measured run (bench:client collects garbage there). */
  beforeRun?: () => void;
  signal?: AbortSignal;
}

/** The client's and the platform's added delay at `streams` concurrent model-speed streams. */
export async function measureAddedDelay(o: AddedDelayOptions): Promise<AddedDelay> {
  const streams = o.streams ?? 1000;
  const outputLen = o.outputLen ?? 256;
  const reps = o.reps ?? 1;
  const probe = o.probe ?? (await startProbe());
  try {
    const run = (n: number, len: number, deps: Parameters<typeof runBench>[1] = {}) =>
      runBench(
        {
          baseUrl: o.url,
          concurrency: n,
          numPrompts: n,
          randomInputLen: 16,
          randomOutputLen: len,
          ignoreEos: true,
          noServerMetrics: true,
          connectTimeoutMs: 20_000,
          transport: o.transport ?? "h1",
          workers: 1,
        },
        { signal: o.signal, graceMs: 1000, ...deps },
      );
    // Warm: the JIT on this path, and the server's connection handling.
    const model = (await run(Math.min(streams, 200), 16)).setup.model_id;
    await rawFloor(o.url, model, Math.min(streams, 200), 16, 120_000, o.signal).catch(() => {});
    const idle = await probeDelays(probe.port, new Promise((r) => setTimeout(r, 1000)));
    const base = median(idle);
    const f50: number[] = [];
    const f99: number[] = [];
    const fper: number[] = [];
    const c50: number[] = [];
    const c99: number[] = [];
    const cper: number[] = [];
    for (let i = 0; i < reps && !o.signal?.aborted; i++) {
      o.beforeRun?.();
      let first = -1;
      let last = -1;
      const r = run(streams, outputLen, {
        onProgress: (p) => {
          const t = performance.now();
          // The run's own origin: its clock starts once the connections are open.
          if (first < 0) first = t - p.elapsedMs;
          last = t;
        },
      });
      const cd = await probeDelays(probe.port, r, () => (first < 0 ? null : [first, last]));
      const res = await r;
      c50.push(Math.max(0, median(cd) - base));
      c99.push(Math.max(0, pct(cd, 99) - base));
      cper.push(res.client.cpuPerReadUs);
      if (o.signal?.aborted) break;
      o.beforeRun?.();
      const got = await floorDelays(probe.port, o.url, model, streams, outputLen, o.signal).catch(() => null);
      if (!got) break;
      const { delays: fd, reads, cpuMs } = got;
      f50.push(Math.max(0, median(fd) - base));
      f99.push(Math.max(0, pct(fd, 99) - base));
      fper.push((cpuMs * 1000) / Math.max(1, reads));
    }
    const clientP99Ms = median(c99);
    const floorP99Ms = median(f99);
    return {
      streams,
      outputLen,
      reps: c99.length,
      idleMedianMs: base,
      idleP99Ms: pct(idle, 99),
      floorP50Ms: median(f50),
      floorP99Ms,
      floorCpuPerReadUs: median(fper),
      clientP50Ms: median(c50),
      clientP99Ms,
      clientCpuPerReadUs: median(cper),
      excessP99Ms: clientP99Ms - floorP99Ms,
    };
  } finally {
    if (!o.probe) probe.stop();
  }
}

/**
 * The host's scheduling noise over a window: a second thread sleeps on a futex in 0.1–5 ms steps and
 * records how late it wakes; `stop()` gives that lateness's p99 and max (ms). ~0.1 ms on a quiet host; on a
 * loaded one it grows as a replay's sends would. It is measured apart from the sending loop, so a bound
 * built on it does not grow with a regression in that loop (the loop's own event-loop delay would).
 */
export function wakeLatenessProbe(): { stop(): Promise<{ p99Ms: number; maxMs: number }> } {
  const flag = new Int32Array(new SharedArrayBuffer(4));
  const w = new Worker(
    `const { parentPort, workerData: flag } = require("node:worker_threads");
     const late = []; const s = new Int32Array(new SharedArrayBuffer(4)); let k = 0;
     while (Atomics.load(flag, 0) === 0) {
       const want = [0.1, 0.5, 1, 2, 5][k++ % 5];
       const t0 = performance.now(); Atomics.wait(s, 0, 0, want); late.push(performance.now() - t0 - want);
     }
     late.sort((a, b) => a - b);
     parentPort.postMessage({ p99Ms: late[Math.floor(0.99 * (late.length - 1))] ?? 0, maxMs: late.at(-1) ?? 0 });`,
    { eval: true, workerData: flag },
  );
  const late = new Promise<{ p99Ms: number; maxMs: number }>((r) => w.once("message", r));
  return {
    async stop() {
      Atomics.store(flag, 0, 1);
      const v = await late;
      await w.terminate();
      return v;
    },
  };
}
