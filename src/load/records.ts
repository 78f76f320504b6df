// Compact per-request records: chunk facts gathered in reusable growable typed arrays while a stream
// runs, copied to exact-size arrays when it ends; a JSONL writer that appends each record as it completes.
import { createWriteStream, openSync, type WriteStream } from "node:fs";
import { InputError } from "../errors.ts";
import { redact, redactString } from "../secrets.ts";
import type { ChunkColumns, ErrorClass, RequestRecord, ServerTimings } from "./types.ts";

/** A growable column store for one in-flight request; reused after `take()`. */
export class ChunkScratch {
  n = 0;
  private cap: number;
  tMs: Float64Array;
  bytes: Uint32Array;
  read: Uint32Array;
  tokens: Int32Array;
  content: Uint32Array;
  reasoning: Uint32Array;
  tool: Uint32Array;
  flags: Uint8Array;

  constructor(cap = 256) {
    this.cap = cap;
    this.tMs = new Float64Array(cap);
    this.bytes = new Uint32Array(cap);
    this.read = new Uint32Array(cap);
    this.tokens = new Int32Array(cap);
    this.content = new Uint32Array(cap);
    this.reasoning = new Uint32Array(cap);
    this.tool = new Uint32Array(cap);
    this.flags = new Uint8Array(cap);
  }

  push(
    tMs: number,
    bytes: number,
    read: number,
    tokens: number,
    content: number,
    reasoning: number,
    tool: number,
    flags: number,
  ): void {
    if (this.n === this.cap) this.grow();
    const i = this.n++;
    this.tMs[i] = tMs;
    this.bytes[i] = bytes;
    this.read[i] = read;
    this.tokens[i] = tokens;
    this.content[i] = content;
    this.reasoning[i] = reasoning;
    this.tool[i] = tool;
    this.flags[i] = flags;
  }

  get capacity(): number {
    return this.cap;
  }

  private grow(): void {
    const cap = this.cap * 2;
    const g = <T extends Float64Array | Uint32Array | Int32Array | Uint8Array>(a: T, C: new (n: number) => T): T => {
      const b = new C(cap);
      b.set(a as any);
      return b;
    };
    this.tMs = g(this.tMs, Float64Array);
    this.bytes = g(this.bytes, Uint32Array);
    this.read = g(this.read, Uint32Array);
    this.tokens = g(this.tokens, Int32Array);
    this.content = g(this.content, Uint32Array);
    this.reasoning = g(this.reasoning, Uint32Array);
    this.tool = g(this.tool, Uint32Array);
    this.flags = g(this.flags, Uint8Array);
    this.cap = cap;
  }

  /** Exact-size copies; resets the scratch for the next request. */
  take(): ChunkColumns {
    const n = this.n;
    this.n = 0;
    return {
      tMs: this.tMs.slice(0, n),
      bytes: this.bytes.slice(0, n),
      read: this.read.slice(0, n),
      tokens: this.tokens.slice(0, n),
      content: this.content.slice(0, n),
      reasoning: this.reasoning.slice(0, n),
      tool: this.tool.slice(0, n),
      flags: this.flags.slice(0, n),
    };
  }

  /** Moves the columns into `arena` (views of its blocks); resets the scratch for the next request. */
  moveTo(arena: ChunkArena): ChunkColumns {
    const n = this.n;
    this.n = 0;
    return arena.put(this, n);
  }
}

/** A ChunkRows row: 40 bytes (tMs as one float64, then seven 32-bit fields). */
const ROW_F64 = 5;
const ROW_U32 = 10;

/**
 * One in-flight request's chunk facts, a row per chunk in one buffer: a push writes one 40-byte row
 * (one or two cache lines) where ChunkScratch's eight columns touch eight arrays and eight lines. With
 * 1,000 streams read in turn, each stream's state is out of cache by its next read, so those lines
 * were most of the client's cost per read. `moveTo` turns the rows into the arena's columns.
 */
export class ChunkRows {
  n = 0;
  private cap: number;
  private f64: Float64Array;
  /** The same buffer as 32-bit fields: [2] bytes, [3] read, [4] tokens (int32 bits), [5] content, [6] reasoning, [7] tool, [8] flags. */
  private u32: Uint32Array;

