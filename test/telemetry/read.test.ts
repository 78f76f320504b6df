// telemetry read: format detection, several files at once, bad input, amd-smi/rocm-smi shapes, and the real CLI
// (exit codes, --json shape, human output) on the real captures.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { InputError } from "../../src/errors.ts";
import { parseAmdSmiJson } from "../../src/telemetry/amdsmi.ts";
import { detectTelemetryFormat, telemetryRead } from "../../src/telemetry/read.ts";
import { runCli, STACK } from "../helpers/cli.ts";

const ROOT = join(import.meta.dirname, "..", "..");
const H200 = join(ROOT, "..", "shared", "telemetry", "h200");
const FX = join(import.meta.dirname, "fixtures");
const tmp = mkdtempSync(join(tmpdir(), "inferscope-telemetry-"));
after(() => rmSync(tmp, { recursive: true, force: true }));
const text = (p: string) => readFileSync(p, "utf8");

test("format detection on every real file kind; an unknown file says what was looked for", () => {
  assert.equal(detectTelemetryFormat(text(join(H200, "smi-query-b1.csv"))), "smi-query");
  assert.equal(detectTelemetryFormat(text(join(H200, "smi-dmon-b1.txt"))), "smi-dmon");
  assert.equal(detectTelemetryFormat(text(join(FX, "h200-device-2026-12-04", "smi-dmon.txt"))), "smi-dmon");
  assert.equal(detectTelemetryFormat(text(join(H200, "nvidia-smi-q.txt"))), "smi-q");
  assert.equal(detectTelemetryFormat(text(join(H200, "nvidia-smi-topo-m.txt"))), "smi-topo");
  for (const f of ["a100-mig.prom", "rtx4000ada-pod-labels.prom", "t4.prom"])
    assert.equal(detectTelemetryFormat(text(join(FX, "dcgm", f))), "dcgm", f);
  assert.equal(detectTelemetryFormat('{"card0": {"GPU use (%)": "3"}}'), "rocm-smi");
  assert.equal(detectTelemetryFormat('[{"gpu": 0, "power": {"socket_power": 90}}]'), "amd-smi");
  assert.throws(
    () => detectTelemetryFormat("hello world\n", "x.txt"),
    (e: unknown) =>
      e instanceof InputError &&
      /^x\.txt:1:1: unknown telemetry format: expected nvidia-smi --query-gpu CSV/.test(e.message),
  );
  assert.throws(
    () => detectTelemetryFormat("2026/12/04 16:54:22.517, 140.71 W\n", "n.csv"),
    /n\.csv:1:1: an nvidia-smi query CSV without a header line/,
  );
});

test("several files: -q facts fill in the query capture's devices; dmon of the same GPU is summarized on its own", async () => {
  const r = await telemetryRead(
    [
      join(H200, "smi-query-b1.csv"),
      join(H200, "smi-dmon-b1.txt"),
      join(H200, "nvidia-smi-q.txt"),
      join(H200, "nvidia-smi-topo-m.txt"),
    ],
    { tokens: 1600 },
  );
  assert.deepEqual(
    r.files.map((f) => f.format),
    ["smi-query", "smi-dmon", "smi-q", "smi-topo"],
  );
  assert.equal(r.summary!.source.kind, "nvidia-smi");
  assert.match(r.summary!.source.detail, /query CSV/);
  // The -q file gives the device maximum: the clock is now judged against 1980 MHz from the device itself.
  assert.equal(r.summary!.smClockMHz!.deviceMax, 1980);
  assert.equal(r.captures[0]!.devices[0]!.name, "NVIDIA H200");
  assert.equal(r.others.length, 1);
  assert.match(r.others[0]!.file, /smi-dmon-b1/);
  assert.deepEqual(r.topology!.gpus, ["GPU0"]);
});

test("amd-smi metric --json (list and gpu_data forms, {value, unit} and bare values) and rocm-smi --json", () => {
  const amd = parseAmdSmiJson(
    `WARNING: User is missing the following required groups: render\n${JSON.stringify({
      gpu_data: [
        {
          gpu: 0,
          usage: { gfx_activity: { value: 87, unit: "%" }, umc_activity: { value: 41, unit: "%" } },
          power: { socket_power: { value: 542, unit: "W" } },
          clock: { gfx_0: { clk: { value: 2100, unit: "MHz" }, max_clk: { value: 2100, unit: "MHz" } } },
          energy: { total_energy_consumption: { value: 123456789, unit: "uJ" } },
          temperature: { edge: { value: 52, unit: "C" }, hotspot: "N/A" },
        },
        { gpu: 1, usage: { gfx_activity: 3 }, power: { socket_power: "N/A" } },
      ],
    })}`,
    { timeS: 100, file: "amd.json" },
  );
  const [g0, g1] = amd.samples;
  assert.equal(g0!.powerW, 542);
  assert.equal(g0!.gpuBusy, 0.87);
  assert.equal(g0!.memBusy, 0.41);
  assert.equal(g0!.smClockMHz, 2100);
  assert.equal(g0!.energyJ, 123.456789);
  assert.equal(g0!.temperatureC, 52);
  assert.equal(g1!.device, "gpu1");
  assert.equal(g1!.powerW, undefined);
  assert.equal(g1!.gpuBusy, 0.03);
  const rocm = parseAmdSmiJson(
    JSON.stringify({
      card0: {
        "Average Graphics Package Power (W)": "22.0",
        "GPU use (%)": "37",
        "GPU memory use (%)": "12",
        "sclk clock speed:": "(1900Mhz)",
        "VRAM Total Used Memory (B)": "27856896",
        "Card Series": "Radeon RX 7900 XT",
      },
      system: { "Driver version": "6.7.0" },
    }),
    { timeS: 100 },
  );
  const r0 = rocm.samples[0]!;
  assert.equal(rocm.samples.length, 1);
  assert.equal(r0.powerW, 22);
  assert.equal(r0.gpuBusy, 0.37);
  assert.equal(r0.memBusy, 0.12);
  assert.equal(r0.smClockMHz, 1900);
  assert.equal(rocm.devices[0]!.name, "Radeon RX 7900 XT");
  assert.throws(() => parseAmdSmiJson('{"card0": {', { timeS: 0, file: "bad.json" }), /bad\.json:1:12: not valid JSON/);
});

