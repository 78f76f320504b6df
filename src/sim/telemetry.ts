// The sim's GPU telemetry: per-GPU counters that follow the engine's own step timeline (DRAM bytes, FLOPs,
// collective bytes, a power model, an energy counter), rendered as dcgm-exporter renders DCGM fields.
// Pure: the caller passes wall-clock stamps (the engine's clock, ms) and the generated-token count.
import { allReduceTxBytesPerGpu } from "../model/collectives.ts";
import { type Profile, profileHardware } from "./profile.ts";
import { mix32 } from "./rng.ts";
import { type BatchShape, COMPONENTS, decodeBatch, type Knobs, StepModel } from "./timing.ts";

/** The board's power and clock facts the model uses, each with where it came from. */
export interface GpuPowerSpec {
  /** The board's default limit: the dynamic terms are shares of (this − idle). */
  powerLimitW: number;
  /** The limit enforced (`nvidia-smi -pl`; default the board's): power above it is capped. */
  enforcedLimitW: number;
  idleW: number;
  smClockMaxMHz: number;
  memClockMHz: number;
  /** Spec DRAM bandwidth (GB/s) that DCGM_FI_PROF_DRAM_ACTIVE is a ratio of. */
  peakBandwidthGBs: number;
  /** Dense BF16 tensor TFLOP/s that DCGM_FI_PROF_PIPE_TENSOR_ACTIVE is a ratio of. */
  peakTflops: number;
  memoryMiB: number;
  /** Per field: "profile" (the profile file says it) or the class default used, with why. */
  sources: Record<"powerLimitW" | "idleW" | "smClockMaxMHz" | "memClockMHz", string>;
}

/**
 * The power model: P = idle + (limit − idle) · (DRAM·dram + SM·sm + TENSOR·tensor), capped at the limit.
 * Calibrated on the one uncapped point of ../shared/telemetry/h200 (batch-1 decode: 505 W at DRAM active 0.61,
 * SM active 0.62, tensor 0.026, idle 126 W with the process holding its context, 700 W limit) with the tensor
 * weight set to 0.5 by assumption; the same capture's batch-64 run hitting its 700 W limit is consistent with
 * it. One calibration point: on other GPUs read it as ±30 %.
 */
export const POWER_MODEL = { dram: 0.53, sm: 0.53, tensor: 0.5 } as const;

/** Steady GPU temperature: base + slope × (power − idle); the H200 capture read 44 °C at ~140 W, 51 °C at 505 W. */
export const THERMAL_MODEL = { baseC: 44, cPerW: 0.019 } as const;

/** vLLM's default --gpu-memory-utilization: the engine allocates this share of the memory at start. */
const GPU_MEMORY_UTILIZATION = 0.9;

/** A driver version string for the exporter's DCGM_FI_DRIVER_VERSION label (the H200 capture's driver). */
export const SIM_DRIVER_VERSION = "580.159.04";

/** NVML clock event (throttle) reason bits (nvmlClocksEventReason*). */
export const CLOCK_EVENT = { gpuIdle: 0x1, swPowerCap: 0x4, swThermal: 0x20 } as const;

// Board figures by catalog GPU where a source gives them; anything else uses the class default below.
const BOARDS: Record<string, { limitW?: number; idleW?: number; smMHz?: number; memMHz?: number; src: string }> = {
  "h200-sxm": {
    limitW: 700,
    idleW: 126,
    smMHz: 1980,
    memMHz: 3201,
    src: "../shared/telemetry/h200 (nvidia-smi -q limits and max clocks; idle with a process holding its context)",
  },
  "h100-sxm": { limitW: 700, smMHz: 1980, src: "H100 SXM datasheet (up to 700 W); GH100 max SM clock as on H200" },
  "a100-80gb-sxm": { limitW: 400, smMHz: 1410, src: "A100 datasheet (400 W SXM, 1410 MHz boost)" },
  "rtx-pro-6000": { limitW: 600, src: "hardware.md §1 rtxpro-spec (600 W)" },
};

