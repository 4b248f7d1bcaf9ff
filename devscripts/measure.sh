#!/usr/bin/env bash
# G5 (bandwidth) and G7 (NVFP4 vs FP8) on a GPU machine: the quality bar of the probes, Triton
# tuning, GEMM rates, the fatbin walker against cuobjdump, and the checks' own lines.
# On the GPU machine: bash devscripts/batch.sh measure (carry [".whl"]; batch.sh installs the suite).
# Prints everything to stdout (the figures of docs/benchmarks.md's G5/G7 rows); writes under $OUT
# (default /tmp/spark-gotchas-measure): the tuning grid bandwidth-tune.json, the checks' snapshot
# g05g07.json and the sweep's g5_bandwidth_sweep.csv. Needs an NVIDIA GPU.
# Runtime: about 3 minutes on one H200 (four torch imports of ~6 s, ~60 Triton compilations,
# probes at 1 and 4 GiB, GEMMs at 8192^3, cuobjdump of libtorch_cuda.so, a bandwidth sweep).
#
# What it must show:
#  1. the fast probe with an empty Triton cache ("probe N s", cold compile included); the warm
#     figure is step 6's "fast probe in the check" (bar: <= 1.5 s);
#  2. per method at 1 GiB and 4 GiB: the probe's GB/s, the best torch reference op in the same
#     run and the ratio (bar >= 97%), BabelStream's figure on this H200 and the ratio (bar
#     >= 100%; write has no BabelStream kernel), the best method / NVML theoretical (bar >= 95%);
#  3. the tuning table: every Triton configuration per method, fastest first, torch ops beside
#     them (pick DEFAULT_CONFIGS in microbench/bandwidth.py from it);
#  4. GEMM at 8192^3: BF16 and FP8 TFLOP/s against 763 and 1290, FP8 with fast accumulation,
#     NVFP4 "not supported here: ..." (sm_90 has no FP4);
#  5. the fatbin walker's targets next to cuobjdump's for the nvcc fixtures, a fresh build with
#     this machine's nvcc, and libtorch_cuda.so (cuobjdump prints sm_120f as sm_120);
#  6. `pytest -m fast -k "g05 or g07"`: real G5 PASS and G7 INFO lines, the same lines replayed,
#     the same snapshot judged as a Spark; then the soak sweep's G5 line and CSV;
#  7. the Markdown rows for docs/benchmarks.md.
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/spark-gotchas-measure}"
mkdir -p "$OUT"
export PATH="$PATH:/usr/local/cuda/bin"
export TRITON_CACHE_DIR="$(mktemp -d /tmp/spark-gotchas-triton.XXXXXX)"  # empty: step 1 measures a cold compile
trap 'rm -rf "$TRITON_CACHE_DIR"' EXIT
step() { echo; echo "=== [$(date +%T)] $*"; }
T0=$(date +%s)

step "0. machine"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv
python3 -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"

step "1. fast probe (what the G5 check runs), empty Triton cache"
python3 -m spark_gotchas.microbench bandwidth

step "2-4. quality bar at 1 and 4 GiB, tuning grid, GEMM (one process)"
timeout 300 python3 - "$OUT" <<'PY'
import json, sys
from spark_gotchas.machine import nvml
from spark_gotchas.microbench import bandwidth as bw, gemm
from spark_gotchas.machine.readers.gpu import read_device
from spark_gotchas.base.serial import to_jsonable

out = sys.argv[1]
dev = read_device(0, nvml.device_handles()[0])
theo = dev.theoretical_bandwidth_gbps or float("nan")
print(f"NVML: {dev.name}, max memory clock {dev.max_memory_clock_mhz} MHz x {dev.bus_width_bits} bit -> "
      f"theoretical {theo:.0f} GB/s")
BABEL = {"copy": ("copy", 3965), "read": ("dot", 4396), "triad": ("triad", 4361), "write": (None, None)}
rows = []
for size_mb in (1024, 4096):
    res = bw.probe("sized", size_mb, references=True, warmup_ms=30, rep_ms=200)
    print(); print(bw.format_result(res)); print(f"-- bars at {size_mb} MiB per array:")
    for m in res.methods:
        refs = [r for r in res.references if r.method == m.method and r.ok]
        ref = max(refs, key=lambda r: r.gbps) if refs else None
        name, babel = BABEL[m.method]
        if not m.ok:
            print(f"{m.method:<6} probe failed: {m.error or m.check}"); continue
        vs_ref = f"{m.gbps / ref.gbps:6.1%} of {ref.implementation} {ref.gbps:.0f} (bar 97%)" if ref else "no torch ref"
        vs_babel = (f"{m.gbps / babel:6.1%} (best rep {m.gbps_best / babel:6.1%}) of BabelStream {name} {babel}"
                    if babel else "BabelStream has no write kernel")
        print(f"{m.method:<6} {m.gbps:7.0f} GB/s (best {m.gbps_best:.0f}) | {vs_ref} | {vs_babel}")
        rows.append((size_mb, m, ref, babel))
    best = res.best_method()
    if best is None:
        print("no method measured"); continue
    print(f"best method {best.method} {best.gbps:.0f} GB/s = {best.gbps / theo:.1%} of NVML theoretical {theo:.0f} "
          f"(bar 95%); probe {res.seconds:.2f} s")
