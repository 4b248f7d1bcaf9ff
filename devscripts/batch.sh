#!/usr/bin/env bash
# The GPU machine's entry point: install the suite once, then run one or more devscripts, one log
# and one output folder each. That machine has torch, pytest, pytest-timeout, nvidia-ml-py, psutil,
# matplotlib and safetensors but no network: the other dependencies travel as wheels in the
# git-ignored .whl/, downloaded here first, e.g.
#   pip download -d .whl --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64 \
#       pytest-json-report pytest-metadata pyelftools packaging PyYAML
#
#   bash devscripts/batch.sh NAME...        # NAME: timing, suite, measure, memory, thermal, ci, pidns
#   PAIRS=5 MODE=ab bash devscripts/batch.sh timing    # the scripts' own knobs pass through
#
# Run it through the device tool from the repository root, with carry [".whl"] (and ".ab" for
# timing.sh). Writes under $OUT (default /tmp/batch-out): NAME.log (all the script printed) and
# NAME/ (the script's own $OUT). Runtime: the scripts' own (each is cut at 560 s, within the
# tool's 600 s a command) plus about 10 s to install.
set -u
cd "$(dirname "$0")/.."
FINAL="${OUT:-/tmp/batch-out}"
mkdir -p "$FINAL"
if ls .whl/*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --find-links .whl .whl/*.whl 2>&1 | tail -2
fi
python3 -m pip install -q --no-build-isolation --no-deps -e . 2>&1 | tail -2
export PYTHONUNBUFFERED=1
for name in "$@"; do
  [ -f "devscripts/$name.sh" ] || { echo "$name: no devscripts/$name.sh"; continue; }
  start=$(date +%s)
  OUT="$FINAL/$name" timeout 560 bash "devscripts/$name.sh" > "$FINAL/$name.log" 2>&1
  echo "$name: exit $? in $(( $(date +%s) - start )) s"
  tail -n 5 "$FINAL/$name.log"
done
