// Fast path for the trace reader: one pass over an event's bytes that both finds its end and builds
// the few fields the analysis reads, instead of cutting the event out, decoding it to a string and
// JSON.parse-ing all of it (args with a dozen counters, grid/block arrays). It accepts only a strict
// subset of JSON — printable ASCII strings without escapes, plain numbers, nesting ≤ 32 — and gives
// up (returns undefined) on anything else, or at the end of the chunk, so the caller falls back to
// the general path: whatever it accepts, JSON.parse would accept and read the same values from.
import type { RawEvent } from "./reader.ts";

/** The fields the fast path keeps: top-level keys, and keys inside `args`. */
export interface EventFields {
  event: readonly string[];
  args: readonly string[];
}

// 10^k is exact in a double for k ≤ 22: m / 10^k is then one correctly rounded division, the same
// double JSON.parse's correctly rounded conversion gives, as long as m < 2^53. The digits are
// summed exactly while the sum stays below 2^53, and it only grows: a sum below 2^53 at the end is
// exact, however many digits (Kineto's 16-digit timestamps, 5545607812504.549 µs, are).
const POW10 = Array.from({ length: 23 }, (_, k) => 10 ** k);
const TWO53 = 2 ** 53;
const MAX_DEPTH = 32;
/** 1 for the bytes a string may hold on the fast path: printable ASCII but '"' and '\\'. */
const PLAIN = new Uint8Array(256);
for (let c = 0x20; c < 0x80; c++) if (c !== 0x22 && c !== 0x5c) PLAIN[c] = 1;
/** Returned by `scalar` when the value is not one the fast path reads. */
const FAIL = Symbol("fail");

/** Keys looked up by their bytes (no string made): candidates by (length, first byte). */
class KeyTable {
  private readonly head = new Int16Array(64 * 256).fill(-1);
  private readonly next: number[] = [];
  private readonly bytes: Uint8Array[] = [];
  constructor(readonly names: readonly string[]) {
    names.forEach((name, index) => {
      const bytes = Buffer.from(name, "latin1");
      if (bytes.length === 0 || bytes.toString("latin1") !== name) return;
      const slot = Math.min(bytes.length, 63) * 256 + bytes[0]!;
      this.bytes[index] = bytes;
      this.next[index] = this.head[slot]!;
      this.head[slot] = index;
    });
  }
  /** Index of the key whose bytes are b[a, e), or -1. */
  find(b: Buffer, a: number, e: number): number {
    const len = e - a;
    if (len === 0) return -1;
    let x = this.head[Math.min(len, 63) * 256 + b[a]!]!;
    while (x >= 0) {
      const k = this.bytes[x]!;
      if (k.length === len) {
        let j = 1;
        while (j < len && k[j] === b[a + j]) j++;
        if (j === len) return x;
      }
      x = this.next[x]!;
    }
    return -1;
  }
}

// Kept string values repeat (kernel names, categories, "X"): a direct-mapped cache by a few bytes
// and the length returns the same string without decoding it again, and later Map lookups of it
// reuse its cached hash. Bounded: a colliding string replaces the slot's entry.
const CACHE_SLOTS = 8192;
const MAX_CACHED = 512;

export class FastEventParser {
  /** Position after the event, and the line count there, once `event` succeeds. */
  p = 0;
  line = 1;
  lineStart = 0;
  private base = 0;
  private readonly top: KeyTable;
  private readonly args: KeyTable;
  private readonly argsKey: number;
  /** Every kept field, undefined: each event starts as a copy, so all events share one shape and
   * the consumer's property reads stay monomorphic (objects built key by key in the file's order
   * took several shapes, and the builder's reads were deoptimised on each new one). */
  private readonly evTemplate: Record<string, unknown>;
  private readonly argsTemplate: Record<string, unknown>;
  private readonly cacheBytes: Array<Uint8Array | undefined> = new Array(CACHE_SLOTS).fill(undefined);
  private readonly cacheStr: string[] = new Array(CACHE_SLOTS).fill("");

  constructor(fields: EventFields) {
    this.top = new KeyTable(fields.event);
    this.args = new KeyTable(fields.args);
    this.argsKey = fields.event.indexOf("args");
    this.evTemplate = template(this.top.names);
    this.argsTemplate = template(this.args.names);
  }

