// The cpu source on this machine's real /proc/stat, RAPL through real files laid out as
// /sys/class/powercap lays them out (this machine has none), and amd-smi through a stand-in binary.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { TelemetryError } from "../../src/errors.ts";
import { parseAmdSmiJson } from "../../src/telemetry/amdsmi.ts";
import { amdSmiSource } from "../../src/telemetry/sources/amd-smi.ts";
import { advanceRapl, cpuSource, findRaplZones, readCpuTimes } from "../../src/telemetry/sources/cpu.ts";
import { cannotRun } from "../helpers/skip.ts";
import { collector } from "./collect.ts";

const dir = mkdtempSync(join(tmpdir(), "inferscope-cpu-"));
after(() => rmSync(dir, { recursive: true, force: true }));

test("/proc/stat: busy share per interval from this machine; RAPL unavailable is said, never a zero", {
  timeout: 20_000,
}, async () => {
  const c = collector();
  const h = await cpuSource().start({ intervalMs: 100, onSample: c.onSample });
  await c.until(() => c.samples.filter((s) => s.device === "cpu").length >= 3, "3 busy readings");
  const cap = await h.stop();
  const busy = cap.samples.filter((s) => s.device === "cpu");
  assert.ok(busy.length >= 3);
  for (const s of busy) assert.ok(s.cpuBusy! >= 0 && s.cpuBusy! <= 1, String(s.cpuBusy));
  if (!existsSync("/sys/class/powercap")) {
    assert.deepEqual(cap.unavailable, [
      {
        field: "energyJ",
        why: "RAPL unavailable: /sys/class/powercap not present (no RAPL on this host or in this VM)",
      },
      {
        field: "powerW",
        why: "no RAPL energy counter to take a rate of: /sys/class/powercap not present (no RAPL on this host or in this VM)",
      },
    ]);
    assert.ok(!cap.samples.some((s) => s.energyJ !== undefined || s.powerW !== undefined));
  } else {
    // A host with powercap: either package readings, or the reason they are missing.
    const energy = cap.samples.filter((s) => s.energyJ !== undefined);
    assert.ok(
      energy.length > 0 || cap.unavailable.some((u) => u.field === "energyJ" && /RAPL unavailable: /.test(u.why)),
    );
  }
});

test("readCpuTimes: busy is everything but idle and iowait", () => {
  assert.deepEqual(readCpuTimes("cpu  15288 0 5958 80004 402 0 181 0 0 0\ncpu0 1 2 3 4\n"), {
    busy: 15288 + 5958 + 181,
    total: 15288 + 5958 + 80004 + 402 + 181,
  });
  assert.equal(readCpuTimes("intr 1 2\n"), null);
});

function raplTree(root: string, uj: number, range: number) {
  const pkg = join(root, "intel-rapl:0");
  mkdirSync(join(pkg, "intel-rapl:0:0"), { recursive: true });
  writeFileSync(join(pkg, "name"), "package-0\n");
  writeFileSync(join(pkg, "energy_uj"), `${uj}\n`);
  writeFileSync(join(pkg, "max_energy_range_uj"), `${range}\n`);
  // A core subzone (inside the package) and psys (the platform: would double count) are not read.
  writeFileSync(join(pkg, "intel-rapl:0:0", "name"), "core\n");
  writeFileSync(join(pkg, "intel-rapl:0:0", "energy_uj"), "5\n");
  mkdirSync(join(root, "intel-rapl:1"), { recursive: true });
  writeFileSync(join(root, "intel-rapl:1", "name"), "psys\n");
  writeFileSync(join(root, "intel-rapl:1", "energy_uj"), "7\n");
  writeFileSync(join(root, "intel-rapl:1", "max_energy_range_uj"), "1000\n");
  return join(pkg, "energy_uj");
}

test("RAPL: package energy read each interval, the wrap at max_energy_range_uj undone", {
  timeout: 20_000,
}, async () => {
  const root = join(dir, "powercap");
  const energy = raplTree(root, 900_000, 1_000_000);
  const c = collector();
  const h = await cpuSource({ powercapRoot: root }).start({ intervalMs: 50, onSample: c.onSample });
  const pkg = () => c.samples.filter((s) => s.device === "package-0");
  await c.until(() => pkg().length >= 2, "a reading after the baseline");
  // The counter passes its range: 900000 → (wrap) → 100000 is 200000 µJ more.
  writeFileSync(energy, "100000\n");
  await c.until(() => pkg().some((s) => s.energyJ! > 0.9 + 1e-9), "the wrapped reading");
  writeFileSync(energy, "350000\n");
  await c.until(() => pkg().some((s) => s.energyJ! > 1.1 + 1e-9), "a reading after the wrap");
  const cap = await h.stop();
  const values = [...new Set(cap.samples.filter((s) => s.device === "package-0").map((s) => s.energyJ))];
  assert.deepEqual(
    values.map((v) => Math.round(v! * 1e6)),
    [900_000, 1_100_000, 1_350_000],
  );
  assert.deepEqual(
    cap.devices.map((d) => d.key),
    ["cpu", "package-0"],
  );
  assert.ok(!cap.unavailable.some((u) => u.field === "energyJ"));
});

