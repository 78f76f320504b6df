// The trace model: GPU activities (kernels, memcpy, memset), runtime/driver calls, CPU ops and
// annotations, held in compact typed columns so millions of events fit in a few tens of MB.
import { type ActivityKind, Classifier, type RuleFile } from "./classify.ts";
import type { EventFields } from "./fastevent.ts";
import type { RawEvent } from "./reader.ts";

type Typed = Float64Array | Float32Array | Uint32Array | Int32Array | Uint16Array | Uint8Array;
type TypedCtor<T extends Typed> = { new (n: number): T; new (b: ArrayBuffer): T; BYTES_PER_ELEMENT: number };

/** Chunk buffers given back by sealed columns, for the next builder on the same thread: a thread
 * that builds one segment after another (parallel.ts) then makes no garbage of them, which V8
 * collects late (the heap stays small, the chunks are off-heap). */
export class ChunkPool {
  private readonly free = new Map<number, ArrayBuffer[]>();
  take(bytes: number): ArrayBuffer | undefined {
    return this.free.get(bytes)?.pop();
  }
  give(b: ArrayBuffer): void {
    let l = this.free.get(b.byteLength);
    if (!l) this.free.set(b.byteLength, (l = []));
    l.push(b);
  }
}

/** Growable column made of fixed-size chunks (no copy on growth); `seal()` returns one array. */
class Column<T extends Typed> {
  private chunks: T[] = [];
  private cur: T;
  private pos = 0;
  length = 0;
  constructor(
    private readonly ctor: TypedCtor<T>,
    private readonly chunk = 65536,
    private readonly pool?: ChunkPool,
  ) {
    this.cur = this.newChunk();
    this.chunks.push(this.cur);
  }
  private newChunk(): T {
    const b = this.pool?.take(this.chunk * this.ctor.BYTES_PER_ELEMENT);
    return b ? new this.ctor(b) : new this.ctor(this.chunk);
  }
  private nextChunk(): void {
    this.cur = this.newChunk();
    this.chunks.push(this.cur);
    this.pos = 0;
  }
  push(v: number): void {
    if (this.pos === this.chunk) this.nextChunk();
    this.cur[this.pos++] = v;
    this.length++;
  }
  /** Pushes every value of `src` (a part's sealed column), in chunk-sized copies. */
  append(src: ArrayLike<number> & { subarray(a: number, b: number): ArrayLike<number> }): void {
    let off = 0;
    while (off < src.length) {
      if (this.pos === this.chunk) this.nextChunk();
      const take = Math.min(this.chunk - this.pos, src.length - off);
      this.cur.set(src.subarray(off, off + take) as never, this.pos);
      this.pos += take;
      off += take;
    }
    this.length += src.length;
  }
  seal(): T {
    const out = new this.ctor(this.length);
    let off = 0;
    for (const c of this.chunks) {
      const take = Math.min(this.chunk, this.length - off);
      if (take > 0) out.set(c.subarray(0, take) as never, off);
      off += take;
      this.pool?.give(c.buffer as ArrayBuffer);
    }
    this.chunks = [];
    return out;
  }
}

export const KIND_KERNEL = 0;
export const KIND_MEMCPY = 1;
export const KIND_MEMSET = 2;
const KIND_NAMES: ActivityKind[] = ["kernel", "memcpy", "memset"];

/** GPU activities, one row each. Times in µs as written in the trace. */
export interface GpuTable {
  n: number;
  start: Float64Array;
  dur: Float64Array;
  name: Uint32Array; // index into names
  cls: Uint8Array; // index into KERNEL_CLASSES
  kind: Uint8Array; // KIND_*
  corr: Float64Array; // correlation id, NaN if none
  ext: Float64Array; // External id (the launching CPU op), NaN if none
  stream: Int32Array;
  device: Int32Array;
}

/** Runtime/driver API calls that carry a correlation id (launches, memcpy calls, graph launches). */
export interface RuntimeTable {
  n: number;
  ts: Float64Array;
  dur: Float64Array;
  corr: Float64Array;
  name: Uint32Array;
  tid: Int32Array;
  /** External id of the CPU op around the call, NaN if none. */
  ext: Float64Array;
  /** The kernel a launch call names (`args.kernel`, written in graph-capture traces), as a name
   * id, NO_NAME if none; only kept when the builder is asked to (for capture traces). */
  kernel?: Uint32Array;
}

