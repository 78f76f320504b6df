// Streaming reader for Chrome-trace JSON (.json or .json.gz) of any size: a byte scanner cuts out
// each object of the `traceEvents` array and JSON.parses it alone, so memory stays flat and files
// beyond V8's ~512 MB string limit work. Top-level keys other than traceEvents become metadata.
import { createReadStream } from "node:fs";
import { open, stat } from "node:fs/promises";
import { createGunzip } from "node:zlib";
import { InputError } from "../errors.ts";
import { type EventFields, FastEventParser } from "./fastevent.ts";

export interface RawEvent {
  ph?: string;
  cat?: string;
  name?: string;
  pid?: number | string;
  tid?: number | string;
  ts?: number;
  dur?: number;
  id?: number | string;
  s?: string;
  args?: Record<string, unknown>;
}

export interface ReadStats {
  file: string;
  gzip: boolean;
  /** Bytes of JSON text scanned (uncompressed). */
  bytes: number;
  /** Bytes read from disk. */
  fileBytes: number;
  /** Objects found in traceEvents. */
  events: number;
  /** Events passed to the consumer (the rest were skipped by category before parsing). */
  parsed: number;
  skippedByCategory: number;
  /** Events that were not valid JSON on their own (skipped). */
  badEvents: number;
  /** Events whose bytes were not valid UTF-8 (decoded with U+FFFD). */
  invalidUtf8: number;
  /** Whether the file ended early (truncated gzip or JSON); results are partial. */
  truncated: boolean;
  /** Top-level keys other than traceEvents, parsed (e.g. distributedInfo, deviceProperties). */
  metadata: Record<string, unknown>;
  sawTraceEvents: boolean;
  warnings: string[];
}

/** Stats of a read that has seen nothing yet. */
export function emptyReadStats(): Omit<ReadStats, "file" | "gzip" | "fileBytes"> {
  return {
    bytes: 0,
    events: 0,
    parsed: 0,
    skippedByCategory: 0,
    badEvents: 0,
    invalidUtf8: 0,
    truncated: false,
    metadata: {},
    sawTraceEvents: false,
    warnings: [],
  };
}

export interface ReadOptions {
  /** Event categories to count but not parse (their text is never decoded). */
  skipCategories?: ReadonlySet<string>;
  /** Per skipped category, a name prefix whose events are parsed after all (e.g. python_function
   * events named "nn.Module: …"); decided from the event's first bytes, like the category. */
  keepNamePrefix?: Readonly<Record<string, string>>;
  /** Called with (bytes read from disk, file size) now and then. */
  onProgress?: (read: number, total: number) => void;
  /** Largest metadata value kept, in bytes. */
  maxMetadataBytes?: number;
  chunkBytes?: number;
  /** Only these fields of each event are needed (the rest may be left out of the objects passed
   * to the consumer, and a kept field the event lacks may be present as undefined): lets the reader
   * build them in one pass over the bytes, without JSON.parse. */
  fields?: EventFields;
}

export const MAX_WARNINGS = 20;
/** The last warning when more were dropped. */
export const WARNINGS_CUT = "(further warnings not shown)";

// Scanner states.
const S_START = 0;
const S_KEY = 1; // inside the top-level object, expecting a key, ',' or '}'
const S_KEYSTR = 2; // reading a key string
const S_COLON = 3;
const S_VALUE = 4; // expecting a value start
const S_SKIPVAL = 5; // scanning a metadata value (any JSON value)
const S_ARRAY = 6; // inside traceEvents, expecting '{', ',' or ']'
const S_EVENT = 7; // inside an event object
const S_DONE = 8;
const S_ARRAY_JUNK = 9; // a non-object array element, skipped

