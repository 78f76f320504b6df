// Hot-path reader for OpenAI stream chunks straight from the bytes: one pass that checks the JSON
// structure (balanced brackets, closed strings, no raw control characters in the strings it reads) and picks out the few
// fields a benchmark needs, without decoding the text or building objects. Anything unusual (errors,
// tool calls, logprobs, anything it cannot vouch for) returns false and the caller uses JSON.parse.

const QUOTE = 0x22;
const BSLASH = 0x5c;
const COLON = 0x3a;
const LBRACE = 0x7b;
const RBRACE = 0x7d;
const LBRACK = 0x5b;
const RBRACK = 0x5d;

/** Reused output (the hot path allocates nothing per chunk). */
export interface FastFacts {
  hasChoices: boolean;
  content: number;
  reasoning: number;
  tool: number;
  completionTokens: number;
  promptTokens: number;
  finishReason: string | null;
}

export function newFastFacts(): FastFacts {
  return {
    hasChoices: false,
    content: 0,
    reasoning: 0,
    tool: 0,
    completionTokens: -1,
    promptTokens: -1,
    finishReason: null,
  };
}

// Key ids.
const K_NONE = 0;
const K_CHOICES = 1;
const K_TEXT = 2;
const K_CONTENT = 3;
const K_REASONING = 4;
const K_FINISH = 5;
const K_COMPLETION = 6;
const K_PROMPT = 7;
const K_BAIL = 8; // error, tool_calls, logprobs (non-null handled below), function_call

function eq(b: Buffer, s: number, lit: string): boolean {
  for (let i = 1; i < lit.length; i++) if (b[s + i] !== lit.charCodeAt(i)) return false;
  return true;
}

/** Identifies the keys that matter by length and bytes (no string is built). */
function keyId(b: Buffer, s: number, e: number): number {
  const c = b[s];
  switch (e - s) {
    case 4:
      return c === 0x74 && eq(b, s, "text") ? K_TEXT : K_NONE;
    case 5:
      return c === 0x65 && eq(b, s, "error") ? K_BAIL : K_NONE;
    case 7:
      // llama.cpp's `timings` (last chunk): the slow path reads it.
      if (c === 0x74) return eq(b, s, "timings") ? K_BAIL : K_NONE;
      if (c !== 0x63) return K_NONE;
      return eq(b, s, "choices") ? K_CHOICES : eq(b, s, "content") ? K_CONTENT : K_NONE;
    case 8:
      return c === 0x6c && eq(b, s, "logprobs") ? -1 : K_NONE; // -1: bail unless null
    case 9:
      return c === 0x72 && eq(b, s, "reasoning") ? K_REASONING : K_NONE;
    case 10:
      return c === 0x74 && eq(b, s, "tool_calls") ? K_BAIL : K_NONE;
    case 13:
      if (c === 0x66) return eq(b, s, "finish_reason") ? K_FINISH : eq(b, s, "function_call") ? K_BAIL : K_NONE;
      return c === 0x70 && eq(b, s, "prompt_tokens") ? K_PROMPT : K_NONE;
    case 17:
      if (c === 0x63) return eq(b, s, "completion_tokens") ? K_COMPLETION : K_NONE;
      return c === 0x72 && eq(b, s, "reasoning_content") ? K_REASONING : K_NONE;
    case 21:
      // vLLM's usage.prompt_tokens_details (cached_tokens; the last chunk only): the slow path reads it.
      return c === 0x70 && eq(b, s, "prompt_tokens_details") ? K_BAIL : K_NONE;
    default:
      return K_NONE;
  }
}

/** UTF-16 units of the string scanned last by scanString. */
let scannedUnits = 0;

/**
 * Scans a JSON string's body from `j` (just past its opening quote): returns its closing quote's index,
 * or -1 for what the fast path does not vouch for (a raw control character, no end before `end`), and
 * leaves its UTF-16 length (escapes and multi-byte UTF-8 included) in scannedUnits.
 */
function scanString(b: Buffer, j: number, end: number): number {
  let units = 0;
  for (;;) {
    if (j >= end) return -1;
    const d = b[j]!;
    if (d === QUOTE) break;
    if (d < 0x20) return -1;
    if (d === BSLASH) {
      j += b[j + 1] === 0x75 ? 6 : 2; // \uXXXX is one unit, like any other escape
      units++;
      continue;
    }
    if (d < 0x80) units++;
    else if (d >= 0xf0) units += 2;
    else if (d >= 0xc0) units++;
    j++;
  }
  scannedUnits = units;
  return j;
}

