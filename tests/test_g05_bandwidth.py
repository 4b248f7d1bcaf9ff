"""G5 as a user meets it: the G-line, status and fix for recorded H200 and public GB10
bandwidth readings, the decode ceiling, the sweep, bad input, and a snapshot -> replay run."""

import json
from dataclasses import replace
from pathlib import Path

import bench_fakes as fk
import no_nvml
import pytest
from gline_block import glines as block
from sysfs_fakes import GB10_PCI, H200_PCI, make_root

from spark_gotchas.knowledge import profiles
from spark_gotchas.knowledge.judges import g05_bandwidth as g05
from spark_gotchas.knowledge.plan import Plan
from spark_gotchas.knowledge.profiles import Machine
from spark_gotchas.knowledge.readings.bench import BandwidthReading, BandwidthSweepReading
from spark_gotchas.knowledge.readings.gpu import GpuProcess, GpuProcesses, MeasureWindow
from spark_gotchas.knowledge.verdict import Status
from spark_gotchas.machine.options import RunOptions
from spark_gotchas.microbench.bandwidth import BandwidthSweep
from spark_gotchas.runtime.worker import TaskResult

ROOT = Path(__file__).resolve().parents[1]


def reading(result, window=None, again=None, again_window=None):
    return BandwidthReading(attempted=True, result=result, window=window, again=again, again_window=again_window)


NOBODY = MeasureWindow(what="G5 bandwidth probe", t_start_epoch=1.0, t_end_epoch=2.0, samples=9)


def test_gb10_inside_its_range_passes_with_the_budget_line():
    v = g05.judge_bandwidth(reading(fk.gb10_bandwidth()), fk.gb10_inventory(), profiles.GB10)
    assert v.line == "G5 PASS: read 232, copy 200 GB/s: within GB10's measured range"
    assert v.detail == ("copy 200, read 232, write 210, triad 200 GB/s (1 GiB arrays); budget 200 GB/s copy and 232 GB/s "
                        "read - not the datasheet's 273")
    assert v.readings["ranges_gbps"]["read"] == [231.0, 253.0] and v.readings["theoretical_gbps"] is None


def test_gb10_in_a_stuck_low_power_state_measured_twice_fails_pointing_at_g4_and_the_power_cycle():
    slow = fk.GB10["stuck_low_power"]["slowdown"]  # the public fast/slow decode ratio
    stuck = fk.gb10_bandwidth(scale=slow)
    v = g05.judge_bandwidth(reading(stuck, NOBODY, stuck, NOBODY), fk.gb10_inventory(), profiles.GB10)
    assert v.status is Status.FAIL
    assert v.summary == "read 156 GB/s, far below GB10's 231-253; nothing else on the GPU, twice"
    assert v.detail == ("copy 134, read 156, write 141, triad 134 GB/s (1 GiB arrays): copy, read, triad far below "
                        "GB10's measured range (copy 180-210, read 231-253, triad 180-210 GB/s); measured twice: the "
                        "first read copy 134, read 156, write 141, triad 134 GB/s")
    assert "G4" in v.fix and "AC power" in v.fix and "contact NVIDIA support" in v.fix
    once = g05.judge_bandwidth(reading(stuck), fk.gb10_inventory(), profiles.GB10)
    assert once.status is Status.WARN
    assert once.summary == "read 156 GB/s, far below GB10's 231-253; other GPU work unknown, measured once"
    assert once.fix == g05.FIX_REMEASURE


VLLM_ENGINE = GpuProcess(pid=6008, name="VLLM::EngineCore", cmdline=["VLLM::EngineCore"], gpu_memory_bytes=56501 << 20,
                         gpu_devices=[0], nvml_lists=["compute"])