/** The incremental scanner. Feed it chunks; it calls `emit` with each event's parsed object. */
export class TraceScanner {
  readonly stats: Omit<ReadStats, "file" | "gzip" | "fileBytes">;
  private state = S_START;
  private buf: Buffer = Buffer.alloc(0);
  /** Start (in buf) of the region being cut out, or -1. */
  private mark = -1;
  private base = 0; // file offset of buf[0]
  private nextBase = 0;
  /** Bytes of the current region that arrived in earlier chunks. */
  private carry: Buffer[] = [];
  private depth = 0;
  private inStr = false;
  private esc = false;
  private line = 1;
  private lineStart = 0; // file offset of the current line's first byte
  private markLine = 1;
  private markCol = 1;
  private key = "";
  private topArray = false;
  /** The skipped categories as bytes, and each one's keep-prefix (same order). */
  private readonly skipBytes: Uint8Array[];
  private readonly skipKeep: Array<Buffer | undefined>;
  private readonly fast?: FastEventParser;
  private readonly maxMeta: number;
  /** A segment reader (parallel.ts) stops between events at the first '{' at or past this offset. */
  stopAt = Number.POSITIVE_INFINITY;
  /** Where it stopped (the offset of that '{'), or -1. */
  stoppedAt = -1;
  /** Events before a resumed segment's start, for messages that give a total. */
  eventsBefore = 0;

  constructor(
    private readonly emit: (ev: RawEvent) => void,
    opts: ReadOptions = {},
    private readonly file = "",
  ) {
    const skip = opts.skipCategories ?? new Set<string>();
    const keep = new Map(Object.entries(opts.keepNamePrefix ?? {}).map(([c, p]) => [c, Buffer.from(p, "utf8")]));
    // The peeked category is the bytes read as latin1: a name with characters above U+00FF never matches.
    const skipList = [...skip].filter((c) => Buffer.from(c, "latin1").toString("latin1") === c);
    this.skipBytes = skipList.map((c) => Buffer.from(c, "latin1"));
    this.skipKeep = skipList.map((c) => keep.get(c));
    if (opts.fields) this.fast = new FastEventParser(opts.fields);
    this.maxMeta = opts.maxMetadataBytes ?? 16 * 1024 * 1024;
    this.stats = emptyReadStats();
  }

  /** Starts inside traceEvents, between events, at file offset `base` (a segment of the array:
   * parallel.ts): line and lineStart are the position's, as far as the caller knows them. */
  resumeInArray(base: number, topArray: boolean, line = 1, lineStart = -1): void {
    this.state = S_ARRAY;
    this.topArray = topArray;
    this.stats.sawTraceEvents = true;
    this.nextBase = base;
    this.line = line;
    this.lineStart = lineStart;
  }

  /** Line count and the current line's start offset (-1: no newline seen since a resume without one). */
  get position(): { line: number; lineStart: number } {
    return { line: this.line, lineStart: this.lineStart };
  }

  private warn(msg: string): void {
    if (this.stats.warnings.length < MAX_WARNINGS) this.stats.warnings.push(msg);
    else if (this.stats.warnings.length === MAX_WARNINGS) this.stats.warnings.push(WARNINGS_CUT);
  }

  private where(offset: number): string {
    return `${this.file ? `${this.file}:` : ""}${this.line}:${offset - this.lineStart + 1}`;
  }

  private fail(offset: number, what: string): never {
    throw new InputError(`${what} (byte ${offset})`, {
      position: { file: this.file || undefined, line: this.line, column: offset - this.lineStart + 1 },
    });
  }

