// All-reduce cost: NCCL's own cost model (collectives.md §3), measured small-message latencies (§5.1), and each
// engine's choice of implementation (§7: vLLM custom all-reduce eligibility, SGLang, TensorRT-LLM). Pure.
import type { Gpu, Interconnect } from "./hardware.ts";
import { ncclArchIndex } from "./hardware.ts";
import type { Range } from "./range.ts";

export type Proto = "LL" | "LL128" | "Simple";
export type Algo = "Ring" | "Tree" | "NVLS";
export type Engine = "vllm" | "sglang" | "trtllm" | "llamacpp" | "gptfast" | "mlx";

const PROTOS: Proto[] = ["LL", "LL128", "Simple"];

// §3.2, NCCL master (2.30.x): {LL, LL128, Simple}.
const BASE_LAT: Record<Algo, number[]> = { Tree: [6.8, 14.0, 8.4], Ring: [6.6, 14.0, 8.4], NVLS: [0, 0, 0] };
const HW_LAT: Record<"nvlink" | "pcie" | "net", Record<Algo, (number | null)[]>> = {
  nvlink: { Tree: [0.6, 1.25, 4.0], Ring: [0.6, 1.9, 3.4], NVLS: [null, null, 25] },
  pcie: { Tree: [1.0, 1.9, 4.0], Ring: [1.0, 2.5, 5.7], NVLS: [null, null, null] },
  net: { Tree: [5.0, 8.5, 14], Ring: [2.7, 4.0, 14.0], NVLS: [null, null, 18] },
};
// §3.3 per-arch constants, index = ncclArchIndex (Volta, Ampere, Hopper, Blackwell).
const LL_MAX_BW = [39, 87.7, 141, 282];
const PER_CH_RING_LL128 = [20, 20, 36.7, 40];
const PER_CH_TREE = [26.5, 24, 38.7, 70];

export interface NcclCandidate {
  algorithm: Algo;
  protocol: Proto;
  latencyUs: number;
  algBwGBs: number;
  timeUs: number;
  enabled: boolean;
  why?: string;
}

export interface NcclMenu {
  protocols: Proto[];
  algorithms: Algo[];
  ll128Reason: string;
  nvlsReason: string;
}

/** Parses NCCL_PROTO / NCCL_ALGO style lists ("LL", "LL,Simple", "^LL128"); returns the allowed set or null for auto. */
export function parseNcclList<T extends string>(
  value: string | undefined,
  all: readonly T[],
): { set: Set<T>; explicit: boolean } | null {
  if (!value) return null;
  const v = value.trim();
  const exclude = v.startsWith("^");
  const names = (exclude ? v.slice(1) : v)
    .split(/[,\s]+/)
    .filter(Boolean)
    .map((s) => all.find((a) => a.toLowerCase() === s.toLowerCase()))
    .filter((x): x is T => x !== undefined);
  const set = new Set<T>(exclude ? all.filter((a) => !names.includes(a)) : names);
  return { set, explicit: true };
}

/** Which protocols/algorithms NCCL enables by default on this link (§3.1), then the user's overrides. */
export function ncclMenu(link: Interconnect, gpu: Gpu, n: number, proto?: string, algo?: string): NcclMenu {
  const nvlinkClass = link.allPairsNvlink && link.kind !== "pcie";
  const ll128Default = nvlinkClass && gpu.sm >= 70;
  const ll128Reason = ll128Default
    ? "LL128 enabled: intra-node path is NVLink-class (typeIntra ≤ PATH_NVB) and SM ≥ 70"
    : "LL128 off by default: the intra-node path is not NVLink-class (PCIe), NCCL never enables LL128 there unless NCCL_PROTO names it";
  let protocols: Proto[] = ll128Default ? [...PROTOS] : ["LL", "Simple"];
  const p = parseNcclList(proto, PROTOS);
  if (p) protocols = PROTOS.filter((x) => p.set.has(x));
  const nvlsOk = link.nvswitch && gpu.sm >= 90 && n > 2;
  const nvlsReason = nvlsOk ? "NVLS available (NVSwitch, SM ≥ 90)" : "NVLS unavailable (needs NVSwitch and SM ≥ 90)";
  let algorithms: Algo[] = nvlsOk ? ["Ring", "Tree", "NVLS"] : ["Ring", "Tree"];
  const a = parseNcclList(algo, ["Ring", "Tree", "NVLS"] as const);
  if (a) algorithms = algorithms.filter((x) => a.set.has(x));
  if (protocols.length === 0) protocols = ["Simple"];
  if (algorithms.length === 0) algorithms = ["Ring"];
  return { protocols, algorithms, ll128Reason, nvlsReason };
}

