// Parse throughput: a synthesized ≥ 20 MB vLLM V1-style exposition, the conformance inputs, heap per
// sample, and Debian's python3-prometheus-client on the same bytes in the same run, as alternating
// pairs (ours, theirs, …) with the load average printed beside each.
// Run: npm run bench:metrics  [-- --mb 20 --runs 7 --pairs 9]

import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { parseExposition } from "../src/metrics/parse.ts";
import type { Exposition, ExpositionFormat } from "../src/metrics/types.ts";

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

function arg(name: string, def: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : def;
}
const targetMb = arg("mb", 20);
const runs = arg("runs", 7);

// vLLM V1 default bucket families (engine-metrics.md §1.2).
const REQUEST_LATENCY = [0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680];
const TTFT = [
  0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560,
];
const ITL = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80];
const ITER_TOKENS = [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384];
const PARAMS_N = [1, 2, 5, 10, 20];
const PREEMPTIONS = [1, 2, 3, 4, 5, 10, 20];
const REQUEST_TOKENS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000];

const HISTOGRAMS: Array<[string, number[], string]> = [
  ["vllm:iteration_tokens_total", ITER_TOKENS, "Histogram of number of tokens per engine_step."],
  ["vllm:time_to_first_token_seconds", TTFT, "Histogram of time to first token in seconds."],
  ["vllm:inter_token_latency_seconds", ITL, "Histogram of inter-token latency in seconds."],
  ["vllm:request_time_per_output_token_seconds", ITL, "Histogram of time_per_output_token_seconds per request."],
  ["vllm:e2e_request_latency_seconds", REQUEST_LATENCY, "Histogram of e2e request latency in seconds."],
  ["vllm:request_queue_time_seconds", REQUEST_LATENCY, "Histogram of time spent in WAITING phase for request."],
  ["vllm:request_inference_time_seconds", REQUEST_LATENCY, "Histogram of time spent in RUNNING phase for request."],
  ["vllm:request_prefill_time_seconds", REQUEST_LATENCY, "Histogram of time spent in PREFILL phase for request."],
  ["vllm:request_decode_time_seconds", REQUEST_LATENCY, "Histogram of time spent in DECODE phase for request."],
  ["vllm:request_prompt_tokens", REQUEST_TOKENS, "Number of prefill tokens processed."],
  ["vllm:request_generation_tokens", REQUEST_TOKENS, "Number of generation tokens processed."],
  [
    "vllm:request_max_num_generation_tokens",
    REQUEST_TOKENS,
    "Histogram of maximum number of requested generation tokens.",
  ],
  ["vllm:request_params_max_tokens", REQUEST_TOKENS, "Histogram of the max_tokens request parameter."],
  ["vllm:request_params_n", PARAMS_N, "Histogram of the n request parameter."],
  ["vllm:request_num_preemptions", PREEMPTIONS, "Number of preemptions per request."],
];
const GAUGES = ["vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"];
const COUNTERS = [
  "vllm:prefix_cache_queries",
  "vllm:prefix_cache_hits",
  "vllm:num_preemptions",
  "vllm:prompt_tokens",
  "vllm:generation_tokens",
];

/** Python-repr float text as prometheus_client writes it (`1.0`, `0.3`, `1e-05`). */
function py(v: number): string {
  if (Number.isInteger(v) && Math.abs(v) < 1e16) return `${v}.0`;
  const s = String(v);
  return s.replace(/e([+-])(\d)$/, "e$10$2");
}

