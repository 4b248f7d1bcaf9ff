#!/usr/bin/env bash
# The preflight's wall time, in interleaved pairs of runs, each from a cold page cache.
#
#   MODE=reference (default): the suite's preflight, `python3 -m pytest -m fast` in this tree,
#       against the reference shell preflight, `bash REFERENCE` (default .ab/reference-preflight.sh).
#   MODE=ab: this tree's preflight ("new") against an older tree's ("old"), unpacked from OLD
#       (default .ab/old.tar, made with `git archive -o .ab/old.tar COMMIT`); both must print the
#       same G-line statuses.
#   MODE=variants: this tree's preflight under each of VARIANTS, space-separated NAME:VAR=VALUE,...
#       items (and `reference` for the shell preflight), e.g. the head start's parts one at a time:
#       VARIANTS="full: no_build:SPARK_GOTCHAS_HEADSTART=-g5_build reference". Each round runs every
#       variant once, the order rotated by one each round; ratios are to the first variant.
#       Two more names run something else: `floor` (python3 -c "import torch; torch.zeros(1,
#       device='cuda'); torch.cuda.synchronize()": the floor of any check of torch) and `installed`
#       (the installed `spark-gotchas -m fast`, run from an empty folder, not the checkout; a name
#       that starts with `installed` runs it too, with its variables: installed_no_g2:VAR=VALUE).
#       devscripts/floor_bench.sh runs "floor installed reference".
#
# Before each run (EVICT=1, the default) devscripts/evict.py drops site-packages, the standard
# library, the CUDA libraries, the Triton and CUDA JIT caches and the trees from the page cache,
# and TRITON_CACHE_DIR points at a fresh empty folder; EVICT=0 keeps everything warm instead.
# Pairs alternate their order (A B, B A, ...) so a drift over the session falls on both sides.
# Prints one row per run (wall seconds, exit status, each gotcha's status), then each side's
# median and the ratio of the medians (suite/reference, or new/old).
#
# Here (no GPU, and the VM's disk is cached by its host, so dropping the page cache barely slows
# a run: it runs end to end, the figures mean little):
#   mkdir -p .ab && cp ../shared/reference-preflight.sh .ab/
#   PAIRS=1 PYTHON=.venv/bin/python bash devscripts/timing.sh
#   git archive -o .ab/old.tar HEAD~10 && PAIRS=1 MODE=ab PYTHON=.venv/bin/python bash devscripts/timing.sh
# On the GPU machine (only the repository is copied there, so the reference script and the old
# tree travel in the git-ignored .ab/, named in the run's carry with .whl/):
#   bash devscripts/batch.sh timing                       # carry [".whl", ".ab"]; PAIRS=5 MODE=ab ... in front
#
# Knobs: MODE (reference|ab), PAIRS (5), EVICT (1|0), TIMELINE (0|1: each suite run also writes a
# JSON report and prints its timeline, devscripts/timeline.py), PYTHON (python3: the interpreter
# with torch; its folder goes first on PATH so the reference's `python3` is the same one),
# REFERENCE, OLD, OUT (default /tmp/spark-gotchas-timing).
# Writes under $OUT: timing.txt (all it printed), runs.csv (one row per run), summary.json
# (machine, trees, runs, medians, ratio, same statuses), runs/NN-SIDE.txt (each run's output).
# Runtime: estimated at about 3 minutes on one H200 with 5 pairs (two ~10 s runs and two evictions
# a pair), not yet run there; 6 to 10 s a pair here.
set -u
cd "$(dirname "$0")/.."
REPO="$PWD"
MODE="${MODE:-reference}" PAIRS="${PAIRS:-5}" EVICT="${EVICT:-1}" TIMELINE="${TIMELINE:-0}"
REFERENCE="${REFERENCE:-.ab/reference-preflight.sh}" OLD="${OLD:-.ab/old.tar}"
OUT="${OUT:-/tmp/spark-gotchas-timing}"
die() { echo "timing.sh: $*" >&2; exit 2; }

