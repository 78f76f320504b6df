// Incremental Server-Sent Events parser over raw bytes, and the interpreter for OpenAI stream chunks.
// Pure: no I/O, no clock. It cuts messages at line boundaries on bytes, so a UTF-8 sequence is never
// split (0x0A never occurs inside one) and only complete lines are decoded.

import type { ServerTimings } from "./types.ts";

const LF = 0x0a;
const CR = 0x0d;
const COLON = 0x3a;
const SPACE = 0x20;

export interface SseMessage {
  /** Joined `data:` lines (without the field name). */
  data: string;
  /** `event:` field, "" when absent. */
  event: string;
  /** Bytes of the message on the wire, including its terminating blank line. */
  bytes: number;
}

/** Raw-mode callback: the data payload is b[start, end) (no string built). */
export type RawMessageFn = (b: Buffer, start: number, end: number, bytes: number, event: string) => void;

/** Raw mode's receiver as an object (feedRangeTo): its method is called, no closure fetched per message. */
export interface RawSink {
  rawMessage(b: Buffer, start: number, end: number, bytes: number, event: string): void;
}

/**
 * Feed it bytes as they arrive; `onMessage` is called once per complete message. Handles LF and CRLF
 * line endings, comment lines (`:`), multi-line data, fields without a space after the colon, and
 * messages split across reads at any byte. `feedRaw` hands out byte ranges instead of strings.
 */
export class SseParser {
  private rest: Buffer | null = null;
  // A single data line is kept as a byte range; a second one switches to a joined string.
  private dataBuf: Buffer | null = null;
  private dataStart = 0;
  private dataEnd = 0;
  private dataStr: string | null = null;
  private dataLines = 0;
  private event = "";
  private msgBytes = 0;
  private sink: RawSink | null = null;
  private onMsg: ((m: SseMessage) => void) | null = null;

  feed(chunk: Buffer, onMessage: (m: SseMessage) => void): void {
    this.onMsg = onMessage;
    this.sink = null;
    this.scan(chunk, 0, chunk.length, true);
  }

  feedRaw(chunk: Buffer, sink: RawSink): void {
    this.sink = sink;
    this.onMsg = null;
    this.scan(chunk, 0, chunk.length, true);
  }

  /**
   * feedRangeTo with a function as the receiver (an object per call: for callers off the read path).
   */
  feedRange(b: Buffer, start: number, end: number, onRaw: RawMessageFn): void {
    this.feedRangeTo(b, start, end, { rawMessage: onRaw });
  }

  /**
   * Raw mode over b[start, end) of a buffer the caller reuses after this call returns: whatever the
   * parser keeps (a partial line, a data line awaiting its blank line) is copied out first. The receiver
   * is an object whose rawMessage is called: with 1,000 streams read in turn, a closure per stream (and
   * its context) were two more cache lines to fetch per message.
   */
  feedRangeTo(b: Buffer, start: number, end: number, sink: RawSink): void {
    this.sink = sink;
    this.onMsg = null;
    this.scan(b, start, end, false);
  }

  private scan(chunk: Buffer, start: number, end: number, owned: boolean): void {
    let buf = chunk;
    let pos = start;
    let len = end;
    if (this.rest) {
      buf = Buffer.concat([this.rest, chunk.subarray(start, end)]);
      this.rest = null;
      pos = 0;
      len = buf.length;
      owned = true;
    }
    // indexOf searches to the end of the buffer, not of the range: a sentinel LF just past the range
    // keeps a search for the rest of a partial line from running through a large shared buffer.
    const sentinel = len < buf.length ? buf[len]! : -1;
    if (sentinel >= 0) buf[len] = LF;
    while (pos < len) {
      // A blank line (LF) ends most messages: no native search for it.
      const nl = buf[pos] === LF ? pos : buf.indexOf(LF, pos);
      if (nl < 0 || nl >= len) break;
      let lineEnd = nl;
      if (lineEnd > pos && buf[lineEnd - 1] === CR) lineEnd--;
      this.msgBytes += nl + 1 - pos;
      if (lineEnd === pos) this.dispatch();
      else if (buf[pos] !== COLON) this.field(buf, pos, lineEnd);
      pos = nl + 1;
    }
    if (sentinel >= 0) buf[len] = sentinel;
    if (pos < len) this.rest = owned ? buf.subarray(pos, len) : Buffer.from(buf.subarray(pos, len));
    if (!owned && this.dataLines > 0 && this.dataStr === null && this.dataBuf === buf) {
      this.dataBuf = Buffer.from(buf.subarray(this.dataStart, this.dataEnd));
      this.dataStart = 0;
      this.dataEnd = this.dataBuf.length;
    }
  }

