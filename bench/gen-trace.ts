// Generates a realistic vLLM decode trace in Kineto's Chrome-trace layout (pretty-printed events,
// metadata before and after traceEvents, python_function stacks, CUDA-graph replays whose kernels
// share one correlation id, eager sampler kernels, ac2g flows). Writes `<out>` and `<out>.truth.json`
// holding the generator's own per-class kernel totals (labels from this table, not the classifier).
//   node --import tsx bench/gen-trace.ts OUT.json [--mb 1100] [--tp 4] [--rank 0] [--seed 1]
import { once } from "node:events";
import { createWriteStream } from "node:fs";
import { pathToFileURL } from "node:url";

interface KernelSpec {
  name: string;
  cls: string;
  us: number;
}

const LAYER: KernelSpec[] = [
  {
    name: "void vllm::rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, c10::BFloat16 const*, c10::BFloat16 const*, float, int, int)",
    cls: "norm",
    us: 3.1,
  },
  { name: "nvjet_tst_64x8_64x16_4x1_v_bz_splitK_TNT", cls: "gemm", us: 18.4 },
  {
    name: "void vllm::rotary_embedding_kernel<c10::BFloat16, true>(long const*, c10::BFloat16*, c10::BFloat16*, c10::BFloat16 const*, int, long, long, long, int, int, int)",
    cls: "elementwise",
    us: 2.2,
  },
  {
    name: "void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, __nv_bfloat16, (vllm::Fp8KVCacheDataType)0>(__nv_bfloat16 const*, __nv_bfloat16 const*, __nv_bfloat16*, __nv_bfloat16*, long const*, long, long, long, long, int, int, int, float const*, float const*)",
    cls: "attention",
    us: 2.4,
  },
  {
    name: "void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 4, cutlass::bfloat16_t> >, false, true, false, false, true, true, false, false>(flash::Flash_fwd_params)",
    cls: "attention",
    us: 9.8,
  },
  {
    name: "void flash::flash_fwd_splitkv_combine_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 4, cutlass::bfloat16_t> >, 4, 1, true>(flash::Flash_fwd_params)",
    cls: "attention",
    us: 2.6,
  },
  {
    name: "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
    cls: "gemm",
    us: 11.7,
  },
  {
    name: "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 4>(vllm::RankData*, vllm::RankSignals, vllm::Signal*, __nv_bfloat16*, int, int)",
    cls: "communication",
    us: 5.0,
  },
  {
    name: "void vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, c10::BFloat16*, c10::BFloat16 const*, float, int, int)",
    cls: "norm",
    us: 3.4,
  },
  { name: "nvjet_tst_128x8_64x16_2x1_v_bz_splitK_TNT", cls: "gemm", us: 41.5 },
  {
    name: "void vllm::act_and_mul_kernel<c10::BFloat16, &(c10::BFloat16 vllm::silu_kernel<c10::BFloat16>(c10::BFloat16 const&)), true>(c10::BFloat16*, c10::BFloat16 const*, int)",
    cls: "activation",
    us: 2.9,
  },
  {
    name: "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x64x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
    cls: "gemm",
    us: 30.2,
  },
  {
    name: "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 4>(vllm::RankData*, vllm::RankSignals, vllm::Signal*, __nv_bfloat16*, int, int)",
    cls: "communication",
    us: 5.0,
  },
];
const TAIL: KernelSpec[] = [
  {
    name: "void vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, c10::BFloat16*, c10::BFloat16 const*, float, int, int)",
    cls: "norm",
    us: 3.4,
  },
  { name: "nvjet_tst_256x8_64x16_2x1_v_bz_TNT", cls: "gemm", us: 62.0 },
  { name: "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", cls: "communication", us: 14.0 },
];
const SAMPLER: KernelSpec[] = [
  {
    name: "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)",
    cls: "sampling",
    us: 6.5,
  },
  {
    name: "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::ArgMaxOps<float>, unsigned int, long, 4> >(at::native::ReduceOp<float, at::native::ArgMaxOps<float>, unsigned int, long, 4>)",
    cls: "sampling",
    us: 4.2,
  },
  {
    name: "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<long>, at::detail::Array<char*, 1> >(int, at::native::FillFunctor<long>, at::detail::Array<char*, 1>)",
    cls: "elementwise",
    us: 1.3,
  },
];

export interface GenOptions {
  targetBytes: number;
  layers?: number;
  tp?: number;
  rank?: number;
  seed?: number;
  /** Extra host time per step on this rank (µs), to make a straggler. */
  rankDelayUs?: number;
}

export interface GenTruth {
  steps: number;
  kernels: number;
  events: number;
  bytes: number;
  kernelUsByClass: Record<string, number>;
  stepDurUs: number[];
}

function lcg(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 4294967296;
  };
}

