// npm run bench:trace — trace analysis against pandas ("load the events into a DataFrame, group
// kernel time by name", /usr/bin/python3 with pandas), as alternating pairs (ours, theirs, ours,
// theirs…) with the host's load average printed beside each pair; the ratio is the median of the
// pairs' ratios.
//   1. Real traces from ../shared/traces (the largest ones: an H200 eager decode trace and vLLM's
//      graph-capture trace, as shipped, .json.gz): the whole `inferscope trace FILE --json` process
//      of the compiled CLI (dist/, built if stale) against the whole python3 process (target ≥ 3×).
//   2. A generated decode trace of BENCH_TRACE_PANDAS_MB (150 MB): the analysis alone in a child
//      process against pandas' own timer (target ≥ 5×), CPU time beside it, and whole processes.
//   3. A generated ≥ 1 GB trace (BENCH_TRACE_MB, 0 skips it): MB/s and peak RSS of the analysis,
//      on the cores it finds (at most 4); pandas cannot hold it (json.load needs ~10× the file).
// Generated traces live in /tmp/inferscope-bench and are reused between runs.
//   BENCH_TRACE_PAIRS=7 BENCH_TRACE_MB=1100 BENCH_TRACE_PANDAS_MB=150 BENCH_TRACE_REAL=a.json.gz,b.json npm run bench:trace
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { basename, join } from "node:path";
import { fileURLToPath } from "node:url";
import { generateTrace } from "./gen-trace.ts";

interface ChildResult {
  ms: number;
  /** CPU time of the analysis (user + system, all threads). */
  cpuMs: number;
  jsonBytes: number;
  maxRssMB: number;
  kernels: number;
  steps: number;
  kernelUsByClass: Record<string, number>;
  threads: number;
}

if (process.argv[2] === "--child") {
  const { analyzeTrace } = (await import(
    new URL("../dist/trace/index.js", import.meta.url).href
  )) as typeof import("../src/trace/index.ts");
  const threads = process.argv[4] ? Number(process.argv[4]) : undefined;
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  const a = await analyzeTrace([process.argv[3]!], { threads });
  const ms = performance.now() - t0;
  const c = process.cpuUsage(c0);
  const out: ChildResult = {
    ms,
    cpuMs: (c.user + c.system) / 1000,
    jsonBytes: a.ranks[0]!.info.jsonBytes,
    maxRssMB: process.resourceUsage().maxRSS / 1024,
    kernels: a.overall.kernels,
    steps: a.steps.length,
    kernelUsByClass: a.overall.kernelUsByClass as Record<string, number>,
    threads: a.ranks[0]!.info.readThreads,
  };
  process.stdout.write(`${JSON.stringify(out)}\n`);
  process.exit(0);
}

