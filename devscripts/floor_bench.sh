#!/usr/bin/env bash
# The preflight against its floor and the reference shell preflight, interleaved, cold.
#
# Three rows, each run PAIRS times (default 5) in rotated order, every run from a cold page cache
# (devscripts/evict.py drops site-packages, the standard library, the CUDA libraries, the JIT caches
# and the trees before it, and Triton gets a fresh empty cache):
#   floor      python3 -c "import torch; torch.zeros(1, device='cuda'); torch.cuda.synchronize()"
#   installed  spark-gotchas -m fast (the installed command, from an empty folder)
#   reference  bash .ab/reference-preflight.sh (../shared/reference-preflight.sh, copied there)
# Prints each run, then the medians, installed - floor (seconds) and installed/reference (ratio)
# (and, with PARTS, each part left out against the floor and the reference);
# writes $OUT/timing.txt, runs.csv, summary.json and each run's output and JSON report.
# A benchmark, not a test: nothing here asserts a time.
#
# On the GPU machine (carry [".whl", ".ab"]; install the suite as a wheel first, not editable):
#   mkdir -p .ab && cp ../shared/reference-preflight.sh .ab/        # here, once
#   python3 -m pip install -q --no-index --find-links .whl .whl/*.whl && \
#     python3 -m pip install -q --no-build-isolation --no-deps . && OUT=$OUT/floor bash devscripts/floor_bench.sh
# Runtime: about 3 runs of 8-12 s a round plus evictions: 2.5 to 3 minutes for 5 rounds on one H200.
set -u
cd "$(dirname "$0")/.."
command -v spark-gotchas > /dev/null || { echo "floor_bench.sh: spark-gotchas is not installed (pip install .)" >&2; exit 2; }
# PARTS="g2_libs g7_rates" adds a row per head-start part: the installed command without it, in the
# same rounds (the part's A/B: what leaving it out costs).
rows="floor installed"
for part in ${PARTS:-}; do rows+=" installed_no_${part}:SPARK_GOTCHAS_HEADSTART=-${part}"; done
MODE=variants VARIANTS="$rows reference" TIMELINE="${TIMELINE:-1}" PAIRS="${PAIRS:-5}" exec bash devscripts/timing.sh
