import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { InputError, ParseError } from "../../src/errors.ts";
import { diagnose, ncclLatencyTable, parseNcclTests, parseTopology } from "../../src/trace/index.ts";

const fx = (name: string) => readFileSync(join(import.meta.dirname, "fixtures", name), "utf8");

test("nccl-tests, current layout: header, devices, rows with root and #wrong, NCCL INFO noise ignored", () => {
  const r = parseNcclTests(fx("nccl-allreduce-current.txt"), "ar.txt");
  assert.equal(r.layout, "current");
  assert.equal(r.collective, "all_reduce_perf");
  assert.equal(r.version, "2.17.6");
  assert.equal(r.config.nGpus, 1);
  assert.equal(r.config.maxBytes, 134217728);
  assert.equal(r.config.step, 2);
  assert.equal(r.config.step_unit, "factor");
  assert.equal(r.config.warmup_iters, 5);
  assert.equal(r.config.graph, 0);
  assert.equal(r.devices.length, 4);
  assert.deepEqual(r.devices[3], {
    rank: 3,
    host: "node07",
    device: 3,
    busId: "0000:5d:00",
    name: "NVIDIA H100 80GB HBM3",
  });
  assert.equal(r.rows.length, 5);
  assert.deepEqual(r.rows[2], {
    line: 18,
    sizeBytes: 8192,
    count: 2048,
    type: "float",
    redop: "sum",
    root: -1,
    outOfPlace: { timeUs: 10.42, algbwGBs: 0.79, busbwGBs: 1.18, wrong: 0 },
    inPlace: { timeUs: 10.13, algbwGBs: 0.81, busbwGBs: 1.21, wrong: 0 },
  });
  assert.equal(r.rows[4]!.outOfPlace!.timeUs, 496.1);
  assert.equal(r.avgBusBwGBs, 94.6517);
  assert.equal(r.outOfBounds, 0);
  assert.deepEqual(
    ncclLatencyTable(r).map((p) => [p.sizeBytes, p.timeUs]),
    [
      [8, 9.87],
      [16, 9.91],
      [8192, 10.13],
      [1048576, 27.1],
      [134217728, 495.7],
    ],
  );
});

test("nccl-tests, 2022 layout: no root column, error as %5.0le", () => {
  const r = parseNcclTests(fx("nccl-allreduce-2022.txt"));
  assert.equal(r.layout, "2022");
  assert.equal(r.rows.length, 3);
  assert.equal(r.rows[0]!.root, null);
  assert.deepEqual(r.rows[2]!.outOfPlace, { timeUs: 1095, algbwGBs: 122.57, busbwGBs: 214.5, wrong: 2e-7 });
  assert.equal(r.devices.length, 2);
  assert.equal(r.devices[0]!.name, "A100-SXM4-40GB");
  assert.equal(r.avgBusBwGBs, 72.9123);
});

test("nccl-tests -C 1 -I 1 -S 1 -c 0: cputime, per-iteration columns, N/A, exponents, timestamps", () => {
  const r = parseNcclTests(fx("nccl-allgather-cputime-periter.txt"));
  assert.equal(r.timeKind, "cputime");
  assert.equal(r.collective, "all_gather_perf");
  assert.equal(r.rows.length, 3);
  assert.deepEqual(r.rows[0]!.outOfPlace, {
    timeUs: 12.4,
    algbwGBs: 0.08,
    busbwGBs: 0.04,
    wrong: null,
    iterMinUs: 11.9,
    iterMaxUs: 14.2,
    iterP99Us: 14.1,
    iterCvPct: 4.2,
  });
  assert.equal(r.rows[2]!.outOfPlace!.timeUs, 12000);
  assert.equal(r.rows[2]!.timestamp, "2026-11-30 10:00:03");
  assert.equal(ncclLatencyTable(r)[2]!.timeUs, 13);
});

test("nccl-tests -J JSON output", () => {
  const doc = {
    version: 2,
    config: {
      nthreads: 1,
      ngpus: 1,
      devices: [{ rank: 0, hostname: "h", device: 0, device_hex: "0000:18:00", device_info: "NVIDIA H200" }],
    },
    results: [
      {
        size: 8,
        count: 2,
        type: "float",
        redop: "sum",
        root: "    -1",
        out_of_place: { time: 6.7, alg_bw: 0, bus_bw: 0, nwrong: 0 },
        in_place: { time: 6.5, alg_bw: 0, bus_bw: 0, nwrong: 0 },
      },
    ],
    average_bus_bandwidth: { bandwidth: 0.5, okay: "unchecked" },
  };
  const r = parseNcclTests(JSON.stringify(doc));
  assert.equal(r.layout, "json");
  assert.equal(r.rows[0]!.root, -1);
  assert.equal(ncclLatencyTable(r)[0]!.timeUs, 6.5);
  assert.equal(r.devices[0]!.name, "NVIDIA H200");
});

test("nccl-tests bad input: no rows, garbage in a column", () => {
  assert.throws(
    () => parseNcclTests("hello\nworld\n", "x.txt"),
    (e: unknown) => {
      assert.ok(e instanceof InputError);
      assert.match(
        (e as Error).message,
        /x\.txt: no nccl-tests result rows found \(no '# {2}size {2}count {2}type …' column header\)/,
      );
      return true;
    },
  );
  const text = fx("nccl-allreduce-current.txt").replace("    10.42", "    1x.42");
  assert.throws(
    () => parseNcclTests(text, "ar.txt"),
    (e: unknown) => {
      assert.ok(e instanceof ParseError);
      assert.match((e as Error).message, /^ar\.txt:18:\d+: not a number in the timeUs column/);
      return true;
    },
  );
  const cut = fx("nccl-allreduce-current.txt").replace(/ {4}495\.7 .*\n/, "\n");
  const r = parseNcclTests(cut);
  assert.equal(r.rows.at(-1)!.inPlace!.timeUs, 496.1);
});