const CLASS_DEFAULT = {
  limitW: 400,
  idleShare: 0.18,
  smMHz: 1800,
  memMHz: 1600,
};

/** Resolves the power/clock facts: the profile's fields, else the board table, else a labelled class default. */
export function gpuPowerSpec(profile: Profile): GpuPowerSpec {
  const { gpu } = profileHardware(profile);
  const h = profile.hardware;
  const b = BOARDS[gpu.id];
  const src = (given: number | undefined, board: number | undefined, what: string) =>
    given !== undefined ? "profile" : board !== undefined ? (b?.src ?? "board table") : `class default (${what})`;
  const powerLimitW = h.powerLimitW ?? b?.limitW ?? CLASS_DEFAULT.limitW;
  const idleW = h.idleW ?? b?.idleW ?? CLASS_DEFAULT.idleShare * powerLimitW;
  return {
    powerLimitW,
    enforcedLimitW: Math.min(h.enforcedPowerLimitW ?? powerLimitW, powerLimitW),
    idleW: Math.min(idleW, powerLimitW),
    smClockMaxMHz: h.smClockMaxMHz ?? b?.smMHz ?? CLASS_DEFAULT.smMHz,
    memClockMHz: h.memClockMHz ?? b?.memMHz ?? CLASS_DEFAULT.memMHz,
    peakBandwidthGBs: gpu.bandwidthGBs,
    peakTflops: gpu.tflops.bf16,
    memoryMiB: Math.round(gpu.memoryGB * 1024),
    sources: {
      powerLimitW: src(h.powerLimitW, b?.limitW, `unknown for ${gpu.name}: ${CLASS_DEFAULT.limitW} W`),
      idleW: src(
        h.idleW,
        b?.idleW,
        `unknown for ${gpu.name}: ${CLASS_DEFAULT.idleShare} × the limit, the H200 capture's idle share`,
      ),
      smClockMaxMHz: src(h.smClockMaxMHz, b?.smMHz, `unknown for ${gpu.name}: ${CLASS_DEFAULT.smMHz} MHz`),
      memClockMHz: src(h.memClockMHz, b?.memMHz, `unknown for ${gpu.name}: ${CLASS_DEFAULT.memMHz} MHz`),
    },
  };
}

/** One step's modeled effect on one serving GPU. */
export interface StepEffect {
  /** Simulated duration, ms. */
  simMs: number;
  energyJ: number;
  powerW: number;
  /** Power the activity would draw without the limit (> powerW when capped). */
  uncappedW: number;
  capped: boolean;
  smClockMHz: number;
  dramBytes: number;
  flops: number;
  /** Collective payload bytes this GPU sends (and receives) in the step. */
  txBytes: number;
  /** Sim ms with SM-filling kernels (weights, KV, compute, sampling, drafter). */
  smMs: number;
  /** Sim ms with any kernel running (the step minus launch and scheduler gaps). */
  kernelMs: number;
  /** Sim ms streaming weights and KV. */
  memMs: number;
  /**
   * Sim ms the GPU is busy: the step minus its host work (launch, scheduler, per-step sampling). The sim's
   * engine does not overlap host work with the GPU's (no async scheduling), so that time reads idle.
   */
  gpuMs: number;
}

const I = Object.fromEntries(COMPONENTS.map((c, i) => [c, i])) as Record<(typeof COMPONENTS)[number], number>;

