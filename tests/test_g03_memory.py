"""G3 on real meminfo readings (GB10, H200): the lines a user sees for page cache, headroom, the NVML/CUDA view, the probe."""

import json
import os
import sys
from pathlib import Path

import pytest

from spark_gotchas.base.serial import from_jsonable, to_jsonable
from spark_gotchas.knowledge.judges import g03_unified_memory as g03
from spark_gotchas.knowledge.plan import Plan
from spark_gotchas.knowledge.profiles import GB10, GENERIC, H200, NONE
from spark_gotchas.knowledge.readings.gpu import GpuDevice, GpuInventory
from spark_gotchas.knowledge.readings.mem import CudaDeviceMemory, CudaMemory, LoadProbe, MemInfo
from spark_gotchas.knowledge.verdict import Status
from spark_gotchas.machine.options import RunOptions
from spark_gotchas.machine.readers.mem import from_result, parse_meminfo, read_meminfo_file, thin

CASES = json.loads((Path(__file__).parent / "fixtures" / "g03_meminfo.json").read_text())


def meminfo(case: str) -> MemInfo:
    return parse_meminfo(CASES[case]["text"], source=f"fixture {case}")


def gb10_inventory() -> GpuInventory:
    """NVML on a GB10 (driver 580.173.02): the device is there, its memory call is Not Supported."""
    na = {k: "Not Supported" for k in ("memory_total_bytes", "memory_used_bytes", "memory_free_bytes")}
    return GpuInventory(driver_version="580.173.02", cuda_driver_version=13000,
                        devices=[GpuDevice(index=0, name="NVIDIA GB10", capability=(12, 1), unavailable=na)])


def h200_inventory() -> GpuInventory:
    nvml = CASES["h200"]["nvml"]
    return GpuInventory(driver_version="580.159.04", cuda_driver_version=13000, devices=[GpuDevice(
        index=0, name="NVIDIA H200", capability=(9, 0), memory_total_bytes=nvml["total"],
        memory_used_bytes=nvml["used"], memory_free_bytes=nvml["free"])])


def cuda_for(case: str, total: int = 130663821312, integrated: bool = True) -> CudaMemory:
    info = meminfo(case)
    return CudaMemory(attempted=True, devices=[CudaDeviceMemory(0, "NVIDIA GB10", CASES[case]["cuda_free_bytes"], total,
                                                                integrated)],
                      mem_free_bytes=info.mem_free_bytes, mem_available_bytes=info.mem_available_bytes,
                      cached_bytes=info.cached_bytes)


def opts(**kw) -> Plan:
    """The planned run, written with the option names a user types."""
    return RunOptions(**kw).plan


# -- parsing -------------------------------------------------------------------------------------
def test_real_gb10_meminfo_parses_to_bytes():
    info = meminfo("gb10_cached_37g")
    assert info.ok and info.missing == []
    assert info.mem_total_bytes == 127600816 * 1024
    assert info.page_cache_bytes == (13252 + 37694160 - 3028) * 1024


def test_an_excerpt_says_what_it_lacks_and_the_page_cache_check_skips():
    info = meminfo("gb10_nvitop_excerpt")
    assert info.ok and info.mem_available_bytes == 118566368 * 1024
    assert info.missing == ["MemFree", "Cached", "Buffers"]
    verdict = g03.judge_page_cache(info, GB10, opts())
    assert verdict.status is Status.SKIP and verdict.line.startswith("G3 SKIP: fixture gb10_nvitop_excerpt has no MemFree or Cached")


@pytest.mark.parametrize("text", ["", "garbage\n\x00\x01", "MemTotal: lots kB\nMemFree: 12 kB"])
def test_malformed_meminfo_is_a_skip_line_not_a_traceback(text):
    info = parse_meminfo(text)
    assert not info.ok and "no MemTotal" in info.error
    for verdict in (g03.judge_page_cache(info, GB10, opts()), g03.judge_headroom(info, GB10, opts(spark_model_gb=10))):
        assert verdict.status is Status.SKIP and verdict.line.startswith("G3 SKIP: could not read system memory: no MemTotal")


