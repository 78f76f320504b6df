// One large uncompressed trace read on several threads. The file is cut at nominal offsets into
// segments; each thread claims the next one, starts at the first likely event start after its
// offset (a '{' after "}," — a guess: the bytes could be inside a string or a nested value) and
// reads, into a builder of its own, up to the first event start past the next offset. The main
// thread then takes the segments in file order: a segment is kept only if the one before it,
// read from a known position, stopped exactly where this one started, so every kept segment began
// between two events as a single pass would have seen them. Any other segment (a wrong guess, a
// warning whose line number needs the lines before it, an error, a thread that died) is read
// again on the main thread from the verified position. The merged model and stats are therefore
// exactly what `readTraceFile` gives: tests compare the two on awkward files.
import { closeSync, openSync, readSync } from "node:fs";
import { stat } from "node:fs/promises";
import { availableParallelism } from "node:os";
import { isMainThread, parentPort, Worker, workerData } from "node:worker_threads";
import { type BuilderPart, ChunkPool, ModelBuilder } from "./events.ts";
import {
  emptyReadStats,
  MAX_WARNINGS,
  type RawEvent,
  type ReadOptions,
  type ReadStats,
  readTraceFile,
  TraceScanner,
  WARNINGS_CUT,
} from "./reader.ts";

/** How a segmented read went: segments kept as their thread read them, and those read again. */
export interface SegmentCounts {
  count: number;
  kept: number;
  reread: number;
}

export interface ParallelOptions {
  /** Threads reading the file, the main one included; default: the cores, at most 4. 1 reads it in one pass. */
  threads?: number;
  /** Nominal segment size; default: the file over 4 per thread, within 4–64 MB. */
  segmentBytes?: number;
  /** Files smaller than this are read in one pass (a thread's start-up would cost more); default
   * 256 MiB when `threads` is left to the default, 32 MiB when it is given. */
  minBytes?: number;
  /** The builder keeps launch calls' kernel names (capture traces). */
  launchKernelNames?: boolean;
}

/** Everything a segment reader needs, structured-clone safe (sent to each worker). */
interface Spec {
  file: string;
  size: number;
  topArray: boolean;
  /** Segment i covers events starting in [nominal[i], nominal[i + 1]); the last entry is the size. */
  nominal: number[];
  read: Omit<ReadOptions, "skipCategories" | "onProgress"> & { skipCategories: string[] };
  launchKernelNames: boolean;
}

interface Scan {
  start: number;
  /** Offset of the event start where the reader stopped; the size if it read to the end. */
  stop: number;
  reachedEnd: boolean;
  /** Line count and line start at `stop` (relative to the start line it was given). */
  line: number;
  lineStart: number;
  stats: TraceScanner["stats"];
}

interface SegmentResult extends Scan {
  index: number;
  part?: BuilderPart;
  error?: string;
}

type FromWorker = { t: "seg"; r: SegmentResult };

// A worker costs ~100 ms to boot and reads its first segment with a cold JIT: on 2 cores (bench
// trace) two threads were 0.85× one on 150 MB, even at 250 MB, 1.23× at 400 MB, 1.4× at 1.1 GB.
const AUTO_MIN_BYTES = 256 * 1024 * 1024;
const GIVEN_MIN_BYTES = 32 * 1024 * 1024;
const MiB = 1024 * 1024;
const BOOT = new URL("./read-boot.mjs", import.meta.url);

/** Reads one trace file into `builder` (then `builder.finish()` as after readTraceFile), on several
 * threads when the file is large and uncompressed; otherwise in one pass. Returns the read stats
 * and the number of threads used. */