/** NCCL's predicted time for one all-reduce of `bytes` over n ranks in one node (§3.3 composition). */
export function ncclCandidates(
  link: Interconnect,
  gpu: Gpu,
  n: number,
  bytes: number,
  menu: NcclMenu,
  graph?: { busBwGBs: number; nChannels: number },
): NcclCandidate[] {
  const ai = ncclArchIndex(gpu.sm);
  const hw = link.kind === "pcie" || link.kind === "none" ? HW_LAT.pcie : HW_LAT.nvlink;
  const nCh = graph?.nChannels ?? (link.kind === "pcie" || link.kind === "none" ? 2 : 16);
  const busBw = graph?.busBwGBs ?? link.ncclBusBwGBs;
  const nodes = Math.max(1, link.nodes);
  const out: NcclCandidate[] = [];
  for (const algorithm of ["Ring", "Tree", "NVLS"] as Algo[]) {
    for (const [pi, protocol] of PROTOS.entries()) {
      const hwLat = hw[algorithm][pi];
      if (hwLat === null) continue;
      let lat: number;
      let bw: number;
      if (algorithm === "Ring") {
        const intraSteps = 2 * (n - 1) - 2 * (nodes - 1);
        const inter = nodes > 1 ? HW_LAT.net.Ring[pi]! : 0;
        lat = BASE_LAT.Ring[pi] + intraSteps * hwLat + 2 * (nodes - 1) * inter;
        bw =
          protocol === "LL"
            ? Math.min(LL_MAX_BW[ai], 0.5 * busBw)
            : protocol === "LL128"
              ? Math.min(0.92 * busBw, nCh * PER_CH_RING_LL128[ai])
              : busBw;
        bw *= n / (2 * (n - 1));
      } else if (algorithm === "Tree") {
        const inter = nodes > 1 ? HW_LAT.net.Tree[pi]! : 0;
        lat = BASE_LAT.Tree[pi] + 2 * ((n / nodes - 1) * hwLat + Math.log2(nodes) * inter);
        const bwp = Math.min(0.92 * busBw, nCh * PER_CH_TREE[ai]) * 0.85;
        bw =
          protocol === "LL"
            ? Math.min(bwp / 3.8, LL_MAX_BW[ai])
            : protocol === "LL128"
              ? Math.min((bwp * 7) / 9, nCh * PER_CH_RING_LL128[ai])
              : bwp;
        bw *= 0.5;
      } else {
        lat = BASE_LAT.NVLS[pi] + hwLat;
        bw = busBw * (ai >= 3 ? 0.74 : 0.85) * ((nCh - 1) / nCh) * 2 * (n / (2 * (n - 1)));
      }
      const enabled = menu.protocols.includes(protocol) && menu.algorithms.includes(algorithm);
      const timeUs = n <= 1 ? 0 : lat + bytes / (1000 * bw);
      out.push({ algorithm, protocol, latencyUs: n <= 1 ? 0 : lat, algBwGBs: bw, timeUs, enabled });
    }
  }
  return out;
}

// ---------------------------------------------------------------- graph search fallback (search.cc)

/**
 * sm100SpeedArrayIntra's lowest speed, GB/s per channel (src/graph/search.cc, v2.27.3 to v2.30.7). A single-node
 * search on GPUs of SM ≥ 100 that finds no ring at this speed falls back to "simple order": one channel at 0.1 GB/s.
 * Hopper's list goes down to 3 GB/s and older GPUs' to 3 as well, so they always find one. (With every rank on one
 * node NCCL drops the NET nodes, ncclTopoTrimSystem, so the intra-node list is the one used.)
 */
export const SM100_MIN_INTRA_GBS = 18;
/** The graph NCCL's tuner costs after the fallback (search.cc: bwIntra = bwInter = 0.1, nChannels = 1). */
export const FALLBACK_GRAPH = { busBwGBs: 0.1, nChannels: 1 };
/** NCCL's bandwidth of the link between CPU sockets (src/graph/topo.h), GB/s: what a ring crossing sockets gets. */
export const NCCL_CPU_LINK_GBS: Record<string, number> = {
  "AMD (any EPYC)": 16,
  "Intel Skylake to Ice Lake": 10,
  "Intel Sapphire/Emerald Rapids": 22,
  "Intel Granite Rapids": 40,
  Arm: 6,
};

export interface SearchFallback {
  /** yes: NCCL's ring search fails and it falls back; unknown: it depends on the host, which was not given. */
  state: "yes" | "no" | "unknown";
  reason: string;
}

