#!/usr/bin/env bash
# CI, job summary and diff on a GPU machine: the workflow's own steps, run as the runner would.
# On the GPU machine: bash devscripts/batch.sh ci (carry [".whl"]; batch.sh installs the suite).
# Prints everything to stdout; writes the documents under $OUT (default /tmp/spark-gotchas-ci):
# the preflight's and the soak's junit.xml, report.json, snapshot.json, job summaries, soak CSV
# and PNG, the replays' snapshots. Needs an NVIDIA GPU. tests/test_workflow.py checks that its
# two workflow steps are the workflow's own, verbatim.
# Runtime: about 3 minutes on one H200 (three timed preflights of ~10 s each, the preflight
# step, a 60 s soak plus its setup, two replays, a handful of diffs).
#
# What it must show:
#  1. `pytest -m fast` wall time, cold (first run on a fresh machine) and warm (two more runs);
#  2. the workflow's preflight step: every gotcha's G-line, exit status 0 or 1 matching whether
#     a gotcha FAILs, junit.xml / report.json / snapshot.json written, and the Markdown job
#     summary (problems first with fixes, platform line naming the H200, driver, CUDA 13.0);
#  3. the workflow's soak step with a 60 s soak: reports/soak/ holding the soak's CSV and PNG,
#     and the summary's "Files this run produced" naming them;
#  4. `python -m spark_gotchas diff` of the preflight and the soak snapshot (two real runs of one
#     H200: bandwidth, clocks, power, memory side by side with --all), of the H200 snapshot and
#     its replay judged as a Spark (--spark-profile=gb10: statuses WORSE, exit 1), of a report
#     and a snapshot, and the --json form.
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/spark-gotchas-ci}"
mkdir -p "$OUT"
step() { echo; echo "=== [$(date +%T)] $*"; }
T0=$(date +%s)

step "1. preflight wall time: cold, then warm x2"
for run in cold warm1 warm2; do
  start=$(date +%s.%N)
  python3 -m pytest -m fast -q -p no:cacheprovider > "$OUT/time-$run.txt" 2>&1
  rc=$?
  echo "$run: $(python3 -c "print(f'{$(date +%s.%N) - $start:.2f}')") s wall, exit $rc, $(tail -n 1 "$OUT/time-$run.txt")"
done
python3 -m pytest -m fast -q -p no:cacheprovider --durations=12 2>&1 | sed -n '/slowest/,/passed\|failed/p'

# The job's variables, as .github/workflows/spark-preflight.yml sets them.
export MODE=preflight REPORTS="$OUT/preflight" GITHUB_STEP_SUMMARY="$OUT/preflight-summary.md"
export STRICT_FLAG="" EXTRA_ARGS="" SOAK_DURATION=60s PYTHONUNBUFFERED=1
mkdir -p "$REPORTS"; : > "$GITHUB_STEP_SUMMARY"

step "2. the workflow's preflight step"
# --- the step "Preflight (pytest -m fast)", verbatim ---
python3 -m pytest -m fast $STRICT_FLAG $EXTRA_ARGS \
  --junitxml="$REPORTS/junit.xml" \
  --json-report --json-report-file="$REPORTS/report.json" \
  --spark-snapshot="$REPORTS/snapshot.json" \
  --spark-summary-md="$GITHUB_STEP_SUMMARY"
# --- end of the step ---
echo "step exit status: $?"
ls -la "$REPORTS"
python3 - "$REPORTS/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
g = r["spark_gotchas"]["gotchas"]
print("exitcode", r["exitcode"], "| FAIL present:", any(v["status"] == "FAIL" for v in g.values()))
print("gotchas:", " ".join(f"{k}={v['status']}" for k, v in g.items()))
print("artifacts:", r["spark_gotchas"]["artifacts"])
PY
echo "--- job summary ($GITHUB_STEP_SUMMARY) ---"
cat "$GITHUB_STEP_SUMMARY"

step "3. the workflow's soak step, 60 s"
export MODE=soak REPORTS="$OUT/soak" GITHUB_STEP_SUMMARY="$OUT/soak-summary.md"
mkdir -p "$REPORTS"; : > "$GITHUB_STEP_SUMMARY"
# --- the step "Preflight and soak (pytest -m "fast or soak")", verbatim ---
python3 -m pytest -m "fast or soak" $STRICT_FLAG $EXTRA_ARGS \
  --soak-duration="$SOAK_DURATION" --soak-dir="$REPORTS/soak" \
  --junitxml="$REPORTS/junit.xml" \
  --json-report --json-report-file="$REPORTS/report.json" \
  --spark-snapshot="$REPORTS/snapshot.json" \
  --spark-summary-md="$GITHUB_STEP_SUMMARY"
# --- end of the step ---
echo "step exit status: $?"
ls -la "$REPORTS" "$REPORTS/soak"
echo "--- job summary ($GITHUB_STEP_SUMMARY) ---"
cat "$GITHUB_STEP_SUMMARY"

step "4. diff"
echo "--- preflight vs soak run (two real runs of this machine), --all"
python3 -m spark_gotchas diff "$OUT/preflight/snapshot.json" "$OUT/soak/snapshot.json" --all; echo "exit $?"
echo "--- this machine vs its snapshot judged as a Spark"
python3 -m pytest -m fast -q -p no:cacheprovider --spark-replay="$OUT/preflight/snapshot.json" \
  --spark-profile=gb10 --spark-snapshot="$OUT/judged-as-gb10.json" 2>&1 | tail -n 14
python3 -m spark_gotchas diff "$OUT/preflight/snapshot.json" "$OUT/judged-as-gb10.json"; echo "exit $?"
echo "--- the replay of the preflight snapshot gives the same statuses"
python3 -m pytest -m fast -q -p no:cacheprovider --spark-replay="$OUT/preflight/snapshot.json" \
  --spark-snapshot="$OUT/replayed.json" > /dev/null 2>&1
python3 -m spark_gotchas diff "$OUT/preflight/snapshot.json" "$OUT/replayed.json" | sed -n '/^Statuses/,/^$/p'
echo "--- a report against a snapshot"
python3 -m spark_gotchas diff "$OUT/preflight/report.json" "$OUT/soak/snapshot.json" | head -n 40; echo "exit ${PIPESTATUS[0]}"
echo "--- --json (head)"
python3 -m spark_gotchas diff "$OUT/preflight/snapshot.json" "$OUT/judged-as-gb10.json" --json | head -n 30

step "done in $(( $(date +%s) - T0 )) s; documents in $OUT"
