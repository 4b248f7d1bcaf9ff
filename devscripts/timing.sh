#!/usr/bin/env bash
# The preflight's wall time on a GPU machine: the first run on a fresh machine (cold: page cache,
# Triton cache and CUDA caches empty), then two warm runs, then one with --durations, a
# snapshot and a JSON report. Prints to stdout; documents go to $OUT.
# Runtime: about 1.5 minutes on one H200.
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/spark-gotchas-timing}"
mkdir -p "$OUT"
python3 -c "import spark_gotchas" 2>/dev/null || python3 -m pip install -q --no-build-isolation --no-deps -e . 2>&1 | tail -2
for run in cold warm1 warm2; do
  start=$(date +%s.%N)
  python3 -m pytest -m fast -q -p no:cacheprovider > "$OUT/time-$run.txt" 2>&1
  rc=$?
  echo "$run: $(python3 -c "print(f'{$(date +%s.%N) - $start:.2f}')") s wall, exit $rc, $(tail -n 1 "$OUT/time-$run.txt")"
done
start=$(date +%s.%N)
python3 -X importtime -c "import pytest" 2> "$OUT/importtime.txt"; echo "import pytest: $(python3 -c "print(f'{$(date +%s.%N) - $start:.2f}')") s"
start=$(date +%s.%N); python3 -c "import torch" ; echo "import torch (warm): $(python3 -c "print(f'{$(date +%s.%N) - $start:.2f}')") s"
start=$(date +%s.%N); python3 -m pytest --co -q -p no:cacheprovider tests_gotchas > /dev/null 2>&1; echo "pytest collection only: $(python3 -c "print(f'{$(date +%s.%N) - $start:.2f}')") s"
python3 -m pytest -m fast -p no:cacheprovider --durations=25 --durations-min=0.05 \
  --spark-snapshot "$OUT/preflight-snapshot.json" --json-report --json-report-file="$OUT/preflight-report.json" 2>&1 \
  | sed -n '/spark-gotchas/,$p'
# The G5 quality bar again with the kernel defaults chosen from the tuning grid (same run: probe
# and torch reference ops), at 1 and 4 GiB per array.
for size in 1024 4096; do
  python3 -m microbench bandwidth --size-mb $size --references --warmup-ms 30 --rep-ms 200
done
