#!/usr/bin/env bash
# spark-gotchas watch on a GPU machine, in one command:
#   (a) a real torch training loop (an 8-layer 4096-wide MLP, BF16, AdamW, on cuda:0, printing
#       "step N: loss L, R it/s" twice a second into a log file) watched for WATCH_SECONDS, with a
#       second process starting a BF16 GEMM load on the same GPU halfway and stopping 30 s before
#       the end: G6 must name that process and blame the rate's fall on it, G4 must not blame cooling;
#   (b) meanwhile, from 15 s in, a second watch attached with --pid to the same loop for ATTACH_SECONDS
#       (it reads the rate from the loop's log file), ended by SIGTERM: the loop goes on;
#   (c) the cost: the same loop COST_SECONDS long, COST_RUNS times without and COST_RUNS times with
#       the watch (--every 1, --rate-regex), interleaved; each run's mean rate after a 3 s warm-up,
#       the medians and the difference; the watch's own CPU share and memory from its reports.
# Writes to $OUT (default /tmp/watch-gpu; 6 files): watch.csv, watch.png, report.json (from (a)),
# attach.json (the report of (b)), cost.txt (every run's rate), summary.txt (the GPU, every line
# both watches said, the G-lines, the checks below as CHECK lines, the cost's medians). Each part
# copies its files as it ends, so a run cut at the command's limit keeps the parts done.
#
#   bash devscripts/watch_gpu.sh                              # a, b, c: WATCH_SECONDS=300 (a), then c: ~9 min
#   PARTS="a b" WATCH_SECONDS=570 bash devscripts/watch_gpu.sh   # the 10-minute watched run, (b) beside it (~9.8 min)
#   PARTS=c COST_RUNS=5 COST_SECONDS=15 bash devscripts/watch_gpu.sh
#   DEVICE=cpu WIDTH=256 WATCH_SECONDS=40 COST_RUNS=2 COST_SECONDS=6 bash devscripts/watch_gpu.sh   # the flow, no GPU
#   PARTS=host bash devscripts/watch_gpu.sh                   # the watch's own CPU and memory beside logs of
#                                                             # 0, 10, 100 lines a second (~3.5 min, any machine)
#
# WATCH_SECONDS defaults to 570 when PARTS leaves out c, 300 with it, so the whole command stays
# within 600 s. Run it from the repository root through the device tool; it installs the suite
# (pip install --no-build-isolation --no-deps -e .) when `import spark_gotchas` fails. Needs
# torch with CUDA, NVML (nvidia-ml-py), psutil and matplotlib; never changes clocks, power limits or
# modes, never resets the GPU.
#
# What the checks expect (the CHECK lines say PASS or FAIL for each):
#  - (a) a live "G6 … pid N python3 joined the GPU" line naming the GEMM's pid, a live rate line
#    "… since pid N python3 joined the GPU", a "G6 ended … left the GPU" line; at the end a G6 WARN
#    (or FAIL) naming that pid and the rate's fall, a G4 line that is no FAIL and whose fix does not
#    say "improve cooling", exit status 0, the three files;
#  - (b) the attached watch ends "still running (the watching ended by SIGTERM)", exit 0, the loop
#    still running afterwards, its report's rate read (rate_values > 0);
#  - (c) the medians within noise (printed: the difference and each side's spread).
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/watch-gpu}"
mkdir -p "$OUT"
PARTS="${PARTS:-a b c}"
case " $PARTS " in *" c "*) DEFAULT_WATCH=300 ;; *) DEFAULT_WATCH=570 ;; esac
WATCH_SECONDS="${WATCH_SECONDS:-$DEFAULT_WATCH}"
ATTACH_SECONDS="${ATTACH_SECONDS:-30}"
COST_RUNS="${COST_RUNS:-5}"
COST_SECONDS="${COST_SECONDS:-15}"
PY="${PYTHON:-python3}"
SCRATCH="$(mktemp -d /tmp/watch-gpu.XXXXXX)"
export SPARK_GOTCHAS_STATE_DIR="$SCRATCH/state"
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }
check() { if eval "$2"; then say "CHECK PASS: $1"; else say "CHECK FAIL: $1"; fi; }
cleanup() {
  for pid in ${GEMM_PID:-} ${LOOP_PID:-} ${ATTACH_PID:-}; do kill "$pid" 2>/dev/null; done
  rm -rf "$SCRATCH"
}
trap cleanup EXIT
T0=$(date +%s)

