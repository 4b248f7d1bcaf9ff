"""Who else was on the GPU while a measurement ran, and what the G4, G5 and G7 lines say of it.

The examples: two and three preflights started together on one H200, each measuring while the
others measure; a job that starts during the load; a process NVML lists from another pid
namespace; a far-below figure with nobody else on the GPU, measured once, twice, or fine the
second time. The sampler runs for real against a fake NVML and a fake process table.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import replace
from types import SimpleNamespace

import bench_fakes as fk
import no_nvml
import pytest
from bench_fakes import torch_in_the_fake_worker  # noqa: F401  a fixture
from g04_fakes import FakeGpu, FakeNvml, NVMLError_NotSupported, install

from spark_gotchas.knowledge import profiles
from spark_gotchas.knowledge.judges import g04_thermal as g04
from spark_gotchas.knowledge.judges import g05_bandwidth as g05
from spark_gotchas.knowledge.judges import g07_nvfp4 as g07
from spark_gotchas.knowledge.plan import Plan
from spark_gotchas.knowledge.readings.bench import BandwidthReading, GemmReading
from spark_gotchas.knowledge.readings.gpu import GpuProcess, GpuProcesses, MeasureWindow, WindowProcess, sharing
from spark_gotchas.knowledge.readings.thermal import SpotCheck, ThermalSample
from spark_gotchas.knowledge.verdict import Status
from spark_gotchas.machine import gpu_window, nvml

OTHER_RUN = ["/opt/venv/bin/python3", "-m", "spark_gotchas.runtime.worker_main", "torch"]


# -- a fake NVML that lists processes and their utilization ------------------------------------------
class SharedGpu(FakeNvml):
    """A GPU whose compute list and per-process utilization follow a script of (pid, memory, sm %)."""

    def __init__(self, listed=lambda: [], util=lambda: [], util_error: Exception | None = None,
                 memory=lambda: None, graphics=lambda: []):
        super().__init__(FakeGpu(name="NVIDIA H200"))
        self.listed, self.util, self.util_error = listed, util, util_error
        self.memory, self.graphics = memory, graphics  # memory(): (used, reserved or None for a v1-only driver)

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        return [SimpleNamespace(pid=pid, usedGpuMemory=mem) for pid, mem, _ in self.listed()]

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle):
        return [SimpleNamespace(pid=pid, usedGpuMemory=mem) for pid, mem in self.graphics()]

    def nvmlDeviceGetMemoryInfo(self, handle, version=None):
        figures = self.memory()
        if figures is None:
            raise NVMLError_NotSupported()
        used, reserved = figures
        if version and reserved is None:
            raise type("NVMLError_FunctionNotFound", (Exception,), {})("Function Not Found")
        total = 150_754_820_096
        if version:
            return SimpleNamespace(total=total, reserved=reserved, used=used, free=total - used - reserved)
        return SimpleNamespace(total=total, used=used, free=total - used)

    def nvmlDeviceGetProcessUtilization(self, handle, since_us):
        if self.util_error is not None:
            raise self.util_error
        now = int(time.time() * 1e6)
        samples = [SimpleNamespace(pid=pid, smUtil=sm, memUtil=0, timeStamp=now) for pid, _, sm in self.util()]
        if not samples:
            raise type("NVMLError_NotFound", (Exception,), {})("Not Found")
        return samples


class FakeProc:
    def __init__(self, table, pid):
        if pid not in table:
            raise FakePsutil.NoSuchProcess(pid)
        self.pid, self._row = pid, table[pid]

    def cmdline(self):
        return self._row

    def ppid(self):
        return 1000 + self.pid // 10  # workers 4242 and 4243 belong to the run of pid 1424

    def name(self):
        return os.path.basename(self._row[0]) if self._row else ""

    def children(self, recursive=False):
        return []

    def parents(self):
        return []


class FakePsutil:
    class Error(Exception):
        pass

    class NoSuchProcess(Error):
        pass

    def __init__(self, table):
        self.table = table

    def Process(self, pid=None):  # noqa: N802 (psutil's name)
        if pid is None:
            return FakeProc({os.getpid(): ["pytest"]}, os.getpid())
        return FakeProc(self.table, pid)


@pytest.fixture
def nvml_fake():
    installed = {}

    def use(fake):
        installed["previous"] = install(fake)
        return fake

    yield use
    if "previous" in installed:
        nvml._STATE.clear()
        nvml._STATE.update(installed["previous"])


def measure(fake, table, seconds=0.35, measuring_pid=None):
    """Run the real sampler around a sleep standing for the measurement."""
    w = gpu_window.Watch("test probe", fake.gpus[0], lambda: measuring_pid, interval_s=0.05,
                         psutil=FakePsutil(table))
    with w:
        time.sleep(seconds)
    return w.window


# -- the sampler ---------------------------------------------------------------------------------
def test_another_preflight_measuring_meanwhile_is_named_as_another_run(nvml_fake):
    fake = nvml_fake(SharedGpu(listed=lambda: [(4242, 900 << 20, 80)], util=lambda: [(4242, 0, 80)]))
    window = measure(fake, {4242: OTHER_RUN})
    assert window.read and window.samples >= 3
    (other,) = window.busy()
    assert other.suite_run and other.phases == ["before", "during", "after"] and other.sm_util_max_pct == 80
    share = sharing(window)
    assert share.busy is True and share.names == "a spark-gotchas run (pid 1424)" and share.suite_runs == 1


def test_one_other_run_is_one_run_though_its_gpu_worker_and_load_worker_are_both_listed(nvml_fake):
    both = lambda: [(4242, 900 << 20, 80), (4243, 300 << 20, 40), (5555, 900 << 20, 70)]  # noqa: E731
    fake = nvml_fake(SharedGpu(listed=both, util=both))
    window = measure(fake, {4242: OTHER_RUN, 4243: OTHER_RUN[:3], 5555: OTHER_RUN})
    assert sharing(window).names == "2 spark-gotchas runs (pids 1424, 1555)"
    assert sharing(window).brief == "2 other spark-gotchas runs"


def test_a_process_that_exits_before_the_window_ends_keeps_what_it_was(nvml_fake):
    table = {4242: OTHER_RUN}
    fake = nvml_fake(SharedGpu(listed=lambda: [(4242, 900 << 20, 80)], util=lambda: [(4242, 0, 80)]))
    w = gpu_window.Watch("test probe", fake.gpus[0], interval_s=0.05, psutil=FakePsutil(table))
    with w:
        time.sleep(0.15)
        table.clear()  # the other run ended while this one still measured
    assert w.window.others[0].visible and w.window.others[0].suite_run


def test_a_job_that_starts_during_the_measurement_is_named(nvml_fake):
    began = time.time()
    late = lambda: [(7001, 2 << 30, 95)] if time.time() - began > 0.15 else []  # noqa: E731
    fake = nvml_fake(SharedGpu(listed=late, util=late))
    window = measure(fake, {7001: ["python3", "train.py", "--lr", "1e-4"]})
    assert sharing(window).names == "pid 7001 python3"
    assert "before" not in window.others[0].phases and "during" in window.others[0].phases


def test_this_runs_own_processes_are_left_out(nvml_fake, monkeypatch):
    fake = nvml_fake(SharedGpu(listed=lambda: [(os.getpid(), 1 << 30, 99)], util=lambda: [(os.getpid(), 0, 99)]))
    window = measure(fake, {})
    assert window.read and window.others == [] and sharing(window).busy is False


def test_a_process_holding_memory_but_idle_did_not_share_the_gpu(nvml_fake):
    fake = nvml_fake(SharedGpu(listed=lambda: [(6008, 50 << 30, 0)], util=lambda: []))
    window = measure(fake, {6008: ["VLLM::EngineCore"]})
    assert window.others[0].sm_util_max_pct == 0 and window.busy() == [] and sharing(window).busy is False


def test_without_per_process_utilization_a_listed_process_counts_as_sharing(nvml_fake):
    fake = nvml_fake(SharedGpu(listed=lambda: [(6008, 50 << 30, 0)],
                               util_error=type("NVMLError_NotSupported", (Exception,), {})("Not Supported")))
    window = measure(fake, {6008: ["VLLM::EngineCore"]})
    assert window.utilization_error == "Not Supported"
    assert sharing(window).names == "pid 6008 VLLM::EngineCore"


def test_host_pids_in_a_container_count_this_runs_own_measuring_process_once(nvml_fake):
    # NVML lists host pids: the run's own worker (host pid 90001) and another job's (90002), neither visible here.
    both = lambda: [(90001, 1 << 30, 90), (90002, 1 << 30, 60)]  # noqa: E731
    fake = nvml_fake(SharedGpu(listed=both, util=both))
    window = measure(fake, {}, measuring_pid=123)
    assert window.own_hidden == 1
    assert [p.visible for p in window.others] == [False, False]
    assert len(window.busy()) == 1
    assert sharing(window).names == "a process outside this container (pid 90002, not visible here)"
    alone = lambda: [(90001, 1 << 30, 90)]  # noqa: E731
    fake.listed, fake.util = alone, alone
    assert sharing(measure(fake, {}, measuring_pid=123)).busy is False


def test_host_pids_without_utilization_discount_every_worker_of_this_run(nvml_fake, monkeypatch):
    # a GPU without per-process utilization: this run's GPU worker and load worker are both listed, by host pid
    two = lambda: [(90001, 1 << 30, 0), (90003, 1 << 30, 0)]  # noqa: E731
    fake = nvml_fake(SharedGpu(listed=two, util_error=type("NVMLError_NotSupported", (Exception,), {})("Not Supported")))
    monkeypatch.setattr(gpu_window, "_own_workers", lambda psutil: 2)
    window = measure(fake, {}, measuring_pid=123)
    assert window.own_hidden == 2 and sharing(window).busy is False
    three = lambda: [(90001, 1 << 30, 0), (90002, 1 << 30, 0), (90003, 1 << 30, 0)]  # noqa: E731
    fake.listed = three
    shared = sharing(measure(fake, {}, measuring_pid=123))  # one more than this run's two: someone else's
    assert shared.busy is True and len(shared.pids) == 1  # which of the three is not known: the one left is named
    assert shared.names == "a process outside this container (pid 90003, not visible here)"


# -- memory no listed process holds: a job NVML does not list (another pid namespace's) ----------------
OWN = os.getpid()  # the fake process table's own process: NVML lists it as this run's measuring process
RESERVE = 567 << 20  # the driver's reserve, given apart by NVML's v2 memory call
JOB = 1_074_790_400  # a bf16 GEMM loop at 8192: its context and three matrices


def test_memory_no_listed_process_holds_while_it_ran_is_a_process_outside_this_container(nvml_fake):
    fake = nvml_fake(SharedGpu(listed=lambda: [(OWN, 1 << 30, 99)], util=lambda: [(OWN, 0, 99)],
                               memory=lambda: ((1 << 30) + JOB, RESERVE)))
    window = measure(fake, {})
    assert window.busy() == [] and window.unlisted_bytes == JOB and window.reserve_split is True
    share = sharing(window)
    assert share.busy is True and share.sampled and share.cause == "shared with a process outside this container"
    assert share.only_outside and share.fix("then", "{names}").startswith("find it from the host, where nvidia-smi")
    assert "1.1 GB held by no listed process while it ran" in share.aside


def test_the_drivers_own_memory_is_nobody(nvml_fake):
    fake = nvml_fake(SharedGpu(listed=lambda: [(OWN, 1 << 30, 99)], util=lambda: [(OWN, 0, 99)],
                               memory=lambda: ((1 << 30) + (60 << 20), RESERVE)))
    window = measure(fake, {})
    assert window.unlisted_bytes == 60 << 20 and sharing(window).busy is False


def test_where_nvml_keeps_its_reserve_inside_used_only_more_than_2_gib_is_someone(nvml_fake):
    state = {"job": JOB}
    fake = nvml_fake(SharedGpu(listed=lambda: [(OWN, 1 << 30, 99)], util=lambda: [(OWN, 0, 99)],
                               memory=lambda: ((1 << 30) + RESERVE + state["job"], None)))
    window = measure(fake, {})
    assert window.reserve_split is False and sharing(window).busy is False  # 1.6 GB: the reserve and maybe a job
    state["job"] = 3 << 30
    assert sharing(measure(fake, {})).outside is not None


def test_a_moments_skew_between_the_memory_figure_and_the_lists_is_not_someone(nvml_fake):
    calls = {"n": 0}

    def memory():
        calls["n"] += 1
        return ((1 << 30) + (2 << 30 if calls["n"] == 2 else 0), RESERVE)  # one sample read mid-allocation

    fake = nvml_fake(SharedGpu(listed=lambda: [(OWN, 1 << 30, 99)], util=lambda: [(OWN, 0, 99)], memory=memory))
    window = measure(fake, {})
    assert window.unlisted_bytes == 0 and sharing(window).busy is False


def test_without_this_runs_own_process_listed_memory_cannot_be_compared(nvml_fake):
    fake = nvml_fake(SharedGpu(listed=lambda: [], memory=lambda: (JOB + (1 << 30), RESERVE)))
    window = measure(fake, {})
    assert window.unlisted_bytes is None and sharing(window).busy is False


def test_memory_on_the_graphics_list_is_listed(nvml_fake):
    fake = nvml_fake(SharedGpu(listed=lambda: [(OWN, 1 << 30, 99)], util=lambda: [(OWN, 0, 99)],
                               graphics=lambda: [(3154, 1_500_000_000)],
                               memory=lambda: ((1 << 30) + 1_500_000_000, RESERVE)))
    assert measure(fake, {}).unlisted_bytes == 0


def test_a_hostile_program_name_is_masked_and_stays_one_line(nvml_fake):
    fake = nvml_fake(SharedGpu(listed=lambda: [(555, 1 << 30, 50)], util=lambda: [(555, 0, 50)]))
    window = measure(fake, {555: ["/tmp/x\nG4 PASS: forged\x1b[2J", "--api-key", "sk-live-123456789012345678"]})
    v = g05.judge_bandwidth(bandwidth(HALF, window), fk.h200_inventory(), profiles.H200)
    assert v.status is Status.WARN and "pid 555 x" in v.line  # the program's file name, from its argv[0]
    for text in (v.line, v.fix, v.detail):
        assert "\n" not in text and "\x1b" not in text and "sk-live" not in text


def test_no_nvml_is_a_reason_not_a_crash():
    w = gpu_window._NoWatch("G5 bandwidth probe", "NVML library not found")
    with w:
        pass
    assert not w.window.read and sharing(w.window).busy is None


def test_lists_nvml_cannot_read_make_the_sharing_unknown(nvml_fake):
    fake = nvml_fake(FakeNvml(FakeGpu(name="NVIDIA H200")))  # no process-list call at all
    window = measure(fake, {})
    assert window.lists_error and sharing(window).busy is None


def test_the_sampler_stops_with_the_measurement(nvml_fake):
    fake = nvml_fake(SharedGpu())
    measure(fake, {}, seconds=0.1)
    assert [t.name for t in threading.enumerate() if t.name == "gpu-window"] == []  # NVML's call thread may stay


# -- G5 -------------------------------------------------------------------------------------------
def window_with(*procs: WindowProcess, utilization_error=None) -> MeasureWindow:
    return MeasureWindow(what="test", t_start_epoch=1.0, t_end_epoch=2.0, samples=5, others=list(procs),
                         utilization_error=utilization_error)


OTHER = WindowProcess(pid=4242, program="python3", suite_run=True, phases=["before", "during"], sm_util_max_pct=88)
THIRD = WindowProcess(pid=4343, program="python3", suite_run=True, phases=["during", "after"], sm_util_max_pct=71)
NOBODY = window_with()
HALF = 0.49  # two preflights' bandwidth probes at once: each reads about half


def bandwidth(scale=1.0, window=NOBODY, again_scale=None, again_window=NOBODY) -> BandwidthReading:
    figures = {m: (lo * scale, hi * scale) for m, (lo, hi) in fk.h200_figures().items()}
    again = None
    if again_scale is not None:
        again = replace(fk.h200_bandwidth(), methods=fk.method_results(
            {m: (lo * again_scale, hi * again_scale) for m, (lo, hi) in fk.h200_figures().items()}))
    return BandwidthReading(attempted=True, result=replace(fk.h200_bandwidth(), methods=fk.method_results(figures)),
                            window=window, again=again, again_window=again_window if again is not None else None)


def g5(reading, processes=None):
    return g05.judge_bandwidth(reading, fk.h200_inventory(), profiles.H200, processes)


def test_g5_two_preflights_at_once_name_each_other_and_never_blame_the_hardware():
    v = g5(bandwidth(HALF, window_with(OTHER)))
    assert v.status is Status.WARN
    assert v.line == "G5 WARN: read 1914 GB/s, far below H200's 4264-4400: shared with another spark-gotchas run"
    assert len(v.line) <= 100 and "copy, read, write, triad far below" in v.detail
    assert v.fix == ("re-run spark-gotchas -m fast -k g05 when no other run is measuring: a spark-gotchas run (pid "
                     "4242) shared the GPU with this one, so no figure is the GPU's own")
    assert "NVIDIA support" not in v.fix and v.readings["busy_pids"] == [4242]


def test_g5_three_preflights_at_once_name_both_others():
    v = g5(bandwidth(0.33, window_with(OTHER, THIRD)))
    assert v.line == "G5 WARN: read 1289 GB/s, far below H200's 4264-4400: shared with 2 other spark-gotchas runs"
    assert v.detail.endswith("; measured while 2 spark-gotchas runs (pids 4242, 4343) shared the GPU")
    assert v.readings["busy_pids"] == [4242, 4343] and "NVIDIA" not in v.fix


def test_g5_far_below_with_nobody_seen_measured_once_asks_for_a_rerun_not_support():
    v = g5(bandwidth(HALF))
    assert v.status is Status.WARN
    assert v.summary.endswith("; nothing else on the GPU, measured once")
    assert v.fix == g05.FIX_REMEASURE and "NVIDIA support" not in v.fix


def test_g5_far_below_twice_with_nobody_seen_blames_the_hardware_with_both_figures():
    v = g5(bandwidth(HALF, again_scale=0.5))
    assert v.status is Status.FAIL
    assert v.summary.endswith("; nothing else on the GPU, twice")
    assert v.fix == g05.FIX_HARDWARE and "contact NVIDIA support" in v.fix
    assert "measured twice: the first read copy 2004, read 1914" in v.detail
    assert v.readings["first_gbps"]["read"] == pytest.approx(1914, abs=1)


def test_g5_a_second_look_within_range_passes_and_keeps_the_first_in_the_detail():
    v = g5(bandwidth(HALF, again_scale=1.0))
    assert v.status is Status.PASS and v.summary.endswith("(second try)")
    assert "the first read copy 2004" in v.detail and "something unseen slowed it" in v.detail


def test_g5_a_job_that_arrives_for_the_second_look_is_named():
    v = g5(bandwidth(HALF, again_scale=0.5, again_window=window_with(
        WindowProcess(pid=7001, program="python3", phases=["during"], sm_util_max_pct=97))))
    assert v.status is Status.WARN and v.summary.endswith("shared with pid 7001 python3")
    assert "measured while pid 7001 python3 shared the GPU" in v.detail
    assert "measured twice" in v.detail


def test_g5_an_older_snapshot_without_a_window_names_its_process_list_but_never_claims_nothing_else():
    older = bandwidth(HALF, window=None)
    assert g5(older).summary.endswith("; other GPU work unknown, measured once")
    listed = GpuProcesses(processes=[GpuProcess(pid=6008, cmdline=["VLLM::EngineCore"], nvml_lists=["compute"])])
    assert g5(older, listed).summary.endswith(": pid 6008 VLLM::EngineCore busy (see G6)")


def test_g5_a_pass_says_who_shared_the_gpu_in_its_detail():
    v = g5(bandwidth(1.0, window_with(OTHER)))
    assert v.status is Status.PASS and "measured while a spark-gotchas run (pid 4242) shared the GPU" in v.detail


def test_g5_wants_a_second_look_only_when_far_below_with_nobody_busy():
    h200 = (profiles.H200, fk.h200_inventory())
    assert g05.wants_second_look(bandwidth(HALF).result, NOBODY, *h200)
    assert g05.wants_second_look(bandwidth(HALF).result, None, *h200)
    assert not g05.wants_second_look(bandwidth(HALF).result, window_with(OTHER), *h200)
    assert not g05.wants_second_look(bandwidth(0.95).result, NOBODY, *h200)


# -- G5's reader measures again ------------------------------------------------------------------------
class TwoMeasurements(fk.FakeWorker):
    """The bandwidth probe answers far below first, then as recorded."""

    def __init__(self, first_scale, second_scale):
        super().__init__({"spark_gotchas.runtime.tasks:torch_build": fk.torch_build_value()})
        self.results = [bandwidth(first_scale).result, bandwidth(second_scale).result]

    def call(self, task, args=None, timeout=60.0, on_progress=None):
        if task == "spark_gotchas.microbench.bandwidth:probe":
            self.answers[task] = self.results.pop(0)
        return super().call(task, args, timeout, on_progress)


def read_bandwidth_with(worker, monkeypatch):
    """The reader over a fake H200 worker, with no NVML of this machine's: on a GPU machine its real
    GPU's processes (other tests' work) would be seen in the probe's window, and the reader measures
    again only where nobody else was seen."""
    from spark_gotchas.machine.options import RunOptions
    from spark_gotchas.machine.provider import Provider

    no_nvml.pin(monkeypatch)

    provider = Provider(RunOptions(spark_profile="h200"), worker_factory=lambda: worker)
    provider._cache["gpu.inventory"] = fk.h200_inventory()
    return provider.read("bench.bandwidth")


@pytest.mark.usefixtures("torch_in_the_fake_worker")  # the worker is a fake with torch
def test_g5_reader_measures_again_when_far_below_and_the_judge_passes_the_second(monkeypatch):
    worker = TwoMeasurements(HALF, 1.0)
    reading = read_bandwidth_with(worker, monkeypatch)
    assert worker.calls.count("spark_gotchas.microbench.bandwidth:probe") == 2
    assert reading.again is not None and reading.again_window is not None
    assert g5(reading).status is Status.PASS


@pytest.mark.usefixtures("torch_in_the_fake_worker")  # the worker is a fake with torch
def test_g5_reader_measures_once_when_the_figure_is_fine(monkeypatch):
    worker = TwoMeasurements(1.0, 1.0)
    reading = read_bandwidth_with(worker, monkeypatch)
    assert worker.calls.count("spark_gotchas.microbench.bandwidth:probe") == 1 and reading.again is None


# -- G4 -------------------------------------------------------------------------------------------
def spot(tflops, window=NOBODY, again=None) -> SpotCheck:
    samples = [ThermalSample(t_s=t / 10, sm_clock_mhz=1500.0, power_w=520.0, temperature_c=50.0, utilization_pct=100.0)
               for t in range(0, 25)]
    return SpotCheck(attempted=True, device="NVIDIA H200", size=8192, dtype="bf16", load_start_s=0.2,
                     load_end_s=2.0, tflops=tflops, busy_fraction=0.99, samples=samples, max_sm_clock_mhz=1980.0,
                     power_limit_w=700.0, window=window, again=again)


def test_g4_two_preflights_at_once_name_the_other_run_and_say_re_run():
    v = g04.judge_spot_check(spot(409.8, window_with(OTHER)), profiles.H200)
    assert v.line == "G4 WARN: 409.8 TFLOP/s, far below H200's 763-798: shared with another spark-gotchas run"
    assert v.detail.endswith("SM clock 1500 MHz, 520 W, 50 °C, 409.8 TFLOP/s; measured while a spark-gotchas run (pid 4242) "
                             "shared the GPU")
    assert v.fix.startswith("re-run spark-gotchas -m fast -k g04 when no other run is measuring: a spark-gotchas run")
    assert "NVIDIA" not in v.fix


def test_g4_far_below_with_nobody_seen_and_one_load_asks_for_a_rerun():
    v = g04.judge_spot_check(spot(409.8), profiles.H200)
    assert v.summary.endswith("; nothing else on the GPU, measured once") and v.fix == g04.FIX_SPOT_ONCE
    assert "NVIDIA support" not in v.fix


def test_g4_far_below_twice_with_nobody_seen_points_at_the_driver_and_support_with_both_rates():
    v = g04.judge_spot_check(spot(409.8, again=spot(402.0)), profiles.H200)
    assert v.status is Status.WARN and v.summary.startswith("402.0 TFLOP/s") and v.summary.endswith(", twice")
    assert v.fix == g04.FIX_SPOT_ALONE and "the first load ran at 409.8 TFLOP/s" in v.detail


def test_g4_a_second_load_at_full_rate_passes():
    v = g04.judge_spot_check(spot(409.8, again=spot(671.0)), profiles.H200)
    assert v.status is Status.PASS and v.summary.endswith("(second try)") and "409.8" in v.detail


def test_g4_wants_a_second_look_only_without_a_busy_neighbour():
    assert g04.wants_second_look(spot(409.8), profiles.H200)
    assert not g04.wants_second_look(spot(409.8, window_with(OTHER)), profiles.H200)
    assert not g04.wants_second_look(spot(671.0), profiles.H200)


# -- G7 -------------------------------------------------------------------------------------------
def test_g7_nvfp4_slower_while_another_process_shared_the_gpu_is_a_warn_not_a_fail():
    shared = GemmReading(attempted=True, result=fk.gb10_gemm(nvfp4_tflops=120.0), window=window_with(OTHER))
    v = g07.judge_gemm_rates(shared, profiles.GB10, Plan())
    assert v.status is Status.WARN and v.summary.endswith("shared with another spark-gotchas run")
    assert v.fix == g07.FIX_SHARED.format(names="a spark-gotchas run (pid 4242)")
    alone = GemmReading(attempted=True, result=fk.gb10_gemm(nvfp4_tflops=120.0), window=NOBODY)
    assert g07.judge_gemm_rates(alone, profiles.GB10, Plan()).status is Status.FAIL


def test_g7_elsewhere_says_who_shared_the_gpu_in_the_detail():
    v = g07.judge_gemm_rates(GemmReading(attempted=True, result=fk.h200_gemm(), window=window_with(OTHER)),
                             profiles.H200, Plan())
    assert v.status is Status.INFO and "measured while a spark-gotchas run (pid 4242) shared the GPU" in v.detail


def test_every_line_of_a_shared_or_repeated_measurement_fits_100_columns():
    seven_digit = WindowProcess(pid=4194303, program="python3", suite_run=True, run_pid=4194300, phases=["during"],
                                sm_util_max_pct=90)
    lines = [g5(bandwidth(HALF, w, again, NOBODY)).line
             for w in (NOBODY, None, window_with(seven_digit), window_with(OTHER, THIRD))
             for again in (None, 0.5, 1.0)]
    lines += [g04.judge_spot_check(spot(409.8, w, again), profiles.H200).line
              for w in (NOBODY, None, window_with(seven_digit), window_with(OTHER, THIRD))
              for again in (None, spot(402.0), spot(671.0))]
    assert max(len(line) for line in lines) <= 100, max(lines, key=len)


def test_g4_twice_far_below_while_nvml_could_not_list_does_not_blame_the_hardware():
    unread = MeasureWindow(what="G4", samples=0, lists_error="Not Supported")
    v = g04.judge_spot_check(spot(409.8, unread, again=spot(402.0, unread)), profiles.H200)
    assert v.summary.endswith("; other GPU work unknown, twice") and v.fix == g04.FIX_SPOT_UNSEEN
    assert "NVIDIA support" not in v.fix