const dir = "/tmp/inferscope-bench";
mkdirSync(dir, { recursive: true });
const pairs = Math.max(1, Number(process.env.BENCH_TRACE_PAIRS ?? 7));
const bigMb = Number(process.env.BENCH_TRACE_MB ?? 1100);
const pandasMb = Number(process.env.BENCH_TRACE_PANDAS_MB ?? 150);
const shared = fileURLToPath(new URL("../../shared/traces/", import.meta.url));
const real = (
  process.env.BENCH_TRACE_REAL?.split(",") ?? [
    join(shared, "h200/h200-hf-llama8b-eager-b1.json.gz"),
    join(
      shared,
      "tracelens/inference/vllm_decode_full/capture_traces/graph_capture_rank_0.1773709742341309550.pt.trace.json.gz",
    ),
  ]
).filter((f) => f !== "");
const load = () => loadavg()[0]!.toFixed(1);
const median = (xs: number[]) => {
  const s = xs.slice().sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
const range = (xs: number[], f = (x: number) => x.toFixed(2)) => `${f(Math.min(...xs))}–${f(Math.max(...xs))}`;
console.log(`host: ${cpus().length} CPUs (${cpus()[0]?.model}), load average ${load()} at start`);

const built = spawnSync(process.execPath, ["scripts/build.mjs", "--if-stale"], { encoding: "utf8" });
if (built.status !== 0) throw new Error(`the build failed: ${built.stderr.slice(-500)}`);

const py = "/usr/bin/python3";
const hasPandas = existsSync(py) && spawnSync(py, ["-c", "import pandas"], { encoding: "utf8" }).status === 0;
// The pandas side: json.load of the whole file (gunzipped on the fly for .gz), one DataFrame,
// kernel time grouped by name. It prints its own timer of that work and its peak RSS.
const PANDAS = `
import gzip, json, resource, sys, time
t0 = time.perf_counter()
c0 = time.process_time()
import pandas as pd
t1 = time.perf_counter()
f = sys.argv[1]
with (gzip.open(f, "rt") if f.endswith(".gz") else open(f)) as fh:
    events = json.load(fh)["traceEvents"]
df = pd.DataFrame(events)
k = df[df["cat"] == "kernel"].groupby("name")["dur"].sum()
t2 = time.perf_counter()
c2 = time.process_time()
print(json.dumps({"ms": (t2 - t1) * 1000, "cpuMs": (c2 - c0) * 1000, "importMs": (t1 - t0) * 1000, "maxRssMB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "kernels": int((df["cat"] == "kernel").sum()), "names": len(k)}))
`;
interface PandasResult {
  ms: number;
  cpuMs: number;
  importMs: number;
  maxRssMB: number;
  kernels: number;
  /** Whole python3 process, wall clock, measured here. */
  wallMs: number;
}

function runPandas(file: string): PandasResult {
  const t0 = performance.now();
  const p = spawnSync(py, ["-c", PANDAS, file], { encoding: "utf8", maxBuffer: 1 << 20 });
  const wallMs = performance.now() - t0;
  if (p.status !== 0) throw new Error(`pandas run failed: ${p.stderr.slice(-500)}`);
  return { ...JSON.parse(p.stdout.trim().split("\n").pop()!), wallMs };
}

/** `inferscope trace FILE --json` as a user runs it: the compiled CLI, start-up included. */
function runCli(file: string): { wallMs: number } {
  const t0 = performance.now();
  const r = spawnSync(process.execPath, ["dist/cli/main.js", "trace", file, "--json"], {
    stdio: ["ignore", "ignore", "pipe"],
    encoding: "utf8",
  });
  const wallMs = performance.now() - t0;
  if (r.status !== 0) throw new Error(`inferscope trace ${file} failed (exit ${r.status}): ${r.stderr.slice(-300)}`);
  return { wallMs };
}

function runChild(file: string, threads?: number): ChildResult {
  const args = ["--import", "tsx", "bench/trace.ts", "--child", file, ...(threads ? [String(threads)] : [])];
  const r = spawnSync(process.execPath, args, { encoding: "utf8", maxBuffer: 1 << 20 });
  if (r.status !== 0) throw new Error(`analysis child failed: ${r.stderr}`);
  return JSON.parse(r.stdout.trim().split("\n").pop()!);
}

async function ensure(mb: number): Promise<{ file: string; truth: Record<string, number> }> {
  const file = join(dir, `decode-${mb}mb.pt.trace.json`);
  const truthFile = `${file}.truth.json`;
  if (!existsSync(file) || !existsSync(truthFile) || statSync(file).size < mb * 1e6) {
    process.stderr.write(`generating ${file} (${mb} MB)…\n`);
    const t = await generateTrace(file, { targetBytes: mb * 1e6, seed: 11 });
    writeFileSync(truthFile, JSON.stringify({ ...t, stepDurUs: undefined }));
  }
  return { file, truth: JSON.parse(readFileSync(truthFile, "utf8")).kernelUsByClass };
}

function checkTruth(got: Record<string, number>, truth: Record<string, number>): string {
  const worst = Object.entries(truth).reduce((w, [c, us]) => Math.max(w, Math.abs((got[c] ?? 0) - us) / us), 0);
  return `${(worst * 100).toExponential(1)} % worst per-class deviation from the generator's truth`;
}

/** Whole processes in alternating pairs: each pair's load, times and ratio; the median ratio. */
function wholeProcessPairs(file: string, label: string): number {
  const ours: number[] = [];
  const theirs: number[] = [];
  const ratios: number[] = [];
  const loads: number[] = [];
  runCli(file); // the page cache and the compiled code's first load, outside the pairs
  for (let i = 0; i < pairs; i++) {
    const l = loadavg()[0]!;
    const o = runCli(file);
    const p = runPandas(file);
    ours.push(o.wallMs);
    theirs.push(p.wallMs);
    ratios.push(p.wallMs / o.wallMs);
    loads.push(l);
    console.log(
      `  pair ${i + 1} (load ${l.toFixed(1)}): inferscope ${(o.wallMs / 1000).toFixed(2)} s, pandas ${(p.wallMs / 1000).toFixed(2)} s (its import ${(p.importMs / 1000).toFixed(2)} s): ${(p.wallMs / o.wallMs).toFixed(2)}×`,
    );
  }
  const r = median(ratios);
  console.log(
    `${label}: whole process, median of ${pairs} alternating pairs (load ${range(loads, (x) => x.toFixed(1))}): inferscope ${(median(ours) / 1000).toFixed(2)} s vs pandas ${(median(theirs) / 1000).toFixed(2)} s, ratio ${r.toFixed(2)}× (pairs ${range(ratios)}) — target ≥ 3× ${r >= 3 ? "met" : "NOT met"}`,
  );
  return r;
}

if (!hasPandas) console.log("pandas comparisons skipped: /usr/bin/python3 with pandas not found");
else {
  // 1. Real traces.
  for (const file of real) {
    if (!existsSync(file)) {
      console.log(`real trace ${file}: not found, skipped`);
      continue;
    }
    const mb = (statSync(file).size / 1e6).toFixed(1);
    console.log(`real trace ${basename(file)} (${mb} MB on disk):`);
    wholeProcessPairs(file, `  ${basename(file)}`);
  }

  // 2. The generated 150 MB trace: the analysis alone (in-process timers) and whole processes.
  const small = await ensure(pandasMb);
  console.log(`generated ${pandasMb} MB decode trace:`);
  const ours: ChildResult[] = [];
  const pand: PandasResult[] = [];
  const ratios: number[] = [];
  const cpuRatios: number[] = [];
  for (let i = 0; i < pairs; i++) {
    const l = load();
    const o = runChild(small.file);
    const p = runPandas(small.file);
    ours.push(o);
    pand.push(p);
    ratios.push(p.ms / o.ms);
    cpuRatios.push(p.cpuMs / o.cpuMs);
    console.log(
      `  pair ${i + 1} (load ${l}): analysis ${(o.ms / 1000).toFixed(2)} s (CPU ${(o.cpuMs / 1000).toFixed(2)} s) vs pandas ${(p.ms / 1000).toFixed(2)} s (CPU ${(p.cpuMs / 1000).toFixed(2)} s): ${(p.ms / o.ms).toFixed(2)}×`,
    );
  }
  const r = median(ratios);
  console.log(
    `  analysis alone: median ${(median(ours.map((x) => x.ms)) / 1000).toFixed(2)} s (peak RSS ${median(ours.map((x) => x.maxRssMB)).toFixed(0)} MB) vs pandas json.load + DataFrame + group-by ${(median(pand.map((x) => x.ms)) / 1000).toFixed(2)} s (peak RSS ${median(pand.map((x) => x.maxRssMB)).toFixed(0)} MB): ${r.toFixed(2)}× (pairs ${range(ratios)}) — target ≥ 5× ${r >= 5 ? "met" : "NOT met"}; by CPU time ${median(cpuRatios).toFixed(2)}× (ours counts every thread: V8's compiler and GC helpers)`,
  );
  wholeProcessPairs(small.file, `  generated ${pandasMb} MB`);
}

// 3. Throughput and memory on the large generated trace.
if (bigMb > 0) {
  const big = await ensure(bigMb);
  const r = runChild(big.file);
  const mbps = r.jsonBytes / 1e6 / (r.ms / 1000);
  console.log(
    `inferscope trace, ${(r.jsonBytes / 1e6).toFixed(0)} MB decode trace (${r.kernels} GPU activities, ${r.steps} steps), read on ${r.threads} thread(s), load ${load()}: ${(r.ms / 1000).toFixed(1)} s = ${mbps.toFixed(0)} MB/s, peak RSS ${r.maxRssMB.toFixed(0)} MB; ${checkTruth(r.kernelUsByClass, big.truth)}`,
  );
  console.log(
    `  targets: ≥ 100 MB/s ${mbps >= 100 ? "met" : "NOT met"}; peak RSS ≤ 300 MB ${r.maxRssMB <= 300 ? "met" : "NOT met"}`,
  );
}
console.log(`load average at end ${load()} (on a shared ${cpus().length}-CPU host, figures move with the load)`);
