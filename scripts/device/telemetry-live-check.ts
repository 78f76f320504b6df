// Device check of the live nvidia-smi source (src/telemetry/sources/nvidia-smi.ts) against the real
// binary: records it (query loop + dmon) while a PyTorch bf16 matmul load runs, and compares the energy
// integrated from its power readings over the load window with NVML's total-energy counter read by the
// load itself at the window's edges. Also checks the sample clock against ours and that nothing is left
// running. Run on a lent device: `npx tsx scripts/device/telemetry-live-check.ts` (writes $OUT/telemetry-live.json).
import { spawn } from "node:child_process";
import { once } from "node:events";
import { writeFileSync } from "node:fs";
import { cutToWindow, startTelemetry } from "../../src/telemetry/recorder.ts";
import { liveTelemetryGroups } from "../../src/telemetry/sources/index.ts";
import type { TelemetrySample } from "../../src/telemetry/types.ts";

const LOAD = `
import json, time, torch, pynvml
pynvml.nvmlInit(); h = pynvml.nvmlDeviceGetHandleByIndex(0)
A = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16); B = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
for _ in range(3): A @ B
torch.cuda.synchronize(); time.sleep(1.0)
t0 = time.time(); e0 = pynvml.nvmlDeviceGetTotalEnergyConsumption(h)
n = 0
while time.time() - t0 < 6:
    for _ in range(20): A @ B
    n += 20
    if n % 200 == 0: torch.cuda.synchronize()
torch.cuda.synchronize()
t1 = time.time(); e1 = pynvml.nvmlDeviceGetTotalEnergyConsumption(h)
time.sleep(1.0)
print(json.dumps({"t0": t0, "t1": t1, "energy_mJ": [e0, e1], "matmuls": n}))
`;

/** Trapezoid integral of one field over [a, b], values linearly interpolated at the edges. */
function integrate(samples: TelemetrySample[], field: "powerW" | "powerInstantW", a: number, b: number): number {
  const pts = samples.filter((s) => s[field] !== undefined).map((s) => [s.t, s[field]!] as const);
  const at = (t: number) => {
    for (let i = 1; i < pts.length; i++)
      if (pts[i]![0] >= t) {
        const [t0, v0] = pts[i - 1]!;
        const [t1, v1] = pts[i]!;
        return v0 + ((v1 - v0) * (t - t0)) / (t1 - t0);
      }
    return Number.NaN;
  };
  const inner = pts.filter(([t]) => t > a && t < b);
  const xs: Array<readonly [number, number]> = [[a, at(a)], ...inner, [b, at(b)]];
  let e = 0;
  for (let i = 1; i < xs.length; i++) e += ((xs[i]![1] + xs[i - 1]![1]) / 2) * (xs[i]![0] - xs[i - 1]![0]);
  return e;
}

const out = process.env.OUT ?? "/tmp";
const rec = await startTelemetry({ kind: "nvidia-smi", intervalMs: 100 }, { onProgress: (l) => console.error(l) });
const startedAt = Date.now() / 1000;
const py = spawn("python3", ["-c", LOAD], { stdio: ["ignore", "pipe", "inherit"] });
let text = "";
py.stdout.setEncoding("utf8").on("data", (d: string) => (text += d));
const [code] = await once(py, "exit");
const groupsBefore = liveTelemetryGroups();
const recording = await rec.stop();
const cap = recording.capture!;
if (code !== 0) throw new Error(`load exited ${code}`);
const truth = JSON.parse(text.trim().split("\n").at(-1)!) as { t0: number; t1: number; energy_mJ: [number, number] };
const nvmlJ = (truth.energy_mJ[1] - truth.energy_mJ[0]) / 1000;
const gpu = cap.samples.filter((s) => s.device === "gpu0");
const win = cutToWindow(cap, truth.t0, truth.t1).samples.filter((s) => s.device === "gpu0");
const avgJ = integrate(gpu, "powerW", truth.t0, truth.t1);
const instJ = integrate(gpu, "powerInstantW", truth.t0, truth.t1);
const query = gpu.filter((s) => s.powerW !== undefined);
const result = {
  window_s: truth.t1 - truth.t0,
  nvml_energy_J: nvmlJ,
  integrated_power_draw_J: avgJ,
  integrated_power_draw_instant_J: instJ,
  rel_err_power_draw: (avgJ - nvmlJ) / nvmlJ,
  rel_err_power_draw_instant: (instJ - nvmlJ) / nvmlJ,
  samples: cap.samples.length,
  query_samples: query.length,
  pcie_samples: gpu.filter((s) => s.pcieTxBps !== undefined).length,
  window_samples: win.length,
  first_sample_minus_start_s: (query[0]?.t ?? Number.NaN) - startedAt,
  sm_clock_in_window: [...new Set(win.map((s) => s.smClockMHz))].slice(0, 8),
  clock_event_reasons_in_window: [...new Set(win.map((s) => s.clockEventReasons))],
  notes: cap.notes,
  unavailable: cap.unavailable,
  detail: cap.source.detail,
  groups_while_running: groupsBefore.length,
  groups_left: liveTelemetryGroups(),
};
writeFileSync(`${out}/telemetry-live.json`, JSON.stringify({ result, capture: cap, truth }, null, 1));
console.log(JSON.stringify(result, null, 1));
