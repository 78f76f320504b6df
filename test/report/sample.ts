// A complete StudyResult built from seeded synthetic samples, for the report writers' tests.
// `label` is placed everywhere user- or server-controlled text can appear (model name, metric
// family names, kernel names, arm names, what-if names) so tests can inject an XSS payload.
import { SEED_DEPLOYMENT } from "../../src/model/index.ts";
import type { Quantity, StudyResult } from "../../src/report/types.ts";
import { deploymentOf } from "../../src/study/deployment.ts";

function rng(seed: number) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const q = (
  value: number,
  low: number,
  high: number,
  unit: string,
  method: Quantity["method"],
  how: string,
): Quantity => ({
  value,
  low,
  high,
  unit,
  method,
  how,
});

export function sampleResult(label = "glm-5"): StudyResult {
  const u = rng(7);
  const itl = Array.from({ length: 1500 }, () => 17.4 * Math.exp((u() - 0.5) * 0.06));
  const ttft = Array.from({ length: 12 }, () => 52 + (u() - 0.5) * 4);
  const itlOverTime = itl.slice(0, 120).map((ms, token) => ({ request: 0, token: token + 1, ms }));
  const points = [16, 32, 64, 128, 256].map((n) => {
    const e2e = 52 + 17.4 * (n - 1) + (u() - 0.5) * 3;
    const pred = 52 + 17.4 * (n - 1);
    return { outputTokens: n, e2eMs: e2e, predictedMs: pred, residualMs: e2e - pred };
  });
  return {
    schema: "inferscope.study/1",
    meta: {
      tool: { name: "inferscope", version: "0.1.0" },
      startedAt: "2026-12-02T16:00:00.000Z",
      finishedAt: "2026-12-02T16:00:40.000Z",
      durationMs: 40_000,
      quick: true,
      seed: 1,
      target: {
        kind: "embedded-sim",
        profile: "glm5-8x-rtxpro6000-pcie",
        serverCommand: `inferscope sim --profile glm5-8x-rtxpro6000-pcie --api-key *** --served-model-name ${label}`,
      },
      timeScale: 4,
      deployment: { ...deploymentOf(SEED_DEPLOYMENT), model: label },
      flags: { quick: true, model: label, "time-scale": 4 },
      environment: { node: "v20", platform: "linux x64", cpus: "2" },
      phases: [
        { name: "audit", status: "ok", durationMs: 1200 },
        { name: "bench", status: "ok", durationMs: 9000 },
        { name: "sweep", status: "ok", durationMs: 8000 },
        { name: "ab", status: "ok", durationMs: 15000 },
        { name: "trace", status: "ok", durationMs: 3000 },
        { name: "model", status: "ok", durationMs: 20 },
      ],
      runId: "run-123",
    },
    summary: {
      headlines: [
        { label: "decode rate", value: q(57.5, 57.2, 57.8, "tok/s", "measured", "1000 / mean per-token gap") },
        { label: "ITL", value: q(17.4, 17.3, 17.5, "ms", "measured", "mean client per-token gap") },
        { label: "all-reduce share", value: q(0.6, 0.57, 0.63, "", "derived", "trace communication ÷ ITL") },
        { label: "zero-communication ceiling", value: q(143, 135, 152, "tok/s", "derived", "1000 / (ITL − comm)") },
      ],
      decomposition: [
        { component: "communication", ms: q(10.4, 10.1, 10.8, "ms", "measured", "trace"), detail: "156 all-reduces" },
        { component: "compute", ms: q(6.2, 6.0, 6.4, "ms", "measured", "trace"), detail: "GEMM, MoE, attention" },
        { component: "overhead", ms: q(0.8, 0.5, 1.1, "ms", "derived", "ITL − GPU busy"), detail: "idle and host" },
      ],
      decompositionBasis: "GPU trace classes scaled to the client-measured ITL.",
      ceiling: {
        scenario: "all-reduce free",
        assumption: "communication = 0",
        msPerToken: q(7.0, 6.6, 7.4, "ms", "derived", "ITL − comm"),
        tokensPerSecond: q(143, 135, 152, "tok/s", "derived", "1000 / ms"),
      },
      findings: [`${label}: the all-reduce takes 60 % of each token.`],
    },
    audit: {
      engine: "vllm",
      engineVersion: "0.11.0",
      windowMs: 3000,
      families: [
        {
          name: "vllm:time_to_first_token_seconds",
          type: "histogram",
          granularity: "request",
          concept: "ttft",
          value: "mean 52 ms",
        },
        {
          name: `vllm:inter_token_latency_seconds{model_name="${label}"}`,
          type: "histogram",
          granularity: "request",
          concept: "itl",
          value: label,
        },
      ],
      gaps: [{ what: "per-operation timing", method: "profiler trace", command: "inferscope trace capture URL" }],
      notes: ["ITL buckets are 15 ms wide around the 17 ms mean."],
    },
    latency: {
      requests: 12,
      outputTokensPerRequest: 128,
      promptTokens: 64,
      ttftMs: q(52, 51, 53, "ms", "measured", "mean TTFT"),
      itlMs: q(17.4, 17.3, 17.5, "ms", "measured", "mean per-token gap"),
      e2eMs: q(2262, 2250, 2275, "ms", "measured", "mean E2E"),
      decodeRate: q(57.5, 57.2, 57.8, "tok/s", "measured", "1000 / ITL"),
      ttftSamplesMs: ttft,
      itlSamplesMs: itl,
      itlOverTime,
      server: { ttftMeanMs: 52.1, itlMeanMs: 17.4, steps: 1536 },
      slices: {
        widthS: 1.5,
        rule: "requests by send time; completions by stream end; tokens by receive time",
        rows: Array.from({ length: 18 }, (_, i) => ({
          t: i * 1.5,
          arrivalsPerS: 0.44,
          completedPerS: i === 0 ? 0 : 0.44,
          outputTokensPerS: i === 0 ? 30 : 57.5,
          ttftP50Ms: i === 0 ? 140 : 52,
          itlP50Ms: 17.4,
        })),
      },
      notes: [],
    },
    sweep: {
      points,
      fixedMs: q(52, 48, 56, "ms", "fitted", "Theil–Sen intercept"),
      perTokenMs: q(17.4, 17.35, 17.45, "ms", "fitted", "Theil–Sen slope"),
      convergedRate: q(57.5, 57.3, 57.6, "tok/s", "fitted", "1000 / b"),
      r2: 0.99999,
      notes: [],
    },
    ab: {
      arms: [
        {
          name: `default ${label}`,
          change: "(default)",
          perTokenMs: q(20.9, 20.8, 21.0, "ms", "measured", "mean"),
          samples: 1000,
        },
        {
          name: "ll",
          change: "NCCL_PROTO=LL",
          perTokenMs: q(17.1, 17.0, 17.2, "ms", "measured", "mean"),
          samples: 1000,
        },
      ],
      deltaPerTokenMs: q(3.8, 3.7, 3.9, "ms", "measured", "bootstrap difference"),
      deltaPerCallUs: q(24.4, 23.7, 25.0, "µs", "derived", "Δ ÷ 156"),
      callsPerToken: 156,
      pWelch: 1e-12,
      pMannWhitney: 1e-10,
      verdict: "LL is faster by 3.8 ms/token [3.7, 3.9]",
      notes: [],
    },
    trace: {
      steps: 40,
      decodeSteps: 38,
      stepMs: q(17.0, 16.9, 17.1, "ms", "measured", "trace"),
      perClass: [
        { cls: "communication", msPerStep: 10.4, share: 0.61, kernelsPerStep: 156 },
        { cls: "gemm", msPerStep: 4.1, share: 0.24 },
        { cls: "attention", msPerStep: 1.0, share: 0.06 },
        { cls: label, msPerStep: 0.5, share: 0.03 },
      ],
      idleMsPerStep: 1.0,
      allReduceCallsPerStep: 156,
      allReducePerCallUs: q(66.7, 65, 68, "µs", "measured", "trace"),
      allReduceShare: q(0.61, 0.6, 0.62, "", "measured", "trace"),
      kernelNames: ["ncclDevKernel_AllReduce_Sum_bf16_RING_LL", label],
      files: ["trace.pt.trace.json.gz"],
      notes: [],
    },
    model: {
      description: `${label} nvfp4 on 8× rtx-pro-6000, TP 8, pcie5`,
      predictedStepMs: q(15, 12, 19, "ms", "modelled", "catalog"),
      calibratedStepMs: q(17.4, 17.2, 17.6, "ms", "fitted", "calibrated"),
      terms: [{ name: "weight reads", ms: 3.8, share: 0.22 }],
      collectives: { countPerToken: 156, bytesEach: 12288, algorithm: "ring", protocol: "Simple", latencyUs: 88.2 },
      residuals: [
        { what: "ITL batch 1", measured: 17.4, modelled: 17.5, unit: "ms", residualPct: 0.6 },
        { what: `A/B Δ ${label}`, measured: 3.8, modelled: 4.5, unit: "ms", residualPct: 18 },
      ],
      fittedParams: [{ name: "per-all-reduce latency", value: q(66, 62, 70, "µs", "fitted", "fit") }],
      notes: [],
    },
    ceilings: [
      {
        scenario: "measured",
        assumption: "as run",
        msPerToken: q(17.4, 17.3, 17.5, "ms", "measured", ""),
        tokensPerSecond: q(57.5, 57.2, 57.8, "tok/s", "measured", ""),
      },
      {
        scenario: "all-reduce free",
        assumption: "communication = 0",
        msPerToken: q(7.0, 6.6, 7.4, "ms", "derived", ""),
        tokensPerSecond: q(143, 135, 152, "tok/s", "derived", ""),
      },
    ],
    whatIfs: [
      {
        scenario: `NVLink ${label}`,
        assumption: "custom all-reduce on",
        msPerToken: q(9, 8, 10, "ms", "modelled", "model"),
        tokensPerSecond: q(111, 100, 125, "tok/s", "modelled", "model"),
        speedup: 1.9,
      },
    ],
    method: ["Audit the metrics endpoint.", `Model ${label}.`],
  };
}