export const NO_NAME = 0xffffffff;

export interface Annotation {
  name: string;
  ts: number;
  dur: number;
  tid: number;
  pid: number;
  /** gpu_user_annotation (GPU-side span) rather than a CPU-side record_function. */
  gpu: boolean;
}

export interface TraceModel {
  names: string[];
  /** Per name: class from the name rules; after analysis, the class most of its kernel time got. */
  nameClass: Array<{ class: string; rule: string; weak?: boolean; decidedBy?: string }>;
  gpu: GpuTable;
  runtime: RuntimeTable;
  /** CPU ops by External id, sorted by it (to name the op that launched a kernel). */
  cpuOpExt: Float64Array;
  cpuOpName: Uint32Array;
  /** Span and thread of each CPU op (same order), to find the ops enclosing it. */
  cpuOpTs: Float64Array;
  cpuOpEnd: Float64Array;
  cpuOpTid: Float64Array;
  cpuOps: number;
  /** Python-side nn.Module spans ("nn.Module: Qwen3Attention_0"), where the trace has them. */
  /** Thread ids as in `runtime.tid` (OS thread ids: one process per trace file). */
  modules: { name: Uint32Array; ts: Float64Array; end: Float64Array; tid: Int32Array };
  annotations: Annotation[];
  /** Counts of events by category, for diagnostics. */
  categories: Record<string, number>;
  devices: number[];
  /** Earliest and latest timestamps of any event (µs). */
  minTs: number;
  maxTs: number;
  /** Time of Kineto's "Record Window End" marker, if present. */
  windowEndTs?: number;
  threadNames: Map<number, string>;
  processNames: Map<number, string>;
  unsafeIds: number;
}

/** The arrays a group of columns seals into. */
type Sealed<C> = { [K in keyof C]: C[K] extends Column<infer T> ? T : never };

/** A ModelBuilder's contents as plain data (structured-clone safe): see exportPart / absorb. */
export interface BuilderPart {
  names: string[];
  nameKinds: number[];
  /** GPU columns but `cls`, which the absorbing builder derives from its own classes. */
  g: Omit<Sealed<ReturnType<typeof gpuColumns>>, "cls">;
  r: Sealed<ReturnType<typeof runtimeColumns>>;
  launchKernel?: Uint32Array;
  cpu: { ext: Float64Array; name: Uint32Array; ts: Float64Array; end: Float64Array; tid: Float64Array };
  cpuOps: number;
  mod: Sealed<ReturnType<typeof moduleColumns>>;
  annotations: Annotation[];
  categories: Record<string, number>;
  devices: number[];
  minTs: number;
  maxTs: number;
  windowEndTs?: number;
  threadNames: Array<[number, string]>;
  processNames: Array<[number, string]>;
  unsafeIds: number;
}

/** Every event field `ModelBuilder.add` reads: the reader may leave the others out. */
export const EVENT_FIELDS: EventFields = {
  event: ["ph", "cat", "name", "pid", "tid", "ts", "dur", "args"],
  args: ["name", "correlation", "External id", "external id", "stream", "device", "kernel"],
};

const LAUNCH_LIKE = /launch|memcpy|memset|graph/i;
export const MODULE_PREFIX = "nn.Module: ";

const gpuColumns = (pool?: ChunkPool) => ({
  start: new Column(Float64Array, undefined, pool),
  dur: new Column(Float64Array, undefined, pool),
  name: new Column(Uint32Array, undefined, pool),
  cls: new Column(Uint8Array, undefined, pool),
  kind: new Column(Uint8Array, undefined, pool),
  corr: new Column(Float64Array, undefined, pool),
  ext: new Column(Float64Array, undefined, pool),
  stream: new Column(Int32Array, undefined, pool),
  device: new Column(Int32Array, undefined, pool),
});
const runtimeColumns = (pool?: ChunkPool) => ({
  ts: new Column(Float64Array, undefined, pool),
  dur: new Column(Float64Array, undefined, pool),
  corr: new Column(Float64Array, undefined, pool),
  name: new Column(Uint32Array, undefined, pool),
  tid: new Column(Int32Array, undefined, pool),
  ext: new Column(Float64Array, undefined, pool),
});
const moduleColumns = (pool?: ChunkPool) => ({
  name: new Column(Uint32Array, 4096, pool),
  ts: new Column(Float64Array, 4096, pool),
  end: new Column(Float64Array, 4096, pool),
  tid: new Column(Int32Array, 4096, pool),
});

