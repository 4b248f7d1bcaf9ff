#!/usr/bin/env bash
# The JUnit and Prometheus doors on a live preflight of a GPU machine, checked against its printed
# lines by the same contract test the replays pass here (tests/test_doors_contract.py, "live").
# On the GPU machine: bash devscripts/batch.sh doors, with carry [".whl"] holding the wheels of
# the suite's dependencies and the test's readers, downloaded here first:
#   pip download -d .whl --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64 \
#       pytest-json-report pytest-metadata pyelftools packaging PyYAML prometheus-client junitparser
# Writes under $OUT (default /tmp/spark-gotchas-doors): live/ (stdout.txt, exit.txt, junit.xml,
# spark.prom, report.json, snapshot.json) and replay/ (the same from its snapshot, replayed there).
# Runtime: two preflights (about 10 s each on an H200) and the contract test (seconds).
#
# What it must show:
#  1. the live preflight's G-lines, exit 0 or 1 as a gotcha FAILs, "Prometheus metrics written to";
#  2. the contract test for the live run: 5 passed (each door's statuses are the printed lines',
#     every printed fix in the JUnit report, the metrics equal the JSON report's verdict readings);
#  3. the series a monitoring stack would alert on: each gotcha's status, G5's bandwidth per
#     method and its floor, G4's SM clock under load, G7's GEMM rates;
#  4. the replay of the live snapshot: the same statuses in its metrics as the live run's.
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/spark-gotchas-doors}"
step() { echo; echo "=== [$(date +%T)] $*"; }

doors() {  # doors DIR [pytest args]: one preflight with every door into DIR
  local dir="$1"; shift
  mkdir -p "$dir"
  python3 -m pytest -m fast -p no:cacheprovider --junitxml="$dir/junit.xml" --spark-prometheus="$dir/spark.prom" \
      --json-report --json-report-file="$dir/report.json" "$@" > "$dir/stdout.txt" 2>&1
  echo $? > "$dir/exit.txt"
  sed -n '/=* spark-gotchas =*/,$p' "$dir/stdout.txt"
  echo "exit $(cat "$dir/exit.txt")"
}

step "1. a live preflight with every door"
doors "$OUT/live" --spark-snapshot="$OUT/live/snapshot.json"

step "2. the contract test on it"
SPARK_DOORS_LIVE="$OUT/live" python3 -m pytest tests/test_doors_contract.py -k live -q -p no:cacheprovider 2>&1 | tail -n 15

step "3. the series to alert on"
grep -E '^spark_gotchas_(status\{.*\} 1|bandwidth|sm_clock|gemm|info)' "$OUT/live/spark.prom"

step "4. its snapshot replayed: the same statuses"
doors "$OUT/replay" --spark-replay="$OUT/live/snapshot.json" > /dev/null
diff <(grep '^spark_gotchas_status' "$OUT/live/spark.prom") <(grep '^spark_gotchas_status' "$OUT/replay/spark.prom") \
  && echo "the replay's status series are the live run's"
