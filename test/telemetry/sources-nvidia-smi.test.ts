// The nvidia-smi source against replay-nvidia-smi.mjs, which stands in for the binary's I/O (no GPU here
// or in CI): it replays a real H200 capture at the -lms pace, knows exactly that driver's field names and
// refuses others with nvidia-smi's own words. Each test runs real processes and checks what a user gets.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { TelemetryError } from "../../src/errors.ts";
import { telemetryRead } from "../../src/telemetry/read.ts";
import { cutToWindow } from "../../src/telemetry/recorder.ts";
import { liveTelemetryGroups } from "../../src/telemetry/sources/common.ts";
import { nvidiaSmiSource } from "../../src/telemetry/sources/nvidia-smi.ts";
import { summarizeTelemetry } from "../../src/telemetry/summary.ts";
import type { TelemetrySample } from "../../src/telemetry/types.ts";
import { alive, ROOT, runCli, STACK } from "../helpers/cli.ts";
import { collector } from "./collect.ts";
import { installReplayNvidiaSmi } from "./replay-bin.ts";

// nvidia-smi stamps local time without a zone: run under a zone far from UTC (−3:30) so a reading
// taken as UTC would land hours away from the wall clock.
process.env.TZ = "America/St_Johns";

const FIXTURE = join(ROOT, "test", "telemetry", "fixtures", "h200-device-2026-12-04");
const dir = mkdtempSync(join(tmpdir(), "inferscope-smi-"));
const bin = installReplayNvidiaSmi(dir);
const empty = mkdtempSync(join(tmpdir(), "inferscope-nopath-"));
after(() => {
  rmSync(dir, { recursive: true, force: true });
  rmSync(empty, { recursive: true, force: true });
});

// The capture's power.draw column, in row order: what the replay serves.
const rows = readFileSync(join(FIXTURE, "smi-query.csv"), "utf8").trim().split("\n").slice(1);
const capturedPower = rows.map((r) => Number(r.split(", ")[2]!.replace(" W", "")));

function withEnv<T>(env: Record<string, string>, fn: () => Promise<T>): Promise<T> {
  for (const [k, v] of Object.entries(env)) process.env[k] = v;
  return fn().finally(() => {
    for (const k of Object.keys(env)) delete process.env[k];
  });
}

test("records the replayed rows in order, stamped with local time converted to UTC", { timeout: 30_000 }, async () => {
  assert.ok(new Date().getTimezoneOffset() >= 150, "the test zone is in effect (UTC−2:30 or −3:30)");
  const w = collector();
  const before = Date.now() / 1000;
  const h = await nvidiaSmiSource({ binary: bin, dmon: false }).start({
    intervalMs: 50,
    onSample: w.onSample,
    onNote: w.onNote,
  });
  await w.until(() => w.samples.length >= 6, "6 samples");
  const cap = await h.stop();
  const afterS = Date.now() / 1000;
  assert.equal(cap.source.kind, "nvidia-smi");
  assert.match(cap.source.detail, /--format=csv,nounits -lms 50$/);
  assert.ok(cap.samples.length >= 6);
  // Every value comes from the capture, in its order: power.draw of rows 0, 1, 2, …
  assert.deepEqual(
    cap.samples.map((s) => s.powerW),
    capturedPower.slice(0, cap.samples.length),
  );
  const s0 = cap.samples[0]!;
  assert.equal(s0.device, "gpu0");
  assert.equal(s0.powerInstantW, 79.48);
  assert.equal(s0.smClockMHz, 345);
  assert.equal(s0.smClockMaxMHz, 1980);
  assert.equal(s0.memClockMHz, 3201);
  assert.equal(s0.clockEventReasons, 1); // 0x…01: GPU idle
  assert.equal(s0.memoryTotalMiB, 143771);
  assert.equal(cap.samples[4]!.gpuBusy, 0.18);
  // Stamped between start and stop (ms resolution): a zone mistake would be off by 3.5 hours.
  for (const s of cap.samples) assert.ok(s.t >= before - 0.002 && s.t <= afterS + 0.002, `t ${s.t} outside the run`);
  for (let i = 1; i < cap.samples.length; i++) assert.ok(cap.samples[i]!.t >= cap.samples[i - 1]!.t);
  assert.deepEqual(cap.devices, [
    {
      key: "gpu0",
      uuid: "GPU-8be02578-5513-af80-f7ed-5a3b4a7ae410",
      name: "NVIDIA H200",
      pcieGen: 5,
      powerLimitW: 700,
      smClockMaxMHz: 1980,
    },
  ]);
  assert.ok(cap.unavailable.some((u) => u.field === "energyJ" && /integrated from power/.test(u.why)));
  // What the summarizer needs to integrate power.draw: its 1 s trailing average and nvidia-smi's stated ±5 W.
  assert.equal(cap.powerAveragingS, 1);
  assert.equal(cap.powerAccuracyW, 5);
  assert.deepEqual(cap.notes, []);
  assert.deepEqual(liveTelemetryGroups(), []);
});

