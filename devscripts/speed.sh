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
LIBS="$(python3 -c 'import sysconfig; p = sysconfig.get_paths(); print(p["purelib"], p["platlib"], p["stdlib"])')"
fast() {  # name, env...
  local name="$1"; shift
  export T0=$(date +%s.%N)
  env "$@" PYTHONPATH=devscripts python3 -m pytest -p traceplug -m fast -q --durations=0 --durations-min=0.05 \
      --json-report --json-report-file="$OUT/$name.json" > "$OUT/$name.txt" 2>&1
  local rc=$?
  echo "== $name: $(python3 -c "import os; print(f'{$(date +%s.%N) - float(os.environ[\"T0\"]):.2f}')") s wall, exit $rc, $(tail -n 1 "$OUT/$name.txt")"
  grep "^\[trace\]" "$OUT/$name.txt" | tr '\n' ' ' | sed 's/\[trace\]/|/g'; echo
  python3 devscripts/timeline.py "$OUT/$name.json"
}
fast cold
fast warm1
fast warm2
sed -n '/spark-gotchas =/,$p' "$OUT/warm2.txt"
python3 devscripts/evict.py $LIBS /usr/local/cuda* 2>/dev/null
fast evicted-triton-empty TRITON_CACHE_DIR="$(mktemp -d)"
python3 devscripts/evict.py $LIBS /usr/local/cuda* 2>/dev/null
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
