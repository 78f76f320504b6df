// nvidia-smi parsers against the real captures in ../shared/telemetry/h200 and fixtures/h200-device-2026-12-04;
// variants (noheader, nounits, reordered fields, repeated headers, dmon -o DT) are made from those real files.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { ParseError } from "../../src/errors.ts";
import {
  CLOCK_EVENT_BITS,
  createSmiDmonLineParser,
  createSmiQueryLineParser,
  parseSmiDmon,
  parseSmiQ,
  parseSmiQueryCsv,
  parseSmiTimestamp,
} from "../../src/telemetry/smi.ts";
import { parseTopology } from "../../src/trace/topo.ts";

const ROOT = join(import.meta.dirname, "..", "..");
const shared = (f: string) => readFileSync(join(ROOT, "..", "shared", "telemetry", "h200", f), "utf8");
const dev = (f: string) => readFileSync(join(import.meta.dirname, "fixtures", "h200-device-2026-12-04", f), "utf8");

test("timestamps: local by default, a fixed offset on request, fractions kept", () => {
  const utc = parseSmiTimestamp("2026/12/04 16:54:22.517", 0)!;
  assert.equal(utc, Date.UTC(2026, 11, 4, 16, 54, 22) / 1000 + 0.517);
  assert.equal(parseSmiTimestamp("2026/12/04 16:54:22.517", 60), utc - 3600);
  assert.equal(
    parseSmiTimestamp("2026/12/04 16:54:22.517"),
    new Date(2026, 11, 4, 16, 54, 22).getTime() / 1000 + 0.517,
  );
  assert.equal(parseSmiTimestamp("16:54:22"), undefined);
});

test("query CSV with units: the b1 capture (clocks.current.* header spelling)", () => {
  const c = parseSmiQueryCsv(shared("smi-query-b1.csv"), { file: "b1.csv", utcOffsetMinutes: 0 });
  assert.equal(c.samples.length, 120);
  const s = c.samples[0]!;
  assert.equal(s.device, "gpu0");
  assert.equal(s.t, Date.UTC(2026, 11, 4, 16, 54, 22) / 1000 + 0.517);
  assert.equal(s.powerW, 140.71);
  assert.equal(s.powerInstantW, 148.73);
  assert.equal(s.gpuBusy, 0.12);
  assert.equal(s.memBusy, 0.09);
  assert.equal(s.smClockMHz, 1980);
  assert.equal(s.memClockMHz, 3201);
  assert.equal(s.temperatureC, 44);
  assert.equal(s.memoryUsedMiB, 16351);
  assert.equal(c.devices[0]!.pcieGen, 5);
  assert.equal(c.powerAveragingS, 1);
  assert.equal(c.intervalMs, 100);
});

test("query CSV: event-reason hex mask and Active/Not Active columns, index, limits, max clock", () => {
  const c = parseSmiQueryCsv(dev("smi-query.csv"), { utcOffsetMinutes: 0 });
  const capped = c.samples.filter((s) => (s.clockEventReasons! & CLOCK_EVENT_BITS.SwPowerCap!) !== 0);
  assert.ok(capped.length > 50, `${capped.length} capped samples`);
  assert.equal(c.samples[0]!.clockEventReasons, 0x1); // GpuIdle at the start
  assert.equal(c.devices[0]!.smClockMaxMHz, 1980);
  assert.equal(c.devices[0]!.powerLimitW, 700);
  assert.equal(c.samples[0]!.memoryTotalMiB, 143771);
  // Without the .active column, the Active/Not Active columns build the same mask.
  const lines = dev("smi-query.csv").split("\n");
  const hdr = lines[0]!.split(",").map((x) => x.trim());
  const drop = hdr.indexOf("clocks_event_reasons.active");
  const cut = (l: string) =>
    l
      .split(",")
      .filter((_, k) => k !== drop)
      .join(",");
  const c2 = parseSmiQueryCsv(lines.map(cut).join("\n"), { utcOffsetMinutes: 0 });
  for (let i = 0; i < c.samples.length; i++) {
    const want = c.samples[i]!.clockEventReasons! & ~CLOCK_EVENT_BITS.GpuIdle!;
    assert.equal(c2.samples[i]!.clockEventReasons ?? 0, want, `row ${i}`);
  }
});