  /** Parses the object starting at b[s] (a '{') within b[0, n). Returns the event with the kept
   * fields, or undefined to fall back.
   * One flat loop with the position in a local: the top-level object and `args` are read here,
   * deeper values by `nested`. */
  event(b: Buffer, s: number, n: number, base: number, line: number, lineStart: number): RawEvent | undefined {
    this.base = base;
    const ev: Record<string, unknown> = { ...this.evTemplate };
    let out = ev;
    let table = this.top;
    let inArgs = false;
    let p = s + 1;
    let c = 0;
    // whitespace
    while (p < n && ((c = b[p]!) === 0x20 || c === 0x0a || c === 0x09 || c === 0x0d)) {
      p++;
      if (c === 0x0a) {
        line++;
        lineStart = base + p;
      }
    }
    if (p >= n) return undefined;
    let member = true;
    if (b[p] === 0x7d) {
      p++;
      member = false;
      if (!inArgs) return this.done(p, line, lineStart, ev);
    }
    for (;;) {
      if (member) {
        // "key"
        if (b[p] !== 0x22) return undefined;
        const ka = ++p;
        while (p < n && PLAIN[b[p]!] === 1) p++;
        if (p >= n || b[p] !== 0x22) return undefined;
        const ke = p++;
        while (p < n && ((c = b[p]!) === 0x20 || c === 0x0a || c === 0x09 || c === 0x0d)) {
          p++;
          if (c === 0x0a) {
            line++;
            lineStart = base + p;
          }
        }
        if (p >= n || b[p] !== 0x3a) return undefined;
        p++;
        while (p < n && ((c = b[p]!) === 0x20 || c === 0x0a || c === 0x09 || c === 0x0d)) {
          p++;
          if (c === 0x0a) {
            line++;
            lineStart = base + p;
          }
        }
        if (p >= n) return undefined;
        const k = table.find(b, ka, ke);
        c = b[p]!;
        if (c === 0x22) {
          const va = ++p;
          while (p < n && PLAIN[b[p]!] === 1) p++;
          if (p >= n || b[p] !== 0x22) return undefined;
          if (k >= 0) out[table.names[k]!] = this.text(b, va, p);
          p++;
        } else if (c === 0x2d || (c >= 0x30 && c <= 0x39)) {
          // number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
          const na = p;
          let neg = false;
          if (c === 0x2d) {
            neg = true;
            if (++p >= n) return undefined;
            c = b[p]!;
          }
          // -0, a double: the mantissa's arithmetic is compiled for doubles from the start (ts and
          // ids pass 2^31), not for small integers first and again after an overflow deopt.
          let m = -0;
          let frac = 0;
          if (c === 0x30) {
            if (++p >= n) return undefined;
            c = b[p]!;
          } else if (c >= 0x31 && c <= 0x39) {
            do {
              m = m * 10 + (c - 0x30);
              if (++p >= n) return undefined;
              c = b[p]!;
            } while (c >= 0x30 && c <= 0x39);
          } else return undefined;
          if (c === 0x2e) {
            if (++p >= n) return undefined;
            c = b[p]!;
            if (c < 0x30 || c > 0x39) return undefined;
            do {
              m = m * 10 + (c - 0x30);
              frac++;
              if (++p >= n) return undefined;
              c = b[p]!;
            } while (c >= 0x30 && c <= 0x39);
          }
          let exp = false;
          if (c === 0x65 || c === 0x45) {
            exp = true;
            if (++p >= n) return undefined;
            c = b[p]!;
            if (c === 0x2b || c === 0x2d) {
              if (++p >= n) return undefined;
              c = b[p]!;
            }
            if (c < 0x30 || c > 0x39) return undefined;
            do {
              if (++p >= n) return undefined;
              c = b[p]!;
            } while (c >= 0x30 && c <= 0x39);
          }
          if (k >= 0) {
            let v: number;
            if (!exp && m < TWO53 && frac <= 22) {
              v = (frac ? m / POW10[frac]! : m) + 0; // + 0: the -0 start is not a digit
              if (neg) v = -v;
            } else v = Number(b.toString("latin1", na, p));
            out[table.names[k]!] = v;
          }
        } else if (c === 0x7b && k >= 0 && !inArgs && k === this.argsKey) {
          // args: its kept keys go into their own object
          const args: Record<string, unknown> = { ...this.argsTemplate };
          out[table.names[k]!] = args;
          out = args;
          table = this.args;
          inArgs = true;
          p++;
          while (p < n && ((c = b[p]!) === 0x20 || c === 0x0a || c === 0x09 || c === 0x0d)) {
            p++;
            if (c === 0x0a) {
              line++;
              lineStart = base + p;
            }
          }
          if (p >= n) return undefined;
          if (b[p] === 0x7d) {
            p++;
            out = ev;
            table = this.top;
            inArgs = false;
            member = false;
          }
          continue;
        } else if (c === 0x7b || c === 0x5b) {
          // Kept fields are scalars; a container is left to the general path.
          if (k >= 0) return undefined;
          this.line = line;
          this.lineStart = lineStart;
          p = this.nested(b, p, n, inArgs ? 2 : 1);
          if (p < 0) return undefined;
          line = this.line;
          lineStart = this.lineStart;
        } else {
          const v = literal(b, p, n);
          if (v === FAIL) return undefined;
          if (k >= 0) out[table.names[k]!] = v;
          p += v === false ? 5 : 4;
        }
      }
      member = true;
      // ',' or '}'
      while (p < n && ((c = b[p]!) === 0x20 || c === 0x0a || c === 0x09 || c === 0x0d)) {
        p++;
        if (c === 0x0a) {
          line++;
          lineStart = base + p;
        }
      }
      if (p >= n) return undefined;
      c = b[p++]!;
      if (c === 0x2c) {
        while (p < n && ((c = b[p]!) === 0x20 || c === 0x0a || c === 0x09 || c === 0x0d)) {
          p++;
          if (c === 0x0a) {
            line++;
            lineStart = base + p;
          }
        }
        if (p >= n) return undefined;
        continue;
      }
      if (c !== 0x7d) return undefined;
      if (!inArgs) return this.done(p, line, lineStart, ev);
      out = ev;
      table = this.top;
      inArgs = false;
      member = false;
    }
  }