/** The modeled effect of one step of `shape` lasting `simMs` (its mean × jitter) on each serving GPU. Pure. */
export function stepEffect(
  model: StepModel,
  spec: GpuPowerSpec,
  shape: BatchShape,
  simMs: number,
  scratch = new Float64Array(COMPONENTS.length),
): StepEffect {
  const meanMs = model.componentsInto(shape, scratch);
  const k = meanMs > 0 ? simMs / meanMs : 0;
  const { dramBytes, flops } = model.stepWork(shape, scratch);
  const tp = model.config.tp;
  let txBytes = 0;
  const calls = model.allReduceCalls;
  if (calls > 0) {
    const T = model.tokens(shape);
    const call = model.allReduceCall(T, model.mode(shape) === "eager");
    const path = call.impl === "custom" ? "one-shot" : model.config.algorithm === "Tree" ? "tree" : "ring";
    txBytes = calls * allReduceTxBytesPerGpu(T * model.allReduceBytesPerToken, tp, path);
    // The logits gather for sampling, one row per sequence sampled this step (not per prompt token): every
    // rank but the root sends its vocab/TP shard (spread evenly over the GPUs here).
    const m = model.profile.model;
    const sampled = shape.decodeSeqs + shape.prefillSeqs;
    txBytes += (sampled * (m.vocabSize / tp) * m.activationBytes * (tp - 1)) / tp;
  }
  const c = scratch;
  const smMs = (c[I.weights]! + c[I.kv]! + c[I.compute]! + c[I.sampling]! + c[I.draft]!) * k;
  const kernelMs = simMs - (c[I.launch]! + c[I.scheduler]!) * k;
  const memMs = (c[I.weights]! + c[I.kv]!) * k;
  const gpuMs = Math.max(0, simMs - (c[I.launch]! + c[I.scheduler]! + c[I.sampling]!) * k);
  if (simMs <= 0)
    return {
      simMs: 0,
      energyJ: 0,
      powerW: spec.idleW,
      uncappedW: spec.idleW,
      capped: false,
      smClockMHz: spec.smClockMaxMHz,
      dramBytes,
      flops,
      txBytes,
      smMs: 0,
      kernelMs: 0,
      memMs: 0,
      gpuMs: 0,
    };
  const dram = Math.min(1, dramBytes / (spec.peakBandwidthGBs * 1e6 * simMs));
  const sm = Math.min(1, smMs / simMs);
  const tensor = Math.min(1, flops / (spec.peakTflops * 1e9 * simMs));
  const range = spec.powerLimitW - spec.idleW;
  const dyn = range * (POWER_MODEL.dram * dram + POWER_MODEL.sm * sm + POWER_MODEL.tensor * tensor);
  const uncappedW = spec.idleW + dyn;
  const limit = Math.max(spec.enforcedLimitW, spec.idleW);
  const capped = uncappedW > limit;
  const powerW = capped ? limit : uncappedW;
  // Capped: the clock the limit allows if dynamic power scales with it (step timing is not changed).
  const smClockMHz = capped && dyn > 0 ? (spec.smClockMaxMHz * (limit - spec.idleW)) / dyn : spec.smClockMaxMHz;
  return {
    simMs,
    energyJ: (powerW * simMs) / 1000,
    powerW,
    uncappedW,
    capped,
    smClockMHz,
    dramBytes,
    flops,
    txBytes,
    smMs,
    kernelMs,
    memMs,
    gpuMs,
  };
}

/**
 * Expected energy per generated token at steady decode of `batch` sequences at `contextTokens` each (steps back
 * to back, no idle), summed over the serving GPUs. For docs and tests; the live counters integrate each step.
 */
export function expectedJoulesPerToken(
  profile: Profile,
  knobs: Knobs,
  batch: number,
  contextTokens: number,
): { joulesPerToken: number; stepMs: number; powerW: number; capped: boolean; gpus: number } {
  const model = new StepModel(profile, knobs);
  const shape = decodeBatch(batch, contextTokens);
  const stepMs = model.stepMs(shape);
  const e = stepEffect(model, gpuPowerSpec(profile), shape, stepMs);
  const gpus = model.config.tp;
  const tokens = model.tokens(shape);
  return { joulesPerToken: (e.energyJ * gpus) / tokens, stepMs, powerW: e.powerW, capped: e.capped, gpus };
}

