#!/usr/bin/env bash
# On a GPU machine: a real machine's readings fit the ranges the reading types declare, G5's kernels
# load from package data, and what the run writes is standard JSON.
#   on the GPU machine: bash devscripts/batch.sh inputs          # carry [".whl"]
# Expect, in inputs.log:
#   ranges: 10 G-lines, 0 refused as out of range          (no reading of a real H100/H200 is refused)
#   strict JSON: snapshot ok, report ok, microbench ok       (no NaN or Infinity in any of them)
#   kernels: .../spark_gotchas/microbench/ptx (cuda driver …) (the probe ran the PTX data files)
#   replay: same 10 lines                                    (the snapshot replays to the live lines)
#   pytest: N passed                                          (the range, door and PTX tests, on the GPU)
# Writes under $OUT: preflight.txt, snapshot.json, report.json, bandwidth.json, replay.txt.
# Runtime: about a minute on one H200.
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/inputs-out}"
mkdir -p "$OUT"

python3 -m spark_gotchas -m fast -p no:cacheprovider --spark-snapshot="$OUT/snapshot.json" \
    --json-report --json-report-file="$OUT/report.json" > "$OUT/preflight.txt" 2>&1
echo "preflight exit $?"
lines=$(grep -cE '^G([1-9]|10) (PASS|FAIL|WARN|INFO|SKIP): ' "$OUT/preflight.txt")
refused=$(grep -cE 'is (below|above) |not a finite number|digits, beyond 64 bits' "$OUT/preflight.txt")
echo "ranges: $lines G-lines, $refused refused as out of range"
grep -E 'is (below|above) |not a finite number|digits, beyond 64 bits' "$OUT/preflight.txt" | head -5

python3 -m spark_gotchas microbench bandwidth --json > "$OUT/bandwidth.json" 2> "$OUT/bandwidth.err"
python3 - "$OUT" <<'EOF'
import json, sys
from pathlib import Path

out = Path(sys.argv[1])

def strict(name):
    def refuse(constant):
        raise ValueError(f"{name} holds {constant}")
    try:
        return json.loads((out / name).read_text(), parse_constant=refuse)
    except (OSError, ValueError) as exc:
        print(f"strict JSON: {name}: {exc}")
        return None

docs = {name: strict(name) for name in ("snapshot.json", "report.json", "bandwidth.json")}
print("strict JSON: " + ", ".join(f"{n.split('.')[0].replace('bandwidth', 'microbench')} {'ok' if d is not None else 'NOT ok'}"
                                  for n, d in docs.items()))
from spark_gotchas.microbench import _stream_ptx
backend = (docs["bandwidth.json"] or {}).get("backend", "?")
print(f"kernels: {Path(_stream_ptx.__file__).parent / 'ptx'} ({backend})")
EOF

python3 -m spark_gotchas -m fast -p no:cacheprovider --spark-replay="$OUT/snapshot.json" > "$OUT/replay.txt" 2>&1
if diff <(grep -E '^G([1-9]|10) ' "$OUT/preflight.txt") <(grep -E '^G([1-9]|10) ' "$OUT/replay.txt") > /dev/null; then
  echo "replay: same $lines lines"
else
  echo "replay: lines differ"
  diff <(grep -E '^G([1-9]|10) ' "$OUT/preflight.txt") <(grep -E '^G([1-9]|10) ' "$OUT/replay.txt") | head -10
fi

python3 -m pytest -q -p no:cacheprovider tests/test_ranges.py tests/test_input_doors.py tests/test_g05_headstart.py \
    tests/test_report_whole.py 2>&1 | tail -3 | sed 's/^/pytest: /'