def test_far_below_with_nothing_else_on_the_gpu_twice_fails_pointing_at_the_hardware():
    slow = fk.GB10["stuck_low_power"]["slowdown"]
    stuck = fk.gb10_bandwidth(scale=slow)
    v = g05.judge_bandwidth(reading(stuck, NOBODY, stuck, NOBODY), fk.gb10_inventory(), profiles.GB10,
                            GpuProcesses(scanned=300))
    assert v.status is Status.FAIL
    assert v.detail.endswith("far below GB10's measured range (copy 180-210, read 231-253, triad 180-210 GB/s); "
                             "measured twice: the first read copy 134, read 156, write 141, triad 134 GB/s")
    assert v.fix.startswith("check the SM clock under load (G4, nvidia-smi -q -d PERFORMANCE,CLOCK), since nothing else "
                            "ran on the GPU during either measurement;")
    assert v.readings["busy_pids"] == [] and v.readings["sharing_sampled"] is True
    # the run's process list, read at another moment, never stands for "nothing else ran meanwhile"
    listed_only = g05.judge_bandwidth(reading(stuck), fk.gb10_inventory(), profiles.GB10, GpuProcesses(scanned=300))
    assert listed_only.status is Status.WARN and listed_only.summary.endswith("; other GPU work unknown, measured once")


def test_far_below_with_a_server_busy_on_the_gpu_warns_naming_it():
    slow = fk.GB10["stuck_low_power"]["slowdown"]
    xorg = GpuProcess(pid=3154, cmdline=["/usr/lib/xorg/Xorg"], gpu_memory_bytes=18 << 20, nvml_lists=["graphics"])
    v = g05.judge_bandwidth(reading(fk.gb10_bandwidth(scale=slow)), fk.gb10_inventory(), profiles.GB10,
                            GpuProcesses(processes=[xorg, VLLM_ENGINE]))
    assert v.status is Status.WARN  # the figure is the server's as much as the GPU's: not a verdict on the hardware
    assert v.summary == "read 156 GB/s, far below GB10's 231-253: pid 6008 VLLM::EngineCore busy (see G6)"
    assert v.fix == "stop or pause pid 6008 VLLM::EngineCore (G6 says how), then re-run spark-gotchas -m fast -k g05"
    assert v.readings["busy_pids"] == [6008]  # Xorg draws the desktop: it is no compute load


def test_without_nvml_the_servers_found_by_command_line_are_the_suspects():
    server = GpuProcess(pid=77, cmdline=["ollama", "serve"], found_by="scan")
    v = g05.judge_bandwidth(reading(fk.gb10_bandwidth(scale=0.85)), fk.gb10_inventory(), profiles.GB10,
                            GpuProcesses(nvml_error="Not Supported", processes=[server]))
    assert v.status is Status.WARN and v.summary == "read 198 GB/s, below GB10's 231-253: pid 77 ollama busy (see G6)"


def test_another_platform_measured_is_information_only():
    here = Machine(is_profile=False, device="NVIDIA H200")
    v = g05.judge_bandwidth(reading(fk.h200_bandwidth()), fk.h200_inventory(), profiles.GB10, GpuProcesses(), here)
    assert v.line == "G5 INFO: not a GB10 (NVIDIA H200): bandwidth not judged"
    assert v.detail == "this machine is not a GB10 (NVIDIA H200): its bandwidth cannot stand for a Spark's"
    assert v.readings["gbps"]["copy"] > 1000 and v.readings["ranges_gbps"]["read"] == [231.0, 253.0]
    not_measured = BandwidthReading(attempted=False, reason="torch 2.13.0+cpu is a CPU build")
    assert g05.judge_bandwidth(not_measured, None, profiles.GB10, None, Machine(False, "no GPU")).status is Status.INFO


def test_the_decode_ceiling_elsewhere_comes_from_the_profiles_read_range():
    not_measured = BandwidthReading(attempted=False, reason="torch 2.13.0+cpu is a CPU build")
    v = g05.judge_decode_ceiling(not_measured, profiles.GB10, Plan(model_gb=30), Machine(False, "no GPU"))
    assert v.line == "G5 INFO: on a GB10, batch-1 decode of 30 GB of weights tops out at 7.7-8.4 tokens/s (read 231-253 GB/s)"
    assert v.readings["tokens_per_s"] == [7.7, 8.43]
    assert g05.judge_decode_ceiling(not_measured, profiles.GB10, Plan(), Machine(False, "no GPU")).status is Status.SKIP
    generic = g05.judge_decode_ceiling(not_measured, profiles.GENERIC, Plan(model_gb=30), Machine(False, "no GPU"))
    assert generic.line == ("G5 INFO: not a machine with an NVIDIA GPU (no GPU): bandwidth not judged; no decode "
                            "ceiling to state")
    assert generic.status is Status.INFO and generic.detail.endswith("; no measured range to state a decode ceiling from")


