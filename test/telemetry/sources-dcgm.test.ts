// The dcgm and prometheus sources against a real HTTP server on 127.0.0.1 serving dcgm-exporter's text
// format (families, HELP texts, units and labels as the exporter writes them; the energy counter moves
// 1 J per scrape so every reading is traceable), and a real Prometheus scraping it.
import assert from "node:assert/strict";
import { createServer as createHttpServer, type Server } from "node:http";
import { createServer as createNetServer, type Socket } from "node:net";
import { after, before, test } from "node:test";
import { TelemetryError } from "../../src/errors.ts";
import { PrometheusClient } from "../../src/metrics/prometheus.ts";
import { dcgmSource } from "../../src/telemetry/sources/dcgm.ts";
import { prometheusSource } from "../../src/telemetry/sources/prometheus.ts";
import { freePort, type PrometheusHandle, prometheusSkipReason, startPrometheus } from "../helpers/prometheus.ts";
import { collector } from "./collect.ts";

const GPUS = [
  { gpu: "0", uuid: "GPU-1c2b08c1-f602-d290-4519-863bc0c96079", bus: "00000000:30:00.0" },
  { gpu: "1", uuid: "GPU-72ad4d20-cfed-f08d-c894-f620962ca3e4", bus: "00000000:B4:00.0" },
];
const E0_MJ = 123_456_789;

/** dcgm-exporter's exposition for scrape number n (0-based). */
function exposition(n: number): string {
  const fams: Array<[string, "gauge" | "counter", string, (g: number) => number]> = [
    ["DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", () => 1980 - (n % 3) * 15],
    ["DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).", () => 2619],
    ["DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", (g) => 40 + g],
    ["DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", (g) => 310.5 + g],
    [
      "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
      "counter",
      "Total energy consumption since boot (in mJ).",
      (g) => E0_MJ + g * 1_000_000 + n * 1000,
    ],
    ["DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", () => 97],
    ["DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).", () => 88],
    ["DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", () => 70123],
    [
      "DCGM_FI_PROF_DRAM_ACTIVE",
      "gauge",
      "Ratio of cycles the device memory interface is active sending or receiving data.",
      () => 0.612,
    ],
  ];
  const lines: string[] = [];
  for (const [name, type, help, v] of fams) {
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
    for (const [i, g] of GPUS.entries())
      lines.push(
        `${name}{gpu="${g.gpu}",UUID="${g.uuid}",pci_bus_id="${g.bus}",device="nvidia${g.gpu}",modelName="NVIDIA H100 80GB HBM3",Hostname="node-a",DCGM_FI_DRIVER_VERSION="535.183.01"} ${v(i)}`,
      );
  }
  return `${lines.join("\n")}\n`;
}

interface Exporter {
  port: number;
  url: string;
  /** Scrape numbers served, in order. */
  served: number[];
  server: Server;
  close(): Promise<void>;
}

async function startExporter(port = 0, path = "/metrics"): Promise<Exporter> {
  const served: number[] = [];
  let n = 0;
  const server = createHttpServer((req, res) => {
    if (req.url !== path) {
      res.writeHead(404).end("not found\n");
      return;
    }
    const k = n++;
    res.writeHead(200, { "content-type": "text/plain; version=0.0.4; charset=utf-8" });
    res.end(exposition(k), () => served.push(k));
  });
  await new Promise<void>((r) => server.listen(port, "127.0.0.1", r));
  const p = (server.address() as { port: number }).port;
  return {
    port: p,
    url: `http://127.0.0.1:${p}${path}`,
    served,
    server,
    close: () =>
      new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      }),
  };
}