/** Builds a TraceModel from raw events; feed events with `add`, then `finish()`. */
export class ModelBuilder {
  private readonly names: string[] = [];
  /** The kind each name was interned under (0–2 GPU activity kinds, 3 CPU-side). */
  private readonly nameKinds: number[] = [];
  /** Name ids per kind (GPU activity kinds 0–2, CPU-side 3): a map each, keyed by the name itself,
   * whose hash the reader's cached strings already hold (a "kind\0name" key was a new string to hash
   * for every CPU op). */
  private readonly nameIds = [0, 1, 2, 3].map(() => new Map<string, number>());
  private readonly nameClass: Array<{ class: string; rule: string; cls: number; weak?: boolean }> = [];
  private readonly classifier: Classifier;
  private readonly classIndex: Map<string, number>;
  private readonly g: ReturnType<typeof gpuColumns>;
  private readonly r: ReturnType<typeof runtimeColumns>;
  private readonly cpuExt: Column<Float64Array>;
  private readonly cpuName: Column<Uint32Array>;
  private readonly cpuTs: Column<Float64Array>;
  private readonly cpuEnd: Column<Float64Array>;
  private readonly cpuTid: Column<Float64Array>;
  private cpuOps = 0;
  private readonly mod: ReturnType<typeof moduleColumns>;
  private readonly annotations: Annotation[] = [];
  private readonly categories: Record<string, number> = {};
  private readonly devices = new Set<number>();
  private minTs = Number.POSITIVE_INFINITY;
  private maxTs = Number.NEGATIVE_INFINITY;
  private windowEndTs?: number;
  private readonly threadNames = new Map<number, string>();
  private readonly processNames = new Map<number, string>();
  private unsafeIds = 0;
  private lastCatRaw = "";
  private lastCat = "";
  private readonly kindClassKey: string[] = KIND_NAMES;

  private readonly launchKernel?: Column<Uint32Array>;

  constructor(
    rules: RuleFile | undefined,
    classNames: readonly string[],
    private readonly annotationFilter?: (name: string) => boolean,
    opts: { launchKernelNames?: boolean; pool?: ChunkPool } = {},
  ) {
    const pool = opts.pool;
    this.g = gpuColumns(pool);
    this.r = runtimeColumns(pool);
    this.cpuExt = new Column(Float64Array, undefined, pool);
    this.cpuName = new Column(Uint32Array, undefined, pool);
    this.cpuTs = new Column(Float64Array, undefined, pool);
    this.cpuEnd = new Column(Float64Array, undefined, pool);
    this.cpuTid = new Column(Float64Array, undefined, pool);
    this.mod = moduleColumns(pool);
    if (opts.launchKernelNames) this.launchKernel = new Column(Uint32Array, undefined, pool);
    this.classifier = new Classifier(rules);
    this.classIndex = new Map(classNames.map((c, i) => [c, i]));
  }

  private intern(name: string, kind: number): number {
    const ids = this.nameIds[kind]!;
    let id = ids.get(name);
    if (id === undefined) {
      id = this.names.length;
      this.names.push(name);
      this.nameKinds.push(kind);
      ids.set(name, id);
      if (kind < 3) {
        const c = this.classifier.classify(name, this.kindClassKey[kind] as ActivityKind);
        this.nameClass.push({
          class: c.class,
          rule: c.rule,
          cls: this.classIndex.get(c.class) ?? 0,
          ...(c.weak ? { weak: true } : {}),
        });
      } else this.nameClass.push({ class: "", rule: "", cls: 0 }); // CPU-side name: not classified
    }
    return id;
  }

  private internPlain(name: string): number {
    return this.intern(name, 3);
  }