/** Whether NCCL's ring search falls back to one channel at 0.1 GB/s on this node (see SM100_MIN_INTRA_GBS). */
export function ncclSearchFallback(link: Interconnect, gpu: Gpu, n: number): SearchFallback {
  if (n <= 1) return { state: "no", reason: "one rank: no ring" };
  if (link.nodes > 1) return { state: "no", reason: "multi-node: the inter-node speed list goes down to 0.12 GB/s" };
  if (gpu.sm < 100)
    return { state: "no", reason: `SM ${gpu.sm} < 100: NCCL's intra-node speed list goes down to 3 GB/s per channel` };
  if (link.kind !== "pcie")
    return { state: "no", reason: `${link.label}: every GPU pair has ≥ ${SM100_MIN_INTRA_GBS} GB/s per channel` };
  const min = SM100_MIN_INTRA_GBS;
  if (link.ncclBusBwGBs < min)
    return {
      state: "yes",
      reason: `PCIe Gen${link.pcie.gen} x${link.pcie.width} is ${link.ncclBusBwGBs} GB/s in NCCL's topology, below the ${min} GB/s floor of its SM ≥ 100 ring search`,
    };
  const slow = Object.entries(NCCL_CPU_LINK_GBS)
    .filter(([, bw]) => bw < min)
    .map(([cpu, bw]) => `${cpu} ${bw}`)
    .join(", ");
  const fast = Object.entries(NCCL_CPU_LINK_GBS)
    .filter(([, bw]) => bw >= min)
    .map(([cpu, bw]) => `${cpu} ${bw}`)
    .join(", ");
  const hosts = `NCCL rates the link between sockets at ${slow} GB/s (below ${min}: the ring search fails and falls back to one channel at 0.1 GB/s) and ${fast} GB/s (no fallback); the host CPU is not an input`;
  if (link.crossSocket === true)
    return { state: "unknown", reason: `some GPU pairs cross CPU sockets (SYS): ${hosts}` };
  if (link.crossSocket === false)
    return {
      state: "no",
      reason: `no GPU pair crosses CPU sockets and PCIe gives ${link.ncclBusBwGBs} GB/s per channel`,
    };
  return {
    state: "unknown",
    reason: `whether GPU pairs cross CPU sockets is not known (give --topo, or --interconnect pcie${link.pcie.gen}-sys / pcie${link.pcie.gen}-node); if they do, ${hosts}`,
  };
}

/**
 * What Simple costs over LL per call on a PCIe ring, µs. No public measurement isolates it, so it is bounded. Low:
 * one more trip a ring step (Simple's flag follows its data behind a fence; LL's rides in the data), costed at LL's
 * own step as measured on this GPU (§5.1: the 8 KB time's rise from 4 to 8 ranks over the 8 steps it adds: 1.65 µs on
 * RTX PRO 6000), else NCCL's LL hwLat. High: NCCL's own constants (5.7 − 1.0 µs a step + 8.4 − 6.6 base: 67.6 µs at
 * n = 8). The middle is their geometric mean: nothing favours either end.
 */
export function simpleOverLlUs(n: number, gpuId?: string): Range {
  const steps = 2 * (n - 1);
  const t4 = gpuId ? measuredLatency(gpuId, "nccl", 4, MEASURED_SIZES[0]!) : undefined;
  const t8 = gpuId ? measuredLatency(gpuId, "nccl", 8, MEASURED_SIZES[0]!) : undefined;
  const llStep = t4 && t8 && t8.us > t4.us ? (t8.us - t4.us) / 8 : HW_LAT.pcie.Ring[0]!;
  const low = steps * llStep;
  const high = BASE_LAT.Ring[2]! - BASE_LAT.Ring[0]! + steps * (HW_LAT.pcie.Ring[2]! - HW_LAT.pcie.Ring[0]!);
  return { low, mid: Math.sqrt(low * high), high: Math.max(low, high) };
}

// ---------------------------------------------------------------- measured table (§5.1, aiconfigurator data)

/** Sizes of the §5.1 columns in bytes (BF16 4K/8K/16K/64K/1M elements). */
export const MEASURED_SIZES = [8192, 16384, 32768, 131072, 2097152];
type Impl = "nccl" | "vllm-custom" | "vllm-custom-eager" | "trtllm" | "sglang-custom";
export const MEASURED: Record<
  string,
  Partial<Record<Impl, Partial<Record<2 | 4 | 8, number[]>>>> & { version: Partial<Record<Impl, string>> }
