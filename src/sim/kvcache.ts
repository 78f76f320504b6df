// The KV-cache block pool with vLLM V1's automatic prefix caching: every full block of a request
// gets a hash chained from its parent's hash and its token ids; a new request reuses the longest
// run of leading blocks already named in the pool; freed blocks keep their name at the back of an
// LRU free queue (tail blocks first) and are evicted lazily, when allocation pops them.

/** 2^32, for splitting a 53-bit hash into its two lanes. */
const TWO32 = 4294967296;
/** The chain's root ("NONE_HASH" in vLLM): a fixed constant, so hashes are the same in every process. */
const ROOT_HI = 0x1f3a9;
const ROOT_LO = 0x6b2c4d17;

/**
 * The hash of one full block: parent hash + the block's token ids, two 32-bit lanes kept as one
 * 53-bit number (21 + 32 bits), so a million blocks collide with probability ~1e-4, where one
 * 32-bit lane would collide almost surely.
 */
export function chainHash(parent: number, ids: ArrayLike<number>, from: number, to: number): number {
  let a = Math.floor(parent / TWO32) ^ 0x9e3779b9;
  let b = (parent >>> 0) ^ 0x85ebca6b;
  for (let i = from; i < to; i++) {
    const t = ids[i]! | 0;
    a = Math.imul(a ^ t, 0x01000193);
    b = Math.imul(b ^ t, 0x5bd1e995);
    b ^= b >>> 15;
  }
  a = Math.imul(a ^ (a >>> 16), 0x85ebca6b);
  a = Math.imul(a ^ (a >>> 13), 0xc2b2ae35);
  a ^= a >>> 16;
  b = Math.imul(b ^ (b >>> 16), 0x7feb352d);
  b = Math.imul(b ^ (b >>> 15), 0x846ca68b);
  b ^= b >>> 16;
  return (a >>> 11) * TWO32 + (b >>> 0);
}

/** The root every request's first block chains from. */
export const ROOT_HASH = ROOT_HI * TWO32 + ROOT_LO;

/** What a request holds in the pool. */
export interface KvHolder {
  /** Block ids, in token order. */
  blockIds: number[];
  /** Hashes of the request's full blocks named so far (token order). */
  hashes: number[];
}

/** Cumulative prefix-cache counts (tokens), split as vLLM's PrefixCacheStats splits them. */
export interface PrefixCacheTruth {
  enabled: boolean;
  blockSize: number;
  numBlocks: number;
  /** New requests looked up, their prompt tokens, and the tokens found (what /metrics exports). */
  requests: number;
  queries: number;
  hits: number;
  /** Re-lookups of preempted requests (vLLM counts them apart and does not export them). */
  preemptedRequests: number;
  preemptedQueries: number;
  preemptedHits: number;
  /** Named blocks whose name was dropped because allocation reused them. */
  evictions: number;
  /** Blocks currently holding a name (reachable by a lookup). */
  cachedBlocks: number;
  /** Blocks held by running requests, and blocks free (named or not). */
  usedBlocks: number;
  freeBlocks: number;
}

/**
 * The most KV blocks the sim keeps (~20 bytes of typed arrays each: 84 MB at the bound), past any real pool
 * (8 × 141 GB of HBM in 16-token blocks of even a 1-B model's KV is ~2 M). `--num-gpu-blocks-override 1e12`
 * was an "internal error" (Invalid typed array length).
 */
export const MAX_GPU_BLOCKS = 1 << 22;
/** The longest KV block the sim takes, in tokens (vLLM's are 1 to 128; a block's scratch is this long). */
export const MAX_BLOCK_SIZE = 1 << 16;

export class KvBlockPool {
  readonly numBlocks: number;
  readonly blockSize: number;
  readonly caching: boolean;
  private readonly ref: Int32Array;
  /** The block's name, or -1. */
  private readonly name: Float64Array;
  // The free queue: a doubly linked list over block ids (-1 ends), LRU at the head.
  private readonly prev: Int32Array;
  private readonly next: Int32Array;
  private head = -1;
  private tail = -1;
  private free = 0;
  private readonly byName = new Map<number, number>();
  private readonly scratch: Uint32Array;
  readonly stats = {
    requests: 0,
    queries: 0,
    hits: 0,
    preemptedRequests: 0,
    preemptedQueries: 0,
    preemptedHits: 0,
    evictions: 0,
  };

  constructor(numBlocks: number, blockSize: number, caching: boolean) {
    this.numBlocks = numBlocks;
    this.blockSize = blockSize;
    this.caching = caching;
    this.ref = new Int32Array(numBlocks);
    this.name = new Float64Array(numBlocks).fill(-1);
    this.prev = new Int32Array(numBlocks);
    this.next = new Int32Array(numBlocks);
    this.scratch = new Uint32Array(blockSize);
    for (let b = 0; b < numBlocks; b++) this.pushFree(b);
  }