  add(ev: RawEvent): void {
    const ph = ev.ph;
    const catRaw = ev.cat;
    if (ph === "M") {
      const a = ev.args as { name?: unknown } | undefined;
      const pid = toInt(ev.pid);
      if (ev.name === "thread_name" && typeof a?.name === "string")
        this.threadNames.set(hashKey(pid, toInt(ev.tid)), a.name);
      else if (ev.name === "process_name" && typeof a?.name === "string") this.processNames.set(pid, a.name);
      return;
    }
    if (typeof catRaw !== "string") {
      if (ph === "i" && ev.name === "Record Window End" && typeof ev.ts === "number") this.windowEndTs = ev.ts;
      return;
    }
    // Categories repeat (the reader hands out the same string objects): lower-case each once.
    let cat = this.lastCat;
    if (catRaw !== this.lastCatRaw) {
      cat = this.lastCat = catRaw.toLowerCase();
      this.lastCatRaw = catRaw;
    }
    this.categories[cat] = (this.categories[cat] ?? 0) + 1;
    const ts = typeof ev.ts === "number" ? ev.ts : Number(ev.ts);
    if (!Number.isFinite(ts)) return;
    const dur = typeof ev.dur === "number" && ev.dur > 0 ? ev.dur : 0;
    if (ph !== "X") return;
    if (ts < this.minTs) this.minTs = ts;
    if (ts + dur > this.maxTs) this.maxTs = ts + dur;
    const args = ev.args ?? {};
    let kind = -1;
    if (cat === "kernel") kind = KIND_KERNEL;
    else if (cat === "gpu_memcpy" || cat === "memcpy") kind = KIND_MEMCPY;
    else if (cat === "gpu_memset" || cat === "memset") kind = KIND_MEMSET;
    if (kind >= 0) {
      const name = typeof ev.name === "string" ? ev.name : String(ev.name ?? "");
      const id = this.intern(name, kind);
      const g = this.g;
      g.start.push(ts);
      g.dur.push(dur);
      g.name.push(id);
      g.cls.push(this.nameClass[id]!.cls);
      g.kind.push(kind);
      g.corr.push(this.id(args.correlation));
      g.ext.push(this.id(args["External id"] ?? args["external id"]));
      const stream = toInt(args.stream ?? ev.tid);
      g.stream.push(stream);
      const device = toInt(args.device ?? ev.pid);
      g.device.push(device);
      this.devices.add(device);
      return;
    }
    if (cat === "cuda_runtime" || cat === "runtime" || cat === "cuda_driver" || cat.endsWith("_runtime")) {
      const corr = this.id(args.correlation);
      const name = typeof ev.name === "string" ? ev.name : "";
      if (Number.isNaN(corr) && !LAUNCH_LIKE.test(name)) return;
      const r = this.r;
      r.ts.push(ts);
      r.dur.push(dur);
      r.corr.push(corr);
      r.name.push(this.internPlain(name));
      r.tid.push(toInt(ev.tid));
      r.ext.push(this.id(args["External id"] ?? args["external id"]));
      if (this.launchKernel)
        this.launchKernel.push(typeof args.kernel === "string" ? this.internPlain(args.kernel) : NO_NAME);
      return;
    }
    if (cat === "cpu_op" || cat === "operator") {
      this.cpuOps++;
      const ext = this.id(args["External id"] ?? args["external id"]);
      if (!Number.isNaN(ext) && typeof ev.name === "string") {
        this.cpuExt.push(ext);
        this.cpuName.push(this.internPlain(ev.name));
        this.cpuTs.push(ts);
        this.cpuEnd.push(ts + dur);
        this.cpuTid.push(hashKey(toInt(ev.pid), toInt(ev.tid)));
      }
      return;
    }
    if (cat === "python_function") {
      // Only nn.Module frames reach here (the reader skips the rest of the Python stack).
      const name = typeof ev.name === "string" ? ev.name : "";
      if (!name.startsWith(MODULE_PREFIX)) return;
      this.mod.name.push(this.internPlain(name));
      this.mod.ts.push(ts);
      this.mod.end.push(ts + dur);
      this.mod.tid.push(toInt(ev.tid));
      return;
    }
    if (cat === "user_annotation" || cat === "gpu_user_annotation") {
      const name = typeof ev.name === "string" ? ev.name : "";
      if (this.annotationFilter && !this.annotationFilter(name)) return;
      this.annotations.push({
        name,
        ts,
        dur,
        tid: toInt(ev.tid),
        pid: toInt(ev.pid),
        gpu: cat === "gpu_user_annotation",
      });
    }
  }