/** The step effect's additive quantities: a total sums each, times the share of the step it counts. */
const SUMMED = ["energyJ", "simMs", "dramBytes", "flops", "txBytes", "smMs", "kernelMs", "memMs", "gpuMs"] as const;

/** Cumulative per-GPU quantities (the serving GPUs share one set: TP ranks do the same work). */
interface Totals extends Pick<StepEffect, (typeof SUMMED)[number]> {
  wallMs: number;
  /** Wall ms with the GPU busy (each step's wall span × its gpuMs share). */
  gpuWallMs: number;
  cappedWallMs: number;
  /** ∫ SM clock d(wall ms) over step time. */
  clockWallMs: number;
}

const zeroTotals = (): Totals => ({
  energyJ: 0,
  simMs: 0,
  wallMs: 0,
  dramBytes: 0,
  flops: 0,
  txBytes: 0,
  smMs: 0,
  kernelMs: 0,
  memMs: 0,
  gpuMs: 0,
  gpuWallMs: 0,
  cappedWallMs: 0,
  clockWallMs: 0,
});

/** One GPU's cumulative modeled state at a moment. */
export interface GpuTruth {
  gpu: number;
  uuid: string;
  serving: boolean;
  /** Modeled energy since the sim started, J (the exposition's counter = bootEnergyJ + this, in mJ). */
  energyJ: number;
  dramBytes: number;
  pcieTxBytes: number;
  pcieRxBytes: number;
  nvlinkTxBytes: number;
  nvlinkRxBytes: number;
  /** Simulated ms with a step running, and the same in wall ms. */
  busySimMs: number;
  busyWallMs: number;
  /** Of busyWallMs, the wall ms the GPU itself was busy (host work left out): what DCGM_FI_DEV_GPU_UTIL reads. */
  gpuBusyWallMs: number;
  powerCappedWallMs: number;
}

export interface TelemetryTruth {
  /** Engine clock (performance.now) and Unix time of this snapshot, and simulated ms since the sim started. */
  wallMs: number;
  unixS: number;
  simMs: number;
  /** Simulated seconds per wall second (1 with --speed zero). */
  timeScale: number;
  generatedTokens: number;
  gpus: GpuTruth[];
}

export interface SimTelemetryOptions {
  model: StepModel;
  /** Simulated per wall ms (--time-scale; 1 with --speed zero). */
  timeScale: number;
  speedZero: boolean;
  seed: number;
  hostname: string;
  /** Engine clock at start (ms). */
  startMs: number;
}

interface Step {
  startMs: number;
  endMs: number;
  e: StepEffect;
}

/** A closed collection interval: the values the exposition shows until the next one. */
interface Collection {
  seq: number;
  wallMs: number;
  unixS: number;
  truth: TelemetryTruth;
  /** Gauges averaged over the interval that ended here, per GPU. */
  gauges: GpuGauges[];
}

interface GpuGauges {
  powerW: number;
  gpuUtil: number;
  memCopyUtil: number;
  smClockMHz: number;
  tempC: number;
  grActive: number;
  smActive: number;
  tensorActive: number;
  dramActive: number;
  pcieTxBps: number;
  pcieRxBps: number;
  nvlinkTxBps: number;
  nvlinkRxBps: number;
  reasons: number;
}

/** Accumulates the step timeline and renders dcgm-exporter's exposition. */
export class SimTelemetry {
  readonly spec: GpuPowerSpec;
  readonly gpuCount: number;
  readonly serving: number;
  readonly uuids: string[];
  readonly bootEnergyJ: number[];
  /** Where collective bytes go: the GPUs' PCIe slots or NVLink. */
  readonly link: "pcie" | "nvlink";
  private readonly o: SimTelemetryOptions;
  private readonly scratch = new Float64Array(COMPONENTS.length);
  /** Totals of steps that ended before `current` began. */
  private done = zeroTotals();
  private current: Step | null = null;
  private last: Collection;
  private seq = 0;

