// npm run bench:client-attribution — where the client's late reads come from, at 1,000 model-speed
// streams (profile llama3-8b-1xh100, h1, one thread): the same probe as bench:client (a separate
// process writes a line every 2 ms stamped with CLOCK_MONOTONIC; the reading loop stamps it), and
// each probe event at or above the run's p99 is filed by what its wait overlapped:
//   GC          a pause from perf_hooks' gc entries;
//   sending     the closed loop starting its 1,000 requests;
//   heads       response heads and first tokens arriving;
//   finishing   requests ending (records moved into the arena, promises resolved);
//   steady      none of these: a burst of token reads (a step's 1,000 writes) ahead of the probe.
// It also prints bytes allocated per socket read inside the reading window (heapwindow.ts) and,
// with HEAP=1, the allocation sites (sampling heap profiler); with PROF=1, the CPU samples inside the
// longest waits. REPS (default 3) runs; the figures are per run, not medians.
import { Session } from "node:inspector/promises";
import { PerformanceObserver } from "node:perf_hooks";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import type { LoopReport } from "../src/load/instrument.ts";
import { codeMeasured, loadModule } from "./shipped.ts";

const { probeEvents, startProbe } = await loadModule<typeof import("../src/load/delay.ts")>("delay");
const { hrNowMs } = await loadModule<typeof import("../src/load/instrument.ts")>("instrument");
const { runBench } = await loadModule<typeof import("../src/load/runner.ts")>("runner");
const { spawnSimProcess } = await loadModule<typeof import("../src/load/selftest.ts")>("selftest");

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;
const REPS = Number(process.env.REPS ?? 3);
const sess = new Session();
sess.connect();

const pr = await startProbe();
const real = await spawnSimProcess(["--profile", "llama3-8b-1xh100", "--max-num-seqs", "1024"], { idle: true });

/** Probe events while `until` is pending: [written at (performance.now clock), delay ms]. */
async function probe(until: Promise<unknown>): Promise<Array<[number, number]>> {
  const { at, delays } = await probeEvents(pr.port, until);
  return at.map((a, i) => [a, delays[i]!]);
}