export async function readTraceModel(
  file: string,
  builder: ModelBuilder,
  opts: ReadOptions = {},
  par: ParallelOptions = {},
): Promise<ReadStats & { threads: number; segments?: SegmentCounts }> {
  const threads = Math.max(1, Math.floor(par.threads ?? Math.min(4, availableParallelism())));
  const single = async () => ({ ...(await readTraceFile(file, (ev) => builder.add(ev), opts)), threads: 1 });
  if (threads === 1) return single();
  let size: number;
  try {
    size = (await stat(file)).size;
  } catch {
    return single(); // readTraceFile reports the error as it always does
  }
  if (size < (par.minBytes ?? (par.threads === undefined ? AUTO_MIN_BYTES : GIVEN_MIN_BYTES))) return single();
  const fd = openSync(file, "r");
  try {
    const head = Buffer.alloc(4096);
    const got = readSync(fd, head, 0, head.length, 0);
    if (got >= 2 && head[0] === 0x1f && head[1] === 0x8b) return single(); // gzip: one stream
    let k = 0;
    while (
      k < got &&
      (head[k] === 0x20 || head[k] === 0x0a || head[k] === 0x0d || head[k] === 0x09 || head[k]! >= 0xbb)
    )
      k++;
    const segBytes = Math.max(
      64 * 1024,
      Math.floor(par.segmentBytes ?? Math.min(64 * MiB, Math.max(4 * MiB, size / (threads * 4)))),
    );
    const nominal: number[] = [];
    for (let o = 0; o < size; o += segBytes) nominal.push(o);
    nominal.push(size);
    if (nominal.length < 3) return single();
    const spec: Spec = {
      file,
      size,
      topArray: head[k] === 0x5b,
      nominal,
      read: {
        ...(opts.keepNamePrefix ? { keepNamePrefix: opts.keepNamePrefix } : {}),
        ...(opts.maxMetadataBytes !== undefined ? { maxMetadataBytes: opts.maxMetadataBytes } : {}),
        ...(opts.chunkBytes !== undefined ? { chunkBytes: opts.chunkBytes } : {}),
        ...(opts.fields ? { fields: opts.fields } : {}),
        skipCategories: [...(opts.skipCategories ?? [])],
      },
      launchKernelNames: par.launchKernelNames ?? false,
    };
    return { ...(await readSegmented(spec, fd, builder, threads, opts.onProgress)), threads };
  } finally {
    closeSync(fd);
  }
}

