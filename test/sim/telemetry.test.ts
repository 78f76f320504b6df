// The sim's dcgm-exporter endpoint against its own truth, on a real `inferscope sim` process over loopback.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { parseExposition } from "../../src/metrics/parse.ts";
import type { MetricFamily } from "../../src/metrics/types.ts";
import { allReduceTxBytesPerGpu } from "../../src/model/collectives.ts";
import { decodeBatch, loadProfile, StepModel } from "../../src/sim/index.ts";
import { expectedJoulesPerToken, gpuPowerSpec, stepEffect, type TelemetryTruth } from "../../src/sim/telemetry.ts";
import { type SpawnedSim, spawnSim } from "../helpers/sim.ts";
import { get, post } from "./util.ts";

interface Truth extends TelemetryTruth {
  collection: { seq: number; wallMs: number; unixS: number; truth: TelemetryTruth };
  bootEnergyJ: number[];
  servingGpus: number;
  link: "pcie" | "nvlink";
  power: { powerLimitW: number; enforcedLimitW: number; idleW: number; smClockMaxMHz: number };
}

async function truth(url: string): Promise<Truth> {
  const r = await get(url, "/debug/telemetry_truth");
  assert.equal(r.status, 200, r.body);
  return JSON.parse(r.body) as Truth;
}

interface Scrape {
  seq: number;
  collection: Truth["collection"];
  families: Map<string, MetricFamily>;
  text: string;
}

/** A scrape known to show collection `seq`: the truth's collection is the same before and after it. */
async function scrape(url: string, minSeq = 0): Promise<Scrape> {
  for (let i = 0; i < 400; i++) {
    const a = await truth(url);
    if (a.collection.seq < minSeq) {
      await new Promise((r) => setTimeout(r, 5));
      continue;
    }
    const r = await get(url, "/dcgm/metrics");
    assert.equal(r.status, 200);
    const b = await truth(url);
    if (a.collection.seq !== b.collection.seq) continue;
    const exp = parseExposition(r.body, { strict: true, contentType: r.type });
    return {
      seq: a.collection.seq,
      collection: a.collection,
      families: new Map(exp.families.map((f) => [f.name, f])),
      text: r.body,
    };
  }
  throw new Error(`no collection ≥ ${minSeq} was scraped`);
}

function values(s: Scrape, name: string): number[] {
  const f = s.families.get(name);
  assert.ok(f, `family ${name}`);
  return f!.samples.map((x) => x.value);
}

async function load(url: string, requests: number, tokens: number, concurrent: boolean): Promise<void> {
  const one = (i: number) =>
    post(url, "/v1/completions", { prompt: [1 + (i % 50)], max_tokens: tokens, ignore_eos: true }).then((r) =>
      assert.equal(r.status, 200, r.body),
    );
  if (concurrent) await Promise.all(Array.from({ length: requests }, (_, i) => one(i)));
  else for (let i = 0; i < requests; i++) await one(i);
}

const SCALE = 20;
const INTERVAL_MS = 250;