$PY -c "import spark_gotchas" 2>/dev/null || $PY -m pip install -q --no-build-isolation --no-deps -e . 2>&1 | tail -2
say "=== $(date -u '+%F %T UTC') watch_gpu.sh PARTS='$PARTS' WATCH_SECONDS=$WATCH_SECONDS commit $(git rev-parse --short HEAD 2>/dev/null)"
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit,clocks.max.sm --format=csv,noheader 2>&1 | tee -a "$SUMMARY"
$PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0))" 2>&1 | tee -a "$SUMMARY"

cat > "$SCRATCH/train.py" <<'PY'
"""A small training loop: an 8-layer MLP, BF16, AdamW; prints its rate twice a second and its mean at the end."""
import os, sys, time
import torch
seconds = float(sys.argv[1])
torch.manual_seed(0)
dev, width = os.environ.get("DEVICE", "cuda"), int(os.environ.get("WIDTH", "4096"))
layers = [torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.GELU()) for _ in range(8)]
model = torch.nn.Sequential(*layers).to(dev, torch.bfloat16)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
x = torch.randn(512, width, device=dev, dtype=torch.bfloat16)
start = time.time()
last, since, step, warm_steps, warm_at = start, 0, 0, None, None
while time.time() - start < seconds:
    loss = model(x).float().pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    step += 1
    since += 1
    now = time.time()  # when the step was queued; synchronized below before any figure is taken
    if (warm_at is None and now - start >= 3.0) or now - last >= 0.5:
        if dev == "cuda":
            torch.cuda.synchronize()
        now = time.time()
        if warm_at is None and now - start >= 3.0:
            warm_at, warm_steps = now, step
        if now - last >= 0.5:
            print(f"step {step}: loss {loss.item():.4f}, {since / (now - last):.2f} it/s", flush=True)
            last, since = now, 0
if dev == "cuda":
    torch.cuda.synchronize()
end = time.time()
if warm_at is not None and end > warm_at:
    print(f"mean rate {(step - warm_steps) / (end - warm_at):.3f} it/s over {end - warm_at:.1f} s", flush=True)
PY
cat > "$SCRATCH/gemm.py" <<'PY'
"""Another job on the same GPU: BF16 8192^3 GEMMs for the given seconds."""
import os, sys, time
import torch
seconds = float(sys.argv[1])
dev, width = os.environ.get("DEVICE", "cuda"), 2 * int(os.environ.get("WIDTH", "4096"))
a = torch.randn(width, width, device=dev, dtype=torch.bfloat16)
b = torch.randn_like(a)
start = time.time()
while time.time() - start < seconds:
    for _ in range(8):
        c = a @ b
    if dev == "cuda":
        torch.cuda.synchronize()
PY
RATE='([0-9.]+) it/s'

