"""G3 and G6 end to end through the plugin: a GB10 snapshot replayed, and this machine live -> snapshot -> replay."""

from __future__ import annotations

import json
from pathlib import Path

from gline_block import glines
from inner_runs import inner_runs, run_checks  # noqa: F401  inner_runs: a fixture

from spark_gotchas.base.serial import from_jsonable, to_jsonable
from spark_gotchas.knowledge.readings.gpu import GpuDevice, GpuInventory, GpuProcess, GpuProcesses
from spark_gotchas.knowledge.readings.mem import CudaDeviceMemory, CudaMemory
from spark_gotchas.machine.readers import load_all
from spark_gotchas.machine.readers.mem import from_result, parse_meminfo
from spark_gotchas.machine.snapshot import Snapshot, save

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures"
CHECKS = ("test_g03_unified_memory.py", "test_g06_contention.py")
load_all()  # every reader and reading type imported before the in-process runs, which drop what they import


def run(pytester, *args):
    return run_checks(pytester, CHECKS, *args)


def gb10_snapshot(path: Path) -> Path:
    """Real GB10 readings: meminfo after a 60 GB file write, NVML memory Not Supported, two vLLM engines."""
    mem = json.loads((FIXTURES / "g03_meminfo.json").read_text())["gb10_after_60g_write"]
    info = parse_meminfo(mem["text"])
    tables = json.loads((FIXTURES / "g06_process_tables.json").read_text())
    procs = GpuProcesses(processes=[from_jsonable(GpuProcess, p) for p in tables["gb10_two_vllm"]["processes"]],
                         scanned=412)
    na = {k: "Not Supported" for k in ("memory_total_bytes", "memory_used_bytes", "memory_free_bytes")}
    inventory = GpuInventory(driver_version="580.173.02", cuda_driver_version=13000,
                             devices=[GpuDevice(index=0, name="NVIDIA GB10", capability=(12, 1), unavailable=na)])
    cuda = CudaMemory(attempted=True, devices=[CudaDeviceMemory(0, "NVIDIA GB10", mem["cuda_free_bytes"], 130663821312, True)],
                      mem_free_bytes=info.mem_free_bytes, mem_available_bytes=info.mem_available_bytes,
                      cached_bytes=info.cached_bytes)
    probe = from_result({"attempted": True, "ok": True, "size_bytes": 8_000_000_000, "cold": True, "integrated": True,
                         "load_seconds": 21.5, "peak_extra_ratio": 2.3, "cache_ratio": 1.0, "rss_ratio": 0.02,
                         "cuda_ratio": 1.0})
    readings = {"mem.meminfo": info, "gpu.inventory": inventory, "mem.cuda": cuda, "gpu.processes": procs,
                "mem.load_probe": probe}
    snap = Snapshot(readings={k: to_jsonable(v) for k, v in readings.items()},
                    options={"spark_profile": "auto", "spark_model_gb": 50, "spark_load_factor": 2.0})
    return save(snap, path)


def test_a_gb10_snapshot_replays_to_the_lines_a_spark_user_needs(pytester):
    snap = gb10_snapshot(pytester.path / "gb10.json")
    result = run(pytester, "-m", "fast", "-v", "--spark-replay", str(snap))  # -v: each check's line with its detail
    result.assert_outcomes(passed=3, failed=1)
    lines = glines(result)
    # the snapshot holds the load probe (a run with -m soak) and it WARNs: -m fast leaves the probe out, so G3's
    # line says the recorded probe WARNs, and counts the page cache's WARN this run judged; both fixes are listed
    assert lines[0] == "G3 WARN: the recorded load double count WARNs: replay with -m soak (+1 more WARN)"
    assert lines[1] == ("    fix: judge plans on this machine with --spark-load-factor 2.3, and drop the page cache between "
                        "runs as root (sync; echo 3 > /proc/sys/vm/drop_caches), never in the middle of training")
    assert lines[2] == ("    fix: drop the page cache between runs, as root: sync; echo 3 > /proc/sys/vm/drop_caches "
                        "(never in the middle of training; the suite never does this itself)")
    assert lines[3] == "G6 FAIL: 2 workloads in the way: pid 6008 vLLM, pid 44757 vLLM"
    assert lines[4] == ("    fix: run one heavy job at a time: see how each vLLM engine was started (its launcher's "
                        "flags: ps -o args= -p $(ps -o ppid= -p PID)) and restart it with --gpu-memory-utilization 0.5 "
                        "or lower; or stop what you do not need (kill 6008 44757)")
    assert ("    warn: the recorded load double count WARNs: replay with -m soak (an 8.0 GB cold safetensors load peaked "
            "at 2.30x the file, above the x2 G3 assumes (page cache 1.00x, process RSS 0.02x, CUDA 1.00x; 21.5 s))"
            ) in result.stdout.lines
    out = result.stdout.str()
    assert "NVIDIA GB10 (cc 12.1), driver 580.173.02 / CUDA 13.0" in out
    assert ("    warn: the 100.0 GB load peak exceeds what CUDA sees free (44.6 GB): page cache holds 78.0 GB (the planned "
            "load peak fits MemAvailable (124.2 GB) but not MemFree (44.6 GB): page cache 78.0 GB (60% of 130.7 GB) "
            "stands between)") in out.splitlines()
    assert ("(pid 6008 vLLM (cannot tell how far pid 6008 may grow: an engine process whose launcher (the command "
            "line with the flags that bound it) is not visible here; holds 59.2 GB); pid 44757 vLLM (") in out
    # the soak check replays too: the probe's ratio against the factor
    soak = run(pytester, "-m", "soak", "-v", "--spark-replay", str(snap))
    assert glines(soak)[0] == "G3 WARN: an 8.0 GB cold safetensors load peaked at 2.30x the file, above the x2 G3 assumes"
    assert ("    warn: an 8.0 GB cold safetensors load peaked at 2.30x the file, above the x2 G3 assumes (page cache 1.00x, "
            "process RSS 0.02x, CUDA 1.00x; 21.5 s)") in soak.stdout.lines


def test_this_machine_live_then_replayed_gives_the_same_lines(pytester):
    snap = pytester.path / "here.json"
    live = run(pytester, "-m", "fast", "--spark-snapshot", str(snap))
    live_lines = glines(live)
    assert any(line.startswith("G3 ") for line in live_lines) and any(line.startswith("G6 ") for line in live_lines)
    assert "Traceback" not in live.stdout.str()
    recorded = json.loads(snap.read_text())["readings"]
    assert {"mem.meminfo", "gpu.processes"} <= set(recorded)
    replay = run(pytester, "-m", "fast", "--spark-replay", str(snap))
    assert glines(replay) == live_lines