describe("sim telemetry: the seed profile (8× RTX PRO 6000, TP 8, PCIe)", () => {
  let sim: SpawnedSim;
  before(async () => {
    sim = await spawnSim(["--time-scale", String(SCALE), "--dcgm-interval-ms", String(INTERVAL_MS), "--seed", "3"]);
  });
  after(async () => {
    await sim?.stop();
  });

  test("GET /dcgm/metrics: dcgm-exporter's names, types, HELP and labels; strict parse", async () => {
    const s = await scrape(sim.url);
    const t = await truth(sim.url);
    // Literal text of dcgm-exporter 4.5.3-4.8.2's etc/default-counters.csv / dcp-metrics-included.csv lines.
    const expect: [string, string, string][] = [
      ["DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."],
      ["DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."],
      ["DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."],
      ["DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."],
      ["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ)."],
      ["DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."],
      ["DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."],
      ["DCGM_FI_DEV_POWER_VIOLATION", "counter", "Throttling duration due to power constraints (in ns)."],
      ["DCGM_FI_DEV_THERMAL_VIOLATION", "counter", "Throttling duration due to thermal constraints (in ns)."],
      ["DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."],
      ["DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."],
      ["DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active."],
      ["DCGM_FI_PROF_SM_ACTIVE", "gauge", "The ratio of cycles an SM has at least 1 warp assigned."],
      ["DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active."],
      [
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "gauge",
        "Ratio of cycles the device memory interface is active sending or receiving data.",
      ],
      [
        "DCGM_FI_PROF_PCIE_TX_BYTES",
        "gauge",
        "The rate of data transmitted over the PCIe bus - including both protocol headers and data payloads - in bytes per second.",
      ],
      [
        "DCGM_FI_PROF_PCIE_RX_BYTES",
        "gauge",
        "The rate of data received over the PCIe bus - including both protocol headers and data payloads - in bytes per second.",
      ],
    ];
    for (const [name, type, help] of expect) {
      const f = s.families.get(name);
      assert.ok(f, `${name} present`);
      assert.equal(f!.type, type, name);
      assert.equal(f!.help, help, name);
      assert.equal(f!.samples.length, 8, `${name}: one series per GPU`);
    }
    for (const name of [
      "DCGM_FI_PROF_NVLINK_TX_BYTES",
      "DCGM_FI_PROF_NVLINK_RX_BYTES",
      "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
    ])
      assert.ok(s.families.has(name), name);
    const samples = s.families.get("DCGM_FI_DEV_POWER_USAGE")!.samples;
    const uuids = new Set<string>();
    samples.forEach((x, i) => {
      assert.deepEqual(Object.keys(x.labels), [
        "gpu",
        "UUID",
        "pci_bus_id",
        "device",
        "modelName",
        "Hostname",
        "DCGM_FI_DRIVER_VERSION",
      ]);
      assert.equal(x.labels.gpu, String(i));
      assert.equal(x.labels.device, `nvidia${i}`);
      assert.equal(x.labels.modelName, "NVIDIA RTX PRO 6000 Blackwell Server Edition");
      assert.match(x.labels.UUID!, /^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
      assert.equal(x.labels.UUID, t.gpus[i]!.uuid);
      uuids.add(x.labels.UUID!);
    });
    assert.equal(uuids.size, 8);
    // Doubles as DCGM's %f, integers bare (real expositions: `0.000000`, `1440`).
    assert.match(s.text, /\nDCGM_FI_DEV_POWER_USAGE\{[^}]*\} \d+\.\d{6}\n/);
    assert.match(s.text, /\nDCGM_FI_DEV_SM_CLOCK\{[^}]*\} \d+\n/);
    // The same seed gives the same UUIDs in another process.
    const again = await spawnSim(["--seed", "3", "--time-scale", "50"]);
    try {
      assert.deepEqual(
        (await truth(again.url)).gpus.map((g) => g.uuid),
        t.gpus.map((g) => g.uuid),
      );
    } finally {
      await again.stop();
    }
  });

  test("idle: power = idle W × time scale (per wall second), no bytes, the idle reason bit", async () => {
    // Runs before any load on this process: nothing has been generated.
    const t = await truth(sim.url);
    assert.equal(t.generatedTokens, 0);
    const s0 = await scrape(sim.url, t.collection.seq + 1);
    const s1 = await scrape(sim.url, s0.seq + 1);
    assert.equal(s1.collection.truth.gpus[0]!.busyWallMs, 0);
    // Catches a power gauge in simulated instead of per-wall-second watts.
    for (const w of values(s1, "DCGM_FI_DEV_POWER_USAGE"))
      assert.ok(Math.abs(w - t.power.idleW * SCALE) < 1e-5, `${w}`);
    for (const r of values(s1, "DCGM_FI_DEV_CLOCKS_EVENT_REASONS")) assert.equal(r, 1);
    for (const b of values(s1, "DCGM_FI_PROF_PCIE_TX_BYTES")) assert.equal(b, 0);
    for (const u of values(s1, "DCGM_FI_DEV_GPU_UTIL")) assert.equal(u, 0);
  });

  test("a loaded window: energy counter deltas equal the truth; gauges × interval equal the counter deltas", async () => {
    const start = await scrape(sim.url);
    const scrapes: Scrape[] = [start];
    let loading = true;
    const work = load(sim.url, 6, 40, true).finally(() => {
      loading = false;
    });
    // Every collection while the load runs, and one after it.
    while (loading || scrapes.length < 4) scrapes.push(await scrape(sim.url, scrapes[scrapes.length - 1]!.seq + 1));
    await work;
    scrapes.push(await scrape(sim.url, scrapes[scrapes.length - 1]!.seq + 1));
    const first = scrapes[0]!;
    const last = scrapes[scrapes.length - 1]!;
    const now = await truth(sim.url);
    const boot = now.bootEnergyJ;
    // The counter is floor((boot + modeled energy) in mJ): exact against the truth at that collection.
    for (const s of [first, last]) {
      values(s, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION").forEach((mJ, i) => {
        assert.equal(mJ, Math.floor((boot[i]! + s.collection.truth.gpus[i]!.energyJ) * 1000));
      });
    }
    const e0 = values(first, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION");
    const e1 = values(last, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION");
    const tokens = last.collection.truth.generatedTokens - first.collection.truth.generatedTokens;
    assert.equal(tokens, 240);
    for (let i = 0; i < 8; i++) {
      const dTruth = last.collection.truth.gpus[i]!.energyJ - first.collection.truth.gpus[i]!.energyJ;
      assert.ok(Math.abs((e1[i]! - e0[i]!) / 1000 - dTruth) <= 0.001, `gpu ${i}: counter Δ vs truth Δ`);
      // The load ran: more than idle power over the window (catches steps not integrated at all).
      const wallS = (last.collection.wallMs - first.collection.wallMs) / 1000;
      assert.ok(dTruth > now.power.idleW * SCALE * wallS * 1.05, `gpu ${i}: ${dTruth} J over ${wallS} s`);
    }
    // Consecutive collections: each gauge is the exact average over its interval. Tolerances are the
    // rendering: %f (5e-7) on doubles, 0.5 on integer rates, 1 mJ floor on the counter.
    let pairs = 0;
    for (let k = 1; k < scrapes.length; k++) {
      const a = scrapes[k - 1]!;
      const b = scrapes[k]!;
      if (b.seq !== a.seq + 1) continue;
      pairs++;
      const dtS = (b.collection.wallMs - a.collection.wallMs) / 1000;
      const power = values(b, "DCGM_FI_DEV_POWER_USAGE");
      const ea = values(a, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION");
      const eb = values(b, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION");
      const tx = values(b, "DCGM_FI_PROF_PCIE_TX_BYTES");
      const dram = values(b, "DCGM_FI_PROF_DRAM_ACTIVE");
      for (let i = 0; i < 8; i++) {
        const dE = (eb[i]! - ea[i]!) / 1000;
        assert.ok(Math.abs(power[i]! * dtS - dE) <= 5e-7 * dtS + 0.002, `interval ${b.seq} gpu ${i}: ${power[i]} W`);
        const dTx = b.collection.truth.gpus[i]!.pcieTxBytes - a.collection.truth.gpus[i]!.pcieTxBytes;
        assert.ok(Math.abs(tx[i]! * dtS - dTx) <= 0.5 * dtS + 1e-6 * dTx, `interval ${b.seq} gpu ${i}: tx`);
        // DRAM active is a time share: bytes over peak × simulated time.
        const dDram = b.collection.truth.gpus[i]!.dramBytes - a.collection.truth.gpus[i]!.dramBytes;
        const peak = 1792e9;
        assert.ok(Math.abs(dram[i]! * peak * dtS * SCALE - dDram) <= 5e-7 * peak * dtS * SCALE + 1e-6 * dDram);
        assert.ok(dram[i]! >= 0 && dram[i]! <= 1);
      }
    }
    assert.ok(pairs >= 2, `${pairs} consecutive collections scraped`);
  });

  test("PCIe bytes per generated token = all-reduces × the ring's per-GPU payload + the logits gather, × GPUs", async () => {
    // Idle first (a collection after the previous test's load), then sequential 1-token-prompt requests, so
    // every step carries one token: 2 × 78 layers + 1 embedding all-reduce of 6144 × 2 B (docs/sim.md), and
    // the logits gather: 7 of 8 ranks send their 154,880 / 8 × 2 B shard (spread evenly over the GPUs).
    const t0 = await truth(sim.url);
    await load(sim.url, 3, 24, false);
    const t1 = await truth(sim.url);
    const tokens = t1.generatedTokens - t0.generatedTokens;
    assert.equal(tokens, 72);
    const perGpuPerCall = (2 * 7 * 12288) / 8;
    assert.equal(allReduceTxBytesPerGpu(12288, 8, "ring"), perGpuPerCall);
    const gather = ((154880 / 8) * 2 * 7) / 8;
    let total = 0;
    for (let i = 0; i < 8; i++) {
      const g0 = t0.gpus[i]!;
      const g1 = t1.gpus[i]!;
      const tx = g1.pcieTxBytes - g0.pcieTxBytes;
      assert.ok(Math.abs(tx / tokens - (157 * perGpuPerCall + gather)) < 1e-6, `gpu ${i}: ${tx / tokens} B/token`);
      assert.equal(g1.pcieRxBytes - g0.pcieRxBytes, tx);
      assert.equal(g1.nvlinkTxBytes - g0.nvlinkTxBytes, 0);
      total += tx;
    }
    assert.ok(Math.abs(total / tokens - (157 * perGpuPerCall + gather) * 8) < 1e-5);
  });
});

describe("sim telemetry: power cap and NVLink", () => {
  test("a profile driven above its power limit: SW power cap bit, violation time, lowered SM clock", async () => {
    // A slower clock and a short interval: several collections fall inside the load.
    const scale = 5;
    const sim = await spawnSim([
      "--time-scale",
      String(scale),
      "--dcgm-interval-ms",
      "100",
      "--set",
      "hardware.enforcedPowerLimitW=150",
    ]);
    try {
      const s0 = await scrape(sim.url);
      let loading = true;
      const work = load(sim.url, 4, 200, true).finally(() => {
        loading = false;
      });
      const during: Scrape[] = [];
      while (loading) during.push(await scrape(sim.url, (during.at(-1)?.seq ?? s0.seq) + 1));
      await work;
      const s1 = await scrape(sim.url, (during.at(-1)?.seq ?? s0.seq) + 1);
      const t = await truth(sim.url);
      assert.equal(t.power.enforcedLimitW, 150);
      const v0 = values(s0, "DCGM_FI_DEV_POWER_VIOLATION");
      const v1 = values(s1, "DCGM_FI_DEV_POWER_VIOLATION");
      for (let i = 0; i < 8; i++) {
        assert.ok(v1[i]! > v0[i]!, `gpu ${i}: violation counter grew`);
        // Wall ns of capped steps (the truth's capped wall ms).
        const dTruth = s1.collection.truth.gpus[i]!.powerCappedWallMs - s0.collection.truth.gpus[i]!.powerCappedWallMs;
        assert.ok(Math.abs((v1[i]! - v0[i]!) / 1e6 - dTruth) <= 2e-6);
      }
      const busy = during.filter((s) => values(s, "DCGM_FI_DEV_GPU_UTIL")[0]! > 50);
      assert.ok(busy.length > 0, "a loaded interval was scraped");
      for (const s of busy) {
        for (const r of values(s, "DCGM_FI_DEV_CLOCKS_EVENT_REASONS")) assert.equal(r & 0x4, 0x4);
        for (const c of values(s, "DCGM_FI_DEV_SM_CLOCK")) assert.ok(c < t.power.smClockMaxMHz, `clock ${c}`);
        // Never above the limit (per wall second: × the time scale).
        for (const w of values(s, "DCGM_FI_DEV_POWER_USAGE")) assert.ok(w <= 150 * scale + 1e-5, `${w} W`);
      }
    } finally {
      await sim.stop();
    }
  });

  test("custom all-reduce over NVLink: (n−1)·S per call on NVLink, nothing on PCIe", async () => {
    const sim = await spawnSim(["--profile", "llama3-70b-4xh100-nvlink", "--time-scale", String(SCALE)]);
    try {
      const t0 = await truth(sim.url);
      await load(sim.url, 2, 16, false);
      const t1 = await truth(sim.url);
      const tokens = t1.generatedTokens - t0.generatedTokens;
      assert.equal(tokens, 32);
      assert.equal(t1.link, "nvlink");
      // 2 × 80 layers + 1, each 8192 × 2 B, one-shot: 3 peers read each GPU's buffer; plus the logits
      // gather (3 of 4 ranks send a 128,256 / 4 × 2 B shard, spread evenly).
      const perToken = 161 * allReduceTxBytesPerGpu(16384, 4, "one-shot") + ((128256 / 4) * 2 * 3) / 4;
      assert.equal(perToken, 161 * 3 * 16384 + 48096);
      for (let i = 0; i < 4; i++) {
        assert.ok(Math.abs((t1.gpus[i]!.nvlinkTxBytes - t0.gpus[i]!.nvlinkTxBytes) / tokens - perToken) < 1e-6);
        assert.equal(t1.gpus[i]!.pcieTxBytes - t0.gpus[i]!.pcieTxBytes, 0);
      }
    } finally {
      await sim.stop();
    }
  });
});

describe("sim telemetry: the pure model", () => {
  test("energy per token: steady decode, batch 1 vs 64; the cap binds only where the model says", () => {
    const p = loadProfile("glm5-8x-rtxpro6000-pcie");
    const b1 = expectedJoulesPerToken(p, { ncclProto: "LL" }, 1, 128);
    const b64 = expectedJoulesPerToken(p, { ncclProto: "LL" }, 64, 128);
    assert.equal(b1.gpus, 8);
    // J/token = power × GPUs × step time / tokens per step.
    assert.ok(Math.abs(b1.joulesPerToken - (b1.powerW * 8 * b1.stepMs) / 1000) < 1e-9);
    assert.ok(b64.joulesPerToken < b1.joulesPerToken / 10, `${b64.joulesPerToken} vs ${b1.joulesPerToken}`);
    const spec = gpuPowerSpec(p);
    assert.ok(b1.powerW > spec.idleW && b1.powerW <= spec.powerLimitW);
    const capped = loadProfile("glm5-8x-rtxpro6000-pcie", { "hardware.enforcedPowerLimitW": 150 });
    const model = new StepModel(capped, {});
    const shape = decodeBatch(8, 512);
    const e = stepEffect(model, gpuPowerSpec(capped), shape, model.stepMs(shape));
    assert.ok(e.capped && e.powerW === 150 && e.uncappedW > 150);
    assert.ok(e.smClockMHz < gpuPowerSpec(capped).smClockMaxMHz);
  });

  test("GPU busy leaves the host's share of a step out; a per-sequence cost past twice a lone decode bounds the step", () => {
    const host = loadProfile("llama3-8b-1xh100", { "cost.schedulerUsPerSeq": 9998.5 });
    const plain = loadProfile("llama3-8b-1xh100");
    const compute = loadProfile("llama3-8b-1xh100", { "hardware.gemmTflops": 10 });
    const shape = decodeBatch(10, 48);
    for (const p of [host, plain]) {
      const model = new StepModel(p, {});
      const x = model.explain(shape);
      const ms = (n: string) => x.components.find((c) => c.name === n)!.ms;
      // A jittered step: every component scales with it.
      const e = stepEffect(model, gpuPowerSpec(p), shape, x.stepMs * 1.1);
      const hostMs = ms("launch") + ms("sampling") + ms("scheduler");
      assert.ok(Math.abs(e.gpuMs - (x.stepMs - hostMs) * 1.1) < 1e-9, `${e.gpuMs}`);
    }
    const busy = (p: typeof host) => {
      const model = new StepModel(p, {});
      const e = stepEffect(model, gpuPowerSpec(p), shape, model.stepMs(shape));
      return e.gpuMs / e.simMs;
    };
    assert.ok(busy(host) < 0.1, `host-bound: ${busy(host)}`);
    assert.ok(busy(plain) > 0.8, `plain: ${busy(plain)}`);
    assert.ok(busy(compute) > 0.9, `compute-bound: ${busy(compute)}`);

    const bound = (p: typeof host, b: number) => new StepModel(p, {}).perSeqBound(decodeBatch(b, 48));
    // 10 ms per sequence of host work over a ~6.5 ms step: one sequence is not yet twice a lone decode.
    assert.deepEqual([bound(host, 1), bound(host, 2), bound(host, 3), bound(host, 10)], [null, null, "host", "host"]);
    // 1.6 ms of GEMM per token at 10 TFLOPS: past the ridge (~3.5 tokens), and twice a lone decode by 8.
    assert.deepEqual([bound(compute, 1), bound(compute, 4), bound(compute, 8)], [null, null, "compute"]);
    // The stock H100: memory-bound to the batch the tests reach.
    assert.equal(bound(plain, 64), null);
  });

  test("allReduceTxBytesPerGpu: ring and tree 2(n−1)/n·S, one-shot (n−1)·S, nothing alone", () => {
    assert.equal(allReduceTxBytesPerGpu(1000, 4, "ring"), 1500);
    assert.equal(allReduceTxBytesPerGpu(1000, 4, "tree"), 1500);
    assert.equal(allReduceTxBytesPerGpu(1000, 4, "one-shot"), 3000);
    assert.equal(allReduceTxBytesPerGpu(1000, 1, "ring"), 0);
    assert.equal(allReduceTxBytesPerGpu(1000, 2, "ring"), 1000);
  });
});