  push(chunk: Buffer): void {
    this.stats.bytes += chunk.length;
    // An unfinished region (event, key or metadata value) from the previous chunk moves to `carry`;
    // only those few bytes are copied, never the new chunk.
    if (this.mark >= 0) {
      this.carry.push(Buffer.from(this.buf.subarray(this.mark)));
      this.mark = 0;
    }
    this.base = this.nextBase;
    this.buf = chunk;
    this.nextBase = this.base + chunk.length;
    const buf = chunk;
    let i = 0;
    const n = buf.length;
    if (this.esc && i < n) {
      this.esc = false;
      i++;
    }
    while (i < n) {
      switch (this.state) {
        case S_EVENT:
          i = this.scanEvent(buf, i, n);
          break;
        case S_ARRAY: {
          // The fast path reads events until one it cannot: that one (a '{') is read below.
          if (this.fast) i = this.fastRun(buf, i, n);
          if (this.stoppedAt >= 0) return;
          // Between events: whitespace and commas.
          for (; i < n; i++) {
            const c = buf[i]!;
            if (c === 0x7b) {
              if (this.base + i >= this.stopAt) {
                this.stoppedAt = this.base + i;
                return;
              }
              this.state = S_EVENT;
              this.mark = i;
              this.markLine = this.line;
              this.markCol = this.base + i - this.lineStart + 1;
              this.depth = 0;
              this.inStr = false;
              break;
            }
            if (c === 0x0a) {
              this.line++;
              this.lineStart = this.base + i + 1;
            } else if (c === 0x5d) {
              this.state = this.topArray ? S_DONE : S_KEY;
              i++;
              break;
            } else if (c === 0x7d) {
              // A stray '}' cannot start a value: skip the byte itself.
              this.warn(`${this.where(this.base + i)}: unexpected '}' in traceEvents; skipped`);
            } else if (c !== 0x2c && c !== 0x20 && c !== 0x0d && c !== 0x09) {
              this.warn(`${this.where(this.base + i)}: traceEvents element is not an object; skipped`);
              this.state = S_ARRAY_JUNK;
              this.mark = i;
              this.depth = 0;
              this.inStr = false;
              break;
            }
          }
          break;
        }
        case S_ARRAY_JUNK:
        case S_SKIPVAL:
          i = this.scanValue(buf, i, n);
          break;
        case S_START: {
          for (; i < n; i++) {
            const c = buf[i]!;
            if (c === 0x7b) {
              this.state = S_KEY;
              i++;
              break;
            }
            if (c === 0x5b) {
              // Chrome's "JSON array format": the file is the events array itself.
              this.state = S_ARRAY;
              this.topArray = true;
              this.stats.sawTraceEvents = true;
              i++;
              break;
            }
            if (c === 0x0a) {
              this.line++;
              this.lineStart = this.base + i + 1;
            } else if (c === 0xef || c === 0xbb || c === 0xbf) {
              // UTF-8 byte-order mark
            } else if (c !== 0x20 && c !== 0x0d && c !== 0x09) {
              const text = buf.toString("latin1", i, Math.min(n, i + 16)).replace(/[^\x20-\x7e]/g, "?");
              this.fail(this.base + i, `not JSON: the file starts with "${text}" (expected a '{' or '[')`);
            }
          }
          break;
        }
        case S_KEY: {
          for (; i < n; i++) {
            const c = buf[i]!;
            if (c === 0x22) {
              this.state = S_KEYSTR;
              this.mark = i + 1;
              this.inStr = true;
              i++;
              break;
            }
            if (c === 0x7d) {
              this.state = S_DONE;
              i++;
              break;
            }
            if (c === 0x0a) {
              this.line++;
              this.lineStart = this.base + i + 1;
            } else if (c !== 0x2c && c !== 0x20 && c !== 0x0d && c !== 0x09) {
              this.fail(this.base + i, `invalid JSON: expected a key string, found '${String.fromCharCode(c)}'`);
            }
          }
          break;
        }
        case S_KEYSTR: {
          for (; i < n; i++) {
            const c = buf[i]!;
            if (c === 0x5c) i++;
            else if (c === 0x22) {
              this.key = this.region(buf, this.mark, i).toString("utf8");
              this.mark = -1;
              this.state = S_COLON;
              i++;
              break;
            }
          }
          if (i > n) {
            this.esc = true;
            i = n;
          }
          break;
        }
        case S_COLON: {
          for (; i < n; i++) {
            const c = buf[i]!;
            if (c === 0x3a) {
              this.state = S_VALUE;
              i++;
              break;
            }
            if (c === 0x0a) {
              this.line++;
              this.lineStart = this.base + i + 1;
            } else if (c !== 0x20 && c !== 0x0d && c !== 0x09)
              this.fail(this.base + i, `invalid JSON: expected ':' after key "${this.key}"`);
          }
          break;
        }
        case S_VALUE: {
          for (; i < n; i++) {
            const c = buf[i]!;
            if (c === 0x0a) {
              this.line++;
              this.lineStart = this.base + i + 1;
              continue;
            }
            if (c === 0x20 || c === 0x0d || c === 0x09) continue;
            if (this.key === "traceEvents" && c === 0x5b) {
              this.state = S_ARRAY;
              this.stats.sawTraceEvents = true;
              i++;
            } else {
              this.state = S_SKIPVAL;
              this.mark = i;
              this.markLine = this.line;
              this.markCol = this.base + i - this.lineStart + 1;
              this.depth = 0;
              this.inStr = false;
            }
            break;
          }
          break;
        }
        case S_DONE: {
          for (; i < n; i++) {
            const c = buf[i]!;
            if (c === 0x0a) {
              this.line++;
              this.lineStart = this.base + i + 1;
            } else if (c !== 0x20 && c !== 0x0d && c !== 0x09 && c !== 0) {
              this.warn(`${this.where(this.base + i)}: data after the end of the JSON document ignored`);
              i = n;
            }
          }
          break;
        }
      }
    }
  }

