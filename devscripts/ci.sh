#!/usr/bin/env bash
# CI, job summary and diff on a GPU machine: the workflow's own steps, run as the runner would.
# On the GPU machine: bash devscripts/batch.sh ci (carry [".whl"]; batch.sh installs the suite).
# Prints everything to stdout; writes the documents under $OUT (default /tmp/spark-gotchas-ci):
# the preflight's and the soak's junit.xml, report.json, snapshot.json, job summaries, soak CSV
# and PNG, the replays' snapshots. Needs an NVIDIA GPU. tests/test_workflow.py checks that its
# three workflow steps are the workflow's own, verbatim.
# Runtime: about 3 minutes on one H200 (three timed preflights of ~10 s each, the preflight
# step, a 60 s soak plus its setup, two replays, a handful of diffs).
#
# What it must show:
#  1. `pytest -m fast` wall time, cold (first run on a fresh machine) and warm (two more runs);
#  1b. the workflow's install step, run in a subshell with set -e as the runner would: the suite in
#     $OUT/runner-temp/spark-gotchas-site, nothing else installed (all dependencies are there),
#     pip freeze unchanged, torch the environment's own;
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
export RUNNER_TEMP="$OUT/runner-temp" GITHUB_ENV="$OUT/github-env" PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1
mkdir -p "$REPORTS" "$RUNNER_TEMP"; : > "$GITHUB_STEP_SUMMARY"; : > "$GITHUB_ENV"

step "1b. the workflow's install step: the suite into a folder of the job's own, the environment as it was"
python3 -m pip freeze --all > "$OUT/freeze-before.txt"
(
set -eo pipefail  # as GitHub runs a step's bash
# --- the step "Install spark-gotchas for this job only", verbatim ---
# Into a folder of the job's own, put first on PYTHONPATH for the later steps: the venv or
# image under test is left exactly as it was, and its torch is the one the suite checks.
site="$RUNNER_TEMP/spark-gotchas-site"
torch_at() { python3 -c 'import importlib.metadata as m; d = m.distribution("torch"); print(d.version, d.locate_file(""))' 2>/dev/null || echo none; }
before=$(torch_at)
echo "python: $(command -v python3) ($(python3 --version 2>&1)); torch: $before"
rm -rf "$site" && mkdir -p "$site"
# The suite itself, built from this checkout (a runner without PyPI access builds it with
# the environment's own setuptools instead).
python3 -m pip install --no-deps --target "$site" . \
  || python3 -m pip install --no-deps --no-build-isolation --target "$site" .
# Its small dependencies (pytest, pytest-json-report, nvidia-ml-py …), resolved by pip
# against the environment as it is: only those it lacks, or has too old, go into the
# folder. None of them depends on torch; a resolution that wants torch is refused.
python3 - "$site" > "$RUNNER_TEMP/spark-gotchas-requires.txt" <<'PY'
import importlib.metadata as md
import sys

(suite,) = md.distributions(name="spark-gotchas", path=[sys.argv[1]])
sys.stdout.write("".join(f"{r}\n" for r in suite.requires or [] if "extra ==" not in r))
PY
mapfile -t requirements < "$RUNNER_TEMP/spark-gotchas-requires.txt"
if ! python3 -m pip install --dry-run --quiet --report "$RUNNER_TEMP/spark-gotchas-resolved.json" "${requirements[@]}"; then
  echo "::error::pip could not resolve the suite's dependencies against this environment (pip 22.2 or newer is needed; without PyPI access, install them into the image or venv beforehand: ${requirements[*]})"
  exit 1
fi
python3 - "$RUNNER_TEMP/spark-gotchas-resolved.json" "$RUNNER_TEMP/spark-gotchas-missing.txt" <<'PY'
import json
import sys

wanted = [f"{i['metadata']['name']}=={i['metadata']['version']}" for i in json.load(open(sys.argv[1]))["install"]]
if any(w.split("==")[0].lower() == "torch" for w in wanted):
    print(f"::error::the suite's dependencies would pull in torch ({' '.join(wanted)}); nothing was installed")
    sys.exit(1)
with open(sys.argv[2], "w") as out:
    out.write("".join(f"{w}\n" for w in wanted))
PY
mapfile -t missing < "$RUNNER_TEMP/spark-gotchas-missing.txt"
if [ "${#missing[@]}" -gt 0 ]; then
  echo "installing for this job only what the environment lacks: ${missing[*]}"
  python3 -m pip install --no-deps --target "$site" "${missing[@]}"
fi
after=$(export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"; torch_at)
if [ "$before" != "$after" ]; then
  echo "::error::torch changed from $before to $after while installing the suite; the environment under test was altered"
  exit 1
fi
echo "PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}" >> "$GITHUB_ENV"
# --- end of the step ---
)
echo "step exit status: $?; GITHUB_ENV: $(cat "$GITHUB_ENV")"
python3 -m pip freeze --all > "$OUT/freeze-after.txt"
if cmp -s "$OUT/freeze-before.txt" "$OUT/freeze-after.txt"; then echo "pip freeze: unchanged"; else
  echo "pip freeze CHANGED:"; diff "$OUT/freeze-before.txt" "$OUT/freeze-after.txt"; fi
export "$(grep '^PYTHONPATH=' "$GITHUB_ENV")"  # as the runner does for the later steps
python3 -c 'import spark_gotchas, torch; print("suite from", spark_gotchas.__file__, "| torch", torch.__version__, "from", torch.__file__)'

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
