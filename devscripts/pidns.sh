#!/usr/bin/env bash
# The preflight behind a container's wall: `spark-gotchas -m fast` as pid 1's child in a pid
# namespace of its own (`unshare --pid --fork --mount-proc`, as a container started without
# --pid=host) beside a job outside the namespace, which it cannot see by pid:
#   alone    nothing else on the GPU (the baseline, in the namespace);
#   gemm     a torch bf16 GEMM loop outside the namespace, computing all the while;
#   holder   an idle torch process outside the namespace holding 20 GB of GPU memory;
#   control  the same GEMM loop started inside the same namespace (visible there by pid).
# Before each case it records what NVML shows from inside the namespace and from outside
# (nvidia-smi's process list and the GPU's utilization, power and memory), so the lines can be
# read against what the driver really lists behind the wall.
#
#   on the GPU machine, the suite installed (bash devscripts/batch.sh pidns, or as floor_bench.sh says):
#   OUT=/tmp/pidns bash devscripts/pidns.sh
# Needs root (or unprivileged user namespaces: it falls back to `unshare --user --map-root-user`);
# where neither may make a pid namespace (a container whose seccomp profile forbids it) it says so
# in one line and exits 2.
# Writes under $OUT: CASE.txt (the preflight's output, -v), CASE.json (its JSON report),
# CASE.snap.json (its snapshot), CASE.nvml.txt (nvidia-smi inside and outside), CASE.replay.txt
# (the snapshot replayed outside the namespace: the same lines), job-*.txt; prints each case's
# G-lines with their fixes. Runtime: about 2.5 minutes on one H200 (four preflights of ~15 s,
# three torch jobs started, each up and computing in ~10 s). Never changes clocks, power limits
# or GPU modes; every job it starts ends with it (and on its own after 150 s at the latest).
#
# Expected, written before the first run (NVML may list the outside job under its host pid, which
# the namespace cannot map, or not at all: either way the lines name it):
#   gemm:    G4 WARN: NNN TFLOP/s, far below H200's 763-798: shared with a process outside this container
#              (or `G4 WARN: throttling under load: shared with a process outside this container`)
#            G5 WARN: read NNNN GB/s, [far] below H200's 4264-4400: shared with a process outside this container
#              (or PASS, the process named in its detail, if a compute-bound GEMM leaves the bandwidth be)
#            G6 WARN: another process outside this container uses the GPU: NVML lists no pid for it
#              (or `...: 1 pid NVML lists is not visible here`)
#            G7 INFO: BF16 NNN, FP8 NNNN TFLOP/s, shared with a process outside this container
#            G4's at-rest check (-v): `not at rest: a process outside this container uses the GPU (100% busy, NNN W)`;
#            no line or fix says cooling, the driver, NVIDIA support or "nothing else on the GPU".
#   holder:  G6 WARN: another process outside this container uses the GPU: NVML lists no pid for it
#              (detail: `0% busy, NN W of 700 W at rest; 20.5 GB held by no listed process at rest`)
#            G4 PASS, G5 PASS and G7 INFO as alone (rates the GPU's own; the holder in their details, idle at rest).
#   control: G4/G5 WARN and G7 INFO naming `pid N python3` (`shared with pid N python3`), G6 PASS
#            `1 workload beside this run, small or capped: pid N python3 (holds 0.9 GB)`.
#   alone:   the ten lines as on a bare H200 (G6 PASS: no other GPU workload among NVML's processes
#            and 0 command lines: the namespace's /proc holds only this run).
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/pidns}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
WORK="$(mktemp -d)"
JOBS=()
finish() {
  for pid in "${JOBS[@]}"; do kill "$pid" 2> /dev/null; done
  wait 2> /dev/null
  rm -rf "$WORK"
}
trap finish EXIT

cat > "$WORK/job.py" <<'EOF'
"""A GPU job for pidns.sh: `gemm` (a bf16 GEMM loop) or `hold GB` (idle, holding GB of GPU memory).
It writes READY once it runs, and ends by itself after 150 s."""
import pathlib
import sys
import time

import torch

mode, ready = sys.argv[1], pathlib.Path(sys.argv[-1])
deadline = time.monotonic() + 150
if mode == "gemm":
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn_like(a)
    c = a @ b
    torch.cuda.synchronize()
    ready.write_text("ready\n")
    while time.monotonic() < deadline:
        for _ in range(20):
            c = a @ b
        torch.cuda.synchronize()
else:
    held = torch.empty(int(float(sys.argv[2]) * 1e9), dtype=torch.uint8, device="cuda")
    held.fill_(1)
    torch.cuda.synchronize()
    ready.write_text("ready\n")
    while time.monotonic() < deadline:
        time.sleep(0.5)
EOF

