#!/usr/bin/env bash
# The preflight on a fresh GPU machine with the final code: cold (the machine's first run), warm,
# then with the libraries dropped from the page cache and an empty Triton cache, without and with
# SPARK_GOTCHAS_READ_AHEAD=1, alternately. Runtime: about 1 minute on one H200.
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/spark-gotchas-final}"
mkdir -p "$OUT"
LIBS="$(python3 -c 'import sysconfig; p = sysconfig.get_paths(); print(p["purelib"], p["platlib"], p["stdlib"])')"
fast() {  # name, env...
  local name="$1"; shift
  export T0=$(date +%s.%N)
  env "$@" PYTHONPATH=devscripts python3 -m pytest -p traceplug -m fast -q \
      --json-report --json-report-file="$OUT/$name.json" > "$OUT/$name.txt" 2>&1
  local rc=$?
  echo "== $name: $(python3 -c "import os; print(f'{$(date +%s.%N) - float(os.environ[\"T0\"]):.2f}')") s wall, exit $rc, $(tail -n 1 "$OUT/$name.txt")"
  grep "^\[trace\]" "$OUT/$name.txt" | grep -E "configure begin|runtestloop end|atexit" | tr '\n' ' '; echo
  python3 -c "import json; t = json.load(open('$OUT/$name.json'))['spark_gotchas']['timing']; print('   worker', t['worker']['worker_ready_s'], t['worker']['preload_s'], t['worker']['warmups'], 'load', [(x['start_s'], x['seconds']) for x in (t['load_worker'] or {}).get('tasks', [])])"
}
fast cold
python3 devscripts/timeline.py "$OUT/cold.json"
sed -n '/spark-gotchas =/,/^G10/p' "$OUT/cold.txt"
fast warm1
fast warm2
for i in 1; do
  python3 devscripts/evict.py $LIBS /usr/local/cuda* > /dev/null 2>&1
  fast "evicted-$i" TRITON_CACHE_DIR="$(mktemp -d)"
  python3 devscripts/evict.py $LIBS /usr/local/cuda* > /dev/null 2>&1
  fast "evicted-read-ahead-$i" TRITON_CACHE_DIR="$(mktemp -d)" SPARK_GOTCHAS_READ_AHEAD=1
done
python3 devscripts/timeline.py "$OUT/evicted-1.json"
python3 devscripts/timeline.py "$OUT/evicted-read-ahead-1.json"