  private dispatch(): void {
    if (this.dataLines > 0) {
      if (this.sink !== null) {
        let b = this.dataBuf!;
        let s = this.dataStart;
        let e = this.dataEnd;
        if (this.dataStr !== null) {
          b = Buffer.from(this.dataStr);
          s = 0;
          e = b.length;
        }
        this.sink.rawMessage(b, s, e, this.msgBytes, this.event);
      } else if (this.onMsg) this.onMsg({ data: this.currentData(), event: this.event, bytes: this.msgBytes });
    }
    this.reset();
  }

  private currentData(): string {
    return this.dataStr ?? this.dataBuf!.toString("utf8", this.dataStart, this.dataEnd);
  }

  /** Forgets everything: the parser serves the next stream. */
  clear(): void {
    this.rest = null;
    this.reset();
  }

  private reset(): void {
    this.dataBuf = null;
    this.dataStr = null;
    this.dataLines = 0;
    this.event = "";
    this.msgBytes = 0;
  }

  /** Bytes held back waiting for the end of a line. */
  get pendingBytes(): number {
    return (this.rest?.length ?? 0) + this.msgBytes;
  }

  /**
   * End of stream: a message not terminated by a blank line is returned (vLLM bench accepts a trailing
   * data buffer), else null.
   */
  finish(): SseMessage | null {
    if (this.rest && this.rest.length > 0) {
      const r = this.rest;
      let end = r.length;
      if (r[end - 1] === CR) end--;
      this.msgBytes += r.length;
      if (end > 0 && r[0] !== COLON) this.field(r, 0, end);
      this.rest = null;
    }
    const m = this.dataLines > 0 ? { data: this.currentData(), event: this.event, bytes: this.msgBytes } : null;
    this.reset();
    return m;
  }

  private addData(buf: Buffer, v: number, end: number): void {
    if (this.dataLines === 0) {
      this.dataBuf = buf;
      this.dataStart = v;
      this.dataEnd = end;
    } else this.dataStr = `${this.currentData()}\n${buf.toString("utf8", v, end)}`;
    this.dataLines++;
  }

  private field(buf: Buffer, start: number, end: number): void {
    // Fast path for the only field that matters at volume: "data:".
    if (
      end - start >= 5 &&
      buf[start] === 0x64 &&
      buf[start + 1] === 0x61 &&
      buf[start + 2] === 0x74 &&
      buf[start + 3] === 0x61 &&
      buf[start + 4] === COLON
    ) {
      let v = start + 5;
      if (v < end && buf[v] === SPACE) v++;
      this.addData(buf, v, end);
      return;
    }
    const colon = buf.indexOf(COLON, start);
    const nameEnd = colon < 0 || colon > end ? end : colon;
    const name = buf.toString("utf8", start, nameEnd);
    let v = nameEnd + 1;
    if (v < end && buf[v] === SPACE) v++;
    if (v > end) v = end;
    if (name === "data") this.addData(buf, v, end);
    else if (name === "event") this.event = buf.toString("utf8", v, end);
    // id / retry / unknown fields are irrelevant to a benchmark client.
  }
}

/** What one OpenAI-compatible stream chunk says, reduced to the facts a benchmark needs. */
export interface ChunkFacts {
  kind: "chunk" | "done" | "error" | "malformed";
  /** `choices` present and non-empty (vLLM's rule for a timed chunk). */
  hasChoices: boolean;
  content: number;
  reasoning: number;
  tool: number;
  /** Cumulative completion tokens if the chunk carries usage, else -1. */
  completionTokens: number;
  promptTokens: number;
  finishReason: string | null;
  /** Text, only when asked for. */
  text?: string;
  errorMessage?: string;
  /** llama.cpp's per-request `timings` object, when the chunk carries one. */
  timings?: ServerTimings;
}

function emptyFacts(kind: ChunkFacts["kind"]): ChunkFacts {
  return {
    kind,
    hasChoices: false,
    content: 0,
    reasoning: 0,
    tool: 0,
    completionTokens: -1,
    promptTokens: -1,
    finishReason: null,
  };
}