  /** Scans inside an event object; returns the index where scanning stopped. */
  private scanEvent(buf: Buffer, i: number, n: number): number {
    let depth = this.depth;
    let line = this.line;
    let lineStart = this.lineStart;
    const base = this.base;
    if (this.inStr) {
      i = this.skipString(buf, i, n);
      if (i >= n) return n;
      i++; // past the closing quote
    }
    for (; i < n; i++) {
      const c = buf[i]!;
      if (c === 0x22) {
        // Jump to the closing quote natively; strings are most of an event's bytes.
        i = this.skipString(buf, i + 1, n);
        if (i >= n) {
          this.inStr = true;
          break;
        }
      } else if (c === 0x7b) depth++;
      else if (c === 0x7d) {
        if (--depth === 0) {
          this.line = line;
          this.lineStart = lineStart;
          if (this.carry.length) {
            const r = this.region(buf, this.mark, i + 1);
            this.onEvent(r, 0, r.length);
          } else this.onEvent(buf, this.mark, i + 1);
          this.mark = -1;
          this.state = S_ARRAY;
          this.depth = 0;
          this.inStr = false;
          return i + 1;
        }
      } else if (c === 0x0a) {
        line++;
        lineStart = base + i + 1;
      }
    }
    this.depth = depth;
    this.line = line;
    this.lineStart = lineStart;
    return n;
  }

  /** From inside a string, returns the index of its closing quote, or n if the chunk ends first. */
  private skipString(buf: Buffer, i: number, n: number): number {
    if (this.esc) {
      // The previous chunk ended on a backslash: this byte is escaped.
      this.esc = false;
      i++;
    }
    // Backslash runs are counted back to `lo` only: at lo the string is in plain (unescaped) context.
    let lo = i;
    for (;;) {
      const q = buf.indexOf(0x22, i);
      if (q < 0 || q >= n) {
        if (n > lo && buf[n - 1] === 0x5c && countBackslashes(buf, n - 1, lo) % 2 === 1) this.esc = true;
        this.inStr = true;
        return n;
      }
      if (q > lo && buf[q - 1] === 0x5c && countBackslashes(buf, q - 1, lo) % 2 === 1) {
        lo = q + 1;
        i = q + 1;
        continue;
      }
      this.inStr = false;
      return q;
    }
  }

