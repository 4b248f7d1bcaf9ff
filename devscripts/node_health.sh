#!/usr/bin/env bash
# `spark-gotchas node-health` live on a GPU machine without Slurm: the stand-in scontrol of
# tests/node_health_fakes.py keeps one node, gpu1 (Gres gpu:1), in a file; every pass runs the real
# preflight on this GPU (no replay) and drains or undrains gpu1 there. What it shows: how long a
# pass takes against its budget on a real GPU (the first cold), that a GPU hidden by
# CUDA_VISIBLE_DEVICES='' drains the node with G1's line, and that the next healthy pass undrains it.
#
#   on the GPU machine: bash devscripts/batch.sh node_health        # carry [".whl"]
#
# Expected (the figures vary): pass 1 and 2 `node-health: gpu1: checks took N s of 39` with N well
# under 39, the G-lines, `node-health: gpu1: healthy: no FAIL` (a G9 WARN never drains), exit 0;
# pass 3 `G1 FAIL: NVML sees 1 GPU(s) (NVIDIA H200) but torch sees none: CUDA_VISIBLE_DEVICES=''
# hides it` and `node-health: gpu1: drained: spark-gotchas: G1 FAIL: NVML sees 1 GPU(s) …`, exit 1;
# pass 4 `node-health: gpu1: undrained: no FAIL now (was: spark-gotchas: G1 FAIL: …)`, exit 0;
# the stand-in's calls: two shows a pass (before and after its checks), an update State=DRAIN after
# pass 3's, State=UNDRAIN after pass 4's.
# Writes $OUT/transcript.txt (all of the above) and $OUT/slurm/ (the stand-in's files).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/node-health-out}
mkdir -p "$OUT"
PYTHON=${PYTHON:-python3}
exec > >(tee "$OUT/transcript.txt") 2>&1

"$PYTHON" - "$OUT/slurm" <<'EOF'
import sys
from pathlib import Path
sys.path.insert(0, "tests")
import node_health_fakes
print("+ stand-in scontrol:", node_health_fakes.fake_scontrol(Path(sys.argv[1]), {"gpu1": {"state": "IDLE", "gres": "gpu:1"}}))
EOF

pass() {
    local label=$1; shift
    echo "+ pass $label"
    local t0 rc=0
    t0=$(date +%s.%N)
    env "$@" "$PYTHON" -m spark_gotchas node-health --node gpu1 --scontrol "$OUT/slurm/scontrol" > "$OUT/pass.txt" 2>&1 || rc=$?
    grep -v '^    fix: ' "$OUT/pass.txt"
    echo "+ exit $rc after $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}') s"
}

nvidia-smi -L
pass "1: live, the first on this machine"
pass "2: live, again"
pass "3: CUDA_VISIBLE_DEVICES=''" CUDA_VISIBLE_DEVICES=
pass "4: live, the GPU visible again"
echo "+ the stand-in's calls"
cat "$OUT/slurm/calls.log"
echo "+ the node now"
cat "$OUT/slurm/NODES.json"; echo
