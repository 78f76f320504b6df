// The model's view of `nvidia-smi topo -m`: the parsing and link classification are the trace
// module's (one parser); this file turns that Topology into the link model (Interconnect). Pure.
import { diagnose, parseTopology, type Topology } from "../trace/topo.ts";
import type { Interconnect } from "./hardware.ts";
import { nvlinkLink, pcieLink } from "./hardware.ts";

export type { Topology };

/** Strict parse: an unknown link type, a short row or a missing GPU row is a file:line:column error. */
export function parseTopo(text: string, file = "topo.txt"): Topology {
  return parseTopology(text, file, { strict: true });
}

/** The link model for the first `n` GPUs of a topology. */
export function interconnectFromTopo(
  t: Topology,
  n: number,
  pcieGen = 5,
  nvlinkGen = 4,
  source = "nvidia-smi topo",
): Interconnect {
  const k = Math.min(n, t.gpus.length);
  const d = diagnose(t, k);
  if (d.fullyNvlinked) return { ...nvlinkLink(nvlinkGen, k > 2, source), label: `NVLink (all ${k} GPUs, from topo)` };
  // The printed path type (SYS, or SOC on old drivers) of the group's worst pair.
  const inGroup = new Set(d.gpus);
  const worst = t.links.find((l) => inGroup.has(l.a) && inGroup.has(l.b) && l.class === d.worstLink)?.raw ?? "X";
  const cross = d.worstLink === "cross-socket";
  const link = pcieLink(pcieGen, 16, cross, `${source}: worst path ${worst}`);
  return { ...link, label: `PCIe Gen${pcieGen} (worst path ${worst}${cross ? ", cross-socket" : ""})` };
}