/** Interprets one SSE data payload from /v1/completions or /v1/chat/completions. */
export function interpretChunk(data: string, keepText = false): ChunkFacts {
  if (data === "[DONE]") return emptyFacts("done");
  let obj: any;
  try {
    obj = JSON.parse(data);
  } catch {
    const f = emptyFacts("malformed");
    f.errorMessage = `not JSON: ${data.length > 80 ? `${data.slice(0, 80)}…` : data}`;
    return f;
  }
  if (obj === null || typeof obj !== "object") {
    const f = emptyFacts("malformed");
    f.errorMessage = `not a JSON object: ${data.slice(0, 80)}`;
    return f;
  }
  const f = emptyFacts("chunk");
  if (obj.error !== undefined && obj.error !== null) {
    f.kind = "error";
    const e = obj.error;
    f.errorMessage = typeof e === "string" ? e : typeof e?.message === "string" ? e.message : JSON.stringify(e);
    return f;
  }
  if (obj.object === "error" && typeof obj.message === "string") {
    f.kind = "error";
    f.errorMessage = obj.message;
    return f;
  }
  const choices = obj.choices;
  if (Array.isArray(choices) && choices.length > 0) {
    f.hasChoices = true;
    const c = choices[0];
    if (c) {
      if (typeof c.text === "string") {
        f.content = c.text.length;
        if (keepText) f.text = c.text;
      }
      const d = c.delta;
      if (d) {
        if (typeof d.content === "string") {
          f.content += d.content.length;
          if (keepText) f.text = (f.text ?? "") + d.content;
        }
        const r = typeof d.reasoning_content === "string" ? d.reasoning_content : d.reasoning;
        if (typeof r === "string") f.reasoning = r.length;
        const tc = d.tool_calls;
        if (Array.isArray(tc))
          for (const t of tc) {
            const a = t?.function?.arguments;
            if (typeof a === "string") f.tool += a.length;
            const n = t?.function?.name;
            if (typeof n === "string") f.tool += n.length;
          }
      }
      if (typeof c.finish_reason === "string") f.finishReason = c.finish_reason;
    }
  }
  const t = obj.timings;
  if (t && typeof t === "object") f.timings = llamacppTimings(t);
  const u = obj.usage;
  if (u && typeof u === "object") {
    if (typeof u.completion_tokens === "number") f.completionTokens = u.completion_tokens;
    if (typeof u.prompt_tokens === "number") f.promptTokens = u.prompt_tokens;
    // vLLM (--enable-prompt-tokens-details): prompt tokens served from its prefix cache.
    const cached = u.prompt_tokens_details?.cached_tokens;
    if (typeof cached === "number" && Number.isFinite(cached)) {
      f.timings ??= { source: "vllm-usage" };
      f.timings.cachedTokens ??= cached;
    }
  }
  return f;
}

const numOrUndef = (v: unknown): number | undefined => (typeof v === "number" && Number.isFinite(v) ? v : undefined);

/** llama.cpp's `timings` object (older builds wrote null for divisions by zero). */
export function llamacppTimings(t: Record<string, unknown>): ServerTimings {
  const out: ServerTimings = { source: "llamacpp-timings" };
  const set = (k: keyof ServerTimings, v: unknown) => {
    const n = numOrUndef(v);
    if (n !== undefined) (out as unknown as Record<string, number>)[k] = n;
  };
  set("promptTokens", t.prompt_n);
  set("promptMs", t.prompt_ms);
  set("cachedTokens", t.cache_n);
  set("decodeTokens", t.predicted_n);
  set("decodeMs", t.predicted_ms);
  set("decodePerTokenMs", t.predicted_per_token_ms);
  return out;
}

/** TGI's timing headers (`x-queue-time`, `x-inference-time`, `x-time-per-token`, … in ms), or null. */
export function tgiTimings(h: Record<string, string | string[] | undefined>): ServerTimings | null {
  const v = (k: string) => {
    const x = h[k];
    const n = Number(Array.isArray(x) ? x[0] : x);
    return x !== undefined && Number.isFinite(n) ? n : undefined;
  };
  const perToken = v("x-time-per-token");
  const inference = v("x-inference-time");
  if (perToken === undefined && inference === undefined) return null;
  const out: ServerTimings = { source: "tgi-headers" };
  if (perToken !== undefined) out.decodePerTokenMs = perToken;
  if (inference !== undefined) out.inferenceMs = inference;
  const q = v("x-queue-time");
  if (q !== undefined) out.queueMs = q;
  const tot = v("x-total-time");
  if (tot !== undefined) out.totalMs = tot;
  const p = v("x-prompt-tokens");
  if (p !== undefined) out.promptTokens = p;
  const g = v("x-generated-tokens");
  if (g !== undefined) out.decodeTokens = g;
  return out;
}