[[ "$PAIRS" =~ ^[1-9][0-9]*$ ]] || die "PAIRS must be a whole number of at least 1, not '$PAIRS'"
[[ "$EVICT" =~ ^[01]$ && "$TIMELINE" =~ ^[01]$ ]] || die "EVICT and TIMELINE are 0 or 1"
PY="$(command -v "${PYTHON:-python3}")" || die "no interpreter '${PYTHON:-python3}' (set PYTHON)"
PY="$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")"  # absolute, symlinks kept (a venv's python)
export PATH="$(dirname "$PY"):$PATH"
case "$MODE" in
  reference)
    [ -f "$REFERENCE" ] || die "no reference preflight at $REFERENCE (copy ../shared/reference-preflight.sh there, or set REFERENCE)"
    REFERENCE="$(cd "$(dirname "$REFERENCE")" && pwd)/$(basename "$REFERENCE")"
    SIDES=(suite reference) ;;
  ab)
    [ -f "$OLD" ] || die "no old tree at $OLD (git archive -o $OLD COMMIT, or set OLD)"
    OLD_TREE="$(mktemp -d /tmp/spark-gotchas-old.XXXXXX)"
    trap 'rm -rf "$OLD_TREE"' EXIT
    tar -xf "$OLD" -C "$OLD_TREE" || die "cannot unpack $OLD"
    SIDES=(new old) ;;
  variants)
    read -r -a SIDES <<< "${VARIANTS:?set VARIANTS for MODE=variants}"
    declare -A SIDE_ENV
    for i in "${!SIDES[@]}"; do
      item="${SIDES[$i]}"; SIDES[$i]="${item%%:*}"
      [ "$item" != reference ] && SIDE_ENV[${SIDES[$i]}]="${item#*:}"
      case "$item" in floor|installed) SIDE_ENV[${SIDES[$i]}]="" ;; esac  # no variables of their own
      if [ "$item" = reference ]; then
        [ -f "$REFERENCE" ] || die "no reference preflight at $REFERENCE"
        REFERENCE="$(cd "$(dirname "$REFERENCE")" && pwd)/$(basename "$REFERENCE")"
      fi
    done ;;
  *) die "MODE is reference, ab or variants, not '$MODE'" ;;
esac
rm -rf "$OUT/runs"; mkdir -p "$OUT/runs" || die "cannot write $OUT"
exec > >(tee "$OUT/timing.txt") 2>&1
TEE=$!  # waited for at the end, so every line is written before the script returns

tree_of() { case "$1" in old) echo "$OLD_TREE" ;; *) echo "$REPO" ;; esac; }

# What is dropped before each run: the interpreter's libraries, the CUDA libraries (toolkit and
# the driver's, as ldconfig finds them), the Triton and CUDA JIT caches, and the trees.
mapfile -t DROP < <("$PY" - <<'PY'
import glob, os, site, sys, sysconfig
paths = {sysconfig.get_paths()[k] for k in ("purelib", "platlib", "stdlib")}
paths.update(site.getsitepackages() + [site.getusersitepackages(), os.path.realpath(sys.executable)])
paths.update(glob.glob(os.path.join(sysconfig.get_config_var("LIBDIR") or "/nonexistent", "libpython*")))
paths.update(glob.glob("/usr/local/cuda*"))
home = os.path.expanduser("~")
paths.add(os.environ.get("TRITON_CACHE_DIR") or os.path.join(home, ".triton"))
paths.add(os.environ.get("CUDA_CACHE_PATH") or os.path.join(home, ".nv"))
print("\n".join(sorted(p for p in paths if os.path.exists(p))))
PY
)
mapfile -t -O "${#DROP[@]}" DROP < <(ldconfig -p 2>/dev/null | awk '/lib(cuda|nvidia-ml|nvidia-ptxjitcompiler|nvidia-nvvm)\.so/ {print $NF}')
DROP+=("$REPO"); [ -n "${OLD_TREE:-}" ] && DROP+=("$OLD_TREE")

