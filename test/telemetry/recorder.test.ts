// The recorder: what `auto` becomes and why, marks, the window cut, errors before any measurement.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { TelemetryError } from "../../src/errors.ts";
import { cutToWindow, markedWindow, simDcgmUrl, startTelemetry } from "../../src/telemetry/recorder.ts";
import type { TelemetryCapture, TelemetrySample } from "../../src/telemetry/types.ts";
import { freePort } from "../helpers/prometheus.ts";
import { installReplayNvidiaSmi } from "./replay-bin.ts";

const dir = mkdtempSync(join(tmpdir(), "inferscope-rec-"));
const empty = mkdtempSync(join(tmpdir(), "inferscope-rec-empty-"));
installReplayNvidiaSmi(dir);
after(() => {
  rmSync(dir, { recursive: true, force: true });
  rmSync(empty, { recursive: true, force: true });
});

/** Counts samples; until(n) resolves once n have arrived. */
function counter() {
  let count = 0;
  const waits: Array<{ n: number; wake: () => void }> = [];
  return {
    onSample: (_s: TelemetrySample) => {
      count++;
      for (const w of waits.filter((x) => count >= x.n)) {
        waits.splice(waits.indexOf(w), 1);
        w.wake();
      }
    },
    get count() {
      return count;
    },
    until(n: number): Promise<void> {
      return count >= n ? Promise.resolve() : new Promise((wake) => waits.push({ n, wake }));
    },
  };
}

/** Resolves once n samples have arrived. */
function firstSamples(n: number) {
  const c = counter();
  return {
    onSample: c.onSample,
    get got() {
      return c.until(n);
    },
  };
}

