// `nvidia-smi topo -m` / `topo -p2p r` parser and diagnosis (pure): link matrix, NVLink/PCIe
// classification, vLLM/SGLang custom all-reduce eligibility at a TP size, NCCL transport and protocols.
import { InputError } from "../errors.ts";
import { NCCL_CPU_LINK_GBS, SM100_MIN_INTRA_GBS } from "../model/collectives.ts";
import { tokenColumn } from "./nccl.ts";

export type LinkClass =
  | "self"
  | "nvlink"
  | "pcie-switch"
  | "pcie-switches"
  | "pcie-host-bridge"
  | "cpu-numa-node"
  | "cross-socket"
  | "unknown";

export interface Link {
  a: string;
  b: string;
  /** As printed: NV18, PIX, PXB, PHB, NODE, SYS (SOC on old drivers), X. */
  raw: string;
  class: LinkClass;
  nvlinks?: number;
}

export interface Topology {
  gpus: string[];
  /** Other devices in the matrix (NICs), with their legend names where given. */
  nics: Array<{ id: string; name?: string }>;
  /** matrix[i][j] for GPU i, GPU j (raw cell text). */
  matrix: string[][];
  links: Link[];
  cpuAffinity: Record<string, string>;
  numaAffinity: Record<string, string>;
  /** nvidia-smi topo -p2p output, when given: matrix of OK / NS / CNS / GNS / TNS / U. */
  p2p?: { mode?: string; matrix: string[][] };
  warnings: string[];
}

export interface Diagnosis {
  tp: number;
  gpus: string[];
  fullyNvlinked: boolean;
  /** Lowest-capability link in the TP group. */
  worstLink: LinkClass;
  customAllReduce: {
    vllm: { enabled: boolean; reasons: string[] };
    sglang: { enabled: boolean; reasons: string[] };
  };
  nccl: {
    /** Intra-node transport for the TP group's pairs. */
    transport: string;
    protocols: string[];
    ll128: boolean;
    reasons: string[];
  };
  findings: string[];
}