> = {
  "h100-sxm": {
    nccl: { 2: [6.8, 7.3, 7.1, 7.7, 27.9], 4: [10.0, 12.5, 11.2, 11.4, 27.7], 8: [16.0, 19.0, 18.4, 19.0, 38.2] },
    "vllm-custom": { 2: [4.4, 4.5, 4.4, 4.8, 12.4], 4: [4.8, 4.8, 4.9, 5.8, 18.6], 8: [5.1, 5.3, 5.6, 7.9, 19.4] },
    "vllm-custom-eager": {
      2: [20.6, 20.7, 20.6, 20.1, 20.2],
      4: [22.0, 21.2, 22.0, 21.3, 25.3],
      8: [23.3, 23.0, 22.6, 23.9, 41.4],
    },
    trtllm: { 2: [2.8, 2.8, 2.9, 3.3, 9.4], 4: [3.1, 3.3, 3.4, 4.3, 26.1], 8: [3.5, 3.6, 3.8, 6.2, 35.5] },
    "sglang-custom": { 2: [2.6, 2.7, 2.8, 3.2, 9.2], 4: [2.8, 2.9, 3.1, 4.1, 15.6], 8: [3.6, 3.7, 4.1, 6.4, 20.1] },
    version: {
      nccl: "NCCL 2.29.2",
      "vllm-custom": "vLLM 0.24.0",
      "vllm-custom-eager": "vLLM 0.24.0",
      trtllm: "TRT-LLM 1.3.0rc20",
      "sglang-custom": "SGLang 0.5.14",
    },
  },
  "h200-sxm": {
    nccl: { 2: [6.7, 7.3, 7.3, 7.5, 26.8], 4: [10.1, 10.9, 11.3, 11.3, 27.4], 8: [16.7, 18.3, 18.4, 21.4, 37.5] },
    "vllm-custom": { 2: [4.6, 4.6, 4.6, 4.8, 12.4], 4: [4.8, 4.8, 4.9, 5.8, 17.8], 8: [5.1, 5.2, 5.7, 7.9, 18.1] },
    version: { nccl: "NCCL 2.29.2", "vllm-custom": "vLLM 0.24.0" },
  },
  b200: {
    nccl: { 2: [10.5, 11.0, 10.8, 11.4, 18.9], 4: [15.7, 16.0, 17.0, 17.4, 25.9], 8: [26.0, 26.6, 27.3, 28.1, 32.1] },
    "vllm-custom": { 2: [7.0, 7.1, 7.0, 7.4, 25.3], 4: [7.1, 7.4, 7.4, 8.1, 23.8], 8: [7.8, 8.1, 8.2, 9.4, 20.7] },
    trtllm: { 2: [4.8, 5.2, 5.2, 5.1, 8.0], 4: [5.1, 5.5, 5.4, 5.4, 14.6], 8: [5.6, 5.9, 6.1, 6.3, 30.4] },
    version: { nccl: "NCCL 2.29.2", "vllm-custom": "vLLM 0.24.0", trtllm: "TRT-LLM 1.3.0rc20" },
  },
  gb200: {
    nccl: { 2: [11.4, 11.6, 11.7, 11.9, 19.3], 4: [16.2, 16.8, 17.3, 17.5, 27.5] },
    version: { nccl: "NCCL 2.29.2" },
  },
  "a100-80gb-sxm": {
    nccl: { 2: [11.0, 12.8, 12.8, 13.4, 47.6], 4: [14.7, 16.3, 17.4, 17.8, 46.2], 8: [21.3, 22.6, 26.0, 27.4, 53.7] },
    "vllm-custom": { 2: [5.3, 5.3, 5.2, 5.7, 15.2], 4: [5.5, 6.0, 6.0, 7.8, 26.0], 8: [6.3, 6.5, 6.9, 11.4, 27.9] },
    version: { nccl: "NCCL 2.27.3", "vllm-custom": "vLLM 0.14.0" },
  },
  l40s: {
    nccl: { 2: [8.1, 7.5, 9.1, 18.8, 120.7], 4: [13.0, 16.1, 20.1, 57.7, 622.1], 8: [32.5, 41.7, 90.3, 279.9, 2618] },
    "vllm-custom": { 2: [5.7, 6.2, 7.4, 11.0, 116.8] },
    version: { nccl: "NCCL 2.27.3", "vllm-custom": "vLLM 0.22.0" },
  },
  "rtx-pro-6000": {
    nccl: { 2: [6.8, 7.4, 8.1, 12.2, 72.0], 4: [13.5, 14.7, 15.7, 24.9, 141.7], 8: [26.7, 27.0, 29.4, 47.8, 221.2] },
    "vllm-custom": { 2: [4.5, 5.1, 5.4, 8.2, 55.7] },
    version: { nccl: "NCCL 2.29.2", "vllm-custom": "vLLM 0.24.0" },
  },
};