test("an older driver: clocks_throttle_reasons.* asked instead, power.draw.instant dropped and said", {
  timeout: 30_000,
}, async () => {
  await withEnv({ REPLAY_UNKNOWN_FIELDS: "power.draw.instant,clocks_event_reasons.active" }, async () => {
    const w = collector();
    const h = await nvidiaSmiSource({ binary: bin, dmon: false }).start({ intervalMs: 50, onSample: w.onSample });
    await w.until(() => w.samples.length >= 2, "2 samples");
    const cap = await h.stop();
    assert.match(cap.source.detail, /clocks_throttle_reasons\.active/);
    assert.doesNotMatch(cap.source.detail, /power\.draw\.instant/);
    assert.equal(cap.samples[0]!.clockEventReasons, 1);
    assert.equal(cap.samples[0]!.powerInstantW, undefined);
    const u = cap.unavailable.find((x) => x.field === "powerInstantW");
    assert.ok(u, JSON.stringify(cap.unavailable));
    assert.match(u.why, /power\.draw\.instant: not a valid --query-gpu field/);
    assert.ok(cap.notes.some((n) => /clocks_event_reasons\.active: .*clocks_throttle_reasons\.active/.test(n)));
  });
});

test("nvidia-smi missing: exit-3 TelemetryError at start, naming the tool", async () => {
  await assert.rejects(
    nvidiaSmiSource({ path: empty }).start({ intervalMs: 100 }),
    (e: unknown) =>
      e instanceof TelemetryError &&
      e.exitCode === 3 &&
      e.code === "E_TELEMETRY" &&
      /--telemetry nvidia-smi: nvidia-smi is not on PATH/.test(e.message),
  );
});

test("nvidia-smi present but the driver not loaded: exit-3 error at start with nvidia-smi's own words", async () => {
  await withEnv({ REPLAY_NO_DRIVER: "1" }, async () => {
    await assert.rejects(
      nvidiaSmiSource({ binary: bin, dmon: false }).start({ intervalMs: 100 }),
      (e: unknown) =>
        e instanceof TelemetryError &&
        e.exitCode === 3 &&
        /--telemetry nvidia-smi: .*nvidia-smi failed \(exit 9\): NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver/.test(
          e.message,
        ),
    );
  });
  assert.deepEqual(liveTelemetryGroups(), []);
});

test("nvidia-smi dying mid-run: the samples so far are kept and the exit is noted", { timeout: 30_000 }, async () => {
  await withEnv({ REPLAY_EXIT_AFTER: "4" }, async () => {
    const w = collector();
    const h = await nvidiaSmiSource({ binary: bin, dmon: false }).start({
      intervalMs: 50,
      onSample: w.onSample,
      onNote: w.onNote,
    });
    await w.until(() => w.notes.some((n) => /exited/.test(n)), "the exit note");
    const cap = await h.stop();
    assert.equal(cap.samples.length, 4);
    assert.deepEqual(
      cap.samples.map((s) => s.powerW),
      capturedPower.slice(0, 4),
    );
    const note = cap.notes.find((n) => /exited/.test(n))!;
    assert.match(note, /^nvidia-smi exited \(code 1\) at \d\d:\d\d:\d\d\.\d{3} after 4 samples: .*REPLAY_EXIT_AFTER/);
    assert.match(note, /samples so far are kept/);
  });
});

