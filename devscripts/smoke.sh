set -x
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-build-isolation --no-deps -e . 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,power.limit,temperature.gpu,clocks_event_reasons.active,clocks_event_reasons_counters.sw_power_cap,clocks_event_reasons_counters.hw_slowdown,clocks_event_reasons_counters.sw_thermal_slowdown,clocks_event_reasons_counters.hw_thermal_slowdown,clocks_event_reasons_counters.hw_power_brake_slowdown --format=csv
python3 -c "import triton, torch; print('triton', triton.__version__, 'torch', torch.__version__)"
python3 -c "import flash_attn" 2>&1 | tail -1; python3 -c "import unsloth" 2>&1 | tail -1
python3 - <<'PY'
import pynvml as n
n.nvmlInit(); h=n.nvmlDeviceGetHandleByIndex(0)
for p in range(8):
    try:
        v=n.nvmlDeviceGetViolationStatus(h,p); print('violation',p,v.referenceTime,v.violationTime)
    except Exception as e: print('violation',p,'ERR',e)
print('events', hex(n.nvmlDeviceGetCurrentClocksEventReasons(h)))
print('supported', hex(n.nvmlDeviceGetSupportedClocksEventReasons(h)))
PY
TL=$(python3 -c "import torch,os;print(os.path.join(os.path.dirname(torch.__file__),'lib','libtorch_cuda.so'))")
cuobjdump --list-elf $TL 2>&1 | awk '{print $NF}' | sed 's/.*\.\(sm_[0-9a-z]*\)\..*/\1/' | sort | uniq -c | head -20
cuobjdump --list-ptx $TL 2>&1 | head -3
mkdir -p $OUT
cp $TL.fatbin-none 2>/dev/null
time python3 -m pytest -m fast -p no:cacheprovider --spark-snapshot $OUT/h200-smoke.json --json-report --json-report-file=$OUT/h200-smoke-report.json --durations=8
time python3 -m pytest -m fast -p no:cacheprovider -q
python3 -m pytest -m fast -p no:cacheprovider -q --spark-replay $OUT/h200-smoke.json