def test_an_old_kernel_without_memavailable_gets_an_estimate():
    info = parse_meminfo("MemTotal: 1000 kB\nMemFree: 100 kB\nBuffers: 10 kB\nCached: 200 kB\n")
    assert info.available_estimated and info.mem_available_bytes == 310 * 1024


def test_an_unreadable_file_is_said(tmp_path):
    info = read_meminfo_file(str(tmp_path / "nope"))
    assert not info.ok and info.error.startswith("cannot read")
    assert g03.judge_page_cache(info, GB10, opts()).line.startswith("G3 SKIP: could not read system memory: cannot read")


def test_this_machines_meminfo_reads():
    if not os.path.exists("/proc/meminfo"):
        pytest.skip("no /proc/meminfo here")
    info = read_meminfo_file()
    assert info.ok and info.mem_total_bytes > 0 and info.mem_available_bytes is not None


# -- page cache ----------------------------------------------------------------------------------
def test_gb10_60gb_page_cache_warns_with_the_drop_caches_fix():
    verdict = g03.judge_page_cache(meminfo("gb10_after_60g_write"), GB10, opts())
    assert verdict.status is Status.WARN
    assert verdict.line == "G3 WARN: page cache 78.0 GB (60% of 130.7 GB): CUDA sees only 44.6 GB free (MemFree)"
    assert verdict.detail == "MemAvailable is 124.2 GB"
    assert verdict.fix == ("drop the page cache between runs, as root: sync; echo 3 > /proc/sys/vm/drop_caches (never in "
                           "the middle of training; the suite never does this itself)")
    assert verdict.readings["page_cache_fraction"] == 0.597


def test_gb10_baseline_page_cache_passes():
    verdict = g03.judge_page_cache(meminfo("gb10_before_60g_write"), GB10, opts())
    assert verdict.line == "G3 PASS: page cache 13.6 GB (10% of 130.7 GB); CUDA sees 110.9 GB free (MemFree)"
    assert verdict.detail == "MemAvailable 124.4 GB"


def test_a_plan_that_fits_only_after_reclaiming_the_cache_warns():
    # 50 GB of weights peak at 100 GB: MemAvailable (124.2) holds it, MemFree (44.6, CUDA's view) does not.
    verdict = g03.judge_page_cache(meminfo("gb10_after_60g_write"), GB10, opts(spark_model_gb=50))
    assert verdict.status is Status.WARN
    assert verdict.summary == "the 100.0 GB load peak exceeds what CUDA sees free (44.6 GB): page cache holds 78.0 GB"
    assert verdict.detail == ("the planned load peak fits MemAvailable (124.2 GB) but not MemFree (44.6 GB): page cache "
                              "78.0 GB (60% of 130.7 GB) stands between")
    assert verdict.fix == g03.DROP_CACHES_FIX
    assert g03.judge_page_cache(meminfo("gb10_before_60g_write"), GB10, opts(spark_model_gb=50)).status is Status.PASS


def test_the_37gb_cache_of_a_real_spark_warns_and_names_it():
    verdict = g03.judge_page_cache(meminfo("gb10_cached_37g"), GB10, opts())
    assert verdict.line.startswith("G3 WARN: page cache 38.6 GB (30% of 130.7 GB): CUDA sees only 3.2 GB free")


def test_on_a_discrete_gpu_the_page_cache_is_host_memory():
    verdict = g03.judge_page_cache(meminfo("h200"), H200, opts())
    assert verdict.line == "G3 PASS: page cache 2.0 GB is host memory only: the NVIDIA H200 has its own"
    assert verdict.detail == "page cache 2.0 GB (1% of 135.1 GB); MemAvailable 134.0 GB"
    # a GPU without a profile (an A100, an RTX PRO 6000) is "the GPU", not "the a GPU without a profile …"
    generic = g03.judge_page_cache(meminfo("h200"), GENERIC, opts())
    assert generic.line == "G3 PASS: page cache 2.0 GB is host memory only: the GPU has its own"
    # the same reading judged as a Spark would be (--spark-profile gb10)
    assert g03.judge_page_cache(meminfo("h200"), GB10, opts()).status is Status.PASS


