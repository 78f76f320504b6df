// Device and link catalog (shared/reference/hardware.md) and parsers for custom devices and links. Pure.
import { UsageError } from "../errors.ts";

export type GpuArch = "volta" | "ampere" | "ada" | "hopper" | "blackwell" | "cdna3" | "cdna4" | "cpu" | "unknown";

export interface Gpu {
  id: string;
  name: string;
  kind: "gpu" | "cpu";
  memoryGB: number;
  /** Spec device-memory bandwidth, GB/s (1e9 B/s). */
  bandwidthGBs: number;
  /** A measured copy bandwidth, when known; replaces the spec figure × efficiency range. */
  measuredBandwidthGBs?: number;
  /** Dense tensor TFLOPS (no sparsity); null = no such unit. */
  tflops: { bf16: number; fp8: number | null; fp4: number | null };
  arch: GpuArch;
  /** Compute capability ×10 (90 = sm_90); used for NCCL's per-arch constants. */
  sm: number;
  /** Scale-up link, null when the part has none (PCIe-only). */
  scaleUp: { kind: "nvlink" | "nvlink-bridge" | "xgmi"; gen?: number; bidirGBs: number } | null;
  pcie: { gen: number; width: number };
  source: string;
  notes?: string;
}

const AIC = "aiconfigurator systems YAML via hardware.md §1";
const BWU = "NVIDIA Blackwell Ultra datasheets, per-GPU dense table in verda.com/blog/gb300-nvl72-architecture";