test("CLI: --json on the b1 capture has the documented fields; exit 0", async () => {
  const r = await runCli(["telemetry", "read", join(H200, "smi-query-b1.csv"), "--tokens", "1600", "--json"]);
  assert.equal(r.code, 0, r.stderr);
  const j = JSON.parse(r.stdout);
  assert.equal(typeof j.window.startS, "number");
  assert.equal(typeof j.window.endS, "number");
  assert.ok(j.window.endS - j.window.startS > 7.5);
  for (const k of ["energyJ", "avgPowerW", "peakPowerW", "joulesPerToken"]) assert.equal(typeof j[k], "number", k);
  assert.equal(typeof j.smClockMHz.max, "number");
  assert.equal(typeof j.smClockMHz.median, "number");
  assert.equal(j.throttle.powerCapped, false);
  assert.equal(j.throttle.shareOfWindow, 0);
  assert.deepEqual(j.throttle.reasons, []);
  assert.ok(Array.isArray(j.unavailable));
  assert.equal(j.files[0].format, "smi-query");
});

test("CLI: a given --window (seconds from the first sample) and --peak-bandwidth; human table on the power-capped capture", async () => {
  const f = join(FX, "h200-device-2026-12-04", "smi-query.csv");
  const r = await runCli([
    "telemetry",
    "read",
    f,
    "--window",
    "11.3,20.1",
    "--utc-offset",
    "Z",
    "--peak-bandwidth",
    "4.8TB/s",
  ]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /window +2026-12-04T17:47:06\.\d+Z → 2026-12-04T17:47:15\.\d+Z \(8\.80 s, given\)/);
  assert.match(r.stdout, /throttling +POWER-CAPPED · limited 9\d\.\d % of the window · reasons: SwPowerCap/);
  assert.match(r.stdout, /SM clock +median 14\d\d .* of 1980 MHz/);
  assert.match(r.stdout, /dram: no DRAM-active readings/);
});

test("CLI: -q prints the device facts; topo -m with ANSI escapes parses", async () => {
  const r = await runCli(["telemetry", "read", join(H200, "nvidia-smi-q.txt"), join(H200, "nvidia-smi-topo-m.txt")]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /gpu0: NVIDIA H200 · Hopper · 00000000:00:06\.0 · power limit 700 W · max SM 1980 MHz/);
  assert.match(r.stdout, /topology: 1 GPU\(s\) GPU0/);
});

test("CLI: a malformed CSV line exits 2 naming file:line:column; an unknown format and a missing file exit 2", async () => {
  const lines = text(join(H200, "smi-query-b1.csv")).split("\n");
  // A decimal comma in the first power cell: one value too many on line 8.
  lines[7] = lines[7]!.replace(/, (\d+)\.(\d+) W,/, ", $1,$2 W,");
  const bad = join(tmp, "bad.csv");
  writeFileSync(bad, lines.join("\n"));
  const r = await runCli(["telemetry", "read", bad]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /bad\.csv:8:\d+: expected 10 comma-separated values \(as the header\), found 11/);
  assert.doesNotMatch(r.stderr, STACK);
  const junk = join(tmp, "junk.txt");
  writeFileSync(junk, "nothing to see\n");
  const u = await runCli(["telemetry", "read", junk]);
  assert.equal(u.code, 2);
  assert.match(u.stderr, /junk\.txt:1:1: unknown telemetry format: expected nvidia-smi --query-gpu CSV/);
  const m = await runCli(["telemetry", "read", join(tmp, "absent.csv")]);
  assert.equal(m.code, 2);
  assert.doesNotMatch(m.stderr, STACK);
  const w = await runCli(["telemetry", "read", join(H200, "smi-query-b1.csv"), "--window", "9,3"]);
  assert.equal(w.code, 2);
  assert.match(w.stderr, /--window: the end must be after the start/);
});
