#!/usr/bin/env bash
# The preflight's wall time on a fresh GPU machine, cold then warm, with each run's timeline
# (checks, GPU worker, load worker) from its JSON report and pytest's stages (devscripts/traceplug.py);
# then runs with the Python libraries dropped from the page cache and an empty Triton cache
# (devscripts/evict.py), the G4 load through cuBLAS without torch against torch's, and the suite's
# own tests that use a GPU where there is one. Runtime: about 3 minutes on one H200.
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/spark-gotchas-speed}"
mkdir -p "$OUT"
. devscripts/lib.sh
fast() { timed_fast "$@"; python3 devscripts/timeline.py "$OUT/$1.json"; }
fast cold
fast warm1
fast warm2
sed -n '/spark-gotchas =/,$p' "$OUT/warm2.txt"
evict_libraries
fast evicted-triton-empty TRITON_CACHE_DIR="$(mktemp -d)"
evict_libraries
fast evicted
fast warm3
echo "== G4 load: cuBLAS through ctypes (no torch) against torch, 5 s each"
for backend in cublas torch; do
  start=$(date +%s.%N)
  python3 -m microbench soak_load --backend $backend --seconds 5 --window 5 --json | python3 -c "
import json, sys; d = json.load(sys.stdin); print('$backend', d.get('backend'), d['size'], f\"{d['tflops']:.1f} TFLOP/s busy {d['busy_fraction']:.1%}\")"
  echo "   process wall $(python3 -c "print(f'{$(date +%s.%N) - $start:.2f}')") s"
done
echo "== the suite's own tests that use the GPU here"
python3 -m pytest -q tests/test_g04_cublas_load.py tests/test_worker.py tests/test_g04_readers.py 2>&1 | tail -3
