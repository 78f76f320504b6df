// Issue 42's Medium and Low telemetry findings, run as the adversarial pass ran them: hostile files through
// `telemetry read`, hostile flags, a hung or missing GPU tool under `telemetry watch`, and hostile answers from a
// Prometheus or exporter on 127.0.0.1. Each is refused with a clear error (file:line:column where there is one)
// and a non-zero exit, or said in a note: never a stack trace, an "internal error", or a number printed as measured.
import assert from "node:assert/strict";
import { chmodSync, mkdirSync, mkdtempSync, truncateSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { utcOffsetFlag } from "../../src/cli/commands/telemetry.ts";
import { InputError, TelemetryError } from "../../src/errors.ts";
import { redactString } from "../../src/secrets.ts";
import { parseAmdSmiJson } from "../../src/telemetry/amdsmi.ts";
import { telemetryRead } from "../../src/telemetry/read.ts";
import { startTelemetry } from "../../src/telemetry/recorder.ts";
import { prometheusSource } from "../../src/telemetry/sources/prometheus.ts";
import { formatTelemetrySpec, parseTelemetrySpec } from "../../src/telemetry/spec.ts";
import { summarizeTelemetry } from "../../src/telemetry/summary.ts";
import type { TelemetryCapture } from "../../src/telemetry/types.ts";
import { frameFrom } from "../../src/telemetry/watch.ts";
import { assertRefused, runCli, STACK } from "../helpers/cli.ts";

const dir = mkdtempSync(join(tmpdir(), "inferscope-tinputs-"));
const T0 = 1_796_400_000;
const file = (name: string, text: string) => {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
};
/** A directory holding an executable `nvidia-smi` that runs `script` (sh). */
const fakeSmi = (name: string, script: string) => {
  const d = join(dir, name);
  mkdirSync(d, { recursive: true });
  const bin = join(d, "nvidia-smi");
  writeFileSync(bin, `#!/bin/sh\n${script}\n`);
  chmodSync(bin, 0o755);
  return d;
};
const PATH0 = process.env.PATH ?? "";

test("telemetry watch nvidia-smi, interrupted during a hung probe: ends as a live view does (exit 0), no 'internal error'", {
  timeout: 60_000,
}, async () => {
  const d = fakeSmi("hung", "exec sleep 60");
  const r = await runCli(["telemetry", "watch", "nvidia-smi"], {
    env: { PATH: `${d}:${PATH0}` },
    limitMs: 45_000,
    // biome-ignore lint/suspicious/noThenProperty: runCli's hook is named `then`
    when: { match: /waiting for .*nvidia-smi to answer a first query/, then: (pid) => process.kill(pid, "SIGINT") },
  });
  assert.equal(r.killed, false, r.stderr);
  assert.equal(r.code, 0, r.stderr);
  assert.doesNotMatch(r.stderr, /internal error|this is a bug|aborted/);
  assert.doesNotMatch(r.stderr, STACK);
  assert.deepEqual(r.leftovers, []);
});

test("--telemetry auto says what it waits for while a first nvidia-smi query hangs (the line a TTY shows)", {
  timeout: 30_000,
}, async () => {
  // nvidia-smi that takes 1.5 s and then finds no driver: auto waits, says so, then skips it.
  const d = fakeSmi(
    "slow",
    'sleep 1.5; echo "NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver."; exit 9',
  );
  const lines: string[] = [];
  const rec = await startTelemetry({ kind: "auto" }, { path: d, onProgress: (l) => lines.push(l) });
  assert.equal(rec.resolved.kind, "none");
  assert.ok(
    lines.some((l) => /^telemetry: waiting for .*nvidia-smi to answer a first query \(up to 15 s/.test(l)),
    lines.join("\n"),
  );
  await rec.stop();
});

test("telemetry watch auto with no GPU tool: exit 3, naming what was tried", { timeout: 30_000 }, async () => {
  const empty = join(dir, "empty-path");
  mkdirSync(empty, { recursive: true });
  const r = await runCli(["telemetry", "watch", "auto", "--iterations", "1"], { env: { PATH: empty } });
  assert.equal(r.code, 3, r.stderr);
  assert.match(r.stderr, /telemetry watch auto: no source to watch \(tried nvidia-smi: not on PATH/);
  assert.doesNotMatch(r.stdout, /no readings/);
});

test("amd-smi JSON whose entries are not GPU objects is refused, saying which entry", async () => {
  for (const [name, text, want] of [
    ["scalars", '[1,2,"x",null,[],{}]', /entry 0 of the GPU list is a number, not a GPU object/],
    ["deep", `${"[".repeat(200_000)}${"]".repeat(200_000)}`, /entry 0 of the GPU list is a list/],
    [
      "empty-object",
      '[{"gpu": 0, "power": {"socket_power": 90}}, {}]',
      /entry 1 of the GPU list holds none of amd-smi's GPU sections/,
    ],
  ] as const) {
    const f = file(`${name}.json`, text);
    await assert.rejects(
      telemetryRead([f], { format: "amd-smi" }),
      (e: unknown) => e instanceof InputError && want.test(e.message),
    );
    const r = await runCli(["telemetry", "read", f]);
    assertRefused(r, want, name);
  }
});

test("amd-smi units: 12 kW is 12,000 W (then dropped as impossible), 350000 mW is 350 W, a unit of no power is refused", () => {
  const doc = (p: unknown) => JSON.stringify([{ gpu: 0, power: { socket_power: p } }]);
  assert.equal(parseAmdSmiJson(doc("12 kW"), { timeS: T0 }).samples[0]!.powerW, 12_000);
  assert.equal(parseAmdSmiJson(doc({ value: 350000, unit: "mW" }), { timeS: T0 }).samples[0]!.powerW, 350);
  assert.throws(
    () => parseAmdSmiJson(doc("12 kWh"), { timeS: T0, file: "a.json" }),
    /power: "12 kWh" is not in a unit of power/,
  );
  const cap = parseAmdSmiJson(doc("12 kW"), { timeS: T0 });
  const s = summarizeTelemetry(cap, { window: { startS: T0, endS: T0, how: "given" } });
  assert.equal(s.peakPowerW, null);
  assert.ok(s.notes.some((n) => /powerW: 1 reading dropped as impossible \(first: 12000 W/.test(n)));
});

test("equal timestamps: no '(NaN %)' on the terminal or in --json; the repeated readings are dropped, said once", async () => {
  const rows = ["timestamp, index, power.draw [W], power.draw.instant [W], utilization.gpu [%]"];
  for (let i = 0; i < 20; i++)
    rows.push(`2026/12/04 16:54:22.517, 0, ${140 + 10 * i}.00 W, ${150 + 10 * i}.00 W, ${5 * i} %`);
  const f = file("equal.csv", `${rows.join("\n")}\n`);
  for (const json of [false, true]) {
    const r = await runCli(["telemetry", "read", f, "--tokens", "10", ...(json ? ["--json"] : [])]);
    assert.equal(r.code, 0, r.stderr);
    assert.doesNotMatch(r.stdout, /NaN|Infinity/);
    assert.match(r.stdout, /19 readings dropped: a device's reading at the same time as its previous one/);
  }
});

test("a 600 MB file or /dev/zero is refused by size before it is read (not 'Invalid string length')", async () => {
  const big = join(dir, "big.csv");
  writeFileSync(big, "");
  truncateSync(big, 600 * 1024 * 1024); // sparse: no disk used
  for (const [f, want] of [
    [big, /big\.csv: 600 MiB: telemetry read takes files up to 64 MiB/],
    ["/dev/zero", /\/dev\/zero: more than 64 MiB \(not a regular file\)/],
  ] as const) {
    const r = await runCli(["telemetry", "read", f], { limitMs: 60_000 });
    assertRefused(r, want, f);
  }
});

test("sample timestamps that are no time (1e16 ms, negative) are refused at their line", async () => {
  for (const [name, ts, want] of [
    [
      "far",
      "10000000000000000",
      /far\.prom:3:1: DCGM_FI_DEV_POWER_USAGE: the sample timestamp 10000000000000000 ms is not a time/,
    ],
    ["negative", "-5000", /negative\.prom:3:1: .*the sample timestamp -5000 ms is not a time/],
  ] as const) {
    const f = file(
      `${name}.prom`,
      `# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).\n# TYPE DCGM_FI_DEV_POWER_USAGE gauge\nDCGM_FI_DEV_POWER_USAGE{gpu="0"} 300 ${ts}\n`,
    );
    assertRefused(await runCli(["telemetry", "read", f]), want, name);
  }
});

test("an invalid date (2026/13/45 25:61:61) is refused at its cell; --utc-offset +99:00 is refused", async () => {
  const f = file(
    "baddate.csv",
    "timestamp, power.draw [W]\n2026/12/04 16:54:22.517, 100 W\n2026/13/45 25:61:61.000, 100 W\n",
  );
  assertRefused(
    await runCli(["telemetry", "read", f]),
    /baddate\.csv:3:1: timestamp: expected a timestamp .* \(a date and time that exist\), got "2026\/13\/45 25:61:61\.000"/,
    "date",
  );
  const dmon = file(
    "baddmon.txt",
    "#Date       Time        gpu   pwr\n#YYYYMMDD   HH:MM:SS    Idx     W\n 20261345   16:54:22      0    100\n",
  );
  assertRefused(
    await runCli(["telemetry", "read", dmon]),
    /baddmon\.txt:3:\d+: date: expected a date YYYYMMDD that exists/,
    "dmon date",
  );
  for (const bad of ["+99:00", "+14:30", "-13:00", "+05:75", "9999"])
    assert.throws(
      () => utcOffsetFlag(bad),
      /--utc-offset: expected Z, \+HH:MM or minutes between −12:00 and \+14:00/,
      bad,
    );
  assert.equal(utcOffsetFlag("+14:00"), 840);
  assert.equal(utcOffsetFlag("-12:00"), -720);
  const ok = file(
    "okdate.csv",
    "timestamp, power.draw [W]\n2026/12/04 16:54:22.517, 100 W\n2026/12/04 16:54:22.617, 100 W\n",
  );
  assertRefused(
    await runCli(["telemetry", "read", ok, "--utc-offset", "+99:00"]),
    /--utc-offset: expected Z/,
    "+99:00",
  );
});

test("counter values near 1e300 are no counter (dropped as impossible), not '± 0.0 J'", () => {
  const cap: TelemetryCapture = {
    source: { kind: "dcgm", detail: "test" },
    devices: [{ key: "gpu0" }],
    samples: [0, 1, 2, 3].map((i) => ({ t: T0 + i, device: "gpu0", energyJ: 1e300 + i * 1e285 })),
    notes: [],
    unavailable: [],
  };
  const s = summarizeTelemetry(cap, { window: { startS: T0, endS: T0 + 3, how: "given" } });
  assert.equal(s.energyJ, null);
  assert.equal(s.energyErrorJ, null);
  assert.ok(s.notes.some((n) => /energyJ: 4 readings dropped as impossible/.test(n)));
});

test("telemetry watch frames drop impossible readings too (a negative clock, power past the bound)", () => {
  const fr = frameFrom(
    new Map([["gpu0", [{ t: T0, device: "gpu0", powerW: -500, smClockMHz: -1700, gpuBusy: 1.5, temperatureC: 40 }]]]),
    T0 * 1000,
    { kind: "dcgm", why: "test" },
    [],
  );
  const d = fr.devices[0]!;
  assert.equal(d.powerW, undefined);
  assert.equal(d.smClockMHz, undefined);
  assert.equal(d.gpuBusy, undefined);
  assert.equal(d.temperatureC, 40);
  assert.ok(fr.notes.some((n) => /dropped as impossible/.test(n)));
});

test("nvidia-smi@-1s says 'bad sampling interval', not 'unknown source'", async () => {
  for (const v of ["nvidia-smi@-1s", "dcgm:http://127.0.0.1:9400@-200ms", "cpu@+5"])
    assert.throws(() => parseTelemetrySpec(v), /bad sampling interval "@[-+]/, v);
  assert.deepEqual(parseTelemetrySpec("dcgm:http://user:pw@127.0.0.1:9400"), {
    kind: "dcgm",
    url: "http://user:pw@127.0.0.1:9400/metrics",
  });
  const r = await runCli(["telemetry", "watch", "nvidia-smi@-1s"]);
  assertRefused(r, /bad sampling interval "@-1s"/, "watch");
});

test("a spec written back (logs, the run store) keeps the port a port: no ':9090@' for a redactor to take as a password", () => {
  for (const [spec, shown] of [
    [
      { kind: "prometheus", url: "http://127.0.0.1:9090", intervalMs: 1000 },
      "prometheus:http://127.0.0.1:9090/@1000ms",
    ],
    [
      { kind: "dcgm", url: "http://127.0.0.1:9400/metrics", intervalMs: 200 },
      "dcgm:http://127.0.0.1:9400/metrics@200ms",
    ],
  ] as const) {
    const s = formatTelemetrySpec(spec);
    assert.equal(s, shown);
    assert.equal(redactString(s), s);
    assert.deepEqual(parseTelemetrySpec(s), spec);
  }
});

async function serve(
  handler: (res: import("node:http").ServerResponse) => void,
): Promise<{ url: string; server: Server }> {
  const server = createServer((_req, res) => handler(res));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, server };
}

test("prometheus: a garbage answer and a silent server are said in plain words, not a JS error or undici's text", {
  timeout: 30_000,
}, async () => {
  for (const [body, want] of [
    ['{"status":"success","data":{"resultType":"matrix","result":5}}', /the answer is not a Prometheus range vector/],
    ['{"status":"success","data":null}', /the answer is not a Prometheus range vector/],
    [null, /no answer within 500 ms \(the server accepted the connection and said nothing\)/],
  ] as const) {
    const { url, server } = await serve((res) => {
      if (body !== null) res.end(body);
    });
    try {
      await assert.rejects(
        prometheusSource(url, { timeoutMs: 500 }).start({ intervalMs: 1000 }),
        (e: unknown) =>
          e instanceof TelemetryError &&
          want.test(e.message) &&
          !/is not a function|Cannot read|Timeout Error/.test(e.message),
      );
    } finally {
      server.closeAllConnections();
      server.close();
    }
  }
});

test("power read every 20 µs, work every 0.5 s, ending inside the 1 s average's ramp: the window in seconds, not minutes", {
  timeout: 90_000,
}, async () => {
  // Two searches were quadratic in the reading rate: the work gate scanned every work reading in the lag for
  // each power reading, and the ramp's kink was sought on a grid of a tenth of the power interval across the
  // work readings' bracket. This file took minutes (and would hang on a denser one); now a few seconds.
  const dt = 20e-6;
  const n = Math.round(5.5 / dt);
  const every = Math.round(0.5 / dt);
  const t0 = 1_796_400_000;
  const rows = ["timestamp, power.draw [W], utilization.gpu [%]"];
  for (let i = 0; i <= n; i++) {
    const r = i * dt;
    // power.draw: the 1 s trailing mean of 80 W idle with 600 W over [2, 5) s, in closed form.
    const on = Math.max(0, Math.min(r, 5) - Math.max(r - 1, 2));
    const p = 80 + (520 * on) / Math.min(1, Math.max(r, 1e-9));
    const us = Math.round(r * 1e6);
    const d = new Date((t0 + Math.floor(us / 1e6)) * 1000).toISOString();
    const stamp = `${d.slice(0, 10).replace(/-/g, "/")} ${d.slice(11, 19)}.${String(us % 1e6).padStart(6, "0")}`;
    const u = i % every === 0 ? `${r >= 2 && r < 5 ? 100 : 0} %` : "[N/A]";
    rows.push(`${stamp}, ${p.toFixed(2)} W, ${u}`);
  }
  const file = join(dir, "fast-power.csv");
  writeFileSync(file, `${rows.join("\n")}\n`);
  const r = await runCli(["telemetry", "read", file, "--utc-offset", "Z", "--json"], { limitMs: 60_000 });
  assert.equal(r.killed, false, `still running after ${r.ms.toFixed(0)} ms`);
  assert.equal(r.code, 0, r.stderr);
  const w = JSON.parse(r.stdout).window;
  assert.ok(Math.abs(w.startS - t0 - 2) < 0.01 && Math.abs(w.endS - t0 - 5) < 0.01, `${w.startS - t0}, ${w.endS - t0}`);
});
