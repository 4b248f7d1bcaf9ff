#!/usr/bin/env bash
# The foundation on a GPU machine (one H200, torch 2.11.0+cu130, no network): the real preflight
# with a snapshot and a JSON report, its replay, the G1 scan timing, the worker on a CUDA process
# that crashes or hangs, and the foundation's own tests with a GPU present.
# Run from the repo root with the project installed (the .whl/ wheels are installed if present).
# Prints everything to stdout; the documents go to $OUT (default /tmp/spark-gotchas-foundation).
# Runtime: about 3 minutes (preflight ~20 s cold, scan timing ~15 s, worker ~30 s, tests ~2 min).
#
# What it must show:
#  1. `pytest -m fast` on the H200: one G-line per gotcha. G1 must read the driver (580.x, CUDA
#     13.0) and torch 2.11.0+cu130: "G1 PASS: torch 2.11.0+cu130 is built for CUDA 13.0; driver
#     … supports CUDA 13.0 (+2 more PASS)" (the first launch runs in the worker; the scan names
#     ~847 shared objects and links CUDA 13 only). G9: a container (/.dockerenv) or a WARN saying
#     why not, and the broken requirements if any. Exit status 0 or 1 matching the FAIL lines.
#  2. The JSON report: `spark_gotchas.lines` equal to the printed block, platform = NVIDIA H200,
#     profile h200, versions (torch 2.11.0+cu130, driver, cuda_driver 13.0); each check's
#     metadata.gotcha; no value of the secret variables set for the run anywhere in the report
#     or the snapshot ("secrets: none found").
#  3. The replay of that snapshot on the same machine: the same G-lines ("replay: same lines"),
#     and no torch/pynvml imported. Bring $OUT/h200-preflight-snapshot.json back: replayed on the
#     CPU machine it must print the same lines again.
#  4. The G1 scan timing: shared objects (~847), first run and warm median, target <= 0.5 s.
#  5. The worker on CUDA: a task that segfaults after creating a CUDA context -> "killed by
#     SIGSEGV", one that hangs holding GPU memory -> "timed out after 5 s (killed)", and after each
#     the next task runs in a fresh worker and no process of ours is left in nvidia-smi.
#  6. The foundation's tests (tests/test_plugin.py, test_worker.py, test_elf.py, test_g01_*,
#     test_g09_*, test_verdict.py, test_serial.py, test_provider.py, test_snapshot.py) pass on a
#     GPU machine too.
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/spark-gotchas-foundation}"
mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
python3 -c "import spark_gotchas" 2>/dev/null || python3 -m pip install -q --no-build-isolation --no-deps -e . 2>&1 | tail -2
step() { echo; echo "=== [$(date +%T)] $*"; }
T0=$(date +%s)
export HF_TOKEN=hf_foundationSecretValue1 GITHUB_TOKEN=ghp_foundationSecretValue2 \
       WANDB_API_KEY=foundationSecretValue3abc AWS_SECRET_ACCESS_KEY=foundation/Secret/Value4

step "1. pytest -m fast on this machine, with a snapshot and a JSON report"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__, torch.version.cuda)"
python3 -m pytest -m fast -p no:cacheprovider -rs --durations=6 \
  --spark-snapshot "$OUT/h200-preflight-snapshot.json" \
  --json-report --json-report-file="$OUT/h200-preflight-report.json" > "$OUT/preflight.txt" 2>&1
echo "pytest exit status: $?"
sed -n '/slowest/,$p' "$OUT/preflight.txt"

step "2. the JSON report"
python3 - "$OUT/h200-preflight-report.json" "$OUT/h200-preflight-snapshot.json" "$OUT/preflight.txt" <<'PY'
import json, os, re, sys
report_path, snap_path, text_path = sys.argv[1:4]
report = json.load(open(report_path))
section = report["spark_gotchas"]
printed = open(text_path).read().split("= spark-gotchas =", 1)[1].splitlines()
printed = [l for l in printed if re.match(r"^(G\d+ |    fix: )", l)]
print("lines equal to the printed block:", section["lines"] == printed)
print("platform:", json.dumps(section["platform"]))
print("versions:", json.dumps(section["versions"]))
for t in report["tests"]:
    g = t.get("metadata", {}).get("gotcha")
    if g and g["id"] in ("G1", "G9"):
        print(t["nodeid"].split("::")[1], json.dumps({k: g[k] for k in ("id", "status", "summary")}))
        print("   readings:", json.dumps(g["readings"])[:400])