  /** The end of the event at b[s] as the general scanner finds it (braces outside strings, strings
   * to their unescaped quote; nothing checked: a skipped event is never parsed), or -1 when the
   * chunk ends first. For events skipped by category. */
  skip(b: Buffer, s: number, n: number, base: number, line: number, lineStart: number): number {
    let depth = 1;
    for (let p = s + 1; p < n; p++) {
      const c = b[p]!;
      if (c === 0x22) {
        for (p++; p < n; p++) {
          const d = b[p]!;
          if (d === 0x22) break;
          if (d === 0x5c) p++;
        }
        if (p >= n) return -1;
      } else if (c === 0x7b) depth++;
      else if (c === 0x7d) {
        if (--depth === 0) {
          this.line = line;
          this.lineStart = lineStart;
          return p + 1;
        }
      } else if (c === 0x0a) {
        line++;
        lineStart = base + p + 1;
      }
    }
    return -1;
  }

  private done(p: number, line: number, lineStart: number, ev: Record<string, unknown>): RawEvent {
    this.p = p;
    this.line = line;
    this.lineStart = lineStart;
    return ev as RawEvent;
  }

  /** Checks and skips the object or array at b[p]; returns the index after it, or -1. Keeps the
   * line count in this.line / this.lineStart. */
  private nested(b: Buffer, p: number, n: number, depth: number): number {
    if (depth >= MAX_DEPTH) return -1;
    const close = b[p] === 0x7b ? 0x7d : 0x5d;
    const obj = close === 0x7d;
    p = this.ws(b, p + 1, n);
    if (p >= n) return -1;
    if (b[p] === close) return p + 1;
    for (;;) {
      if (obj) {
        if (b[p] !== 0x22) return -1;
        p = skipString(b, p, n);
        if (p < 0) return -1;
        p = this.ws(b, p, n);
        if (p >= n || b[p] !== 0x3a) return -1;
        p = this.ws(b, p + 1, n);
        if (p >= n) return -1;
      }
      const c = b[p]!;
      if (c === 0x22) p = skipString(b, p, n);
      else if (c === 0x7b || c === 0x5b) p = this.nested(b, p, n, depth + 1);
      else if (c === 0x2d || (c >= 0x30 && c <= 0x39)) p = skipNumber(b, p, n);
      else {
        const v = literal(b, p, n);
        if (v === FAIL) return -1;
        p += v === false ? 5 : 4;
      }
      if (p < 0) return -1;
      p = this.ws(b, p, n);
      if (p >= n) return -1;
      const d = b[p++]!;
      if (d === close) return p;
      if (d !== 0x2c) return -1;
      p = this.ws(b, p, n);
      if (p >= n) return -1;
    }
  }