print("\n== tuning at 1 GiB per array (fastest first)")
tuned = bw.tune(1024, warmup_ms=10, rep_ms=40)
json.dump(to_jsonable(tuned), open(f"{out}/bandwidth-tune.json", "w"), indent=1)
for method in bw.METHODS:
    print("\n".join(bw.format_rows(sorted((r for r in tuned.rows if r.method == method), key=lambda r: -(r.gbps or 0)))))
print("\n== GEMM 8192^3 (reference run: bf16 763, fp8 1290 TFLOP/s)")
g = gemm.probe(8192)
print(gemm.format_result(g))
for p, ref in (("bf16", 763.0), ("fp8", 1290.0)):
    r = g.get(p)
    print(f"{p}: {r.tflops:.0f} TFLOP/s = {r.tflops / ref:.1%} of the reference {ref:.0f}" if r.ok else f"{p}: {r.error}")
fa = gemm.probe(8192, ("fp8",), fast_accum=True).get("fp8")
print(f"fp8 fast accumulation: {fa.tflops:.0f} TFLOP/s" if fa.ok else f"fp8 fast accumulation: {fa.error}")
print("\n== Markdown rows for docs/benchmarks.md")
print("| array | method | probe GB/s (median / best) | best torch op, same run | probe / torch | BabelStream | probe / BabelStream |")
print("|---|---|---|---|---|---|---|")
for size_mb, m, ref, babel in rows:
    print(f"| {size_mb // 1024} GiB | {m.method} | {m.gbps:.0f} / {m.gbps_best:.0f} | "
          f"{(ref.implementation + ' ' + format(ref.gbps, '.0f')) if ref else '-'} | "
          f"{(format(m.gbps / ref.gbps, '.1%')) if ref else '-'} | {babel or '-'} | "
          f"{(format(m.gbps / babel, '.1%')) if babel else '-'} |")
print(f"| GEMM 8192^3 | " + ", ".join(f"{r.precision} {r.tflops:.0f} TFLOP/s" if r.ok else f"{r.precision}: not supported"
                                       for r in g.results) + " | | | | | |")
PY

step "5. fatbin walker vs cuobjdump"
targets() { sed -E 's/.*\.((sm|compute)_[0-9]+[af]?)\.(cubin|ptx).*/\3 \1/' | sort | uniq -c; }
walker() { python3 -c "import sys; from spark_gotchas.machine import fatbin; t = fatbin.read_file(sys.argv[1]); print('   walker:', t.error or dict(sorted(t.counts().items())))" "$1"; }
for f in tests/fixtures/fatbin/*.so tests/fixtures/fatbin/*.o; do
  echo "-- $f"
  echo "   cuobjdump: $(cuobjdump --list-elf --list-ptx "$f" 2>&1 | targets | tr -s ' \n' ' ')"
  walker "$f"
done
echo "-- fresh build with this machine's nvcc ($(nvcc --version | tail -1))"
python3 -m pytest tests/test_fatbin.py -q -p no:cacheprovider -k "fresh or torch_wheel or cuobjdump" 2>&1 | tail -2
TL=$(python3 -c "import torch, os; print(os.path.join(os.path.dirname(torch.__file__), 'lib', 'libtorch_cuda.so'))")
echo "-- $TL: cuobjdump --list-elf --list-ptx (entries per target)"
time cuobjdump --list-elf --list-ptx "$TL" 2>&1 | targets
echo "-- walker"
time walker "$TL"

step "6. the checks: pytest -m fast -k 'g05 or g07' (snapshot $OUT/g05g07.json), replayed, judged as a Spark"
PYTEST="timeout 240 python3 -m pytest -p no:cacheprovider -q -rA"
$PYTEST -m fast -k "g05 or g07" --spark-model-gb 70 --spark-snapshot "$OUT/g05g07.json" 2>&1 | grep -E "^(G[57] |    fix:|[0-9]+ (passed|failed))"
python3 -c "import json,sys; b=json.load(open(sys.argv[1]))['readings'].get('bench.bandwidth') or {}; r=b.get('result') or {}; print('fast probe in the check:', round(r.get('seconds', -1), 2), 's,', r.get('sizing'), ',', r.get('backend'), b.get('problem') or b.get('reason') or '')" "$OUT/g05g07.json"
echo "-- replayed"
$PYTEST -m fast -k "g05 or g07" --spark-replay "$OUT/g05g07.json" 2>&1 | grep -E "^(G[57] |    fix:)"
echo "-- replayed as a Spark (--spark-profile gb10 --spark-precision nvfp4)"
$PYTEST -m fast -k "g05 or g07" --spark-replay "$OUT/g05g07.json" --spark-profile gb10 --spark-precision nvfp4 2>&1 | grep -E "^(G[57] |    fix:)"
echo "-- soak: the bandwidth sweep"
$PYTEST -m soak -k g05 --soak-dir "$OUT" 2>&1 | grep -E "^(G5 |    fix:|G5 sweep:|[0-9]+ (passed|failed))"
head -3 "$OUT/g5_bandwidth_sweep.csv"; wc -l "$OUT/g5_bandwidth_sweep.csv"

step "done in $(( $(date +%s) - T0 )) s"