  constructor(cap = 256) {
    this.cap = Math.max(1, cap);
    this.f64 = new Float64Array(this.cap * ROW_F64);
    this.u32 = new Uint32Array(this.f64.buffer);
  }

  get capacity(): number {
    return this.cap;
  }

  push(
    tMs: number,
    bytes: number,
    read: number,
    tokens: number,
    content: number,
    reasoning: number,
    tool: number,
    flags: number,
  ): void {
    if (this.n === this.cap) this.grow();
    const i = this.n++;
    this.f64[i * ROW_F64] = tMs;
    const u = i * ROW_U32;
    const a = this.u32;
    a[u + 2] = bytes;
    a[u + 3] = read;
    a[u + 4] = tokens;
    a[u + 5] = content;
    a[u + 6] = reasoning;
    a[u + 7] = tool;
    a[u + 8] = flags;
  }

  private grow(): void {
    const f = new Float64Array(this.cap * 2 * ROW_F64);
    f.set(this.f64);
    this.f64 = f;
    this.u32 = new Uint32Array(f.buffer);
    this.cap *= 2;
  }

  /** Row i's fields into columns at `at` of `dst` (ChunkArena's blocks). */
  copyTo(dst: ChunkScratch, at: number): void {
    const f = this.f64;
    const a = this.u32;
    const n = this.n;
    for (let i = 0; i < n; i++) {
      const j = at + i;
      const u = i * ROW_U32;
      dst.tMs[j] = f[i * ROW_F64]!;
      dst.bytes[j] = a[u + 2]!;
      dst.read[j] = a[u + 3]!;
      dst.tokens[j] = a[u + 4]! | 0;
      dst.content[j] = a[u + 5]!;
      dst.reasoning[j] = a[u + 6]!;
      dst.tool[j] = a[u + 7]!;
      dst.flags[j] = a[u + 8]!;
    }
  }

  /** Moves the rows into `arena` as columns (views of its blocks); resets for the next request. */
  moveTo(arena: ChunkArena): ChunkColumns {
    const c = arena.putRows(this);
    this.n = 0;
    return c;
  }

  /**
   * moveTo without the eight views: the rows go to `arena.lastBlock` at `arena.lastAt`; returns how
   * many. The load loops keep only that location (RecordStore.addAt) unless someone reads the record's
   * chunks while the run goes on: eight views a request were ~0.8 KB of garbage in the window.
   */
  moveToArena(arena: ChunkArena): number {
    const n = this.n;
    arena.putRowsAt(this);
    this.n = 0;
    return n;
  }
}

/**
 * Finished requests' chunk columns, packed into large shared blocks: one allocation per ~64k chunks
 * instead of eight per request (those allocations and their GC cost showed up per token).
 */
export class ChunkArena {
  private static readonly BLOCK = 1 << 16;
  private pos = ChunkArena.BLOCK;
  private blk: ChunkScratch | null = null;
  private readonly blocks: ChunkScratch[] = [];
  private readonly index = new Map<ArrayBufferLike, number>();

  /** Blocks made ahead of use (reserve), taken before any new one is made. */
  private readonly spare: ChunkScratch[] = [];
  /** Most blocks reserve() makes ahead (~2.2 MB each). */
  static readonly RESERVE_MAX = 8;

  private add(b: ChunkScratch): void {
    this.index.set(b.tMs.buffer, this.blocks.length);
    this.blocks.push(b);
  }

  /**
   * Makes blocks for `chunks` more chunks before a run's clock (at most RESERVE_MAX), with their pages
   * touched: made in the window, each block's allocation and first writes were the window's work.
   */
  reserve(chunks: number): void {
    let room = (this.blk ? ChunkArena.BLOCK - this.pos : 0) + this.spare.length * ChunkArena.BLOCK;
    while (room < chunks && this.spare.length < ChunkArena.RESERVE_MAX) {
      const b = new ChunkScratch(ChunkArena.BLOCK);
      b.tMs.fill(0);
      b.bytes.fill(0);
      b.read.fill(0);
      b.tokens.fill(0);
      b.content.fill(0);
      b.reasoning.fill(0);
      b.tool.fill(0);
      b.flags.fill(0);
      this.spare.push(b);
      room += ChunkArena.BLOCK;
    }
  }