def test_without_a_gpu_the_page_cache_is_info():
    verdict = g03.judge_page_cache(meminfo("gb10_after_60g_write"), NONE, opts())
    assert verdict.line == "G3 INFO: no GPU here: page cache 78.0 GB of 130.7 GB"
    assert verdict.detail == ("page cache 78.0 GB (60% of 130.7 GB), MemFree 44.6 GB, MemAvailable 124.2 GB; on a Spark "
                              "CUDA would see only MemFree (--spark-profile gb10 judges it so)")


# -- headroom ------------------------------------------------------------------------------------
def test_without_a_plan_headroom_is_info_with_the_largest_load():
    verdict = g03.judge_headroom(meminfo("gb10_before_60g_write"), GB10, opts())
    assert verdict.line == "G3 INFO: MemAvailable 124.4 GB: up to 62.2 GB of weights fit a load (x2)"
    assert verdict.detail == ("MemAvailable 124.4 GB of 130.7 GB (MemFree 110.9 GB, page cache 13.6 GB) in the unified "
                              "pool; --spark-model-gb N judges a plan")


def test_a_plan_short_of_memavailable_fails_naming_the_shortfall():
    verdict = g03.judge_headroom(meminfo("gb10_cached_37g"), GB10, opts(spark_model_gb=30))
    assert verdict.line == "G3 FAIL: 30 GB of weights peak at ~60.0 GB (x2), but MemAvailable is 41.1 GB: 18.9 GB short"
    assert verdict.detail == "the peak is while loading safetensors, in the unified pool"
    assert verdict.fix == ("free memory before loading: stop other GPU processes (G6 names them), drop the page cache "
                           "between runs as root (sync; echo 3 > /proc/sys/vm/drop_caches), or plan a smaller or "
                           "quantized model. " + g03.QLORA_NOTE)
    assert g03.QLORA_NOTE.startswith("QLoRA peaks earlier")


def test_a_plan_that_fits_passes_stating_the_headroom_and_the_factor_is_configurable():
    info = meminfo("gb10_nvitop_excerpt")  # MemAvailable 121.4 GB
    fits = g03.judge_headroom(info, GB10, opts(spark_model_gb=40))
    assert fits.line == "G3 PASS: 40 GB of weights peak at ~80.0 GB (x2); MemAvailable 121.4 GB leaves 41.4 GB to spare"
    assert fits.detail == "the peak is while loading safetensors, in the unified pool"
    tighter = g03.judge_headroom(info, GB10, opts(spark_model_gb=40, spark_load_factor=3.2))
    assert tighter.status is Status.FAIL and "peak at ~128.0 GB (x3.2)" in tighter.summary
    assert tighter.detail == "the peak is while loading safetensors, in the unified pool"