  private ws(b: Buffer, p: number, n: number): number {
    let c = 0;
    while (p < n && ((c = b[p]!) === 0x20 || c === 0x0a || c === 0x09 || c === 0x0d)) {
      p++;
      if (c === 0x0a) {
        this.line++;
        this.lineStart = this.base + p;
      }
    }
    return p;
  }

  /** The string of ASCII bytes b[a, e), from the cache when it was seen before. */
  private text(b: Buffer, a: number, e: number): string {
    const len = e - a;
    if (len === 0) return "";
    if (len > MAX_CACHED) return b.toString("latin1", a, e);
    const slot =
      (len * 31 + b[a]! * 7 + b[e - 1]! * 131 + b[a + (len >> 1)]! * 1031 + b[a + (len >> 2)]!) & (CACHE_SLOTS - 1);
    const hit = this.cacheBytes[slot];
    if (hit !== undefined && hit.length === len) {
      let k = 0;
      while (k < len && hit[k] === b[a + k]) k++;
      if (k === len) return this.cacheStr[slot]!;
    }
    const str = b.toString("latin1", a, e);
    const copy = new Uint8Array(len);
    copy.set(b.subarray(a, e));
    this.cacheBytes[slot] = copy;
    this.cacheStr[slot] = str;
    return str;
  }
}

/** An object with each name as a property holding undefined, in order. */
function template(names: readonly string[]): Record<string, unknown> {
  const o: Record<string, unknown> = {};
  for (const n of names) o[n] = undefined;
  return o;
}

/** true, false or null at b[p] (FAIL if none): its length is 4, 5 (false) or 4. */
function literal(b: Buffer, p: number, n: number): unknown {
  const c = b[p];
  if (c === 0x74 && p + 4 <= n && b[p + 1] === 0x72 && b[p + 2] === 0x75 && b[p + 3] === 0x65) return true;
  if (c === 0x66 && p + 5 <= n && b[p + 1] === 0x61 && b[p + 2] === 0x6c && b[p + 3] === 0x73 && b[p + 4] === 0x65)
    return false;
  if (c === 0x6e && p + 4 <= n && b[p + 1] === 0x75 && b[p + 2] === 0x6c && b[p + 3] === 0x6c) return null;
  return FAIL;
}

/** From the opening quote at b[p] to after the closing one (printable ASCII, no escapes), or -1. */
function skipString(b: Buffer, p: number, n: number): number {
  p++;
  while (p < n && PLAIN[b[p]!] === 1) p++;
  return p < n && b[p] === 0x22 ? p + 1 : -1;
}

/** Past a JSON number at b[p] (grammar checked), or -1; its end must be seen before n. */
function skipNumber(b: Buffer, p: number, n: number): number {
  let c = b[p]!;
  if (c === 0x2d) {
    if (++p >= n) return -1;
    c = b[p]!;
  }
  if (c === 0x30) {
    if (++p >= n) return -1;
    c = b[p]!;
  } else if (c >= 0x31 && c <= 0x39) {
    do {
      if (++p >= n) return -1;
      c = b[p]!;
    } while (c >= 0x30 && c <= 0x39);
  } else return -1;
  if (c === 0x2e) {
    if (++p >= n) return -1;
    c = b[p]!;
    if (c < 0x30 || c > 0x39) return -1;
    do {
      if (++p >= n) return -1;
      c = b[p]!;
    } while (c >= 0x30 && c <= 0x39);
  }
  if (c === 0x65 || c === 0x45) {
    if (++p >= n) return -1;
    c = b[p]!;
    if (c === 0x2b || c === 0x2d) {
      if (++p >= n) return -1;
      c = b[p]!;
    }
    if (c < 0x30 || c > 0x39) return -1;
    do {
      if (++p >= n) return -1;
      c = b[p]!;
    } while (c >= 0x30 && c <= 0x39);
  }
  return p;
}