test("query CSV: noheader+nounits with the field list, reordered fields, throttle_reasons spelling: same samples", () => {
  const text = shared("smi-query-b1.csv");
  const ref = parseSmiQueryCsv(text, { utcOffsetMinutes: 0 });
  const lines = text.trim().split("\n");
  const fields = lines[0]!.split(",").map((c) => c.trim().replace(/\s*\[.*\]$/, ""));
  const nounits = lines.slice(1).map((l) =>
    l
      .split(",")
      .map((c) => c.trim().replace(/ (W|%|MHz|MiB)$/, ""))
      .join(", "),
  );
  const p = createSmiQueryLineParser({ header: fields.join(","), utcOffsetMinutes: 0 });
  const streamed = nounits.flatMap((l) => p(l));
  assert.deepEqual(streamed, ref.samples);
  // Reversed column order, and clocks.sm instead of clocks.current.sm.
  const rev = (l: string) => l.split(",").reverse().join(",");
  const renamed = [rev(lines[0]!.replace("clocks.current.sm", "clocks.sm")), ...lines.slice(1).map(rev)].join("\n");
  assert.deepEqual(parseSmiQueryCsv(renamed, { utcOffsetMinutes: 0 }).samples, ref.samples);
  // The older clocks_throttle_reasons.* names map to the same bits.
  const old = dev("smi-query.csv").replaceAll("clocks_event_reasons.", "clocks_throttle_reasons.");
  assert.deepEqual(
    parseSmiQueryCsv(old, { utcOffsetMinutes: 0 }).samples.map((s) => s.clockEventReasons),
    parseSmiQueryCsv(dev("smi-query.csv"), { utcOffsetMinutes: 0 }).samples.map((s) => s.clockEventReasons),
  );
});

test("query CSV: [N/A], N/A and [Not Supported] leave the field absent; multi-GPU rows by index", () => {
  const text = [
    "timestamp, index, power.draw [W], power.draw.instant [W], clocks.sm [MHz], utilization.gpu [%]",
    "2026/12/04 16:54:22.517, 0, 140.71 W, [N/A], 1980 MHz, 12 %",
    "2026/12/04 16:54:22.517, 1, [Not Supported], N/A, 1410 MHz, [N/A]",
  ].join("\n");
  const c = parseSmiQueryCsv(text, { utcOffsetMinutes: 0 });
  assert.deepEqual(
    c.samples.map((s) => s.device),
    ["gpu0", "gpu1"],
  );
  assert.equal(c.samples[0]!.powerInstantW, undefined);
  assert.equal("powerW" in c.samples[1]!, false);
  assert.equal("gpuBusy" in c.samples[1]!, false);
  assert.equal(c.samples[1]!.smClockMHz, 1410);
});

test("the line parser: a live child's stdout, header first, one line at a time", () => {
  const lines = dev("smi-query.csv").split("\n");
  const p = createSmiQueryLineParser({ utcOffsetMinutes: 0 });
  const out = lines.flatMap((l) => p(`${l}\r`));
  assert.deepEqual(out, parseSmiQueryCsv(dev("smi-query.csv"), { utcOffsetMinutes: 0 }).samples);
  assert.equal(p.fields?.[0], "timestamp");
  assert.ok(p.devices.get("gpu0"));
});

test("query CSV: a malformed line is a ParseError at file:line:column", () => {
  const lines = shared("smi-query-b1.csv").split("\n");
  lines[5] = lines[5]!.replace("1980 MHz", "fast MHz");
  assert.throws(
    () => parseSmiQueryCsv(lines.join("\n"), { file: "b1.csv" }),
    (e: unknown) =>
      e instanceof ParseError &&
      e.position?.line === 6 &&
      e.position.column === lines[5]!.indexOf("fast") + 1 &&
      /b1\.csv:6:\d+: clocks\.sm: expected a number, got "fast MHz"/.test(e.message),
  );
  const short = shared("smi-query-b1.csv").split("\n");
  short[3] = short[3]!.split(",").slice(0, 4).join(",");
  assert.throws(
    () => parseSmiQueryCsv(short.join("\n"), { file: "b1.csv" }),
    /b1\.csv:4:\d+: expected 10 comma-separated values \(as the header\), found 4/,
  );
  // A loop stopped mid-write: its last line, short and without a newline, is dropped with a note; the same
  // line inside the file is an error.
  const whole = shared("smi-query-b1.csv");
  const stopped = parseSmiQueryCsv(`${whole}2026/12/04 16:54:34.517, 140.`, { file: "b1.csv" });
  assert.equal(stopped.samples.length, 120);
  assert.match(stopped.notes[0]!, /last line \(122\) is cut short/);
  assert.throws(() => parseSmiQueryCsv(`${whole}2026/12/04 16:54:34.517, 140.\n`, { file: "b1.csv" }), /b1\.csv:122:/);
  assert.throws(
    () => createSmiQueryLineParser({ file: "x" })("2026/12/04 16:54:22.517, 140 W"),
    /x:1:1: a data line before any header/,
  );
});

