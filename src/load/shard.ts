// Streams spread over worker_threads. One event loop reads ~100k socket reads/s on a small host; past
// that, reads queue behind each other and the client, not the server, sets the timings. Each shard
// is a worker with its own event loop, connections and StreamClient: it runs its share of the users
// (closed loop, one shared request counter) or of the arrivals (open loop, every W-th), on the run's
// common clock, and posts each finished record to the main thread, which keeps them (RecordStore),
// writes the JSONL, shows progress and summarises. Loop delay: a histogram per shard, merged.
import { availableParallelism } from "node:os";
import { monitorEventLoopDelay, performance } from "node:perf_hooks";
import { isMainThread, parentPort, Worker, workerData } from "node:worker_threads";
import * as hdr from "hdr-histogram-js";
import { type ClientOptions, StreamClient } from "./client.ts";
import { type InstrumentSpec, LoopInstrument, type LoopReport } from "./instrument.ts";
import type { ChunkColumns, Endpoint, RequestRecord } from "./types.ts";
import { createWorkload, type requestBody, type Workload, type WorkloadOptions } from "./workload.ts";

/**
 * Streams one event loop is given before `--workers auto` adds another (hosts with ≥ AUTO_MIN_CORES
 * cores). bench:client measures it on such a host: the added delay p99 over every reading loop, at
 * 1,000 model-speed streams, for loops owning 125, 250 and 500 streams each.
 */
export const STREAMS_PER_WORKER = 256;
/** Below this many cores auto keeps one loop when the server is on the same host. */
export const AUTO_MIN_CORES = 4;
/**
 * The event-loop delay monitor's timer period (ms; subtracted from what it records). Each tick wakes an
 * idle loop: at 2 ms, 1,000 model-speed streams on a 2-core VM paid 0.75 µs of CPU per socket read for
 * those wakeups (10.85 against 10.10 µs, six interleaved runs). At 10 ms a 10-s run still gives 1,000
 * samples, and the saturation test (p99 > 10 ms) still sees a blocked loop.
 */
export const ELD_RESOLUTION_MS = 10;

/** `--workers auto`'s choice and why, in words for the run's output. */
export interface AutoWorkers {
  workers: number;
  why: string;
}

/**
 * `--workers auto`: one shard per STREAMS_PER_WORKER streams, at most one per core — one core fewer
 * when the server is on this host (loopback), since it needs the CPU too. On a host with fewer than
 * AUTO_MIN_CORES cores and the server on it, one loop: a second one only takes CPU from the server
 * (bench:client on 2 cores: h1 on 2 loops read fewer tokens per s and per CPU-s than on 1).
 */
export function autoWorkersChoice(streams: number, baseUrl: string, cores = availableParallelism()): AutoWorkers {
  const host = new URL(baseUrl).hostname;
  const local = host === "127.0.0.1" || host === "localhost" || host === "[::1]" || host === "::1";
  const want = Math.max(1, Math.ceil(streams / STREAMS_PER_WORKER));
  if (local && cores < AUTO_MIN_CORES)
    return {
      workers: 1,
      why:
        want > 1
          ? `auto: 1 event loop for ${streams} streams: this host has ${cores} core(s) and the server runs on it, where one loop reads faster than two`
          : `auto: 1 event loop (${streams} stream${streams === 1 ? "" : "s"}, ≤ ${STREAMS_PER_WORKER} per loop)`,
    };
  const maxW = Math.max(1, cores - (local ? 1 : 0));
  const workers = Math.min(maxW, want);
  const per = Math.ceil(streams / workers);
  return {
    workers,
    why:
      workers < want
        ? `auto: ${workers} event loop(s), one per core${local ? " but the server's" : ""}: ${per} streams each, more than ${STREAMS_PER_WORKER}`
        : `auto: ${workers} event loop(s), ≤ ${STREAMS_PER_WORKER} streams each`,
  };
}

/**
 * Sends of one instant a replay gives each loop. A long prompt's send costs ~0.1–0.3 ms (a loopback write
 * copies the body and runs the receive path in the sender's context), so about four fit in 1 ms of lag.
 */
export const REPLAY_SENDS_PER_LOOP = 4;

/**
 * `--workers auto` for a trace replay: its bursts (`maxBurst` requests due at once) are sent by several
 * loops at once, REPLAY_SENDS_PER_LOOP each, on hosts with ≥ AUTO_MIN_CORES cores (one core left to a
 * server on this host); below that one loop, which sends a burst's requests one after another.
 */