  constructor(o: SimTelemetryOptions) {
    this.o = o;
    const p = o.model.profile;
    this.spec = gpuPowerSpec(p);
    this.gpuCount = p.hardware.gpuCount;
    this.serving = Math.min(o.model.config.tp, this.gpuCount);
    const kind = profileHardware(p).link.kind;
    this.link = kind === "nvlink" || kind === "nvlink-bridge" ? "nvlink" : "pcie";
    this.uuids = Array.from({ length: this.gpuCount }, (_, i) => gpuUuid(p.name, o.seed, i));
    // "Since boot": a deterministic uptime of 1–3 days at idle power, so consumers must take deltas.
    this.bootEnergyJ = this.uuids.map((_, i) => {
      const uptimeS = 86_400 * (1 + (mix32(o.seed ^ mix32(i + 0x1d1e)) / 4294967296) * 2);
      return Math.floor(uptimeS * this.spec.idleW);
    });
    this.last = this.snapshotCollection(o.startMs, Date.now() / 1000);
  }

  /**
   * True from a step's start until the engine reports idle. While busy, the next step starts at the current one's
   * end even when the engine learns of it late (a late timer), so nothing past that end is settled yet: reads
   * stop there instead of calling it idle and rewriting it later.
   */
  private busy = false;

  /** The engine scheduled a step [startMs, endMs] (wall) whose model mean is meanMs and jitter factor `jitter`. */
  onStepBegin(startMs: number, endMs: number, shape: BatchShape, meanMs: number, jitter: number): void {
    this.busy = true;
    if (this.current) this.fold(this.current);
    const simMs = this.o.speedZero ? meanMs : meanMs * jitter;
    this.current = { startMs, endMs, e: stepEffect(this.o.model, this.spec, shape, simMs, this.scratch) };
  }

  /** The engine has no work: time after the last step is idle, and the next step starts no earlier than now. */
  onIdle(): void {
    this.busy = false;
  }

  /** The latest wall time the timeline is settled for, given a read at t. */
  private settled(t: number): number {
    const s = this.current;
    return this.busy && s && t > s.endMs ? s.endMs : t;
  }

  private fold(s: Step): void {
    addStep(this.done, s, 1);
  }

  /** Serving-GPU totals at wall time t (the running step counted pro rata over its wall span). */
  private totalsAt(t: number): Totals {
    const out = { ...this.done };
    const s = this.current;
    if (s && t > s.startMs) {
      const span = s.endMs - s.startMs;
      addStep(out, s, span > 0 ? Math.min(1, (t - s.startMs) / span) : 1);
    } else if (s && s.endMs <= s.startMs && t >= s.startMs) addStep(out, s, 1);
    return out;
  }

  /** The cumulative modeled state of every GPU at wall time t (or the settled time before it; see `busy`). */
  truth(at: number, unixS: number, generatedTokens: number): TelemetryTruth {
    const t = this.settled(at);
    const tot = this.totalsAt(t);
    const elapsed = Math.max(0, t - this.o.startMs);
    const scale = this.o.speedZero ? 1 : this.o.timeScale;
    const idleWall = Math.max(0, elapsed - tot.wallMs);
    const servingE = tot.energyJ + (this.spec.idleW * idleWall * scale) / 1000;
    const idleE = (this.spec.idleW * elapsed * scale) / 1000;
    const gpus: GpuTruth[] = this.uuids.map((uuid, gpu) => {
      const on = gpu < this.serving;
      const tx = on ? tot.txBytes : 0;
      return {
        gpu,
        uuid,
        serving: on,
        energyJ: on ? servingE : idleE,
        dramBytes: on ? tot.dramBytes : 0,
        pcieTxBytes: this.link === "pcie" ? tx : 0,
        pcieRxBytes: this.link === "pcie" ? tx : 0,
        nvlinkTxBytes: this.link === "nvlink" ? tx : 0,
        nvlinkRxBytes: this.link === "nvlink" ? tx : 0,
        busySimMs: on ? tot.simMs : 0,
        busyWallMs: on ? tot.wallMs : 0,
        gpuBusyWallMs: on ? tot.gpuWallMs : 0,
        powerCappedWallMs: on ? tot.cappedWallMs : 0,
      };
    });
    // With --speed zero steps take no wall time; its simulated clock is the wall clock.
    return { wallMs: t, unixS, simMs: elapsed * scale, timeScale: scale, generatedTokens, gpus };
  }