  private id(v: unknown): number {
    if (typeof v === "number") {
      if (!Number.isSafeInteger(v)) this.unsafeIds++;
      return v;
    }
    if (typeof v === "string" && v !== "") {
      const n = Number(v);
      return Number.isFinite(n) ? n : Number.NaN;
    }
    return Number.NaN;
  }

  /**
   * What this builder holds, as plain data and sealed columns (their buffers are `transfer`): a
   * segment of a file read by another thread (parallel.ts), for `absorb`. Kept annotations are all
   * of them when the builder has no filter: the absorbing builder applies its own.
   */
  exportPart(): { part: BuilderPart; transfer: ArrayBuffer[] } {
    const seal = <C extends Record<string, Column<any>>>(cols: C) =>
      Object.fromEntries(Object.entries(cols).map(([k, c]) => [k, c.seal()])) as Sealed<C>;
    const { cls: _cls, ...g } = this.g;
    const part: BuilderPart = {
      names: this.names,
      nameKinds: this.nameKinds,
      g: seal(g),
      r: seal(this.r),
      ...(this.launchKernel ? { launchKernel: this.launchKernel.seal() } : {}),
      cpu: seal({ ext: this.cpuExt, name: this.cpuName, ts: this.cpuTs, end: this.cpuEnd, tid: this.cpuTid }),
      cpuOps: this.cpuOps,
      mod: seal(this.mod),
      annotations: this.annotations,
      categories: this.categories,
      devices: [...this.devices],
      minTs: this.minTs,
      maxTs: this.maxTs,
      ...(this.windowEndTs !== undefined ? { windowEndTs: this.windowEndTs } : {}),
      threadNames: [...this.threadNames],
      processNames: [...this.processNames],
      unsafeIds: this.unsafeIds,
    };
    const transfer: ArrayBuffer[] = [];
    for (const cols of [part.g, part.r, part.cpu, part.mod] as Array<Record<string, { buffer: ArrayBufferLike }>>)
      for (const a of Object.values(cols)) transfer.push(a.buffer as ArrayBuffer);
    if (part.launchKernel) transfer.push(part.launchKernel.buffer as ArrayBuffer);
    return { part, transfer };
  }

  /**
   * Appends a part read from the bytes that follow this builder's (exportPart of the next segment):
   * the result is what `add` of those events here would have built. Names are interned in the part's
   * order of first use, so ids and classes come out as a single pass gives them.
   */
  absorb(p: BuilderPart): void {
    const remap = new Uint32Array(p.names.length);
    for (let i = 0; i < p.names.length; i++) remap[i] = this.intern(p.names[i]!, p.nameKinds[i]!);
    const ids = (a: Uint32Array) => a.map((x) => (x === NO_NAME ? NO_NAME : remap[x]!));
    const g = this.g;
    const gName = ids(p.g.name);
    g.start.append(p.g.start);
    g.dur.append(p.g.dur);
    g.name.append(gName);
    g.cls.append(gName.length ? Uint8Array.from(gName, (x) => this.nameClass[x]!.cls) : new Uint8Array(0));
    g.kind.append(p.g.kind);
    g.corr.append(p.g.corr);
    g.ext.append(p.g.ext);
    g.stream.append(p.g.stream);
    g.device.append(p.g.device);
    const r = this.r;
    r.ts.append(p.r.ts);
    r.dur.append(p.r.dur);
    r.corr.append(p.r.corr);
    r.name.append(ids(p.r.name));
    r.tid.append(p.r.tid);
    r.ext.append(p.r.ext);
    if (this.launchKernel)
      this.launchKernel.append(p.launchKernel ? ids(p.launchKernel) : new Uint32Array(p.r.ts.length).fill(NO_NAME));
    this.cpuExt.append(p.cpu.ext);
    this.cpuName.append(ids(p.cpu.name));
    this.cpuTs.append(p.cpu.ts);
    this.cpuEnd.append(p.cpu.end);
    this.cpuTid.append(p.cpu.tid);
    this.cpuOps += p.cpuOps;
    this.mod.name.append(ids(p.mod.name));
    this.mod.ts.append(p.mod.ts);
    this.mod.end.append(p.mod.end);
    this.mod.tid.append(p.mod.tid);
    for (const a of p.annotations)
      if (!this.annotationFilter || this.annotationFilter(a.name)) this.annotations.push(a);
    for (const [c, k] of Object.entries(p.categories)) this.categories[c] = (this.categories[c] ?? 0) + k;
    for (const d of p.devices) this.devices.add(d);
    if (p.minTs < this.minTs) this.minTs = p.minTs;
    if (p.maxTs > this.maxTs) this.maxTs = p.maxTs;
    if (p.windowEndTs !== undefined) this.windowEndTs = p.windowEndTs;
    for (const [k, v] of p.threadNames) this.threadNames.set(k, v);
    for (const [k, v] of p.processNames) this.processNames.set(k, v);
    this.unsafeIds += p.unsafeIds;
  }