def test_somewhat_below_the_range_warns():
    v = g05.judge_bandwidth(reading(fk.gb10_bandwidth(scale=0.85)), fk.gb10_inventory(), profiles.GB10)
    assert v.status is Status.WARN and v.summary == "read 198 GB/s, below GB10's 231-253"
    assert v.detail == ("copy 170, read 198, write 178, triad 170 GB/s (1 GiB arrays): read below GB10's measured range "
                        "(read 231-253 GB/s)")
    assert v.fix.startswith("find what else uses the GPU or its memory (G6")


def test_h200_recorded_run_passes_against_its_profile_and_names_nvml_theoretical():
    v = g05.judge_bandwidth(reading(fk.h200_bandwidth("4GiB")), fk.h200_inventory(), profiles.H200)
    assert v.line == "G5 PASS: read 4337, copy 4275 GB/s: within H200's measured range"
    assert v.detail == ("copy 4275, read 4337, write 4642, triad 4357 GB/s (4 GiB arrays); budget 4275 GB/s copy and "
                        "4337 GB/s read - not the datasheet's 4800; best 96% of NVML's theoretical 4814 GB/s")
    v = g05.judge_bandwidth(reading(fk.h200_bandwidth("1GiB")), fk.h200_inventory(), profiles.H200)
    assert v.status is Status.PASS and v.summary == "read 3907, copy 4090 GB/s: within 10% of H200's measured range"
    assert "; read, write, triad under it; " in v.detail


def test_a_gpu_without_ranges_is_judged_against_nvml_theoretical():
    generic = profiles.GENERIC
    v = g05.judge_bandwidth(reading(fk.h200_bandwidth()), fk.h200_inventory(), generic)
    assert v.status is Status.PASS and v.summary == "best write 4401 GB/s is 91% of NVML's theoretical 4814"
    assert v.detail == ("copy 4090, read 3907, write 4401, triad 4199 GB/s (1 GiB arrays); budget from these, not the "
                        "theoretical peak")
    half = replace(fk.h200_bandwidth(), methods=fk.method_results({m: (a * 0.65, b) for m, (a, b) in
                                                                    fk.h200_figures().items()}))
    assert g05.judge_bandwidth(reading(half), fk.h200_inventory(), generic).status is Status.WARN
    quarter = replace(fk.h200_bandwidth(), methods=fk.method_results({"copy": (1000.0, 1100.0)}))
    v = g05.judge_bandwidth(reading(quarter), fk.h200_inventory(), generic)
    assert v.status is Status.WARN and v.summary == ("best copy 1000 GB/s is 21% of NVML's theoretical 4814, under 50%; "
                                                     "other GPU work unknown, measured once")
    v = g05.judge_bandwidth(reading(quarter, NOBODY, quarter.__class__(**vars(quarter)), NOBODY), fk.h200_inventory(),
                            generic)
    assert v.status is Status.FAIL and v.summary == ("best copy 1000 GB/s is 21% of NVML's theoretical 4814, under 50%; "
                                                     "nothing else on the GPU, twice")


def test_no_range_and_no_theoretical_is_info_with_the_figures():
    v = g05.judge_bandwidth(reading(fk.gb10_bandwidth()), fk.gb10_inventory(), profiles.GENERIC)
    assert v.line == "G5 INFO: copy 200, read 232, write 210, triad 200 GB/s: no range or NVML peak to judge by"
    assert v.detail.startswith("1 GiB arrays; a GPU without a profile (figures from NVML) has no measured range and "
                               "NVML no theoretical peak: budget memory-bound work")


@pytest.mark.parametrize("bad,status,start", [
    (BandwidthReading(attempted=False, reason="torch 2.13.0+cpu is a CPU build"), Status.SKIP,
     "bandwidth not measured: torch 2.13.0+cpu is a CPU build"),
    (BandwidthReading(attempted=True, problem="ValueError: not enough free memory for a bandwidth probe: 1.2 GiB free"),
     Status.SKIP, "bandwidth could not run: ValueError: not enough free memory"),
    (BandwidthReading(attempted=True, problem="child process killed by SIGSEGV", crashed=True), Status.FAIL,
     "bandwidth crashed or hung: child process killed by SIGSEGV"),
    (BandwidthReading(attempted=True), Status.SKIP, "bandwidth: no result recorded"),
])
def test_bad_input_gives_one_clear_line(bad, status, start):
    v = g05.judge_bandwidth(bad, None, profiles.GB10)
    assert v.status is status and v.summary.startswith(start)


