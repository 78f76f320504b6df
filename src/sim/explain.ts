// `inferscope sim --explain`: the profile's true step decomposition (the hidden truth for tests).
import { resolveSim, type SimOptions } from "./index.ts";
import { type KvCapacity, kvCapacity, profileHardware } from "./profile.ts";
import { decodeBatch, prefillBatch, type StepExplanation } from "./timing.ts";

export interface SimExplanation {
  profile: string;
  description: string;
  model: string;
  config: {
    tensorParallelSize: number;
    /** The profile's GPU in the model's catalog, and its link as the model describes it. */
    gpu: string;
    interconnect: string;
    ncclBusBwGBs: number;
    customAllReduce: boolean;
    ncclProtocol: string;
    ncclAlgorithm: string;
    cudaGraphs: boolean;
    specTokens: number;
    notes: string[];
  };
  /** Batch-1 decode step at a 128-token context. */
  decode: StepExplanation;
  /** Prefill of a 16-token prompt. */
  prefill: StepExplanation;
  frontendMs: number;
  /** TTFT for a short prompt at batch 1 = frontend + prefill step (ms). */
  ttftMs: number;
  /** Predicted request time for 128 output tokens at batch 1: TTFT + 127 decode steps (s). */
  request128S: number;
  /** Share of the batch-1 decode step spent in all-reduce + all-gather. */
  collectiveShare: number;
  /** Decode step time by batch size (context 512). */
  byBatch: Array<{ batch: number; stepMs: number; tokensPerS: number }>;
  /** The KV pool the scheduler and the prefix cache share. */
  kv: KvCapacity & { prefixCaching: boolean };
}

export function explainSim(opts: SimOptions): SimExplanation {
  const { profile, model } = resolveSim(opts);
  const decode = model.explain(decodeBatch(1, 128));
  const prefill = model.explain(prefillBatch(16));
  const ms = (e: StepExplanation, n: string) => e.components.find((c) => c.name === n)?.ms ?? 0;
  const ttftMs = profile.cost.frontendMs + prefill.stepMs;
  const cfg = model.config;
  const hw = profileHardware(profile);
  return {
    profile: profile.name,
    description: profile.description,
    model: profile.model.servedName,
    config: {
      tensorParallelSize: cfg.tp,
      gpu: hw.gpu.id,
      interconnect: hw.link.label,
      ncclBusBwGBs: hw.link.ncclBusBwGBs,
      customAllReduce: cfg.customAllReduce,
      ncclProtocol: cfg.protocol,
      ncclAlgorithm: cfg.algorithm,
      cudaGraphs: cfg.graphsAllowed,
      specTokens: cfg.specTokens,
      notes: cfg.reason,
    },
    decode,
    prefill,
    frontendMs: profile.cost.frontendMs,
    ttftMs,
    request128S: (ttftMs + 127 * decode.stepMs) / 1000,
    collectiveShare: decode.stepMs > 0 ? (ms(decode, "allreduce") + ms(decode, "allgather")) / decode.stepMs : 0,
    byBatch: [1, 8, 32, 128].map((batch) => {
      const stepMs = model.stepMs(decodeBatch(batch, 512));
      return { batch, stepMs, tokensPerS: (batch * 1000) / stepMs };
    }),
    kv: { ...kvCapacity(profile), prefixCaching: profile.engine.enablePrefixCaching },
  };
}

export function renderExplanation(e: SimExplanation): string {
  const lines: string[] = [];
  const f = (x: number, d = 3) => x.toFixed(d);
  lines.push(`profile ${e.profile}: ${e.description}`);
  lines.push(
    `TP=${e.config.tensorParallelSize}  all-reduce: ${e.decode.allReduce.impl}${e.decode.allReduce.protocol ? ` ${e.decode.allReduce.algorithm}/${e.decode.allReduce.protocol}` : ""}  CUDA graphs: ${e.config.cudaGraphs ? "on" : "off (eager)"}${e.config.specTokens ? `  spec tokens: ${e.config.specTokens}` : ""}`,
  );
  lines.push(`  GPU ${e.config.gpu}, ${e.config.interconnect}, NCCL bus bandwidth ${e.config.ncclBusBwGBs} GB/s`);
  for (const n of e.config.notes) lines.push(`  ${n}`);
  lines.push("", `decode step, batch 1, context 128 (mode ${e.decode.mode}):`);
  for (const c of e.decode.components) {
    if (c.ms === 0) continue;
    lines.push(
      `  ${c.name.padEnd(10)} ${f(c.ms).padStart(9)} ms  ${((100 * c.ms) / e.decode.stepMs).toFixed(1).padStart(5)} %`,
    );
  }
  lines.push(`  ${"step".padEnd(10)} ${f(e.decode.stepMs).padStart(9)} ms  = ${f(1000 / e.decode.stepMs, 1)} tok/s`);
  const ar = e.decode.allReduce;
  if (ar.calls)
    lines.push(
      `  ${ar.calls} all-reduces of ${ar.bytesPerCall} B at ${f(ar.perCallUs, 1)} us (${ar.kernelName}) + ${e.decode.allGather.calls} all-gather; collective share ${(100 * e.collectiveShare).toFixed(1)} %`,
    );
  lines.push(
    "",
    `prefill, 16-token prompt (mode ${e.prefill.mode}): ${f(e.prefill.stepMs)} ms; frontend ${f(e.frontendMs)} ms; TTFT ${f(e.ttftMs)} ms`,
  );
  lines.push(`128-token request at batch 1: ${f(e.request128S)} s`);
  lines.push("", "decode step by batch size (context 512):");
  for (const b of e.byBatch)
    lines.push(
      `  B=${String(b.batch).padEnd(4)} ${f(b.stepMs).padStart(9)} ms  ${f(b.tokensPerS, 0).padStart(7)} tok/s`,
    );
  const kv = e.kv;
  lines.push(
    "",
    `KV pool: ${kv.blocks} blocks × ${kv.blockSize} tokens = ${kv.tokens} tokens (${kv.source}; GPU memory implies ${kv.implied.blocks}); prefix caching ${kv.prefixCaching ? "on" : "off"}`,
  );
  return lines.join("\n");
}
