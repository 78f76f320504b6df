// Parses `nvidia-smi topo -m` into a GPU link matrix and the facts the model needs: all-pairs NVLink (vLLM custom
// all-reduce, NCCL LL128), PCIe path types, cross-socket pairs. Pure.
import { InputError } from "../errors.ts";
import type { Interconnect } from "./hardware.ts";
import { nvlinkLink, pcieLink } from "./hardware.ts";

export type PathType = "X" | "NV" | "PIX" | "PXB" | "PHB" | "NODE" | "SYS";

export interface Topology {
  gpus: string[];
  /** matrix[i][j] = path type between GPU i and j ("NV" with nvlinks[i][j] links). */
  matrix: PathType[][];
  nvlinks: number[][];
  allPairsNvlink: boolean;
  worstPath: PathType;
  crossSocket: boolean;
  source: string;
}

const ORDER: PathType[] = ["X", "NV", "PIX", "PXB", "PHB", "NODE", "SYS"];

export function parseTopo(text: string, file = "topo.txt"): Topology {
  const lines = text.split(/\r?\n/);
  // Header: the first line whose first token is GPU0 and whose second is not a cell value ("X").
  const hi = lines.findIndex((l) => {
    const t = l
      .replace(/\x1b\[[0-9;]*m/g, "")
      .trim()
      .split(/\s+/);
    return t[0] === "GPU0" && t[1] !== "X";
  });
  if (hi < 0)
    throw new InputError("no header line with GPU0 columns (expected `nvidia-smi topo -m` output)", {
      position: { file, line: 1, column: 1 },
    });
  // Strip ANSI colour codes some drivers print.
  const clean = (s: string) => s.replace(/\x1b\[[0-9;]*m/g, "");
  const header = clean(lines[hi]).trim().split(/\s+/);
  const gpus = header.filter((h) => /^GPU\d+$/.test(h));
  const n = gpus.length;
  const matrix: PathType[][] = [];
  const nvlinks: number[][] = [];
  for (let li = hi + 1; li < lines.length && matrix.length < n; li++) {
    const raw = clean(lines[li]);
    const m = /^\s*(GPU\d+)\s+(.*)$/.exec(raw);
    if (!m) continue;
    const cells = m[2].trim().split(/\s+/).slice(0, n);
    if (cells.length < n)
      throw new InputError(`row ${m[1]} has ${cells.length} of ${n} GPU columns`, {
        position: { file, line: li + 1, column: 1 },
      });
    const row: PathType[] = [];
    const links: number[] = [];
    cells.forEach((c, j) => {
      const nv = /^NV(\d+)$/.exec(c);
      if (nv) {
        row.push("NV");
        links.push(Number(nv[1]));
      } else if ((ORDER as string[]).includes(c)) {
        row.push(c as PathType);
        links.push(0);
      } else {
        const col = raw.indexOf(c) + 1;
        throw new InputError(
          `unknown link type "${c}" between ${m[1]} and ${gpus[j]} (expected X, NV#, PIX, PXB, PHB, NODE or SYS)`,
          {
            position: { file, line: li + 1, column: col },
          },
        );
      }
    });
    matrix.push(row);
    nvlinks.push(links);
  }
  if (matrix.length < n)
    throw new InputError(`found ${matrix.length} of ${n} GPU rows`, {
      position: { file, line: lines.length, column: 1 },
    });
  let worst: PathType = "X";
  let all = true;
  for (let i = 0; i < n; i++)
    for (let j = 0; j < n; j++) {
      if (i === j) continue;
      const p = matrix[i][j];
      if (p !== "NV") all = false;
      if (ORDER.indexOf(p) > ORDER.indexOf(worst)) worst = p;
    }
  return {
    gpus,
    matrix,
    nvlinks,
    allPairsNvlink: n > 1 && all,
    worstPath: worst,
    crossSocket: worst === "SYS",
    source: file,
  };
}

/** The link model for the first `n` GPUs of a topology. */
export function interconnectFromTopo(t: Topology, n: number, pcieGen = 5, nvlinkGen = 4): Interconnect {
  const k = Math.min(n, t.gpus.length);
  let all = k > 1;
  let worst: PathType = "X";
  for (let i = 0; i < k; i++)
    for (let j = 0; j < k; j++) {
      if (i === j) continue;
      if (t.matrix[i][j] !== "NV") all = false;
      if (ORDER.indexOf(t.matrix[i][j]) > ORDER.indexOf(worst)) worst = t.matrix[i][j];
    }
  if (all)
    return {
      ...nvlinkLink(nvlinkGen, k > 2, `nvidia-smi topo ${t.source}`),
      label: `NVLink (all ${k} GPUs, from topo)`,
    };
  const link = pcieLink(pcieGen, 16, worst === "SYS", `nvidia-smi topo ${t.source}: worst path ${worst}`);
  return { ...link, label: `PCIe Gen${pcieGen} (worst path ${worst}${worst === "SYS" ? ", cross-socket" : ""})` };
}