const fmt = (us: number) => {
  const ns = Math.round(us * 1000);
  return `${Math.floor(ns / 1000)}.${String(ns % 1000).padStart(3, "0")}`;
};

/** Writes the trace; resolves with the generator's truth. */
export async function generateTrace(out: string, o: GenOptions): Promise<GenTruth> {
  const rand = lcg(o.seed ?? 1);
  const layers = o.layers ?? 40;
  const rank = o.rank ?? 0;
  const ws = createWriteStream(out, { highWaterMark: 4 << 20 });
  let bytes = 0;
  let pending: string[] = [];
  let pendingLen = 0;
  const write = async (s: string) => {
    pending.push(s);
    pendingLen += s.length;
    if (pendingLen > 1 << 20) {
      const text = pending.join("");
      pending = [];
      pendingLen = 0;
      bytes += Buffer.byteLength(text);
      if (!ws.write(text)) await once(ws, "drain");
    }
  };
  const truth: GenTruth = { steps: 0, kernels: 0, events: 0, bytes: 0, kernelUsByClass: {}, stepDurUs: [] };
  const pid = 4242 + rank;
  const tid = 4242 + rank;
  await write(
    `{\n  "schemaVersion": 1,\n  "deviceProperties": [\n    {\n      "id": ${rank}, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85045870592,\n      "computeMajor": 9, "computeMinor": 0\n    }\n  ],\n  "vllm_version": "0.11.0",\n  "with_stack": 1,\n  "displayTimeUnit": "ms",\n  "baseTimeNanoseconds": 1759300000000000000,\n  "traceEvents": [`,
  );
  let first = true;
  const ev = async (s: string) => {
    truth.events++;
    await write(first ? s : `,${s}`);
    first = false;
  };
  await ev(
    `\n  {\n    "name": "process_name", "ph": "M", "ts": 0.000, "pid": ${pid}, "tid": 0,\n    "args": {\n      "name": "python3"\n    }\n  }`,
  );
  await ev(
    `\n  {\n    "name": "process_name", "ph": "M", "ts": 0.000, "pid": ${rank}, "tid": 0,\n    "args": {\n      "name": "GPU ${rank}"\n    }\n  }`,
  );
  let t = 1_000_000 + rank * 3.7;
  let corr = 100_000;
  let ext = 50_000;
  const stream = 7;
  const kernel = async (k: KernelSpec, start: number, dur: number, c: number, x: number, graph: boolean) => {
    truth.kernels++;
    truth.kernelUsByClass[k.cls] = (truth.kernelUsByClass[k.cls] ?? 0) + Math.round(dur * 1000) / 1000;
    await ev(
      `\n  {\n    "ph": "X", "cat": "kernel", "name": "${k.name}", "pid": ${rank}, "tid": ${stream},\n    "ts": ${fmt(start)}, "dur": ${fmt(dur)},\n    "args": {\n      "External id": ${x},\n      "queued": 0, "device": ${rank}, "context": 1,\n      "stream": ${stream}, "correlation": ${c},\n      "registers per thread": 128,\n      "shared memory": 49152,\n      "blocks per SM": 1.0,\n      "warps per SM": 4.0,\n      "grid": [132, 1, 1],\n      "block": [128, 1, 1],\n      "est. achieved occupancy %": 6${graph ? `,\n      "graph node id": ${truth.kernels}` : ""}\n    }\n  }`,
    );
  };
  const py = async (name: string, ts: number, dur: number, id: number) => {
    await ev(
      `\n  {\n    "ph": "X", "cat": "python_function", "name": "${name}", "pid": ${pid}, "tid": ${tid},\n    "ts": ${fmt(ts)}, "dur": ${fmt(dur)},\n    "args": {\n      "Python parent id": ${id - 1}, "Python id": ${id}, "Ev Idx": ${id + 7}\n    }\n  }`,
    );
  };
  const runtime = async (name: string, ts: number, dur: number, c: number, x: number) => {
    await ev(
      `\n  {\n    "ph": "X", "cat": "cuda_runtime", "name": "${name}", "pid": ${pid}, "tid": ${tid},\n    "ts": ${fmt(ts)}, "dur": ${fmt(dur)},\n    "args": {\n      "External id": ${x},\n      "cbid": 311, "correlation": ${c}\n    }\n  }`,
    );
    await ev(
      `\n  {\n    "ph": "s", "id": ${c}, "pid": ${pid}, "tid": ${tid}, "ts": ${fmt(ts)},\n    "cat": "ac2g", "name": "ac2g"\n  }`,
    );
  };
  const cpuOp = async (name: string, ts: number, dur: number, x: number) => {
    await ev(
      `\n  {\n    "ph": "X", "cat": "cpu_op", "name": "${name}", "pid": ${pid}, "tid": ${tid},\n    "ts": ${fmt(ts)}, "dur": ${fmt(dur)},\n    "args": {\n      "External id": ${x},"Record function id": 0, "Ev Idx": ${x}\n    }\n  }`,
    );
  };
  let pyId = 1;
  while (bytes < o.targetBytes) {
    truth.steps++;
    const host = 350 + rand() * 100 + (o.rankDelayUs ?? 0);
    const stepStart = t;
    // CPU: annotation, python stack, prepare inputs, graph launch, sampler launches.
    const graphCorr = corr++;
    const graphExt = ext++;
    let cpu = stepStart + 2;
    for (let p = 0; p < 600; p++) {
      await py(
        `vllm/v1/worker/gpu_model_runner.py(${1000 + (p % 97)}): _prepare_inputs_${p % 13}`,
        cpu + p * 0.5,
        0.4,
        pyId++,
      );
    }
    cpu += host;
    await cpuOp("aten::copy_", cpu - 30, 12, ext++);
    const launchTs = cpu;
    await runtime("cudaGraphLaunch", launchTs, 14.2, graphCorr, graphExt);
    let g = launchTs + 9.5;
    const seq: KernelSpec[] = [];
    for (let l = 0; l < layers; l++) seq.push(...LAYER);
    seq.push(...TAIL);
    for (const k of seq) {
      const d = k.us * (0.9 + rand() * 0.2);
      await kernel(k, g, d, graphCorr, graphExt, true);
      g += d + 1.1 + rand() * 0.6;
    }
    // Eager sampler: one launch per kernel, then a D2H copy.
    let c2 = launchTs + 30;
    for (const k of SAMPLER) {
      const c = corr++;
      const x = ext++;
      await cpuOp("aten::argmax", c2 - 1, 6, x);
      await runtime("cudaLaunchKernel", c2, 4.1, c, x);
      const st = Math.max(g, c2 + 5);
      const d = k.us * (0.9 + rand() * 0.2);
      await kernel(k, st, d, c, x, false);
      g = st + d + 1.2;
      c2 += 8;
    }
    const mc = corr++;
    await runtime("cudaMemcpyAsync", c2, 6.3, mc, ext++);
    const mst = Math.max(g, c2 + 4);
    truth.kernels++;
    truth.kernelUsByClass.memcpy = (truth.kernelUsByClass.memcpy ?? 0) + 2.1;
    await ev(
      `\n  {\n    "ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Pinned)", "pid": ${rank}, "tid": ${stream},\n    "ts": ${fmt(mst)}, "dur": 2.100,\n    "args": {\n      "queued": 0, "device": ${rank}, "context": 1,\n      "stream": ${stream}, "correlation": ${mc},\n      "bytes": 256, "memory bandwidth (GB/s)": 0.12\n    }\n  }`,
    );
    const gEnd = mst + 2.1;
    const stepEnd = gEnd + 25;
    await ev(
      `\n  {\n    "ph": "X", "cat": "user_annotation", "name": "execute_context_0(0)_generation_32(32)", "pid": ${pid}, "tid": ${tid},\n    "ts": ${fmt(stepStart)}, "dur": ${fmt(stepEnd - stepStart)},\n    "args": {\n      "External id": ${ext++},"Record function id": 0, "Ev Idx": ${pyId}\n    }\n  }`,
    );
    truth.stepDurUs.push(gEnd - stepStart);
    t = stepEnd + 5;
  }
  await write(
    `,\n  {\n    "name": "Record Window End", "ph": "i", "s": "g",\n    "pid": "", "tid": "", "ts": ${fmt(t)}\n  }\n  ],\n  "distributedInfo": {"backend": "nccl", "rank": ${rank}, "world_size": ${o.tp ?? 4}, "pg_count": 1, "pg_config": [], "nccl_version": "2.27.3"},\n  "traceName": "${out}"\n}\n`,
  );
  const text = pending.join("");
  bytes += Buffer.byteLength(text);
  ws.end(text);
  await once(ws, "finish");
  truth.bytes = bytes;
  return truth;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const args = process.argv.slice(2);
  const out = args[0];
  if (!out) {
    console.error("usage: gen-trace.ts OUT.json [--mb N] [--tp N] [--rank N] [--seed N]");
    process.exit(2);
  }
  const opt = (name: string, def: number) => {
    const i = args.indexOf(`--${name}`);
    return i >= 0 ? Number(args[i + 1]) : def;
  };
  const truth = await generateTrace(out, {
    targetBytes: opt("mb", 1100) * 1e6,
    tp: opt("tp", 4),
    rank: opt("rank", 0),
    seed: opt("seed", 1),
  });
  const { writeFile } = await import("node:fs/promises");
  await writeFile(`${out}.truth.json`, JSON.stringify({ ...truth, stepDurUs: undefined }, null, 2));
  console.log(
    `${out}: ${(truth.bytes / 1e6).toFixed(0)} MB, ${truth.events} events, ${truth.kernels} GPU activities, ${truth.steps} steps`,
  );
}
