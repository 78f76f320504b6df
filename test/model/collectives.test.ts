import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import {
  chooseAllReduce,
  customArDecision,
  FALLBACK_GRAPH,
  ncclCandidates,
  ncclMenu,
  ncclSearchFallback,
  simpleOverLlUs,
} from "../../src/model/collectives.ts";
import { nvlinkLink, parseInterconnect, pcieLink, requireGpu } from "../../src/model/hardware.ts";
import { ncclMeasurement as parseNcclTests } from "../../src/model/measurements.ts";

const fx = (f: string) => new URL(`./fixtures/${f}`, import.meta.url).pathname;

test("NCCL latency model reproduces collectives.md §3.4 (µs, latency part)", () => {
  const gpu = requireGpu("h100-sxm");
  const lat = (link: ReturnType<typeof pcieLink>, n: number, algo: string, proto: string) => {
    const all = ncclMenu(link, gpu, n, "LL,LL128,Simple");
    return ncclCandidates(link, gpu, n, 0, all).find((c) => c.algorithm === algo && c.protocol === proto)!.latencyUs;
  };
  const nv = nvlinkLink(4, false);
  const pc = pcieLink(5);
  const table: [ReturnType<typeof pcieLink>, string, string, number[]][] = [
    [nv, "Ring", "LL", [7.8, 10.2, 15.0]],
    [nv, "Ring", "LL128", [17.8, 25.4, 40.6]],
    [nv, "Ring", "Simple", [15.2, 28.8, 56.0]],
    [nv, "Tree", "LL", [8.0, 10.4, 15.2]],
    [nv, "Tree", "LL128", [16.5, 21.5, 31.5]],
    [nv, "Tree", "Simple", [16.4, 32.4, 64.4]],
    [pc, "Ring", "LL", [8.6, 12.6, 20.6]],
    [pc, "Ring", "LL128", [19.0, 29.0, 49.0]],
    [pc, "Ring", "Simple", [19.8, 42.6, 88.2]],
    [pc, "Tree", "LL", [8.8, 12.8, 20.8]],
    [pc, "Tree", "LL128", [17.8, 25.4, 40.6]],
    [pc, "Tree", "Simple", [16.4, 32.4, 64.4]],
  ];
  for (const [link, algo, proto, want] of table)
    for (const [i, n] of [2, 4, 8].entries())
      assert.equal(lat(link, n, algo, proto).toFixed(1), want[i].toFixed(1), `${link.kind} ${algo}/${proto} n=${n}`);
});

test("protocol menu: no LL128 over PCIe unless NCCL_PROTO names it; LL128 on NVLink", () => {
  const gpu = requireGpu("rtx-pro-6000");
  assert.deepEqual(ncclMenu(pcieLink(5), gpu, 8).protocols, ["LL", "Simple"]);
  assert.match(ncclMenu(pcieLink(5), gpu, 8).ll128Reason, /not NVLink-class/);
  assert.deepEqual(ncclMenu(pcieLink(5), gpu, 8, "LL128").protocols, ["LL128"]);
  assert.deepEqual(ncclMenu(pcieLink(5), gpu, 8, "^LL").protocols, ["LL128", "Simple"]);
  assert.deepEqual(ncclMenu(nvlinkLink(4, true), requireGpu("h100-sxm"), 8).protocols, ["LL", "LL128", "Simple"]);
  assert.ok(ncclMenu(nvlinkLink(4, true), requireGpu("h100-sxm"), 8).algorithms.includes("NVLS"));
});