  finish(): TraceModel {
    const g = this.g;
    const n = g.start.length;
    const gpu: GpuTable = {
      n,
      start: g.start.seal(),
      dur: g.dur.seal(),
      name: g.name.seal(),
      cls: g.cls.seal(),
      kind: g.kind.seal(),
      corr: g.corr.seal(),
      ext: g.ext.seal(),
      stream: g.stream.seal(),
      device: g.device.seal(),
    };
    const r = this.r;
    const runtime: RuntimeTable = {
      n: r.ts.length,
      ts: r.ts.seal(),
      dur: r.dur.seal(),
      corr: r.corr.seal(),
      name: r.name.seal(),
      tid: r.tid.seal(),
      ext: r.ext.seal(),
      ...(this.launchKernel ? { kernel: this.launchKernel.seal() } : {}),
    };
    let cpuOpExt = this.cpuExt.seal();
    let cpuOpName = this.cpuName.seal();
    let cpuOpTs = this.cpuTs.seal();
    let cpuOpEnd = this.cpuEnd.seal();
    let cpuOpTid = this.cpuTid.seal();
    let sorted = true;
    for (let i = 1; i < cpuOpExt.length; i++)
      if (cpuOpExt[i]! < cpuOpExt[i - 1]!) {
        sorted = false;
        break;
      }
    if (!sorted) {
      const idx = new Uint32Array(cpuOpExt.length).map((_, i) => i);
      const ext = cpuOpExt;
      idx.sort((a, b) => ext[a]! - ext[b]!);
      cpuOpExt = Float64Array.from(idx, (i) => ext[i]!);
      const nm = cpuOpName;
      cpuOpName = Uint32Array.from(idx, (i) => nm[i]!);
      const [a, b, c] = [cpuOpTs, cpuOpEnd, cpuOpTid];
      cpuOpTs = Float64Array.from(idx, (i) => a[i]!);
      cpuOpEnd = Float64Array.from(idx, (i) => b[i]!);
      cpuOpTid = Float64Array.from(idx, (i) => c[i]!);
    }
    return {
      names: this.names,
      nameClass: this.nameClass.map(({ class: c, rule, weak }) => ({ class: c, rule, ...(weak ? { weak } : {}) })),
      gpu,
      runtime,
      cpuOpExt,
      cpuOpName,
      cpuOpTs,
      cpuOpEnd,
      cpuOpTid,
      cpuOps: this.cpuOps,
      modules: {
        name: this.mod.name.seal(),
        ts: this.mod.ts.seal(),
        end: this.mod.end.seal(),
        tid: this.mod.tid.seal(),
      },
      annotations: this.annotations,
      categories: this.categories,
      devices: [...this.devices].sort((a, b) => a - b),
      minTs: this.minTs,
      maxTs: this.maxTs,
      windowEndTs: this.windowEndTs,
      threadNames: this.threadNames,
      processNames: this.processNames,
      unsafeIds: this.unsafeIds,
    };
  }
}

function toInt(v: unknown): number {
  if (typeof v === "number") return Math.trunc(v);
  if (typeof v === "string") {
    const m = /-?\d+/.exec(v);
    return m ? Number(m[0]) : -1;
  }
  return -1;
}

function hashKey(pid: number, tid: number): number {
  return pid * 1_000_003 + tid;
}

/** Binary search in a sorted Float64Array; returns the index of `v` or -1. */
export function findSorted(a: Float64Array, v: number): number {
  let lo = 0;
  let hi = a.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1;
    const x = a[mid]!;
    if (x < v) lo = mid + 1;
    else if (x > v) hi = mid - 1;
    else return mid;
  }
  return -1;
}
