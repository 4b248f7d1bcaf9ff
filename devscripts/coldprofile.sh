#!/usr/bin/env bash
# Where a cold preflight's time goes on a GPU machine: the machine's first preflight (cold), a
# warm one, one with an empty Triton cache, and one with the Python libraries dropped from the
# page cache as well (devscripts/evict.py), each with the worker's timeline from the JSON report;
# then import and CUDA start-up times. Runtime: about 2 minutes on one H200.
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/spark-gotchas-coldprofile}"
mkdir -p "$OUT"
. devscripts/lib.sh
fast() { timed_fast "$@"; python3 devscripts/timeline.py "$OUT/$1.json"; }
fast cold
fast warm
fast triton-empty TRITON_CACHE_DIR="$(mktemp -d)"
evict_libraries
fast evicted TRITON_CACHE_DIR="$(mktemp -d)"
evict_libraries
fast evicted-triton-warm
fast warm2
sed -n '/slowest/,/^=/p' "$OUT/warm.txt" | head -40
echo "== startup pieces"
python3 - <<'PY'
import time, subprocess, sys
t = time.perf_counter(); subprocess.run([sys.executable, "-c", "pass"]); print(f"python -c pass: {time.perf_counter()-t:.2f} s")
t = time.perf_counter(); subprocess.run([sys.executable, "-m", "pytest", "--version"], capture_output=True); print(f"pytest --version: {time.perf_counter()-t:.2f} s")
code = r'''
import time, os
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
import triton
t2 = time.perf_counter()
torch.cuda.init(); x = torch.zeros(1, device="cuda"); torch.cuda.synchronize()
t3 = time.perf_counter()
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16); c = a @ a; torch.cuda.synchronize()
t4 = time.perf_counter()
print(f"import torch {t1-t0:.2f} s, import triton {t2-t1:.2f} s, CUDA init {t3-t2:.2f} s, first bf16 GEMM {t4-t3:.2f} s")
'''
subprocess.run([sys.executable, "-c", code])
PY
python3 -X importtime -c "import torch" 2> "$OUT/importtime-torch.txt"
sort -t'|' -k2 -n -r "$OUT/importtime-torch.txt" | head -25
python3 -X importtime -m pytest --version 2> "$OUT/importtime-pytest.txt" >/dev/null
sort -t'|' -k2 -n -r "$OUT/importtime-pytest.txt" | head -20
echo "== libraries"
python3 - <<'PY'
import glob, os, sysconfig
site = sysconfig.get_paths()["platlib"]
for pat in ("nvidia/*/lib/libcublas*", "nvidia/*/lib/libcudart*", "nvidia/cu13/lib/*", "torch/lib/libcublas*"):
    for p in sorted(glob.glob(os.path.join(site, pat)))[:20]:
        print(p, os.path.getsize(p) // 2**20, "MiB")
PY
ldconfig -p | grep -E "cublas|libcuda\.so" | head
nvidia-smi --query-gpu=name,persistence_mode,clocks.sm,clocks.max.sm --format=csv