  /** Closes the collection interval at wall time t: the exposition then shows averages over it. */
  collect(at: number, unixS: number, generatedTokens: number): void {
    const t = this.settled(at);
    // Nothing settled since the last collection: keep showing it.
    if (t <= this.last.wallMs) return;
    this.last = this.snapshotCollection(t, unixS, generatedTokens);
  }

  /** The last collection (sequence number, stamps, truth at that moment). */
  get lastCollection(): { seq: number; wallMs: number; unixS: number; truth: TelemetryTruth } {
    const { seq, wallMs, unixS, truth } = this.last;
    return { seq, wallMs, unixS, truth };
  }

  private prevTotals: Totals = zeroTotals();

  private snapshotCollection(t: number, unixS: number, tokens = 0): Collection {
    const truth = this.truth(t, unixS, tokens);
    t = truth.wallMs;
    const tot = this.totalsAt(t);
    const prev = this.last;
    const prevTot = this.prevTotals;
    this.prevTotals = tot;
    const dWall = prev ? t - prev.wallMs : 0;
    const scale = this.o.speedZero ? 1 : this.o.timeScale;
    const dSim = dWall * scale;
    const spec = this.spec;
    const gauges = truth.gpus.map((g, i): GpuGauges => {
      const p = prev?.truth.gpus[i];
      const idleGauges: GpuGauges = {
        powerW: spec.idleW * scale,
        gpuUtil: 0,
        memCopyUtil: 0,
        smClockMHz: spec.smClockMaxMHz,
        tempC: THERMAL_MODEL.baseC,
        grActive: 0,
        smActive: 0,
        tensorActive: 0,
        dramActive: 0,
        pcieTxBps: 0,
        pcieRxBps: 0,
        nvlinkTxBps: 0,
        nvlinkRxBps: 0,
        reasons: CLOCK_EVENT.gpuIdle,
      };
      if (!p || dWall <= 0) return idleGauges;
      const perWallS = 1000 / dWall;
      const dE = g.energyJ - p.energyJ;
      const modeledW = dSim > 0 ? (dE * 1000) / dSim : spec.idleW;
      const g0: GpuGauges = {
        ...idleGauges,
        powerW: dE * perWallS,
        tempC: THERMAL_MODEL.baseC + THERMAL_MODEL.cPerW * Math.max(0, modeledW - spec.idleW),
        pcieTxBps: (g.pcieTxBytes - p.pcieTxBytes) * perWallS,
        pcieRxBps: (g.pcieRxBytes - p.pcieRxBytes) * perWallS,
        nvlinkTxBps: (g.nvlinkTxBytes - p.nvlinkTxBytes) * perWallS,
        nvlinkRxBps: (g.nvlinkRxBytes - p.nvlinkRxBytes) * perWallS,
      };
      if (!g.serving) return g0;
      const busyWall = tot.wallMs - prevTot.wallMs;
      const ratio = (x: number) => (dSim > 0 ? Math.min(1, Math.max(0, x / dSim)) : 0);
      const capped = tot.cappedWallMs - prevTot.cappedWallMs;
      return {
        ...g0,
        // DCGM's GPU_UTIL: the share of the interval with a kernel running; the host's part of a step is idle.
        gpuUtil: Math.min(1, (tot.gpuWallMs - prevTot.gpuWallMs) / dWall),
        memCopyUtil: ratio(tot.memMs - prevTot.memMs),
        // Idle time runs at the max clock: a serving process keeps clocks up between steps.
        smClockMHz: (tot.clockWallMs - prevTot.clockWallMs + (dWall - busyWall) * spec.smClockMaxMHz) / dWall,
        grActive: ratio(tot.kernelMs - prevTot.kernelMs),
        smActive: ratio(tot.smMs - prevTot.smMs),
        tensorActive: ratio((tot.flops - prevTot.flops) / (spec.peakTflops * 1e9)),
        dramActive: ratio((tot.dramBytes - prevTot.dramBytes) / (spec.peakBandwidthGBs * 1e6)),
        reasons: (capped > 0 ? CLOCK_EVENT.swPowerCap : 0) | (busyWall > 0 ? 0 : CLOCK_EVENT.gpuIdle),
      };
    });
    return { seq: this.seq++, wallMs: t, unixS, truth, gauges };
  }