  /** Scans any JSON value (metadata, or a junk array element); objects/arrays by depth, scalars to a delimiter. */
  private scanValue(buf: Buffer, i: number, n: number): number {
    let depth = this.depth;
    let inStr = this.inStr;
    for (; i < n; i++) {
      const c = buf[i]!;
      if (inStr) {
        if (c === 0x22) {
          inStr = false;
          if (depth === 0) {
            i++;
            break;
          }
        } else if (c === 0x5c) {
          if (i + 1 < n) i++;
          else this.esc = true;
        }
        continue;
      }
      if (c === 0x22) inStr = true;
      else if (c === 0x7b || c === 0x5b) depth++;
      else if (c === 0x7d || c === 0x5d) {
        if (depth === 0) break; // end of the enclosing container: scalar done
        if (--depth === 0) {
          i++;
          break;
        }
      } else if (c === 0x2c && depth === 0) break;
      else if (c === 0x0a) {
        this.line++;
        this.lineStart = this.base + i + 1;
      }
    }
    this.depth = depth;
    this.inStr = inStr;
    // Not complete before the chunk ended (or complete exactly at its end: the next delimiter settles it).
    if (i >= n) return n;
    // Value complete: [mark, i).
    const s = this.mark;
    this.mark = -1;
    if (this.state === S_ARRAY_JUNK) {
      this.carry = [];
      this.state = S_ARRAY;
      return i;
    }
    this.state = S_KEY;
    const len = i - s + this.carry.reduce((a, b) => a + b.length, 0);
    if (len > this.maxMeta) {
      this.carry = [];
      this.warn(`metadata "${this.key}" (${len} bytes) too large; ignored`);
      return i;
    }
    const text = this.region(buf, s, i).toString("utf8").trim();
    try {
      this.stats.metadata[this.key] = JSON.parse(text);
    } catch {
      // Kineto writes some metadata values unquoted or with odd numbers; keep the text.
      this.stats.metadata[this.key] = text;
      this.warn(
        `${this.file ? `${this.file}:` : ""}${this.markLine}:${this.markCol}: metadata "${this.key}" is not valid JSON; kept as text`,
      );
    }
    return i;
  }

  /** The bytes [s, e) of buf, preceded by any carried bytes from earlier chunks. */
  private region(buf: Buffer, s: number, e: number): Buffer {
    if (!this.carry.length) return buf.subarray(s, e);
    const out = Buffer.concat([...this.carry, buf.subarray(0, e)]);
    this.carry = [];
    return out;
  }

  /** Events and the whitespace and commas between them, read by the fast path from buf[i]; returns
   * where it stopped: at an event it leaves to the general path, or at anything else. A small loop
   * of its own, so the hot path is compiled apart from the state machine. */
  private fastRun(buf: Buffer, i: number, n: number): number {
    for (; i < n; i++) {
      const c = buf[i]!;
      if (c === 0x7b) {
        if (this.base + i >= this.stopAt) {
          this.stoppedAt = this.base + i;
          return i;
        }
        const e = this.fastEvent(buf, i, n);
        if (e < 0) return i;
        i = e - 1; // the loop's i++ moves past the event
      } else if (c === 0x0a) {
        this.line++;
        this.lineStart = this.base + i + 1;
      } else if (c !== 0x2c && c !== 0x20 && c !== 0x0d && c !== 0x09) return i;
    }
    return n;
  }

  /** The event at buf[s] read by the fast path: returns the index after it, or -1 when the
   * general path must read it (unusual bytes, or the event goes on in the next chunk). Skipping by
   * category is decided from the same bytes, by the same rules, as in `onEvent`. */
  private fastEvent(buf: Buffer, s: number, n: number): number {
    const f = this.fast!;
    // Peeked with the chunk end as bound first: a skipped event's end is then found as the general
    // scanner finds it, nothing parsed.
    let skip = this.skipBytes.length ? peekSkip(buf, s, n, this.skipBytes) : -1;
    if (skip >= 0) {
      const e = f.skip(buf, s, n, this.base, this.line, this.lineStart);
      if (e < 0) return -1;
      if (e - 6 < s + 160) skip = peekSkip(buf, s, e, this.skipBytes);
      const prefix = skip >= 0 ? this.skipKeep[skip] : undefined;
      if (skip >= 0 && (!prefix || !nameStartsWith(buf, s, e, prefix))) {
        this.line = f.line;
        this.lineStart = f.lineStart;
        this.stats.events++;
        this.stats.skippedByCategory++;
        return e;
      }
      // Kept after all (e.g. an nn.Module frame): parsed below like any other event.
    }
    const ev = f.event(buf, s, n, this.base, this.line, this.lineStart);
    if (ev === undefined) return -1;
    this.line = f.line;
    this.lineStart = f.lineStart;
    this.stats.events++;
    this.stats.parsed++;
    this.emit(ev);
    return f.p;
  }