def test_a_kernel_with_wrong_output_fails():
    res = fk.gb10_bandwidth()
    res.methods[0] = replace(res.methods[0], gbps=None, gbps_best=None, check="element 7 is -1.0, expected 3.0")
    v = g05.judge_bandwidth(reading(res), fk.gb10_inventory(), profiles.GB10)
    assert v.status is Status.FAIL and "copy (torch): element 7 is -1.0, expected 3.0" in v.summary
    assert "ECC" in v.fix


def test_methods_that_could_not_run_are_left_out_or_skip():
    res = fk.gb10_bandwidth()
    res.methods = [replace(m, gbps=None, gbps_best=None, check="", error="OutOfResources: shared memory")
                   for m in res.methods]
    v = g05.judge_bandwidth(reading(res), fk.gb10_inventory(), profiles.GB10)
    assert v.status is Status.SKIP and v.summary.startswith("no bandwidth method could run: copy: OutOfResources")


def test_decode_ceiling_from_the_measured_read():
    v = g05.judge_decode_ceiling(reading(fk.gb10_bandwidth()), profiles.GB10, Plan(model_gb=70.0))
    assert v.line == "G5 INFO: batch-1 decode of 70 GB of weights tops out at 3.3 tokens/s (read 232 GB/s)"
    assert v.detail == ("at most 3.3 tokens/s per batch-1 sequence at the measured read 232 GB/s (a plan from the "
                        "datasheet's 273 GB/s would expect 3.9); KV-cache reads lower it further")
    assert v.readings["tokens_per_s"] == pytest.approx(232.5 / 70, abs=0.01)


def test_decode_ceiling_needs_a_model_size():
    assert g05.judge_decode_ceiling(reading(fk.gb10_bandwidth()), profiles.GB10, Plan(model_gb=None)).line == \
        "G5 SKIP: no planned model size (--spark-model-gb GB): no decode ceiling to state"
    assert g05.judge_decode_ceiling(reading(fk.gb10_bandwidth()), profiles.GB10, Plan(model_gb=0)).status is Status.SKIP


def sweep_reading(scale_at_largest: float = 1.0) -> BandwidthSweepReading:
    sizes = [12 << 20, 96 << 20, 768 << 20, 3 << 30]
    points = []
    for size in sizes:
        factor = 4.0 if size < (24 << 20) else (scale_at_largest if size == sizes[-1] else 1.0)  # L2-resident
        points += fk.method_results({m: (a * factor, b * factor) for m, (a, b) in fk.gb10_figures().items()}, size)
    return BandwidthSweepReading(attempted=True, csv_path="reports/g5_bandwidth_sweep.csv",
                                 result=BandwidthSweep(device="NVIDIA GB10", l2_bytes=24 << 20, unified_memory=True,
                                                       points=points, sizes_bytes=sizes, backend="triton 3.6.0"))


def test_sweep_judges_the_dram_plateau_not_the_cache():
    v = g05.judge_sweep(sweep_reading(), fk.gb10_inventory(), profiles.GB10)
    assert v.status is Status.PASS and v.summary == "read 232, copy 200 GB/s: within GB10's measured range"
    assert v.detail.startswith("copy 200, read 232, write 210, triad 200 GB/s (median over 3 sizes, 96 MiB-3 GiB "
                               "arrays); budget")


def test_sweep_warns_when_the_largest_size_drops():
    v = g05.judge_sweep(sweep_reading(scale_at_largest=0.6), fk.gb10_inventory(), profiles.GB10)
    assert v.line == "G5 WARN: bandwidth drops at the largest size (3 GiB): copy 120, read 140, write 126, triad 120 GB/s"
    assert v.detail == ("under 80% of the plateau copy 200, read 232, write 210, triad 200 GB/s (median over 3 sizes, "
                        "96 MiB-3 GiB arrays): memory pressure at that size")