  /** dcgm-exporter's text exposition of the last collection. */
  render(): string {
    const c = this.last;
    const p = this.o.model.profile;
    const spec = this.spec;
    const usedMiB = Math.round(spec.memoryMiB * GPU_MEMORY_UTILIZATION);
    const labels = this.uuids.map(
      (uuid, i) =>
        `gpu="${i}",UUID="${uuid}",pci_bus_id="${pciBusId(i)}",device="nvidia${i}",modelName="${esc(p.hardware.gpu)}",Hostname="${esc(this.o.hostname)}",DCGM_FI_DRIVER_VERSION="${SIM_DRIVER_VERSION}"`,
    );
    const readings = labels.map(
      (_, i): Reading => ({
        g: c.gauges[i]!,
        t: c.truth.gpus[i]!,
        spec,
        bootEnergyJ: this.bootEnergyJ[i]!,
        serving: i < this.serving,
        usedMiB,
      }),
    );
    let out = "";
    for (const f of FAMILIES) {
      out += `# HELP ${f.name} ${f.help}\n# TYPE ${f.name} ${f.type}\n`;
      for (let i = 0; i < labels.length; i++) out += `${f.name}{${labels[i]}} ${f.value(readings[i]!)}\n`;
    }
    return out;
  }
}

function addStep(out: Totals, s: Step, f: number): void {
  const e = s.e;
  const wall = (s.endMs - s.startMs) * f;
  for (const k of SUMMED) out[k] += e[k] * f;
  out.wallMs += wall;
  if (e.simMs > 0) out.gpuWallMs += (wall * e.gpuMs) / e.simMs;
  if (e.capped) out.cappedWallMs += wall;
  out.clockWallMs += e.smClockMHz * wall;
}

interface Family {
  name: string;
  type: "gauge" | "counter";
  help: string;
  /** The sample's value for one GPU, formatted as dcgm-exporter prints it. */
  value: (r: Reading) => string;
}

/** What a family's value reads for one GPU: the last collection's gauges and truth, and the board's facts. */
interface Reading {
  g: GpuGauges;
  t: GpuTruth;
  spec: GpuPowerSpec;
  bootEnergyJ: number;
  serving: boolean;
  usedMiB: number;
}

const int = (x: number) => Math.round(x).toFixed(0);
const dbl = (x: number) => x.toFixed(6);

const family =
  (type: Family["type"]) =>
  (name: string, help: string, value: Family["value"]): Family => ({ name, type, help, value });
const gauge = family("gauge");
const counter = family("counter");

/** DCGM words every link byte-rate field the same way. */
const linkRate = (
  name: string,
  dir: "transmitted" | "received",
  link: string,
  field: "pcieTxBps" | "pcieRxBps" | "nvlinkTxBps" | "nvlinkRxBps",
): Family =>
  gauge(
    name,
    `The rate of data ${dir} over ${link} - including both protocol headers and data payloads - in bytes per second.`,
    (r) => int(r.g[field]),
  );