export const GPUS: Gpu[] = [
  g("h100-sxm", "H100 SXM5", 80, 3350, [989, 1979, null], "hopper", 90, nv(4, 900), 5, AIC, ["h100", "h100-sxm5"]),
  g("h100-pcie", "H100 PCIe", 80, 2000, [756, 1513, null], "hopper", 90, null, 5, AIC),
  // NVIDIA H100 NVL datasheet: 94 GB HBM3 at 3.9 TB/s, 1,671 BF16 / 3,341 FP8 TFLOPS with sparsity (half dense), a
  // 2-card NVLink bridge at 600 GB/s, PCIe Gen5 (values recalled from the datasheet, not re-read from a snapshot here).
  g(
    "h100-nvl",
    "H100 NVL",
    94,
    3900,
    [835, 1671, null],
    "hopper",
    90,
    { kind: "nvlink-bridge", gen: 4, bidirGBs: 600 },
    5,
    "NVIDIA H100 NVL datasheet (dense = half the sparse figures)",
  ),
  g("h200-sxm", "H200 SXM", 141, 4800, [989, 1979, null], "hopper", 90, nv(4, 900), 5, AIC, ["h200"]),
  g(
    "b200",
    "B200 (HGX)",
    180,
    7700,
    [2250, 4500, 9000],
    "blackwell",
    100,
    nv(5, 1800),
    5,
    AIC + " (HGX datasheet 7.7 TB/s)",
    ["b200-sxm"],
  ),
  g("gb200", "GB200 (per GPU, NVL72)", 185, 8000, [2500, 5000, 10000], "blackwell", 100, nv(5, 1800), 5, AIC),
  // Blackwell Ultra (sm_103): per-GPU dense figures as tabulated from NVIDIA's datasheets by verda.com/blog/
  // gb300-nvl72-architecture (GB300 NVL72 rack: 1,080 PF dense FP4, 20 TB HBM3e at 576 TB/s over 72 GPUs); sources
  // differ on the HGX B300's dense FP4 (13.1–14 PF) and usable memory (270–288 GB).
  g("b300", "B300 (HGX, Blackwell Ultra)", 270, 7700, [2250, 4500, 14000], "blackwell", 103, nv(5, 1800), 6, BWU, [
    "b300-sxm",
    "hgx-b300",
  ]),
  g("gb300", "GB300 (per GPU, NVL72)", 279, 8000, [2500, 5000, 15000], "blackwell", 103, nv(5, 1800), 6, BWU),
  g(
    "rtx-pro-6000",
    "RTX PRO 6000 Blackwell",
    96,
    1792,
    [500, 1000, 2000],
    "blackwell",
    120,
    null,
    5,
    "hardware.md §1 (rtxpro-spec; dense TFLOPS upper end of the ≈468–500 range, aiconfigurator's full-rate assumption)",
    ["rtx-pro-6000-blackwell", "rtxpro6000", "rtx-pro-6000-server"],
  ),
  g(
    "rtx-5090",
    "RTX 5090",
    32,
    1792,
    [209.5, 419, 1676],
    "blackwell",
    120,
    null,
    5,
    "hardware.md §1 (BF16 half rate: FP32 accumulate on GeForce)",
    ["5090"],
  ),
  g("rtx-4090", "RTX 4090", 24, 1008, [165, 330, null], "ada", 89, null, 4, "hardware.md §1 (ada-wp)", ["4090"]),
  g("rtx-3090", "RTX 3090", 24, 936, [71, null, null], "ampere", 86, null, 4, "hardware.md §1 (ga102-wp)", ["3090"]),
  g("l40s", "L40S", 48, 864, [362, 733, null], "ada", 89, null, 4, AIC),
  g(
    "rtx-6000-ada",
    "RTX 6000 Ada Generation",
    48,
    960,
    [364, 728, null],
    "ada",
    89,
    null,
    4,
    "NVIDIA RTX 6000 Ada datasheet (48 GB GDDR6 ECC, 960 GB/s; 1,457 FP8 TFLOPS with sparsity = 728 dense; BF16 half of that, full rate on pro cards as A40/L40S)",
    ["rtx6000-ada", "rtx-6000-ada-generation"],
  ),
  g("l4", "L4", 24, 300, [121, 242.5, null], "ada", 89, null, 4, "hardware.md §1 (nv-datasheets, dense)"),
  g("a100-80gb-sxm", "A100 80GB SXM", 80, 2039, [312, null, null], "ampere", 80, nv(3, 600), 4, AIC, [
    "a100",
    "a100-sxm",
    "a100-80gb",
  ]),
  g(
    "a100-80gb-pcie",
    "A100 80GB PCIe",
    80,
    1935,
    [312, null, null],
    "ampere",
    80,
    null,
    4,
    "hardware.md §1 (nv-datasheets)",
    ["a100-pcie"],
  ),
  g(
    "a100-40gb",
    "A100 40GB (SXM4)",
    40,
    1555,
    [312, null, null],
    "ampere",
    80,
    nv(3, 600),
    4,
    "hardware.md §1 (nv-datasheets)",
    ["a100-40gb-sxm"],
  ),
  g(
    "a100-40gb-pcie",
    "A100 40GB PCIe",
    40,
    1555,
    [312, null, null],
    "ampere",
    80,
    null,
    4,
    "hardware.md §1 (nv-datasheets)",
  ),
  g("h20", "H20", 96, 4000, [148, 296, null], "hopper", 90, nv(4, 900), 5, "hardware.md §1 (h20-spec)"),
  g(
    "mi300x",
    "MI300X",
    192,
    5300,
    [1307, 2615, null],
    "cdna3",
    94,
    { kind: "xgmi", bidirGBs: 896 },
    5,
    "hardware.md §1 (amd-spec)",
  ),
  g(
    "mi325x",
    "MI325X",
    256,
    6000,
    [1307, 2615, null],
    "cdna3",
    94,
    { kind: "xgmi", bidirGBs: 896 },
    5,
    "hardware.md §1 (amd-spec)",
  ),
  g(
    "mi355x",
    "MI355X",
    288,
    8000,
    [2500, 5000, 10000],
    "cdna4",
    95,
    { kind: "xgmi", bidirGBs: 1075 },
    5,
    "AMD Instinct MI355X (CDNA 4): 288 GB HBM3E at 8 TB/s, dense 2.5 PF BF16 / 5 PF FP8 / 10 PF MXFP4 (AMD launch figures as reported by The Register 2025-06-12 and AMD's ISSCC 2026 talk); Infinity Fabric 7 links, 1,075 GB/s (recalled)",
    ["mi355", "instinct-mi355x"],
  ),
  g(
    "gb10",
    "GB10 (DGX Spark)",
    128,
    273,
    [62, 124, 248],
    "blackwell",
    121,
    null,
    5,
    "hardware.md §1 (vendor; TFLOPS not in the reference, rough)",
  ),
];

