// Prompt text of an exact token length (pure). A calibration (replay.ts) finds words that are one token
// each for the server's tokenizer, in the form they are sent (" word", after other words), and the
// tokens the request form adds (BOS, chat template). A prompt is then words only, so its token count is
// the sum of its words' and composing needs no tokenizer call. Block k of a request with `hash_ids` is
// the text of its id: byte-identical wherever the id recurs, so a server's prefix cache sees the trace's reuse.
import { mix32 } from "../../rng.ts";
import { Rng } from "../schedule.ts";
import { BLOCK_TOKENS, type TraceRow } from "./trace.ts";

export interface Calibration {
  /** Words sent with a leading space, each one token (exact) or `tokensPerWord` on average (estimate). */
  words: string[];
  /** Tokens a request adds around its text (BOS, chat template), from a probe of the same form. */
  offset: number;
  /** 1 when every word was checked to be one token; otherwise the fitted average. */
  tokensPerWord: number;
  /** How the numbers were obtained: "tokenize" (the server's /tokenize), "probe" (usage of probe requests), "assumed". */
  method: "tokenize" | "probe" | "assumed";
  /** The tokenizer endpoint used, when one was. */
  tokenizer: string | null;
  /** Plain words on what was checked (additivity over block joins, probe residuals). */
  notes: string[];
}

/** Fallback vocabulary: short frequent English words, one token each (with the leading space) in common BPEs. */
export const CANDIDATE_WORDS = (
  "the of and to in is was for on that with as by at from his it an were are which this be or has had " +
  "not but one their its new after who they have her she two been other when there all into may more " +
  "most only over some would where up such used many can about out then made part well under team three " +
  "while also film game him high both work year group life own band war long day home back best end west " +
  "east way found small every water side each line left name light road river book house place days could " +
  "just air sea sun red old big top car run set put end art law age war far low cut"
)
  .split(" ")
  .filter((w, i, a) => a.indexOf(w) === i);

/** Keys of blocks that have no `hash_ids` (unique text): above 2^32, so they never equal a trace id. */
const UNIQUE_BASE = 2 ** 32;
const MAX_BLOCKS_PER_ROW = 4096;
/** Full block texts kept for reuse (shared ids recur); past this, blocks are rebuilt as needed. */
const CACHE_MAX = 50_000;

export class PromptSynth {
  private readonly cache = new Map<number, { n: number; s: string }>();
  /** Words in a full block: BLOCK_TOKENS tokens' worth. */
  readonly wordsPerBlock: number;

  constructor(
    readonly cal: Calibration,
    readonly seed = 0,
  ) {
    if (cal.words.length === 0) throw new RangeError("a calibration needs at least one word");
    this.wordsPerBlock = Math.max(1, Math.round(BLOCK_TOKENS / cal.tokensPerWord));
  }

  /** Words for the content of `tokens` tokens (all of them; the last block absorbs rounding). */
  private wordsFor(tokens: number): number {
    return Math.max(0, Math.round(tokens / this.cal.tokensPerWord));
  }

  private blockWords(key: number, n: number): string {
    const rng = new Rng(mix32((key % UNIQUE_BASE) ^ mix32(Math.floor(key / UNIQUE_BASE) ^ mix32(this.seed))));
    const w = this.cal.words;
    // One flat string (a `+=` chain would leave a rope of n pieces for the GC to walk until it is flattened).
    const parts = new Array<string>(n + 1);
    parts[0] = "";
    for (let i = 1; i <= n; i++) parts[i] = w[rng.int(0, w.length - 1)]!;
    return parts.join(" ");
  }

  private block(key: number, n: number, full: boolean): string {
    if (!full) return this.blockWords(key, n);
    const hit = this.cache.get(key);
    if (hit && hit.n === n) return hit.s;
    const s = this.blockWords(key, n);
    if (this.cache.size < CACHE_MAX) this.cache.set(key, { n, s });
    return s;
  }

  /**
   * Prompt text for a row, `inputLen` tokens as the server counts them (offset included). Blocks follow
   * the server's token positions: block 0 gives up the tokens the request form puts before the text, so
   * block k still starts at token 512·k and a server's prefix blocks line up with the trace's.
   */
  compose(row: Pick<TraceRow, "inputLen" | "hashIds">, index: number): string {
    const content = Math.max(1, row.inputLen - this.cal.offset);
    const ids = row.hashIds ?? [];
    const nBlocks = Math.min(MAX_BLOCKS_PER_ROW, Math.max(1, Math.ceil((content + this.cal.offset) / BLOCK_TOKENS)));
    let out = "";
    let left = content;
    for (let k = 0; k < nBlocks && left > 0; k++) {
      const cap = k === 0 ? BLOCK_TOKENS - this.cal.offset : BLOCK_TOKENS;
      const tokens = k === nBlocks - 1 ? left : Math.min(left, Math.max(0, cap));
      if (tokens <= 0) continue;
      const shared = k < ids.length;
      const key = shared ? ids[k]! : UNIQUE_BASE + index * MAX_BLOCKS_PER_ROW + k;
      // A full block of a shared id is cached and identical everywhere; a partial one is its prefix.
      const n = tokens === BLOCK_TOKENS ? this.wordsPerBlock : this.wordsFor(tokens);
      out += this.block(key, n, shared && tokens === cap);
      left -= tokens;
    }
    return out;
  }

  /** Forgets the cached blocks (tens of MB for a long trace) once every prompt is built. */
  release(): void {
    this.cache.clear();
  }

  /** Plain text of about `tokens` tokens with no leading offset (chat turns in a session). */
  text(tokens: number, key: number): string {
    return this.blockWords(UNIQUE_BASE * 2 + key, this.wordsFor(tokens));
  }
}

/** The assumption when nothing can be measured: each candidate word is one token, nothing is added. */
export function assumedCalibration(why: string): Calibration {
  return {
    words: CANDIDATE_WORDS,
    offset: 0,
    tokensPerWord: 1,
    method: "assumed",
    tokenizer: null,
    notes: [`lengths are estimates: ${why}; one common English word is taken as one token`],
  };
}
