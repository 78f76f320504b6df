// The simulator's /metrics: vLLM V1 families (names, types, labels, buckets) rendered the way
// prometheus_client renders them, in Prometheus text 0.0.4 or OpenMetrics 1.0.
import { readdirSync, readFileSync } from "node:fs";

/** vLLM's default bucket families (engine-metrics.md §1.2). */
export const BUCKETS = {
  requestLatency: [0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680],
  ttft: [
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560,
  ],
  itl: [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80],
  iterationTokens: [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384],
  paramsN: [1, 2, 5, 10, 20],
} as const;

/** vLLM's build_1_2_5_buckets(max_model_len). */
export function buckets125(max: number): number[] {
  const out: number[] = [];
  for (let exp = 0; ; exp++) {
    for (const m of [1, 2, 5]) {
      const v = m * 10 ** exp;
      if (v > max) return out;
      out.push(v);
    }
  }
}

/** Python's repr(float), then prometheus_client's floatToGoString (exponent above 1e7). */
export function goFloat(x: number): string {
  if (x === Number.POSITIVE_INFINITY) return "+Inf";
  if (x === Number.NEGATIVE_INFINITY) return "-Inf";
  if (Number.isNaN(x)) return "NaN";
  const s = pyRepr(x);
  const dot = s.indexOf(".");
  if (x > 0 && dot > 6) {
    let mant = `${s[0]}.${s.slice(1, dot)}${s.slice(dot + 1)}`;
    mant = mant.replace(/[0.]+$/, "");
    return `${mant}e+0${dot - 1}`;
  }
  return s;
}

/** Python repr() of a float: shortest round-trip digits, positional for 1e-4 <= |x| < 1e16. */
export function pyRepr(x: number): string {
  if (x === 0) return Object.is(x, -0) ? "-0.0" : "0.0";
  const neg = x < 0;
  const e = Math.abs(x).toExponential();
  const [mant, expStr] = e.split("e") as [string, string];
  const digits = mant.replace(".", "");
  const exp = Number(expStr);
  let out: string;
  if (exp >= -5 && exp < 16) {
    if (exp >= 0) {
      const intLen = exp + 1;
      const ip = digits.length > intLen ? digits.slice(0, intLen) : digits.padEnd(intLen, "0");
      const fp = digits.length > intLen ? digits.slice(intLen) : "0";
      out = `${ip}.${fp}`;
    } else out = `0.${"0".repeat(-exp - 1)}${digits}`;
    // Python switches to scientific below 1e-4.
    if (exp < -4) out = sci(digits, exp);
  } else out = sci(digits, exp);
  return neg ? `-${out}` : out;
}

function sci(digits: string, exp: number): string {
  const m = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
  const sign = exp < 0 ? "-" : "+";
  const a = Math.abs(exp);
  return `${m}e${sign}${a < 10 ? `0${a}` : a}`;
}

export class Histogram {
  readonly bounds: readonly number[];
  readonly counts: Float64Array;
  sum = 0;
  count = 0;
  constructor(bounds: readonly number[]) {
    this.bounds = bounds;
    this.counts = new Float64Array(bounds.length + 1);
  }
  observe(v: number): void {
    const b = this.bounds;
    let i = 0;
    while (i < b.length && v > b[i]!) i++;
    this.counts[i]!++;
    this.sum += v;
    this.count++;
  }
}

type Kind = "counter" | "gauge" | "histogram";
interface Family {
  name: string; // family name as prometheus_client declares it (counters without _total)
  kind: Kind;
  help: string;
  created: boolean;
  samples: () => Array<{ labels: Record<string, string>; value: number | Histogram }>;
}

const FINISH_REASONS = ["stop", "length", "abort", "error"] as const;
export type FinishReason = (typeof FINISH_REASONS)[number];

