// Issue 42's High telemetry findings, each as the adversarial pass ran it (files through `telemetry read`, the real
// CLI, and live exporters on 127.0.0.1): energy that cannot be true is never printed as measured, a counter that
// steps down is not summed as resets, energy is given only over what its readings cover, and two hosts' GPU 0 stay
// two GPUs.
import assert from "node:assert/strict";
import { copyFileSync, mkdtempSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { storeBlockTelemetry, variantTelemetry } from "../../src/experiment/blocks.ts";
import { openStore } from "../../src/store/index.ts";
import { telemetrySection } from "../../src/study/telemetry.ts";
import { dcgmVectorsToSamples, type PromVectorElement, parseDcgmExposition } from "../../src/telemetry/dcgm.ts";
import { telemetryRead } from "../../src/telemetry/read.ts";
import { formatSummary } from "../../src/telemetry/render.ts";
import { openTelemetry } from "../../src/telemetry/session.ts";
import { summarizeTelemetry } from "../../src/telemetry/summary.ts";
import type { TelemetryCapture, TelemetrySummary } from "../../src/telemetry/types.ts";
import { runCli, STACK } from "../helpers/cli.ts";

const dir = mkdtempSync(join(tmpdir(), "inferscope-energy-"));
const T0 = 1_796_400_000;

/** Every figure of a summary is a possible one: finite, ≥ 0, shares in [0, 1]. */
function assertPossible(s: TelemetrySummary, what: string): void {
  const n = (v: number | null | undefined, k: string, share = false) => {
    if (v === null || v === undefined) return;
    assert.ok(Number.isFinite(v) && v >= 0 && (!share || v <= 1), `${what}: ${k} = ${v}`);
  };
  for (const k of ["energyJ", "energyErrorJ", "avgPowerW", "peakPowerW", "joulesPerToken", "tokensPerJoule"] as const)
    n(s[k], k);
  n(s.smClockMHz?.median, "smClockMHz.median");
  n(s.smClockMHz?.p10, "smClockMHz.p10");
  for (const [k, v] of Object.entries(s.utilization ?? {})) n(v, k, true);
  if (s.throttle) {
    n(s.throttle.shareOfWindow, "throttle.shareOfWindow", true);
    for (const r of s.throttle.reasons) n(r.share, r.reason, true);
  }
  for (const note of s.notes) assert.doesNotMatch(note, /NaN|Infinity/, `${what}: note "${note}"`);
}

/** An nvidia-smi query CSV of gpu0: 2 s idle (80 W), 4 s at `load`, 2 s idle, every 100 ms. */
function smiCsv(
  load: string,
  o: { uuid?: string; index?: string; clock?: string; util?: string; idle?: string } = {},
): string {
  const rows = [
    `timestamp, index${o.uuid ? ", uuid" : ""}, power.draw [W], power.draw.instant [W], utilization.gpu [%], clocks.current.sm [MHz]`,
  ];
  for (let i = 0; i < 80; i++) {
    const on = i >= 20 && i < 60;
    const t = new Date((T0 + i * 0.1) * 1000).toISOString();
    const stamp = `${t.slice(0, 10).replace(/-/g, "/")} ${t.slice(11, 23)}`;
    const p = on ? load : (o.idle ?? "80.00 W");
    rows.push(
      [
        stamp,
        o.index ?? "0",
        ...(o.uuid ? [o.uuid] : []),
        p,
        p,
        on ? (o.util ?? "100 %") : "0 %",
        on ? (o.clock ?? "1700 MHz") : "1980 MHz",
      ].join(", "),
    );
  }
  return `${rows.join("\n")}\n`;
}

/** The figure lines of a printed summary (not its notes, which quote what was dropped) hold no impossible number. */
function assertPrintedPossible(text: string, what: string): void {
  const figures = text.split("\n").filter((l) => /^(energy|power|per token|SM clock|throttling|utilization)\s/.test(l));
  assert.ok(figures.length >= 3, `${what}:\n${text}`);
  for (const l of figures) assert.doesNotMatch(l, /(^|[\s(])[-−]\d|Infinity|NaN/, `${what}: ${l}`);
}

function file(name: string, text: string): string {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
}

test("impossible power (−500 W, 1.7e308 W), negative clocks and utilization over 100 % are dropped, never summed", async () => {
  for (const [name, load, extra] of [
    ["negative", "-500.00 W", {}],
    ["huge", "1.7e308 W", {}],
    ["clocks", "400.00 W", { clock: "-1700 MHz", util: "150 %" }],
  ] as const) {
    const f = file(`${name}.csv`, smiCsv(load, extra));
    const r = await telemetryRead([f], { tokens: 1000, utcOffsetMinutes: 0 });
    const s = r.summary!;
    assertPossible(s, name);
    assert.ok(
      s.notes.some((n) => /dropped as impossible/.test(n)),
      `${name}: ${s.notes.join(" | ")}`,
    );
    assertPrintedPossible(formatSummary(s), name);
  }
  // The clocks capture: its power is fine, so its energy stands; the clock and utilization figures are the sane ones.
  const ok = (await telemetryRead([join(dir, "clocks.csv")], { tokens: 1000, utcOffsetMinutes: 0 })).summary!;
  assert.ok(ok.energyJ! > 0);
  assert.ok(ok.smClockMHz!.p10! >= 0);
  assert.ok(ok.utilization!.gpuBusy! <= 1);
});

test("CLI --json: 1.7e308 W gives no Infinity and no +Inf; 5e-324 W gives no Infinity tokens/J", async () => {
  for (const [name, load] of [
    ["huge-cli", "1.7e308 W"],
    ["tiny-cli", "5e-324 W"],
  ] as const) {
    const f = file(`${name}.csv`, smiCsv(load, name === "tiny-cli" ? { idle: load } : {}));
    const j = await runCli(["telemetry", "read", f, "--tokens", "1000", "--utc-offset", "Z", "--json"]);
    assert.equal(j.code, 0, j.stderr);
    assert.doesNotMatch(j.stdout, /Inf|NaN/);
    assertPossible(JSON.parse(j.stdout), name);
    const t = await runCli(["telemetry", "read", f, "--tokens", "1000", "--utc-offset", "Z"]);
    assertPrintedPossible(t.stdout, name);
    assert.doesNotMatch(t.stderr, STACK);
  }
  // 5e-324 W is possible but is no energy to divide by: tokens/J is unavailable, said so.
  const tiny = (await telemetryRead([join(dir, "tiny-cli.csv")], { tokens: 1000, utcOffsetMinutes: 0 })).summary!;
  assert.equal(tiny.tokensPerJoule, null);
  assert.ok(tiny.unavailable.some((u) => u.field === "tokensPerJoule" && /cannot be told from zero/.test(u.why)));
});

test("the study's telemetry section never shows negative energy (the report shows what the summary holds)", async () => {
  const s = (await telemetryRead([join(dir, "negative.csv")], { tokens: 1000, utcOffsetMinutes: 0 })).summary!;
  const sec = telemetrySection({
    run: { source: { kind: "nvidia-smi", detail: "test", why: "test" }, summary: s, samples: [], notes: [] },
    timeScale: 1,
  })!;
  for (const q of [sec.energyJ, sec.joulesPerToken, sec.avgPowerW, sec.peakPowerW])
    if (q) assert.ok(Number.isFinite(q.value) && q.value >= 0 && (q.low ?? 0) >= 0, JSON.stringify(q));
});

/** dcgm-exporter text for one scrape of gpu0 at time t (ms in the sample, as a saved exposition may carry). */
function dcgmText(energyMj: number, powerW: number | null, tMs?: number): string {
  const ts = tMs === undefined ? "" : ` ${tMs}`;
  const lab = `{gpu="0",UUID="GPU-1c2b08c1-f602-d290-4519-863bc0c96079",Hostname="node-a"}`;
  return [
    "# HELP DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION Total energy consumption since boot (in mJ).",
    "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter",
    `DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION${lab} ${energyMj}${ts}`,
    ...(powerW === null
      ? []
      : [
          "# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).",
          "# TYPE DCGM_FI_DEV_POWER_USAGE gauge",
          `DCGM_FI_DEV_POWER_USAGE${lab} ${powerW}${ts}`,
        ]),
    "",
  ].join("\n");
}

function capOf(texts: string[]): TelemetryCapture {
  const caps = texts.map((t, i) => parseDcgmExposition(t, { scrapeTimeS: T0 + i }));
  const samples = caps.flatMap((c) => c.samples).sort((a, b) => a.t - b.t);
  return { ...caps[0]!, samples };
}

test("a DCGM counter falling 60 J per sample is no energy: power is integrated instead, else energy is unavailable", () => {
  const falling = (power: number | null) =>
    capOf(Array.from({ length: 10 }, (_, i) => dcgmText((1_000_000 - 60 * i) * 1000, power)));
  const w = { startS: T0, endS: T0 + 9, how: "given" as const };
  const withPower = summarizeTelemetry(falling(600), { window: w, tokens: 1000 });
  // Before: 40,777,297 J from "resets" at every step; 9.97 MW average.
  assert.equal(withPower.energyMethod, "integrated-power");
  assert.ok(Math.abs(withPower.energyJ! - 600 * 9) < 1, `${withPower.energyJ}`);
  assert.ok(withPower.notes.some((n) => /energy counter is not energy: it goes down 9×/.test(n)));
  const noPower = summarizeTelemetry(falling(null), { window: w, tokens: 1000 });
  assert.equal(noPower.energyJ, null);
  assert.equal(noPower.joulesPerToken, null);
  assert.match(noPower.unavailable.find((u) => u.field === "energyJ")!.why, /goes down .* not a cumulative counter/);
  assertPossible(noPower, "no power");
});

test("shuffled sample timestamps (saved scrapes through telemetry read): the counter read in time order is no energy", async () => {
  // Five scrapes whose counter rises 500 J per second in file order, stamped in shuffled order.
  const order = [3, 0, 4, 1, 2];
  const files = order.map((k, i) =>
    file(`shuffled-${i}.prom`, dcgmText((2_000_000 + 500 * i) * 1000, 500, (T0 + k) * 1000)),
  );
  const r = await telemetryRead(files, { window: { startS: T0, endS: T0 + 4 }, tokens: 100 });
  const s = r.summary!;
  assert.equal(s.devices.length, 1, "one GPU (one UUID) in five segments");
  assert.equal(s.energyMethod, "integrated-power");
  assert.ok(Math.abs(s.energyJ! - 500 * 4) < 1, `${s.energyJ}`);
  assert.ok(s.notes.some((n) => /not energy/.test(n)));
});

test("Prometheus vectors of a falling counter: the same rule (the live prometheus: source feeds this summarizer)", () => {
  const lab = { __name__: "", gpu: "0", Hostname: "node-a", UUID: "GPU-1" };
  const v: PromVectorElement[] = [];
  for (let i = 0; i < 6; i++) {
    v.push({
      metric: { ...lab, __name__: "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION" },
      value: { t: (T0 + i) * 1000, v: (5e6 - 60 * i) * 1000 },
    });
  }
  const s = summarizeTelemetry(dcgmVectorsToSamples(v), { window: { startS: T0, endS: T0 + 5, how: "given" } });
  assert.equal(s.energyJ, null);
  assert.match(s.unavailable.find((u) => u.field === "energyJ")!.why, /goes down/);
});

interface Exporter {
  url: string;
  served: number;
  /** Resolves once the exporter has answered n scrapes in all. */
  answered(n: number): Promise<void>;
  /** Resolves once it has refused n scrapes in all. */
  refused(n: number): Promise<void>;
  close(): Promise<void>;
}

/** A dcgm-exporter stand-in: body(k) for scrape k, or null to drop the connection (the exporter dying). */
async function exporter(body: (k: number) => string | null): Promise<Exporter> {
  let served = 0;
  let dropped = 0;
  const waiters: Array<() => void> = [];
  const wake = () => {
    for (const w of waiters.splice(0)) w();
  };
  const server: Server = createServer((req, res) => {
    const b = body(served + dropped);
    if (b === null) {
      dropped++;
      req.socket.destroy();
      wake();
      return;
    }
    res.writeHead(200, { "content-type": "text/plain; version=0.0.4" });
    res.end(b, () => {
      served++;
      wake();
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const until = (cond: () => boolean) =>
    new Promise<void>((resolve) => {
      const check = () => (cond() ? resolve() : waiters.push(check));
      check();
    });
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}/metrics`,
    get served() {
      return served;
    },
    answered: (n) => until(() => served >= n),
    refused: (n) => until(() => dropped >= n),
    close: () =>
      new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      }),
  };
}

test("live dcgm: a counter falling 60 J per scrape is no energy; power (600 W) is integrated instead", {
  timeout: 30_000,
}, async () => {
  const ex = await exporter((k) => dcgmText((3_000_000 - 60 * k) * 1000, 600));
  try {
    const sess = (await openTelemetry(`dcgm:${ex.url}@100ms`))!;
    await ex.answered(2);
    sess.start();
    await ex.answered(8);
    sess.end();
    const t = (await sess.finish({ tokens: 1000 }))!;
    const s = t.summary!;
    const span = s.window.endS - s.window.startS;
    assert.equal(s.energyMethod, "integrated-power");
    assert.ok(Math.abs(s.avgPowerW! - 600) < 1, `avg ${s.avgPowerW} W over ${span} s`);
    assert.ok(s.notes.some((n) => /not energy/.test(n)));
  } finally {
    await ex.close();
  }
});

test("live dcgm: an exporter that dies after 3 scrapes of the window gives no energy (unavailable, with its coverage), never a sum", {
  timeout: 30_000,
}, async () => {
  let first = -1;
  const ex = await exporter((k) => (first >= 0 && k >= first + 3 ? null : dcgmText((4_000_000 + 60 * k) * 1000, 600)));
  try {
    const sess = (await openTelemetry(`dcgm:${ex.url}@100ms`))!;
    await ex.answered(2);
    first = ex.served;
    sess.start();
    await ex.refused(6);
    sess.end();
    const t = (await sess.finish({ tokens: 1000 }))!;
    const s = t.summary!;
    assert.equal(s.energyJ, null);
    assert.equal(s.joulesPerToken, null);
    assert.equal(s.avgPowerW, null);
    assert.match(
      s.unavailable.find((u) => u.field === "energyJ")!.why,
      /cover .* of .* s \(\d+ %\); energy needs 90 %/,
    );
    assert.match(formatSummary(s), /energy +unavailable: .*cover/);
    // As an A/B block: its arm's figures are unknown ("J/token unknown"), not "0.000 J/token, avg 0 W".
    const store = openStore(join(dir, "ab.db"));
    const run = store.saveRun({ kind: "ab", config: {} });
    const block = store.addBlock(run.id, { index: 0, variant: "A" });
    storeBlockTelemetry(store, run.id, block, t);
    const [arm] = variantTelemetry(store, run.id, [{ id: block, variant: "A", status: "complete" }]);
    store.close();
    assert.equal(arm!.joulesPerToken, null);
    assert.equal(arm!.avgPowerW, null);
  } finally {
    await ex.close();
  }
});

test("live dcgm: an exporter dead before the window opens gives no table of dashes, a note saying so", {
  timeout: 30_000,
}, async () => {
  let dead = false;
  const ex = await exporter((k) => (dead ? null : dcgmText((5_000_000 + 60 * k) * 1000, 600)));
  try {
    const sess = (await openTelemetry(`dcgm:${ex.url}@100ms`))!;
    await ex.answered(2);
    dead = true;
    await ex.refused(2);
    sess.start();
    await ex.refused(4);
    sess.end();
    const t = (await sess.finish({ tokens: 1000 }))!;
    assert.equal(t.summary, null);
    assert.ok(
      t.notes.some((n) => /no reading inside the measured window \(the last came .* before it opened\)/.test(n)),
      t.notes.join(" | "),
    );
  } finally {
    await ex.close();
  }
});

test("a window with no reading in it: energy unavailable, not 0.0 J ± 0.0 J; J/token and power unavailable too", () => {
  const cap: TelemetryCapture = {
    source: { kind: "dcgm", detail: "test" },
    devices: [{ key: "gpu0" }],
    samples: [0, 1, 2].map((i) => ({ t: T0 + i, device: "gpu0", energyJ: 1000 + 500 * i, powerW: 500 })),
    notes: [],
    unavailable: [],
  };
  const s = summarizeTelemetry(cap, { window: { startS: T0 + 10, endS: T0 + 12, how: "given" }, tokens: 100 });
  assert.equal(s.energyJ, null);
  assert.equal(s.energyErrorJ, null);
  assert.equal(s.avgPowerW, null);
  assert.equal(s.joulesPerToken, null);
  assert.doesNotMatch(formatSummary(s), /0\.0 J/);
});

test("telemetry read --window 10,1000 on a 19 s capture: no energy extrapolated over 970 s", async () => {
  const rows = ["timestamp, index, power.draw [W], utilization.gpu [%]"];
  for (let i = 0; i < 190; i++) {
    const t = new Date((T0 + i * 0.1) * 1000).toISOString();
    rows.push(`${t.slice(0, 10).replace(/-/g, "/")} ${t.slice(11, 23)}, 0, ${i > 150 ? 500 : 100}.00 W, 50 %`);
  }
  const f = file("19s.csv", `${rows.join("\n")}\n`);
  const r = await runCli(["telemetry", "read", f, "--window", "10,1000", "--utc-offset", "Z", "--json"]);
  assert.equal(r.code, 0, r.stderr);
  const s = JSON.parse(r.stdout);
  assert.equal(s.energyJ, null);
  assert.match(s.unavailable.find((u: { field: string }) => u.field === "energyJ").why, /cover 8\.\d+ of 990 s/);
});

test("energy over part of the window is given over the part its readings cover, with that coverage; J/token is not", () => {
  // Readings stop 1 s before a 20 s window ends (95 % covered): energy over 19 s, said; no J/token for the whole.
  const cap: TelemetryCapture = {
    source: { kind: "dcgm", detail: "test" },
    devices: [{ key: "gpu0" }],
    samples: Array.from({ length: 20 }, (_, i) => ({ t: T0 + i, device: "gpu0", powerW: 400 })),
    notes: [],
    unavailable: [],
  };
  const s = summarizeTelemetry(cap, { window: { startS: T0, endS: T0 + 20, how: "given" }, tokens: 100 });
  assert.ok(Math.abs(s.energyJ! - 400 * 19) < 1e-6);
  assert.deepEqual(s.energyCoverage, { coveredS: 19, windowS: 20 });
  assert.equal(s.avgPowerW, 400);
  assert.equal(s.joulesPerToken, null);
  assert.match(formatSummary(s), /covers 19\.00 of 20\.00 s/);
});

test("two hosts' GPU 0: kept apart by UUID, or by file when no UUID tells; the same file twice is read once", async () => {
  const a = file("host-a.csv", smiCsv("400.00 W", { uuid: "GPU-aaaaaaaa-0000-0000-0000-000000000001" }));
  const b = file("host-b.csv", smiCsv("400.00 W", { uuid: "GPU-bbbbbbbb-0000-0000-0000-000000000002" }));
  const one = (await telemetryRead([a], { utcOffsetMinutes: 0 })).summary!;
  const both = await telemetryRead([a, b], { utcOffsetMinutes: 0 });
  assert.deepEqual(both.summary!.devices, ["host-a.csv:gpu0", "host-b.csv:gpu0"]);
  assert.ok(
    Math.abs(both.summary!.energyJ! - 2 * one.energyJ!) < 1e-6,
    `${both.summary!.energyJ} vs 2 × ${one.energyJ}`,
  );
  assert.ok(both.notes.some((n) => /two GPUs \(UUIDs/.test(n)));
  // No UUID, overlapping in time: two GPUs as well (one GPU cannot read twice at once), said so.
  const c = file("host-c.csv", smiCsv("400.00 W"));
  const d = file("host-d.csv", smiCsv("400.00 W").replace(/, 400\.00 W, 400\.00 W,/g, ", 401.00 W, 401.00 W,"));
  const cd = await telemetryRead([c, d], { utcOffsetMinutes: 0 });
  assert.equal(cd.summary!.devices.length, 2);
  assert.ok(cd.notes.some((n) => /carry no UUID/.test(n)));
  // The same file twice, or a copy: one recording, read once.
  const copy = join(dir, "host-a-copy.csv");
  copyFileSync(a, copy);
  for (const twice of [
    [a, a],
    [a, copy],
  ]) {
    const r = await telemetryRead(twice, { utcOffsetMinutes: 0 });
    assert.deepEqual(r.summary!.devices, ["gpu0"]);
    assert.equal(r.summary!.energyJ, one.energyJ);
    assert.ok(r.notes.some((n) => /read once/.test(n)));
  }
  // The CLI says it too.
  const cli = await runCli(["telemetry", "read", a, b, "--utc-offset", "Z"]);
  assert.equal(cli.code, 0, cli.stderr);
  assert.match(cli.stdout, /host-a\.csv:gpu0, host-b\.csv:gpu0/);
});
