#!/usr/bin/env bash
# G5's kernels built by a worker without torch (microbench/_triton_cache.py) while the GPU worker
# imports torch, measured on one machine: this tree's first run (cold), then the code before it
# (.ab/old.tar, a git archive carried to the device) and this tree alternately, with the Python
# and CUDA libraries dropped from the page cache and an empty Triton cache (devscripts/evict.py),
# then each warm. Each run prints G5's wait for its kernels and the build worker's task.
# Runtime: about 3 minutes on one H200.
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/spark-gotchas-buildworker}"
. devscripts/lib.sh
unpack_old
fast() {  # name, variant (old or new), env...
  local name="$1" variant="$2"; shift 2
  local tree="$REPO"; [ "$variant" = old ] && tree=/tmp/old
  TREE="$tree" timed_fast "$name" PYTEST_ADDOPTS="--spark-snapshot=$OUT/$name.snap.json" "$@"
  grep -E "^G(4|5) " "$OUT/$name.txt" | cut -c1-100
  python3 - "$OUT/$name.snap.json" "$OUT/$name.json" <<'PY'
import json, sys
snap, report = (json.load(open(p)) for p in sys.argv[1:])
g5 = ((snap.get("readings") or {}).get("bench.bandwidth") or {}).get("result") or {}
timing = report["spark_gotchas"].get("timing", {})
build = timing.get("build_worker") or {}
print("   G5 compile wait", g5.get("compile_wait_seconds"), "| ready", (timing.get("worker") or {}).get("worker_ready_s"),
      "| build worker", [(t["start_s"], t["seconds"], t["ok"]) for t in build.get("tasks", [])] or "none")
PY
}
fast cold new
python3 devscripts/timeline.py "$OUT/cold.json"
for i in 1 2; do
  for variant in old new; do
    evict_libraries
    fast "evicted-$variant-$i" $variant TRITON_CACHE_DIR="$(mktemp -d)"
  done
done
python3 devscripts/timeline.py "$OUT/evicted-new-2.json"
for i in 1 2 3; do
  for variant in old new; do
    fast "warm-$variant-$i" $variant
  done
done
python3 devscripts/timeline.py "$OUT/warm-new-3.json"
echo "== the build worker's own result, in a fresh Triton cache"
TRITON_CACHE_DIR="$(mktemp -d)" python3 -c "
import json
from microbench import bandwidth
print(json.dumps(bandwidth.fill_triton_cache([9, 0])))"