# The G-lines' statuses of one run's output, "G1=PASS G2=SKIP ...": the suite's spark-gotchas
# block where there is one (a FAIL's text appears elsewhere too), else every G-line (the reference).
statuses() {
  awk 'function add(m, s,   p) { split(s, p, " "); if (!((m, p[1]) in seen)) { seen[m, p[1]] = 1; line[m] = line[m] (line[m] == "" ? "" : " ") p[1] "=" p[2] } }
       /^=+ spark-gotchas =+$/ { inblock = 1; hasblock = 1; next }
       inblock && /^=/ { inblock = 0 }
       match($0, /^G[0-9]+ [A-Z]+:/) { s = substr($0, 1, RLENGTH - 1); add("all", s); if (inblock) add("block", s) }
       END { print (hasblock ? line["block"] : line["all"]) }' "$1"
}

echo "== $(date -u '+%Y-%m-%d %H:%M UTC') MODE=$MODE PAIRS=$PAIRS EVICT=$EVICT on $(hostname), $(nproc) CPUs"
GPU="$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
TORCH="$("$PY" -c 'import importlib.metadata as m; print(m.version("torch"))' 2>/dev/null || echo none)"
echo "GPU: ${GPU:-none}; $("$PY" -V 2>&1) at $PY; torch $TORCH (not imported here)"
THIS_COMMIT="$(git -C "$REPO" describe --always --dirty 2>/dev/null || echo unknown)"
echo "this tree: $REPO, commit $THIS_COMMIT"
if [ "$MODE" = ab ]; then
  OLD_COMMIT="$("$PY" -c 'import sys, tarfile; print(tarfile.open(sys.argv[1]).pax_headers.get("comment", "unknown"))' "$OLD")"
  echo "old tree: $OLD unpacked in $OLD_TREE, commit $OLD_COMMIT"
  for side in new old; do  # each side must import its own code
    echo "  $side imports $(cd "$(tree_of $side)" && PYTHONPATH="$(tree_of $side)" "$PY" -c 'import spark_gotchas; print(spark_gotchas.__file__)')"
  done
else
  echo "reference: $REFERENCE"
fi
[ "$EVICT" = 1 ] && echo "dropped before each run: ${DROP[*]}"
echo
echo "run,pair,side,wall_s,exit,statuses" > "$OUT/runs.csv"
printf '%-4s %-4s %-10s %7s %4s  %s\n' run pair side wall_s exit statuses