  /** Room for n chunks: the block and the offset they go to. */
  private place(n: number): ChunkScratch {
    if (n > ChunkArena.BLOCK >> 2) {
      const dst = new ChunkScratch(n);
      this.add(dst);
      this.at = 0;
      return dst;
    }
    if (!this.blk || this.pos + n > ChunkArena.BLOCK) {
      this.blk = this.spare.pop() ?? new ChunkScratch(ChunkArena.BLOCK);
      this.add(this.blk);
      this.pos = 0;
    }
    this.at = this.pos;
    this.pos += n;
    return this.blk;
  }

  /** Where place() put the last request. */
  private at = 0;

  /** A stream's rows (ChunkRows) as columns of a block. */
  putRows(src: ChunkRows): ChunkColumns {
    const n = src.n;
    const dst = this.place(n);
    const at = this.at;
    src.copyTo(dst, at);
    return this.view(dst, at, at + n);
  }

  /** Where putRowsAt put the last request's rows: block (for columns()) and offset. */
  lastBlock = -1;
  lastAt = 0;

  /** putRows with no views made: the rows' place is lastBlock, lastAt. */
  putRowsAt(src: ChunkRows): void {
    const dst = this.place(src.n);
    src.copyTo(dst, this.at);
    this.lastBlock = this.index.get(dst.tMs.buffer)!;
    this.lastAt = this.at;
  }

  put(src: ChunkScratch, n: number): ChunkColumns {
    const dst = this.place(n);
    const at = this.at;
    // A scratch little longer than what it holds is copied whole, column by column (a native copy with
    // no view made; what lies past n is overwritten by the next put): ~20x faster than the element
    // loop, which stays for a scratch much longer than its request (set(subarray()) would make eight
    // views per request: garbage on the read path).
    const cap = src.capacity;
    if (cap <= 2 * n + 64 && at + cap <= dst.capacity) {
      dst.tMs.set(src.tMs, at);
      dst.bytes.set(src.bytes, at);
      dst.read.set(src.read, at);
      dst.tokens.set(src.tokens, at);
      dst.content.set(src.content, at);
      dst.reasoning.set(src.reasoning, at);
      dst.tool.set(src.tool, at);
      dst.flags.set(src.flags, at);
      return this.view(dst, at, at + n);
    }
    for (let i = 0; i < n; i++) {
      const j = at + i;
      dst.tMs[j] = src.tMs[i]!;
      dst.bytes[j] = src.bytes[i]!;
      dst.read[j] = src.read[i]!;
      dst.tokens[j] = src.tokens[i]!;
      dst.content[j] = src.content[i]!;
      dst.reasoning[j] = src.reasoning[i]!;
      dst.tool[j] = src.tool[i]!;
      dst.flags[j] = src.flags[i]!;
    }
    return this.view(dst, at, at + n);
  }

  /** Copies columns from elsewhere (another thread's record) into the arena. */
  putColumns(c: ChunkColumns): ChunkColumns {
    const n = c.tMs.length;
    const tmp = new ChunkScratch(Math.max(1, n));
    tmp.tMs.set(c.tMs);
    tmp.bytes.set(c.bytes);
    tmp.read.set(c.read);
    tmp.tokens.set(c.tokens);
    tmp.content.set(c.content);
    tmp.reasoning.set(c.reasoning);
    tmp.tool.set(c.tool);
    tmp.flags.set(c.flags);
    return this.put(tmp, n);
  }

  /** Where columns returned by put() live: [block, offset], or null if they are not ours. */
  locate(c: ChunkColumns): [number, number] | null {
    const b = this.index.get(c.tMs.buffer);
    return b === undefined ? null : [b, c.tMs.byteOffset / 8];
  }

  columns(block: number, at: number, n: number): ChunkColumns {
    return this.view(this.blocks[block]!, at, at + n);
  }

  private view(dst: ChunkScratch, at: number, e: number): ChunkColumns {
    return {
      tMs: dst.tMs.subarray(at, e),
      bytes: dst.bytes.subarray(at, e),
      read: dst.read.subarray(at, e),
      tokens: dst.tokens.subarray(at, e),
      content: dst.content.subarray(at, e),
      reasoning: dst.reasoning.subarray(at, e),
      tool: dst.tool.subarray(at, e),
      flags: dst.flags.subarray(at, e),
    };
  }
}