test("vLLM custom all-reduce eligibility follows collectives.md §7.1", () => {
  const pro = requireGpu("rtx-pro-6000");
  const off = customArDecision("vllm", pro, pcieLink(5), 8, 12288, undefined);
  assert.equal(off.used, false);
  assert.match(off.engineMessage!, /not supported on more than two PCIe-only GPUs/);
  assert.equal(customArDecision("vllm", pro, pcieLink(5), 2, 12288, undefined).used, true);
  assert.match(
    customArDecision("vllm", pro, pcieLink(5), 3, 12288, undefined).engineMessage!,
    /unsupported world size: 3/,
  );
  assert.equal(customArDecision("vllm", requireGpu("h100-sxm"), nvlinkLink(4, true), 8, 12288, undefined).used, true);
  assert.match(
    customArDecision("vllm", requireGpu("rtx-4090"), pcieLink(4), 2, 8192, undefined).reason,
    /peer-to-peer disabled/,
  );
  assert.match(
    customArDecision("vllm", requireGpu("h100-sxm"), nvlinkLink(4, true), 8, 12290, undefined).reason,
    /multiple of 16/,
  );
  assert.match(customArDecision("vllm", pro, pcieLink(5), 8, 12288, false).reason, /disabled by the user/);
  const forced = customArDecision("vllm", pro, pcieLink(5), 8, 12288, true);
  assert.equal(forced.used, true);
  assert.equal(forced.forcedHypothetical, true);
  assert.equal(customArDecision("sglang", pro, pcieLink(5), 8, 12288, undefined).used, false);
  assert.equal(customArDecision("trtllm", pro, pcieLink(5), 8, 12288, undefined).used, false);
});

test("the seed all-reduce on one socket: PCIe Gen5 × 8 → PyNCCL Ring/LL, isolated ≈ the measured 26.7–27.0 µs", () => {
  const ctx = {
    engine: "vllm" as const,
    gpu: requireGpu("rtx-pro-6000"),
    link: parseInterconnect("pcie5-node"),
    n: 8,
    bytes: 12288,
    cudaGraphs: true,
  };
  const c = chooseAllReduce(ctx);
  assert.equal(c.implementation, "nccl");
  assert.equal(c.protocol, "LL");
  assert.equal(c.searchFallback?.state, "no");
  assert.ok(c.isolatedUs.mid > 26.7 && c.isolatedUs.mid < 27.0, String(c.isolatedUs.mid));
  assert.ok(c.latencyUs.low < c.latencyUs.mid && c.latencyUs.mid < c.latencyUs.high);
  // Forcing Simple costs more than LL, by Simple's bounded extra (≥ 1 µs a ring step).
  const s = chooseAllReduce({ ...ctx, ncclProto: "Simple" });
  assert.equal(s.protocol, "Simple");
  assert.ok(s.latencyUs.mid > c.latencyUs.mid + 14, `${s.latencyUs.mid} vs ${c.latencyUs.mid}`);
  assert.deepEqual(s.simpleExtraUs, simpleOverLlUs(8, "rtx-pro-6000"));
  // Eager adds the per-collective launch cost.
  const e = chooseAllReduce({ ...ctx, cudaGraphs: false });
  assert.ok(e.latencyUs.mid - c.latencyUs.mid >= 12);
});