run=0
for pair in $(seq "$PAIRS"); do
  shift_by=$(( (pair - 1) % ${#SIDES[@]} ))
  order=("${SIDES[@]:$shift_by}" "${SIDES[@]:0:$shift_by}")  # rotated: pairs of two alternate
  for side in "${order[@]}"; do
    run=$((run + 1)); name="$(printf '%02d' $run)-$side"; log="$OUT/runs/$name.txt"
    env_run=()
    if [ "$EVICT" = 1 ]; then
      "$PY" "$REPO/devscripts/evict.py" "${DROP[@]}" > /dev/null 2>&1
      triton="$(mktemp -d /tmp/spark-gotchas-triton.XXXXXX)"; env_run+=(TRITON_CACHE_DIR="$triton")
    fi
    if [ "$side" = reference ]; then
      cmd=(bash "$REFERENCE"); tree="$REPO"
    elif [ "$side" = floor ]; then  # the floor of any check of torch: a cold import and the first CUDA use
      cmd=("$PY" -c "import torch; torch.zeros(1, device='cuda'); torch.cuda.synchronize()"); tree="$REPO"
    elif [[ "$side" == installed* ]]; then  # the installed command, from a folder that is not the checkout
      tree="$(mktemp -d /tmp/spark-gotchas-elsewhere.XXXXXX)"; cmd=("$(dirname "$PY")/spark-gotchas" -m fast)
      [ "$TIMELINE" = 1 ] && cmd+=(--json-report --json-report-file="$OUT/runs/$name.json")
    else
      tree="$(tree_of "$side")"; cmd=("$PY" -m pytest -m fast)
      env_run+=(PYTHONPATH="$tree${PYTHONPATH:+:$PYTHONPATH}")
      [ "$TIMELINE" = 1 ] && cmd+=(--json-report --json-report-file="$OUT/runs/$name.json")
    fi
    if [ "$MODE" = variants ] && [ -n "${SIDE_ENV[$side]:-}" ]; then
      IFS=',' read -r -a extra <<< "${SIDE_ENV[$side]}"; env_run+=("${extra[@]}")
    fi
    start=$(date +%s.%N)
    (cd "$tree" && env "${env_run[@]}" "${cmd[@]}") > "$log" 2>&1
    rc=$?
    end=$(date +%s.%N)
    [ "$EVICT" = 1 ] && rm -rf "$triton"
    wall=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }')
    st="$(statuses "$log")"
    printf '%-4s %-4s %-10s %7s %4s  %s\n' "$run" "$pair" "$side" "$wall" "$rc" "${st:-(no G-lines)}"
    echo "$run,$pair,$side,$wall,$rc,$st" >> "$OUT/runs.csv"
    [ "$TIMELINE" = 1 ] && [ -f "$OUT/runs/$name.json" ] && "$PY" "$REPO/devscripts/timeline.py" "$OUT/runs/$name.json"
  done
done

echo
MODE="$MODE" EVICT="$EVICT" GPU="${GPU:-none}" TORCH="$TORCH" THIS_COMMIT="$THIS_COMMIT" OLD_COMMIT="${OLD_COMMIT:-}" \
  REFERENCE="$REFERENCE" SIDES="${SIDES[*]}" "$PY" - "$OUT" <<'PY'
import csv, json, os, platform, statistics, sys
out = sys.argv[1]
sides = os.environ["SIDES"].split()
a, b = sides[0], sides[-1]
runs = list(csv.DictReader(open(os.path.join(out, "runs.csv"))))
for r in runs:
    r["wall_s"], r["exit"], r["run"], r["pair"] = float(r["wall_s"]), int(r["exit"]), int(r["run"]), int(r["pair"])
medians = {}
for side in sides:
    walls = [r["wall_s"] for r in runs if r["side"] == side]
    medians[side] = statistics.median(walls)
    print(f"{side:<14} median {medians[side]:6.2f} s over {len(walls)} runs (min {min(walls):.2f}, max {max(walls):.2f})"
          + (f"; {medians[side] - medians[a]:+.2f} s against {a}" if side != a else ""))
ratio = medians[a] / medians[b] if medians[b] else None
print(f"ratio {a}/{b} of the medians: {ratio:.2f}x" if ratio else f"ratio {a}/{b}: no figure ({b} took 0 s)")
for side in sides[1:-1]:  # variants between the first and the last: each against both ends
    if medians[b]:
        print(f"ratio {side}/{b} of the medians: {medians[side] / medians[b]:.2f}x; "
              f"{side} - {a}: {medians[side] - medians[a]:+.2f} s")
seen = {side: sorted({r["statuses"] for r in runs if r["side"] == side}) for side in sides}
same = None
if os.environ["MODE"] in ("ab", "variants"):
    suite_sides = [s for s in sides if s not in ("reference", "floor")]
    same = all(seen[s] == seen[suite_sides[0]] for s in suite_sides) and len(seen[suite_sides[0]]) == 1
    print("same G-line statuses in every run of every tree or variant: " + ("yes" if same else "NO"))
for side in sides:
    for s in seen[side]:
        print(f"  {side}: {s or '(no G-lines)'}")
summary = {
    "mode": os.environ["MODE"], "evict": os.environ["EVICT"] == "1", "pairs": max(r["pair"] for r in runs),
    "machine": {"host": platform.node(), "cpus": os.cpu_count(), "gpu": os.environ["GPU"],
                "python": platform.python_version(), "torch": os.environ["TORCH"]},
    "trees": {"this": os.environ["THIS_COMMIT"], "old": os.environ["OLD_COMMIT"] or None,
              "reference": os.environ["REFERENCE"] if os.environ["MODE"] == "reference" else None},
    "runs": runs, "medians_s": medians, "ratio": {"of": f"{a}/{b}", "value": ratio},
    "statuses": seen, "same_statuses": same,
}
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=1)
print(f"written: {out}/timing.txt, runs.csv, summary.json, runs/")
PY
rc=$?
exec >&- 2>&-
wait "$TEE"
exit $rc