/** Log-log interpolation in the measured table; undefined when this system/impl/n was not measured. */
export function measuredLatency(
  gpuId: string,
  impl: Impl,
  n: number,
  bytes: number,
): { us: number; source: string } | undefined {
  const sys = MEASURED[gpuId.replace(/-custom$/, "")];
  const row = sys?.[impl]?.[n as 2 | 4 | 8];
  if (!row) return undefined;
  const xs = MEASURED_SIZES;
  let us: number;
  if (bytes <= xs[0]) us = row[0];
  else if (bytes >= xs[xs.length - 1])
    us = (row[row.length - 1] * bytes) / xs[xs.length - 1]; // bandwidth-bound beyond the table
  else {
    let i = 0;
    while (bytes > xs[i + 1]) i++;
    const t = (Math.log(bytes) - Math.log(xs[i])) / (Math.log(xs[i + 1]) - Math.log(xs[i]));
    us = Math.exp(Math.log(row[i]) + t * (Math.log(row[i + 1]) - Math.log(row[i])));
  }
  return {
    us,
    source: `measured under CUDA graphs, ${gpuId} ${sys.version[impl] ?? impl}, n=${n} (collectives.md §5.1, aiconfigurator data)`,
  };
}

// ---------------------------------------------------------------- engine choice (§7)

export interface CustomArDecision {
  engine: Engine;
  eligible: boolean;
  used: boolean;
  reason: string;
  /** The engine's own log line when it disables custom all-reduce, where it has one. */
  engineMessage?: string;
  forcedHypothetical?: boolean;
}

export interface AllReduceChoice {
  implementation: "nccl" | "vllm-custom" | "sglang-custom" | "trtllm-oneshot" | "pytorch-intranode" | "none";
  algorithm: string;
  protocol: Proto | null;
  /** Isolated device time per call (no rank skew), µs. */
  isolatedUs: Range;
  isolatedSource: string;
  /** Extra per call inside a real decode loop (rank skew, sync, host gaps), µs. */
  skewUs: Range;
  /** Per call when launched outside CUDA graphs, µs. */
  launchUs: Range;
  latencyUs: Range;
  customAllReduce: CustomArDecision;
  menu?: NcclMenu;
  candidates?: NcclCandidate[];
  /** NCCL's ring search on this node (NCCL only). */
  searchFallback?: SearchFallback;
  /**
   * Part of isolatedUs that is Simple's bounded cost over LL (simpleOverLlUs) where Simple runs on a PCIe ring: after
   * NCCL's search falls back, or forced. Zero elsewhere; when the fallback is unknown, low 0 and mid at equal odds.
   */
  simpleExtraUs: Range;
  reason: string[];
}

/** GeForce cards have PCIe peer-to-peer disabled by the driver (hardware.md §1). */
function p2pCapable(gpu: Gpu): boolean {
  return !/^rtx-(3090|4090|5090)/.test(gpu.id);
}

const VLLM_SIZES = [2, 4, 6, 8];

export function customArDecision(
  engine: Engine,
  gpu: Gpu,
  link: Interconnect,
  n: number,
  bytes: number,
  requested: boolean | undefined,
): CustomArDecision {
  if (engine === "llamacpp")
    return { engine, eligible: false, used: false, reason: "llama.cpp has no tensor-parallel custom all-reduce" };
  if (n <= 1) return { engine, eligible: false, used: false, reason: "TP = 1: no all-reduce" };
  const silence = "To silence this warning, specify disable_custom_all_reduce=True explicitly.";
  let eligible = true;
  let reason = "";
  let engineMessage: string | undefined;
  if (engine === "vllm" || engine === "sglang") {
    if (link.nodes > 1) {
      eligible = false;
      reason = "the TP group spans nodes";
      engineMessage = "Custom allreduce is disabled because this process group spans across nodes.";
    } else if (!VLLM_SIZES.includes(n)) {
      eligible = false;
      reason = `world size ${n} ∉ {2, 4, 6, 8}`;
      engineMessage = `Custom allreduce is disabled due to an unsupported world size: ${n}. Supported world sizes: [2, 4, 6, 8]. ${silence}`;
    } else if (n > 2 && !link.allPairsNvlink) {
      eligible = false;
      reason = `world size ${n} > 2 and not every GPU pair is NVLink-connected (${link.label}): NVML P2P/NVLink check fails`;
      engineMessage = `Custom allreduce is disabled because it's not supported on more than two PCIe-only GPUs. ${silence}`;
    } else if (!link.allPairsNvlink && !p2pCapable(gpu)) {
      eligible = false;
      reason = `${gpu.name} has PCIe peer-to-peer disabled by the driver; the CUDA-IPC P2P test fails`;
      engineMessage = `Custom allreduce is disabled because your platform lacks GPU P2P capability or P2P test failed. ${silence}`;
    } else if (bytes % 16 !== 0 || bytes >= 8 * 1024 * 1024) {
      eligible = false;
      reason = `message of ${bytes} B is not a multiple of 16 or not below max_size 8 MiB: this call goes to NCCL`;
    } else
      reason = n === 2 ? "world size 2: one-shot custom kernel" : "full NVLink connectivity: one-shot custom kernel";
  } else if (engine === "trtllm") {
    if (!link.allPairsNvlink || link.nodes > 1 || ![2, 4, 8].includes(n)) {
      eligible = false;
      reason = !link.allPairsNvlink
        ? "TensorRT-LLM's custom kernels need NVLink peer access; PCIe-only → NCCL"
        : `TP ${n} outside the AUTO table {2, 4, 8} → NCCL`;
    } else reason = "AllReduceStrategy AUTO picks ONESHOT at decode message sizes";
  } else if (engine === "gptfast") {
    if (!link.allPairsNvlink) {
      eligible = false;
      reason = "PyTorch intra-node comm (ENABLE_INTRA_NODE_COMM) needs NVLink; falls back to NCCL";
    } else reason = "PyTorch intra-node one-shot all-reduce over NVLink (ENABLE_INTRA_NODE_COMM=1)";
  }
  if (requested === false)
    return {
      engine,
      eligible,
      used: false,
      reason: "custom all-reduce disabled by the user (--disable-custom-all-reduce)",
    };
  if (requested === true && !eligible)
    return {
      engine,
      eligible,
      used: true,
      reason: `forced on for a what-if: the engine would refuse it (${reason})`,
      engineMessage,
      forcedHypothetical: true,
    };
  return { engine, eligible, used: eligible, reason, engineMessage };
}

