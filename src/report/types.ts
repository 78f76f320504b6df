// The study's result: plain data that every report writer (terminal, JSON, Markdown, HTML) renders.
// It is also what the run store keeps, so `inferscope report ID` can rebuild a report later.

/** How a number was obtained. Every number in a report carries one. */
export type Method = "measured" | "fitted" | "modelled" | "derived";

/** A number with its uncertainty and its provenance. low/high bound a ~95 % interval or a stated range. */
export interface Quantity {
  value: number;
  low?: number;
  high?: number;
  unit: string;
  method: Method;
  /** One short line: the formula or the source (e.g. "mean of 2,431 client per-token gaps; bootstrap 95 % CI"). */
  how: string;
}

/** `interrupted`: SIGINT/SIGTERM stopped it; what it had measured is kept where the phase returns partial data. */
export type PhaseStatus = "ok" | "skipped" | "failed" | "unavailable" | "interrupted";

export interface PhaseRecord {
  name: string;
  status: PhaseStatus;
  /** Why a phase did not run, or what went wrong. */
  reason?: string;
  durationMs: number;
}

/** Where a deployment fact came from: the server said it, the user gave it, the embedded sim's profile, or nobody. */
export type Provenance = "detected" | "given" | "profile" | "unknown";

export interface FieldSource {
  source: Provenance;
  /** The evidence: "GET /props build_info", "--tp", "server command -t 2", "profile glm5-…". */
  from?: string;
}

/** The deployment as the report shows it. A field nobody gave or detected is null (shown as "unknown"). */
export interface Deployment {
  model: string | null;
  quant: string | null;
  /** The device: a catalog GPU or CPU, or a described host. */
  gpu: string | null;
  gpus: number | null;
  tp: number | null;
  interconnect: string | null;
  engine: string | null;
  engineVersion?: string | null;
  /** "gpu" or "cpu" when known. */
  deviceKind?: "gpu" | "cpu" | null;
  /** The model id the server serves (/v1/models). */
  servedModel?: string | null;
  maxModelLen?: number | null;
  /** The architecture's own name (GGUF general.name, config.json, catalog). */
  modelName?: string | null;
  /** Per field: where its value came from (absent in results stored before provenance was recorded). */
  sources?: Partial<Record<DeploymentField, FieldSource>>;
}

export type DeploymentField =
  | "model"
  | "quant"
  | "gpu"
  | "gpus"
  | "tp"
  | "interconnect"
  | "engine"
  | "engineVersion"
  | "deviceKind"
  | "servedModel"
  | "maxModelLen"
  | "modelName";

export interface StudyMeta {
  tool: { name: string; version: string };
  startedAt: string;
  finishedAt: string;
  durationMs: number;
  quick: boolean;
  seed: number;
  target: {
    kind: "embedded-sim" | "url" | "server-cmd";
    url?: string;
    /** The server command with secrets redacted. */
    serverCommand?: string;
    profile?: string;
  };
  /** Wall-clock speed-up of the embedded sim; client-measured times were multiplied back by it (the sim's /metrics and trace are already in simulated time). */
  timeScale: number;
  deployment: Deployment;
  /** The study's own flags, as given (secrets redacted). */
  flags: Record<string, string | number | boolean | null>;
  environment: Record<string, string>;
  phases: PhaseRecord[];
  runId?: string;
}

export interface AuditFamily {
  name: string;
  type: string;
  /** request / step / operation / process / other */
  granularity: string;
  concept?: string;
  /** Current value over the window, already formatted (e.g. "mean 17.4 ms, n 1,203"). */
  value?: string;
}

export interface AuditSection {
  engine: string;
  engineVersion?: string;
  windowMs: number;
  families: AuditFamily[];
  /** What is not exposed and how to recover it. */
  gaps: Array<{ what: string; method: string; command?: string }>;
  notes: string[];
}

export interface LatencySection {
  requests: number;
  outputTokensPerRequest: number;
  promptTokens?: number;
  ttftMs: Quantity;
  itlMs: Quantity;
  tpotMs?: Quantity;
  e2eMs?: Quantity;
  decodeRate: Quantity;
  /** Raw samples for the histograms (simulated time). */
  ttftSamplesMs: number[];
  itlSamplesMs: number[];
  /** Per-token gaps of one representative request, in order (ITL over time). */
  itlOverTime: Array<{ request: number; token: number; ms: number }>;
  /** The server's own view over the same window, where /metrics was readable. */
  server?: { ttftMeanMs?: number; itlMeanMs?: number; steps?: number; note?: string };
  /** The bench cut into time slices (src/load/slices.ts), in the deployment's clock (simulated time for the sim). */
  slices?: LatencySlices;
  notes: string[];
}

