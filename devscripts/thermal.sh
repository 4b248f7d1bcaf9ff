#!/usr/bin/env bash
# G4 (thermal throttling) on a GPU machine: the fast checks, a 3-minute soak with its progress,
# CSV and PNG, a soak cut short by SIGINT, and what the soak's sampler costs the load.
# On the GPU machine: bash devscripts/batch.sh thermal (carry [".whl"]; batch.sh installs the
# suite). Prints everything to stdout (the G4 soak's and sampler cost's figures of
# docs/benchmarks.md); copies the 3-minute soak's CSV and PNG (only those two files) to
# ${OUT:-/tmp}/; the rest goes to a scratch folder that is removed at the end. Needs an NVIDIA GPU.
# Runtime: about 4.5 minutes on one H200 (a 3 min soak, 32 s of cost phases, four torch
# imports of ~6 s, a 2.5 s load spot check, a soak interrupted after ~12 s).
# Never changes clocks, power limits or GPU modes; never resets the GPU.
#
# What it must show:
#  1. NVML and nvidia-smi on this driver: which thermal fields and counters read (sources), and
#     that `nvidia-smi -q -d PERFORMANCE` counters parse;
#  2. `pytest -m fast -k g4`: three real G4 lines (at rest INFO; under load PASS, the SM clock
#     above the 990 MHz floor (at its power limit an H200 may sit below its 1980 MHz max) and
#     roughly 700 TFLOP/s against the 763 measured before; last soak SKIP: none in that dir),
#     the spot check's samples summarised, and the same lines replayed;
#  3. `pytest -m soak -k g4 --soak-duration 3m`: a "first window" progress line, one line per
#     minute with elapsed/left, °C, W, MHz, TFLOP/s and drift, then the G4 soak line and the
#     files; the CSV re-judged alone gives the same line; the snapshot replayed gives it too;
#     the next preflight's reboot check says the soak ended normally;
#  4. a soak SIGINT'ed after ~12 s (pytest exit 0): "cut short by SIGINT" in its line, the CSV
#     ending in an `end` row, the heartbeat's end marker;
#  5. sampler cost: load alone vs load + 1 Hz sampler (budget 1% of throughput), and memory
#     (this process and the load) flat over the sampled phase;
#  6. rows for docs/benchmarks.md.
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp}"
mkdir -p "$OUT"
SCRATCH="$(mktemp -d /tmp/g4-thermal.XXXXXX)"
trap 'rm -rf "$SCRATCH"' EXIT
export PYTHONUNBUFFERED=1
step() { echo; echo "=== [$(date +%T)] $*"; }
T0=$(date +%s)

step "1. NVML and nvidia-smi on this driver"
nvidia-smi --query-gpu=name,driver_version,temperature.gpu,power.draw,power.limit,clocks.sm,clocks.max.sm,clocks_event_reasons.active --format=csv
nvidia-smi --query-gpu=clocks_event_reasons_counters.sw_power_cap,clocks_event_reasons_counters.sw_thermal_slowdown,clocks_event_reasons_counters.hw_thermal_slowdown,clocks_event_reasons_counters.hw_power_brake_slowdown --format=csv 2>&1 | head -3
nvidia-smi -q -d PERFORMANCE | sed -n '/Clocks Event Reasons Counters/,/^$/p' | head -8
python3 - <<'EOF'
import json, time
from spark_gotchas.machine.readers.thermal import snapshot
h, i, how = snapshot.cuda0_handle()
snap = snapshot.snapshot_of(h, i, how)
print("snapshot:", json.dumps({"name": snap.name, "power_limit_w": snap.power_limit_w, "max_sm_clock_mhz": snap.max_sm_clock_mhz,
      "slowdown_temp_c": snap.slowdown_temp_c, "sample": vars(snap.sample), "unavailable": snap.unavailable}, default=str))
print("counters:", json.dumps({"values_us": snap.counters.values_us, "sources": snap.counters.sources,
      "unavailable": snap.counters.unavailable}))
t = time.perf_counter(); [snapshot.take_sample(h, time.time()) for _ in range(100)]
print(f"one NVML sample: {(time.perf_counter() - t) * 10:.2f} ms")
t = time.perf_counter(); snapshot.smi_counters(i)
print(f"one nvidia-smi counters read: {(time.perf_counter() - t) * 1000:.0f} ms")
EOF

step "2. pytest -m fast -k g4 (then replayed)"
python3 -m pytest -m fast -k g4 -p no:cacheprovider -rA --soak-dir "$SCRATCH/none" --spark-snapshot "$SCRATCH/fast.json" 2>&1 \
  | sed -n '/spark-gotchas ====/,$p'
python3 - "$SCRATCH/fast.json" <<'EOF'
import json, statistics, sys
spot = json.load(open(sys.argv[1]))["readings"].get("thermal.spot_check", {})
under = [s for s in spot.get("samples", []) if spot.get("load_start_s") is not None
         and spot["load_start_s"] + 0.3 <= s["t_s"] <= spot["load_end_s"]]
print(f"spot check: {len(spot.get('samples', []))} samples, {len(under)} under load; size {spot.get('size')}, "
      f"busy {spot.get('busy_fraction')}, {spot.get('tflops')} TFLOP/s")
