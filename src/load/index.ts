// Public API of the load generator (`inferscope bench`).
export {
  type CapacityOptions,
  type CapacityResult,
  type CapacityRun,
  crossing,
  estimateCapacity,
  findCapacity,
  isotonicDecreasing,
  type LoadTrial,
  type TrialOutcome,
} from "./capacity.ts";
export { type BenchTrialDetail, benchTrial, goodShare, type LoadKnob } from "./capacity-bench.ts";
export { blankRecord, classifyError, httpGet, StreamClient, serverMessage } from "./client.ts";
export { formatConsole } from "./console.ts";
export { readAzure } from "./datasets/azure.ts";
export { isJsonlTrace, readJsonlTrace } from "./datasets/jsonl.ts";
export { readMooncake } from "./datasets/mooncake.ts";
export { type Calibration, PromptSynth } from "./datasets/synth.ts";
export { BLOCK_TOKENS, type Trace, type TraceRow } from "./datasets/trace.ts";
export { type AddedDelay, measureAddedDelay, probeDelays, rawFloor, startProbe } from "./delay.ts";
export { npMean, npMedian, npPercentile, npStd } from "./npstats.ts";
export { ChunkScratch, JsonlWriter, parseRecordsJsonl, recordFromJson, recordToJson } from "./records.ts";
export {
  explainLag,
  formatReplay,
  type LengthCheck,
  lagBreakdown,
  lengthChecks,
  planReplay,
  type ReplayOptions,
  type ReplayPlan,
  type ScheduleSummary,
  scheduleSummary,
  traceWorkload,
} from "./replay.ts";
export {
  type BenchDeps,
  type BenchResult,
  type BenchSetup,
  type ReplayInfo,
  resolveModel,
  resolveOptions,
  runBench,
  toVllmJson,
} from "./runner.ts";
export { arrivalTimesMs, Rng, requestsForDuration, sweepRates } from "./schedule.ts";
export { formatSelfTest, runSelfTest, type SelfTestResult, spawnSimProcess } from "./selftest.ts";
export {
  type ServerTimingSummary,
  serverTimingLine,
  summarizeServerTimings,
} from "./server-timings.ts";
export { type ServerView, serverDelta, totalsFromText } from "./server-view.ts";
export {
  cachedTokens,
  runSessions,
  type Session,
  type SessionTurn,
  sharegptSessions,
  syntheticSessions,
  type TurnRow,
  traceSessions,
  turnPrompt,
  turnTable,
} from "./sessions.ts";
export { computeSlices, formatSlices, type SliceOptions, type SliceResult, type SliceRow } from "./slices.ts";
export { interpretChunk, llamacppTimings, SseParser, tgiTimings } from "./sse.ts";
export {
  type BenchSummary,
  chunkItls,
  computeMetrics,
  DEFINITIONS,
  type InferscopeMetrics,
  type MetricsOptions,
  type MetricsResult,
  peakConcurrency,
  peakOutputTokensPerS,
  requestTpot,
  stats,
  tokenItls,
} from "./summarize.ts";
export { runSweep, type SweepPoint, type SweepResult, type SweepSpec, saturationReason } from "./sweep.ts";
export { calibrate, findTokenizer, type Probe, type TokenCounter } from "./tokenizer.ts";
export type * from "./types.ts";
export { createWorkload, loadJsonl, loadShareGpt, requestBody } from "./workload.ts";