  get numFree(): number {
    return this.free;
  }

  get usedBlocks(): number {
    return this.numBlocks - this.free;
  }

  private pushFree(b: number): void {
    this.prev[b] = this.tail;
    this.next[b] = -1;
    if (this.tail >= 0) this.next[this.tail] = b;
    else this.head = b;
    this.tail = b;
    this.free++;
  }

  private unlinkFree(b: number): void {
    const p = this.prev[b]!;
    const n = this.next[b]!;
    if (p >= 0) this.next[p] = n;
    else this.head = n;
    if (n >= 0) this.prev[n] = p;
    else this.tail = p;
    this.free--;
  }

  /**
   * Leading blocks of `hashes` named in the pool, at most `maxBlocks`: their ids (not yet held).
   * Free ones among them still count as free until `hold` takes them.
   */
  lookup(hashes: readonly number[], maxBlocks: number): number[] {
    const out: number[] = [];
    if (!this.caching) return out;
    const n = Math.min(hashes.length, maxBlocks);
    for (let i = 0; i < n; i++) {
      const b = this.byName.get(hashes[i]!);
      if (b === undefined) break;
      out.push(b);
    }
    return out;
  }

  /** Free blocks a hold of `hit` would take off the free queue (cached blocks nobody holds). */
  evictableAmong(hit: readonly number[]): number {
    let n = 0;
    for (const b of hit) if (this.ref[b] === 0) n++;
    return n;
  }

  /** Appends the hit blocks to the holder (shared: reference counted). */
  hold(h: KvHolder, hit: readonly number[]): void {
    for (const b of hit) {
      if (this.ref[b] === 0) this.unlinkFree(b);
      this.ref[b]!++;
      h.blockIds.push(b);
    }
  }

  /** Appends `n` fresh blocks (the caller checked numFree); a popped named block loses its name. */
  allocate(h: KvHolder, n: number): void {
    for (let i = 0; i < n; i++) {
      const b = this.head;
      this.unlinkFree(b);
      const nm = this.name[b]!;
      if (nm >= 0) {
        if (this.byName.get(nm) === b) this.byName.delete(nm);
        this.name[b] = -1;
        this.stats.evictions++;
      }
      this.ref[b] = 1;
      h.blockIds.push(b);
    }
  }

  /** Releases every block of the holder, tail first, so a prompt's private end is evicted before its shared head. */
  release(h: KvHolder): void {
    const ids = h.blockIds;
    for (let i = ids.length - 1; i >= 0; i--) {
      const b = ids[i]!;
      if (--this.ref[b]! === 0) this.pushFree(b);
    }
    ids.length = 0;
    h.hashes.length = 0;
  }

  /**
   * Names the holder's full blocks up to `tokens` known tokens (hashes from `known` where it has them,
   * else from `tokenAt(i)`, token i), as vLLM
   * does when it allocates them: a later request can hit them from the next step on. A name another
   * block already holds (the same prefix computed twice at once) stays with that block.
   */
  nameFullBlocks(h: KvHolder, tokens: number, known: readonly number[], tokenAt: (i: number) => number): void {
    if (!this.caching) return;
    const bs = this.blockSize;
    const full = Math.min(Math.floor(tokens / bs), h.blockIds.length);
    const buf = this.scratch;
    for (let k = h.hashes.length; k < full; k++) {
      let hash: number;
      if (k < known.length) hash = known[k]!;
      else {
        for (let i = 0; i < bs; i++) buf[i] = tokenAt(k * bs + i);
        hash = chainHash(k === 0 ? ROOT_HASH : h.hashes[k - 1]!, buf, 0, bs);
      }
      h.hashes.push(hash);
      const b = h.blockIds[k]!;
      if (this.name[b]! >= 0) continue; // a hit block: already named (this name)
      if (!this.byName.has(hash)) {
        this.byName.set(hash, b);
        this.name[b] = hash;
      }
    }
  }

  truth(): PrefixCacheTruth {
    return {
      enabled: this.caching,
      blockSize: this.blockSize,
      numBlocks: this.numBlocks,
      ...this.stats,
      cachedBlocks: this.byName.size,
      usedBlocks: this.usedBlocks,
      freeBlocks: this.free,
    };
  }
}

/** Hashes of the leading full blocks of `ids` (the same chain nameFullBlocks builds). */
export function blockHashes(ids: ArrayLike<number>, length: number, blockSize: number): number[] {
  const out: number[] = [];
  let parent = ROOT_HASH;
  for (let k = 0; (k + 1) * blockSize <= length; k++) {
    parent = chainHash(parent, ids, k * blockSize, (k + 1) * blockSize);
    out.push(parent);
  }
  return out;
}