const ERROR_CLASSES: Array<ErrorClass | null> = [
  null,
  "connect",
  "http",
  "stream-error",
  "disconnect",
  "stall",
  "timeout",
  "malformed",
  "no-output",
  "aborted",
];

const F64_FIELDS = [
  "scheduledMs",
  "createdMs",
  "sendMs",
  "headersMs",
  "firstChunkMs",
  "firstOutputMs",
  "firstContentMs",
  "lastChunkMs",
  "endMs",
  "ttftMs",
  "e2elMs",
] as const;
const I32_FIELDS = [
  "index",
  "status",
  "promptTokens",
  "completionTokens",
  "outputTokens",
  "targetInputLen",
  "targetOutputLen",
] as const;

/**
 * Finished requests, column-wise in typed arrays (one row per request; chunk columns in the arena).
 * Plain record objects would all survive into the old generation and every young-generation GC
 * would copy them: at 1,000 req/s that made the scavenges, not the loop, set the schedule lag.
 * `materialize()` builds the record objects once the run is over.
 */
export class RecordStore {
  n = 0;
  private cap = 0;
  private f64: Float64Array[] = [];
  private i32: Int32Array[] = [];
  private flags = new Uint8Array(0);
  private errCls = new Uint8Array(0);
  private chunkBlock = new Int32Array(0);
  private chunkAt = new Int32Array(0);
  private chunkN = new Int32Array(0);
  private finish = new Int16Array(0);
  private readonly finishNames: string[] = [];
  private readonly finishIds = new Map<string, number>();
  /** Error messages are rare: kept by row. */
  private readonly messages = new Map<number, string>();
  /** Server-reported timings (llama.cpp, TGI): kept by row when present. */
  private readonly server = new Map<number, ServerTimings>();
  /** Chunk columns not in the arena (e.g. empty ones): kept by row. */
  private readonly foreign = new Map<number, ChunkColumns>();

  /** `expected`: the run's request count when known, so the columns never grow (a copy) mid-run. */
  constructor(
    readonly arena: ChunkArena,
    expected = 256,
  ) {
    this.grow(Math.max(16, Math.min(expected, 1 << 22)));
  }

  private grow(cap: number): void {
    const g = <T extends Float64Array | Int32Array | Uint8Array | Int16Array>(a: T, C: new (n: number) => T): T => {
      const b = new C(cap);
      b.set(a as any);
      return b;
    };
    this.f64 = F64_FIELDS.map((_, k) => g(this.f64[k] ?? new Float64Array(0), Float64Array));
    this.i32 = I32_FIELDS.map((_, k) => g(this.i32[k] ?? new Int32Array(0), Int32Array));
    this.flags = g(this.flags, Uint8Array);
    this.errCls = g(this.errCls, Uint8Array);
    this.chunkBlock = g(this.chunkBlock, Int32Array);
    this.chunkAt = g(this.chunkAt, Int32Array);
    this.chunkN = g(this.chunkN, Int32Array);
    this.finish = g(this.finish, Int16Array);
    this.cap = cap;
  }

  add(r: RequestRecord): void {
    const i = this.row(r);
    const loc = r.chunks ? this.arena.locate(r.chunks) : null;
    if (loc) {
      this.chunkBlock[i] = loc[0];
      this.chunkAt[i] = loc[1];
      this.chunkN[i] = r.chunks.tMs.length;
    } else {
      this.chunkBlock[i] = -1;
      this.foreign.set(i, r.chunks ?? emptyChunks());
    }
  }

  /** add() for a record whose chunks are n columns of the arena's `block` at `at` (ChunkRows.moveToArena). */
  addAt(r: RequestRecord, block: number, at: number, n: number): void {
    const i = this.row(r);
    this.chunkBlock[i] = block;
    this.chunkAt[i] = at;
    this.chunkN[i] = n;
  }