export interface LatencySlices {
  widthS: number;
  /** Which request, completion or token belongs to which slice. */
  rule: string;
  rows: Array<{
    /** Slice start, seconds into the measured window. */
    t: number;
    arrivalsPerS: number;
    completedPerS: number;
    outputTokensPerS: number;
    /** Median TTFT and ITL of the slice (ms); absent when the slice measured none. */
    ttftP50Ms?: number;
    itlP50Ms?: number;
  }>;
}

export interface SweepSection {
  points: Array<{ outputTokens: number; e2eMs: number; predictedMs: number; residualMs: number }>;
  fixedMs: Quantity;
  perTokenMs: Quantity;
  /** Rate the decode converges to: 1000 / perTokenMs. */
  convergedRate: Quantity;
  r2?: number;
  notes: string[];
}

export interface AbArm {
  name: string;
  /** env/flags applied, e.g. "NCCL_PROTO=LL" or "(default)" */
  change: string;
  perTokenMs: Quantity;
  ttftMs?: Quantity;
  e2eMs?: Quantity;
  samples: number;
}

export interface AbSection {
  arms: AbArm[];
  /** baseline − treatment per-token time (positive = treatment faster). */
  deltaPerTokenMs: Quantity;
  deltaTtftMs?: Quantity;
  /** delta ÷ all-reduces per token. */
  deltaPerCallUs?: Quantity;
  callsPerToken?: number;
  pWelch?: number;
  pMannWhitney?: number;
  verdict: string;
  order?: string[];
  notes: string[];
  /** What the experiment tests (from the engine's knob registry, or "given by --variant"). */
  mechanism?: string;
  /** Why this experiment was chosen (or "given by --variant"). */
  chosenBecause?: string;
  /** Whether the change acts on a collective (only then is a per-all-reduce figure derived). */
  collective?: boolean;
}

/** The experiments the study considered for this engine and deployment. */
export interface ExperimentPlan {
  engine: string | null;
  chosen: string | null;
  /** Why the chosen one, or why none. */
  reason: string;
  candidates: Array<{ id: string; variant: string; mechanism: string; applies: boolean; why: string }>;
}

/** Server-reported per-request timings beside the client's (llama.cpp `timings`, TGI `x-*` headers). */
export interface ServerTimingSection {
  source: string;
  requests: number;
  /** Median over requests of the server's decode time per token (its own definition, named in `how`). */
  serverDecodeMsPerToken: Quantity;
  /** Median over the same requests of the client TPOT, (E2EL − TTFT)/(n − 1). */
  clientTpotMs: Quantity;
  /** Median of (client TPOT − server per-token) / server, %. */
  diffPct: number;
  /** Median |client − server| / server, %. */
  absDiffPct: number;
  serverPromptMs?: Quantity;
  clientTtftMs?: Quantity;
  /** Median client TTFT − server prompt time: transit, queueing and client overhead before the first token. */
  ttftOverheadMs?: number;
  notes: string[];
}

/** Each batch-1 request's TTFT split by the engine's own OTLP request span, joined to the client's record by id. */
export interface RequestSplitSection {
  source: string;
  requests: number;
  joined: number;
  joinRate: number;
  /** Server clock − client clock from the pairs (ms), its drift (ppm) and how many pairs gave it. */
  clock: { offsetMs: number; skewPpm: number; pairs: number } | null;
  /** The TTFT parts in order (they add up to the client's TTFT), then the server's own figures. */
  rows: Array<{ key: string; label: string; mean: number; p50: number; p90: number; p99: number; n: number }>;
  /** Per request, ms (the first 200 joined, in send order). */
  perRequest: Array<{
    index: number;
    networkMs: number;
    intakeMs: number;
    queueMs: number;
    prefillMs: number;
    deliveryMs: number;
    clientTtftMs: number;
  }>;
  findings: string[];
}

export interface TraceSection {
  steps: number;
  decodeSteps: number;
  stepMs: Quantity;
  perClass: Array<{ cls: string; msPerStep: number; share: number; kernelsPerStep?: number }>;
  idleMsPerStep: number;
  allReduceCallsPerStep: number;
  allReducePerCallUs: Quantity;
  allReduceShare: Quantity;
  kernelNames: string[];
  files: string[];
  notes: string[];
  /** How steps were told apart (annotation, profiler-step, graph, period, gap, none). */
  stepMode?: string;
  /** The layer period inside a step: per-layer time with its spread, per-op table, head and tail. */
  layers?: TraceLayers;
  /** Per weight-GEMM roofline and the step beside the model, term by term. */
  roofline?: TraceRoofline;
}

