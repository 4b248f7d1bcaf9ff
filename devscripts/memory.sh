#!/usr/bin/env bash
# G3 (unified-memory OOM) and G6 (contention) on a GPU machine: the evidence the checks need.
# On the GPU machine: bash devscripts/batch.sh memory (carry [".whl"]; batch.sh installs the suite).
# Prints everything to stdout (the G3 load probe's and G6's figures of docs/benchmarks.md); writes
# under $OUT (default /tmp/spark-gotchas-memory) the snapshots memory-*.json and the load probe's
# g3-load-probe.csv. Needs an NVIDIA GPU with 40 GB free and 21 GB of disk.
# Runtime: about 2.5 minutes on one H200 (a 5 s torch import per live pytest run, a 40 GB
# allocation, a 20 GB page-cache fill, an 8 GB cold and a 4 GB warm safetensors load); disk:
# <= 21 GB at a time under reports/ (deleted as it goes).
#
# What it must show:
#  1. the G3/G6 fast checks clean (G3 PASS/INFO, G6 PASS), and the same lines replayed;
#  2. G6 FAIL naming the pid of a process holding 40 GB whose command line reads
#     "vllm serve some/model --gpu-memory-utilization 0.9" (and nvidia-smi listing it);
#  3. G3's page-cache reading rising by ~20 GB after a 20 GB file is written and read, and
#     the same meminfo judged as a Spark (--spark-profile gb10 --spark-model-gb 60) -> G3 WARN;
#  4. the soak load probe's line: an 8 GB cold load's peak extra memory as a multiple of the
#     file (expected ~2 on a discrete GPU: page cache 1x + CUDA copy 1x); and the CLI's warm
#     4 GB load ending in peak_extra_ratio= (expected below the cold one: the cache was already there).
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/spark-gotchas-memory}"
mkdir -p "$OUT" reports
CHECKS="tests_gotchas/test_g03_unified_memory.py tests_gotchas/test_g06_contention.py"
PYTEST="timeout 240 python3 -m pytest -p no:cacheprovider -q -rA"
meminfo() { echo "-- $1:"; grep -E '^(MemTotal|MemFree|MemAvailable|Buffers|Cached|Dirty|Shmem):' /proc/meminfo; }
step() { echo; echo "=== [$(date +%T)] $*"; }
T0=$(date +%s)

step "1. fast checks, clean machine (snapshot $OUT/memory-clean.json), then replayed"
nvidia-smi --query-gpu=name,memory.total,memory.used,memory.free --format=csv
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv
meminfo "meminfo before"
$PYTEST -m fast $CHECKS --spark-snapshot "$OUT/memory-clean.json" 2>&1 | tail -25
$PYTEST -m fast $CHECKS --spark-replay "$OUT/memory-clean.json" 2>&1 | grep -E '^G[36] |fix:'

step "2. a vLLM-like process holding 40 GB: G6 must FAIL naming it"
python3 -c "
import sys, time, torch
x = torch.empty(40 * 10**9, dtype=torch.uint8, device='cuda'); x.fill_(1); torch.cuda.synchronize()
print('holding', x.numel() / 1e9, 'GB', flush=True); time.sleep(300)
" vllm serve some/model --gpu-memory-utilization 0.9 > "$OUT/fake-vllm.log" 2>&1 &
FAKE=$!
for _ in $(seq 60); do grep -q holding "$OUT/fake-vllm.log" && break; sleep 0.5; done
cat "$OUT/fake-vllm.log"
echo "pid $FAKE: $(tr '\0\n' '  ' < /proc/$FAKE/cmdline)"
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv
$PYTEST -m fast tests_gotchas/test_g06_contention.py --spark-snapshot "$OUT/memory-g6-fail.json" 2>&1 | grep -E '^G6 |fix:|passed|failed'
echo "-- replayed:"
$PYTEST -m fast tests_gotchas/test_g06_contention.py --spark-replay "$OUT/memory-g6-fail.json" 2>&1 | grep -E '^G6 |fix:'
kill "$FAKE"; wait "$FAKE" 2>/dev/null

step "3. fill the page cache with a 20 GB file: G3's reading changes"
meminfo "meminfo before the file"
dd if=/dev/zero of=reports/pagecache-fill.bin bs=8M count=2500 conv=fdatasync status=none
cat reports/pagecache-fill.bin > /dev/null
meminfo "meminfo with 20 GB of file pages cached"
$PYTEST -m fast tests_gotchas/test_g03_unified_memory.py --spark-snapshot "$OUT/memory-cache.json" 2>&1 | grep -E '^G3 |fix:|passed'
echo "-- the same reading judged as a Spark (unified pool) planning 60 GB of weights:"
$PYTEST -m fast tests_gotchas/test_g03_unified_memory.py --spark-replay "$OUT/memory-cache.json" \
    --spark-profile gb10 --spark-model-gb 60 2>&1 | grep -E 'G3 (WARN|PASS|FAIL|INFO)|fix:'
rm -f reports/pagecache-fill.bin
meminfo "meminfo after deleting the file"

step "4. load probe: soak check (8 GB default, cold), then the CLI with the file already cached (4 GB, warm)"
$PYTEST -m soak tests_gotchas/test_g03_unified_memory.py --soak-duration 1m --spark-snapshot "$OUT/memory-soak.json" 2>&1 \
    | grep -E 'G3 |fix:|passed|failed|load probe'
timeout 120 python3 -m spark_gotchas.microbench safetensors_load --size-gb 4 --warm --dir reports
ls reports/g3-load-probe* 2>/dev/null; cp reports/g3-load-probe.csv "$OUT/" 2>/dev/null
echo; echo "=== done in $(( $(date +%s) - T0 )) s; snapshots in $OUT"