/** A prometheus_client 0.0.4 body as vLLM V1 serves it (labels sorted, `_created` as separate gauges). */
function synthesize(targetBytes: number): { text: string; labelSets: number } {
  // ~34 KB per (model, engine) label set.
  const perSet = 34_000;
  const sets = Math.max(1, Math.ceil(targetBytes / perSet));
  const models = Math.min(8, sets);
  const engines = Math.ceil(sets / models);
  const labelSets: Array<{ engine: string; model: string }> = [];
  for (let m = 0; m < models; m++) {
    for (let e = 0; e < engines; e++)
      labelSets.push({ engine: String(e), model: `org-${m}/Llama-3.1-8B-Instruct-${m}` });
  }
  let seed = 12345;
  const rnd = (): number => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed / 0x7fffffff;
  };
  const out: string[] = [];
  const created = 1.7537953269352946e9;
  for (const g of GAUGES) {
    out.push(`# HELP ${g} Gauge ${g}.`, `# TYPE ${g} gauge`);
    for (const l of labelSets)
      out.push(`${g}{engine="${l.engine}",model_name="${l.model}"} ${py(Math.floor(rnd() * 64))}`);
  }
  for (const c of COUNTERS) {
    out.push(`# HELP ${c}_total Counter ${c}.`, `# TYPE ${c}_total counter`);
    for (const l of labelSets)
      out.push(`${c}_total{engine="${l.engine}",model_name="${l.model}"} ${py(Math.floor(rnd() * 1e7))}`);
    out.push(`# HELP ${c}_created Counter ${c}.`, `# TYPE ${c}_created gauge`);
    for (const l of labelSets) out.push(`${c}_created{engine="${l.engine}",model_name="${l.model}"} ${py(created)}`);
  }
  for (const [name, bounds, help] of HISTOGRAMS) {
    out.push(`# HELP ${name} ${help}`, `# TYPE ${name} histogram`);
    for (const l of labelSets) {
      let cum = 0;
      for (const b of bounds) {
        cum += Math.floor(rnd() * 500);
        out.push(`${name}_bucket{engine="${l.engine}",le="${py(b)}",model_name="${l.model}"} ${py(cum)}`);
      }
      cum += Math.floor(rnd() * 10);
      out.push(`${name}_bucket{engine="${l.engine}",le="+Inf",model_name="${l.model}"} ${py(cum)}`);
      out.push(`${name}_count{engine="${l.engine}",model_name="${l.model}"} ${py(cum)}`);
      out.push(`${name}_sum{engine="${l.engine}",model_name="${l.model}"} ${py(cum * rnd() * 0.05)}`);
    }
    out.push(`# HELP ${name}_created ${help}`, `# TYPE ${name}_created gauge`);
    for (const l of labelSets) out.push(`${name}_created{engine="${l.engine}",model_name="${l.model}"} ${py(created)}`);
  }
  return { text: `${out.join("\n")}\n`, labelSets: labelSets.length };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

function countSamples(e: Exposition): number {
  let n = 0;
  for (const f of e.families) n += f.samples.length;
  return n;
}

/** Wall-clock and CPU time (this process, all threads: GC helpers included) per parse, medians. */
function timeParse(
  text: string,
  format: ExpositionFormat,
  n: number,
): { mbps: number; ms: number; cpuMbps: number; cpuMs: number; exp: Exposition } {
  const bytes = Buffer.byteLength(text);
  const times: number[] = [];
  const cpu: number[] = [];
  let exp: Exposition | undefined;
  for (let i = 0; i < n; i++) {
    exp = undefined;
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    exp = parseExposition(text, { format });
    times.push(performance.now() - t0);
    const c = process.cpuUsage(c0);
    cpu.push((c.user + c.system) / 1000);
  }
  const ms = median(times);
  const cpuMs = median(cpu);
  return { mbps: bytes / 1e6 / (ms / 1000), ms, cpuMbps: bytes / 1e6 / (cpuMs / 1000), cpuMs, exp: exp as Exposition };
}

// ---- synthesized vLLM exposition ----
const load = loadavg()[0];
console.log(
  `machine: ${cpus().length} CPUs, load average ${load.toFixed(1)}${load > cpus().length ? " (busy: wall-clock figures are inflated; CPU-time figures are steadier)" : ""}`,
);
const { text, labelSets } = synthesize(targetMb * 1e6);
const bytes = Buffer.byteLength(text);
if (process.env.BENCH_DUMP) writeFileSync(process.env.BENCH_DUMP, text);
timeParse(text, "prometheus-0.0.4", 2); // warm-up
const main = timeParse(text, "prometheus-0.0.4", runs);
const samples = countSamples(main.exp);
console.log(
  `synthesized vLLM V1 exposition: ${(bytes / 1e6).toFixed(1)} MB, ${labelSets} label sets, ` +
    `${main.exp.families.length} families, ${samples} samples`,
);
console.log(
  `  parse: median ${main.ms.toFixed(1)} ms wall over ${runs} runs = ${main.mbps.toFixed(1)} MB/s; ` +
    `CPU ${main.cpuMs.toFixed(1)} ms = ${main.cpuMbps.toFixed(1)} MB/s of CPU time (target ≥ 100 MB/s)`,
);

// Heap retained by the parsed result.
main.exp = undefined as unknown as Exposition;
gc();
gc();
const before = process.memoryUsage().heapUsed;
let kept: Exposition | undefined = parseExposition(text, { format: "prometheus-0.0.4" });
gc();
gc();
const after = process.memoryUsage().heapUsed;
console.log(
  `  heap: ${((after - before) / 1e6).toFixed(1)} MB retained = ${((after - before) / samples).toFixed(0)} bytes per sample`,
);
if (countSamples(kept) !== samples) throw new Error("sample count changed between runs");
kept = undefined;