test("dmon without a time column (b1): rows 1 s apart, pviol/tviol, PCIe MB/s → bytes/s", () => {
  const c = parseSmiDmon(shared("smi-dmon-b1.txt"), { file: "dmon.txt" });
  assert.equal(c.samples.length, 12);
  assert.deepEqual(
    c.samples.map((s) => s.t),
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11],
  );
  const s = c.samples[3]!;
  assert.equal(s.powerW, 500);
  assert.equal(s.gpuBusy, 1);
  assert.equal(s.memBusy, 0.79);
  assert.equal(s.smClockMHz, 1980);
  assert.equal(s.memClockMHz, 3201);
  assert.equal(s.powerViolation, 0);
  assert.equal(s.thermalViolation, 0);
  assert.equal(s.pcieRxBps, 23 * 1048576);
  assert.match(c.notes[0]!, /no time column/);
});

test("dmon -o T (time of day), -o DT (date and time), headers repeated mid-file, '-' values", () => {
  const text = dev("smi-dmon.txt");
  const rel = parseSmiDmon(text);
  assert.equal(rel.samples[0]!.t, 0);
  assert.equal(rel.samples.at(-1)!.t, 22); // 17:46:55 → 17:47:17
  const capped = rel.samples.filter((s) => s.powerViolation === 1);
  assert.equal(capped.length, 8); // 17:47:07–17:47:15, one row (17:47:10) missing from the log
  const abs = parseSmiDmon(text, { date: "2026-12-04", utcOffsetMinutes: 0 });
  assert.equal(abs.samples[0]!.t, Date.UTC(2026, 11, 4, 17, 46, 55) / 1000);
  // -o DT: a Date column before Time; header pair repeated; a '-' cell.
  const lines = text.split("\n").filter((l) => l.trim());
  const dt = lines.map((l, i) =>
    i === 0
      ? l.replace("#Time", "#Date       Time")
      : i === 1
        ? l.replace("#HH:MM:SS", "#YYYYMMDD  HH:MM:SS")
        : ` 20261204 ${l}`,
  );
  dt.splice(10, 0, dt[0]!, dt[1]!);
  // The sm cell (7th: date, time, gpu, pwr, gtemp, mtemp, sm) of the 4th data row becomes "-".
  dt[5] = dt[5]!
    .trim()
    .split(/\s+/)
    .map((c, k) => (k === 6 ? "-" : c))
    .join("  ");
  const c = parseSmiDmon(dt.join("\n"), { utcOffsetMinutes: 0 });
  assert.deepEqual(
    c.samples.map((s) => s.t),
    abs.samples.map((s) => s.t),
  );
  assert.equal("gpuBusy" in c.samples[3]!, false);
  assert.throws(
    () => parseSmiDmon(`${lines[0]}\n${lines[1]}\n 17:46:55 0 79 36`, { file: "d" }),
    /d:3:\d+: expected 23 columns/,
  );
});

test("nvidia-smi -q: product, limits, max clocks, MIG mode, clock event reasons and counters", () => {
  const q = parseSmiQ(shared("nvidia-smi-q.txt"), { utcOffsetMinutes: 0 });
  assert.equal(q.driverVersion, "580.159.04");
  assert.equal(q.timestamp, Date.UTC(2026, 11, 4, 16, 53, 31) / 1000);
  const g = q.gpus[0]!;
  assert.equal(g.name, "NVIDIA H200");
  assert.equal(g.busId, "00000000:00:06.0");
  assert.equal(g.powerLimitW, 700);
  assert.equal(g.minPowerLimitW, 200);
  assert.equal(g.smClockMaxMHz, 1980);
  assert.equal(g.memClockMaxMHz, 3201);
  assert.equal(g.migMode, "Disabled");
  assert.equal(g.pcieGen, 5);
  const load = parseSmiQ(dev("smi-q-perf-under-load.txt")).gpus[0]!;
  assert.deepEqual(load.clockEventReasons, { active: ["SW Power Cap"], mask: 0x4 });
  assert.equal(load.clockEventCountersUs?.["SW Power Capping"], 4948451);
  assert.equal(load.smClockMHz, 1470);
  assert.equal(load.powerDrawW, 691.44);
  assert.throws(() => parseSmiQ("hello", { file: "q.txt" }), /q\.txt:1:1: not nvidia-smi -q output/);
});