# pid namespaces: as root, or through a user namespace where unprivileged ones are allowed
NS=(unshare --pid --fork --mount-proc)
if ! "${NS[@]}" true 2> /dev/null; then
  NS=(unshare --user --map-root-user --pid --fork --mount-proc)
  "${NS[@]}" true 2> /dev/null || { echo "no pid namespace here (unshare failed as root and as a user)"; exit 2; }
fi
echo "== $(date -u '+%Y-%m-%d %H:%M UTC') on $(hostname): $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1); namespaces: ${NS[*]}"

start_job() {  # NAME ARGS...: a job outside the namespace, up and running before it returns; its pid in JOB
  local name=$1; shift
  rm -f "$WORK/$name.ready"
  "$PY" "$WORK/job.py" "$@" "$WORK/$name.ready" > "$OUT/job-$name.txt" 2>&1 &
  JOB=$!
  JOBS+=("$JOB")
  for _ in $(seq 60); do [ -f "$WORK/$name.ready" ] && return 0; sleep 0.5; done
  echo "   (job $name did not start within 30 s: $(tail -1 "$OUT/job-$name.txt"))"
}

nvml_views() {  # CASE: what nvidia-smi shows of the GPU's processes outside and inside the namespace
  {
    echo "-- outside the namespace"
    nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv
    nvidia-smi --query-gpu=utilization.gpu,power.draw,power.limit,clocks.sm,memory.used,memory.reserved --format=csv
    echo "-- inside a pid namespace"
    "${NS[@]}" sh -c 'nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv; ls /proc | grep -c "^[0-9]"'
  } > "$OUT/$1.nvml.txt" 2>&1
}

# the preflight inside the namespace, from an empty folder; $JOB_INSIDE=1 starts the GEMM job there first
PREFLIGHT='cd "$1" && exec "$PY" -m spark_gotchas -m fast -v --json-report --json-report-file="$OUT/$2.json" --spark-snapshot "$OUT/$2.snap.json"'
INSIDE='cd "$1" && "$PY" "$WORK/job.py" gemm "$WORK/inside.ready" > "$OUT/job-inside.txt" 2>&1 & job=$!
for _ in $(seq 60); do [ -f "$WORK/inside.ready" ] && break; sleep 0.5; done
"$PY" -m spark_gotchas -m fast -v --json-report --json-report-file="$OUT/$2.json" --spark-snapshot "$OUT/$2.snap.json"
status=$?; kill $job; wait $job 2> /dev/null; exit $status'

preflight() {  # CASE [inside]: run it as the namespace's pid 1's child, then replay its snapshot outside
  if [ "$SECONDS" -gt 200 ]; then echo "-- $1: not run ($SECONDS s spent: the script keeps to about 4 minutes)"; return; fi
  local dir; dir="$(mktemp -d -p "$WORK")"
  export PY OUT WORK
  timeout 90 "${NS[@]}" sh -c "${2:-$PREFLIGHT}" sh "$dir" "$1" > "$OUT/$1.txt" 2>&1
  echo "-- $1: exit $? ($(grep -Eo '[0-9]+ passed[^=]*' "$OUT/$1.txt" | tail -1))"
  awk '/^=+ spark-gotchas =+$/ {on = 1; next} /^=/ {on = 0} on && /^(G[0-9]+ |    fix:|         )/' "$OUT/$1.txt"
  (cd "$dir" && "$PY" -m spark_gotchas -m fast --spark-replay "$OUT/$1.snap.json" > "$OUT/$1.replay.txt" 2>&1)
  if diff <(awk '/^=+ spark-gotchas =+$/ {on = 1; next} /^=/ {on = 0} on && /^G[0-9]+ /' "$OUT/$1.txt") \
          <(awk '/^=+ spark-gotchas =+$/ {on = 1; next} /^=/ {on = 0} on && /^G[0-9]+ /' "$OUT/$1.replay.txt") > /dev/null
  then echo "   replayed outside the namespace: the same G-lines"
  else echo "   replayed outside the namespace: G-lines differ (see $1.replay.txt)"; fi
  grep -E "^    (info|pass|warn|fail): not at rest" "$OUT/$1.txt" | head -2
  grep -ciE "cooling|NVIDIA support|nothing else on the GPU" "$OUT/$1.txt" | sed 's/^/   lines naming cooling, support or "nothing else": /'
}

echo "== alone, in a pid namespace of its own"; nvml_views alone; preflight alone
echo "== a bf16 GEMM loop outside the namespace"; start_job gemm gemm; nvml_views gemm; preflight gemm
kill "$JOB" 2> /dev/null; wait "$JOB" 2> /dev/null
echo "== an idle process outside the namespace holding 20 GB"; start_job holder hold 20; nvml_views holder; preflight holder
kill "$JOB" 2> /dev/null; wait "$JOB" 2> /dev/null
echo "== control: the same GEMM loop inside the same namespace"; preflight control "$INSIDE"