# -- live (fake worker) -> snapshot -> replay -----------------------------------------------------------
@pytest.fixture
def fake_gpu(monkeypatch):
    """A live run whose worker answers with recorded H200 readings (no GPU, no torch import)."""

    worker = fk.FakeWorker({
        "spark_gotchas.runtime.tasks:torch_build": fk.torch_build_value(),
        "spark_gotchas.microbench.bandwidth:probe": fk.h200_bandwidth(),
        "spark_gotchas.microbench.gemm:probe": fk.h200_gemm(),
    })
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setattr("spark_gotchas.machine.readers.torch.torch_installed", lambda: True)
    monkeypatch.setattr("spark_gotchas.run.session.SessionState.worker", lambda self: worker)
    no_nvml.pin(monkeypatch)  # the fake H200 is the only GPU: on a GPU machine NVML would name the real one
    return worker


def run(pytester, *args):
    import pytest_timeout

    import spark_gotchas.plugin

    return pytester.runpytest("-p", "no:cacheprovider", *args, plugins=[spark_gotchas.plugin, pytest_timeout])


def glines(result) -> list[str]:
    return [line for line in block(result, (5, 7)) if not line.startswith("    fix: ")]


def test_snapshot_then_replay_gives_the_same_g5_lines(pytester, fake_gpu, monkeypatch, tmp_path):
    # the fake worker's torch sees an H200: give the machine the device files and PCI entry one has
    monkeypatch.setenv("SPARK_GOTCHAS_SYS_ROOT", str(make_root(tmp_path, pci=[H200_PCI], dev=("nvidia0", "nvidiactl"))))
    pytester.makepyfile(test_g05_check=(ROOT / "tests_gotchas" / "test_g05_bandwidth.py").read_text())
    live = run(pytester, "-m", "fast", "--spark-profile", "h200", "--spark-model-gb", "70",
               "--spark-snapshot", "snap.json", "-rA", "-v")
    live.assert_outcomes(passed=2)
    lines = glines(live)
    assert "G5 PASS: read 3907, copy 4090 GB/s: within 10% of H200's measured range" in lines
    details = [line for line in live.stdout.lines if line.startswith(("    pass: ", "    info: "))]
    assert any(line.startswith("    pass: read 3907, copy 4090 GB/s: within 10% of H200's measured range (copy 4090, "
                               "read 3907, write 4401, triad 4199 GB/s (1 GiB arrays); ") for line in details), details
    assert "spark_gotchas.microbench.bandwidth:probe" in fake_gpu.calls
    snap = json.loads((pytester.path / "snap.json").read_text())
    assert snap["readings"]["bench.bandwidth"]["result"]["methods"][0]["accounting"] == "1 array read + 1 written"

    def no_worker(self):
        raise AssertionError("a replay must not touch the GPU worker")


    monkeypatch.setattr("spark_gotchas.run.session.SessionState.worker", no_worker)
    replay = run(pytester, "-m", "fast", "--spark-replay", "snap.json", "-rA", "-v")
    replay.assert_outcomes(passed=2)
    assert glines(replay) == lines
    assert [line for line in replay.stdout.lines if line.startswith(("    pass: ", "    info: "))] == details


def test_a_probe_that_crashes_in_the_worker_fails_the_check(pytester, fake_gpu, monkeypatch, tmp_path):
    fake_gpu.answers["spark_gotchas.microbench.bandwidth:probe"] = TaskResult(ok=False, crashed=True, signal="SIGSEGV",
                                                                 stderr_tail="Segmentation fault")
    fake_gpu.answers["spark_gotchas.runtime.tasks:torch_build"] = fk.torch_build_value("NVIDIA GB10", (12, 1))
    monkeypatch.setenv("SPARK_GOTCHAS_SYS_ROOT", str(make_root(tmp_path, pci=[GB10_PCI], dev=("nvidia0", "nvidiactl"))))
    pytester.makepyfile(test_g05_check=(ROOT / "tests_gotchas" / "test_g05_bandwidth.py").read_text())
    result = run(pytester, "-m", "fast", "--spark-profile", "gb10", "-k", "budget")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["G5 FAIL: bandwidth crashed or hung: child process killed by SIGSEGV*"])
    assert "Traceback" not in result.stdout.str()


