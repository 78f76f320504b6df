// dcgm-exporter families from real expositions (fixtures/dcgm/README.md names each source), one exporter scraped
// several times, and the same families as Prometheus instant vectors.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { ParseError } from "../../src/errors.ts";
import { dcgmVectorsToSamples, type PromVectorElement, parseDcgmExposition } from "../../src/telemetry/dcgm.ts";
import { summarizeTelemetry } from "../../src/telemetry/summary.ts";

const fx = (f: string) => readFileSync(join(import.meta.dirname, "fixtures", "dcgm", f), "utf8");
const T0 = 1796406418;

test("A100 with a MIG instance: GPU and GPU_I_ID series are separate devices with their MIG labels", () => {
  const c = parseDcgmExposition(fx("a100-mig.prom"), { file: "a100-mig.prom", scrapeTimeS: T0 });
  assert.deepEqual(
    c.devices.map((d) => d.key),
    ["gpu0", "gpu0/mig13"],
  );
  const mig = c.devices[1]!;
  assert.deepEqual(mig.mig, { profile: "1g.5gb", instanceId: "13" });
  assert.equal(mig.uuid, "GPU-34319582-d595-d1c7-d1d2-179bcfa61660");
  assert.equal(mig.host, "ub20-a100-k8s");
  const gpu = c.samples.find((s) => s.device === "gpu0")!;
  assert.equal(gpu.t, T0);
  assert.equal(gpu.powerW, 409.692);
  assert.equal(gpu.energyJ, 319159.391); // mJ → J
  assert.equal(gpu.dramActive, 0.690789); // a ratio, not a percentage
  assert.equal(gpu.tensorActive, 0.92926);
  assert.equal(gpu.pcieTxBps, 33011804); // a rate in bytes/s
  assert.equal(gpu.smClockMHz, 1215);
  const inst = c.samples.find((s) => s.device === "gpu0/mig13")!;
  assert.equal(inst.dramActive, 0.800339);
  assert.equal(inst.powerW, undefined);
  // The GPU reports DRAM active itself: the instance is not averaged in on top of it.
  const s = summarizeTelemetry(c, { window: { startS: T0, endS: T0, how: "given" } });
  assert.equal(s.dram!.activeMean, 0.690789);
  assert.equal(s.energyJ, null);
  assert.ok(s.unavailable.some((u) => u.field === "energyJ" && /one reading/.test(u.why)));
});

test("RTX 4000 Ada: pod/namespace/container labels, HELP/TYPE as served, every family's unit", () => {
  const c = parseDcgmExposition(fx("rtx4000ada-pod-labels.prom"), { scrapeTimeS: T0 });
  const d = c.devices[0]!;
  assert.equal(d.key, "gpu0");
  assert.equal(d.name, "NVIDIA RTX 4000 Ada Generation");
  assert.deepEqual(d.workload, { namespace: "default", pod: "cuda-75454ffb9f-8ljq7", container: "cuda" });
  const s = c.samples[0]!;
  assert.equal(s.powerW, 40.979);
  assert.equal(s.energyJ, 455497.156);
  assert.equal(s.gpuBusy, 0);
  assert.equal(s.smClockMHz, 2310);
  assert.equal(s.memClockMHz, 9001);
  assert.equal(s.dramActive, 0.003074);
});

test("T4: utilization.memory-style busy time (73 %) beside DRAM active (9 %): two different things", () => {
  const c = parseDcgmExposition(fx("t4.prom"), { scrapeTimeS: T0 });
  const s = c.samples[0]!;
  assert.equal(c.devices[0]!.name, "Tesla T4");
  assert.equal(s.gpuBusy, 0.91);
  assert.equal(s.memBusy, 0.73);
  assert.equal(s.dramActive, 0.092781);
  assert.equal(s.energyJ, 15152422.938);
  assert.equal(s.pcieRxBps, 6935930);
});