// The first counted string's value seen by scanFrom, and the parser's depth and facts just before it.
let counted = 0;
let capVs = 0;
let capVe = 0;
let capReasoning = false;
let capDepth = 0;
let capHasChoices = false;
let capCompletion = -1;
let capPrompt = -1;
let capFinish: string | null = null;
// The runs of digits scanFrom read between values (numbers, outside strings by its own reading) since
// the last full read began: start, end, and the count it set from them (K_COMPLETION, K_PROMPT) or
// K_NONE. More than MAX_NUMS: none kept (nums is MAX_NUMS + 1). ChunkShape.keep takes the suffix's.
const MAX_NUMS = 16;
const numAt = new Int32Array(MAX_NUMS);
const numEnd = new Int32Array(MAX_NUMS);
const numKey = new Int32Array(MAX_NUMS);
let nums = 0;

/**
 * Reads the chunk's structure from `i` (between values, `depth` brackets deep) to `end`, adding facts
 * to `f`: the depth at the end, or -1 for anything the fast path does not vouch for.
 */
function scanFrom(b: Buffer, i: number, end: number, depth: number, f: FastFacts): number {
  let pendingKey = K_NONE; // key whose value comes next
  let valueNext = false; // just past a key's colon
  while (i < end) {
    const c = b[i]!;
    if (c === QUOTE) {
      const s = i + 1;
      // A value nobody counts (ids, model names): find its end natively. An escape right before the
      // quote found may mean an escaped quote, so that case takes the byte loop below.
      if (valueNext && pendingKey === K_NONE) {
        const q = b.indexOf(QUOTE, s);
        if (q < 0 || q >= end) return -1;
        if (b[q - 1] !== BSLASH) {
          i = q + 1;
          continue;
        }
      }
      valueNext = false;
      // A key or a counted string: count its UTF-16 length while scanning.
      const j = scanString(b, s, end);
      if (j < 0) return -1;
      const units = scannedUnits;
      // j is the closing quote.
      let k = j + 1;
      while (k < end && b[k]! <= 0x20) k++;
      if (b[k] === COLON) {
        const id = keyId(b, s, j);
        if (id === K_BAIL) return -1;
        if (id === -1) {
          // logprobs: fine only when null.
          let v = k + 1;
          while (v < end && b[v]! <= 0x20) v++;
          if (b[v] !== 0x6e) return -1;
          pendingKey = K_NONE;
        } else pendingKey = id;
        valueNext = true;
        i = k + 1;
        continue;
      }
      // A value string.
      if (pendingKey === K_TEXT || pendingKey === K_CONTENT || pendingKey === K_REASONING) {
        if (++counted === 1) {
          capVs = s;
          capVe = j;
          capReasoning = pendingKey === K_REASONING;
          capDepth = depth;
          capHasChoices = f.hasChoices;
          capCompletion = f.completionTokens;
          capPrompt = f.promptTokens;
          capFinish = f.finishReason;
        }
        if (pendingKey === K_REASONING) f.reasoning += units;
        else f.content += units;
      } else if (pendingKey === K_FINISH) f.finishReason = b.toString("utf8", s, j);
      pendingKey = K_NONE;
      i = j + 1;
      continue;
    }
    if (c === LBRACE || c === LBRACK) {
      valueNext = false;
      if (pendingKey === K_CHOICES) {
        let v = i + 1;
        while (v < end && b[v]! <= 0x20) v++;
        f.hasChoices = b[v] !== RBRACK;
      }
      pendingKey = K_NONE;
      depth++;
    } else if (c === RBRACE || c === RBRACK) {
      depth--;
      if (depth < 0) return -1;
    } else if (c >= 0x30 && c <= 0x39) {
      // A run of digits: a count's value, or bytes that change nothing (pendingKey stays).
      const s = i;
      let n = 0;
      while (i < end && b[i]! >= 0x30 && b[i]! <= 0x39) n = n * 10 + (b[i++]! - 0x30);
      const key = pendingKey === K_COMPLETION || pendingKey === K_PROMPT ? pendingKey : K_NONE;
      if (nums < MAX_NUMS) {
        numAt[nums] = s;
        numEnd[nums] = i;
        numKey[nums++] = key;
      } else nums = MAX_NUMS + 1;
      if (key === K_COMPLETION) f.completionTokens = n;
      else if (key === K_PROMPT) f.promptTokens = n;
      if (key !== K_NONE) pendingKey = K_NONE;
      continue;
    } else if (c === 0x2c) {
      pendingKey = K_NONE;
      valueNext = false;
    }
    i++;
  }
  return depth;
}