/** Every number the sim exposes; the engine updates the fields directly (hot path, no lookups). */
export class SimMetrics {
  readonly modelName: string;
  readonly createdAt: number;
  running = 0;
  waiting = 0;
  kvUsage = 0;
  prefixQueries = 0;
  prefixHits = 0;
  preemptions = 0;
  promptTokens = 0;
  generationTokens = 0;
  readonly success: Record<FinishReason, number> = { stop: 0, length: 0, abort: 0, error: 0 };
  readonly requestPromptTokens: Histogram;
  readonly requestGenerationTokens: Histogram;
  readonly iterationTokens = new Histogram(BUCKETS.iterationTokens);
  readonly requestMaxGenTokens: Histogram;
  readonly paramsN = new Histogram(BUCKETS.paramsN);
  readonly paramsMaxTokens: Histogram;
  readonly ttft = new Histogram(BUCKETS.ttft);
  readonly itl = new Histogram(BUCKETS.itl);
  readonly tpot = new Histogram(BUCKETS.itl);
  readonly e2e = new Histogram(BUCKETS.requestLatency);
  readonly queue = new Histogram(BUCKETS.requestLatency);
  readonly inference = new Histogram(BUCKETS.requestLatency);
  readonly prefill = new Histogram(BUCKETS.requestLatency);
  readonly decode = new Histogram(BUCKETS.requestLatency);
  specDrafts = 0;
  specDraftTokens = 0;
  specAccepted = 0;
  specAcceptedPerPos: number[] = [];
  readonly faults = new Map<string, number>();
  /**
   * The sim's clock speed-up (set by the Engine). Every duration the engine observes is multiplied by
   * it, so the histograms hold simulated seconds: what the profiled deployment itself would export.
   */
  timeScale = 1;
  private readonly families: Family[];

