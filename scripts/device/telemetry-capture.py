"""Captures GPU telemetry on a lent device machine while the GPU runs known phases.

Phases: idle, a memory-bound batch-1 decode-shaped loop (bf16 mat-vecs over ~16 GB of weights),
a compute-bound bf16 matmul loop (to reach the power limit), idle. Beside them: nvidia-smi's query
loop (-lms), dmon, and NVML's total-energy counter read by this process. Writes everything under
$OUT with the phase boundaries (wall clock) and the energy counter at each boundary as ground truth.
Used to build test fixtures for src/telemetry; run: python3 scripts/device/telemetry-capture.py
"""
import json, os, subprocess, threading, time
import torch
import pynvml

OUT = os.environ.get("OUT", "/tmp/out")
os.makedirs(OUT, exist_ok=True)
FIELDS = os.environ.get("SMI_FIELDS", "timestamp,index,power.draw,power.draw.instant,power.limit,enforced.power.limit,utilization.gpu,utilization.memory,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,memory.used,memory.total,clocks_event_reasons.active,clocks_event_reasons.sw_power_cap,clocks_event_reasons.hw_slowdown,clocks_event_reasons.sw_thermal_slowdown,clocks_event_reasons.hw_thermal_slowdown,clocks_event_reasons.hw_power_brake_slowdown,pcie.link.gen.current")

def sh(cmd, name):
    r = subprocess.run(cmd, shell=True, capture_output=True, text=True)
    with open(f"{OUT}/{name}", "w") as f:
        f.write(r.stdout + ("\n# stderr:\n" + r.stderr if r.stderr else "") + f"\n# rc={r.returncode}\n")

sh("nvidia-smi --version; which dcgmi nv-hostengine dcgm-exporter amd-smi rocm-smi; ls /sys/class/powercap 2>&1", "env.txt")
sh("nvidia-smi --help-query-gpu", "help-query-gpu.txt")

def fields_ok(f):
    return subprocess.run(["nvidia-smi", f"--query-gpu={f}", "--format=csv"], capture_output=True).returncode == 0
if not fields_ok(FIELDS):  # older drivers name them clocks_throttle_reasons.*
    alt = FIELDS.replace("clocks_event_reasons", "clocks_throttle_reasons")
    FIELDS = alt if fields_ok(alt) else "timestamp,index,power.draw,power.draw.instant,utilization.gpu,utilization.memory,clocks.sm,clocks.mem,temperature.gpu,memory.used"

pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(0)
energy = []  # (unix s, mJ)
stop = threading.Event()
def energy_loop():
    while not stop.is_set():
        energy.append((time.time(), pynvml.nvmlDeviceGetTotalEnergyConsumption(h)))
        time.sleep(0.05)

q = subprocess.Popen(["nvidia-smi", f"--query-gpu={FIELDS}", "--format=csv", "-lms", "100"], stdout=open(f"{OUT}/smi-query.csv", "w"), stderr=subprocess.STDOUT)
d = subprocess.Popen(["nvidia-smi", "dmon", "-s", "pucvmet", "-d", "1", "-o", "T"], stdout=open(f"{OUT}/smi-dmon.txt", "w"), stderr=subprocess.STDOUT)
t = threading.Thread(target=energy_loop); t.start()

phases = []
def mark(name, **kw):
    torch.cuda.synchronize()
    phases.append({"name": name, "t": time.time(), "energy_mJ": pynvml.nvmlDeviceGetTotalEnergyConsumption(h), **kw})

torch.manual_seed(0)
# Llama-3.1-8B-shaped layer weights (bf16): 32 layers of qkv, o, gate_up, down + LM head
layers = [(torch.randn(6144, 4096, device="cuda", dtype=torch.bfloat16), torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16),
           torch.randn(28672, 4096, device="cuda", dtype=torch.bfloat16), torch.randn(4096, 14336, device="cuda", dtype=torch.bfloat16)) for _ in range(32)]
head = torch.randn(128256, 4096, device="cuda", dtype=torch.bfloat16)
wbytes = sum(w.numel() * 2 for l in layers for w in l) + head.numel() * 2
x = torch.randn(1, 4096, device="cuda", dtype=torch.bfloat16)
def step():
    y = x
    for qkv, o, gu, dn in layers:
        a = y @ qkv.T
        y = (a[:, :4096] @ o.T) + y
        g = y @ gu.T
        y = (torch.nn.functional.silu(g[:, :14336]) * g[:, 14336:]) @ dn.T + y
    return (y @ head.T).argmax()
for _ in range(5): step()
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g): step()
torch.cuda.synchronize()
time.sleep(3)
mark("idle-end")
n = 0; t0 = time.time()
while time.time() - t0 < 6:
    for _ in range(20): g.replay()
    n += 20
mark("decode-end", steps=n, weights_bytes=wbytes)
del layers, head, g
torch.cuda.empty_cache()
A = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16); B = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
for _ in range(3): A @ B
torch.cuda.synchronize()
mark("matmul-start")
n = 0; t0 = time.time(); qdone = False
while time.time() - t0 < 8:
    for _ in range(50): C = A @ B
    n += 50
    if not qdone and time.time() - t0 > 5:
        sh("nvidia-smi -q -d POWER,CLOCK,PERFORMANCE", "smi-q-perf-under-load.txt"); qdone = True
mark("matmul-end", matmuls=n, flops_each=2 * 8192**3)
time.sleep(3)
mark("idle2-end")
stop.set(); t.join(); q.terminate(); d.terminate(); q.wait(); d.wait()
json.dump({"phases": phases, "energy_samples": energy, "smi_fields": FIELDS}, open(f"{OUT}/truth.json", "w"), indent=1)
sh("nvidia-smi -q", "smi-q-after.txt")
print(json.dumps(phases, indent=1))
