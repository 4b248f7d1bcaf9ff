#!/usr/bin/env bash
# Run several devscripts on the GPU machine in one go: install once, one log per script.
# usage: bash devscripts/batch.sh NAME... ; KEEP="name/file ..." copies those files to $OUT too.
set -u
cd "$(dirname "$0")/.."
FINAL="${OUT:-/tmp/batch-out}"
mkdir -p "$FINAL"
ls .whl/*.whl >/dev/null 2>&1 && python3 -m pip install -q --no-index --no-deps .whl/*.whl 2>&1 | tail -2
python3 -m pip install -q --no-build-isolation --no-deps -e . 2>&1 | tail -2
export PYTHONUNBUFFERED=1
for name in "$@"; do
  start=$(date +%s)
  OUT="/tmp/dev/$name" timeout 560 bash "devscripts/$name.sh" > "$FINAL/$name.log" 2>&1
  echo "$name: exit $? in $(( $(date +%s) - start )) s"
  tail -n 5 "$FINAL/$name.log"
done
for keep in ${KEEP:-}; do cp /tmp/dev/$keep "$FINAL/" 2>/dev/null || echo "missing $keep"; done
