#!/usr/bin/env bash
# The platform envelope and memory already gone, on a real GPU machine: that a real machine's live
# readings stay inside its profile's envelope (a real H100/H200 must never read as "not an H100
# reading"), that the recorded machine (host.platform) and the container's own memory limit
# (mem.cgroup) are read and replayed, and that a container limit a load cannot fit fails G3 live.
# On the GPU machine: bash devscripts/batch.sh envelope (carry [".whl"]; batch.sh installs the suite).
# Writes under $OUT (default /tmp/spark-gotchas-envelope): envelope-live.json (the snapshot),
# live.txt, replay.txt, cgroup.txt. Runtime: about 1 minute (two fast preflights, one G3 run).
#
# What it must show:
#  1. the live fast preflight with no line "not a … reading" and platform.beyond_envelope null;
#     the snapshot's host.platform (machine, kernel) and mem.cgroup; the same lines replayed;
#  2. each live figure beside its profile's ceiling (bandwidth vs datasheet, TFLOP/s vs dense peak,
#     power limit, max clock, NVML memory), each ratio below 1.05 / 1.10;
#  3. where this machine's cgroup is writable (root, cgroup v2 or the v1 memory controller), G3's
#     headroom check run inside a child cgroup limited to 4 GiB with --spark-model-gb 8 -> G3 FAIL
#     "… the container's limit leaves …".
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/spark-gotchas-envelope}"
mkdir -p "$OUT"
PY="${PY:-python3}"  # the interpreter the suite is installed in
step() { echo; echo "=== [$(date +%T)] $*"; }

step "1. live fast preflight, snapshot, replay"
nvidia-smi --query-gpu=name,memory.total,power.limit,power.max_limit,clocks.max.sm,compute_cap --format=csv
uname -m -r
timeout 240 "$PY" -m spark_gotchas -m fast -v --spark-snapshot "$OUT/envelope-live.json" > "$OUT/live.txt" 2>&1
echo "live exit $?"
grep -E '^G[0-9]+ ' "$OUT/live.txt"
timeout 240 "$PY" -m spark_gotchas -m fast --spark-replay "$OUT/envelope-live.json" > "$OUT/replay.txt" 2>&1
diff <(grep -E '^G[0-9]+ ' "$OUT/live.txt") <(grep -E '^G[0-9]+ ' "$OUT/replay.txt") && echo "replay: same G-lines"
grep -n "reading; \|reading$\|'s; .* not judged" "$OUT/live.txt" && echo "FOUND an envelope line on a real machine" \
  || echo "no envelope line (as it must be)"

step "2. each live figure beside its profile's ceiling"
"$PY" - "$OUT/envelope-live.json" <<'EOF'
import json, sys
from spark_gotchas.machine import platform
from spark_gotchas.machine.options import RunOptions
from spark_gotchas.machine.provider import Provider
from spark_gotchas.machine.snapshot import load

snap = load(sys.argv[1])
p = Provider(RunOptions(), snap)
prof = platform.profile(p)
env = prof.envelope
r = snap.readings
print("profile", prof.key, prof.title, "| platform", {k: snap.platform.get(k) for k in ("machine", "kernel", "beyond_envelope")})
print("host.platform", r.get("host.platform"))
print("mem.cgroup", r.get("mem.cgroup"))
def ratio(name, value, bound):
    if value and bound:
        print(f"  {name}: {value:.1f} of {bound:.1f} = {value / bound:.3f}")
bw = (r.get("bench.bandwidth") or {}).get("result") or {}
for m in bw.get("methods", []):
    ratio(f"bandwidth {m['method']} (GB/s)", m.get("gbps"), env.bandwidth_gbps)
for x in ((r.get("bench.gemm") or {}).get("result") or {}).get("results", []):
    ratio(f"GEMM {x['precision']} (TFLOP/s)", x.get("tflops"), env.peak_tflops.get(x["precision"]))
spot = r.get("thermal.spot_check") or {}
ratio("G4 load (TFLOP/s)", spot.get("tflops"), env.peak_tflops.get(spot.get("dtype", "bf16")))
rest = r.get("thermal.snapshot") or {}
ratio("power limit (W)", rest.get("power_limit_w"), env.power_limit_w)
ratio("max SM clock (MHz)", rest.get("max_sm_clock_mhz"), env.max_sm_clock_mhz)
for d in (r.get("gpu.inventory") or {}).get("devices", []):
    ratio(f"GPU {d['index']} NVML memory (bytes)", d.get("memory_total_bytes"), env.device_memory_bytes)
EOF

step "3. G3 headroom inside a 4 GiB child cgroup"
"$PY" -c "from spark_gotchas.machine.readers.mem import read_cgroup; print(read_cgroup())" | tee "$OUT/cgroup.txt"
child=""
if [ -w /sys/fs/cgroup/cgroup.subtree_control ] && grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
  child=/sys/fs/cgroup/spark-gotchas-envelope.$$; mkdir "$child" && echo $((4 << 30)) > "$child/memory.max"
elif [ -w /sys/fs/cgroup/memory ]; then
  child=/sys/fs/cgroup/memory/spark-gotchas-envelope.$$; mkdir "$child" && echo $((4 << 30)) > "$child/memory.limit_in_bytes"
fi
if [ -n "$child" ] && [ -d "$child" ]; then
  sh -c "echo \$\$ > $child/cgroup.procs && exec timeout 240 $PY -m spark_gotchas -m fast -v -k g3_load_headroom --spark-model-gb 8" 2>&1 \
    | grep -E '^G3 |fix:|fail:|pass:' | head -6
  rmdir "$child"
else
  echo "no writable cgroup here: step 3 not run (the reading above says what this machine's cgroup is)"
fi