export interface CollectiveContext {
  engine: Engine;
  gpu: Gpu;
  link: Interconnect;
  n: number;
  bytes: number;
  cudaGraphs: boolean;
  ncclProto?: string;
  ncclAlgo?: string;
  /** Given: whether NCCL's ring search falls back (its log says so); unset: derived from the link. */
  ncclFallback?: boolean;
  customAllReduce?: boolean;
}

// In-loop extra per collective beyond the isolated kernel: rank skew / sync / host gaps (collectives.md §5.2–5.3:
// profiled medians 2–5× minima; gpt-fast 18–29 µs per position vs ≈ 5–6 µs isolated).
export const SKEW_US: Range = { low: 2, mid: 6, high: 18 };
// CPU/launch cost per collective outside CUDA graphs: vLLM custom 20–24 µs eager vs 4.4–5.3 graph (§5.1).
export const EAGER_LAUNCH_US: Range = { low: 12, mid: 17, high: 25 };

const choiceCache = new Map<string, AllReduceChoice>();

/** Picks the all-reduce implementation the engine would use, and its cost per call (memoised; results are not mutated). */
export function chooseAllReduce(ctx: CollectiveContext): AllReduceChoice {
  const key = `${ctx.engine}|${ctx.gpu.id}|${ctx.gpu.sm}|${ctx.link.kind}|${ctx.link.label}|${ctx.link.allPairsNvlink}|${ctx.link.ncclBusBwGBs}|${ctx.link.perDirectionGBs}|${ctx.link.nodes}|${ctx.n}|${ctx.bytes}|${ctx.cudaGraphs}|${ctx.ncclProto}|${ctx.ncclAlgo}|${ctx.ncclFallback}|${ctx.customAllReduce}`;
  const hit = choiceCache.get(key);
  if (hit) return hit;
  const c = computeAllReduce(ctx);
  if (choiceCache.size > 10000) choiceCache.clear();
  choiceCache.set(key, c);
  return c;
}

