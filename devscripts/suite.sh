#!/usr/bin/env bash
# The suite's own tests, all of them, on a GPU machine: those that need a GPU, Triton or the CUDA
# driver run there instead of skipping (here they skip; run `python -m pytest tests` instead).
#   on the GPU machine: bash devscripts/batch.sh suite          # carry [".whl"]
# Prints pytest's last 25 lines (the skips and the tally); writes nothing.
# Runtime: about 2 minutes on one H200.
set -u
cd "$(dirname "$0")/.."
python3 -m pytest -q -p no:cacheprovider -rs tests 2>&1 | tail -25
