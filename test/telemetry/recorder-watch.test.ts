// telemetry watch: frames from a live source (a real exporter-format server, this machine's /proc/stat),
// the pure frame builder, and the one-line rendering for pipes.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { test } from "node:test";
import type { TelemetrySample } from "../../src/telemetry/types.ts";
import {
  formatTelemetryLine,
  formatTelemetryPanel,
  frameFrom,
  reasonNames,
  type TelemetryFrame,
  telemetryWatch,
} from "../../src/telemetry/watch.ts";
import { runCli } from "../helpers/cli.ts";

test("frameFrom: the newest value per field; power from the energy rate where no power reading", () => {
  const m = new Map<string, TelemetrySample[]>([
    [
      "gpu0",
      [
        { t: 1, device: "gpu0", powerW: 300, smClockMHz: 1980, clockEventReasons: 0 },
        { t: 2, device: "gpu0", powerW: 690, smClockMHz: 1470, clockEventReasons: 0x4 },
      ],
    ],
    [
      "package-0",
      [
        { t: 10, device: "package-0", energyJ: 100 },
        { t: 10.5, device: "package-0", energyJ: 160 },
      ],
    ],
  ]);
  const f = frameFrom(m, 5000, { kind: "nvidia-smi", why: "x" }, []);
  assert.deepEqual(f.devices[0], {
    device: "gpu0",
    t: 2,
    powerW: 690,
    powerFrom: "reading",
    smClockMHz: 1470,
    reasons: ["SW power cap"],
  });
  assert.equal(f.devices[1]!.powerW, 120);
  assert.equal(f.devices[1]!.powerFrom, "energy-rate");
  assert.deepEqual(reasonNames(0x1 | 0x4 | 0x40), ["SW power cap", "HW thermal"]);
  assert.match(
    formatTelemetryLine(f),
    /gpu0 690 W {2}sm 1470 MHz {2}limited: SW power cap \| package-0 120 W \(from energy\)/,
  );
  assert.match(formatTelemetryPanel(f, "nvidia-smi"), /^nvidia-smi {2}nvidia-smi {2}\d\d:\d\d:\d\d\n {2}gpu0 690 W/);
});

test("telemetryWatch: one frame per interval from a dcgm endpoint, stopping at --iterations", {
  timeout: 20_000,
}, async () => {
  let n = 0;
  const server = createServer((_req, res) => {
    n++;
    res
      .writeHead(200, { "content-type": "text/plain; version=0.0.4" })
      .end(
        `# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).\n# TYPE DCGM_FI_DEV_POWER_USAGE gauge\nDCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-x",device="nvidia0",modelName="NVIDIA A100-SXM4-40GB"} ${100 + n}\n`,
      );
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}/metrics`;
  try {
    const frames: TelemetryFrame[] = [];
    const count = await telemetryWatch(
      { kind: "dcgm", url, intervalMs: 100 },
      { intervalMs: 250, iterations: 3, onFrame: (f) => frames.push(f) },
    );
    assert.equal(count, 3);
    assert.equal(frames.length, 3);
    for (const f of frames) {
      assert.equal(f.source.kind, "dcgm");
      assert.equal(f.devices[0]!.device, "gpu0");
      assert.ok(f.devices[0]!.powerW! > 100);
    }
    // Each frame shows a newer reading than the one before.
    assert.ok(frames[2]!.devices[0]!.t > frames[0]!.devices[0]!.t);
  } finally {
    await new Promise<void>((r) => {
      server.close(() => r());
      server.closeAllConnections();
    });
  }
});

test("CLI: telemetry watch cpu, piped: one line per frame", { timeout: 30_000 }, async () => {
  const r = await runCli(["telemetry", "watch", "cpu@100ms", "--interval", "200ms", "--iterations", "2"]);
  assert.equal(r.code, 0, r.stderr);
  const lines = r.stdout.trim().split("\n");
  assert.equal(lines.length, 2);
  for (const l of lines) assert.match(l, /^\d\d:\d\d:\d\d {2}.*cpu busy \d+%/);
  assert.match(r.stderr, /^telemetry: \/proc\/stat; RAPL \/sys\/class\/powercap \(--telemetry cpu@100ms\)/);
  const bad = await runCli(["telemetry", "watch", "dcgm:ftp://x"]);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /telemetry watch SOURCE: dcgm: only http:\/\/ and https:\/\/ URLs are read/);
});