const ANSI = /\x1b\[[0-9;]*m/g;

export function classifyLink(raw: string): { class: LinkClass; nvlinks?: number } {
  const r = raw.toUpperCase();
  if (r === "X") return { class: "self" };
  const nv = /^NV(\d+)$/.exec(r);
  if (nv) return { class: "nvlink", nvlinks: Number(nv[1]) };
  if (r === "PIX") return { class: "pcie-switch" };
  if (r === "PXB") return { class: "pcie-switches" };
  if (r === "PHB") return { class: "pcie-host-bridge" };
  if (r === "NODE") return { class: "cpu-numa-node" };
  if (r === "SYS" || r === "SOC") return { class: "cross-socket" };
  return { class: "unknown" };
}

const P2P_CELLS = new Set(["OK", "NS", "CNS", "GNS", "TNS", "U", "X"]);

export interface ParseTopologyOptions {
  /**
   * Reject what the lenient reading only warns about (a cell that is no known link type, a short
   * row, missing GPU rows) with a file:line:column error; for callers that build a link model from it.
   */
  strict?: boolean;
}

/** Parses `nvidia-smi topo -m` output, optionally followed (or preceded) by `topo -p2p <mode>` output. */
export function parseTopology(text: string, file?: string, opts: ParseTopologyOptions = {}): Topology {
  const src = file ?? "input";
  const lines = text.replace(ANSI, "").split(/\r?\n/);
  const topo: Topology = { gpus: [], nics: [], matrix: [], links: [], cpuAffinity: {}, numaAffinity: {}, warnings: [] };
  const nicNames = new Map<string, string>();
  let i = 0;
  let sawMatrix = false;
  while (i < lines.length) {
    const line = lines[i]!;
    const toks = line.trim().split(/\s+/);
    const legend = /^\s*(NIC\d+)\s*:\s*(\S+)/.exec(line);
    if (legend) nicNames.set(legend[1]!, legend[2]!);
    // Header row: "GPU0 GPU1 … NIC0 … CPU Affinity …" (a data row has a cell such as X/NV18/OK second).
    if (toks[0] === "GPU0" && (toks.length === 1 || /^(GPU\d+|NIC\d+|mlx|CPU)/.test(toks[1]!))) {
      // Header row: device columns, then optional "CPU Affinity", "NUMA Affinity", "GPU NUMA ID".
      const header = line.trim();
      const devCols: string[] = [];
      for (const t of header.split(/\s+/)) {
        if (/^(GPU\d+|NIC\d+|mlx\S+)$/.test(t)) devCols.push(t);
        else break;
      }
      const rows: string[][] = [];
      const rowLines: number[] = [];
      let j = i + 1;
      for (; j < lines.length; j++) {
        const r = lines[j]!.trim();
        if (!r) break;
        const rt = r.split(/\s+/);
        if (!/^(GPU\d+|NIC\d+|mlx\S+)$/.test(rt[0]!)) break;
        rows.push(rt);
        rowLines.push(j);
      }
      const cells = rows.map((r) => r.slice(1, 1 + devCols.length));
      // A one-GPU link matrix is a lone "X", which is also a p2p cell: p2p needs a cell other than X.
      const isP2p =
        cells.length > 0 &&
        cells.every((r) => r.every((c) => P2P_CELLS.has(c.toUpperCase()))) &&
        cells.some((r) => r.some((c) => c.toUpperCase() !== "X"));
      if (isP2p) {
        const gi = devCols.filter((d) => d.startsWith("GPU"));
        topo.p2p = {
          matrix: rows.filter((r) => r[0]!.startsWith("GPU")).map((r) => r.slice(1, 1 + gi.length)),
        };
        const mode = /-p2p\s+([rwnap])/.exec(text);
        if (mode) topo.p2p.mode = mode[1];
      } else if (!sawMatrix) {
        sawMatrix = true;
        const gpuCols = devCols.filter((d) => d.startsWith("GPU"));
        topo.gpus = gpuCols;
        for (const d of devCols) if (!d.startsWith("GPU")) topo.nics.push({ id: d });
        rows.forEach((r, ri) => {
          const id = r[0]!;
          if (!id.startsWith("GPU")) return;
          const cellsAll = r.slice(1, 1 + devCols.length);
          if (opts.strict) checkRow(r, lines[rowLines[ri]!]!, rowLines[ri]! + 1, devCols, src);
          const gpuCells = devCols.map((d, k) => [d, cellsAll[k]] as const).filter(([d]) => d.startsWith("GPU"));
          topo.matrix.push(gpuCells.map(([, c]) => c ?? "?"));
          const rest = r.slice(1 + devCols.length);
          // CPU affinity looks like 0-47,96-143; NUMA affinity a number or N/A.
          if (rest[0]) topo.cpuAffinity[id] = rest[0];
          if (rest[1]) topo.numaAffinity[id] = rest[1];
        });
        if (opts.strict && topo.matrix.length !== gpuCols.length)
          throw new InputError(`found ${topo.matrix.length} of ${gpuCols.length} GPU rows`, {
            position: { file: src, line: (rowLines.at(-1) ?? i) + 1, column: 1 },
          });
      }
      i = j;
      continue;
    }
    i++;
  }
  for (const n of topo.nics) n.name = nicNames.get(n.id);
  if (!topo.gpus.length) {
    const position = { file: src, line: 1, column: 1 };
    if (topo.p2p)
      throw new InputError(
        "only 'topo -p2p' output found; the link matrix from 'nvidia-smi topo -m' is needed too (no header line with GPU0 columns)",
        { position },
      );
    throw new InputError(
      "no GPU matrix found: no header line with GPU0 columns (expected the output of 'nvidia-smi topo -m')",
      {
        position,
        hint: "the first matrix line starts with GPU0 columns, e.g. '\tGPU0\tGPU1\tCPU Affinity'",
      },
    );
  }
  if (topo.matrix.length !== topo.gpus.length)
    topo.warnings.push(`matrix has ${topo.matrix.length} GPU rows for ${topo.gpus.length} GPU columns`);
  for (let a = 0; a < topo.matrix.length; a++)
    for (let b = a + 1; b < topo.gpus.length; b++) {
      const raw = topo.matrix[a]![b] ?? "?";
      const c = classifyLink(raw);
      topo.links.push({ a: topo.gpus[a]!, b: topo.gpus[b]!, raw, ...c });
    }
  return topo;
}

/** Strict reading of one GPU row: every device column present and every GPU cell a known link type. */
function checkRow(r: string[], line: string, lineNo: number, devCols: string[], file: string): void {
  const id = r[0]!;
  if (r.length - 1 < devCols.length)
    throw new InputError(`row ${id} has ${r.length - 1} of ${devCols.length} device columns`, {
      position: { file, line: lineNo, column: 1 },
    });
  devCols.forEach((d, k) => {
    if (!d.startsWith("GPU") || classifyLink(r[k + 1]!).class !== "unknown") return;
    throw new InputError(
      `unknown link type "${r[k + 1]}" between ${id} and ${d} (expected X, NV#, PIX, PXB, PHB, NODE or SYS)`,
      { position: { file, line: lineNo, column: tokenColumn(line, k + 1) } },
    );
  });
}

const RANK: Record<LinkClass, number> = {
  self: 0,
  nvlink: 1,
  "pcie-switch": 2,
  "pcie-switches": 3,
  "pcie-host-bridge": 4,
  "cpu-numa-node": 5,
  "cross-socket": 6,
  unknown: 7,
};

/**
 * Diagnoses a TP group (default GPU0..GPU{tp-1}): vLLM/SGLang custom all-reduce (world size in
 * {2,4,6,8}, single node, and NVLink between every pair when > 2 GPUs, P2P access working) and
 * NCCL's transport and default protocols (LL128 only when every path is NVLink-class).
 */
export function diagnose(
  topo: Topology,
  tp: number,
  opts: { gpus?: number[]; cpuVendor?: "intel" | "amd" | "arm" } = {},
): Diagnosis {
  const findings: string[] = [];
  const idx = opts.gpus ?? Array.from({ length: Math.min(tp, topo.gpus.length) }, (_, i) => i);
  const spansNodes = tp > topo.gpus.length;
  const pairs: Link[] = [];
  for (let x = 0; x < idx.length; x++)
    for (let y = x + 1; y < idx.length; y++) {
      const a = idx[x]!;
      const b = idx[y]!;
      const raw = topo.matrix[a]?.[b] ?? "?";
      pairs.push({ a: topo.gpus[a] ?? `GPU${a}`, b: topo.gpus[b] ?? `GPU${b}`, raw, ...classifyLink(raw) });
    }
  const fullyNvlinked = pairs.length > 0 && pairs.every((p) => p.class === "nvlink");
  const worst = pairs.reduce<LinkClass>(
    (w, p) => (RANK[p.class] > RANK[w] ? p.class : w),
    pairs.length ? "nvlink" : "self",
  );
  const p2pBad: string[] = [];
  if (topo.p2p)
    for (let x = 0; x < idx.length; x++)
      for (let y = 0; y < idx.length; y++) {
        if (x === y) continue;
        const c = topo.p2p.matrix[idx[x]!]?.[idx[y]!];
        if (c && c.toUpperCase() !== "OK") p2pBad.push(`GPU${idx[x]}→GPU${idx[y]} ${c}`);
      }

  const car = (engine: "vLLM" | "SGLang") => {
    const reasons: string[] = [];
    let enabled = true;
    if (tp === 1) {
      reasons.push("TP 1: no all-reduce needed");
      return { enabled: false, reasons };
    }
    if (spansNodes) {
      enabled = false;
      reasons.push(`TP ${tp} spans nodes (${topo.gpus.length} GPUs here): custom all-reduce is single-node only`);
    }
    if (![2, 4, 6, 8].includes(tp)) {
      enabled = false;
      reasons.push(`world size ${tp} not in {2, 4, 6, 8}`);
    }
    if (tp > 2 && !fullyNvlinked) {
      enabled = false;
      const bad = pairs.filter((p) => p.class !== "nvlink").map((p) => `${p.a}-${p.b} ${p.raw}`);
      reasons.push(
        `${engine} disables custom all-reduce on more than two GPUs unless every pair is NVLink-connected (${bad.slice(0, 4).join(", ")}${bad.length > 4 ? ", …" : ""})`,
      );
    }
    if (p2pBad.length) {
      enabled = false;
      reasons.push(`P2P access check fails (${p2pBad.slice(0, 3).join(", ")}${p2pBad.length > 3 ? ", …" : ""})`);
    } else if (!topo.p2p && tp === 2 && !fullyNvlinked)
      reasons.push(
        "two PCIe GPUs: enabled only if the CUDA-IPC P2P test passes (add 'nvidia-smi topo -p2p r' output to check)",
      );
    if (enabled)
      reasons.push(
        tp === 2
          ? "world size 2: one-shot kernel at every size"
          : "all pairs NVLink-connected: one-shot for small messages, two-shot for large",
      );
    return { enabled, reasons };
  };
  const vllm = car("vLLM");
  const sglang = car("SGLang");

  // NCCL: P2P when the path is at or below the P2P level (default SYS; PXB on Intel, ARM and
  // Zhaoxin CPUs), and NVML reports P2P support; otherwise SHM through host memory.
  const reasons: string[] = [];
  let transport: string;
  if (tp === 1) transport = "none (TP 1)";
  else if (spansNodes) transport = "NET between nodes, P2P/SHM within";
  else if (fullyNvlinked) transport = "P2P over NVLink";
  else {
    const pcieThroughCpu = pairs.some((p) => RANK[p.class] >= RANK["pcie-host-bridge"]);
    if (p2pBad.length) {
      transport = "SHM (host memory)";
      reasons.push("NVML reports P2P unsupported for some pairs, so NCCL uses shared host memory");
    } else if (!pcieThroughCpu)
      transport = pairs.some((p) => p.class === "nvlink") ? "P2P (NVLink and PCIe switch)" : "P2P over PCIe switch";
    else if (opts.cpuVendor === "amd")
      transport = "P2P over PCIe through the CPU (AMD: NCCL's default P2P level is SYS)";
    else if (opts.cpuVendor === "intel" || opts.cpuVendor === "arm")
      transport = "SHM (host memory): paths through the CPU exceed NCCL's P2P level PXB on Intel/ARM";
    else {
      transport = "SHM on Intel/ARM hosts, P2P on AMD hosts (paths cross the CPU)";
      reasons.push("pass --cpu intel|amd|arm to settle it; NCCL_P2P_LEVEL=SYS forces P2P");
    }
  }
  const ll128 = tp > 1 && !spansNodes && fullyNvlinked;
  const protocols = tp === 1 ? [] : ll128 ? ["LL", "LL128", "Simple"] : ["LL", "Simple"];
  if (tp > 1)
    reasons.push(
      ll128
        ? "LL128 on by default: every intra-node path is NVLink-class"
        : "LL128 off by default: some path is not NVLink (PCIe); NCCL_PROTO can force it",
    );
  if (!fullyNvlinked && tp > 2)
    findings.push(
      `TP ${tp} on a node without full NVLink: every TP all-reduce goes through NCCL (${protocols.join("/")})`,
    );
  if (worst === "cross-socket")
    findings.push("some TP pairs cross the CPU socket interconnect (SYS): expect the slowest all-reduce latencies");
  if (worst === "cross-socket" && tp > 1 && !spansNodes && !fullyNvlinked) {
    // search.cc / topo.h (NCCL 2.27–2.30): SM ≥ 100 searches rings down to 18 GB/s a channel, no lower.
    const rated = Object.entries(NCCL_CPU_LINK_GBS).filter(([cpu]) =>
      opts.cpuVendor === "amd"
        ? cpu.startsWith("AMD")
        : opts.cpuVendor === "intel"
          ? cpu.startsWith("Intel")
          : opts.cpuVendor === "arm"
            ? cpu.startsWith("Arm")
            : true,
    );
    const below = rated.filter(([, bw]) => bw < SM100_MIN_INTRA_GBS);
    const list = rated.map(([cpu, bw]) => `${cpu} ${bw}`).join(", ");
    if (below.length)
      findings.push(
        `on Blackwell GPUs (SM ≥ 100) NCCL's ring search needs ${SM100_MIN_INTRA_GBS} GB/s a channel, and it rates the socket link at ${list} GB/s: ${below.length === rated.length ? "it" : "below 18 it"} falls back to one channel at 0.1 GB/s ("falling back to simple order" in NCCL_DEBUG=INFO) and runs small all-reduces (above ≈ 4 KB at 8 ranks) in Simple, which NCCL_PROTO=LL avoids`,
      );
  }
  return {
    tp,
    gpus: idx.map((i) => topo.gpus[i] ?? `GPU${i}`),
    fullyNvlinked,
    worstLink: worst,
    customAllReduce: { vllm, sglang },
    nccl: { transport, protocols, ll128, reasons },
    findings,
  };
}
