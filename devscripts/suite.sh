#!/usr/bin/env bash
# The suite's own tests, all of them, on a GPU machine: those that need a GPU, Triton or the CUDA
# driver run there instead of skipping (here they skip; run `python -m pytest tests` instead).
#   on the GPU machine: bash devscripts/batch.sh suite          # carry [".whl"]
# Prints the failures, errors and skips by name and the tally; the whole log is $OUT/suite.txt.
# Runtime: about 2 minutes on one H200 (-n 14).
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/suite-out}"
mkdir -p "$OUT"
python3 -m pytest -q -p no:cacheprovider -rfEs -n 14 tests > "$OUT/suite.txt" 2>&1
status=$?
grep -E '^(FAILED|ERROR|SKIPPED) |^[0-9]+ (passed|failed)|^=+ .*(passed|failed)' "$OUT/suite.txt"
exit $status
