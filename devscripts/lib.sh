# Shared by coldprofile.sh, speed.sh and ab.sh (source it): one timed preflight, and the page-cache
# eviction that makes a warm machine import cold again.
#   timed_fast NAME [VAR=VALUE...]   runs `pytest -m fast` in $TREE (default: this repository) with
#                                    the given environment; writes $OUT/NAME.{txt,json}; prints the
#                                    wall time, pytest's stages (devscripts/traceplug.py) and its summary
#   evict_libraries                  drops site-packages, the standard library and /usr/local/cuda*
#   unpack_old                       unpacks .ab/old.tar (a git archive of the commit to compare
#                                    with, carried to the device) into /tmp/old; makes $OUT
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LIBS="$(python3 -c 'import sysconfig; p = sysconfig.get_paths(); print(p["purelib"], p["platlib"], p["stdlib"])')"

timed_fast() {
  local name="$1"; shift
  export T0=$(date +%s.%N)
  (cd "${TREE:-$REPO}" && env "$@" PYTHONPATH="$REPO/devscripts" python3 -m pytest -p traceplug -m fast -q \
      -p no:cacheprovider --durations=0 --durations-min=0.05 \
      --json-report --json-report-file="$OUT/$name.json" > "$OUT/$name.txt" 2>&1)
  local rc=$?
  echo "== $name: $(python3 -c "import os; print(f'{$(date +%s.%N) - float(os.environ[\"T0\"]):.2f}')") s wall, exit $rc, $(grep -v "^\[trace\]" "$OUT/$name.txt" | tail -n 1)"
  grep "^\[trace\]" "$OUT/$name.txt" | tr '\n' ' ' | sed 's/\[trace\]/|/g'; echo
}

evict_libraries() {
  python3 "$REPO/devscripts/evict.py" $LIBS /usr/local/cuda* > /dev/null 2>&1
}

unpack_old() {
  mkdir -p "$OUT" /tmp/old && tar -xf "$REPO/.ab/old.tar" -C /tmp/old
}