  private onEvent(buf: Buffer, s: number, e: number): void {
    const st = this.stats;
    st.events++;
    if (this.skipBytes.length) {
      const skip = peekSkip(buf, s, e, this.skipBytes);
      if (skip >= 0) {
        const prefix = this.skipKeep[skip];
        if (!prefix || !nameStartsWith(buf, s, e, prefix)) {
          st.skippedByCategory++;
          return;
        }
      }
    }
    // UTF-8 decoding has an ASCII fast path; invalid sequences become U+FFFD, which we count.
    const text = buf.toString("utf8", s, e);
    if (text.indexOf("\ufffd") >= 0) st.invalidUtf8++;
    let ev: unknown;
    try {
      ev = JSON.parse(text);
    } catch (err) {
      st.badEvents++;
      this.warn(
        `${this.file ? `${this.file}:` : ""}${this.markLine}:${this.markCol}: event is not valid JSON (${(err as Error).message}); skipped`,
      );
      return;
    }
    st.parsed++;
    this.emit(ev as RawEvent);
  }

  /** Call at end of input. Returns false (and records a warning) if the document was cut short. */
  end(): boolean {
    if (this.state === S_DONE || (this.state === S_START && this.stats.bytes === 0)) return true;
    if (this.state === S_START) return true;
    const at = this.where(this.nextBase);
    let what: string;
    if (this.state === S_EVENT) what = "the file ends inside an event";
    else if (this.state === S_ARRAY) what = "the file ends inside traceEvents (no closing ']')";
    else what = "the file ends before the JSON document is complete";
    this.stats.truncated = true;
    this.warn(`${at}: ${what}; results cover the ${this.eventsBefore + this.stats.events} events read up to there`);
    return false;
  }

  get state_(): number {
    return this.state;
  }
}

function countBackslashes(buf: Buffer, at: number, lo: number): number {
  let k = 0;
  while (at - k >= lo && buf[at - k] === 0x5c) k++;
  return k;
}

// Finds the value of "cat" in the first bytes of an event without decoding it; returns the index
// of the skipped category it equals, or -1.
function peekSkip(buf: Buffer, s: number, e: number, skip: readonly Uint8Array[]): number {
  const lim = Math.min(e - 6, s + 160);
  for (let k = s; k < lim; k++) {
    if (buf[k] === 0x22 && buf[k + 1] === 0x63 && buf[k + 2] === 0x61 && buf[k + 3] === 0x74 && buf[k + 4] === 0x22) {
      let j = k + 5;
      while (j < e && (buf[j] === 0x20 || buf[j] === 0x3a || buf[j] === 0x0a || buf[j] === 0x09 || buf[j] === 0x0d))
        j++;
      // Bounds first: a read past the chunk's end deoptimises the hot loop this is inlined into.
      if (j >= e || buf[j] !== 0x22) return -1;
      const v0 = j + 1;
      let v1 = v0;
      while (v1 < e && buf[v1] !== 0x22 && buf[v1] !== 0x5c) v1++;
      if (v1 >= e || buf[v1] !== 0x22) return -1;
      const len = v1 - v0;
      outer: for (let x = 0; x < skip.length; x++) {
        const c = skip[x]!;
        if (c.length !== len) continue;
        for (let y = 0; y < len; y++) if (c[y] !== buf[v0 + y]) continue outer;
        return x;
      }
      return -1;
    }
  }
  return -1;
}

const NAME_KEY = Buffer.from('"name"', "latin1");

// Whether the event's "name" value (found in its first bytes) starts with `prefix`.
function nameStartsWith(buf: Buffer, s: number, e: number, prefix: Buffer): boolean {
  const lim = Math.min(e - NAME_KEY.length, s + 400);
  let k = s;
  for (; k < lim; k++)
    if (
      buf[k] === 0x22 &&
      buf[k + 1] === 0x6e &&
      buf[k + 2] === 0x61 &&
      buf[k + 3] === 0x6d &&
      buf[k + 4] === 0x65 &&
      buf[k + 5] === 0x22
    )
      break;
  if (k >= lim) return false;
  let j = k + NAME_KEY.length;
  while (j < e && (buf[j] === 0x20 || buf[j] === 0x3a || buf[j] === 0x0a || buf[j] === 0x09 || buf[j] === 0x0d)) j++;
  if (j >= e || buf[j] !== 0x22 || j + 1 + prefix.length > e) return false;
  // A JS loop: a native compare per event costs more than the few bytes it compares.
  for (let x = 0; x < prefix.length; x++) if (buf[j + 1 + x] !== prefix[x]) return false;
  return true;
}