test("dcgm: scrapes every interval; readings keep their units (mJ → J, % → ratio)", { timeout: 30_000 }, async () => {
  const ex = await startExporter();
  try {
    const c = collector();
    const h = await dcgmSource(ex.url).start({ intervalMs: 100, onSample: c.onSample });
    await c.until(() => c.samples.length >= 6, "3 scrapes");
    const cap = await h.stop();
    assert.equal(cap.source.kind, "dcgm");
    assert.equal(cap.source.detail, ex.url);
    const g0 = cap.samples.filter((s) => s.device === "gpu0");
    const g1 = cap.samples.filter((s) => s.device === "gpu1");
    assert.equal(g0.length, g1.length);
    // No scrape lost, none doubled: the energies are exactly those served, in order.
    assert.deepEqual(
      g0.map((s) => s.energyJ),
      ex.served.slice(0, g0.length).map((k) => (E0_MJ + k * 1000) / 1000),
    );
    const s = g1[0]!;
    assert.equal(s.powerW, 311.5);
    assert.equal(s.gpuBusy, 0.97);
    assert.equal(s.memBusy, 0.88);
    assert.equal(s.dramActive, 0.612);
    assert.equal(s.memoryUsedMiB, 70123);
    assert.equal(s.temperatureC, 41);
    assert.deepEqual(
      cap.devices.map((d) => [d.key, d.uuid, d.name]),
      GPUS.map((g) => [`gpu${g.gpu}`, g.uuid, "NVIDIA H100 80GB HBM3"]),
    );
    assert.deepEqual(cap.notes, []);
    // What the families served cannot give, as the file parser says it (one list for both).
    assert.deepEqual(
      cap.unavailable.map((u) => u.field),
      ["interconnect", "throttle"],
    );
  } finally {
    await ex.close();
  }
});

test("dcgm: an exporter down mid-run leaves a gap note, and recording resumes with nothing lost", {
  timeout: 30_000,
}, async () => {
  const ex = await startExporter();
  try {
    const c = collector();
    const progress: string[] = [];
    const h = await dcgmSource(ex.url).start({
      intervalMs: 100,
      onSample: c.onSample,
      onProgress: (l) => progress.push(l),
    });
    await c.until(() => c.samples.length >= 4, "2 scrapes");
    // Down: the port answers and drops every connection (counted, so the test waits for two
    // failed scrapes, not for a duration).
    await ex.close();
    let attempts = 0;
    let twoFailed: () => void = () => {};
    const failed = new Promise<void>((r) => (twoFailed = r));
    const down = createNetServer((sock: Socket) => {
      sock.destroy();
      if (++attempts === 2) twoFailed();
    });
    await new Promise<void>((r) => down.listen(ex.port, "127.0.0.1", r));
    await failed;
    await new Promise<void>((r) => down.close(() => r()));
    const before = c.samples.length;
    await new Promise<void>((r) => ex.server.listen(ex.port, "127.0.0.1", r));
    await c.until(() => c.samples.length >= before + 4, "2 scrapes after the gap");
    const cap = await h.stop();
    const note = cap.notes.find((n) => /unreachable/.test(n));
    assert.ok(note, JSON.stringify(cap.notes));
    assert.match(
      note,
      new RegExp(
        `^exporter ${ex.url.replace(/[.]/g, "\\.")} unreachable \\d\\d:\\d\\d:\\d\\d\\.\\d{3}–\\d\\d:\\d\\d:\\d\\d\\.\\d{3}: (\\d+) samples missing \\(.+\\); recording continued$`,
      ),
    );
    // Said at once when the gap opened, for a person watching; kept in the capture only as the note.
    assert.equal(progress.length, 1);
    assert.match(progress[0]!, /unreachable since \d\d:\d\d:\d\d\.\d{3} \(.+\); still trying every interval$/);
    const missing = Number(/: (\d+) samples missing/.exec(note)![1]);
    assert.ok(missing >= 2, note);
    // Every response the exporter served before and after the gap is in the capture.
    const g0 = cap.samples.filter((s) => s.device === "gpu0").map((s) => s.energyJ);
    assert.deepEqual(
      g0,
      ex.served.slice(0, g0.length).map((k) => (E0_MJ + k * 1000) / 1000),
    );
    assert.ok(ex.served.length - g0.length <= 1, "at most the scrape in flight at stop is not taken");
  } finally {
    await ex.close().catch(() => {});
  }
});

test("dcgm: an exporter down at start is an exit-3 error before anything is measured", async () => {
  const port = await freePort();
  await assert.rejects(
    dcgmSource(`http://127.0.0.1:${port}/metrics`).start({ intervalMs: 100 }),
    (e: unknown) =>
      e instanceof TelemetryError &&
      e.exitCode === 3 &&
      /the exporter did not answer a first scrape: connection refused; nothing was measured/.test(e.message),
  );
});

