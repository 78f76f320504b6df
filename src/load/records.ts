// Compact per-request records: chunk facts gathered in reusable growable typed arrays while a stream
// runs, copied to exact-size arrays when it ends; a JSONL writer that appends each record as it completes.
import { createWriteStream, type WriteStream } from "node:fs";
import { InputError } from "../errors.ts";
import type { ChunkColumns, ErrorClass, RequestRecord } from "./types.ts";

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

/**
 * Finished requests' chunk columns, packed into large shared blocks: one allocation per ~64k chunks
 * instead of eight per request (those allocations and their GC cost showed up per token).
 */
export class ChunkArena {
  private static readonly BLOCK = 1 << 16;
  private pos = ChunkArena.BLOCK;
  private blk: ChunkScratch | null = null;

  put(src: ChunkScratch, n: number): ChunkColumns {
    let dst: ChunkScratch;
    let at: number;
    if (n > ChunkArena.BLOCK >> 2) {
      dst = new ChunkScratch(n);
      at = 0;
    } else {
      if (!this.blk || this.pos + n > ChunkArena.BLOCK) {
        this.blk = new ChunkScratch(ChunkArena.BLOCK);
        this.pos = 0;
      }
      dst = this.blk;
      at = this.pos;
      this.pos += n;
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
    const e = at + n;
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

export function emptyChunks(): ChunkColumns {
  return new ChunkScratch(0 + 1).take();
}

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
    errorMessage: r.errorMessage,
    promptTokens: r.promptTokens,
    completionTokens: r.completionTokens,
    outputTokens: r.outputTokens,
    outputTokensFromUsage: r.outputTokensFromUsage,
    targetInputLen: r.targetInputLen,
    targetOutputLen: r.targetOutputLen,
    finishReason: r.finishReason,
    ttftMs: round3(r.ttftMs),
    e2elMs: round3(r.e2elMs),
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
  constructor(readonly path: string) {
    this.ws = createWriteStream(path, { flags: "w" });
    this.ws.on("error", (e) => {
      this.error = e;
    });
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