test("NCCL's ring search falls back on SM ≥ 100 below 18 GB/s a channel; its tuner then picks Simple beyond ~4 KB", () => {
  const blackwell = requireGpu("rtx-pro-6000");
  const hopper = requireGpu("h100-pcie");
  assert.equal(ncclSearchFallback(parseInterconnect("pcie5-node"), blackwell, 8).state, "no");
  // A SYS pair: AMD's 16 GB/s and pre-Sapphire-Rapids Intel's 10 fail the search, newer Intel's 22–40 do not.
  const sys = ncclSearchFallback(parseInterconnect("pcie5-sys"), blackwell, 8);
  assert.equal(sys.state, "unknown");
  assert.match(sys.reason, /AMD \(any EPYC\) 16/);
  // No socket layout given: unknown, and the reason says how to settle it.
  assert.match(ncclSearchFallback(parseInterconnect("pcie5"), blackwell, 8).reason, /--topo/);
  // A Gen4 x8 slot is 12 GB/s in NCCL's topology: below the floor wherever the GPUs sit.
  assert.equal(ncclSearchFallback(parseInterconnect("pcie4x8"), blackwell, 4).state, "yes");
  // Hopper's speed list goes down to 3 GB/s: never a fallback; NVLink never either.
  assert.equal(ncclSearchFallback(parseInterconnect("pcie5-sys"), hopper, 8).state, "no");
  assert.equal(ncclSearchFallback(nvlinkLink(5, true), requireGpu("b200"), 8).state, "no");
  // The tuner at one channel × 0.1 GB/s (tuning.cc arithmetic, 8 ranks): Ring/LL 20.6 + 12288 B / 28.6 MB/s.
  const link = parseInterconnect("pcie5-sys");
  const menu = ncclMenu(link, blackwell, 8);
  const at = (bytes: number) =>
    ncclCandidates(link, blackwell, 8, bytes, menu, FALLBACK_GRAPH)
      .filter((c) => c.enabled)
      .sort((a, b) => a.timeUs - b.timeUs);
  const c12 = at(12288);
  assert.equal(`${c12[0]!.algorithm}/${c12[0]!.protocol}`, "Ring/Simple");
  assert.ok(Math.abs(c12.find((c) => c.algorithm === "Ring" && c.protocol === "LL")!.timeUs - 450.7) < 0.5);
  assert.ok(Math.abs(c12[0]!.timeUs - 303.2) < 0.5);
  assert.equal(at(2048)[0]!.protocol, "LL");
  // Given the log line, the seed's all-reduce runs Simple, and NCCL_PROTO=LL takes exactly the extra away.
  const ctx = { engine: "vllm" as const, gpu: blackwell, link, n: 8, bytes: 12288, cudaGraphs: true };
  const yes = chooseAllReduce({ ...ctx, ncclFallback: true });
  assert.equal(yes.protocol, "Simple");
  const ll = chooseAllReduce({ ...ctx, ncclFallback: true, ncclProto: "LL" });
  assert.equal(ll.protocol, "LL");
  assert.ok(Math.abs(yes.isolatedUs.mid - ll.isolatedUs.mid - simpleOverLlUs(8, "rtx-pro-6000").mid) < 1e-9);
  // Unknown: the extra at equal odds, from 0 to its upper bound.
  const unk = chooseAllReduce(ctx);
  assert.equal(unk.simpleExtraUs.low, 0);
  assert.equal(unk.simpleExtraUs.high, simpleOverLlUs(8, "rtx-pro-6000").high);
  // Simple's extra is bounded by NCCL's own constants: 1.8 + 14 × 4.7 = 67.6 µs at 8 ranks.
  assert.ok(Math.abs(simpleOverLlUs(8, "rtx-pro-6000").high - 67.6) < 1e-9);
  // …and below by one more trip a step at LL's measured step on that GPU (§5.1: (26.7 − 13.5) µs over 8 steps).
  assert.ok(Math.abs(simpleOverLlUs(8, "rtx-pro-6000").low - (14 * (26.7 - 13.5)) / 8) < 1e-9);
  assert.equal(simpleOverLlUs(8).low, 14); // no table row: NCCL's LL hwLat, 1.0 µs a step
});

test("nccl-tests all_reduce_perf text is parsed by header detection", () => {
  const m = parseNcclTests(readFileSync(fx("all_reduce_perf-pcie8.txt"), "utf8"), "arp.txt");
  assert.equal(m.nGpus, 8);
  assert.equal(m.graph, true);
  // One row per size: the faster of out-of-place (26.7 µs) and in-place (26.81 µs).
  assert.equal(m.rows.length, 5);
  assert.deepEqual(m.rows[0], { bytes: 8192, us: 26.7, inPlace: false });
  // 2022 layout: no root column, error column.
  const old = `# nThread 1 nGpus 2 minBytes 8 maxBytes 64 step: 2(factor) warmup iters: 5 iters: 20 validation: 1
#
#                                                       out-of-place                       in-place
#       size         count      type   redop     time   algbw   busbw  error     time   algbw   busbw  error
#        (B)    (elements)                       (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           8             2     float     sum    10.12    0.00    0.00  0e+00    10.05    0.00    0.00  0e+00
          64            16     float     sum    10.40    0.01    0.01  0e+00    10.31    0.01    0.01  0e+00
`;
  const o = parseNcclTests(old);
  assert.equal(o.rows.length, 2);
  assert.deepEqual(o.rows[1], { bytes: 64, us: 10.31, inPlace: true });
  assert.throws(
    () =>
      parseNcclTests(
        "# size count type redop root time algbw busbw #wrong\n   8 2 float sum -1 abc 0 0 0 x 0 0 0\n",
        "bad.txt",
      ),
    /bad\.txt:2:21: not a number in the timeUs column: "abc"/,
  );
});