test("scrapes of one exporter over time: energy by counter delta across a reset, violation ns → share", () => {
  // Three scrapes of the real T4 text, 10 s apart, with the energy counter and a power-violation counter
  // advanced as an exporter would; the third scrape follows a driver reload (the counter restarts).
  const base = fx("t4.prom");
  const energy0 = 15152422938;
  const scrape = (energyMj: number, violNs: number) =>
    `${base.replace(/(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION\{[^}]*\}) \d+/, `$1 ${energyMj}`)}# HELP DCGM_FI_DEV_POWER_VIOLATION Throttling duration due to power constraints (in ns).\n# TYPE DCGM_FI_DEV_POWER_VIOLATION counter\nDCGM_FI_DEV_POWER_VIOLATION{gpu="0",UUID="GPU-6d5c0ac5-74d7-3130-46f1-e93ed57f469a"} ${violNs}\n`;
  const caps = [
    parseDcgmExposition(scrape(energy0, 0), { scrapeTimeS: T0 }),
    parseDcgmExposition(scrape(energy0 + 700_000, 5e9), { scrapeTimeS: T0 + 10 }),
    parseDcgmExposition(scrape(650_000, 5e9 + 2e9), { scrapeTimeS: T0 + 20 }),
  ];
  const merged = { ...caps[0]!, samples: caps.flatMap((c) => c.samples) };
  const s = summarizeTelemetry(merged, { window: { startS: T0, endS: T0 + 20, how: "given" }, tokens: 1000 });
  assert.equal(s.energyMethod, "counter");
  // After the reload the counter holds 650 J since its restart. The 10 s around the restart are estimated at the
  // neighbouring 70 J/s (700 J, at least the 650 counted); the ± spans 650 J (restart at the end) to 1350 J.
  assert.equal(s.energyJ, 700 + 700);
  assert.ok(s.energyJ! - s.energyErrorJ! <= 700 + 650 && s.energyJ! + s.energyErrorJ! >= 700 + 650 + 700);
  assert.ok(s.notes.some((n) => /reset/.test(n)));
  assert.equal(s.joulesPerToken, 1.4);
  assert.equal(s.throttle!.basis, "violation-counters");
  assert.equal(s.throttle!.reasons[0]!.reason, "PowerViolation");
  assert.ok(Math.abs(s.throttle!.reasons[0]!.share - 7 / 20) < 1e-9);
  assert.equal(s.throttle!.powerCapped, true);
  // PCIe rates are integrated over the window: bytes.
  assert.ok(Math.abs(s.interconnect!.pcieTxBytes! - 4791810 * 20) < 1);
});

test("a malformed exposition line is a ParseError with file:line:column", () => {
  const bad = fx("t4.prom").replace('modelName="Tesla T4"', 'modelName="Tesla T4');
  assert.throws(
    () => parseDcgmExposition(bad, { file: "t4.prom", scrapeTimeS: T0 }),
    (e: unknown) => e instanceof ParseError && /^t4\.prom:1:\d+: /.test(e.message),
  );
});

test("Prometheus instant vectors (fleet): families by __name__, devices keyed by host when several", () => {
  const v: PromVectorElement[] = [
    {
      metric: { __name__: "DCGM_FI_DEV_POWER_USAGE", gpu: "0", Hostname: "a", UUID: "GPU-1" },
      value: { t: T0 * 1000, v: 300 },
    },
    {
      metric: { __name__: "DCGM_FI_DEV_POWER_USAGE", gpu: "0", Hostname: "b", UUID: "GPU-2" },
      value: { t: T0 * 1000, v: 310 },
    },
    {
      labels: {
        __name__: "DCGM_FI_PROF_DRAM_ACTIVE",
        gpu: "0",
        Hostname: "a",
        GPU_I_ID: "2",
        GPU_I_PROFILE: "3g.40gb",
      },
      value: 0.5,
      timestamp: T0,
    },
    { labels: { __name__: "DCGM_FI_DEV_GPU_UTIL", gpu: "0", Hostname: "b" }, value: 87, timestamp: T0 },
  ];
  const c = dcgmVectorsToSamples(v);
  assert.equal(c.source.kind, "prometheus");
  assert.deepEqual(c.samples.map((s) => s.device).sort(), ["a:gpu0", "a:gpu0/mig2", "b:gpu0"]);
  assert.equal(c.samples.find((s) => s.device === "b:gpu0")!.gpuBusy, 0.87);
  assert.deepEqual(c.devices.find((d) => d.key === "a:gpu0/mig2")!.mig, { profile: "3g.40gb", instanceId: "2" });
});
