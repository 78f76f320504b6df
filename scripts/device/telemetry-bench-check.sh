#!/bin/bash
# Device check for `bench --telemetry nvidia-smi` (issue #29): while a memory-bound bf16 decode loop keeps the
# GPU busy, bench the embedded sim with telemetry from nvidia-smi; compare its J/token over the bench's own
# measured window with NVML's total-energy counter (read every 20 ms by the load process) over the same window.
# Run from the packed checkout on a lent device: bash scripts/device/telemetry-bench-check.sh (writes $OUT).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
CLI="node dist/cli/main.js"
python3 - "$OUT/nvml-energy.json" <<'PY' &
import json, sys, threading, time, torch, pynvml
pynvml.nvmlInit(); h = pynvml.nvmlDeviceGetHandleByIndex(0)
samples = []; stop = threading.Event()
def loop():
    while not stop.is_set():
        samples.append((time.time(), pynvml.nvmlDeviceGetTotalEnergyConsumption(h))); time.sleep(0.02)
th = threading.Thread(target=loop); th.start()
W = [torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16) for _ in range(64)]  # 8.6 GB of "weights"
x = torch.randn(1, 8192, device="cuda", dtype=torch.bfloat16)
t0 = time.time()
while time.time() - t0 < 40:
    for w in W: y = x @ w
    torch.cuda.synchronize()
stop.set(); th.join()
json.dump({"samples": samples}, open(sys.argv[1], "w"))
PY
LOAD=$!
$CLI sim --port 18123 --json > "$OUT/sim.log" 2>&1 &
SIM=$!
python3 -c "import time,urllib.request
for i in range(200):
  try: urllib.request.urlopen(\"http://127.0.0.1:18123/v1/models\"); break
  except Exception: time.sleep(0.1)"
sleep 4  # the load is warm
$CLI bench --base-url http://127.0.0.1:18123 --telemetry nvidia-smi --num-prompts 32 --concurrency 8 \
  --random-output-len 64 --ignore-eos --json > "$OUT/bench.json" 2> "$OUT/bench.err"
echo "bench exit $?"
$CLI bench --base-url http://127.0.0.1:18123 --telemetry nvidia-smi --num-prompts 8 --concurrency 4 \
  --random-output-len 32 --ignore-eos > "$OUT/bench.txt" 2>&1
echo "bench (text) exit $?"
wait $LOAD; kill $SIM 2>/dev/null
python3 - "$OUT" <<'PY'
import json, sys
o = sys.argv[1]
b = json.load(open(f"{o}/bench.json")); t = b["inferscope"]["telemetry"]; s = t["summary"]
e = json.load(open(f"{o}/nvml-energy.json"))["samples"]
def at(x):
    for (t0, e0), (t1, e1) in zip(e, e[1:]):
        if t0 <= x <= t1: return e0 + (e1 - e0) * (x - t0) / (t1 - t0)
    raise SystemExit(f"window {x} outside the NVML samples")
a, z = s["window"]["startS"], s["window"]["endS"]
nvml = (at(z) - at(a)) / 1000
r = {"source": t["source"], "window_s": z - a, "tokens": s["tokens"], "energy_smi_J": s["energyJ"], "energy_bound_J": s["energyErrorJ"],
     "energy_nvml_J": nvml, "jpt_smi": s["joulesPerToken"], "jpt_nvml": nvml / s["tokens"], "ratio": s["energyJ"] / nvml,
     "avg_power_W": s["avgPowerW"], "throttle": s["throttle"], "sm_clock": s["smClockMHz"]}
json.dump(r, open(f"{o}/check.json", "w"), indent=1); print(json.dumps(r, indent=1))
PY