export function replayWorkersChoice(
  maxBurst: number,
  streams: number,
  baseUrl: string,
  cores = availableParallelism(),
): AutoWorkers {
  const host = new URL(baseUrl).hostname;
  const local = host === "127.0.0.1" || host === "localhost" || host === "[::1]" || host === "::1";
  const want = Math.max(Math.ceil(maxBurst / REPLAY_SENDS_PER_LOOP), Math.ceil(streams / STREAMS_PER_WORKER), 1);
  if (cores < AUTO_MIN_CORES)
    return {
      workers: 1,
      why: `auto: 1 event loop for the replay: this host has ${cores} core(s) (several loops need ≥ ${AUTO_MIN_CORES}); up to ${maxBurst} request(s) due at one instant go out one after another`,
    };
  const workers = Math.min(want, Math.max(1, cores - (local ? 1 : 0)));
  return {
    workers,
    why: `auto: ${workers} event loop(s) for the replay: up to ${maxBurst} request(s) due at one instant, ≤ ${REPLAY_SENDS_PER_LOOP} sent by each loop${workers < want ? `; one per core${local ? " but the server's" : ""}` : ""}`,
  };
}

/** `--workers auto`'s thread count (autoWorkersChoice). */
export function autoWorkers(streams: number, baseUrl: string, cores = availableParallelism()): number {
  return autoWorkersChoice(streams, baseUrl, cores).workers;
}

export interface ShardInit {
  shard: number;
  baseUrl: string;
  client: ClientOptions;
  workload: WorkloadOptions;
  bodyOpts: Parameters<typeof requestBody>[1];
  endpoint: Endpoint;
  graceMs: number;
  /** bench:client's instruments, run in this shard's own loop (instrument.ts). */
  instrument: InstrumentSpec | null;
  closed: { users: number; count: number | null; durationMs: number | null; shared: Int32Array } | null;
  open: {
    times: Float64Array;
    indices: Int32Array;
    cap: number | null;
    /**
     * A replay's bodies, built on the main thread (times[k]'s is bodies[k]) and transferred: the prompts
     * stay byte-identical to the ones the synthesizer made (prefix caching, usage.prompt_tokens checks).
     */
    bodies?: ShardBody[];
    /** Connections to open before the clock (default preconnectCount). */
    preconnect?: number;
  } | null;
}

/** One prebuilt request: its lengths and body (a Buffer arrives in the worker as a Uint8Array). */
export interface ShardBody {
  inputLen: number;
  outputLen: number;
  body: string | Uint8Array;
}

/**
 * `text` as UTF-8 in a Buffer that owns its ArrayBuffer whole, so a shard can be handed it without a copy.
 * Buffer.from may not: Node 24 sizes a long string's backing store for 3 bytes a character and returns a view.
 */
export function ownedUtf8(text: string): Buffer {
  const b = Buffer.allocUnsafeSlow(Buffer.byteLength(text));
  b.write(text);
  return b;
}

/** The ArrayBuffers a shard's bodies can move (not copy) to it: those each body owns whole. */
export function bodyTransfer(bodies: readonly ShardBody[] | undefined): ArrayBuffer[] {
  const out: ArrayBuffer[] = [];
  const seen = new Set<ArrayBufferLike>();
  for (const b of bodies ?? []) {
    if (typeof b.body === "string") continue;
    const a = b.body.buffer;
    // A pooled (small) Buffer shares its ArrayBuffer: moving it would detach its neighbours.
    if (b.body.byteOffset === 0 && b.body.byteLength === a.byteLength && !seen.has(a) && a instanceof ArrayBuffer) {
      seen.add(a);
      out.push(a);
    }
  }
  return out;
}

/** Loop-delay histogram of one shard: Node's percentile iteration points and the count. */
export interface ShardEld {
  count: number;
  points: Array<[number, number]>;
}

type ToMain =
  | { t: "ready" }
  | { t: "rec"; r: RequestRecord }
  | { t: "done"; durationMs: number; interrupted: boolean; eld: ShardEld; loop: LoopReport | null }
  | { t: "fatal"; message: string; name: string; status?: number; hint?: string };

type ToShard = { t: "go"; originHrMs: number } | { t: "stop" } | { t: "abort"; reason: string };

const hrMs = () => Number(process.hrtime.bigint()) / 1e6;