secrets = [os.environ[k] for k in ("HF_TOKEN", "GITHUB_TOKEN", "WANDB_API_KEY", "AWS_SECRET_ACCESS_KEY")]
leaks = [p for p in (report_path, snap_path) if any(s in open(p).read() for s in secrets)]
print("secrets:", "LEAKED in " + ", ".join(leaks) if leaks else "none found")
PY

step "3. replay of the snapshot on this machine"
cat > /tmp/probe_plugin.py <<'PY'
import sys
def pytest_unconfigure(config):
    print("imported during the replay:", {m: m in sys.modules for m in ("torch", "pynvml", "spark_gotchas.worker")})
PY
PYTHONPATH=/tmp${PYTHONPATH:+:$PYTHONPATH} python3 -m pytest -m fast -p no:cacheprovider -p probe_plugin \
  --spark-replay "$OUT/h200-preflight-snapshot.json" > "$OUT/replay.txt" 2>&1
echo "replay exit status: $?"
glines() { awk '/^=+ spark-gotchas =+$/ {on = 1; next} /^=/ {on = 0} on && /^(G[0-9]+ |    fix: )/' "$1"; }
glines "$OUT/preflight.txt"
if diff <(glines "$OUT/preflight.txt") <(glines "$OUT/replay.txt") > "$OUT/replay.diff"; then
  echo "replay: same lines"
else
  echo "replay: DIFFERENT lines"; cat "$OUT/replay.diff"
fi
grep "imported during the replay" "$OUT/replay.txt"

step "4. the G1 extension scan: time"
python3 devscripts/g01_scan_bench.py --cold --repeat 5

step "5. the worker on a CUDA process that crashes or hangs"
mkdir -p /tmp/gpu_tasks
cat > /tmp/gpu_tasks/gpu_tasks.py <<'PY'
import ctypes, os, time
import torch

def cuda_then_segv():
    x = torch.ones(1 << 28, device="cuda")  # 1 GiB held when the process dies
    torch.cuda.synchronize()
    ctypes.string_at(0)

def cuda_then_hang():
    x = torch.ones(1 << 28, device="cuda")
    torch.cuda.synchronize()
    time.sleep(600)

def cuda_ok():
    return {"pid": os.getpid(), "sum": float(torch.arange(1024, device="cuda", dtype=torch.float32).sum().item())}
PY
PYTHONPATH=/tmp/gpu_tasks${PYTHONPATH:+:$PYTHONPATH} python3 - <<'PY'
import subprocess, time
from spark_gotchas.worker import Worker

def ours_on_gpu():
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader"],
                             capture_output=True, text=True).stdout.strip()
    except OSError as exc:
        return f"(nvidia-smi: {exc.strerror})"
    return out or "(none)"

w = Worker()
t = time.monotonic(); r = w.call("gpu_tasks:cuda_ok", timeout=120)
print(f"first task: ok={r.ok} {r.value} in {time.monotonic() - t:.1f} s (torch import included)")
for task, timeout in (("gpu_tasks:cuda_then_segv", 60), ("gpu_tasks:cuda_then_hang", 5)):
    t = time.monotonic(); r = w.call(task, timeout=timeout)
    print(f"{task}: ok={r.ok} crashed={r.crashed} signal={r.signal!r} timed_out={r.timed_out} "
          f"problem={r.problem!r} ({time.monotonic() - t:.1f} s)")
    time.sleep(1)
    print("  compute apps on the GPU now:", ours_on_gpu())
    r = w.call("gpu_tasks:cuda_ok", timeout=120)
    print(f"  next task: ok={r.ok} {r.value}; worker starts so far: {w.starts}")
w.close()
print("after close, compute apps:", ours_on_gpu())
PY

step "6. the foundation's own tests with a GPU present"
python3 -m pytest -p no:cacheprovider -q tests/test_verdict.py tests/test_serial.py tests/test_provider.py \
  tests/test_snapshot.py tests/test_worker.py tests/test_plugin.py tests/test_elf.py tests/test_g01_judges.py \
  tests/test_g01_scan.py tests/test_g09_environment.py 2>&1 | tail -15

step "done in $(( $(date +%s) - T0 )) s; documents in $OUT"
ls -la "$OUT"