  constructor(opts: {
    modelName: string;
    maxModelLen: number;
    blockSize: number;
    numGpuBlocks: number;
    prefixCaching: boolean;
    specTokens: number;
    faultKinds: readonly string[];
    nowUnixS: number;
  }) {
    this.modelName = opts.modelName;
    this.createdAt = opts.nowUnixS;
    const tokBuckets = buckets125(opts.maxModelLen);
    this.requestPromptTokens = new Histogram(tokBuckets);
    this.requestGenerationTokens = new Histogram(tokBuckets);
    this.requestMaxGenTokens = new Histogram(tokBuckets);
    this.paramsMaxTokens = new Histogram(tokBuckets);
    for (const k of opts.faultKinds) this.faults.set(k, 0);
    this.specAcceptedPerPos = new Array(opts.specTokens).fill(0);
    const base = { engine: "0", model_name: opts.modelName };
    const one = (v: () => number | Histogram) => () => [{ labels: base, value: v() }];
    const F = (
      name: string,
      kind: Kind,
      help: string,
      samples: Family["samples"],
      created = kind !== "gauge",
    ): Family => ({
      name,
      kind,
      help,
      samples,
      created,
    });
    const fams: Family[] = [
      F(
        "vllm:num_requests_running",
        "gauge",
        "Number of requests in model execution batches.",
        one(() => this.running),
      ),
      F(
        "vllm:num_requests_waiting",
        "gauge",
        "Number of requests waiting to be processed.",
        one(() => this.waiting),
      ),
      F(
        "vllm:kv_cache_usage_perc",
        "gauge",
        "KV-cache usage. 1 means 100 percent usage.",
        one(() => this.kvUsage),
      ),
      F(
        "vllm:prefix_cache_queries",
        "counter",
        "Prefix cache queries, in terms of number of queried tokens.",
        one(() => this.prefixQueries),
      ),
      F(
        "vllm:prefix_cache_hits",
        "counter",
        "Prefix cache hits, in terms of number of cached tokens.",
        one(() => this.prefixHits),
      ),
      F(
        "vllm:num_preemptions",
        "counter",
        "Cumulative number of preemption from the engine.",
        one(() => this.preemptions),
      ),
      F(
        "vllm:prompt_tokens",
        "counter",
        "Number of prefill tokens processed.",
        one(() => this.promptTokens),
      ),
      F(
        "vllm:generation_tokens",
        "counter",
        "Number of generation tokens processed.",
        one(() => this.generationTokens),
      ),
      F("vllm:request_success", "counter", "Count of successfully processed requests.", () =>
        FINISH_REASONS.map((r) => ({ labels: { ...base, finished_reason: r }, value: this.success[r] })),
      ),
      F(
        "vllm:request_prompt_tokens",
        "histogram",
        "Number of prefill tokens processed.",
        one(() => this.requestPromptTokens),
      ),
      F(
        "vllm:request_generation_tokens",
        "histogram",
        "Number of generation tokens processed.",
        one(() => this.requestGenerationTokens),
      ),
      F(
        "vllm:iteration_tokens_total",
        "histogram",
        "Histogram of number of tokens per engine_step.",
        one(() => this.iterationTokens),
      ),
      F(
        "vllm:request_max_num_generation_tokens",
        "histogram",
        "Histogram of maximum number of requested generation tokens.",
        one(() => this.requestMaxGenTokens),
      ),
      F(
        "vllm:request_params_n",
        "histogram",
        "Histogram of the n request parameter.",
        one(() => this.paramsN),
      ),
      F(
        "vllm:request_params_max_tokens",
        "histogram",
        "Histogram of the max_tokens request parameter.",
        one(() => this.paramsMaxTokens),
      ),
      F(
        "vllm:time_to_first_token_seconds",
        "histogram",
        "Histogram of time to first token in seconds.",
        one(() => this.ttft),
      ),
      F(
        "vllm:inter_token_latency_seconds",
        "histogram",
        "Histogram of inter-token latency in seconds.",
        one(() => this.itl),
      ),
      F(
        "vllm:request_time_per_output_token_seconds",
        "histogram",
        "Histogram of time_per_output_token_seconds per request.",
        one(() => this.tpot),
      ),
      F(
        "vllm:e2e_request_latency_seconds",
        "histogram",
        "Histogram of e2e request latency in seconds.",
        one(() => this.e2e),
      ),
      F(
        "vllm:request_queue_time_seconds",
        "histogram",
        "Histogram of time spent in WAITING phase for request.",
        one(() => this.queue),
      ),
      F(
        "vllm:request_inference_time_seconds",
        "histogram",
        "Histogram of time spent in RUNNING phase for request.",
        one(() => this.inference),
      ),
      F(
        "vllm:request_prefill_time_seconds",
        "histogram",
        "Histogram of time spent in PREFILL phase for request.",
        one(() => this.prefill),
      ),
      F(
        "vllm:request_decode_time_seconds",
        "histogram",
        "Histogram of time spent in DECODE phase for request.",
        one(() => this.decode),
      ),
    ];
    if (opts.specTokens > 0) {
      fams.push(
        F(
          "vllm:spec_decode_num_drafts",
          "counter",
          "Number of spec decoding drafts.",
          one(() => this.specDrafts),
        ),
        F(
          "vllm:spec_decode_num_draft_tokens",
          "counter",
          "Number of draft tokens.",
          one(() => this.specDraftTokens),
        ),
        F(
          "vllm:spec_decode_num_accepted_tokens",
          "counter",
          "Number of accepted tokens.",
          one(() => this.specAccepted),
        ),
        F("vllm:spec_decode_num_accepted_tokens_per_pos", "counter", "Accepted tokens per draft position.", () =>
          this.specAcceptedPerPos.map((v, i) => ({ labels: { ...base, position: String(i) }, value: v })),
        ),
      );
    }
    fams.push(
      F(
        "vllm:cache_config_info",
        "gauge",
        "Information of the LLMEngine CacheConfig",
        () => [
          {
            labels: {
              block_size: String(opts.blockSize),
              cache_dtype: "auto",
              enable_prefix_caching: opts.prefixCaching ? "True" : "False",
              engine: "0",
              gpu_memory_utilization: "0.9",
              num_gpu_blocks: String(opts.numGpuBlocks),
            },
            value: 1,
          },
        ],
        false,
      ),
    );
    // Not a vLLM series: tells a consumer the *_seconds histograms above are simulated time, with the
    // sim's wall clock running this many times faster (wall seconds = simulated seconds / scale).
    fams.push(
      F(
        "inferscope_sim_time_scale",
        "gauge",
        "Simulated seconds per wall-clock second of inferscope sim; its *_seconds metrics are simulated time.",
        () => [{ labels: {}, value: this.timeScale }],
        false,
      ),
    );
    if (opts.faultKinds.length)
      fams.push(
        F(
          "inferscope_sim_faults",
          "counter",
          "Faults injected by inferscope sim, by kind.",
          () => [...this.faults].map(([kind, v]) => ({ labels: { kind }, value: v })),
          false,
        ),
      );
    this.families = fams;
  }