function computeAllReduce(ctx: CollectiveContext): AllReduceChoice {
  const { engine, gpu, link, n, bytes } = ctx;
  const car = customArDecision(engine, gpu, link, n, bytes, ctx.customAllReduce);
  const zero = { low: 0, mid: 0, high: 0 };
  if (n <= 1 || engine === "llamacpp") {
    return {
      implementation: "none",
      algorithm: "none",
      protocol: null,
      isolatedUs: zero,
      isolatedSource: n <= 1 ? "TP = 1" : "llama.cpp splits layers across GPUs (no TP all-reduce)",
      skewUs: zero,
      launchUs: zero,
      latencyUs: zero,
      customAllReduce: car,
      simpleExtraUs: zero,
      reason: [n <= 1 ? "TP = 1: no all-reduce" : "llama.cpp: layer split, activations copied between GPUs instead"],
    };
  }
  const launchUs = ctx.cudaGraphs ? zero : EAGER_LAUNCH_US;
  const reason: string[] = [];
  if (car.used) {
    const impl =
      engine === "vllm"
        ? "vllm-custom"
        : engine === "sglang"
          ? "sglang-custom"
          : engine === "trtllm"
            ? "trtllm-oneshot"
            : "pytorch-intranode";
    const tableImpl: Impl =
      engine === "vllm"
        ? "vllm-custom"
        : engine === "sglang"
          ? "sglang-custom"
          : engine === "trtllm"
            ? "trtllm"
            : "vllm-custom";
    const m = car.forcedHypothetical ? undefined : measuredLatency(gpu.id, tableImpl, n, bytes);
    // One-shot model: one barrier in/out + each rank reads (n−1) peer buffers (§2).
    const p2pBw = Math.max(1, link.perDirectionGBs * 0.7);
    const alpha = link.allPairsNvlink ? 4.5 : 6;
    const model = alpha + ((n - 1) * bytes) / (p2pBw * 1000);
    const mid = m?.us ?? model;
    const isolated = { low: Math.min(mid, model) * 0.85, mid, high: Math.max(mid, model) * 1.15 };
    reason.push(`custom all-reduce used: ${car.reason}`);
    reason.push(
      n <= 4 || bytes < 256 * 1024 ? "one-shot kernel (n ≤ 8 and < 256 KB)" : "two-shot kernel (large message)",
    );
    return {
      implementation: impl,
      algorithm: bytes < 256 * 1024 || n === 2 ? "one-shot" : "two-shot",
      protocol: null,
      isolatedUs: isolated,
      isolatedSource: m
        ? `${m.source}; one-shot model α + (n−1)·S/B_p2p = ${model.toFixed(1)} µs`
        : `one-shot model α_sync ${alpha} µs + (n−1)·S/B_p2p (${p2pBw.toFixed(0)} GB/s) = ${model.toFixed(1)} µs (collectives.md §2)`,
      skewUs: SKEW_US,
      launchUs,
      latencyUs: addRanges(isolated, SKEW_US, launchUs),
      customAllReduce: car,
      simpleExtraUs: zero,
      reason,
    };
  }
  if (engine === "vllm" || engine === "sglang") reason.push(`custom all-reduce off: ${car.reason} → PyNCCL`);
  else reason.push(car.reason);
  const menu = ncclMenu(link, gpu, n, ctx.ncclProto, ctx.ncclAlgo);
  const cands = ncclCandidates(link, gpu, n, bytes, menu);
  const enabled = cands.filter((c) => c.enabled).sort((a, b) => a.timeUs - b.timeUs);
  const best = enabled[0];
  reason.push(menu.ll128Reason);
  reason.push(
    `protocol menu ${menu.protocols.join("/")}, algorithms ${menu.algorithms.join("/")}; NCCL's model picks ${best.algorithm}/${best.protocol} (${best.timeUs.toFixed(1)} µs)`,
  );
  const m = measuredLatency(gpu.id, "nccl", n, bytes);
  let isolated: Range;
  let source: string;
  let forcedSimpleUs: Range | undefined;
  const forced = Boolean(ctx.ncclProto || ctx.ncclAlgo);
  if (m && !forced) {
    isolated = { low: Math.min(best.timeUs, m.us), mid: m.us, high: Math.max(best.timeUs, m.us) * 1.1 };
    source = `${m.source}; NCCL cost model ${best.algorithm}/${best.protocol} ${best.timeUs.toFixed(1)} µs`;
  } else if (m) {
    // A forced protocol: shift the measured (auto) figure by the model's difference to its own auto pick.
    const autoMenu = ncclMenu(link, gpu, n);
    const autoBest = ncclCandidates(link, gpu, n, bytes, autoMenu)
      .filter((c) => c.enabled)
      .sort((a, b) => a.timeUs - b.timeUs)[0];
    if (link.kind === "pcie" && best.protocol === "Simple" && autoBest.protocol === "LL") {
      // Simple forced where LL runs: the same bounded difference as the fallback's, not NCCL's constants alone.
      const x = simpleOverLlUs(n, gpu.id);
      forcedSimpleUs = x;
      isolated = { low: m.us + x.low, mid: m.us + x.mid, high: m.us + x.high };
      source = `measured auto ${m.us.toFixed(1)} µs (${m.source}) + Simple − LL ${x.mid.toFixed(1)} µs [${x.low.toFixed(1)}, ${x.high.toFixed(1)}]`;
    } else {
      const shifted = m.us + (best.timeUs - autoBest.timeUs);
      isolated = { low: Math.min(best.timeUs, shifted), mid: shifted, high: Math.max(best.timeUs, shifted) * 1.1 };
      source = `measured auto ${m.us.toFixed(1)} µs (${m.source}) shifted by the NCCL model's ${best.protocol} − ${autoBest.protocol} difference`;
    }
  } else {
    isolated = { low: best.timeUs * 0.8, mid: best.timeUs, high: best.timeUs * 1.5 };
    source = `NCCL cost model (tuning.cc, 2.30.x constants) ${best.algorithm}/${best.protocol}: baseLat + 2(n−1)·hwLat + S/algBw`;
  }
  // The ring search's fallback (search.cc): NCCL costs one channel at 0.1 GB/s, and its own model then prefers
  // Simple over LL beyond a few KB. What that choice costs is the measured-bounded Simple − LL difference.
  const fb: SearchFallback =
    ctx.ncclFallback === undefined
      ? ncclSearchFallback(link, gpu, n)
      : {
          state: ctx.ncclFallback ? "yes" : "no",
          reason: `given (--nccl-fallback ${ctx.ncclFallback ? "yes" : "no"})`,
        };
  let simpleExtraUs = forcedSimpleUs ?? zero;
  let algorithm = best.algorithm;
  let protocol: Proto = best.protocol;
  if (fb.state !== "no") {
    const fbBest = ncclCandidates(link, gpu, n, bytes, menu, FALLBACK_GRAPH)
      .filter((c) => c.enabled)
      .sort((a, b) => a.timeUs - b.timeUs)[0]!;
    if (fbBest.protocol === "Simple" && best.protocol === "LL") {
      const x = simpleOverLlUs(n, gpu.id);
      simpleExtraUs = fb.state === "yes" ? x : { low: 0, mid: x.mid / 2, high: x.high };
      if (fb.state === "yes") {
        algorithm = fbBest.algorithm;
        protocol = "Simple";
      }
      reason.push(
        `NCCL's ring search ${fb.state === "yes" ? "falls back" : "may fall back"}: ${fb.reason}. After the fallback NCCL's model picks ${fbBest.algorithm}/Simple for ${bytes} B (its estimate ${fbBest.timeUs.toFixed(0)} µs at 0.1 GB/s), where LL runs faster: + ${x.low.toFixed(0)}–${x.high.toFixed(0)} µs a call (mid ${x.mid.toFixed(0)})${fb.state === "yes" ? "" : ", counted at equal odds"}; NCCL_PROTO=LL removes it. NCCL logs "Could not find a path for pattern 4, falling back to simple order" (NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=GRAPH)`,
      );
      isolated = addRanges(isolated, simpleExtraUs);
      source = `${source}; + ${simpleExtraUs.mid.toFixed(1)} µs [${simpleExtraUs.low.toFixed(1)}, ${simpleExtraUs.high.toFixed(1)}] for NCCL's Simple after its ring search ${fb.state === "yes" ? "falls back" : "may fall back"} (search.cc)`;
    }
  }
  return {
    implementation: "nccl",
    algorithm,
    protocol,
    isolatedUs: isolated,
    isolatedSource: source,
    skewUs: SKEW_US,
    launchUs,
    latencyUs: addRanges(isolated, SKEW_US, launchUs),
    customAllReduce: car,
    menu,
    candidates: cands,
    searchFallback: fb,
    simpleExtraUs,
    reason,
  };
}