const GZIP_MAGIC = [0x1f, 0x8b];

/** Streams one trace file (gzip detected by its magic bytes) through the scanner. */
export async function readTraceFile(
  file: string,
  onEvent: (ev: RawEvent) => void,
  opts: ReadOptions = {},
): Promise<ReadStats> {
  const size = (await stat(file)).size;
  const head = Buffer.alloc(2);
  const fh = await open(file, "r");
  let gzip: boolean;
  try {
    await fh.read(head, 0, 2, 0);
    gzip = size >= 2 && head[0] === GZIP_MAGIC[0] && head[1] === GZIP_MAGIC[1];
  } catch (e) {
    await fh.close();
    throw e;
  }
  const scanner = new TraceScanner(onEvent, opts, file);
  const chunk = opts.chunkBytes ?? 1024 * 1024;
  let fileBytes = 0;
  let lastProgress = 0;
  const progress = (): void => {
    if (opts.onProgress && fileBytes - lastProgress >= 16 * chunk) {
      lastProgress = fileBytes;
      opts.onProgress(fileBytes, size);
    }
  };
  let streamError: Error | undefined;
  if (!gzip) {
    // Uncompressed: three buffers in turn, the next chunk read while this one is scanned (the
    // scanner copies an unfinished event out of the one before at the next push, so that one is
    // reused last). A stream's fresh buffer per chunk costs a page fault per 4 KiB touched: 12k
    // faults and ~140 ms of system time on the 48 MB bench trace on this host.
    const bufs = [0, 1, 2].map(() => Buffer.allocUnsafeSlow(chunk));
    let which = 0;
    let pending: Promise<{ bytesRead: number; buffer: Buffer }> | undefined = fh.read(bufs[0]!, 0, chunk, null);
    try {
      for (;;) {
        const { bytesRead, buffer } = await pending!;
        pending = undefined;
        if (bytesRead <= 0) break;
        fileBytes += bytesRead;
        which = (which + 1) % 3;
        pending = fh.read(bufs[which]!, 0, chunk, null);
        scanner.push(bytesRead === buffer.length ? buffer : buffer.subarray(0, bytesRead));
        progress();
      }
    } catch (e) {
      if (e instanceof InputError) throw e;
      streamError = e as Error;
    } finally {
      // A read still in flight finishes before the file is closed (its result is not needed).
      await pending?.catch(() => undefined);
      await fh.close();
    }
  } else {
    await fh.close();
    const raw = createReadStream(file, { highWaterMark: chunk });
    raw.on("data", (b) => {
      fileBytes += (b as Buffer).length;
    });
    const source = raw.pipe(createGunzip({ chunkSize: chunk }));
    raw.on("error", (e) => source.destroy(e));
    try {
      for await (const b of source) {
        scanner.push(b as Buffer);
        progress();
      }
    } catch (e) {
      if (e instanceof InputError) throw e;
      streamError = e as Error;
    } finally {
      raw.destroy();
    }
  }
  const st = scanner.stats;
  if (streamError) {
    const code = (streamError as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "EACCES" || code === "EISDIR") throw streamError;
    st.truncated = true;
    const why = !gzip
      ? `read error: ${streamError.message}`
      : /unexpected end of file/i.test(streamError.message)
        ? "truncated gzip"
        : `gzip error: ${streamError.message}`;
    const msg = `${file}: ${why} after ${st.bytes} uncompressed bytes (${fileBytes} of ${size} file bytes); results cover the ${st.events} events read up to there`;
    if (st.warnings.length < MAX_WARNINGS) st.warnings.push(msg);
    if (st.bytes === 0) throw new InputError(msg);
  } else {
    scanner.end();
  }
  opts.onProgress?.(fileBytes, size);
  return { file, gzip, fileBytes, ...st };
}