def test_discrete_headroom_judges_device_and_host_apart():
    info, inv = meminfo("h200"), h200_inventory()
    cuda = cuda_for("h200", CASES["h200"]["cuda_total_bytes"], integrated=False)
    ok = g03.judge_headroom(info, H200, opts(spark_model_gb=70), cuda, inv)
    assert ok.line == "G3 PASS: GPU 0 (CUDA) has 149.5 GB free for 70 GB of weights (79.5 GB to spare)"
    assert ok.detail == "host MemAvailable 134.0 GB covers the load's host side (~70.0 GB)"
    too_big = g03.judge_headroom(info, H200, opts(spark_model_gb=160), None, inv)  # NVML's view when CUDA was not read
    assert too_big.status is Status.FAIL
    assert too_big.line == ("G3 FAIL: 160 GB of weights do not fit: GPU 0 (NVML) is 10.5 GB short, host memory 26.0 GB "
                            "short")
    assert too_big.detail.startswith("160 GB of weights do not fit: GPU 0 (NVML) has 149.5 GB free of 150.8 GB (10.5 GB "
                                     "short)")
    assert "the load's host side (~160.0 GB at x2) exceeds MemAvailable 134.0 GB (26.0 GB short)" in too_big.detail
    # one side short: its finding whole in the line
    device_only = g03.judge_headroom(info, H200, opts(spark_model_gb=160, spark_load_factor=1.5), None, inv)
    assert device_only.line == ("G3 FAIL: 160 GB of weights do not fit: GPU 0 (NVML) has 149.5 GB free of 150.8 GB "
                                "(10.5 GB short)")
    host_only = g03.judge_headroom(info, H200, opts(spark_model_gb=140, spark_load_factor=2), None, inv)
    assert host_only.status is Status.FAIL and host_only.line == (
        "G3 FAIL: the load's host side (~140.0 GB at x2) exceeds MemAvailable 134.0 GB (6.0 GB short)")
    info_verdict = g03.judge_headroom(info, H200, opts(), cuda, inv)
    assert info_verdict.line == ("G3 INFO: up to 134.0 GB of weights fit a load: GPU 0 (CUDA) has 149.5 GB free of "
                                 "150.1 GB")
    assert info_verdict.detail == "host MemAvailable 134.0 GB; --spark-model-gb N judges a plan"


# -- what NVML and CUDA say ----------------------------------------------------------------------
def test_gb10_nvml_not_supported_is_explained_with_cuda_beside_meminfo():
    verdict = g03.judge_gpu_memory_view(meminfo("gb10_after_60g_write"), GB10, gb10_inventory(),
                                        cuda_for("gb10_after_60g_write"))
    assert verdict.status is Status.INFO
    assert verdict.summary == "NVML device memory is Not Supported: the GPU shares the 130.7 GB system pool"
    assert verdict.detail.startswith("nvidia-smi shows 'Not Supported'/[N/A] here because the GPU has no memory of its "
                                     "own (read /proc/meminfo or free)")
    assert verdict.detail.endswith("CUDA free 44.6 GB of 130.7 GB, MemFree 44.6 GB, MemAvailable 124.2 GB: CUDA counts "
                                   "79.6 GB that the kernel could reclaim as used")


def test_h200_nvml_memory_reads_and_passes():
    cuda = cuda_for("h200", CASES["h200"]["cuda_total_bytes"], integrated=False)
    verdict = g03.judge_gpu_memory_view(meminfo("h200"), H200, h200_inventory(), cuda)
    assert verdict.line == "G3 PASS: NVML reads device memory: GPU 0 149.5 GB free of 150.8 GB"
    assert verdict.detail.endswith("; CUDA free 149.5 GB of 150.1 GB, MemFree 132.2 GB, MemAvailable 134.0 GB")


def test_nvml_not_supported_on_a_discrete_gpu_warns():
    inv = gb10_inventory()
    inv.devices[0].name = "NVIDIA H200"
    verdict = g03.judge_gpu_memory_view(meminfo("h200"), H200, inv, None)
    assert verdict.status is Status.WARN and "NVML cannot read this discrete GPU's memory (Not Supported)" in verdict.summary


def test_no_nvml_and_cpu_torch_skips_with_both_reasons():
    verdict = g03.judge_gpu_memory_view(meminfo("h200"), NONE, GpuInventory(nvml_error="NVML library not found"),
                                        CudaMemory(attempted=False, reason="torch is a CPU build"))
    assert verdict.line == "G3 SKIP: no GPU memory to read: neither NVML nor CUDA sees a GPU"
    assert verdict.detail == "NVML: NVML library not found; CUDA: torch is a CPU build"