test("a malformed line is skipped with a note; the rows after it are kept", { timeout: 30_000 }, async () => {
  await withEnv({ REPLAY_MALFORMED_AT: "2" }, async () => {
    const w = collector();
    const h = await nvidiaSmiSource({ binary: bin, dmon: false }).start({ intervalMs: 50, onSample: w.onSample });
    await w.until(() => w.samples.length >= 4, "4 samples");
    const cap = await h.stop();
    // Row 2 is cut short; rows 0, 1, 3, 4, … arrive.
    assert.deepEqual(
      cap.samples.slice(0, 3).map((s) => s.powerW),
      [capturedPower[0], capturedPower[1], capturedPower[3]],
    );
    assert.ok(
      cap.notes.some((n) =>
        /^nvidia-smi: 1 malformed line skipped \(first: line 4: expected 17 comma-separated values \(as the header\), found \d+: "/.test(
          n,
        ),
      ),
      cap.notes.join("\n"),
    );
  });
});

test("a last line cut short when nvidia-smi is stopped is dropped with a note, not counted as malformed", {
  timeout: 30_000,
}, async () => {
  await withEnv({ REPLAY_COUNT: "3", REPLAY_CUT_LAST: "1" }, async () => {
    const w = collector();
    const h = await nvidiaSmiSource({ binary: bin, dmon: false }).start({ intervalMs: 50, onSample: w.onSample });
    await w.until(() => w.samples.length >= 3, "3 samples");
    const cap = await h.stop();
    assert.deepEqual(
      cap.samples.map((s) => s.powerW),
      capturedPower.slice(0, 3),
    );
    assert.deepEqual(
      cap.notes.map((n) => n.replace(/\("[^"]*"\)$/, "(…)")),
      ["nvidia-smi: its last line was cut short when it stopped (no newline): skipped (…)"],
    );
  });
});

for (const how of ["stop", "abort"] as const) {
  test(`${how} kills nvidia-smi's whole process group: nothing is orphaned`, { timeout: 30_000 }, async () => {
    const pidFile = join(dir, `grandchild-${how}`);
    await withEnv({ REPLAY_GRANDCHILD_PIDFILE: pidFile }, async () => {
      const w = collector();
      const ac = new AbortController();
      const h = await nvidiaSmiSource({ binary: bin, dmon: false }).start({
        intervalMs: 50,
        onSample: w.onSample,
        signal: ac.signal,
      });
      await w.until(() => w.samples.length >= 2, "2 samples");
      const groups = liveTelemetryGroups();
      assert.equal(groups.length, 1);
      const pgid = groups[0]!;
      const grandchild = Number(readFileSync(pidFile, "utf8"));
      assert.ok(alive(pgid) && alive(grandchild));
      if (how === "abort") ac.abort();
      const cap = await h.stop();
      assert.ok(cap.samples.length >= 2);
      // The group leader is our child and reaped; the grandchild is SIGKILLed with the group and reaped
      // by init shortly after — bounded wait on a process that is not ours to await.
      const deadline = Date.now() + 5000;
      while ((alive(pgid) || alive(grandchild)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      assert.ok(!alive(pgid), "nvidia-smi still running");
      // nvidia-smi was our child and is reaped: gone entirely. The grandchild is dead; where PID 1 does
      // not reap orphans (a container) it may linger as a zombie, which alive() counts as dead.
      assert.throws(() => process.kill(pgid, 0), /ESRCH/);
      assert.ok(!alive(grandchild), "a process in its group still running");
      assert.deepEqual(liveTelemetryGroups(), []);
    });
  });
}

test("CLI: telemetry watch nvidia-smi prints frames; without nvidia-smi it exits 3 with one clear line", {
  timeout: 60_000,
}, async () => {
  const ok = await runCli(
    ["telemetry", "watch", "nvidia-smi@50ms", "--interval", "200ms", "--iterations", "3", "--json"],
    {
      env: { PATH: `${dir}:${process.env.PATH}` },
    },
  );
  assert.equal(ok.code, 0, ok.stderr);
  const frames = ok.stdout
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));
  assert.equal(frames.length, 3);
  for (const f of frames) {
    assert.equal(f.source.kind, "nvidia-smi");
    assert.equal(f.devices[0].device, "gpu0");
  }
  // dmon's first PCIe row can come before the query loop's first row; power is there by the last frame.
  assert.equal(typeof frames[2].devices[0].powerW, "number");
  assert.deepEqual(ok.leftovers, []);
  const missing = await runCli(["telemetry", "watch", "nvidia-smi", "--iterations", "1"], {
    env: { PATH: empty },
  });
  assert.equal(missing.code, 3, missing.stderr);
  assert.match(missing.stderr, /nvidia-smi is not on PATH/);
  assert.doesNotMatch(missing.stderr, STACK);
});

test("our process exiting (any path) kills nvidia-smi's group", { timeout: 30_000 }, async () => {
  // A separate Node process starts the source and calls process.exit without stopping it. nvidia-smi
  // itself would die of EPIPE on its next write anyway; the grandchild in its group (which never
  // writes) dies only by the exit hook's group kill.
  const pidFile = join(dir, "grandchild-exit");
  const code = `
    import { nvidiaSmiSource } from ${JSON.stringify(join(ROOT, "src", "telemetry", "sources", "nvidia-smi.ts"))};
    import { liveTelemetryGroups } from ${JSON.stringify(join(ROOT, "src", "telemetry", "sources", "common.ts"))};
    await nvidiaSmiSource({ binary: ${JSON.stringify(bin)} }).start({
      intervalMs: 50,
      onSample: () => { process.stdout.write(String(liveTelemetryGroups()[0]) + "\\n"); process.exit(0); },
    });
  `;
  const child = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", code], {
    cwd: ROOT,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, REPLAY_GRANDCHILD_PIDFILE: pidFile },
  });
  let out = "";
  let err = "";
  child.stdout.setEncoding("utf8").on("data", (d: string) => (out += d));
  child.stderr.setEncoding("utf8").on("data", (d: string) => (err += d));
  const [exitCode] = await once(child, "exit");
  assert.equal(exitCode, 0, err);
  const pgid = Number(out.trim().split("\n")[0]);
  assert.ok(pgid > 0, out);
  // SIGKILLed by the exit hook; reaped by init (or a zombie where init does not reap: alive() says dead).
  const grandchild = Number(readFileSync(pidFile, "utf8"));
  const deadline = Date.now() + 5000;
  while ((alive(pgid) || alive(grandchild)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  assert.ok(!alive(pgid), "nvidia-smi outlived the process that started it");
  assert.ok(!alive(grandchild), "a process in nvidia-smi's group outlived the process that started it");
});

test("dmon -s t beside the query loop: PCIe MB/s as bytes/s per GPU; both groups stopped", {
  timeout: 30_000,
}, async () => {
  const w = collector();
  const isPcie = (s: TelemetrySample) => s.pcieRxBps !== undefined || s.pcieTxBps !== undefined;
  const before = Date.now() / 1000;
  const h = await nvidiaSmiSource({ binary: bin }).start({ intervalMs: 100, onSample: w.onSample, onNote: w.onNote });
  await w.until(() => w.samples.filter(isPcie).length >= 2, "2 dmon readings");
  const groups = liveTelemetryGroups();
  assert.equal(groups.length, 2);
  const cap = await h.stop();
  assert.match(cap.source.detail, /-lms 100; .*nvidia-smi dmon -s t -d 1 -o T$/);
  const pcie = cap.samples.filter(isPcie);
  // The capture's first two dmon rows (rxpci, txpci MB/s, dmon's MB being 2^20 B): 20, 29 then 0, 0.
  assert.deepEqual(
    pcie.slice(0, 2).map((s) => [s.device, s.pcieRxBps, s.pcieTxBps]),
    [
      ["gpu0", 20 * 1048576, 29 * 1048576],
      ["gpu0", 0, 0],
    ],
  );
  // dmon -o T has whole seconds of local time: within a second of the run.
  for (const s of pcie) assert.ok(s.t >= Math.floor(before) - 1 && s.t <= Date.now() / 1000 + 1, String(s.t));
  assert.ok(!cap.unavailable.some((u) => u.field === "pcieTxBps"));
  assert.deepEqual(cap.notes, []);
  for (const g of groups) assert.throws(() => process.kill(g, 0), /ESRCH/);
  assert.deepEqual(liveTelemetryGroups(), []);
});

test("end to end: the live capture and telemetry read of the same rows give the same energy over one window", {
  timeout: 30_000,
}, async () => {
  // Rows 20–80 of the capture (6.1 s): idle at 123 W, the step into the decode loop (~3.9 s in the capture),
  // ~505 W after it. The window [1.2 s, 5.3 s] from the slice's first row holds the step, and starts more than
  // power.draw's 1 s averaging after the slice's start.
  const FROM = 20;
  const COUNT = 61;
  const csv = readFileSync(join(FIXTURE, "smi-query.csv"), "utf8").trim().split("\n");
  const sliceFile = join(dir, "slice.csv");
  writeFileSync(sliceFile, `${[csv[0], ...csv.slice(1 + FROM, 1 + FROM + COUNT)].join("\n")}\n`);
  const read = await telemetryRead([sliceFile], { window: "1.2,5.3", utcOffsetMinutes: 0 });

  // The same rows through the live source: the replay serves them at the capture's own spacing, stamped in
  // this zone's local time (nounits, as the source asks), so the live capture is the slice shifted in time.
  const live = await withEnv(
    { REPLAY_FROM: String(FROM), REPLAY_COUNT: String(COUNT), REPLAY_PACE: "capture" },
    async () => {
      const w = collector();
      const h = await nvidiaSmiSource({ binary: bin, dmon: false }).start({ intervalMs: 100, onSample: w.onSample });
      await w.until(() => w.samples.length >= COUNT, `${COUNT} rows`);
      return h.stop();
    },
  );
  assert.deepEqual(
    live.samples.map((s) => s.powerW),
    capturedPower.slice(FROM, FROM + COUNT),
  );
  const t0 = live.samples[0]!.t;
  // As a bench run summarizes its recording: cut to the window, then summarized over it.
  const a = t0 + 1.2;
  const b = t0 + 5.3;
  const sum = summarizeTelemetry(cutToWindow(live, a, b), { window: { startS: a, endS: b, how: "given" } });
  const file = read.summary!;
  assert.ok(Math.abs(read.window!.startS - read.captures[0]!.samples[0]!.t - 1.2) < 1e-6);
  assert.ok(Math.abs(read.window!.endS - read.window!.startS - (b - a)) < 1e-6);
  assert.equal(sum.energyMethod, "integrated-power");
  assert.equal(file.energyMethod, "integrated-power");
  assert.ok(file.energyJ! > 1500 && file.energyErrorJ! > 0, JSON.stringify(file));
  // The contract: the two paths agree within the stated bound.
  assert.ok(
    Math.abs(sum.energyJ! - file.energyJ!) <= file.energyErrorJ!,
    `live ${sum.energyJ} J vs read ${file.energyJ} ± ${file.energyErrorJ} J`,
  );
  // And, the readings being the same, to rounding: same lag removal, same ±5 W term, same bound.
  assert.ok(Math.abs(sum.energyJ! - file.energyJ!) < 0.01, `live ${sum.energyJ} J vs read ${file.energyJ} J`);
  assert.ok(Math.abs(sum.energyErrorJ! - file.energyErrorJ!) < 0.01, `± ${sum.energyErrorJ} vs ± ${file.energyErrorJ}`);
  assert.deepEqual(
    sum.notes.filter((n) => /^energy integrated/.test(n)),
    file.notes.filter((n) => /^energy integrated/.test(n)),
  );
});
