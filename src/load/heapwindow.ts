// What a measured window allocated on this thread's heap, and which collections ran inside it. Heap
// statistics are sampled at the window's edges and before and after each collection (v8.GCProfiler),
// so bytes allocated = growth between edges + what every collection inside freed. Only this isolate:
// a worker thread measures its own. Used by bench:client for the client's per-read garbage.
import { GCProfiler, getHeapStatistics } from "node:v8";

export interface HeapWindowResult {
  /** Bytes allocated on this thread's V8 heap between start() and end(). */
  allocatedBytes: number;
  /** Collections inside the window, by V8's type name (Scavenge, MarkSweepCompact, …). */
  gcs: Array<{ type: string; costMs: number }>;
  /** Full (mark-compact) collections: the ones that pause every stream at once. */
  markCompacts: number;
}

interface GcStat {
  gcType: string;
  cost: number;
  beforeGC: { heapStatistics: { usedHeapSize: number } };
  afterGC: { heapStatistics: { usedHeapSize: number } };
}

/** Open with start(), close with end(); one window at a time per instance. */
export class HeapWindow {
  private prof: GCProfiler | null = null;
  private used0 = 0;

  start(): void {
    this.prof = new GCProfiler();
    this.prof.start();
    // Sampled after the profiler is on, so a collection between the two cannot be missed.
    this.used0 = getHeapStatistics().used_heap_size;
  }

  end(): HeapWindowResult {
    const used1 = getHeapStatistics().used_heap_size;
    const stats = ((this.prof?.stop() as { statistics?: GcStat[] } | undefined)?.statistics ?? []) as GcStat[];
    this.prof = null;
    return heapWindowFrom(this.used0, used1, stats);
  }
}

/** Pure: bytes allocated from the used-heap sizes at the edges and each collection's before/after sizes. */
export function heapWindowFrom(used0: number, used1: number, stats: GcStat[]): HeapWindowResult {
  let alloc = 0;
  let prev = used0;
  for (const s of stats) {
    alloc += Math.max(0, s.beforeGC.heapStatistics.usedHeapSize - prev);
    prev = s.afterGC.heapStatistics.usedHeapSize;
  }
  alloc += Math.max(0, used1 - prev);
  const gcs = stats.map((s) => ({ type: s.gcType, costMs: s.cost / 1000 }));
  return { allocatedBytes: alloc, gcs, markCompacts: gcs.filter((g) => g.type === "MarkSweepCompact").length };
}