// CPUs for llama.cpp-style CPU decode: bandwidth = channels × MT/s × 8 B (derived, theoretical).
export const CPUS: Gpu[] = [
  cpu("epyc-9654", "AMD EPYC 9654 (12× DDR5-4800)", 12 * 4.8 * 8, 768, 5.4),
  cpu("xeon-8480", "Intel Xeon 8480+ (8× DDR5-4800)", 8 * 4.8 * 8, 512, 7.2),
  cpu("epyc-7763", "AMD EPYC 7763 (8× DDR4-3200)", 8 * 3.2 * 8, 512, 2.5),
  cpu("ryzen-7950x", "AMD Ryzen 9 7950X (2× DDR5-5200)", 2 * 5.2 * 8, 128, 1.2),
  cpu("i9-13900k", "Intel Core i9-13900K (2× DDR5-5600)", 2 * 5.6 * 8, 128, 1.0),
  cpu("grace", "NVIDIA Grace (LPDDR5X, 500 GB/s vendor)", 500, 480, 3.5),
  cpu("m2-ultra", "Apple M2 Ultra (800 GB/s vendor, unified)", 800, 192, 27),
  cpu("m3-max", "Apple M3 Max (400 GB/s vendor, unified)", 400, 128, 14),
  // validation-public.md V9 / V11 (Metal GPU: 40-core M4 Max, 38-core M2 Max; FP16 TFLOPS rough).
  cpu("m4-max", "Apple M4 Max (546 GB/s vendor, unified)", 546, 64, 17),
  cpu("m2-max", "Apple M2 Max (400 GB/s vendor, unified)", 400, 96, 13.6),
  // XiongjieDai/GPU-Benchmarks-on-LLM-Inference (32-core M1 Max, 64 GB; FP32 10.4 TFLOPS vendor, rough).
  cpu("m1-max", "Apple M1 Max (400 GB/s vendor, unified)", 400, 64, 10.4),
  // Apple vendor specs (apple.com tech specs; newsroom): M3 Ultra 819 GB/s (60- and 80-core GPU alike; FP32 TFLOPS for
  // the 60-core part, rough), M4 Pro 273 GB/s (16- and 20-core GPU alike), M3 Pro 150 GB/s (14- and 18-core GPU
  // alike); TFLOPS scaled from the cores (rough). Rows: the Rapid-MLX community benchmarks and mlx-lm PR #1569.
  cpu("m3-ultra", "Apple M3 Ultra (819 GB/s vendor, unified)", 819, 512, 21.5),
  cpu("m4-pro", "Apple M4 Pro (273 GB/s vendor, unified)", 273, 64, 6.8),
  cpu("m3-pro", "Apple M3 Pro (150 GB/s vendor, unified)", 150, 36, 5.6),
];

function nv(gen: number, bidirGBs: number): Gpu["scaleUp"] {
  return { kind: "nvlink", gen, bidirGBs };
}

function g(
  id: string,
  name: string,
  memoryGB: number,
  bandwidthGBs: number,
  t: [number, number | null, number | null],
  arch: GpuArch,
  sm: number,
  scaleUp: Gpu["scaleUp"],
  pcieGen: number,
  source: string,
  aliases: string[] = [],
): Gpu & { aliases: string[] } {
  return {
    id,
    name,
    kind: "gpu",
    memoryGB,
    bandwidthGBs,
    tflops: { bf16: t[0], fp8: t[1], fp4: t[2] },
    arch,
    sm,
    scaleUp,
    pcie: { gen: pcieGen, width: 16 },
    source,
    aliases,
  };
}

function cpu(id: string, name: string, bw: number, memoryGB: number, tflopsBf16: number): Gpu & { aliases: string[] } {
  return {
    id,
    name,
    kind: "cpu",
    memoryGB,
    bandwidthGBs: Math.round(bw * 10) / 10,
    tflops: { bf16: tflopsBf16, fp8: null, fp4: null },
    arch: "cpu",
    sm: 0,
    scaleUp: null,
    pcie: { gen: 5, width: 16 },
    source: "derived: memory channels × transfer rate × 8 B (theoretical); TFLOPS rough",
    aliases: [],
  };
}

export function listGpus(): Gpu[] {
  return [...GPUS, ...CPUS];
}

function norm(s: string): string {
  return s
    .toLowerCase()
    .replace(/[\s_]+/g, "-")
    .replace(/^nvidia-/, "");
}

const gpuCache = new Map<string, Gpu | undefined>();

export function findGpu(name: string): Gpu | undefined {
  if (gpuCache.has(name)) return gpuCache.get(name);
  const n = norm(name);
  const d = listGpus().find((x) => x.id === n || ((x as { aliases?: string[] }).aliases ?? []).includes(n));
  gpuCache.set(name, d);
  return d;
}