  /** Row for r's own fields (its chunks are the caller's); returns its index. */
  private row(r: RequestRecord): number {
    if (this.n === this.cap) this.grow(this.cap * 2);
    const i = this.n++;
    for (let k = 0; k < F64_FIELDS.length; k++) this.f64[k]![i] = r[F64_FIELDS[k]!];
    for (let k = 0; k < I32_FIELDS.length; k++) this.i32[k]![i] = r[I32_FIELDS[k]!];
    this.flags[i] = (r.warmup ? 1 : 0) | (r.outputTokensFromUsage ? 2 : 0);
    this.errCls[i] = Math.max(0, ERROR_CLASSES.indexOf(r.errorClass));
    if (r.errorMessage !== null) this.messages.set(i, r.errorMessage);
    if (r.server) this.server.set(i, r.server);
    let f = -1;
    if (r.finishReason !== null) {
      f = this.finishIds.get(r.finishReason) ?? -1;
      if (f < 0) {
        f = this.finishNames.length;
        this.finishNames.push(r.finishReason);
        this.finishIds.set(r.finishReason, f);
      }
    }
    this.finish[i] = f;
    return i;
  }

  /** Row i as a record object. */
  get(i: number): RequestRecord {
    const r: Record<string, unknown> = {};
    for (let k = 0; k < F64_FIELDS.length; k++) r[F64_FIELDS[k]!] = this.f64[k]![i];
    for (let k = 0; k < I32_FIELDS.length; k++) r[I32_FIELDS[k]!] = this.i32[k]![i];
    r.warmup = (this.flags[i]! & 1) !== 0;
    r.outputTokensFromUsage = (this.flags[i]! & 2) !== 0;
    r.errorClass = ERROR_CLASSES[this.errCls[i]!] ?? null;
    r.errorMessage = this.messages.get(i) ?? null;
    r.server = this.server.get(i) ?? null;
    r.finishReason = this.finish[i]! >= 0 ? this.finishNames[this.finish[i]!]! : null;
    r.chunks =
      this.chunkBlock[i]! >= 0
        ? this.arena.columns(this.chunkBlock[i]!, this.chunkAt[i]!, this.chunkN[i]!)
        : this.foreign.get(i)!;
    return r as unknown as RequestRecord;
  }

  materialize(): RequestRecord[] {
    const out = new Array<RequestRecord>(this.n);
    for (let i = 0; i < this.n; i++) out[i] = this.get(i);
    return out;
  }
}

export function emptyChunks(): ChunkColumns {
  return new ChunkScratch(0 + 1).take();
}

/**
 * A finished request's chunks while only their arena location is kept (the load loops, when nothing
 * reads a record during the run): empty, shared, never written.
 */
export const NO_CHUNKS: ChunkColumns = emptyChunks();

const round3 = (x: number) => (Number.isFinite(x) ? Math.round(x * 1000) / 1000 : null);

/** A record as plain JSON (times rounded to µs, NaN as null). */
export function recordToJson(r: RequestRecord): Record<string, unknown> {
  const c = r.chunks;
  return {
    index: r.index,
    warmup: r.warmup,
    scheduledMs: round3(r.scheduledMs),
    createdMs: round3(r.createdMs),
    sendMs: round3(r.sendMs),
    headersMs: round3(r.headersMs),
    firstChunkMs: round3(r.firstChunkMs),
    firstOutputMs: round3(r.firstOutputMs),
    firstContentMs: round3(r.firstContentMs),
    lastChunkMs: round3(r.lastChunkMs),
    endMs: round3(r.endMs),
    status: r.status,
    errorClass: r.errorClass,
    // An error's text may quote the request (a URL with its key): the one free-text field of a record.
    errorMessage: r.errorMessage === null ? null : redactString(r.errorMessage),
    promptTokens: r.promptTokens,
    completionTokens: r.completionTokens,
    outputTokens: r.outputTokens,
    outputTokensFromUsage: r.outputTokensFromUsage,
    targetInputLen: r.targetInputLen,
    targetOutputLen: r.targetOutputLen,
    finishReason: r.finishReason,
    ttftMs: round3(r.ttftMs),
    e2elMs: round3(r.e2elMs),
    server: r.server ?? null,
    chunks: {
      tMs: Array.from(c.tMs, (x) => Math.round(x * 1000) / 1000),
      bytes: Array.from(c.bytes),
      read: Array.from(c.read),
      tokens: Array.from(c.tokens),
      content: Array.from(c.content),
      reasoning: Array.from(c.reasoning),
      tool: Array.from(c.tool),
      flags: Array.from(c.flags),
    },
  };
}

