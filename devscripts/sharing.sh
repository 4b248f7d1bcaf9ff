#!/usr/bin/env bash
# Preflights that share the GPU: two and three started together, a GEMM job that starts while
# the preflight loads the GPU (torch-free, so it computes within a second), and a torch job that
# starts with the run (it computes once its own import is done, during G5's and G7's probes).
# Expected, written before the first run: no line blames the hardware (no "contact NVIDIA",
# no G5 FAIL "nothing else on the GPU"); a figure far below names the other run ("a
# spark-gotchas run (pid N)", "2 spark-gotchas runs (pids …)") or the job ("pid N python3").
#
#   on the GPU machine, the suite installed (bash devscripts/batch.sh sharing, or as floor_bench.sh says):
#   OUT=/tmp/sharing bash devscripts/sharing.sh
# Writes under $OUT: NAME-K.txt (each preflight's output), NAME-K.json (its JSON report); prints
# each preflight's G4, G5 and G7 lines with their fixes. Runtime: about 90 s on one H200.
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/sharing}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
preflight() {  # NAME K: one preflight from an empty folder, its output and report under $OUT
  local dir; dir="$(mktemp -d)"
  (cd "$dir" && spark-gotchas -m fast -v --json-report --json-report-file="$OUT/$1-$2.json" \
     --spark-snapshot "$OUT/$1-$2.snap.json" > "$OUT/$1-$2.txt" 2>&1)
}
show() {  # NAME N: the G4, G5, G7 lines (and fixes) of each of N preflights
  for k in $(seq "$2"); do
    echo "-- $1 #$k ($(grep -Eo '[0-9]+ passed[^=]*' "$OUT/$1-$k.txt" | tail -1))"
    awk '/^=+ spark-gotchas =+$/ {on = 1; next} /^=/ {on = 0} on && /^(G4|G5|G7) / {p = 1; print; next}
         on && /^    fix:/ && p {print; next} on && /^(G[0-9]+ |    [^ ])/ {p = 0} on && /^         / && p {print}' "$OUT/$1-$k.txt"
  done
}
together() {  # NAME N: N preflights started at the same moment
  local pids=()
  for k in $(seq "$2"); do preflight "$1" "$k" & pids+=($!); done
  wait "${pids[@]}"
  show "$1" "$2"
}

echo "== $(date -u '+%Y-%m-%d %H:%M UTC') on $(hostname): $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
echo "== two preflights started together"; together two 2
echo "== three preflights started together"; together three 3
echo "== a torch-free GEMM job starting 1 s after the preflight, for 25 s"
( sleep 1; exec "$PY" -m spark_gotchas.microbench soak_load --seconds 25 --backend cublas > "$OUT/job-cublas.txt" 2>&1 ) &
job=$!
preflight cublas-job 1; show cublas-job 1; echo "   (the job was pid $job's child; its own output: $(tail -1 "$OUT/job-cublas.txt"))"
wait "$job"
echo "== a torch GEMM job started with the preflight (it computes once its import is done)"
"$PY" -c "import torch; a = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16)
for _ in range(6000): a @ a
torch.cuda.synchronize()" > "$OUT/job-torch.txt" 2>&1 &
job=$!
preflight torch-job 1; show torch-job 1; echo "   (the job: pid $job)"
kill "$job" 2> /dev/null; wait "$job" 2> /dev/null
echo "== alone, for comparison"; preflight alone 1; show alone 1