def test_an_h200_judged_as_a_spark_is_no_gb10_reading_never_a_pass():
    v = g05.judge_bandwidth(reading(fk.h200_bandwidth()), fk.h200_inventory(), profiles.GB10)
    assert v.line == "G5 WARN: write 4401 GB/s is 16.1x GB10's 273 GB/s: not a GB10's; bandwidth not judged"
    assert v.detail.startswith("write 4401 GB/s is 16.1x GB10's 273 GB/s datasheet (NVIDIA DGX Spark datasheet")
    assert v.readings["beyond_envelope"] == "write 4401 GB/s is 16.1x GB10's 273 GB/s datasheet"


def test_a_figure_at_the_datasheet_is_judged_and_one_past_it_is_no_gb10_reading():
    at = g05.judge_bandwidth(reading(fk.gb10_bandwidth(1.18)), fk.gb10_inventory(), profiles.GB10)
    assert at.status is Status.PASS and "GB10's measured range" in at.summary  # read 274 GB/s: the datasheet's, rounded
    past = g05.judge_bandwidth(reading(fk.gb10_bandwidth(1.3)), fk.gb10_inventory(), profiles.GB10)
    assert past.line == "G5 WARN: read 302 GB/s is 1.1x GB10's 273 GB/s: not a GB10's; bandwidth not judged"
    assert past.fix.startswith("re-run on the machine the snapshot names")
    ceiling = g05.judge_decode_ceiling(reading(fk.gb10_bandwidth(1.3)), profiles.GB10, Plan(model_gb=30))
    assert ceiling.line == "G5 WARN: read 302 GB/s: not a GB10 reading; decode ceiling not judged"


def test_the_sweep_reader_streams_progress_and_writes_its_csv(tmp_path, monkeypatch):
    from spark_gotchas.machine.provider import Provider

    sweep = sweep_reading().result
    worker = fk.FakeWorker(
        {"spark_gotchas.runtime.tasks:torch_build": fk.torch_build_value("NVIDIA GB10", (12, 1)),
         "spark_gotchas.microbench.bandwidth:sweep": sweep},
        progress={"spark_gotchas.microbench.bandwidth:sweep": [{"array_bytes": 96 << 20, "gbps": {"copy": 199.5, "read": None}}]})
    provider = Provider(RunOptions(soak_dir=str(tmp_path / "reports"), spark_profile="gb10"),
                        worker_factory=lambda: worker)
    said, artifacts = [], {}
    provider.ctx.say = said.append
    provider.ctx.add_artifact = artifacts.__setitem__
    monkeypatch.setattr("spark_gotchas.machine.readers.torch.torch_installed", lambda: True)
    got = provider.read("bench.bandwidth_sweep")
    assert said == ["G5 sweep: 96 MiB per array: copy 200 GB/s"]
    rows = (tmp_path / "reports" / "g5_bandwidth_sweep.csv").read_text().splitlines()
    assert rows[0] == "array_bytes,method,implementation,gbps_median,gbps_best,check,error"
    assert len(rows) == 1 + len(sweep.points)
    assert artifacts == {"G5 bandwidth sweep (CSV)": got.csv_path}
    assert g05.judge_sweep(got, fk.gb10_inventory(), profiles.GB10).status is Status.PASS


def test_a_sweep_far_below_is_a_hardware_fail_only_when_nobody_was_seen_meanwhile():
    slow = fk.GB10["stuck_low_power"]["slowdown"]
    sizes = (1 << 28, 1 << 29, 1 << 30)
    points = [p for size in sizes for p in fk.method_results(
        {m: (lo * slow, hi * slow) for m, (lo, hi) in fk.gb10_figures().items()}, array_bytes=size)]
    for p in points:
        p.role = "probe"
    sweep = BandwidthSweep(device="NVIDIA GB10", l2_bytes=24 << 20, unified_memory=True, points=points)
    seen = g05.judge_sweep(BandwidthSweepReading(attempted=True, result=sweep, window=NOBODY), fk.gb10_inventory(),
                           profiles.GB10)
    assert seen.status is Status.FAIL and seen.summary.endswith("; nothing else on the GPU")
    older = g05.judge_sweep(BandwidthSweepReading(attempted=True, result=sweep), fk.gb10_inventory(), profiles.GB10)
    assert older.status is Status.WARN and older.summary.endswith("; other GPU work unknown")
    assert older.fix == g05.FIX_SLOW