const SHAPE_CAP = 1024;

// Byte compares in JS, four bytes a step through DataViews (any alignment): Buffer.compare is a native
// call with its argument checks, twice per chunk, and was the largest part of the read path's own CPU.
let viewOf: Buffer | null = null;
let view: DataView<ArrayBufferLike> = new DataView(new ArrayBuffer(0));
/** A DataView of b: the last one made is reused (the h1 reader's shared buffer: none made per read). */
function viewFor(b: Buffer): DataView {
  if (b !== viewOf) {
    viewOf = b;
    view = new DataView(b.buffer, b.byteOffset, b.byteLength);
  }
  return view;
}

/** Whether a[as, as + n) and b[bs, bs + n) hold the same bytes. */
function sameBytes(a: DataView, as: number, b: DataView, bs: number, n: number): boolean {
  let i = 0;
  for (; i + 4 <= n; i += 4) if (a.getUint32(as + i) !== b.getUint32(bs + i)) return false;
  for (; i < n; i++) if (a.getUint8(as + i) !== b.getUint8(bs + i)) return false;
  return true;
}

/**
 * One stream's last chunk shape. A stream's chunks differ, as a rule, only in the text of their one
 * counted string (a token's text) and, with continuous usage stats, in the counts after it. The shape
 * keeps the bytes before that string's value, the parser's depth and facts there, and the bytes from
 * its closing quote on with the facts of the whole chunk and where its numbers' digits are. A chunk
 * with the same bytes before its string is in the same parser state at it (one compare): its string
 * is scanned, then either its remaining bytes equal the kept ones but for the digits of numbers (the
 * kept facts hold, with the counts read from their digits) or they alone are scanned from that state.
 * Either way the answer is the full read's: the reader's state never depends on a digit outside a
 * string, except where it reads a count, whose value it takes whole from the run of digits.
 */
export class ChunkShape {
  // What a shaped read touches comes first: V8 lays fields out in the order they are defined, and with
  // 1,000 streams read in turn each shape is out of cache by its next read (a line fetched per field line).
  private prefixLen = -1;
  private suffixLen = 0;
  /** Where the string's units go: content (text, content) or reasoning. */
  private reasoning = false;
  private nRuns = 0;
  // The facts of the whole chunk (w*; the string's units aside) and before the string (b*), as fields
  // of this object rather than objects of their own: one object less to fetch per read.
  private wHasChoices = false;
  private wCompletion = -1;
  private wPrompt = -1;
  private wFinish: string | null = null;
  /** Reads with the same bytes after the string (numbers' digits aside), with other bytes after it, and full reads. */
  hits = 0;
  /** Made with the shape (before a run's clock), not at the stream's first chunk. */
  private readonly buf = Buffer.allocUnsafe(SHAPE_CAP);
  private readonly view = new DataView(this.buf.buffer, this.buf.byteOffset, SHAPE_CAP);
  /**
   * The kept suffix's runs of digits between values, three entries each: start and end (offsets in the
   * suffix) and the count read from them (K_COMPLETION, K_PROMPT) or K_NONE. None: bytes compared as is.
   */
  private readonly runs = new Int32Array(3 * MAX_NUMS);
  private depth = 0;
  private bHasChoices = false;
  private bCompletion = -1;
  private bPrompt = -1;
  private bFinish: string | null = null;
  suffixScans = 0;
  misses = 0;

  /** Largest prefix + suffix kept (bytes). */
  static readonly CAP = SHAPE_CAP;

  /** Reads b[start, end) if its bytes before the string match; false: read it in full. */
  tryRead(b: Buffer, start: number, end: number, f: FastFacts): boolean {
    const p = this.prefixLen;
    if (p < 0 || end - start <= p) return false;
    const bv = viewFor(b);
    if (!sameBytes(bv, start, this.view, 0, p)) return false;
    const j = scanString(b, start + p, end);
    if (j < 0) return false;
    const units = scannedUnits;
    f.content = this.reasoning ? 0 : units;
    f.reasoning = this.reasoning ? units : 0;
    f.tool = 0;
    // The same bytes after the string, numbers' digits aside: the whole chunk's facts (sameSuffix sets
    // the counts); else the facts before the string, and the bytes after it scanned from the state there.
    if (this.sameSuffix(b, bv, j, end, f)) {
      f.hasChoices = this.wHasChoices;
      f.finishReason = this.wFinish;
      this.hits++;
      return true;
    }
    f.hasChoices = this.bHasChoices;
    f.completionTokens = this.bCompletion;
    f.promptTokens = this.bPrompt;
    f.finishReason = this.bFinish;
    counted = 1;
    if (scanFrom(b, j + 1, end, this.depth, f) !== 0) return false;
    this.suffixScans++;
    return true;
  }

