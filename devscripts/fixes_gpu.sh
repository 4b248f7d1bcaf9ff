#!/bin/bash
# One command for the GPU machine: what G1, G3 and G7 read there of Triton's ptxas, the kernel log and
# the split parts of its packages, and what the parts search costs the G1 scan.
#
#     bash devscripts/fixes_gpu.sh            # writes under $OUT (default: ./fixes-gpu-out)
#
# $OUT/ptxas.json        triton.ptxas: the ptxas Triton runs for this GPU and its CUDA release
# $OUT/kernel-log.json   kernel.log: the source read (or why none could be), the Xid counts
# $OUT/parts.json        env.cuda_extensions' parts of every package that splits its GPU code
# $OUT/scan-timing.txt   the G1 scan with and without the parts search, warm, three runs each
# $OUT/snapshot.json, $OUT/report.json, $OUT/lines.txt   spark-gotchas -m fast -v -k "g01 or g03 or g07"
set -u
OUT="${OUT:-$PWD/fixes-gpu-out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
cd "$(dirname "$0")/.."

"$PY" - "$OUT" <<'EOF'
import json, sys, time
from pathlib import Path
out = Path(sys.argv[1])
from spark_gotchas.machine.readers import env as ex, kernel, triton
from spark_gotchas.base.serial import to_jsonable

(out / "ptxas.json").write_text(json.dumps(to_jsonable(triton.read_triton_ptxas(None)), indent=1))
(out / "kernel-log.json").write_text(json.dumps(to_jsonable(kernel.read_kernel_log(None)), indent=1))
scan = ex.read_cuda_extensions(None)
parts = {d.name: {"parts_note": d.parts_note, "parts": to_jsonable(d.parts)} for d in scan.distributions if d.parts}
(out / "parts.json").write_text(json.dumps({"interpreter_machine": scan.interpreter_machine,
                                           "machines": scan.machines, "foreign": to_jsonable(scan.foreign),
                                           "distributions": parts}, indent=1))
lines = []
for label in ("with parts", "without parts"):
    keep = ex._parts
    if label == "without parts":
        ex._parts = lambda *a, **k: None
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        ex.read_cuda_extensions(None)
        times.append(time.perf_counter() - t0)
    ex._parts = keep
    lines.append(f"{label}: " + ", ".join(f"{t:.3f} s" for t in times) + f" ({scan.shared_objects} shared objects)")
(out / "scan-timing.txt").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
EOF

"$PY" -m spark_gotchas -m fast -v -k "g01 or g03 or g07" --spark-snapshot "$OUT/snapshot.json" \
    --json-report --json-report-file "$OUT/report.json" > "$OUT/lines.txt" 2>&1
echo "exit $?" >> "$OUT/lines.txt"
grep -E "^G[0-9]+ " "$OUT/lines.txt"
