// The simulated profiler: /start_profile and /stop_profile write a PyTorch-profiler (Kineto)
// Chrome trace of the simulated GPU work, timed from the same StepModel as the served tokens,
// plus a `<file>.truth.json` sidecar with the true per-class totals of the captured steps.
import { createWriteStream, mkdirSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { setImmediate as yieldToLoop } from "node:timers/promises";
import { createGzip } from "node:zlib";
import type { StepRecord } from "./engine.ts";
import { COMPONENTS, type StepModel } from "./timing.ts";

/** Kernel classes written to the trace; the sidecar reports each class's total. */
export const KERNEL_CLASSES = [
  "gemm",
  "moe",
  "attention",
  "allreduce",
  "allgather",
  "norm",
  "activation",
  "elementwise",
  "sampling",
  "draft",
] as const;
export type KernelClass = (typeof KERNEL_CLASSES)[number];

export interface ProfileTruth {
  file: string;
  steps: number;
  timeScale: number;
  /** Σ kernel durations per class over the captured steps (µs). */
  kernelUs: Record<KernelClass, number>;
  /** GPU idle inside steps: per-kernel launch gaps, and the scheduler gap before each step (µs). */
  gapUs: { launch: number; scheduler: number };
  /** Σ of each model component over the captured steps, jitter included (ms). */
  componentsMs: Record<string, number>;
  stepMs: number[];
  allReduce: { kernelName: string | null; callsPerStep: number };
  kernelsPerStep: number[];
}

const SMALL_US = 1.5;

interface KernelSpec {
  name: string;
  cls: KernelClass;
  /** Weight within its class budget (for gemm/moe/attention/sampling); small kernels get SMALL_US. */
  w: number;
  /** No launch gap before it (collectives carry their own launch cost). */
  noGap?: boolean;
  /** The name as a JSON string (cached). */
  json?: string;
}

function gemmName(gpu: string, what: string): string {
  if (/H100|H200|H20|GH200/.test(gpu))
    return what === "lm_head"
      ? "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"
      : "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas";
  if (/A100|A10|L40|A6000/.test(gpu)) return "ampere_bf16_s16816gemm_bf16_64x64_sliced1x2_ldg8_f2f_stages_64x5_tn";
  return what === "lm_head" ? "nvjet_tst_128x64_64x8_2x1_v_bz_TNT" : "nvjet_tst_64x8_64x16_4x1_v_bz_TNT";
}

/** The per-layer and fixed kernel lists for a profile, sized to its kernel counts. */
function kernelPlan(model: StepModel): { layer: KernelSpec[]; fixedHead: KernelSpec[]; fixedTail: KernelSpec[] } {
  const p = model.profile;
  const gpu = p.hardware.gpu;
  const g = (w: number, what = "linear"): KernelSpec => ({ name: gemmName(gpu, what), cls: "gemm", w });
  const norm: KernelSpec = {
    name: "void vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, long, c10::BFloat16*, c10::BFloat16 const*, float, int, int)",
    cls: "norm",
    w: 1,
  };
  const rope: KernelSpec = {
    name: "void vllm::rotary_embedding_kernel<c10::BFloat16, true>(long const*, c10::BFloat16*, c10::BFloat16*, c10::BFloat16 const*, int, long, long, long, int, int, int)",
    cls: "elementwise",
    w: 1,
  };
  const act: KernelSpec = {
    name: "void vllm::act_and_mul_kernel<c10::BFloat16, &(c10::BFloat16 vllm::silu_kernel<c10::BFloat16>(c10::BFloat16 const&)), true>(c10::BFloat16*, c10::BFloat16 const*, int)",
    cls: "activation",
    w: 1,
  };
  const attn: KernelSpec =
    p.model.attention === "mla"
      ? {
          name: "void flashmla::flash_fwd_splitkv_mla_kernel<flashmla::Flash_fwd_kernel_traits_mla<576, 64, 64, 8, cutlass::bfloat16_t, 512>, flashmla::Flash_fwd_mla_params>(flashmla::Flash_fwd_mla_params)",
          cls: "attention",
          w: 1,
        }
      : {
          name: "void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 4, cutlass::bfloat16_t> >, false, false, false, false, true, true, false, false>(flash::Flash_fwd_params)",
          cls: "attention",
          w: 1,
        };
  const ar = (): KernelSpec => ({
    name: model.allReduceKernelName(model.config.customAllReduce ? "custom" : "nccl"),
    cls: "allreduce",
    w: 1,
    noGap: true,
  });
  const arPerLayer = model.config.tp > 1 ? p.collectives.allReducesPerLayer : 0;
  let layer: KernelSpec[];
  if (p.model.moe) {
    layer = [
      norm,
      g(3),
      rope,
      attn,
      g(2),
      norm,
      g(0.2),
      {
        name: "void vllm::moe::grouped_topk_kernel<float>(float*, float*, int*, float const*, int, int, int, int, int, float)",
        // Routing and expert bookkeeping: the trace rules class these as MoE, as real analyzers should.
        cls: "moe",
        w: 0.05,
      },
      {
        name: "void vllm::moe::moe_align_block_size_kernel<int>(int const*, int*, int*, int*, int, int, int, int, unsigned long, int*)",
        // Routing and expert bookkeeping: the trace rules class these as MoE, as real analyzers should.
        cls: "moe",
        w: 0.05,
      },
      { name: "fused_moe_kernel", cls: "moe", w: 2 },
      act,
      { name: "fused_moe_kernel", cls: "moe", w: 1 },
      {
        name: "void vllm::moe::moe_sum_kernel<c10::BFloat16, 8>(c10::BFloat16*, c10::BFloat16 const*, int)",
        // Routing and expert bookkeeping: the trace rules class these as MoE, as real analyzers should.
        cls: "moe",
        w: 0.05,
      },
      g(1),
      act,
      g(0.5),
    ];
  } else layer = [norm, g(3), rope, attn, g(2), norm, g(7), act, g(3.5)];
  const elementwise: KernelSpec = {
    name: "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)",
    cls: "elementwise",
    w: 1,
  };
  const want = p.cost.kernelsPerLayer;
  while (layer.length < want) layer.push(elementwise);
  if (layer.length > want) {
    // Keep the heavy kernels; drop small ones from the end.
    const keep = layer.filter((k) => k.cls === "gemm" || k.cls === "moe" || k.cls === "attention");
    const small = layer.filter((k) => !(k.cls === "gemm" || k.cls === "moe" || k.cls === "attention"));
    layer = [...keep.slice(0, want), ...small.slice(0, Math.max(0, want - keep.length))];
    if (!layer.some((k) => k.cls === "gemm")) layer[0] = g(1);
  }
  // All-reduces after attention and after the MLP, as vLLM places them.
  const withAr: KernelSpec[] = [];
  const attnAt = layer.findIndex((k) => k.cls === "attention");
  const firstAfterAttnGemm = layer.findIndex((k, i) => i > attnAt && k.cls === "gemm");
  layer.forEach((k, i) => {
    withAr.push(k);
    if (arPerLayer >= 2 && i === firstAfterAttnGemm) withAr.push(ar());
  });
  for (let i = arPerLayer >= 2 ? 1 : 0; i < arPerLayer; i++) withAr.push(ar());
  const fixed: KernelSpec[] = [
    g(1, "lm_head"),
    {
      name: "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)",
      cls: "sampling",
      w: 1,
    },
    {
      ...norm,
      name: "void vllm::rms_norm_kernel<c10::BFloat16, 8, 3>(c10::BFloat16*, c10::BFloat16 const*, long, long, c10::BFloat16 const*, float, int, int)",
    },
    {
      name: "void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::BFloat16, long, unsigned int, 2, 2, -2, true>(at::cuda::detail::TensorInfo<c10::BFloat16, unsigned int>, at::cuda::detail::TensorInfo<c10::BFloat16, unsigned int>, at::cuda::detail::TensorInfo<long, unsigned int>, int, int, unsigned int, unsigned int, long)",
      cls: "elementwise",
      w: 1,
    },
    {
      name: "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::ArgMaxOps<float>, unsigned int, long, 4> >(at::native::ReduceOp<float, at::native::ArgMaxOps<float>, unsigned int, long, 4>)",
      cls: "sampling",
      w: 1,
    },
    {
      name: "void at::native::_scatter_gather_elementwise_kernel<128, 4, at::native::_cuda_scatter_gather_internal_kernel<true, long>::operator()<at::native::ReduceMultiply>(at::TensorIterator&, long, long, long, at::native::ReduceMultiply const&)::{lambda(int)#1}>(int, at::native::_cuda_scatter_gather_internal_kernel<true, long>::operator()<at::native::ReduceMultiply>(at::TensorIterator&, long, long, long, at::native::ReduceMultiply const&)::{lambda(int)#1})",
      cls: "elementwise",
      w: 1,
    },
  ];
  while (fixed.length < p.cost.kernelsFixed) fixed.push(elementwise);
  const chosen = fixed.slice(0, p.cost.kernelsFixed);
  // Embedding (index select) first, then its all-reduce; the rest after the last layer.
  const embedIdx = chosen.findIndex((k) => k.name.includes("indexSelect"));
  const head = embedIdx >= 0 ? chosen.splice(embedIdx, 1) : [];
  if (model.config.tp > 1) for (let i = 0; i < p.collectives.extraAllReduces; i++) head.push(ar());
  const tail: KernelSpec[] = [];
  const normIdx = chosen.findIndex((k) => k.cls === "norm");
  if (normIdx >= 0) tail.push(...chosen.splice(normIdx, 1));
  const lmIdx = chosen.findIndex((k) => k.cls === "gemm");
  if (lmIdx >= 0) tail.push(...chosen.splice(lmIdx, 1));
  if (model.config.tp > 1)
    for (let i = 0; i < p.collectives.allGathers; i++)
      tail.push({
        name: "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
        cls: "allgather",
        w: 1,
        noGap: true,
      });
  tail.push(...chosen.filter((k) => k.cls !== "sampling"), ...chosen.filter((k) => k.cls === "sampling"));
  return { layer: withAr, fixedHead: head, fixedTail: tail };
}

export class Profiler {
  private active = false;
  private steps: StepRecord[] = [];
  /** Steps seen after the capture limit (not in the trace). */
  dropped = 0;
  private readonly maxSteps: number;
  lastTruth: ProfileTruth | null = null;
  private writing: Promise<void> = Promise.resolve();

  constructor(
    private readonly o: { dir: string; model: StepModel; timeScale: number; vllmVersion: string; maxSteps?: number },
  ) {
    this.maxSteps = o.maxSteps ?? 256;
  }

  record(r: StepRecord): void {
    if (!this.active) return;
    if (this.steps.length < this.maxSteps) this.steps.push(r);
    else this.dropped++;
  }

  async start(): Promise<void> {
    await this.writing;
    this.steps = [];
    this.dropped = 0;
    this.active = true;
  }

  /** Writes the trace (streamed through gzip, yielding between steps) and resolves when flushed. */
  stop(): Promise<void> {
    if (!this.active) return Promise.reject(new Error("profiler is not running; call /start_profile first"));
    this.active = false;
    const steps = this.steps;
    this.steps = [];
    this.writing = this.write(steps);
    return this.writing;
  }

  private async write(steps: StepRecord[]): Promise<void> {
    const { dir, model, timeScale } = this.o;
    mkdirSync(dir, { recursive: true });
    const tns = process.hrtime.bigint() + BigInt(Date.now()) * 1_000_000n;
    const file = join(dir, `${hostname()}_${process.pid}-rank-0.${tns}.pt.trace.json.gz`);
    const gz = createGzip({ level: 1 });
    const out = createWriteStream(file);
    gz.pipe(out);
    const done = new Promise<void>((res, rej) => {
      out.on("finish", () => res());
      out.on("error", rej);
      gz.on("error", rej);
    });
    const push = (s: string) => gz.write(s);
    const pid = process.pid;
    const tid = pid + 1;
    push(
      `{"schemaVersion":1,"deviceProperties":[{"id":0,"name":${JSON.stringify(model.profile.hardware.gpu)},"totalGlobalMem":0,"computeMajor":9,"computeMinor":0,"maxThreadsPerBlock":1024,"maxThreadsPerMultiprocessor":2048,"regsPerBlock":65536,"regsPerMultiprocessor":65536,"warpSize":32,"sharedMemPerBlock":49152,"sharedMemPerMultiprocessor":233472,"numSms":132,"sharedMemPerBlockOptin":232448}],` +
        `"distributedInfo":{"backend":"nccl","rank":0,"world_size":${model.config.tp}},"vllm_version":${JSON.stringify(this.o.vllmVersion)},` +
        `"trace_id":"${tns.toString(16)}","inferscope_sim":true,"traceEvents":[\n`,
    );
    push(
      `{"name":"process_name","ph":"M","ts":0,"pid":${pid},"tid":0,"args":{"name":"python3"}},\n` +
        `{"name":"process_name","ph":"M","ts":0,"pid":0,"tid":0,"args":{"name":"GPU 0"}},\n` +
        `{"name":"thread_name","ph":"M","ts":0,"pid":0,"tid":7,"args":{"name":"stream 7"}},\n` +
        `{"name":"thread_name","ph":"M","ts":0,"pid":${pid},"tid":${tid},"args":{"name":"thread ${tid} (python3)"}}`,
    );
    const plan = kernelPlan(model);
    const truth: ProfileTruth = {
      file,
      steps: steps.length,
      timeScale,
      kernelUs: Object.fromEntries(KERNEL_CLASSES.map((c) => [c, 0])) as Record<KernelClass, number>,
      gapUs: { launch: 0, scheduler: 0 },
      componentsMs: Object.fromEntries(COMPONENTS.map((c) => [c, 0])),
      stepMs: [],
      allReduce: {
        kernelName:
          model.config.tp > 1 ? model.allReduceKernelName(model.config.customAllReduce ? "custom" : "nccl") : null,
        callsPerStep:
          model.config.tp > 1
            ? model.profile.model.layers * model.profile.collectives.allReducesPerLayer +
              model.profile.collectives.extraAllReduces
            : 0,
      },
      kernelsPerStep: [],
    };
    const comps = new Float64Array(COMPONENTS.length);
    const t0 = steps.length ? steps[0]!.startMs : 0;
    // Kineto writes small ts (µs) and the epoch offset separately: doubles keep ns precision.
    const baseUs = 1000;
    const epochNs = BigInt(Date.now()) * 1_000_000n;
    let corr = 1;
    for (const s of steps) {
      const parts: string[] = [];
      model.componentsInto(s.shape, comps);
      const j = s.jitter;
      const c = (name: string) => comps[COMPONENTS.indexOf(name as (typeof COMPONENTS)[number])]! * j * 1000; // µs
      COMPONENTS.forEach((n, i) => {
        truth.componentsMs[n]! += comps[i]! * j;
      });
      const { expertWeightsMs, attnComputeMs } = model.splits(s.shape);
      const mode = model.mode(s.shape);
      const nLayers = model.profile.model.layers;
      const kernels: KernelSpec[] = [...plan.fixedHead];
      for (let l = 0; l < nLayers; l++) kernels.push(...plan.layer);
      kernels.push(...plan.fixedTail);
      if (c("draft") > 0)
        kernels.push({ name: gemmName(model.profile.hardware.gpu, "draft"), cls: "draft", w: 1, noGap: true });
      // Class budgets (µs) from the model's components; small kernels carved out of the GEMM budget.
      const nSmall = kernels.filter(
        (k) => k.cls === "norm" || k.cls === "activation" || k.cls === "elementwise",
      ).length;
      const gemmBudget = c("weights") - expertWeightsMs * j * 1000 + (c("compute") - attnComputeMs * j * 1000);
      const small = Math.min(SMALL_US * j, (0.5 * gemmBudget) / Math.max(1, nSmall));
      const budget: Record<KernelClass, number> = {
        gemm: gemmBudget - small * nSmall,
        moe: expertWeightsMs * j * 1000,
        attention: c("kv") + attnComputeMs * j * 1000,
        allreduce: c("allreduce"),
        allgather: c("allgather"),
        norm: 0,
        activation: 0,
        elementwise: 0,
        sampling: c("sampling"),
        draft: c("draft"),
      };
      const weightSum: Record<string, number> = {};
      for (const k of kernels) weightSum[k.cls] = (weightSum[k.cls] ?? 0) + k.w;
      const gapped = kernels.filter((k) => !k.noGap).length;
      const gapUs = gapped ? c("launch") / gapped : 0;
      const schedUs = c("scheduler");
      // Kineto writes ts and dur from integer-ns start and end, so back-to-back steps (this end is
      // the next start) share their boundary exactly; rounding ts and dur separately would make
      // adjacent step annotations overlap by a nanosecond.
      const startNs = Math.round((baseUs + (s.startMs - t0) * timeScale * 1000) * 1000);
      const endNs = Math.round((baseUs + (s.endMs - t0) * timeScale * 1000) * 1000);
      const startUs = startNs / 1000;
      const stepUs = (endNs - startNs) / 1000;
      const gpuStartNs = Math.min(endNs, Math.round((startUs + schedUs) * 1000));
      truth.stepMs.push(stepUs / 1000);
      truth.kernelsPerStep.push(kernels.length);
      truth.gapUs.scheduler += schedUs;
      const nameAnn = `execute_context_${s.shape.prefillSeqs}(${s.shape.prefillTokens})_generation_${s.shape.decodeSeqs}(${s.shape.decodeSeqs})`;
      parts.push(
        `{"ph":"X","cat":"user_annotation","name":${JSON.stringify(nameAnn)},"pid":${pid},"tid":${tid},"ts":${f(startUs)},"dur":${f(stepUs)},"args":{"External id":${corr}}}`,
        `{"ph":"X","cat":"python_function","name":"vllm/v1/worker/gpu_model_runner.py(1650): execute_model","pid":${pid},"tid":${tid},"ts":${f(startUs)},"dur":${f(stepUs)},"args":{"Python id":${corr},"Python parent id":0}}`,
        `{"ph":"X","cat":"cpu_op","name":"aten::copy_","pid":${pid},"tid":${tid},"ts":${f(startUs + 1)},"dur":${f(Math.min(4, schedUs))},"args":{"External id":${corr},"Record function id":0,"Sequence number":0,"Fwd thread id":0}}`,
        `{"ph":"X","cat":"gpu_user_annotation","name":${JSON.stringify(nameAnn)},"pid":0,"tid":7,"ts":${f(gpuStartNs / 1000)},"dur":${f(Math.max(0, endNs - gpuStartNs) / 1000)},"args":{"External id":${corr}}}`,
      );
      let t = startUs + schedUs;
      const graph = mode === "graph";
      const graphCorr = corr++;
      if (graph) {
        parts.push(
          `{"ph":"X","cat":"cuda_runtime","name":"cudaGraphLaunch","pid":${pid},"tid":${tid},"ts":${f(Math.max(t - 8, startUs))},"dur":8,"args":{"cbid":311,"correlation":${graphCorr}}}`,
          `{"ph":"s","id":${graphCorr},"pid":${pid},"tid":${tid},"ts":${f(Math.max(t - 8, startUs))},"cat":"ac2g","name":"ac2g"}`,
        );
      }
      let first = true;
      for (const k of kernels) {
        let dur: number;
        if (k.cls === "norm" || k.cls === "activation" || k.cls === "elementwise") dur = small;
        else dur = (budget[k.cls] * k.w) / weightSum[k.cls]!;
        if (!k.noGap) {
          t += gapUs;
          truth.gapUs.launch += gapUs;
        }
        // The truth is what the trace holds: durations as written (ns precision).
        dur = Math.round(dur * 1000) / 1000;
        truth.kernelUs[k.cls] += dur;
        const kc = graph ? graphCorr : corr++;
        if (!graph) {
          const launchAt = t - Math.min(gapUs, 5);
          parts.push(
            `{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":${pid},"tid":${tid},"ts":${f(launchAt)},"dur":${f(Math.min(gapUs, 5) * 0.8)},"args":{"cbid":211,"correlation":${kc}}}`,
            `{"ph":"s","id":${kc},"pid":${pid},"tid":${tid},"ts":${f(launchAt)},"cat":"ac2g","name":"ac2g"}`,
            `{"ph":"f","id":${kc},"pid":0,"tid":7,"ts":${f(t)},"cat":"ac2g","name":"ac2g","bp":"e"}`,
          );
        } else if (first)
          parts.push(`{"ph":"f","id":${kc},"pid":0,"tid":7,"ts":${f(t)},"cat":"ac2g","name":"ac2g","bp":"e"}`);
        first = false;
        parts.push(
          `{"ph":"X","cat":"kernel","name":${(k.json ??= JSON.stringify(k.name))},"pid":0,"tid":7,"ts":${f(t)},"dur":${f(dur)},"args":{"queued":0,"device":0,"context":1,"stream":7,"correlation":${kc},"registers per thread":128,"shared memory":0,"blocks per SM":1,"warps per SM":4,"grid":[132,1,1],"block":[128,1,1],"est. achieved occupancy %":6}}`,
        );
        t += dur;
      }
      push(`,\n${parts.join(",\n")}`);
      await yieldToLoop();
    }
    push(`\n],"displayTimeUnit":"ms","baseTimeNanoseconds":${epochNs}}\n`);
    gz.end();
    await done;
    writeFileSync(
      `${file.replace(/\.gz$/, "").replace(/\.json$/, "")}.truth.json`,
      `${JSON.stringify(truth, null, 2)}\n`,
    );
    this.lastTruth = truth;
  }
}

/** µs with ns precision, as Kineto writes them. */
function f(us: number): string {
  return (Math.round(us * 1000) / 1000).toString();
}
