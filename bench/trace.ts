// npm run bench:trace — trace analysis throughput and peak memory on a ≥ 1 GB generated decode
// trace (in /tmp, reused between runs), each analysis in a child process whose maxRSS is its own;
// plus the pandas equivalent ("load events into a DataFrame, group kernel time by name") on a
// smaller file, timed in the same run, when /usr/bin/python3 has pandas: the analysis alone against
// pandas' own timer (target ≥ 5×), and the whole `inferscope trace FILE --json` process of the
// compiled CLI against the whole python3 process (target ≥ 3×). The analysis runs the compiled
// code (dist/, built if stale), as the CLI does; on the cores it finds (at most 4), and on one
// thread for comparison.
//   BENCH_TRACE_MB=1100 BENCH_TRACE_PANDAS_MB=150 npm run bench:trace
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { join } from "node:path";
import { generateTrace } from "./gen-trace.ts";

interface ChildResult {
  ms: number;
  /** CPU time of the analysis (user + system): less sensitive than wall time to other load. */
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

function runChild(file: string, threads?: number): ChildResult {
  const args = ["--import", "tsx", "bench/trace.ts", "--child", file, ...(threads ? [String(threads)] : [])];
  const r = spawnSync(process.execPath, args, {
    encoding: "utf8",
    maxBuffer: 1 << 20,
  });
  if (r.status !== 0) throw new Error(`analysis child failed: ${r.stderr}`);
  return JSON.parse(r.stdout.trim().split("\n").pop()!);
}

function checkTruth(got: Record<string, number>, truth: Record<string, number>): string {
  const worst = Object.entries(truth).reduce((w, [c, us]) => Math.max(w, Math.abs((got[c] ?? 0) - us) / us), 0);
  return `${(worst * 100).toExponential(1)} % worst per-class deviation from the generator's truth`;
}

const median = (xs: number[]) => xs.slice().sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!;
const bigMb = Number(process.env.BENCH_TRACE_MB ?? 1100);
const pandasMb = Number(process.env.BENCH_TRACE_PANDAS_MB ?? 150);
console.log(`host: ${cpus().length} CPUs (${cpus()[0]?.model}), load average ${loadavg()[0]!.toFixed(1)} at start`);

const built = spawnSync(process.execPath, ["scripts/build.mjs", "--if-stale"], { encoding: "utf8" });
if (built.status !== 0) throw new Error(`the build failed: ${built.stderr.slice(-500)}`);
const big = await ensure(bigMb);
const r = runChild(big.file);
const mbps = r.jsonBytes / 1e6 / (r.ms / 1000);
console.log(
  `inferscope trace, ${(r.jsonBytes / 1e6).toFixed(0)} MB decode trace (${r.kernels} GPU activities, ${r.steps} steps), read on ${r.threads} thread(s): ${(r.ms / 1000).toFixed(1)} s = ${mbps.toFixed(0)} MB/s, peak RSS ${r.maxRssMB.toFixed(0)} MB; ${checkTruth(r.kernelUsByClass, big.truth)}`,
);
console.log(
  `  targets: ≥ 100 MB/s ${mbps >= 100 ? "met" : "NOT met"}; peak RSS ≤ 300 MB ${r.maxRssMB <= 300 ? "met" : "NOT met"}`,
);

const py = "/usr/bin/python3";
const hasPandas = existsSync(py) && spawnSync(py, ["-c", "import pandas"], { encoding: "utf8" }).status === 0;
if (!hasPandas) console.log("pandas comparison skipped: /usr/bin/python3 with pandas not found");
else {
  // json.load of the whole file holds every event as a dict: ~10× the file in RAM, so a smaller file.
  const small = await ensure(pandasMb);
  const script = `
import json, resource, sys, time
import pandas as pd
t0 = time.perf_counter()
c0 = time.process_time()
with open(sys.argv[1]) as f:
    events = json.load(f)["traceEvents"]
df = pd.DataFrame(events)
k = df[df["cat"] == "kernel"].groupby("name")["dur"].sum()
t1 = time.perf_counter()
c1 = time.process_time()
print(json.dumps({"ms": (t1 - t0) * 1000, "cpuMs": (c1 - c0) * 1000, "maxRssMB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "kernels": int((df["cat"] == "kernel").sum()), "names": len(k)}))
`;
  // Three rounds, interleaved so drift in the host's load hits all three alike: inferscope on the
  // cores it finds, inferscope on one thread, pandas (timed by its own clock and as a process).
  const ours: ChildResult[] = [];
  const one: ChildResult[] = [];
  const pandas: Array<{ ms: number; cpuMs: number; wallMs: number; maxRssMB: number }> = [];
  let failed: string | undefined;
  for (let i = 0; i < 3 && !failed; i++) {
    ours.push(runChild(small.file));
    one.push(runChild(small.file, 1));
    const t0 = performance.now();
    const p = spawnSync(py, ["-c", script, small.file], { encoding: "utf8", maxBuffer: 1 << 20 });
    const wallMs = performance.now() - t0;
    if (p.status !== 0) failed = p.stderr.slice(-500);
    else pandas.push({ ...JSON.parse(p.stdout.trim().split("\n").pop()!), wallMs });
  }
  if (failed) console.log(`pandas run failed: ${failed}`);
  else {
    const pandasMs = median(pandas.map((x) => x.ms));
    const oursMs = median(ours.map((x) => x.ms));
    const oneMs = median(one.map((x) => x.ms));
    const ratio = pandasMs / oursMs;
    const cpu = (xs: Array<{ cpuMs: number }>) => median(xs.map((x) => x.cpuMs));
    console.log(
      `same ${(ours[0]!.jsonBytes / 1e6).toFixed(0)} MB file: inferscope full analysis on ${ours[0]!.threads} thread(s) median ${(oursMs / 1000).toFixed(2)} s (CPU ${(cpu(ours) / 1000).toFixed(2)} s, peak RSS ${median(ours.map((x) => x.maxRssMB)).toFixed(0)} MB) vs pandas json.load + DataFrame + group kernel time by name median ${(pandasMs / 1000).toFixed(2)} s (peak RSS ${median(pandas.map((x) => x.maxRssMB)).toFixed(0)} MB): ${ratio.toFixed(1)}× faster — target ≥ 5× ${ratio >= 5 ? "met" : "NOT met"}`,
    );
    console.log(
      `  one thread: median ${(oneMs / 1000).toFixed(2)} s (CPU ${(cpu(one) / 1000).toFixed(2)} s): ${(pandasMs / oneMs).toFixed(1)}× pandas; ${ours[0]!.threads} threads are ${(oneMs / oursMs).toFixed(2)}× one`,
    );
    // pandas is single-threaded: CPU time shows what other load on the host takes out of the wall ratio.
    console.log(
      `  CPU time: pandas ${(cpu(pandas) / 1000).toFixed(2)} s vs inferscope on one thread ${(cpu(one) / 1000).toFixed(2)} s: ${(cpu(pandas) / cpu(one)).toFixed(1)}×; on ${ours[0]!.threads}: ${(cpu(pandas) / cpu(ours)).toFixed(1)}× (all threads' CPU counted)`,
    );
    console.log(
      `  (pandas on the ${pandasMb} MB file, not the ${bigMb} MB one: json.load needs ~10× the file size in RAM)`,
    );
    wholeProcess(small.file, median(pandas.map((x) => x.wallMs)));
  }
}

/** `inferscope trace FILE --json` as a user runs it (compiled CLI, start-up included), median of 3. */
function wholeProcess(file: string, pandasWallMs: number): void {
  // dist/ was built (if stale) at the start.
  const walls: number[] = [];
  for (let i = 0; i < 3; i++) {
    const t0 = performance.now();
    const r = spawnSync(process.execPath, ["dist/cli/main.js", "trace", file, "--json"], {
      stdio: ["ignore", "ignore", "pipe"],
      encoding: "utf8",
    });
    walls.push(performance.now() - t0);
    if (r.status !== 0) {
      console.log(`whole-process run failed (exit ${r.status}): ${r.stderr.slice(-300)}`);
      return;
    }
  }
  const ms = median(walls);
  const ratio = pandasWallMs / ms;
  console.log(
    `whole process, same file: inferscope trace FILE --json (dist/, start-up included) median ${(ms / 1000).toFixed(2)} s vs the python3 pandas script as a process median ${(pandasWallMs / 1000).toFixed(2)} s: ${ratio.toFixed(1)}× faster — target ≥ 3× ${ratio >= 3 ? "met" : "NOT met"}`,
  );
}
console.log(
  `load average at end ${loadavg()[0]!.toFixed(1)} (on a shared ${cpus().length}-CPU host, figures scale with load)`,
);