const o = {
  baseUrl: real.url,
  concurrency: 1000,
  numPrompts: 1000,
  randomInputLen: 16,
  randomOutputLen: 256,
  ignoreEos: true,
  noServerMetrics: true,
  connectTimeoutMs: 20_000,
  transport: "h1" as const,
  workers: 1,
};
try {
  await runBench({ ...o, concurrency: 200, numPrompts: 400, randomOutputLen: 16 });
  const gcs: Array<[number, number, number]> = [];
  new PerformanceObserver((l) => {
    for (const e of l.getEntries()) gcs.push([e.startTime, e.duration, (e as any).detail?.kind ?? 0]);
  }).observe({ entryTypes: ["gc"] });
  const base = (await probe(new Promise((r) => setTimeout(r, 1000)))).map((x) => x[1]).sort((a, b) => a - b);
  const floor = base[base.length >> 1]!;
  console.log(`measuring ${codeMeasured()}; probe with no load: median ${floor.toFixed(3)} ms (subtracted below)`);
  for (let rep = 0; rep < REPS; rep++) {
    gc();
    gcs.length = 0;
    if (process.env.PROF) {
      await sess.post("Profiler.enable");
      await sess.post("Profiler.setSamplingInterval", { interval: 200 });
      await sess.post("Profiler.start");
    }
    if (process.env.HEAP)
      await sess.post("HeapProfiler.startSampling", {
        samplingInterval: 4096,
        includeObjectsCollectedByMajorGC: true,
        includeObjectsCollectedByMinorGC: true,
      });
    let origin = -1;
    let originUs = 0;
    let loop: LoopReport | null = null;
    const res = await runBench(o, {
      onProgress: (p) => {
        if (origin >= 0) return;
        origin = performance.now() - p.elapsedMs;
        originUs = Number(process.hrtime.bigint() / 1000n) - p.elapsedMs * 1000;
      },
      // The probe and the heap window inside the reading loop's own window (instrument.ts).
      instrument: { probePort: pr.port, heap: true, collect: true, onLoop: (l) => (loop = l) },
    });
    const l = loop as LoopReport | null;
    if (!l?.probe || !l.heap) throw new Error("the run reported no instruments");
    const hrToPerf = hrNowMs() - performance.now();
    const ev: Array<[number, number]> = Array.from(l.probe.writtenHrMs, (w, i) => [w - hrToPerf, l.probe!.delayMs[i]!]);
    // The reading phase only: GC statistics up to the last request's end, not the summary after it.
    const recs = res.requests;
    const sends = recs.map((r) => origin + r.sendMs).sort((a, b) => a - b);
    const firsts = recs.map((r) => origin + r.sendMs + r.firstChunkMs).sort((a, b) => a - b);
    const ends = recs.map((r) => origin + r.sendMs + r.endMs).sort((a, b) => a - b);
    const alloc = l.heap.allocatedBytes;
    const win = ev.filter(([a]) => a >= origin && a <= ends.at(-1)!);
    const d = win.map((x) => x[1] - floor).sort((a, b) => a - b);
    const p99 = d[Math.floor(0.99 * d.length)]!;
    const inRun = gcs.filter(([s]) => s >= origin && s <= ends.at(-1)!);
    console.log(
      `run ${rep + 1}: ${win.length} probe events, added delay p50 ${d[d.length >> 1]!.toFixed(3)} ms, p99 ${p99.toFixed(3)} ms; sends ${(sends[0]! - origin).toFixed(0)}–${(sends.at(-1)! - origin).toFixed(0)} ms, first tokens ${(firsts[0]! - origin).toFixed(0)}–${(firsts.at(-1)! - origin).toFixed(0)}, ends ${(ends[0]! - origin).toFixed(0)}–${(ends.at(-1)! - origin).toFixed(0)}`,
    );
    console.log(
      `  GC in the run: ${inRun.length} pauses, ${inRun.reduce((a, g) => a + g[1], 0).toFixed(1)} ms in all (${inRun.map(([s, du, k]) => `${(s - origin).toFixed(0)} ms ${k === 1 ? "scavenge" : k === 4 ? "mark-compact" : k === 8 ? "incremental" : `kind ${k}`} ${du.toFixed(1)}`).join(", ")}); ${(alloc / Math.max(1, res.client.reads)).toFixed(1)} B allocated per read in the window (summary excluded; ${l.heap.gcs.length} collections in it, ${l.heap.markCompacts} mark-compact); ${res.client.cpuPerReadUs.toFixed(1)} µs CPU per read`,
    );
    const cat: Record<string, number> = {};
    const late = win.filter(([, x]) => x - floor >= p99);
    for (const [a, x] of late) {
      const t = a + x;
      let c = "steady";
      if (gcs.some(([s, du]) => s < t && s + du > a)) c = "GC";
      else if (a <= sends.at(-1)!) c = "sending";
      else if (a <= firsts.at(-1)!) c = "heads";
      else if (t >= ends[0]!) c = "finishing";
      cat[c] = (cat[c] ?? 0) + 1;
    }
    console.log(
      `  the ${late.length} events at or above p99: ${Object.entries(cat)
        .sort((p, q) => q[1] - p[1])
        .map(([k, v]) => `${k} ${v}`)
        .join(", ")}`,
    );
    if (process.env.HEAP) {
      const { profile: hp } = (await sess.post("HeapProfiler.stopSampling")) as any;
      const agg = new Map<string, number>();
      const walk = (n: any, stack: string[]) => {
        const f = n.callFrame;
        const st = f.functionName
          ? [...stack, `${f.functionName}@${f.url.split("/").pop()}:${f.lineNumber + 1}`]
          : stack;
        if (n.selfSize) {
          const k = st.slice(-6).reverse().join(" < ");
          agg.set(k, (agg.get(k) ?? 0) + n.selfSize);
        }
        for (const c of n.children) walk(c, st);
      };
      walk(hp.head, []);
      // The reading path only: setup (connecting, bodies) and the summary after the window are left out.
      const outside = /computeMetrics|materialize|prebuildBodies|preconnect|summarize|toVllmJson/;
      for (const [k, b] of [...agg]
        .filter(([k]) => !outside.test(k))
        .sort((p, q) => q[1] - p[1])
        .slice(0, 20))
        console.log(`   ${(b / 1e6).toFixed(2).padStart(7)} MB  ${k}`);
    }
    if (process.env.PROF) {
      const { profile } = (await sess.post("Profiler.stop")) as any;
      const byId = new Map<number, any>(profile.nodes.map((n: any) => [n.id, n]));
      const parent = new Map<number, number>();
      for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
      const stamps: number[] = [];
      let ts = profile.startTime;
      for (const dt of profile.timeDeltas) stamps.push((ts += dt));
      const stackOf = (id: number) => {
        const out: string[] = [];
        for (let c: number | undefined = id; c !== undefined; c = parent.get(c)) {
          const f = byId.get(c).callFrame;
          if (f.functionName && f.functionName !== "(root)") out.push(`${f.functionName}@${f.url.split("/").pop()}`);
        }
        return out;
      };
      for (const [a, x] of [...late].sort((p, q) => q[1] - p[1]).slice(0, 5)) {
        const lo = (a - origin) * 1000 + originUs;
        const hi = lo + x * 1000;
        const agg = new Map<string, number>();
        for (let i = 0; i < stamps.length; i++)
          if (stamps[i]! >= lo && stamps[i]! <= hi) {
            const k = stackOf(profile.samples[i]).slice(0, 4).join(" < ");
            agg.set(k, (agg.get(k) ?? 0) + 1);
          }
        console.log(`  written at ${(a - origin).toFixed(1)} ms, waited ${x.toFixed(1)} ms:`);
        for (const [k, c] of [...agg].sort((p, q) => q[1] - p[1]).slice(0, 4)) console.log(`     ${c}  ${k}`);
      }
    }
  }
} finally {
  pr.stop();
  await real.stop();
}