/** A record with its chunk columns copied out of the arena, ready to transfer. */
function portable(rec: RequestRecord): [RequestRecord, ArrayBuffer[]] {
  const c = rec.chunks;
  const cols: ChunkColumns = {
    tMs: c.tMs.slice(),
    bytes: c.bytes.slice(),
    read: c.read.slice(),
    tokens: c.tokens.slice(),
    content: c.content.slice(),
    reasoning: c.reasoning.slice(),
    tool: c.tool.slice(),
    flags: c.flags.slice(),
  };
  const out = { ...rec, chunks: cols };
  return [out, Object.values(cols).map((a) => (a as Float64Array).buffer as ArrayBuffer)];
}

async function shardMain(init: ShardInit): Promise<void> {
  const port = parentPort!;
  const { closedLoop, openLoop, preconnectCount, prepareStreams } = await import("./runner.ts");
  const client = new StreamClient(init.baseUrl, init.client);
  const ac = new AbortController();
  const inst = init.instrument ? new LoopInstrument(init.shard, init.instrument) : null;
  // A replay's bodies came built: its workload only answers lengths (nothing is synthesized here).
  const pre = init.open?.bodies?.map((b) => ({
    p: { inputLen: b.inputLen, outputLen: b.outputLen },
    body: typeof b.body === "string" ? b.body : Buffer.from(b.body.buffer, b.body.byteOffset, b.body.byteLength),
  }));
  const workload: Workload = pre
    ? { name: init.workload.dataset ?? "jsonl", size: pre.length, get: (i) => pre[i % pre.length]!.p }
    : createWorkload(init.workload);
  const ctx = {
    instrument: inst ?? undefined,
    client,
    workload,
    bodyOpts: init.bodyOpts,
    endpoint: init.endpoint,
    signal: ac.signal,
    graceMs: init.graceMs,
    keepRecords: false,
    onRecord: (rec: RequestRecord) => {
      const [r, transfer] = portable(rec);
      port.postMessage({ t: "rec", r } satisfies ToMain, transfer);
    },
  };
  let go: (originHrMs: number) => void = () => {};
  const started = new Promise<number>((r) => {
    go = r;
  });
  port.on("message", (m: ToShard) => {
    if (m.t === "go") go(m.originHrMs);
    else if (m.t === "stop") ac.abort();
    else if (m.t === "abort") {
      ac.abort();
      client.abortAll(m.reason);
    }
  });
  // Booting a thread (module loading, compiling) and connecting are setup: the run's clock starts after
  // every shard is ready.
  const streams =
    init.open?.preconnect ?? preconnectCount(init.closed ? { closed: init.closed } : { open: init.open! });
  prepareStreams(client, ctx.workload, streams);
  await client.preconnect(streams);
  await inst?.ready();
  port.postMessage({ t: "ready" } satisfies ToMain);
  const originPerf = (await started) - (hrMs() - performance.now());
  const eld = monitorEventLoopDelay({ resolution: ELD_RESOLUTION_MS });
  eld.enable();
  try {
    const phase = init.closed
      ? await closedLoop(ctx, { ...init.closed, warmup: false, indexBase: 0, originPerf })
      : await openLoop(ctx, { ...init.open!, pre, originPerf });
    eld.disable();
    const points = eldPoints(eld);
    const loop = inst?.report() ?? null;
    const moved = loop?.probe ? [loop.probe.writtenHrMs.buffer, loop.probe.delayMs.buffer] : [];
    port.postMessage(
      {
        t: "done",
        durationMs: phase.durationMs,
        interrupted: phase.interrupted,
        eld: { count: eld.count, points },
        loop,
      } satisfies ToMain,
      moved as ArrayBuffer[],
    );
  } catch (e: any) {
    port.postMessage({
      t: "fatal",
      message: e?.message ?? String(e),
      name: e?.name ?? "Error",
      status: e?.status,
      hint: e?.hint,
    } satisfies ToMain);
  } finally {
    await client.close();
    port.close();
  }
}

// Not awaited at the top level: runner.ts imports this module, and a top-level await here would
// deadlock that cycle.
if (!isMainThread && (workerData as { inferscopeShard?: ShardInit } | null)?.inferscopeShard)
  void shardMain((workerData as { inferscopeShard: ShardInit }).inferscopeShard);

export interface ShardHandlers {
  onRecord(r: RequestRecord): void;
  onFatal(err: Error): void;
}