test("nvidia-smi topo -m with ANSI underline escapes on a one-GPU machine parses as the link matrix", () => {
  const t = parseTopology(shared("nvidia-smi-topo-m.txt"), "topo.txt");
  assert.deepEqual(t.gpus, ["GPU0"]);
  assert.deepEqual(t.matrix, [["X"]]);
  assert.equal(t.cpuAffinity.GPU0, "0-15");
  assert.equal(t.p2p, undefined);
});

test("dmon -s t (PCIe only, no time column) from the second device capture", () => {
  const text = readFileSync(join(import.meta.dirname, "fixtures", "h200-device-2026-12-04b", "smi-dmon-t.txt"), "utf8");
  const c = parseSmiDmon(text);
  assert.equal(c.samples.length, 16);
  assert.equal(c.samples[0]!.pcieRxBps, 23 * 1048576);
  assert.equal(c.samples[0]!.pcieTxBps, 38 * 1048576);
  assert.equal(c.samples[0]!.powerW, undefined);
  assert.equal(c.samples[15]!.t, 15);
});

test("the line parsers read the real binary's live output (h200-live-2026-12-04): query loop and dmon -s t", () => {
  const live = (f: string) => readFileSync(join(import.meta.dirname, "fixtures", "h200-live-2026-12-04", f), "utf8");
  // That host ran in UTC; its clock read 1796408123.2 s at the end (clock.txt).
  const q = createSmiQueryLineParser({ utcOffsetMinutes: 0 });
  const out = live("loop.csv")
    .trim()
    .split("\n")
    .filter((l) => !l.startsWith("# rc="));
  const samples = out.flatMap((l) => q(l));
  assert.equal(samples.length, out.length - 1);
  const first = samples[0]!;
  assert.equal(first.t, Date.UTC(2026, 11, 4, 18, 15, 11, 953) / 1000);
  assert.equal(first.powerW, 81.56);
  assert.equal(first.clockEventReasons, 1);
  assert.deepEqual(q.devices.get("gpu0"), {
    key: "gpu0",
    uuid: "GPU-6fcffdc7-4d08-acc8-38d4-e0a8fd6441f0",
    name: "NVIDIA H200",
    pcieGen: 5,
    powerLimitW: 700,
    smClockMaxMHz: 1980,
  });
  // dmon -o T prints the time of day only: a live reader dates it by the day nearest to its clock.
  const d = createSmiDmonLineParser({ utcOffsetMinutes: 0, now: () => 1796408123202 });
  const rows = live("dmon-t.txt")
    .split("\n")
    .filter((l) => !l.startsWith("# rc="))
    .map((l) => d(l));
  assert.deepEqual(
    rows.map((r) => r.length),
    [0, 0, 1, 1, 1, 1, 1, 0],
  );
  assert.deepEqual(rows[2]![0], {
    t: Date.UTC(2026, 11, 4, 18, 15, 14) / 1000,
    device: "gpu0",
    pcieRxBps: 0,
    pcieTxBps: 0,
  });
  assert.equal(d.timeMode, "absolute");
  // Just after midnight, a time of day from before it belongs to yesterday.
  const late = createSmiDmonLineParser({ utcOffsetMinutes: 0, now: () => Date.UTC(2026, 11, 5, 0, 0, 1) });
  late("#Time         gpu  rxpci  txpci ");
  assert.equal(late(" 23:59:59       0     12      3 ")[0]!.t, Date.UTC(2026, 11, 4, 23, 59, 59) / 1000);
  // The same line read as a whole log (no clock, no date) counts from its first row.
  assert.equal(parseSmiDmon(live("dmon-t.txt").replace(/# rc=.*\n?/, "")).samples[4]!.t, 4);
});