part_a() {
  say ""
  say "=== (a) the loop watched for ${WATCH_SECONDS} s, a GEMM load from $((WATCH_SECONDS / 2)) s to $((WATCH_SECONDS - 30)) s; (b) attached from 15 s"
  local a="$SCRATCH/a"
  $PY -m spark_gotchas watch --out "$a" --rate-regex "$RATE" -- $PY "$SCRATCH/train.py" "$WATCH_SECONDS" \
    > "$SCRATCH/train.log" 2> "$SCRATCH/a.err" &
  local watch_pid=$!
  sleep 15
  LOOP_PID=$(pgrep -P "$watch_pid" | head -1)
  local b_job=""
  if [ -n "$LOOP_PID" ] && [[ " $PARTS " == *" b "* ]]; then
    part_b "$LOOP_PID" > "$SCRATCH/b.summary" 2>&1 &
    b_job=$!
  fi
  local now=$(( $(date +%s) - T_A ))
  local wait_for=$(( WATCH_SECONDS / 2 - now ))
  [ "$wait_for" -gt 0 ] && sleep "$wait_for"
  $PY "$SCRATCH/gemm.py" $(( WATCH_SECONDS / 2 - 30 )) &
  GEMM_PID=$!
  local gemm=$GEMM_PID
  say "--- the GEMM load started at $(( $(date +%s) - T_A )) s: pid $gemm"
  wait "$GEMM_PID"; GEMM_PID=""
  wait "$watch_pid"; local a_status=$?
  if [ -n "$b_job" ]; then
    wait "$b_job"
    cat "$SCRATCH/b.summary" >> "$SUMMARY"
    cat "$SCRATCH/b.summary"
  fi
  cp "$a/watch.csv" "$a/watch.png" "$a/report.json" "$OUT/" 2>/dev/null
  say "--- (a) the watch's lines (exit $a_status)"
  grep -E '^(spark-gotchas watch: |G[0-9]+ |    fix: )' "$SCRATCH/a.err" | tee -a "$SUMMARY"
  say "--- the loop's log, first and last rate lines"
  grep -m 3 'it/s' "$SCRATCH/train.log" | tee -a "$SUMMARY"; tail -n 3 "$SCRATCH/train.log" | tee -a "$SUMMARY"
  local g6 g4
  g6=$(grep -E '^G6 ' "$SCRATCH/a.err"); g4=$(grep -E -A1 '^G4 ' "$SCRATCH/a.err")
  check "(a) exit status 0" "[ $a_status = 0 ]"
  check "(a) live: the GEMM's pid joined the GPU" "grep -qE 'G6 [A-Z]+ [0-9:]+ pid $gemm .*joined the GPU' '$SCRATCH/a.err'"
  check "(a) live: the rate's fall blamed on it" "grep -qE 'rate .* since pid [0-9]+ .*joined the GPU' '$SCRATCH/a.err'"
  check "(a) live: it left the GPU" "grep -qE 'G6 ended .* left the GPU' '$SCRATCH/a.err'"
  check "(a) G6 WARN or FAIL naming the GEMM and the fall" "echo \"\$g6\" | grep -qE '^G6 (WARN|FAIL): pid $gemm .*the rate fell'"
  check "(a) G4 is no FAIL and never says improve cooling" "! echo \"\$g4\" | grep -qE '^G4 FAIL|improve cooling'"
  check "(a) watch.csv, watch.png, report.json" "[ -s '$OUT/watch.csv' ] && [ -s '$OUT/watch.png' ] && [ -s '$OUT/report.json' ]"
  check "(a) check-report --gotchas 3,4,6" "$PY -m spark_gotchas check-report -q --gotchas 3,4,6 '$OUT/report.json'"
  $PY - "$OUT/report.json" <<'PY' | tee -a "$SUMMARY"
import json, sys
w = json.load(open(sys.argv[1]))["spark_gotchas"]["watch"]
print(f"(a) the watch itself: {w['watch_cpu_s']:.2f} s CPU over {w['elapsed_s']:.0f} s = "
      f"{w['watch_cpu_s'] / max(w['elapsed_s'], 1) * 100:.2f} % of a core (start-up and the plot included); "
      f"sampler {w['sampler_busy_s'] / max(w['elapsed_s'], 1) * 100:.2f} % ({w['samples']} samples, "
      f"{w['sampler_errors']} errors); VmRSS max {(w['watch_rss_max_bytes'] or 0) / 2**20:.1f} MiB; "
      f"rate best {w['rate_reference']}, last {w['rate_last']}; device {w['device']}")
PY
}

part_b() {  # in the background, beside (a): its lines go to its own summary, appended after (a)
  local loop=$1 b_status alive=no
  $PY -m spark_gotchas watch --out "$SCRATCH/b" --rate-regex "$RATE" --pid "$loop" > /dev/null 2> "$SCRATCH/b.err" &
  local attach=$!
  sleep "$ATTACH_SECONDS"
  kill -TERM "$attach"  # a script's background job has SIGINT ignored (bash does that): Ctrl-C is tests/test_watch.py's
  wait "$attach"; b_status=$?
  kill -0 "$loop" 2>/dev/null && alive=yes
  cp "$SCRATCH/b/report.json" "$OUT/attach.json" 2>/dev/null
  echo "--- (b) the watch attached to pid $loop for ${ATTACH_SECONDS} s (exit $b_status; the loop still running afterwards: $alive)"
  grep -E '^(spark-gotchas watch: |G[0-9]+ |    fix: )' "$SCRATCH/b.err"
  check2() { if eval "$2"; then echo "CHECK PASS: $1"; else echo "CHECK FAIL: $1"; fi; }
  check2 "(b) exit 0 after SIGTERM" "[ $b_status = 0 ]"
  check2 "(b) the loop went on" "[ $alive = yes ]"
  check2 "(b) ended 'still running (the watching ended by SIGTERM)'" \
    "grep -q 'still running (the watching ended by SIGTERM)' '$SCRATCH/b.err'"
  check2 "(b) read the rate from the loop's log file" \
    "$PY -c \"import json,sys; sys.exit(0 if json.load(open('$OUT/attach.json'))['spark_gotchas']['watch']['rate_values'] > 0 else 1)\""
}