/** Did-you-mean candidates by edit distance and substring. */
export function suggestFrom(name: string, candidates: string[], max = 5): string[] {
  const n = norm(name);
  const scored = candidates.map((c) => {
    let d = editDistance(n, c);
    if (c.includes(n) || n.includes(c)) d = Math.min(d, 1);
    return { c, d };
  });
  scored.sort((a, b) => a.d - b.d || a.c.localeCompare(b.c));
  const limit = Math.max(3, Math.floor(n.length / 2));
  return scored
    .filter((s) => s.d <= limit)
    .slice(0, max)
    .map((s) => s.c);
}

export function editDistance(a: string, b: string): number {
  const m = a.length;
  const n = b.length;
  let prev = Array.from({ length: n + 1 }, (_, j) => j);
  for (let i = 1; i <= m; i++) {
    const cur = [i];
    for (let j = 1; j <= n; j++) {
      cur[j] = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    prev = cur;
  }
  return prev[n];
}

export function gpuNames(): string[] {
  return listGpus().flatMap((d) => [d.id, ...((d as { aliases?: string[] }).aliases ?? [])]);
}

export function requireGpu(name: string): Gpu {
  const d = findGpu(name);
  if (d) return d;
  const s = suggestFrom(name, gpuNames());
  throw new UsageError(`unknown GPU "${name}"${s.length ? `; did you mean: ${s.join(", ")}?` : ""}`, {
    hint: "run `inferscope model catalog gpus`, or describe the device with --gpu-bandwidth/--gpu-tflops-bf16/--gpu-memory",
  });
}

/** Parses "936GB/s", "1.8TB/s", "1458", "936 GB/s" into GB/s. */
export function parseBandwidthGBs(text: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(tb\/s|gb\/s|tbps|gbps|tb|gb)?\s*$/i.exec(text);
  if (!m) throw new UsageError(`not a bandwidth: "${text}" (examples: 936GB/s, 1.8TB/s)`);
  const v = Number(m[1]);
  const u = (m[2] ?? "gb/s").toLowerCase();
  return u.startsWith("tb") ? v * 1000 : v;
}

/** Parses "24GB", "96 GiB", "80" into GB (1e9 B). */
export function parseMemoryGB(text: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(gib|gb|tib|tb)?\s*$/i.exec(text);
  if (!m) throw new UsageError(`not a memory size: "${text}" (examples: 24GB, 96GiB)`);
  const v = Number(m[1]);
  const u = (m[2] ?? "gb").toLowerCase();
  const f = { gb: 1, gib: 2 ** 30 / 1e9, tb: 1000, tib: 2 ** 40 / 1e9 }[u]!;
  return v * f;
}

export interface CustomGpuSpec {
  name?: string;
  bandwidth?: string | number;
  measuredBandwidth?: string | number;
  tflopsBf16?: number;
  tflopsFp8?: number;
  tflopsFp4?: number;
  memory?: string | number;
  base?: string;
  arch?: GpuArch;
  sm?: number;
  nvlink?: boolean;
  pcieGen?: number;
}

/** A device from its numbers, optionally starting from a catalog entry. */
export function customGpu(spec: CustomGpuSpec): Gpu {
  const base = spec.base ? requireGpu(spec.base) : undefined;
  const bw =
    spec.bandwidth === undefined
      ? base?.bandwidthGBs
      : typeof spec.bandwidth === "number"
        ? spec.bandwidth
        : parseBandwidthGBs(spec.bandwidth);
  if (bw === undefined || !(bw > 0))
    throw new UsageError(
      spec.arch === "cpu"
        ? "a CPU host needs its memory bandwidth, more than 0 (--cpu-bandwidth 40GB/s)"
        : "a custom device needs its memory bandwidth, more than 0 (--gpu-bandwidth 936GB/s)",
    );
  const tf = spec.tflopsBf16 ?? base?.tflops.bf16;
  if (tf === undefined || !(tf > 0))
    throw new UsageError("a custom device needs its dense BF16 TFLOPS (--gpu-tflops-bf16 71)");
  const mem =
    spec.memory === undefined
      ? (base?.memoryGB ?? 0)
      : typeof spec.memory === "number"
        ? spec.memory
        : parseMemoryGB(spec.memory);
  const measured =
    spec.measuredBandwidth === undefined
      ? base?.measuredBandwidthGBs
      : typeof spec.measuredBandwidth === "number"
        ? spec.measuredBandwidth
        : parseBandwidthGBs(spec.measuredBandwidth);
  const arch = spec.arch ?? base?.arch ?? "unknown";
  return {
    id: spec.name ?? (base ? `${base.id}-custom` : "custom"),
    name: spec.name ?? (base ? `${base.name} (custom numbers)` : "custom device"),
    kind: base?.kind ?? (arch === "cpu" ? "cpu" : "gpu"),
    memoryGB: mem,
    bandwidthGBs: bw,
    measuredBandwidthGBs: measured,
    tflops: {
      bf16: tf,
      fp8: spec.tflopsFp8 ?? base?.tflops.fp8 ?? null,
      fp4: spec.tflopsFp4 ?? base?.tflops.fp4 ?? null,
    },
    arch,
    sm:
      spec.sm ??
      base?.sm ??
      { volta: 70, ampere: 80, ada: 89, hopper: 90, blackwell: 100, cdna3: 94, cdna4: 95, cpu: 0, unknown: 80 }[arch],
    scaleUp:
      spec.nvlink === true ? { kind: "nvlink", bidirGBs: 600 } : spec.nvlink === false ? null : (base?.scaleUp ?? null),
    pcie: { gen: spec.pcieGen ?? base?.pcie.gen ?? 4, width: 16 },
    source: "given on the command line / hardware file",
  };
}

// ---------------------------------------------------------------- interconnect

export interface Interconnect {
  kind: "pcie" | "nvlink" | "nvlink-bridge" | "xgmi" | "none";
  label: string;
  /** True when every GPU pair in the TP group is NVLink-connected (vLLM's custom-AR test, NCCL's LL128 test). */
  allPairsNvlink: boolean;
  nvswitch: boolean;
  nvlinkGen?: number;
  pcie: { gen: number; width: number };
  /** Per-direction link bandwidth, GB/s (spec). */
  perDirectionGBs: number;
  /** NCCL's modelled bus bandwidth for a ring over this link, GB/s. */
  ncclBusBwGBs: number;
  /** Some pair crosses CPU sockets (SYS in nvidia-smi topo); null when the host's layout was not given. */
  crossSocket: boolean | null;
  nodes: number;
  source: string;
}

/** NCCL topo.cc: PCIe bw = lanes × per-lane rate / 80 → Gen3 x16 12, Gen4 24, Gen5 48, Gen6 96 GB/s. */
export function ncclPcieBw(gen: number, width: number): number {
  const perX16 = { 3: 12, 4: 24, 5: 48, 6: 96 }[gen] ?? 12;
  return (perX16 * width) / 16;
}

export function pcieLink(gen: number, width = 16, crossSocket: boolean | null = null, source = "given"): Interconnect {
  return {
    kind: "pcie",
    label: `PCIe Gen${gen} x${width}${crossSocket ? " (cross-socket)" : crossSocket === false ? " (one socket)" : ""}`,
    allPairsNvlink: false,
    nvswitch: false,
    pcie: { gen, width },
    perDirectionGBs: ({ 3: 16, 4: 32, 5: 64, 6: 128 }[gen] ?? 16) * (width / 16),
    ncclBusBwGBs: ncclPcieBw(gen, width),
    crossSocket,
    nodes: 1,
    source: `${source}; NCCL PCIe model bandwidth per topo.cc (collectives.md §3.3)`,
  };
}

export function nvlinkLink(gen: number, nvswitch: boolean, source = "given"): Interconnect {
  // Per-direction spec, and NCCL ring busbw: NVLink4 ≈ 370 measured (nccl#1442); others from per-channel model.
  const perDir = { 2: 150, 3: 300, 4: 450, 5: 900 }[gen] ?? 300;
  const busBw = { 2: 120, 3: 240, 4: 370, 5: 642 }[gen] ?? 240;
  return {
    kind: "nvlink",
    label: `NVLink${gen}${nvswitch ? " (NVSwitch)" : ""}`,
    allPairsNvlink: true,
    nvswitch,
    nvlinkGen: gen,
    pcie: { gen: gen >= 4 ? 5 : 4, width: 16 },
    perDirectionGBs: perDir,
    ncclBusBwGBs: busBw,
    crossSocket: false,
    nodes: 1,
    source: `${source}; hardware.md §1.2`,
  };
}

export const INTERCONNECT_NAMES = [
  "pcie3",
  "pcie4",
  "pcie5",
  "pcie6",
  "pcie4x8",
  "pcie5x8",
  "nvlink",
  "nvlink3",
  "nvlink4",
  "nvlink5",
  "nvlink-bridge",
  "xgmi",
  "none",
];

/**
 * "pcie5", "pcie4x8", "pcie5-sys" (some pair crosses sockets), "pcie5-node" (none does), "nvlink4", "nvlink" (GPU's
 * own gen), "nvlink-bridge", "xgmi". A bare "pcie5" leaves the socket layout unknown.
 */
export function parseInterconnect(text: string, gpu?: Gpu, gpus = 1): Interconnect {
  const t = text.trim().toLowerCase().replace(/\s+/g, "");
  let m = /^pcie(?:gen)?(\d)(?:x(\d+))?(-sys|-cross-socket|-node|-one-socket)?$/.exec(t);
  if (m) {
    const cross = m[3] === undefined ? null : m[3] === "-sys" || m[3] === "-cross-socket";
    return pcieLink(Number(m[1]), m[2] ? Number(m[2]) : 16, cross, `--interconnect ${text}`);
  }
  m = /^nvlink(\d)?(-?nvswitch)?$/.exec(t);
  if (m) {
    const gen = m[1] ? Number(m[1]) : (gpu?.scaleUp?.gen ?? 4);
    // HGX 8-GPU boards (A100/H100/B200) put every GPU behind NVSwitches.
    const nvswitch = Boolean(m[2]) || (gpus > 2 && (gen ?? 0) >= 3);
    return nvlinkLink(gen, nvswitch, `--interconnect ${text}`);
  }
  if (t === "nvlink-bridge") {
    const base = nvlinkLink(3, false, `--interconnect ${text}`);
    // A 2-card bridge connects one pair only; beyond 2 GPUs some pairs are PCIe.
    return {
      ...base,
      kind: "nvlink-bridge",
      label: "2-card NVLink bridge",
      allPairsNvlink: gpus <= 2,
      ncclBusBwGBs: 116,
      perDirectionGBs: 56,
      source: `--interconnect ${text}; ≈116 GB/s busbw measured (nccl-tests#194)`,
    };
  }
  if (t === "xgmi" || t === "infinity-fabric") {
    return {
      kind: "xgmi",
      label: "Infinity Fabric (xGMI), fully connected",
      allPairsNvlink: true,
      nvswitch: false,
      pcie: { gen: 5, width: 16 },
      perDirectionGBs: 64,
      ncclBusBwGBs: 300,
      crossSocket: false,
      nodes: 1,
      source: `--interconnect ${text}; hardware.md §1 (7 links × 128 GB/s bidir)`,
    };
  }
  if (t === "none")
    return { ...pcieLink(4), kind: "none", label: "none (single device)", source: "--interconnect none" };
  const s = suggestFrom(t, INTERCONNECT_NAMES);
  throw new UsageError(`unknown interconnect "${text}"${s.length ? `; did you mean: ${s.join(", ")}?` : ""}`, {
    hint: `one of ${INTERCONNECT_NAMES.join(", ")}, or --topo nvidia-smi-topo.txt`,
  });
}

/** What a device offers by default: its NVLink if it has one (and the count fits), else its PCIe slot. */
export function defaultInterconnect(gpu: Gpu, gpus: number): Interconnect {
  if (gpus <= 1)
    return { ...pcieLink(gpu.pcie.gen), kind: "none", label: "none (single device)", source: "one device" };
  if (gpu.scaleUp?.kind === "nvlink" && gpu.scaleUp.gen)
    return nvlinkLink(gpu.scaleUp.gen, gpus > 2, `default for ${gpu.name}`);
  if (gpu.scaleUp?.kind === "xgmi") return parseInterconnect("xgmi", gpu, gpus);
  return pcieLink(gpu.pcie.gen, gpu.pcie.width, null, `default for ${gpu.name} (no scale-up link)`);
}

/** NCCL's compute-capability index for its per-arch tables: 0 Volta, 1 Ampere/Ada, 2 Hopper, 3 Blackwell. */
export function ncclArchIndex(sm: number): number {
  if (sm >= 100) return 3;
  if (sm >= 90) return 2;
  if (sm >= 80) return 1;
  return 0;
}
