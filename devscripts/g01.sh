#!/usr/bin/env bash
# G1 on a GPU machine: the G1 checks of the preflight with their details (-v) and JSON report, then
# the scan's cold time (the reader alone after dropping the page cache; needs root).
#   on the GPU machine: bash devscripts/batch.sh g01        # carry [".whl"]
# Writes $OUT/g1.txt, $OUT/g1.json, $OUT/bench.txt. Runtime: about a minute.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/g01-out}
mkdir -p "$OUT"
python3 -m pytest -m fast -k g01 -p no:cacheprovider -v --json-report --json-report-file="$OUT/g1.json" \
    > "$OUT/g1.txt" 2>&1
echo "pytest exit $?"
sed -n '/=* spark-gotchas =*/,$p' "$OUT/g1.txt"
python3 devscripts/g01_scan_bench.py --reader-cold 3 2>&1 | tee "$OUT/bench.txt"