part_c() {
  say ""
  say "=== (c) cost: $COST_RUNS runs without and $COST_RUNS with the watch, ${COST_SECONDS} s each, interleaved"
  : > "$OUT/cost.txt"
  for i in $(seq 1 "$COST_RUNS"); do
    for mode in without with; do
      if [ "$mode" = with ]; then
        $PY -m spark_gotchas watch --out "$SCRATCH/c$i" --rate-regex "$RATE" -- $PY "$SCRATCH/train.py" "$COST_SECONDS" \
          > "$SCRATCH/c.log" 2> "$SCRATCH/c.err"
        extra=$($PY -c "import json; w=json.load(open('$SCRATCH/c$i/report.json'))['spark_gotchas']['watch']; print(f\"watch {w['watch_cpu_s'] / max(w['elapsed_s'], 1) * 100:.2f} % cpu, sampler {w['sampler_busy_s'] / max(w['elapsed_s'], 1) * 100:.2f} %, rss {(w['watch_rss_max_bytes'] or 0) / 2**20:.1f} MiB\")" 2>/dev/null)
      else
        $PY "$SCRATCH/train.py" "$COST_SECONDS" > "$SCRATCH/c.log" 2>&1
        extra=""
      fi
      rate=$(grep -oE 'mean rate [0-9.]+' "$SCRATCH/c.log" | awk '{print $3}')
      echo "$i $mode ${rate:-none} $extra" | tee -a "$OUT/cost.txt"
    done
  done
  $PY - "$OUT/cost.txt" <<'PY' | tee -a "$SUMMARY"
import statistics, sys
rows = [line.split() for line in open(sys.argv[1]) if line.strip()]
by = {m: [float(r[2]) for r in rows if r[1] == m and r[2] != "none"] for m in ("without", "with")}
for m, v in by.items():
    print(f"(c) {m:7s} the watch: {len(v)} runs, median {statistics.median(v):.2f} it/s, "
          f"range {min(v):.2f}-{max(v):.2f} ({(max(v) - min(v)) / statistics.median(v) * 100:.2f} % spread)" if v else f"(c) {m}: no rate")
if by["without"] and by["with"]:
    d = statistics.median(by["with"]) / statistics.median(by["without"]) - 1
    print(f"(c) with / without: {d * 100:+.2f} % (the medians)")
PY
}

part_host() {  # the watch's own CPU and memory at --every 1 beside a log of 0, 10, 100 lines a second (no GPU needed)
  say ""
  say "=== (host) the watch's own cost at --every 1, ${HOST_SECONDS:=70} s runs"
  cat > "$SCRATCH/log.py" <<'PY'
import sys, time
seconds, lines = float(sys.argv[1]), float(sys.argv[2])
start, step = time.time(), 0
while time.time() - start < seconds:
    time.sleep(1 / lines if lines else seconds)
    step += 1
    print(f"step {step}: loss 0.1234, {lines:.2f} it/s", flush=True)
PY
  for lines in 0 10 100; do
    if [ "$lines" = 0 ]; then set -- ; else set -- --rate-regex "$RATE"; fi
    $PY -m spark_gotchas watch --every 1 --out "$SCRATCH/h$lines" "$@" -- $PY "$SCRATCH/log.py" "$HOST_SECONDS" "$lines" \
      > /dev/null 2> "$SCRATCH/h.err" &
    local pid=$!
    sleep 5
    local t0; t0=$(awk '{print $14+$15}' "/proc/$pid/stat")
    sleep $(( HOST_SECONDS - 10 ))
    local t1 hwm; t1=$(awk '{print $14+$15}' "/proc/$pid/stat"); hwm=$(awk '/VmHWM/{print $2}' "/proc/$pid/status")
    wait "$pid"
    say "(host) $lines lines/s$([ "$lines" = 0 ] && echo ', no --rate-regex'): the watch's CPU $(( t1 - t0 )) ticks of $(getconf CLK_TCK)/s over $(( HOST_SECONDS - 10 )) s = $(awk -v t=$(( t1 - t0 )) -v c="$(getconf CLK_TCK)" -v s=$(( HOST_SECONDS - 10 )) 'BEGIN{printf "%.2f", t / c / s * 100}') % of a core; VmHWM $hwm kB; CSV $(wc -c < "$SCRATCH/h$lines/watch.csv") bytes, $(grep -c '^sample' "$SCRATCH/h$lines/watch.csv") samples"
  done
}

T_A=$(date +%s)
case " $PARTS " in *" host "*) part_host ;; esac
case " $PARTS " in *" a "*) part_a ;; esac
case " $PARTS " in *" c "*) part_c ;; esac
say ""
say "=== done in $(( $(date +%s) - T0 )) s"
ls -la "$OUT"