async function readSegmented(
  spec: Spec,
  fd: number,
  builder: ModelBuilder,
  threads: number,
  onProgress?: (read: number, total: number) => void,
): Promise<ReadStats & { segments: SegmentCounts }> {
  const K = spec.nominal.length - 1;
  const counts: SegmentCounts = { count: K, kept: 1, reread: 0 };
  // [0]: next segment to claim (0 is the main thread's), [1]: KiB read by all threads (progress).
  const shared = new Int32Array(new SharedArrayBuffer(8));
  shared[0] = 1;
  const results: Array<SegmentResult | undefined> = new Array(K);
  const workers: Worker[] = [];
  const exited: Promise<void>[] = [];
  for (let w = 0; w < Math.min(threads - 1, K - 1); w++) {
    const worker = new Worker(BOOT, { workerData: { inferscopeTraceRead: { spec, shared } }, stdout: false });
    worker.on("message", (m: FromWorker) => {
      if (m.t === "seg") results[m.r.index] = m.r;
    });
    // A worker that fails leaves its segments without results: they are read again below.
    worker.on("error", () => {});
    exited.push(new Promise((res) => worker.once("exit", () => res())));
    workers.push(worker);
  }
  let lastProgress = 0;
  const progress = (n: number) => {
    Atomics.add(shared, 1, Math.ceil(n / 1024));
    if (!onProgress) return;
    const done = Math.min(spec.size, Atomics.load(shared, 1) * 1024);
    if (done - lastProgress >= 16 * MiB) {
      lastProgress = done;
      onProgress(done, spec.size);
    }
  };
  try {
    // Segment 0 from the start of the file, straight into the caller's builder.
    const first = scanSegment(spec, fd, 0, spec.nominal[1]!, 1, 0, (ev) => builder.add(ev), progress);
    const merged = newStats(first.stats);
    let pos = first.stop;
    let line = first.line;
    let lineStart = first.lineStart;
    let ended = first.reachedEnd;
    let next = 1;
    // Takes the results that are in, in order: keeps the verified ones, reads the others again.
    const advance = (all: boolean) => {
      for (; next < K; next++) {
        const r = results[next];
        if (ended) {
          results[next] = undefined;
          continue;
        }
        if (!r && !all) return;
        const stopAt = next + 1 < K ? spec.nominal[next + 1]! : Number.POSITIVE_INFINITY;
        let s: Scan;
        if (r && !r.error && r.start === pos && r.stats.warnings.length === 0) {
          builder.absorb(r.part!);
          counts.kept++;
          s = { ...r, line: line + r.line - 1, lineStart: r.lineStart >= 0 ? r.lineStart : lineStart };
        } else {
          s = scanSegment(spec, fd, pos, stopAt, line, lineStart, (ev) => builder.add(ev), progress, merged.events);
          counts.reread++;
        }
        results[next] = undefined;
        addStats(merged, s.stats);
        pos = s.stop;
        line = s.line;
        lineStart = s.lineStart;
        ended = s.reachedEnd;
      }
    };
    for (;;) {
      // Let the workers' results in between segments, and merge what is ready (frees their memory).
      await new Promise<void>((res) => setImmediate(res));
      advance(false);
      const i = Atomics.add(shared, 0, 1);
      if (i >= K) break;
      if (ended) continue;
      results[i] = speculate(spec, fd, i, progress).r;
    }
    await Promise.all(exited);
    // The last segment has no stop point, so it read to the end of the file.
    advance(true);
    if (merged.warnings.length > MAX_WARNINGS)
      merged.warnings = [...merged.warnings.slice(0, MAX_WARNINGS), WARNINGS_CUT];
    onProgress?.(spec.size, spec.size);
    return { file: spec.file, gzip: false, fileBytes: spec.size, ...merged, bytes: spec.size, segments: counts };
  } finally {
    for (const w of workers) void w.terminate();
  }
}

type Stats = TraceScanner["stats"];

function newStats(s: Stats): Stats {
  return { ...s, metadata: { ...s.metadata }, warnings: s.warnings.filter(notMarker) };
}

function addStats(m: Stats, s: Stats): void {
  m.events += s.events;
  m.parsed += s.parsed;
  m.skippedByCategory += s.skippedByCategory;
  m.badEvents += s.badEvents;
  m.invalidUtf8 += s.invalidUtf8;
  m.truncated ||= s.truncated;
  m.sawTraceEvents ||= s.sawTraceEvents;
  Object.assign(m.metadata, s.metadata);
  for (const w of s.warnings) if (notMarker(w)) m.warnings.push(w);
}

const notMarker = (w: string) => w !== WARNINGS_CUT;

/** Reads from `start` (0: the file's start; else between events in traceEvents) until the first
 * event start at or past `stopAt`, or the end of the file. */
function scanSegment(
  spec: Spec,
  fd: number,
  start: number,
  stopAt: number,
  line: number,
  lineStart: number,
  emit: (ev: RawEvent) => void,
  onBytes?: (n: number) => void,
  eventsBefore = 0,
): Scan {
  const opts: ReadOptions = { ...spec.read, skipCategories: new Set(spec.read.skipCategories) };
  const scanner = new TraceScanner(emit, opts, spec.file);
  scanner.eventsBefore = eventsBefore;
  if (start > 0) scanner.resumeInArray(start, spec.topArray, line, lineStart);
  scanner.stopAt = stopAt;
  const chunk = spec.read.chunkBytes ?? MiB;
  // Two buffers in turn: the scanner copies an unfinished event out of the previous one at the
  // next push, so a buffer is reused only after that.
  const bufs = [Buffer.allocUnsafe(chunk), Buffer.allocUnsafe(chunk)];
  let which = 0;
  let pos = start;
  while (pos < spec.size) {
    const b = bufs[which]!;
    which ^= 1;
    const n = readSync(fd, b, 0, Math.min(chunk, spec.size - pos), pos);
    if (n <= 0) break;
    pos += n;
    scanner.push(n === b.length ? b : b.subarray(0, n));
    onBytes?.(n);
    if (scanner.stoppedAt >= 0) break;
  }
  const reachedEnd = scanner.stoppedAt < 0;
  if (reachedEnd) scanner.end();
  const at = scanner.position;
  return {
    start,
    stop: reachedEnd ? spec.size : scanner.stoppedAt,
    reachedEnd,
    line: at.line,
    lineStart: at.lineStart,
    stats: scanner.stats,
  };
}