# -- the load probe ----------------------------------------------------------------------------------
def probe_result(ratio: float, **kw) -> LoadProbe:
    value = {"attempted": True, "ok": True, "size_bytes": 8_000_000_000, "size_reason": "8.0 GB default", "cold": True,
             "integrated": False, "load_seconds": 3.2, "peak_extra_ratio": ratio, "cache_ratio": 1.0, "rss_ratio": 0.01,
             "cuda_ratio": 1.0, "samples": [{"t_s": i / 10, "mem_free_bytes": 1000 - i} for i in range(500)], **kw}
    return from_result(value, "reports/g3-load-probe.csv")


def test_probe_within_the_factor_passes_and_above_it_warns():
    ok = g03.judge_load_probe(probe_result(2.01 - 0.02, integrated=True), opts())
    assert ok.line == "G3 PASS: an 8.0 GB cold safetensors load peaked at 1.99x the file, within the x2 G3 assumes"
    assert ok.detail == "page cache 1.00x, process RSS 0.01x, CUDA 1.00x; 3.2 s"
    high = g03.judge_load_probe(probe_result(2.61, integrated=True), opts())
    assert high.line == "G3 WARN: an 8.0 GB cold safetensors load peaked at 2.61x the file, above the x2 G3 assumes"
    assert high.fix == ("judge plans on this machine with --spark-load-factor 2.7, and drop the page cache between runs "
                        "as root (sync; echo 3 > /proc/sys/vm/drop_caches), never in the middle of training")
    barely = g03.judge_load_probe(probe_result(2.03, integrated=True), opts())
    assert barely.status is Status.WARN and "--spark-load-factor 2.1" in barely.fix


def test_probe_on_a_discrete_gpu_reports_both_pools_without_judging_them_as_one():
    verdict = g03.judge_load_probe(probe_result(2.03), opts())
    assert verdict.status is Status.INFO
    assert verdict.line == "G3 INFO: an 8.0 GB cold safetensors load peaked at 2.03x the file, host memory 1.03x"
    assert verdict.detail == ("page cache 1.00x, process RSS 0.01x, CUDA 1.00x; 3.2 s; the GPU's own memory held the "
                              "rest; on a unified-memory GPU (a Spark) both come out of one pool")


def test_probe_failure_and_absence():
    crashed = from_result({"attempted": True, "ok": False, "reason": "child process killed by SIGKILL"})
    assert g03.judge_load_probe(crashed, opts()).line == "G3 FAIL: a safetensors load to the GPU failed: child process killed by SIGKILL"
    absent = LoadProbe(attempted=False, reason="torch is a CPU build")
    assert g03.judge_load_probe(absent, opts()).line == "G3 SKIP: safetensors load probe not run: torch is a CPU build"


def test_probe_reading_keeps_few_samples_and_round_trips():
    probe = probe_result(1.9)
    assert len(probe.samples) == 120 and probe.samples[0].t_s == 0 and probe.samples[-1].t_s == 49.9
    assert from_jsonable(LoadProbe, json.loads(json.dumps(to_jsonable(probe)))) == probe
    assert thin([1, 2, 3]) == [1, 2, 3]


def test_choose_size_never_exceeds_a_quarter_of_memavailable():
    from spark_gotchas.microbench.safetensors_load import choose_size

    assert choose_size(None, 120_000_000_000, None, 10**12, True) == (8_000_000_000 - 8_000_000_000 % 2**20, "8.0 GB default")
    size, why = choose_size(50_000_000_000, 100_000_000_000, None, 10**12, True)
    assert size <= 25_000_000_000 and why == "capped at 25% of MemAvailable"
    size, why = choose_size(None, 10**12, 10_000_000_000, 10**12, False)
    assert size <= 5_000_000_000 and why == "capped at half the GPU's free memory"