export interface TraceLayers {
  layers: number;
  kernelsPerLayer: number;
  layerUs: { mean: number; min: number; max: number; cv: number };
  ops: Array<{ index: number; name: string; cls: string; meanUs: number; minUs: number; maxUs: number; cv: number }>;
  head: { kernels: number; us: number };
  tail: { kernels: number; us: number };
}

export interface TraceRoofline {
  model: string;
  gpu: string;
  ceilingGBs: number;
  ceilingIs: string;
  gemms: Array<{ name: string; mb: number; us: number; achievedGBs: number; share: number; line: string }>;
  terms: Array<{
    label: string;
    predictedMs: { low: number; mid: number; high: number };
    measuredMs: number | null;
    measuredIs: string;
  }>;
  predictedStepMs: { low: number; mid: number; high: number };
  measuredStepMs: number;
  notes: string[];
}

/** The hardware's own counters over the measured window (nvidia-smi, dcgm-exporter, the sim's exporter, /proc + RAPL). */
export interface TelemetrySection {
  /** The source as resolved, and why it was chosen ("auto: nvidia-smi is on PATH"). */
  source: string;
  why: string;
  window: { startS: number; endS: number; seconds: number };
  devices: string[];
  samples: number;
  energyJ?: Quantity;
  joulesPerToken?: Quantity;
  tokensPerJoule?: Quantity;
  avgPowerW?: Quantity;
  peakPowerW?: Quantity;
  /** CPU hosts: share of CPU time busy over the window (/proc/stat). */
  cpuBusy?: Quantity;
  /** The server process on this host: CPU cores used, and run-queue wait share (contention). */
  serverCpuCores?: Quantity;
  serverRunQueue?: Quantity;
  smClockMHz?: { median: number | null; max: number | null };
  throttle?: { powerCapped: boolean; shareOfWindow: number; reasons: Array<{ reason: string; share: number }> };
  /** Achieved DRAM bandwidth (DRAM active × peak) beside the model's bytes per step ÷ the measured step time. */
  dram?: { achievedGBs: Quantity; modelGBs?: Quantity; peakGBs: number | null; efficiency?: Quantity };
  /** Interconnect TX bytes per output token beside the model's collective bytes per token. */
  interconnect?: { bytesPerToken: Quantity; modelBytesPerToken?: Quantity; ratio?: number };
  /** The chart's series on one time axis (seconds from the window's start), simulated time for the embedded sim. */
  series: Array<{ t: number; powerW?: number; tokensPerS?: number; smClockMHz?: number }>;
  unavailable: Array<{ field: string; why: string }>;
  notes: string[];
}

export interface DecompositionPart {
  component: "communication" | "compute" | "overhead";
  ms: Quantity;
  detail: string;
}

export interface ModelSection {
  description: string;
  predictedStepMs: Quantity;
  calibratedStepMs?: Quantity;
  /** A CPU server on a contended host: per-token time its threads waited for a CPU (measured), beside the step it fitted. */
  hostContentionMs?: Quantity;
  /** The engine's host time per step from its request spans (detailed traces), which calibrated the model's host term. */
  hostFromSpansMs?: Quantity;
  terms: Array<{ name: string; ms: number; share: number; detail?: string }>;
  collectives?: {
    countPerToken: number;
    bytesEach: number;
    algorithm?: string;
    protocol?: string;
    latencyUs?: number;
    note?: string;
  };
  residuals: Array<{ what: string; measured: number; modelled: number; unit: string; residualPct: number }>;
  fittedParams: Array<{ name: string; value: Quantity }>;
  notes: string[];
}

export interface Ceiling {
  scenario: string;
  assumption: string;
  msPerToken: Quantity;
  tokensPerSecond: Quantity;
}

export interface WhatIf {
  scenario: string;
  assumption: string;
  tokensPerSecond: Quantity;
  msPerToken: Quantity;
  speedup?: number;
}

export interface Headline {
  label: string;
  value: Quantity;
}

export interface StudyResult {
  schema: "inferscope.study/1";
  meta: StudyMeta;
  summary: {
    headlines: Headline[];
    /** Measured per-token time split into communication / compute / overhead. */
    decomposition: DecompositionPart[];
    decompositionBasis: string;
    ceiling?: Ceiling;
    findings: string[];
  };
  audit?: AuditSection;
  latency?: LatencySection;
  sweep?: SweepSection;
  ab?: AbSection;
  experiments?: ExperimentPlan;
  serverTimings?: ServerTimingSection;
  requestSplit?: RequestSplitSection;
  telemetry?: TelemetrySection;
  trace?: TraceSection;
  model?: ModelSection;
  ceilings: Ceiling[];
  whatIfs: WhatIf[];
  method: string[];
}