const num = (v: unknown): number => (typeof v === "number" ? v : Number.NaN);

/** Parses a record written by recordToJson (e.g. a line of a records JSONL file). */
export function recordFromJson(o: any): RequestRecord {
  const c = o.chunks ?? {};
  const n = Array.isArray(c.tMs) ? c.tMs.length : 0;
  const col = <T>(C: { from(a: ArrayLike<number>): T }, v: unknown, fill: number): T =>
    C.from(Array.isArray(v) && v.length === n ? (v as number[]) : new Array(n).fill(fill));
  return {
    index: o.index,
    warmup: Boolean(o.warmup),
    scheduledMs: num(o.scheduledMs),
    createdMs: num(o.createdMs),
    sendMs: num(o.sendMs),
    headersMs: num(o.headersMs),
    firstChunkMs: num(o.firstChunkMs),
    firstOutputMs: num(o.firstOutputMs),
    firstContentMs: num(o.firstContentMs),
    lastChunkMs: num(o.lastChunkMs),
    endMs: num(o.endMs),
    status: o.status ?? 0,
    errorClass: (o.errorClass ?? null) as ErrorClass | null,
    errorMessage: o.errorMessage ?? null,
    promptTokens: o.promptTokens ?? -1,
    completionTokens: o.completionTokens ?? -1,
    outputTokens: o.outputTokens ?? 0,
    outputTokensFromUsage: Boolean(o.outputTokensFromUsage),
    targetInputLen: o.targetInputLen ?? 0,
    targetOutputLen: o.targetOutputLen ?? 0,
    finishReason: o.finishReason ?? null,
    ttftMs: num(o.ttftMs ?? o.firstChunkMs),
    e2elMs: num(o.e2elMs ?? o.lastChunkMs),
    server: o.server && typeof o.server === "object" ? (o.server as ServerTimings) : null,
    chunks: {
      tMs: col(Float64Array, c.tMs, 0),
      bytes: col(Uint32Array, c.bytes, 0),
      read: col(Uint32Array, c.read, 0),
      tokens: col(Int32Array, c.tokens, -1),
      content: col(Uint32Array, c.content, 0),
      reasoning: col(Uint32Array, c.reasoning, 0),
      tool: col(Uint32Array, c.tool, 0),
      flags: col(Uint8Array, c.flags, 0),
    },
  };
}

/** Parses a whole records JSONL text; a bad line is reported as path:line. */
export function parseRecordsJsonl(text: string, path = "<records>"): RequestRecord[] {
  const out: RequestRecord[] = [];
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.trim();
    if (!line) continue;
    let o: any;
    try {
      o = JSON.parse(line);
    } catch (e) {
      throw new InputError(`not a JSON record: ${(e as Error).message}`, {
        position: { file: path, line: i + 1, column: 1 },
      });
    }
    if (o && o.type === "header") continue;
    out.push(recordFromJson(o));
  }
  return out;
}

/** Appends one JSON line per completed record; flushes on close. Write errors surface on close(). */
export class JsonlWriter {
  private readonly ws: WriteStream;
  private error: Error | null = null;
  /** Opens the file now, so a bad path fails before a run sends anything (InputError). */
  constructor(readonly path: string) {
    let fd: number;
    try {
      fd = openSync(path, "w");
    } catch (e: any) {
      throw new InputError(`${path}: cannot write records: ${e?.message ?? e}`);
    }
    this.ws = createWriteStream(path, { fd });
    this.ws.on("error", (e) => {
      this.error = e;
    });
  }
  /** The file's first line (the run's setup: its URL, flags …), with its secrets cut out. */
  header(obj: Record<string, unknown>): void {
    this.write(redact(obj));
  }
  write(obj: unknown): void {
    if (this.error) return;
    this.ws.write(`${JSON.stringify(obj)}\n`);
  }
  async close(): Promise<void> {
    await new Promise<void>((resolve) => this.ws.end(resolve));
    if (this.error) throw new InputError(`${this.path}: cannot write records: ${this.error.message}`);
  }
}