test("RAPL: an unreadable counter is said with its path and why, as root too", async (t) => {
  // Unreadable by construction, whoever reads it: energy_uj is a directory.
  const root = join(dir, "powercap-dir");
  const energy = raplTree(root, 1, 1_000_000);
  rmSync(energy);
  mkdirSync(energy);
  const zones = findRaplZones(root);
  assert.equal(zones.zones.length, 0);
  assert.match(zones.why!, /intel-rapl:0\/energy_uj: EISDIR/);
  // Permission denied, the usual case (root-only since Linux 5.10), with its advice: root reads any file, so
  // as root the read runs in a child that drops to nobody (a real EACCES, not a stand-in).
  const shared = mkdtempSync(join(tmpdir(), "inferscope-rapl-"));
  try {
    chmodSync(shared, 0o755);
    const denied = join(shared, "powercap");
    chmodSync(raplTree(denied, 1, 1_000_000), 0o000);
    const asRoot = process.getuid?.() === 0;
    let why: string | undefined;
    if (!asRoot) why = findRaplZones(denied).why;
    else {
      const code = `const { findRaplZones } = await import(${JSON.stringify(new URL("../../src/telemetry/sources/cpu.ts", import.meta.url).href)});
        process.stdout.write(JSON.stringify(findRaplZones(${JSON.stringify(denied)})));`;
      const r = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", code], {
        uid: 65534,
        gid: 65534,
        encoding: "utf8",
        timeout: 20_000,
      });
      if (r.error || r.status !== 0) {
        cannotRun(
          t,
          `a child as nobody could not read the tree: ${r.error?.message ?? r.stderr.trim().split("\n")[0]}`,
        );
        return;
      }
      const z = JSON.parse(r.stdout) as { zones: unknown[]; why?: string };
      assert.equal(z.zones.length, 0);
      why = z.why;
    }
    assert.match(why!, /permission denied reading .*intel-rapl:0\/energy_uj \(root-only since Linux 5\.10/);
  } finally {
    rmSync(shared, { recursive: true, force: true });
  }
});

test("RAPL zones: none present / none readable give a reason", () => {
  assert.match(findRaplZones(join(dir, "nope")).why!, /not present/);
  const z = { key: "package-0", energyPath: "", rangeUj: 1000, lastUj: 990, totalJ: 0 };
  assert.equal(advanceRapl(z, 10), 20 / 1e6);
  assert.equal(advanceRapl(z, 30), 40 / 1e6);
});

test("amd-smi missing: exit-3 error at start", async () => {
  await assert.rejects(
    amdSmiSource({ path: dir }).start({ intervalMs: 1000 }),
    (e: unknown) => e instanceof TelemetryError && e.exitCode === 3 && /amd-smi is not on PATH/.test(e.message),
  );
});

// amd-smi's `metric --json` shape ({value, unit} leaves under gpu_data), as its docs and users show it;
// this stand-in prints it (with the warning banner amd-smi prints outside the render group) each run.
const AMD_JSON = {
  gpu_data: [
    {
      gpu: 0,
      usage: { gfx_activity: { value: 87, unit: "%" }, umc_activity: { value: 41, unit: "%" } },
      power: { socket_power: { value: 542, unit: "W" } },
      temperature: { edge: { value: 52, unit: "C" }, hotspot: { value: 71, unit: "C" } },
      mem_usage: { used_vram: { value: 121344, unit: "MB" }, total_vram: { value: 196592, unit: "MB" } },
    },
  ],
};

test("amd-smi: polled, parsed after its warning banner; no energy counter is said", { timeout: 20_000 }, async () => {
  const bin = join(dir, "amd-smi");
  writeFileSync(join(dir, "amd.json"), JSON.stringify(AMD_JSON));
  writeFileSync(
    bin,
    `#!/bin/sh\necho "WARNING: User is missing the following required groups: render"\ncat "${join(dir, "amd.json")}"\n`,
  );
  chmodSync(bin, 0o755);
  const c = collector();
  const h = await amdSmiSource({ binary: bin }).start({ intervalMs: 100, onSample: c.onSample });
  await c.until(() => c.samples.length >= 2, "2 readings");
  const cap = await h.stop();
  const s = cap.samples[0]!;
  assert.equal(s.device, "gpu0");
  assert.equal(s.powerW, 542);
  assert.equal(s.gpuBusy, 0.87);
  assert.equal(s.memBusy, 0.41);
  assert.equal(s.temperatureC, 71);
  assert.equal(s.memoryUsedMiB, 121344);
  assert.ok(cap.unavailable.some((u) => u.field === "energyJ"));
  assert.throws(() => parseAmdSmiJson("no json here", { timeS: 0 }), /not valid JSON/);
});
