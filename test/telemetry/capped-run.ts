// A generator of `nvidia-smi --query-gpu … --format=csv -lms 100` captures of one GPU running a power-capped load,
// built from how the hardware and the tool behave, not fitted to any capture (the held-out H200 one of issue 42
// included). The device is simulated on a 5 ms grid:
// - instant power: idle at `idleW` with ±1.5 W of sensor noise; under load, a power-cap controller holding a
//   demand above the cap: the draw swings around 98 % of the cap with a 60 ms memory (an AR(1) process), clipped to
//   [0.72, 1.07] × cap (a 700 W cap swings 500–750 W, as the issue measured); the load starts and stops within one
//   5 ms step (kernels start and drain in microseconds); after it, a hot idle: `hotW` more than idle, decaying
//   with the die's thermal time constant `tauS` (leakage falls as it cools);
// - power.draw: the trailing 1 s mean of the instant draw (`--help-query-gpu`: "averaged over 1 sec" on Ampere and
//   newer); power.draw.instant: the draw at the sample;
// - clocks.sm: the maximum at idle; under the cap the controller lowers it in step with the draw's excess over the
//   cap's share (P ∝ f·V², V ∝ f: f ∝ P^(1/3)), never under 60 % of the maximum; clocks_event_reasons.active:
//   0x4 (SwPowerCap) under load, 0x1 (GpuIdle) else;
// - utilization.gpu: the share of the last `utilPeriodS` (NVML: 1/6 s to 1 s by product) with a kernel running;
// - samples every `sampleMs` with ±2 ms jitter (the -lms loop's own drift), stamped to the ms as nvidia-smi does.
// The truth is the energy of the 5 ms process over the true loaded window [startS, endS].
import { makeRng } from "../../src/rng.ts";

export interface CappedRunOptions {
  seed: number;
  idleBeforeS: number;
  loadS: number;
  tailS: number;
  capW: number;
  idleW: number;
  /** Extra idle draw right after the load (a hot die: leakage, at most the cold idle again), decaying with tauS. */
  hotW?: number;
  tauS?: number;
  sampleMs?: number;
  utilPeriodS?: number;
  /** Print power.draw.instant (newer drivers) beside power.draw. */
  instant?: boolean;
  maxClockMHz?: number;
  /** Wall-clock start, unix seconds (UTC; read the CSV with utcOffsetMinutes: 0). */
  t0?: number;
}

export interface CappedRun {
  csv: string;
  /** The true loaded window (unix s) and the energy drawn in it (J). */
  truth: { startS: number; endS: number; energyJ: number };
  sampleS: number;
}

const DT = 0.005;

export function cappedRun(o: CappedRunOptions): CappedRun {
  const rnd = makeRng(o.seed);
  const gauss = () => {
    const u = Math.max(1e-12, rnd());
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * rnd());
  };
  const t0 = o.t0 ?? 1_796_400_000;
  const sampleS = (o.sampleMs ?? 100) / 1000;
  const util = o.utilPeriodS ?? 1 / 6;
  const maxClk = o.maxClockMHz ?? 1980;
  const hot = Math.min(o.hotW ?? 0, o.idleW);
  const tau = o.tauS ?? 10;
  // The load starts at a random phase of the sampling grid (edges fall anywhere between two readings), on the
  // 5 ms grid of the process, 1 s after the first reading.
  const startS = t0 + 1 + Math.round((o.idleBeforeS + rnd() * sampleS) / DT) * DT;
  const endS = startS + Math.round(o.loadS / DT) * DT;
  const total = 1 + o.idleBeforeS + o.loadS + o.tailS + 2 * sampleS;
  const n = Math.ceil(total / DT);
  const p = new Float64Array(n);
  const busy = new Uint8Array(n);
  let ar = 0;
  let idleNoise = 0;
  let truth = 0;
  for (let i = 0; i < n; i++) {
    const t = t0 + i * DT;
    idleNoise = 0.7 * idleNoise + 0.3 * 1.5 * gauss();
    const loaded = t >= startS - DT / 2 && t < endS - DT / 2;
    if (loaded) {
      // AR(1) with a 60 ms memory: the controller's swings, σ ≈ 0.1 × cap before clipping.
      const a = Math.exp(-DT / 0.06);
      ar = a * ar + Math.sqrt(1 - a * a) * 0.1 * o.capW * gauss();
      p[i] = Math.min(1.07 * o.capW, Math.max(0.72 * o.capW, 0.98 * o.capW + ar));
      busy[i] = 1;
      truth += p[i]! * DT;
    } else {
      const since = t - endS;
      p[i] = o.idleW + idleNoise + (since >= 0 ? hot * Math.exp(-since / tau) : 0);
    }
  }
  const header = [
    "timestamp",
    "power.draw [W]",
    ...(o.instant === false ? [] : ["power.draw.instant [W]"]),
    "utilization.gpu [%]",
    "clocks.current.sm [MHz]",
    "clocks.max.sm [MHz]",
    "clocks_event_reasons.active",
    "power.limit [W]",
  ];
  const rows = [header.join(", ")];
  const perLag = Math.round(1 / DT);
  const perUtil = Math.max(1, Math.round(util / DT));
  for (let k = 0; ; k++) {
    const ts = t0 + 1 + k * sampleS + (rnd() - 0.5) * 0.004;
    const i = Math.floor((ts - t0) / DT);
    if (i >= n) break;
    let sum = 0;
    for (let j = i - perLag + 1; j <= i; j++) sum += p[Math.max(0, j)]!;
    const avg = sum / perLag;
    let on = 0;
    for (let j = i - perUtil + 1; j <= i; j++) on += busy[Math.max(0, j)]!;
    const u = Math.round((100 * on) / perUtil);
    const inst = p[i]!;
    const capped = busy[i] === 1;
    const clk = capped ? Math.max(0.6, Math.min(1, Math.cbrt(o.capW / Math.max(inst, 1)) * 0.87)) * maxClk : maxClk;
    const d = new Date(Math.round(ts * 1000));
    const stamp = `${d.toISOString().slice(0, 10).replace(/-/g, "/")} ${d.toISOString().slice(11, 23)}`;
    rows.push(
      [
        stamp,
        `${avg.toFixed(2)} W`,
        ...(o.instant === false ? [] : [`${inst.toFixed(2)} W`]),
        `${u} %`,
        `${Math.round(clk)} MHz`,
        `${maxClk} MHz`,
        capped ? "0x0000000000000004" : "0x0000000000000001",
        `${o.capW.toFixed(2)} W`,
      ].join(", "),
    );
  }
  return { csv: `${rows.join("\n")}\n`, truth: { startS, endS, energyJ: truth }, sampleS };
}