function addRanges(...rs: Range[]): Range {
  return rs.reduce((a, b) => ({ low: a.low + b.low, mid: a.mid + b.mid, high: a.high + b.high }), {
    low: 0,
    mid: 0,
    high: 0,
  });
}

/** How an all-reduce moves its data: NCCL ring or tree, or a one-shot kernel that reads every peer's buffer. */
export type AllReduceDataPath = "ring" | "tree" | "one-shot";

/**
 * Payload bytes one GPU sends per all-reduce of `messageBytes` over `n` ranks (received bytes are the same by
 * symmetry). Ring: reduce-scatter + all-gather, 2(n−1)/n·S. Tree: NCCL's double binary tree moves the same
 * 2(n−1)/n·S per rank (its bus-bandwidth factor, collectives.md §3). One-shot (vLLM's
 * cross_device_reduce_1stage): each of the n−1 peers reads this GPU's whole buffer, (n−1)·S. Protocol overhead
 * (LL's flag words, LL128's 8 B per 128 B, PCIe/NVLink headers) is not included.
 */
export function allReduceTxBytesPerGpu(messageBytes: number, n: number, path: AllReduceDataPath): number {
  if (n <= 1 || messageBytes <= 0) return 0;
  if (path === "one-shot") return (n - 1) * messageBytes;
  return (2 * (n - 1) * messageBytes) / n;
}
