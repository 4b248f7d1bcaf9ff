#!/usr/bin/env bash
# The preflight before and after this session's speed work, on one machine: the new code's first
# (cold) run, then old and new alternately with the Python libraries dropped from the page cache
# and an empty Triton cache (devscripts/evict.py), then warm. The old tree is .ab/old.tar (git
# archive of the commit to compare with, carried to the device). Runtime: about 3 minutes on one H200.
set -u
cd "$(dirname "$0")/.."
NEW="$PWD"
OUT="${OUT:-/tmp/spark-gotchas-ab}"
mkdir -p "$OUT" /tmp/old && tar -xf .ab/old.tar -C /tmp/old
LIBS="$(python3 -c 'import sysconfig; p = sysconfig.get_paths(); print(p["purelib"], p["platlib"], p["stdlib"])')"
fast() {  # name, tree, env...
  local name="$1" tree="$2"; shift 2
  local start=$(date +%s.%N)
  (cd "$tree" && env "$@" python3 -m pytest -m fast -q -p no:cacheprovider \
      --json-report --json-report-file="$OUT/$name.json" > "$OUT/$name.txt" 2>&1)
  local rc=$?
  local wall=$(python3 -c "print(f'{$(date +%s.%N) - $start:.2f}')")
  echo "== $name: $wall s wall, exit $rc, $(tail -n 1 "$OUT/$name.txt")"
  grep -E "^G(4|5) " "$OUT/$name.txt" | cut -c1-110
  python3 -c "import json; print('   report has timing (new code):', 'timing' in json.load(open('$OUT/$name.json'))['spark_gotchas'])"
}
fast new-cold "$NEW"
python3 devscripts/timeline.py "$OUT/new-cold.json"
fast new-warm "$NEW"
for i in 1 2; do
  for tree in old new; do
    python3 devscripts/evict.py $LIBS /usr/local/cuda* > /dev/null 2>&1
    fast "$tree-evicted-$i" "$( [ $tree = old ] && echo /tmp/old || echo "$NEW")" TRITON_CACHE_DIR="$(mktemp -d)"
  done
done
for i in 1 2 3; do
  fast "old-warm-$i" /tmp/old
  fast "new-warm-$i" "$NEW"
done
python3 devscripts/timeline.py "$OUT/new-warm-3.json"
