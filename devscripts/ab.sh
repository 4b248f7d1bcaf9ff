#!/usr/bin/env bash
# The preflight of two commits on one machine: this tree's first
# (cold) run, then old and new alternately with the Python libraries dropped from the page cache
# and an empty Triton cache (devscripts/evict.py), then warm. The old tree is .ab/old.tar (git
# archive of the commit to compare with, carried to the device). Runtime: about 3 minutes on one H200.
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/spark-gotchas-ab}"
. devscripts/lib.sh
unpack_old
fast() {  # name, tree, env...
  local name="$1" tree="$2"; shift 2
  TREE="$tree" timed_fast "$name" "$@"
  grep -E "^G(4|5) " "$OUT/$name.txt" | cut -c1-110
  python3 -c "import json; print('   report has timing (new code):', 'timing' in json.load(open('$OUT/$name.json'))['spark_gotchas'])"
}
fast new-cold "$REPO"
python3 devscripts/timeline.py "$OUT/new-cold.json"
fast new-warm "$REPO"
for i in 1 2; do
  for tree in old new; do
    evict_libraries
    fast "$tree-evicted-$i" "$( [ $tree = old ] && echo /tmp/old || echo "$REPO")" TRITON_CACHE_DIR="$(mktemp -d)"
  done
done
for i in 1 2 3; do
  fast "old-warm-$i" /tmp/old
  fast "new-warm-$i" "$REPO"
done
python3 devscripts/timeline.py "$OUT/new-warm-3.json"
