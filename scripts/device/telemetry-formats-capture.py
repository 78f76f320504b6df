"""Second telemetry capture on a lent device: the output variants and load shapes the first capture
(telemetry-capture.py) lacks, with NVML's energy counter as truth.

Beside the load: the query loop twice (with header and units; and `noheader,nounits`), `dmon -o DT`
(date and time columns) and `dmon -s t` (PCIe only). Load: idle; a ramp (bf16 matmuls growing from 1024^3
to 8192^3 over ~6 s, so power climbs gradually); a 0.5 s pause; a 3 s burst of memory-bound mat-vecs; idle.
Writes $OUT/truth.json (phase bounds, wall clock, energy counter) and the captures.
Run: python3 scripts/device/telemetry-formats-capture.py
"""
import json, os, subprocess, threading, time
import torch
import pynvml

OUT = os.environ.get("OUT", "/tmp/out")
os.makedirs(OUT, exist_ok=True)
FIELDS = "timestamp,index,power.draw,power.draw.instant,enforced.power.limit,utilization.gpu,utilization.memory,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,memory.used,clocks_event_reasons.active"
if subprocess.run(["nvidia-smi", f"--query-gpu={FIELDS}", "--format=csv"], capture_output=True).returncode != 0:
    FIELDS = FIELDS.replace("clocks_event_reasons", "clocks_throttle_reasons")

pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(0)
energy = []
stop = threading.Event()
def energy_loop():
    while not stop.is_set():
        energy.append((time.time(), pynvml.nvmlDeviceGetTotalEnergyConsumption(h)))
        time.sleep(0.05)

procs = [
    subprocess.Popen(["nvidia-smi", f"--query-gpu={FIELDS}", "--format=csv", "-lms", "100"], stdout=open(f"{OUT}/smi-query.csv", "w"), stderr=subprocess.STDOUT),
    subprocess.Popen(["nvidia-smi", f"--query-gpu={FIELDS}", "--format=csv,noheader,nounits", "-lms", "200"], stdout=open(f"{OUT}/smi-query-noheader-nounits.csv", "w"), stderr=subprocess.STDOUT),
    subprocess.Popen(["nvidia-smi", "dmon", "-s", "pucvmet", "-d", "1", "-o", "DT"], stdout=open(f"{OUT}/smi-dmon-dt.txt", "w"), stderr=subprocess.STDOUT),
    subprocess.Popen(["nvidia-smi", "dmon", "-s", "t", "-d", "1"], stdout=open(f"{OUT}/smi-dmon-t.txt", "w"), stderr=subprocess.STDOUT),
]
t = threading.Thread(target=energy_loop); t.start()
phases = []
def mark(name, **kw):
    torch.cuda.synchronize()
    phases.append({"name": name, "t": time.time(), "energy_mJ": pynvml.nvmlDeviceGetTotalEnergyConsumption(h), **kw})

torch.manual_seed(0)
mats = {n: (torch.randn(n, n, device="cuda", dtype=torch.bfloat16), torch.randn(n, n, device="cuda", dtype=torch.bfloat16)) for n in (1024, 2048, 3072, 4096, 6144, 8192)}
W = [torch.randn(16384, 8192, device="cuda", dtype=torch.bfloat16) for _ in range(24)]  # 6.4 GB of weights
x = torch.randn(1, 8192, device="cuda", dtype=torch.bfloat16)
for n, (a, b) in mats.items(): a @ b
for w in W: x @ w.T
torch.cuda.synchronize()
time.sleep(3)
mark("idle-end")
for n, (a, b) in mats.items():  # ~1 s per size: power climbs step by step
    t0 = time.time()
    while time.time() - t0 < 1.0:
        for _ in range(10): a @ b
        torch.cuda.synchronize()
mark("ramp-end")
time.sleep(0.5)
mark("burst-start")
t0 = time.time(); steps = 0
while time.time() - t0 < 3.0:
    for w in W: x @ w.T
    steps += 1
    if steps % 20 == 0: torch.cuda.synchronize()
mark("burst-end", steps=steps)
time.sleep(3)
mark("idle2-end")
stop.set(); t.join()
for p in procs: p.terminate()
for p in procs: p.wait()
json.dump({"phases": phases, "energy_samples": energy, "smi_fields": FIELDS}, open(f"{OUT}/truth.json", "w"), indent=1)
print(json.dumps(phases, indent=1))