test("auto: nvidia-smi on PATH is chosen and said; marks cut the window", { timeout: 30_000 }, async () => {
  const c = counter();
  const lines: string[] = [];
  const rec = await startTelemetry(
    { kind: "auto", intervalMs: 50 },
    { path: dir, onSample: c.onSample, onProgress: (l) => lines.push(l) },
  );
  assert.equal(rec.resolved.kind, "nvidia-smi");
  assert.equal(rec.resolved.why, `auto: nvidia-smi found at ${join(dir, "nvidia-smi")}`);
  await c.until(3);
  rec.mark("measure-start");
  // Two more readings inside the window.
  await c.until(c.count + 2);
  rec.mark("measure-end");
  const out = await rec.stop();
  assert.equal(out.capture!.source.kind, "nvidia-smi");
  assert.match(lines[0]!, /^telemetry: .*nvidia-smi --query-gpu=.* \(auto: nvidia-smi found at /);
  const win = markedWindow(out.marks)!;
  assert.ok(win.endS > win.startS);
  const cut = cutToWindow(out.capture!, win.startS, win.endS);
  const inside = cut.samples.filter((s) => s.t >= win.startS && s.t <= win.endS);
  assert.ok(inside.length >= 1);
  // One reading on each side, for integrating up to the edges; power.draw being a 1 s trailing average, the
  // readings of the second before the window too.
  assert.equal(out.capture!.powerAveragingS, 1);
  const lead = out.capture!.samples.filter((s) => s.t >= win.startS - 1 && s.t < win.startS).length;
  assert.ok(cut.samples[0]!.t < win.startS);
  assert.ok(cut.samples.length <= inside.length + lead + 2);
});

function dcgmServer(path: string) {
  const body =
    '# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).\n# TYPE DCGM_FI_DEV_POWER_USAGE gauge\nDCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-sim",device="nvidia0",modelName="sim"} 412.5\n';
  const server = createServer((req, res) => {
    if (req.url === path) res.writeHead(200, { "content-type": "text/plain; version=0.0.4" }).end(body);
    else res.writeHead(404).end();
  });
  return new Promise<{ url: string; close: () => Promise<void> }>((resolve) =>
    server.listen(0, "127.0.0.1", () =>
      resolve({
        url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
        close: () =>
          new Promise<void>((r) => {
            server.close(() => r());
            server.closeAllConnections();
          }),
      }),
    ),
  );
}

test("auto: no nvidia-smi, the embedded sim → its dcgm endpoint, recorded as the sim", {
  timeout: 20_000,
}, async () => {
  const sim = await dcgmServer("/dcgm/metrics");
  try {
    const w = firstSamples(2);
    const rec = await startTelemetry(
      { kind: "auto", intervalMs: 100 },
      { path: empty, simUrl: sim.url, onSample: w.onSample },
    );
    assert.equal(rec.resolved.kind, "sim");
    assert.match(rec.resolved.why, /^auto: the target is the embedded sim: .*\/dcgm\/metrics$/);
    await w.got;
    const out = await rec.stop();
    assert.deepEqual(out.capture!.source, { kind: "sim", detail: simDcgmUrl(sim.url) });
    assert.equal(out.capture!.samples[0]!.powerW, 412.5);
  } finally {
    await sim.close();
  }
});

test("auto: nothing to read → none, saying why (and what each candidate said)", async () => {
  const rec = await startTelemetry({ kind: "auto" }, { path: empty });
  assert.equal(rec.resolved.kind, "none");
  assert.match(rec.resolved.why, /no nvidia-smi on PATH and the target is not the embedded sim; give --telemetry/);
  assert.deepEqual(await rec.stop(), { resolved: rec.resolved, capture: null, marks: [] });
  const port = await freePort();
  const dead = await startTelemetry({ kind: "auto" }, { path: empty, simUrl: `http://127.0.0.1:${port}` });
  assert.equal(dead.resolved.kind, "none");
  assert.match(dead.resolved.why, /no telemetry source could start \(sim: .*connection refused/);
});

test("auto: nvidia-smi present but failing (no driver) is skipped, and said", { timeout: 20_000 }, async () => {
  process.env.REPLAY_NO_DRIVER = "1";
  try {
    const rec = await startTelemetry({ kind: "auto" }, { path: dir });
    assert.equal(rec.resolved.kind, "none");
    assert.match(
      rec.resolved.why,
      /\(nvidia-smi: .*NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver/,
    );
  } finally {
    delete process.env.REPLAY_NO_DRIVER;
  }
});

test("auto on a local target without a GPU tool: the cpu source", { timeout: 20_000 }, async () => {
  const rec = await startTelemetry({ kind: "auto", intervalMs: 100 }, { path: empty, localTarget: true });
  assert.equal(rec.resolved.kind, "cpu");
  const out = await rec.stop();
  assert.equal(out.capture!.source.kind, "cpu");
});

test("an explicit source that cannot start throws (exit 3) before any measurement", async () => {
  await assert.rejects(
    startTelemetry({ kind: "nvidia-smi" }, { sources: { nvidiaSmi: { path: empty } } }),
    (e: unknown) => e instanceof TelemetryError && e.exitCode === 3,
  );
  const port = await freePort();
  await assert.rejects(
    startTelemetry({ kind: "dcgm", url: `http://127.0.0.1:${port}/metrics` }),
    (e: unknown) => e instanceof TelemetryError && /connection refused/.test(e.message),
  );
});

test("an aborted signal stops the source; stop() still returns what was recorded", { timeout: 30_000 }, async () => {
  const ac = new AbortController();
  const w = firstSamples(2);
  const rec = await startTelemetry(
    { kind: "nvidia-smi", intervalMs: 50 },
    {
      signal: ac.signal,
      onSample: w.onSample,
      sources: { nvidiaSmi: { path: dir } },
    },
  );
  await w.got;
  ac.abort();
  const out = await rec.stop();
  assert.ok(out.capture!.samples.length >= 2);
  assert.deepEqual(out.capture!.notes, []);
});

test("cutToWindow keeps the window and one reading each side, per device", () => {
  const s = (t: number, device: string): TelemetrySample => ({ t, device, powerW: t });
  const cap: TelemetryCapture = {
    source: { kind: "file", detail: "x" },
    devices: [],
    samples: [s(1, "a"), s(2, "a"), s(3, "a"), s(4, "a"), s(5, "a"), s(6, "a"), s(2.5, "b"), s(7, "b")],
    notes: [],
    unavailable: [],
  };
  const cut = cutToWindow(cap, 3, 4.5);
  assert.deepEqual(
    cut.samples.map((x) => `${x.device}${x.t}`),
    ["a2", "b2.5", "a3", "a4", "a5", "b7"],
  );
  // Power as a 1.5 s trailing average: the readings of that span before the window stay, and one before it.
  assert.deepEqual(
    cutToWindow({ ...cap, powerAveragingS: 1.5 }, 3, 4.5).samples.map((x) => `${x.device}${x.t}`),
    ["a1", "a2", "b2.5", "a3", "a4", "a5", "b7"],
  );
  assert.equal(markedWindow([{ name: "measure-end", t: 1 }]), null);
  assert.deepEqual(
    markedWindow([
      { name: "measure-start", t: 1 },
      { name: "measure-end", t: 3 },
    ]),
    { startS: 1, endS: 3 },
  );
});