for key in ("sm_clock_mhz", "power_w", "temperature_c", "utilization_pct"):
    vals = [s[key] for s in under if s.get(key) is not None]
    print(f"  {key}: min {min(vals, default=None)} median {statistics.median(vals) if vals else None} max {max(vals, default=None)}")
print("  counters before:", spot.get("counters_before", {}).get("values_us"))
print("  counters after: ", spot.get("counters_after", {}).get("values_us"))
EOF
python3 -m pytest -m fast -k g4 -p no:cacheprovider --spark-replay "$SCRATCH/fast.json" 2>&1 | sed -n '/spark-gotchas ====/,$p'

step "3. pytest -m soak -k g4 --soak-duration 3m (progress lines appear as it runs)"
SOAK="$SCRATCH/soak"
python3 -m pytest -m soak -k g4 -p no:cacheprovider -rA --soak-duration 3m --soak-dir "$SOAK" \
  --spark-snapshot "$SCRATCH/soak.json" 2>&1 | grep -v '^$'
CSV="$(ls -t "$SOAK"/g4-soak-*.csv | head -1)"
PNG="${CSV%.csv}.png"
echo "--- files"; ls -la "$SOAK"; wc -l "$CSV"; head -3 "$CSV"; tail -2 "$CSV"; cat "$SOAK/g4-soak.heartbeat.json"; echo
echo "--- the CSV re-judged alone"; python3 -m spark_gotchas.runtime.soak.record "$CSV"
echo "--- the snapshot replayed"; python3 -m pytest -m soak -k g4 -p no:cacheprovider --spark-replay "$SCRATCH/soak.json" 2>&1 | grep '^G4 \|    fix'
echo "--- the next preflight's reboot check"; python3 -m pytest -m fast -k last_soak -p no:cacheprovider --soak-dir "$SOAK" 2>&1 | grep '^G4 '
cp "$CSV" "$OUT/" && { [ -f "$PNG" ] && cp "$PNG" "$OUT/"; }
echo "copied to $OUT: $(basename "$CSV") $( [ -f "$PNG" ] && basename "$PNG")"

step "4. a soak cut short by SIGINT after ~12 s"
timeout --preserve-status -s INT 12 python3 -m pytest -m soak -k g4 -p no:cacheprovider --soak-duration 60s --soak-dir "$SCRATCH/int" 2>&1 \
  | grep '^G4 \|G4 soak\|passed\|failed\|skipped'
echo "pytest exit: ${PIPESTATUS[0]}"
tail -1 "$(ls -t "$SCRATCH"/int/g4-soak-*.csv | head -1)"; cat "$SCRATCH/int/g4-soak.heartbeat.json"; echo

step "5. sampler cost: load alone 8 s, load + 1 Hz sampler 16 s, load alone 8 s"
python3 -m spark_gotchas.commands.soak_cost --seconds 16s --json > "$SCRATCH/cost.json"; echo "exit $?"
python3 - "$SCRATCH/cost.json" <<'EOF'
import json, sys
from spark_gotchas.commands.soak_cost import report
print("\n".join(report(json.load(open(sys.argv[1])))))
EOF

step "6. rows for docs/benchmarks.md"
python3 - "$SCRATCH/soak.json" "$SCRATCH/cost.json" <<'EOF'
import json, sys
from spark_gotchas.knowledge.readings.thermal import SoakReading
from spark_gotchas.base.serial import from_jsonable
snap = json.load(open(sys.argv[1]))
soak = from_jsonable(SoakReading, snap["readings"]["thermal.soak"])
cost = json.load(open(sys.argv[2]))
w = [x for x in soak.windows if x.tflops]
gpu = snap["platform"].get("gpu")
print(f"| {gpu} | 3 min soak, BF16 {soak.size}^3 | {w[0].tflops:.0f} -> {w[-1].tflops:.0f} TFLOP/s | "
      f"{max(x.temperature_max_c or 0 for x in w):.0f} °C max | {sum(x.power_mean_w or 0 for x in w[len(w)//2:]) / len(w[len(w)//2:]):.0f} W | "
      f"SM {min(x.sm_clock_min_mhz or 0 for x in w):.0f}-{max(x.sm_clock_max_mhz or 0 for x in w):.0f} MHz | "
      f"{soak.samples} samples, sampler busy {soak.sampler_busy_s:.2f} s |")
s = cost["sampled"]
print(f"| {gpu} | sampler cost | alone {cost['alone_1']['tflops']:.1f} / {cost['alone_2']['tflops']:.1f}, sampled {s['tflops']:.1f} TFLOP/s | "
      f"cost {cost['cost_fraction']:+.2%} (noise {cost['noise_fraction']:.2%}) | sampler {cost['sampler_cpu_fraction']:.2%} of a core | "
      f"RSS {s['parent_rss_start_bytes']/2**20:.1f} -> {s['parent_rss_end_bytes']/2**20:.1f} MiB; load {s['load_rss_first_bytes']/2**20:.0f} -> {s['load_rss_last_bytes']/2**20:.0f} MiB | "
      f"{s['samples']} samples over {cost['seconds']:.0f} s |")
EOF

echo; echo "total: $(( $(date +%s) - T0 )) s"