// Same body as OpenMetrics would be parsed in lenient mode too (no # EOF → one warning).
const omText = `${text}# EOF\n`;
const om = timeParse(omText, "openmetrics-1.0", Math.max(3, runs >> 1));
console.log(`  as OpenMetrics (lenient): ${om.mbps.toFixed(1)} MB/s wall, ${om.cpuMbps.toFixed(1)} MB/s CPU`);
// Release every parsed result so the small-input runs below do not pay for a large live heap.
om.exp = undefined as unknown as Exposition;
gc();

// Same body with Prometheus 3 UTF-8 names: every metric name quoted in the braces (`vllm:x` →
// `{"vllm.x", ...}`) and one quoted label name. These lines take the parser's slow path (no
// label-set table), so this is the floor for UTF-8 bodies, not the legacy-name figure.
const dotted = (n: string): string => n.replace(/:/g, ".");
const utf8Text = text
  .replace(/^# (HELP|TYPE) ([^ ]+)/gm, (_m, kw: string, n: string) => `# ${kw} "${dotted(n)}"`)
  .replace(/^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{| )/gm, (_m, n: string, c: string) =>
    c === "{" ? `{"${dotted(n)}",` : `{"${dotted(n)}"} `,
  )
  .replace(/model_name=/g, '"model.name"=');
const utf8 = timeParse(utf8Text, "prometheus-0.0.4", Math.max(3, runs >> 1));
if (countSamples(utf8.exp) !== samples) throw new Error("UTF-8 body: sample count differs");
console.log(
  `  same body with quoted UTF-8 names (slow path): ${utf8.mbps.toFixed(1)} MB/s wall, ${utf8.cpuMbps.toFixed(1)} MB/s CPU`,
);
utf8.exp = undefined as unknown as Exposition;
gc();

// ---- conformance inputs ----
const shared = fileURLToPath(new URL("../../shared/conformance/", import.meta.url));
if (existsSync(shared)) {
  const inputs: Array<{ name: string; text: string; format: ExpositionFormat }> = [];
  const tp = join(shared, "prometheus-textparse");
  for (const f of readdirSync(tp)
    .filter((x) => x.endsWith(".txt"))
    .sort()) {
    inputs.push({
      name: `prometheus-textparse/${f}`,
      text: readFileSync(join(tp, f), "utf8"),
      format: f.includes(".om.") ? "openmetrics-1.0" : "prometheus-0.0.4",
    });
  }
  let totalBytes = 0;
  let totalMs = 0;
  let totalCpuMs = 0;
  for (const inp of inputs) {
    const reps = Math.max(20, Math.ceil(20e6 / Buffer.byteLength(inp.text)));
    for (let i = 0; i < 50; i++) parseExposition(inp.text, { format: inp.format });
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    for (let i = 0; i < reps; i++) parseExposition(inp.text, { format: inp.format });
    const ms = (performance.now() - t0) / reps;
    const c = process.cpuUsage(c0);
    const cms = (c.user + c.system) / 1000 / reps;
    const b = Buffer.byteLength(inp.text);
    totalBytes += b;
    totalMs += ms;
    totalCpuMs += cms;
    console.log(
      `  ${inp.name}: ${(b / 1e3).toFixed(1)} kB, ${(b / 1e6 / (ms / 1000)).toFixed(1)} MB/s wall, ${(b / 1e6 / (cms / 1000)).toFixed(1)} MB/s CPU`,
    );
  }
  // The 211 OpenMetrics cases are tiny; time them all together in strict mode.
  const omDir = join(shared, "openmetrics", "parsers");
  const cases = readdirSync(omDir).map((d) => readFileSync(join(omDir, d, "metrics"), "utf8"));
  const caseBytes = cases.reduce((a, c) => a + Buffer.byteLength(c), 0);
  const reps = 200;
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  for (let r = 0; r < reps; r++) {
    for (const c of cases) {
      try {
        parseExposition(c, { format: "openmetrics-1.0", strict: true });
      } catch {
        // 167 of them must be rejected.
      }
    }
  }
  const caseMs = (performance.now() - t0) / reps;
  const cc = process.cpuUsage(c0);
  const caseCpuMs = (cc.user + cc.system) / 1000 / reps;
  console.log(
    `  openmetrics/parsers: ${cases.length} cases (each a separate parse, most rejected), ${(caseBytes / 1e3).toFixed(1)} kB, strict, ` +
      `${(caseBytes / 1e6 / (caseMs / 1000)).toFixed(1)} MB/s wall, ${(caseBytes / 1e6 / (caseCpuMs / 1000)).toFixed(1)} MB/s CPU`,
  );
  totalBytes += caseBytes;
  totalMs += caseMs;
  totalCpuMs += caseCpuMs;
  console.log(
    `  conformance inputs aggregate: ${(totalBytes / 1e6 / (totalMs / 1000)).toFixed(1)} MB/s wall, ${(totalBytes / 1e6 / (totalCpuMs / 1000)).toFixed(1)} MB/s CPU`,
  );
} else {
  console.log(`  conformance inputs: SKIPPED (${shared} not found)`);
}

// ---- peer: python3-prometheus-client on the same bytes, in alternating pairs ----
// Each pair: one parse here (warm), then one python3 process timing its own parse of the file (its
// start-up and import outside the timer); the load average is printed beside every pair, and the
// ratio is the median of the pairs' ratios, so drift in the host's load hits both sides alike.
const probe = spawnSync("/usr/bin/python3", ["-c", "import prometheus_client"], { encoding: "utf8" });
if (probe.status === 0) {
  const dir = mkdtempSync(join(tmpdir(), "inferscope-bench-"));
  try {
    const file = join(dir, "vllm.prom");
    writeFileSync(file, text);
    const script = [
      "import sys, time",
      "from prometheus_client.parser import text_string_to_metric_families",
      "text = open(sys.argv[1], encoding='utf-8').read()",
      "t0 = time.perf_counter()",
      "c0 = time.process_time()",
      "n = 0",
      "for fam in text_string_to_metric_families(text):",
      "    n += len(fam.samples)",
      "print(time.perf_counter() - t0, time.process_time() - c0, n)",
    ].join("\n");
    const pairs = arg("pairs", 9);
    const ratios: number[] = [];
    const cpuRatios: number[] = [];
    const oursMs: number[] = [];
    const theirsMs: number[] = [];
    const loads: number[] = [];
    let pyN = "";
    for (let i = 0; i < pairs; i++) {
      const l = loadavg()[0];
      const o = timeParse(text, "prometheus-0.0.4", 1);
      o.exp = undefined as unknown as Exposition;
      const r = spawnSync("/usr/bin/python3", ["-c", script, file], { encoding: "utf8", maxBuffer: 1 << 20 });
      if (r.status !== 0) throw new Error(`python3 failed: ${r.stderr}`);
      const [secText, cpuText, nText] = r.stdout.trim().split(/\s+/);
      pyN = nText;
      const pyMs = Number(secText) * 1000;
      const pyCpuMs = Number(cpuText) * 1000;
      ratios.push(pyMs / o.ms);
      cpuRatios.push(pyCpuMs / o.cpuMs);
      oursMs.push(o.ms);
      theirsMs.push(pyMs);
      loads.push(l);
      console.log(
        `  pair ${i + 1} (load ${l.toFixed(1)}): inferscope ${o.ms.toFixed(0)} ms (CPU ${o.cpuMs.toFixed(0)}), prometheus_client ${pyMs.toFixed(0)} ms (CPU ${pyCpuMs.toFixed(0)}): ${(pyMs / o.ms).toFixed(2)}×`,
      );
      gc();
    }
    const r = median(ratios);
    const mb = (ms: number) => (bytes / 1e6 / (ms / 1000)).toFixed(1);
    console.log(
      `peer python3-prometheus-client text_string_to_metric_families (same bytes, ${pyN} samples), median of ${pairs} alternating pairs at load ${Math.min(...loads).toFixed(1)}–${Math.max(...loads).toFixed(1)}: ` +
        `inferscope ${mb(median(oursMs))} MB/s vs ${mb(median(theirsMs))} MB/s`,
    );
    console.log(
      `  inferscope is ${r.toFixed(2)}× faster by wall clock (pairs ${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)}), ${median(cpuRatios).toFixed(2)}× by CPU time — target ≥ 6× ${r >= 6 ? "met" : "NOT met"} (aim 8×)`,
    );
    if (Number(pyN) !== samples) console.log(`  note: python counted ${pyN} samples, inferscope ${samples}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
} else {
  console.log("peer python3-prometheus-client: SKIPPED (/usr/bin/python3 cannot import prometheus_client)");
}