  /**
   * Whether b[j, end) is the kept suffix but for the digits of its numbers (each still one or more
   * digits); if so, f's counts are the whole chunk's, a count's value read from its digits.
   */
  private sameSuffix(b: Buffer, bv: DataView, j: number, end: number, f: FastFacts): boolean {
    const kv = this.view;
    const p = this.prefixLen;
    const runs = this.runs;
    let completion = this.wCompletion;
    let prompt = this.wPrompt;
    let x = j;
    let y = 0;
    for (let k = 0; k < this.nRuns; k++) {
      const rs = runs[3 * k]!;
      const lit = rs - y;
      if (end - x < lit || !sameBytes(bv, x, kv, p + y, lit)) return false;
      x += lit;
      y = runs[3 * k + 1]!;
      const x0 = x;
      let n = 0;
      while (x < end && b[x]! >= 0x30 && b[x]! <= 0x39) n = n * 10 + (b[x++]! - 0x30);
      if (x === x0) return false;
      const key = runs[3 * k + 2]!;
      if (key === K_COMPLETION) completion = n;
      else if (key === K_PROMPT) prompt = n;
    }
    const lit = this.suffixLen - y;
    if (end - x !== lit || !sameBytes(bv, x, kv, p + y, lit)) return false;
    f.completionTokens = completion;
    f.promptTokens = prompt;
    return true;
  }

  /** Keeps the shape of a chunk just read in full whose one counted string was [capVs, capVe). */
  keep(b: Buffer, start: number, end: number, f: FastFacts): void {
    this.misses++;
    const p = capVs - start;
    const sl = end - capVe;
    if (p + sl > ChunkShape.CAP) {
      this.prefixLen = -1;
      return;
    }
    b.copy(this.buf, 0, start, capVs);
    b.copy(this.buf, p, capVe, end);
    this.prefixLen = p;
    this.suffixLen = sl;
    this.depth = capDepth;
    this.reasoning = capReasoning;
    this.bHasChoices = capHasChoices;
    this.bCompletion = capCompletion;
    this.bPrompt = capPrompt;
    this.bFinish = capFinish;
    this.wHasChoices = f.hasChoices;
    this.wCompletion = f.completionTokens;
    this.wPrompt = f.promptTokens;
    this.wFinish = f.finishReason;
    // The suffix's numbers, as scanFrom read them (it starts at the string's closing quote).
    let n = 0;
    if (nums <= MAX_NUMS)
      for (let k = 0; k < nums; k++) {
        if (numAt[k]! <= capVe) continue;
        this.runs[3 * n] = numAt[k]! - capVe;
        this.runs[3 * n + 1] = numEnd[k]! - capVe;
        this.runs[3 * n + 2] = numKey[k]!;
        n++;
      }
    this.nRuns = n;
  }

  /** Forgets the shape. */
  reset(): void {
    this.prefixLen = -1;
  }
}

/**
 * Reads the chunk in b[start, end) into `f`. Returns false when the fast path cannot vouch for the
 * result (the caller then parses with JSON.parse, which also names malformed input). With `shape`,
 * a chunk shaped like the stream's last one is read from its string on (ChunkShape).
 */
export function fastInterpret(b: Buffer, start: number, end: number, f: FastFacts, shape?: ChunkShape): boolean {
  while (start < end && b[start]! <= 0x20) start++;
  while (end > start && b[end - 1]! <= 0x20) end--;
  if (end - start < 2 || b[start] !== LBRACE || b[end - 1] !== RBRACE) return false;
  if (shape?.tryRead(b, start, end, f)) return true;
  f.hasChoices = false;
  f.content = 0;
  f.reasoning = 0;
  f.tool = 0;
  f.completionTokens = -1;
  f.promptTokens = -1;
  f.finishReason = null;
  counted = 0;
  nums = 0;
  if (scanFrom(b, start, end, 0, f) !== 0) return false;
  if (shape) {
    // With exactly one counted string, the chunk's shape is kept.
    if (counted === 1) shape.keep(b, start, end, f);
    else shape.reset();
  }
  return true;
}
