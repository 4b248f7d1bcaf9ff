#!/usr/bin/env bash
# The worker's warm-up (spark_gotchas/warmup.py) and G5's compile in threads, measured on one
# machine: this tree's first run (cold), then the code before them (.ab/old.tar, a git archive
# carried to the device) against this tree without and with the warm-up, alternately, with the
# Python and CUDA libraries dropped from the page cache and an empty Triton cache
# (devscripts/evict.py), then the same with an empty CUDA JIT cache too (CUDA_CACHE_PATH), then
# each warm. Each run prints SDPA's per-backend seconds and G5's wait for its kernels. Runtime:
# about 4 minutes on one H200.
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/spark-gotchas-warmups}"
. devscripts/lib.sh
unpack_old
declare -A WARM=([old]="" [none]=none [ctx]=cuda_context)
fast() {  # name, variant, env...
  local name="$1" variant="$2"; shift 2
  local tree="$REPO"; [ "$variant" = old ] && tree=/tmp/old
  TREE="$tree" timed_fast "$name" SPARK_GOTCHAS_WARMUPS="${WARM[$variant]}" \
    PYTEST_ADDOPTS="--spark-snapshot=$OUT/$name.snap.json" "$@"
  grep -E "^G(4|5) " "$OUT/$name.txt" | cut -c1-100
  python3 - "$OUT/$name.snap.json" "$OUT/$name.json" <<'PY'
import json, sys
snap, report = (json.load(open(p)) for p in sys.argv[1:])
readings = snap.get("readings", {})
sdpa = readings.get("attention.sdpa", {})
g5 = (readings.get("bench.bandwidth") or {}).get("result") or {}
worker = report["spark_gotchas"].get("timing", {}).get("worker") or {}
print("   sdpa seconds", sdpa.get("seconds"), "| G5 compile wait", g5.get("compile_wait_seconds"),
      "setup", g5.get("setup_seconds"), "| warmups", worker.get("warmups"), "| ready", worker.get("worker_ready_s"))
PY
}
fast cold ctx
python3 devscripts/timeline.py "$OUT/cold.json"
for i in 1 2; do
  for variant in old none ctx; do
    evict_libraries
    fast "evicted-$variant-$i" $variant TRITON_CACHE_DIR="$(mktemp -d)"
  done
done
python3 devscripts/timeline.py "$OUT/evicted-ctx-2.json"
for variant in old ctx; do
  evict_libraries
  fast "evicted-nojit-$variant" $variant TRITON_CACHE_DIR="$(mktemp -d)" CUDA_CACHE_PATH="$(mktemp -d)"
done
python3 devscripts/timeline.py "$OUT/evicted-nojit-ctx.json"
for i in 1 2; do
  for variant in old none ctx; do
    fast "warm-$variant-$i" $variant
  done
done
python3 devscripts/timeline.py "$OUT/warm-ctx-2.json"
echo "== the suite's own tests of the worker and its warm-ups here"
python3 -m pytest -q -p no:cacheprovider tests/test_warmup.py tests/test_worker.py tests/test_g04_cublas_load.py tests/test_g05_microbench.py 2>&1 | tail -3
