// npm run bench:startup — start-up cost of the compiled CLI against `node -e 0` in the same run
// (interleaved, medians, ratios), and `inferscope trace` on a 48 MB generated trace, whole process,
// against pandas' load-and-group-by of the same file. Targets: --version ≤ 2.0×, model predict
// --json ≤ 3.0×, trace ≥ 3× faster than pandas. Also shown, without a target: metrics scrape of a
// saved file, model predict with the build's precomputed priors turned off (INFERSCOPE_PRIORS_CACHE=0:
// the corpus parsed and fitted in the process, as before the build wrote them), and bench against a closed
// port with and without the second start a load loop's command takes for its flags (src/cli/launch.mjs).
// Needs dist/ (the npm script builds it if stale); BENCH_STARTUP_DIST=DIR measures another build.
//   BENCH_STARTUP_RUNS=21 BENCH_STARTUP_TRACE_MB=48 npm run bench:startup
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { generateTrace } from "./gen-trace.ts";

const DIST = process.env.BENCH_STARTUP_DIST ?? "dist";
const MAIN = join(DIST, "cli", "main.js");
if (!existsSync(MAIN)) {
  console.error(`${MAIN} is missing: run npm run build first`);
  process.exit(2);
}
const runs = Number(process.env.BENCH_STARTUP_RUNS ?? 21);
const traceMb = Number(process.env.BENCH_STARTUP_TRACE_MB ?? 48);
const median = (xs: number[]) => xs.slice().sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!;

function timeRun(cmd: string, args: string[], env?: Record<string, string>, status = 0): number {
  const t0 = performance.now();
  const r = spawnSync(cmd, args, {
    stdio: ["ignore", "ignore", "pipe"],
    maxBuffer: 1 << 24,
    env: env ? { ...process.env, ...env } : undefined,
  });
  const ms = performance.now() - t0;
  if (r.status !== status) throw new Error(`${cmd} ${args.join(" ")} exited ${r.status}: ${r.stderr}`);
  return ms;
}

console.log(`host: ${cpus().length} CPUs (${cpus()[0]?.model}), load average ${loadavg()[0]!.toFixed(1)} at start`);
const predict = ["model", "predict", "--model", "glm-5", "--quant", "nvfp4", "--gpu", "rtx-pro-6000", "--gpus", "8"];
predict.push("--tp", "8", "--interconnect", "pcie5", "--json");
// Whether this build's precomputed priors load (else model predict fits the corpus, and the figure says so).
const priors = await import(pathToFileURL(join(DIST, "model", "priors.js")).href);
const cache = priors.shippedCacheStatus();
console.log(
  `precomputed priors (${join(DIST, "model", "priors-fit.json")}): ${cache.ok ? "loaded" : `NOT used: ${cache.detail}`}`,
);
const prom = "test/metrics/fixtures/engine-vllm-v0.prom";
// A load loop's command re-executes itself once with --no-memory-reducer where Node can (src/cli/launch.mjs):
// bench against a closed port (exit 3) as it starts, and the same with the flag given (no second start).
const unreachable = [MAIN, "bench", "--base-url", "http://127.0.0.1:9", "--num-prompts", "1"];
const cases: Record<string, string[]> = {
  "node -e 0": ["-e", "0"],
  "inferscope --version": [MAIN, "--version"],
  "inferscope model predict … --json": [MAIN, ...predict],
  "inferscope metrics scrape FILE --json": [MAIN, "metrics", "scrape", prom, "--json"],
  "inferscope bench, unreachable (exit 3)": unreachable,
  "  … flag given, no second start": ["--no-memory-reducer", ...unreachable],
};
const status = (name: string) => (name.startsWith("inferscope bench") || name.startsWith("  … flag") ? 3 : 0);
const times: Record<string, number[]> = Object.fromEntries(Object.keys(cases).map((k) => [k, []]));
for (const [name, args] of Object.entries(cases)) timeRun(process.execPath, args, undefined, status(name)); // warm the page cache
for (let i = 0; i < runs; i++)
  for (const [name, args] of Object.entries(cases))
    times[name]!.push(timeRun(process.execPath, args, undefined, status(name)));
const base = median(times["node -e 0"]!);
const budget: Record<string, number> = { "inferscope --version": 2.0, "inferscope model predict … --json": 3.0 };
// The same prediction with the corpus fitted per process (one run: a fit of ~1,200 rows takes ~30 s of CPU).
const fitRuns = 1;
times["  … priors fitted per process"] = Array.from({ length: fitRuns }, () =>
  timeRun(process.execPath, [MAIN, ...predict], { INFERSCOPE_PRIORS_CACHE: "0" }),
);
for (const [name, xs] of Object.entries(times)) {
  const m = median(xs);
  const ratio = m / base;
  const target = budget[name];
  console.log(
    `${name.padEnd(38)} median ${m.toFixed(1)} ms over ${xs.length} runs  ${ratio.toFixed(2)}× node -e 0${target ? `  target ≤ ${target.toFixed(1)}× ${ratio <= target ? "met" : "NOT met"}` : ""}`,
  );
}

const py = "/usr/bin/python3";
const dir = mkdtempSync(join(tmpdir(), "inferscope-startup-"));
try {
  const file = join(dir, "decode.pt.trace.json");
  await generateTrace(file, { targetBytes: traceMb * 1e6, seed: 5 });
  const ours: number[] = [];
  for (let i = 0; i < 3; i++) ours.push(timeRun(process.execPath, [MAIN, "trace", file, "--json"]));
  if (!existsSync(py) || spawnSync(py, ["-c", "import pandas"]).status !== 0)
    console.log("pandas comparison skipped: /usr/bin/python3 with pandas not found");
  else {
    const script = `
import json, sys
import pandas as pd
with open(sys.argv[1]) as f:
    events = json.load(f)["traceEvents"]
df = pd.DataFrame(events)
k = df[df["cat"] == "kernel"].groupby("name")["dur"].sum()
print(len(k))
`;
    const theirs: number[] = [];
    for (let i = 0; i < 3; i++) theirs.push(timeRun(py, ["-c", script, file]));
    const ratio = median(theirs) / median(ours);
    console.log(
      `trace ${traceMb} MB, whole process: inferscope median ${median(ours).toFixed(0)} ms vs python3 pandas load + group-by ${median(theirs).toFixed(0)} ms: ${ratio.toFixed(1)}× faster — target ≥ 3× ${ratio >= 3 ? "met" : "NOT met"}`,
    );
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
console.log(`load average at end ${loadavg()[0]!.toFixed(1)}`);