// This thread's speculative builders reuse each other's chunks (one segment after another).
const pool = new ChunkPool();

/** Segment i read from its guessed start into a builder of its own; `transfer`: its columns' buffers. */
function speculate(
  spec: Spec,
  fd: number,
  i: number,
  onBytes?: (n: number) => void,
): { r: SegmentResult; transfer: ArrayBuffer[] } {
  const b = new ModelBuilder(undefined, [], undefined, { launchKernelNames: spec.launchKernelNames, pool });
  try {
    const start = likelyEventStart(fd, spec.nominal[i]!, spec.size);
    const stopAt = i + 1 < spec.nominal.length - 1 ? spec.nominal[i + 1]! : Number.POSITIVE_INFINITY;
    const s = scanSegment(spec, fd, start, stopAt, 1, -1, (ev) => b.add(ev), onBytes);
    const { part, transfer } = b.exportPart();
    return { r: { ...s, index: i, part }, transfer };
  } catch (e) {
    // A wrong guess can make any bytes look like bad JSON: only a verified read's error counts.
    const r = { index: i, error: (e as Error).message, start: -1, stop: -1, reachedEnd: false, line: 1, lineStart: -1 };
    return { r: { ...r, stats: emptyReadStats() }, transfer: [] };
  }
}

/** The first '{' at or after `from` whose previous non-blank bytes are "}," (how events follow
 * each other in traceEvents), or the size if there is none. */
export function likelyEventStart(fd: number, from: number, size: number): number {
  const win = Buffer.allocUnsafe(64 * 1024);
  // The window starts a little before `from`, so the "}," before a '{' at `from` is seen.
  let off = Math.max(0, from - 256);
  while (off < size) {
    const n = readSync(fd, win, 0, Math.min(win.length, size - off), off);
    if (n <= 0) break;
    for (let j = Math.max(0, from - off); j < n; j++) {
      if (win[j] !== 0x7b) continue;
      let q = j - 1;
      while (q >= 0 && isBlank(win[q]!)) q--;
      if (q < 0 || win[q] !== 0x2c) continue;
      q--;
      while (q >= 0 && isBlank(win[q]!)) q--;
      if (q >= 0 && win[q] === 0x7d) return off + j;
    }
    if (off + n >= size) break;
    // Overlap the next window by 256 bytes so a "}," + blanks cut at the edge is still seen.
    off += Math.max(1, n - 256);
    from = Math.max(from, off + 256);
  }
  return size;
}

const isBlank = (c: number) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;

if (!isMainThread && workerData?.inferscopeTraceRead) {
  const { spec, shared } = workerData.inferscopeTraceRead as { spec: Spec; shared: Int32Array };
  const fd = openSync(spec.file, "r");
  const K = spec.nominal.length - 1;
  const onBytes = (n: number) => Atomics.add(shared, 1, Math.ceil(n / 1024));
  try {
    for (;;) {
      const i = Atomics.add(shared, 0, 1);
      if (i >= K) break;
      const { r, transfer } = speculate(spec, fd, i, onBytes);
      parentPort!.postMessage({ t: "seg", r } satisfies FromWorker, transfer);
    }
  } finally {
    closeSync(fd);
  }
}