/**
 * Names, types and HELP as dcgm-exporter 4.5.3-4.8.2 writes them (etc/default-counters.csv,
 * etc/dcp-metrics-included.csv; commented-out lines enabled). Fields in no stock CSV (NVLink rates, clock event
 * reasons) take DCGM's own field descriptions (dcgm_fields.h), worded as the PCIe rate lines are.
 */
export const FAMILIES: readonly Family[] = [
  gauge("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", (r) => int(r.g.smClockMHz)),
  gauge("DCGM_FI_DEV_MEM_CLOCK", "Memory clock frequency (in MHz).", (r) => int(r.spec.memClockMHz)),
  gauge("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", (r) => int(r.g.tempC)),
  gauge("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", (r) => dbl(r.g.powerW)),
  counter("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "Total energy consumption since boot (in mJ).", (r) =>
    Math.floor((r.bootEnergyJ + r.t.energyJ) * 1000).toFixed(0),
  ),
  gauge("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", (r) => int(r.g.gpuUtil * 100)),
  gauge("DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).", (r) => int(r.g.memCopyUtil * 100)),
  counter("DCGM_FI_DEV_POWER_VIOLATION", "Throttling duration due to power constraints (in ns).", (r) =>
    Math.floor(r.t.powerCappedWallMs * 1e6).toFixed(0),
  ),
  counter("DCGM_FI_DEV_THERMAL_VIOLATION", "Throttling duration due to thermal constraints (in ns).", () => "0"),
  gauge(
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
    "Current clock event reasons (bitmask of DCGM_CLOCKS_EVENT_REASON_*)",
    (r) => String(r.g.reasons),
  ),
  gauge("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", (r) =>
    String(r.serving ? r.spec.memoryMiB - r.usedMiB : r.spec.memoryMiB),
  ),
  gauge("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", (r) => String(r.serving ? r.usedMiB : 0)),
  gauge("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "Ratio of time the graphics engine is active.", (r) => dbl(r.g.grActive)),
  gauge("DCGM_FI_PROF_SM_ACTIVE", "The ratio of cycles an SM has at least 1 warp assigned.", (r) => dbl(r.g.smActive)),
  gauge("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "Ratio of cycles the tensor (HMMA) pipe is active.", (r) =>
    dbl(r.g.tensorActive),
  ),
  gauge(
    "DCGM_FI_PROF_DRAM_ACTIVE",
    "Ratio of cycles the device memory interface is active sending or receiving data.",
    (r) => dbl(r.g.dramActive),
  ),
  linkRate("DCGM_FI_PROF_PCIE_TX_BYTES", "transmitted", "the PCIe bus", "pcieTxBps"),
  linkRate("DCGM_FI_PROF_PCIE_RX_BYTES", "received", "the PCIe bus", "pcieRxBps"),
  linkRate("DCGM_FI_PROF_NVLINK_TX_BYTES", "transmitted", "NVLink", "nvlinkTxBps"),
  linkRate("DCGM_FI_PROF_NVLINK_RX_BYTES", "received", "NVLink", "nvlinkRxBps"),
];

/** A GPU UUID in nvidia-smi's form, deterministic from the profile, seed and index. */
export function gpuUuid(profileName: string, seed: number, index: number): string {
  let h = 0x9e3779b9 ^ seed;
  for (let i = 0; i < profileName.length; i++) h = mix32(h ^ profileName.charCodeAt(i));
  const words = [0, 1, 2, 3].map((w) =>
    mix32(h ^ mix32(index * 4 + w + 1))
      .toString(16)
      .padStart(8, "0"),
  );
  const hex = words.join("");
  return `GPU-${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`;
}

function pciBusId(i: number): string {
  return `00000000:${(0x18 + i * 0x10).toString(16).toUpperCase().padStart(2, "0")}:00.0`;
}

function esc(s: string): string {
  return s.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
}