def test_probe_file_is_valid_safetensors(tmp_path):
    pytest.importorskip("numpy")
    from safetensors.numpy import load_file

    from spark_gotchas.microbench.safetensors_load import write_safetensors

    path = tmp_path / "w.safetensors"
    write_safetensors(str(path), 3 * 2**20 + 5)
    tensors = load_file(str(path))
    assert sum(t.nbytes for t in tensors.values()) == 3 * 2**20 + 5


def test_probe_runs_in_the_worker_on_cpu_and_deletes_its_file(tmp_path):
    """The real probe, small, loading to the CPU (no GPU here): it measures, reports and cleans up."""
    pytest.importorskip("torch")
    from spark_gotchas.microbench.safetensors_load import report_lines
    from spark_gotchas.runtime.worker import Worker

    worker = Worker(preload=())
    try:
        result = worker.call("spark_gotchas.runtime.memtasks:load_probe",
                             {"size_bytes": 96 * 2**20, "directory": str(tmp_path), "device": "cpu"}, timeout=120)
    finally:
        worker.close()
    assert result.ok, result.problem
    value = result.value
    assert value["ok"], value.get("reason")
    assert value["size_bytes"] == 96 * 2**20 and value["sample_count"] >= 2 and value["peak_extra_ratio"] >= 0
    assert list(tmp_path.iterdir()) == []
    probe = from_result(value)
    assert g03.judge_load_probe(probe, opts()).status in (Status.PASS, Status.WARN)
    assert report_lines(value)[-1].startswith("peak_extra_ratio=")


def test_probe_refuses_tmpfs(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm")
    from spark_gotchas.machine.readers.mem import fstype_of

    if fstype_of("/dev/shm") != "tmpfs":
        pytest.skip("/dev/shm is not tmpfs here")
    from spark_gotchas.runtime.worker import Worker

    worker = Worker(preload=())
    try:
        result = worker.call("spark_gotchas.runtime.memtasks:load_probe", {"directory": "/dev/shm", "device": "cpu"}, timeout=60)
    finally:
        worker.close()
    assert result.ok and not result.value["ok"] and "tmpfs" in result.value["reason"]


def test_readings_round_trip():
    for value, tp in ((meminfo("gb10_cached_37g"), MemInfo), (cuda_for("gb10_after_60g_write"), CudaMemory)):
        assert from_jsonable(tp, json.loads(json.dumps(to_jsonable(value)))) == value


def test_fstype_of_takes_the_longest_mount_point_holding_the_path(tmp_path):
    from spark_gotchas.machine.readers.mem import fstype_of

    mounts = tmp_path / "mounts"
    mounts.write_text("/dev/sda1 / ext4 rw 0 0\ntmpfs /dev/shm tmpfs rw 0 0\n"
                      "/dev/sdb1 /data\\040disk xfs rw 0 0\nbroken-line\n")
    assert fstype_of("/dev/shm/weights.safetensors", str(mounts)) == "tmpfs"
    assert fstype_of("/dev/shmx/file", str(mounts)) == "ext4"  # a name that only starts like a mount point
    assert fstype_of("/data disk/model", str(mounts)) == "xfs"
    assert fstype_of("/", str(mounts)) == "ext4"
    assert fstype_of("/", str(tmp_path / "no-mounts")) is None


@pytest.mark.skipif(sys.platform != "linux" or not os.path.exists("/proc/mounts"), reason="needs /proc/mounts")
def test_fstype_of_names_the_root_filesystem():
    from spark_gotchas.machine.readers.mem import fstype_of

    with open("/proc/mounts", encoding="utf-8") as fh:
        roots = [line.split()[2] for line in fh if line.split()[1:2] == ["/"]]
    assert fstype_of("/") == roots[-1]  # the last mount on / is the one in force


def test_headroom_without_any_free_figure_skips():
    verdict = g03.judge_headroom(parse_meminfo("MemTotal: 1000 kB\n", source="/proc/meminfo"), GB10, opts(spark_model_gb=1))
    assert verdict.line == "G3 SKIP: /proc/meminfo has no MemAvailable or MemFree line: headroom unknown"