export interface ShardResult {
  durationMs: number;
  interrupted: boolean;
  eld: ShardEld[];
  /** Each shard's instruments (bench:client), when asked for. */
  loops: LoopReport[];
}

const BOOT = new URL("./shard-boot.mjs", import.meta.url);

export interface Shards {
  /** Starts every shard on the run's clock (origin on process.hrtime, ms); resolves when all have finished. */
  go(originHrMs: number): Promise<ShardResult>;
  stop(): void;
  abort(reason: string): void;
}

/** Spawns the shards and resolves once every one is loaded and connected to nothing yet (ready). */
export async function startShards(inits: ShardInit[], h: ShardHandlers): Promise<Shards> {
  const workers = inits.map(
    (init) =>
      new Worker(BOOT, {
        workerData: { inferscopeShard: init },
        transferList: bodyTransfer(init.open?.bodies),
        stdout: false,
        stderr: false,
      }),
  );
  const results: ShardResult = { durationMs: 0, interrupted: false, eld: [], loops: [] };
  const ready: Promise<void>[] = [];
  const done = Promise.all(
    workers.map((w) => {
      let isReady: () => void = () => {};
      let failReady: (e: Error) => void = () => {};
      ready.push(
        new Promise<void>((res, rej) => {
          isReady = res;
          failReady = rej;
        }),
      );
      return new Promise<void>((resolve) => {
        let finished = false;
        const fatal = (e: Error) => {
          finished = true;
          failReady(e);
          h.onFatal(e);
        };
        w.on("message", (m: ToMain) => {
          if (m.t === "rec") h.onRecord(m.r);
          else if (m.t === "ready") isReady();
          else if (m.t === "done") {
            finished = true;
            results.durationMs = Math.max(results.durationMs, m.durationMs);
            results.interrupted ||= m.interrupted;
            results.eld.push(m.eld);
            if (m.loop) results.loops.push(m.loop);
          } else if (m.t === "fatal") {
            const e = new Error(m.message) as Error & { status?: number; hint?: string };
            e.name = m.name;
            if (m.status !== undefined) e.status = m.status;
            if (m.hint !== undefined) e.hint = m.hint;
            fatal(e);
          }
        });
        w.on("error", fatal);
        w.on("exit", (code) => {
          if (!finished) fatal(new Error(`a bench worker thread exited (code ${code}) before finishing`));
          resolve();
        });
      });
    }),
  ).then(() => results);
  const send = (m: ToShard) => {
    for (const w of workers) w.postMessage(m);
  };
  try {
    await Promise.all(ready);
  } catch (e) {
    await Promise.all(workers.map((w) => w.terminate()));
    throw e;
  }
  return {
    go: (originHrMs) => {
      send({ t: "go", originHrMs });
      return done;
    },
    stop: () => send({ t: "stop" }),
    abort: (reason) => send({ t: "abort", reason }),
  };
}

// Ranks at which a shard's histogram is read: every 1 % to 99, then finer into the tail.
const FINE: number[] = [];
for (let p = 1; p < 99; p++) FINE.push(p);
for (let p = 990; p < 999; p++) FINE.push(p / 10);
for (let p = 9990; p < 10000; p++) FINE.push(p / 100);
FINE.push(100);

/** A histogram as (percentile, value) points fine enough to merge (Node histograms cannot be added across threads). */
export function eldPoints(h: { percentile(p: number): number; count: number }): Array<[number, number]> {
  return h.count ? FINE.map((p) => [p, h.percentile(p)] as [number, number]) : [];
}

/**
 * Merges the shards' loop-delay histograms: each shard's percentile points are turned back into
 * counts (the share of samples between consecutive points) in one HdrHistogram.
 */
export function mergeEld(parts: ShardEld[]): hdr.Histogram {
  const h = hdr.build({ bitBucketSize: 64, numberOfSignificantValueDigits: 3 });
  for (const p of parts) {
    if (!p.count) continue;
    const pts = [...p.points].sort((a, b) => a[0] - b[0]);
    let used = 0;
    for (let k = 0; k < pts.length; k++) {
      const [pct, v] = pts[k]!;
      const upto = k === pts.length - 1 ? p.count : Math.round((pct / 100) * p.count);
      const c = upto - used;
      if (c > 0) h.recordValueWithCount(Math.max(0, Math.round(v)), c);
      used = Math.max(used, upto);
    }
  }
  return h;
}