  countFault(kind: string): void {
    this.faults.set(kind, (this.faults.get(kind) ?? 0) + 1);
  }

  /** Renders the exposition; `openMetrics` selects OpenMetrics 1.0 (with `# EOF`). */
  render(openMetrics: boolean): string {
    const out: string[] = [];
    processFamilies(out, openMetrics);
    const created = goFloat(this.createdAt);
    for (const f of this.families) {
      const samples = f.samples();
      const famName = f.kind === "counter" ? (openMetrics ? f.name : `${f.name}_total`) : f.name;
      out.push(`# HELP ${famName} ${f.help}`, `# TYPE ${famName} ${f.kind}`);
      const createdLines: string[] = [];
      for (const s of samples) {
        const lbl = (extra?: [string, string]) => labelString(s.labels, extra);
        if (s.value instanceof Histogram) {
          const h = s.value;
          let cum = 0;
          for (let i = 0; i < h.bounds.length; i++) {
            cum += h.counts[i]!;
            out.push(`${f.name}_bucket${lbl(["le", goFloat(h.bounds[i]!)])} ${goFloat(cum)}`);
          }
          cum += h.counts[h.bounds.length]!;
          out.push(`${f.name}_bucket${lbl(["le", "+Inf"])} ${goFloat(cum)}`);
          out.push(`${f.name}_count${lbl()} ${goFloat(h.count)}`);
          out.push(`${f.name}_sum${lbl()} ${goFloat(h.sum)}`);
        } else {
          const sampleName = f.kind === "counter" ? `${f.name}_total` : f.name;
          out.push(`${sampleName}${lbl()} ${goFloat(s.value)}`);
        }
        if (f.created) createdLines.push(`${createdName(f)}${lbl()} ${created}`);
      }
      if (f.created && createdLines.length) {
        if (openMetrics) out.push(...createdLines);
        else out.push(`# HELP ${createdName(f)} ${f.help}`, `# TYPE ${createdName(f)} gauge`, ...createdLines);
      }
    }
    if (openMetrics) out.push("# EOF");
    return `${out.join("\n")}\n`;
  }
}

function createdName(f: Family): string {
  return `${f.name}_created`;
}

function escapeLabel(v: string): string {
  return v.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"');
}

function labelString(labels: Record<string, string>, extra?: [string, string]): string {
  const entries = Object.entries(labels);
  if (extra) entries.push(extra);
  if (!entries.length) return "";
  entries.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  return `{${entries.map(([k, v]) => `${k}="${escapeLabel(v)}"`).join(",")}}`;
}

const START_TIME_S = Date.now() / 1000 - process.uptime();

/** prometheus_client's ProcessCollector families, from /proc where available. */
function processFamilies(out: string[], openMetrics: boolean): void {
  let vsize = 0;
  let rss = process.memoryUsage.rss();
  let openFds = 0;
  let maxFds = 0;
  try {
    const stat = readFileSync("/proc/self/stat", "utf8");
    const parts = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    vsize = Number(parts[20]);
    rss = Number(parts[21]) * 4096;
  } catch {
    /* not Linux */
  }
  try {
    const limits = readFileSync("/proc/self/limits", "utf8");
    const m = /Max open files\s+(\d+)/.exec(limits);
    if (m) maxFds = Number(m[1]);
    openFds = readdirSync("/proc/self/fd").length;
  } catch {
    /* not Linux */
  }
  const cpu = process.cpuUsage();
  const g = (name: string, help: string, v: number) =>
    out.push(`# HELP ${name} ${help}`, `# TYPE ${name} gauge`, `${name} ${goFloat(v)}`);
  g("process_virtual_memory_bytes", "Virtual memory size in bytes.", vsize);
  g("process_resident_memory_bytes", "Resident memory size in bytes.", rss);
  g("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", START_TIME_S);
  const cpuName = openMetrics ? "process_cpu_seconds" : "process_cpu_seconds_total";
  out.push(
    `# HELP ${cpuName} Total user and system CPU time spent in seconds.`,
    `# TYPE ${cpuName} counter`,
    `process_cpu_seconds_total ${goFloat((cpu.user + cpu.system) / 1e6)}`,
  );
  g("process_open_fds", "Number of open file descriptors.", openFds);
  g("process_max_fds", "Maximum number of open file descriptors.", maxFds);
}