test("dcgm: an endpoint without DCGM families is refused at start", async () => {
  const server = createHttpServer((_req, res) => {
    res
      .writeHead(200, { "content-type": "text/plain" })
      .end("# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 1\n");
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}/metrics`;
  try {
    await assert.rejects(
      dcgmSource(url).start({ intervalMs: 100 }),
      (e: unknown) => e instanceof TelemetryError && /serves no DCGM_FI_\* series/.test(e.message),
    );
  } finally {
    await new Promise<void>((r) => server.close(() => r()));
  }
});

// ---------------------------------------------------------------- through a real Prometheus

const skip = prometheusSkipReason();
if (skip) console.warn(skip);
let prom: PrometheusHandle;
let promEx: Exporter;

before(async () => {
  if (skip) return;
  promEx = await startExporter();
  prom = await startPrometheus({ targets: [{ job: "dcgm", target: `127.0.0.1:${promEx.port}` }] });
  const client = new PrometheusClient(prom.url);
  try {
    const deadline = Date.now() + 20_000;
    for (;;) {
      const r = await client.instant("count_over_time(DCGM_FI_DEV_SM_CLOCK[30s])", Date.now());
      if ((r[0]?.value.v ?? 0) >= 2) break;
      if (Date.now() > deadline) throw new Error(`Prometheus did not scrape the exporter in time:\n${prom.log()}`);
      await new Promise((res) => setTimeout(res, 200));
    }
  } finally {
    await client.close();
  }
});

after(async () => {
  await prom?.stop();
  await promEx?.close();
});

test("prometheus: every stored scrape once, at Prometheus' scrape timestamps", { skip, timeout: 40_000 }, async () => {
  const c = collector();
  const startS = Date.now() / 1000;
  const h = await prometheusSource(prom.url).start({ intervalMs: 500, onSample: c.onSample });
  // Two scrapes Prometheus took after we started.
  await c.until(() => new Set(c.samples.filter((s) => s.t > startS).map((s) => s.t)).size >= 2, "2 new scrapes");
  const cap = await h.stop();
  assert.equal(cap.source.kind, "prometheus");
  assert.deepEqual(
    cap.devices.map((d) => d.key),
    ["gpu0", "gpu1"],
  );
  const keys = cap.samples.map((s) => `${s.device}@${s.t}`);
  assert.equal(new Set(keys).size, keys.length, "a reading taken twice");
  // Exactly what Prometheus stored over the span we covered.
  const client = new PrometheusClient(prom.url);
  try {
    const first = cap.samples[0]!.t;
    const last = cap.samples.at(-1)!.t;
    const spanMs = Math.ceil((last - first) * 1000) + 1;
    const raw = await client.rawRange(`DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="0"}[${spanMs}ms]`, last * 1000);
    const stored = raw[0]!.value.filter((p) => p.t / 1000 >= first).map((p) => [p.t / 1000, p.v / 1000]);
    const ours = cap.samples.filter((s) => s.device === "gpu0").map((s) => [s.t, s.energyJ]);
    assert.deepEqual(ours, stored);
  } finally {
    await client.close();
  }
  assert.equal(cap.samples.find((s) => s.device === "gpu1")!.dramActive, 0.612);
});

test("prometheus: a server that cannot be reached is an exit-3 error at start", async () => {
  const port = await freePort();
  await assert.rejects(
    prometheusSource(`http://127.0.0.1:${port}`).start({ intervalMs: 500 }),
    (e: unknown) =>
      e instanceof TelemetryError &&
      e.exitCode === 3 &&
      /--telemetry prometheus:.*cannot reach Prometheus at .*connection refused; nothing was measured/.test(e.message),
  );
});

test("prometheus: no DCGM series there is an exit-3 error at start", { skip, timeout: 20_000 }, async () => {
  // A Prometheus that scrapes nothing.
  const empty = await startPrometheus({ targets: [] });
  try {
    await assert.rejects(
      prometheusSource(empty.url).start({ intervalMs: 500 }),
      (e: unknown) => e instanceof TelemetryError && /holds no DCGM_FI_\* series/.test(e.message),
    );
  } finally {
    await empty.stop();
  }
});