test("topology: DGX H100 (ANSI-underlined header, NICs, legend), full NVLink → custom all-reduce and LL128", () => {
  const t = parseTopology(fx("topo-dgx-h100.txt"));
  assert.equal(t.gpus.length, 8);
  assert.deepEqual(t.nics, [
    { id: "NIC0", name: "mlx5_0" },
    { id: "NIC1", name: "mlx5_1" },
  ]);
  assert.equal(t.matrix[0]![1], "NV18");
  assert.equal(t.links.length, 28);
  assert.ok(t.links.every((l) => l.class === "nvlink" && l.nvlinks === 18));
  assert.equal(t.cpuAffinity.GPU5, "56-111,168-223");
  assert.equal(t.numaAffinity.GPU5, "1");
  const d = diagnose(t, 8);
  assert.ok(d.fullyNvlinked);
  assert.ok(d.customAllReduce.vllm.enabled);
  assert.ok(d.customAllReduce.sglang.enabled);
  assert.equal(d.nccl.transport, "P2P over NVLink");
  assert.deepEqual(d.nccl.protocols, ["LL", "LL128", "Simple"]);
  const d3 = diagnose(t, 3);
  assert.ok(!d3.customAllReduce.vllm.enabled);
  assert.match(d3.customAllReduce.vllm.reasons.join(), /world size 3 not in \{2, 4, 6, 8\}/);
  const d16 = diagnose(t, 16);
  assert.ok(!d16.customAllReduce.vllm.enabled);
  assert.match(d16.customAllReduce.vllm.reasons.join(), /spans nodes/);
  assert.equal(diagnose(t, 1).customAllReduce.vllm.reasons[0], "TP 1: no all-reduce needed");
});

test("topology: 4× L40S PCIe with topo -p2p r in the same file", () => {
  const t = parseTopology(fx("topo-pcie-l40s.txt"));
  assert.equal(t.gpus.length, 4);
  assert.deepEqual(t.p2p!.matrix[0], ["X", "OK", "CNS", "CNS"]);
  assert.equal(t.p2p!.mode, "r");
  assert.deepEqual(
    t.links.map((l) => l.class),
    ["pcie-switch", "cross-socket", "cross-socket", "cross-socket", "cross-socket", "pcie-switch"],
  );
  const d2 = diagnose(t, 2);
  assert.ok(d2.customAllReduce.vllm.enabled, d2.customAllReduce.vllm.reasons.join());
  assert.equal(d2.nccl.transport, "P2P over PCIe switch");
  assert.deepEqual(d2.nccl.protocols, ["LL", "Simple"]);
  const d4 = diagnose(t, 4);
  assert.ok(!d4.customAllReduce.vllm.enabled);
  assert.match(
    d4.customAllReduce.vllm.reasons.join("\n"),
    /more than two GPUs unless every pair is NVLink-connected \(GPU0-GPU1 PIX/,
  );
  assert.match(d4.customAllReduce.vllm.reasons.join("\n"), /P2P access check fails \(GPU0→GPU2 CNS/);
  assert.equal(d4.nccl.transport, "SHM (host memory)");
  assert.match(d4.findings.join("\n"), /every TP all-reduce goes through NCCL \(LL\/Simple\)/);
  const cross = diagnose(t, 2, { gpus: [1, 2] });
  assert.ok(!cross.customAllReduce.vllm.enabled);
  assert.equal(cross.worstLink, "cross-socket");
});

test("topology: NVLink-bridged pairs on an old driver (SOC): TP 2 on a bridge vs TP 4, CPU vendor decides NCCL P2P", () => {
  const t = parseTopology(fx("topo-a6000-bridges.txt"));
  assert.equal(t.links.find((l) => l.a === "GPU0" && l.b === "GPU3")!.class, "cross-socket");
  const d2 = diagnose(t, 2);
  assert.ok(d2.fullyNvlinked && d2.customAllReduce.vllm.enabled && d2.nccl.ll128);
  const d4 = diagnose(t, 4);
  assert.ok(!d4.customAllReduce.vllm.enabled);
  assert.match(d4.nccl.transport, /SHM on Intel\/ARM hosts, P2P on AMD hosts/);
  assert.match(diagnose(t, 4, { cpuVendor: "amd" }).nccl.transport, /^P2P over PCIe through the CPU/);
  assert.match(diagnose(t, 4, { cpuVendor: "intel" }).nccl.transport, /^SHM/);
  // Across sockets, Blackwell's ring search needs 18 GB/s a channel: AMD's 16 fails it; Intel's depends on the
  // generation; within the bridged pair nothing crosses a socket.
  assert.match(diagnose(t, 4, { cpuVendor: "amd" }).findings.join("\n"), /AMD \(any EPYC\) 16 GB\/s: it falls back/);
  assert.match(diagnose(t, 4, { cpuVendor: "intel" }).findings.join("\n"), /below 18 it falls back/);
  assert.ok(!d2.findings.some((f) => /falls back/.test(f)));
  const d2b = diagnose(t, 2, { gpus: [1, 2] });
  assert.match(d2b.customAllReduce.vllm.reasons.join(), /CUDA-IPC P2P test passes/);
});

test("topology bad input", () => {
  assert.throws(() => parseTopology("nothing here", "t.txt"), /t\.txt:1:1: no GPU matrix found/);
  const p2pOnly = fx("topo-pcie-l40s.txt").split("$ nvidia-smi topo -p2p r")[1]!;
  assert.throws(() => parseTopology(p2pOnly), /only 'topo -p2p' output found/);
});
