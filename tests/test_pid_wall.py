"""A GPU user behind the container's wall: NVML lists another pid namespace's job under a pid this
namespace cannot map, or not at all. The H100 snapshots of tests/fixtures/wall replayed through the
real plugin (their lines were written in its README before they ran), then each class of case on
its own: the job NVML does not list, the job listed under a host pid, an idle holder, and what
this run's own processes must never be taken for.
"""

from __future__ import annotations

import json
from dataclasses import replace
from types import SimpleNamespace

import pytest
from replay_run import REPO, replay

from spark_gotchas.base.serial import from_jsonable, to_jsonable
from spark_gotchas.knowledge.judges import g04_thermal as g04
from spark_gotchas.knowledge.judges import g05_bandwidth as g05
from spark_gotchas.knowledge.judges import g06_contention as g06
from spark_gotchas.knowledge.judges import g07_nvfp4 as g07
from spark_gotchas.knowledge.plan import Plan
from spark_gotchas.knowledge.profiles import GB10, H100, H200
from spark_gotchas.knowledge.readings.bench import BandwidthReading, GemmReading
from spark_gotchas.knowledge.readings.gpu import (
    DeviceProcessLists,
    DeviceUse,
    GpuDevice,
    GpuInventory,
    GpuProcess,
    GpuProcesses,
    MeasureWindow,
    WindowProcess,
    rest_outside,
    sharing,
)
from spark_gotchas.knowledge.readings.thermal import SpotCheck, ThermalSnapshot
from spark_gotchas.knowledge.verdict import Status
from spark_gotchas.machine import nvml
from spark_gotchas.machine.readers.gpu import collect, device_use

WALL = REPO / "tests" / "fixtures" / "wall"
OUTSIDE_FIX = ("find it from the host, where nvidia-smi names its pid and program (or start this container with "
               "--pid=host), and stop it or let it finish")
BLAME = ("cooling", "NVIDIA support", "reinstall the NVIDIA driver", "nothing else on the GPU", "faulty")


def readings(name: str) -> dict:
    return json.loads((WALL / name).read_text())["readings"]


def typed(name: str, key: str, tp):
    return from_jsonable(tp, readings(name)[key])


def blames_nothing(*texts: str) -> bool:
    return not any(word in text for text in texts for word in BLAME)


# -- the snapshots, replayed ---------------------------------------------------------------------------
def test_a_gemm_job_behind_the_wall_is_named_by_g4_g5_g6_and_g7_and_never_blamed_on_cooling(tmp_path):
    r = replay(WALL / "h100-gemm-behind-the-wall.json", tmp_path)
    assert r.of(4) == ["G4 WARN: throttling under load: shared with a process outside this container",
                       f"    fix: {OUTSIDE_FIX}, then re-run spark-gotchas -m fast -k g04"]
    assert r.of(5) == ["G5 WARN: write 1891 GB/s, 56% of NVML's 3352: shared with a process outside this container",
                       f"    fix: {OUTSIDE_FIX}, then re-run spark-gotchas -m fast -k g05"]
    assert r.of(6) == ["G6 WARN: another process outside this container uses the GPU: NVML lists no pid for it",
                       f"    fix: {OUTSIDE_FIX} before training"]
    assert r.of(7) == ["G7 INFO: BF16 264, FP8 497 TFLOP/s, shared with a process outside this container; 1 not checked"]
    rest = "G4 INFO: not at rest: a process outside this container uses the GPU (100% busy, 700.8 W)"
    assert rest in r.checks
    assert "thermal (NVML policy) +11 ms, SW thermal slowdown +737 ms" in r.detail(r.of(4)[0])
    assert "100% busy, 700.8 W of 700 W at rest; 0.9 GB held by no listed process while it ran" in r.detail(r.of(4)[0])
    assert r.detail(r.of(6)[0]).startswith("a process outside this container (100% busy, 700.8 W of 700 W at rest; "
                                           "0.9 GB held by no listed process at rest)")
    assert blames_nothing(*r.lines, *(detail for _, detail in r.details))


def test_the_same_job_listed_under_its_host_pid_is_named_and_this_runs_own_worker_is_not(tmp_path):
    r = replay(WALL / "h100-gemm-host-pid.json", tmp_path)
    assert r.of(6)[0] == "G6 WARN: another process outside this container uses the GPU: 1 pid NVML lists is not " \
                         "visible here"
    assert r.of(4)[0] == "G4 WARN: throttling under load: shared with a process outside this container"
    detail = r.detail(r.of(4)[0])
    assert "a process outside this container (pid 2093311, not visible here)" in detail and "2093502" not in detail
    assert r.of(7)[0].startswith("G7 INFO: BF16 264, FP8 497 TFLOP/s, shared with a process outside this container")
    assert blames_nothing(*r.lines)


def test_an_idle_holder_behind_the_wall_is_g6s_and_leaves_the_measurements_their_own(tmp_path):
    r = replay(WALL / "h100-idle-holder-22gb.json", tmp_path)
    assert r.of(6)[0] == "G6 WARN: another process outside this container uses the GPU: NVML lists no pid for it"
    assert "0% busy, 72.4 W of 700 W at rest; 22.5 GB held by no listed process at rest" in r.detail(r.of(6)[0])
    assert "63.0 GB left" in r.detail(r.of(6)[0])
    assert r.of(4) == ["G4 PASS: 1980 MHz under load (floor 990), 772 TFLOP/s, no throttling; not checked: last soak"]
    assert "beside" not in r.of(7)[0] and "shared" not in r.of(7)[0]
    assert "22.5 GB held by no listed process while it ran" in r.detail(r.of(4)[0])
    planned = replay(WALL / "h100-idle-holder-22gb.json", tmp_path, "--spark-model-gb", "70")
    assert planned.of(6) == ["G6 FAIL: 7.0 GB short of the 70.0 GB load peak: a process outside this container",
                             f"    fix: {OUTSIDE_FIX} before training"]


def test_a_memory_bound_job_of_4_8_gb_on_an_80_gb_gpu_is_a_warn_naming_what_it_leaves(tmp_path):
    r = replay(WALL / "h100-memory-bound-4.8gb.json", tmp_path)
    assert r.of(6) == [
        "G6 WARN: pid 51234 python3 (holds 4.8 GB, no memory cap, leaves 80.7 GB)",
        "    fix: if the planned run needs more than the 80.7 GB left on the GPU (or all of its compute for a timed "
        "run), let the other job finish, or stop it (kill 51234); --spark-model-gb N checks a plan against what is "
        "left"]
    fits = replay(WALL / "h100-memory-bound-4.8gb.json", tmp_path, "--spark-model-gb", "40")
    assert fits.of(6)[0] == "G6 WARN: pid 51234 python3 (holds 4.8 GB, no memory cap, leaves 80.7 GB)"
    assert fits.of(6)[1] == "    fix: for a run that needs all of the GPU's compute, let the other job finish, or stop " \
                            "it (kill 51234)"
    assert "the planned 40.0 GB load peak fits" in fits.detail(fits.of(6)[0])
    short = replay(WALL / "h100-memory-bound-4.8gb.json", tmp_path, "--spark-model-gb", "81")
    assert short.of(6)[0] == "G6 FAIL: 0.28 GB short of the 81.0 GB load peak: pid 51234 python3"


@pytest.mark.parametrize("name", sorted(p.name for p in WALL.glob("*.json")))
def test_each_wall_reading_round_trips_through_json(name):
    for key, tp in (("gpu.processes", GpuProcesses), ("thermal.spot_check", SpotCheck)):
        if key in readings(name):
            reading = typed(name, key, tp)
            assert from_jsonable(tp, json.loads(json.dumps(to_jsonable(reading)))) == reading


# -- a job NVML does not list: the device's own figures --------------------------------------------------
H100_TOTAL = 85_520_809_984
RESERVE = 567_279_616


def use(util=0.0, power=70.0, used=0, listed=(), reserved=RESERVE, own=0) -> DeviceUse:
    """An H100's use at rest; ``listed``: (memory, visible here) per process NVML lists."""
    return DeviceUse(utilization_pct=util, power_w=power, power_limit_w=700.0, sm_clock_mhz=345.0,
                     memory_total_bytes=H100_TOTAL, memory_used_bytes=used, memory_reserved_bytes=reserved,
                     listed=len(listed), listed_bytes=sum(m for m, _ in listed),
                     not_visible=sum(1 for _, seen in listed if not seen), own_listed=own)


def at_rest(u: DeviceUse, processes=(), own_on_gpu=0) -> GpuProcesses:
    return GpuProcesses(devices=[DeviceProcessLists(index=0, use=u)], processes=list(processes), scanned=4,
                        own_on_gpu=own_on_gpu)


H100_INVENTORY = GpuInventory(devices=[GpuDevice(index=0, name="NVIDIA H100 80GB HBM3", memory_total_bytes=H100_TOTAL)])


def h100(u: DeviceUse, processes=(), **kw):
    return g06.judge_contention(at_rest(u, processes, **kw), H100, Plan(), None, H100_INVENTORY)


def test_a_gpu_busy_at_rest_with_nothing_listed_is_a_process_outside_even_without_memory_figures():
    gb10 = DeviceUse(utilization_pct=96.0, power_w=98.0, unavailable={"memory_used_bytes": "Not Supported"})
    v = g06.judge_contention(at_rest(gb10), GB10, Plan())
    assert v.line == "G6 WARN: another process outside this container uses the GPU: NVML lists no pid for it"
    assert v.detail.startswith("a process outside this container (96% busy, 98.0 W at rest)")


def test_without_utilization_power_at_half_its_limit_at_rest_is_busy():
    assert rest_outside(replace(use(power=380.0), utilization_pct=None), 0) is not None
    assert rest_outside(replace(use(power=300.0), utilization_pct=None), 0) is None


def test_a_quiet_gpu_with_its_reserve_only_is_nobody():
    assert h100(use(util=0.0, used=3 << 20)).line == \
        "G6 PASS: no other GPU workload among NVML's processes and 4 command lines"
    assert rest_outside(use(util=4.0, used=200 << 20), 0) is None  # under 10 %, under 256 MiB


def test_a_visible_process_explains_the_gpus_work_and_is_named_by_its_pid():
    trainer = GpuProcess(pid=7001, cmdline=["python3", "train.py"], gpu_memory_bytes=9 << 30, gpu_devices=[0],
                         nvml_lists=["compute"])
    v = h100(use(util=99.0, power=650.0, used=9 << 30, listed=[(9 << 30, True)]), [trainer])
    assert v.line.startswith("G6 WARN: pid 7001 python3 (holds 9.7 GB, no memory cap") and "outside" not in v.detail


def test_once_this_run_is_on_the_gpu_its_work_is_not_someone_elses():
    busy = use(util=100.0, power=690.0, used=1 << 30, listed=[(1 << 30, True)], own=1)
    assert rest_outside(busy, own_on_gpu=1) is None  # this run's own worker, listed by its pid
    hidden = use(util=100.0, used=1 << 30, listed=[(1 << 30, False)])
    assert rest_outside(hidden, own_on_gpu=1) is None  # a host pid that may be its own worker
    two = use(util=100.0, used=2 << 30, listed=[(1 << 30, False), (1 << 30, False)])
    assert rest_outside(two, own_on_gpu=1).hidden == 1  # one more than this run has on the GPU
    unlisted = use(used=3 << 30)
    assert rest_outside(unlisted, own_on_gpu=1) is None  # may be this run's worker, which NVML does not list
    assert rest_outside(unlisted, own_on_gpu=0).unlisted_bytes == 3 << 30


def test_where_the_driver_keeps_its_reserve_inside_used_2_gib_is_the_floor():
    assert rest_outside(use(used=1_700_000_000, reserved=None), 0) is None
    assert rest_outside(use(used=3_000_000_000, reserved=None), 0) is not None


# -- a job listed under a pid this namespace cannot map ---------------------------------------------------
def host_pid(pid=2093311, held=1 << 30) -> GpuProcess:
    return GpuProcess(pid=pid, gpu_memory_bytes=held, gpu_devices=[0], nvml_lists=["compute"], visible=False,
                      problem="pid not visible here (exited, or in another container's pid namespace)")


def test_two_host_pids_are_one_workload_outside_this_container():
    procs = [host_pid(2093311, 20 << 30), host_pid(2093312, 2 << 30)]
    v = h100(use(util=0.0, used=22 << 30, listed=[(20 << 30, False), (2 << 30, False)]), procs)
    assert v.line == "G6 WARN: another process outside this container uses the GPU: 2 pids NVML lists are not visible here"
    assert v.detail.startswith("pids 2093311, 2093312 outside this container (0% busy, 70.0 W of 700 W at rest; "
                               "holds 23.6 GB)")
    assert v.fix == f"{OUTSIDE_FIX} before training"


def test_a_host_pid_holding_most_of_the_gpu_fails_and_on_a_spark_more_than_4_gb_fails():
    v = h100(use(used=50 << 30, listed=[(50 << 30, False)]), [host_pid(held=50 << 30)])
    assert v.line == "G6 FAIL: 1 workload in the way: pid 2093311 outside this container (holds 53.7 GB)"
    assert v.fix == f"{OUTSIDE_FIX} before training"
    spark = GpuProcesses(devices=[DeviceProcessLists(index=0, use=DeviceUse(utilization_pct=0.0, listed=1,
                                                                             not_visible=1))],
                         processes=[host_pid(held=20 << 30)], own_on_gpu=0)
    assert g06.judge_contention(spark, GB10, Plan()).line == \
        "G6 FAIL: 1 workload in the way: pid 2093311 outside this container (holds 21.5 GB, no memory cap)"


def test_a_host_pid_beside_a_visible_server_is_named_with_it():
    vllm = GpuProcess(pid=6008, cmdline=["vllm", "serve", "m", "--gpu-memory-utilization", "0.3"],
                      gpu_memory_bytes=24 << 30, gpu_devices=[0], nvml_lists=["compute"])
    v = g06.judge_contention(at_rest(use(used=30 << 30, listed=[(24 << 30, True), (6 << 30, False)]),
                                     [vllm, host_pid(held=6 << 30)]), H200, Plan())
    assert v.status is Status.WARN and "pid 2093311 outside this container" in v.line
    assert "pid 6008 vLLM" in v.detail and OUTSIDE_FIX in v.fix


def test_host_pids_read_after_this_run_used_the_gpu_may_be_its_own():
    v = h100(use(util=100.0, used=1 << 30, listed=[(1 << 30, False)]), [host_pid()], own_on_gpu=1)
    assert v.status is Status.PASS and "outside" not in v.line


# -- G4, G5, G7 on a window that saw through the wall, and the at-rest reading where it could not --------
def window(unlisted=None, others=()) -> MeasureWindow:
    return MeasureWindow(what="test", t_start_epoch=1.0, t_end_epoch=2.0, samples=20, others=list(others),
                         unlisted_bytes=unlisted, reserve_split=True if unlisted is not None else None)


BUSY_AT_REST = at_rest(use(util=100.0, power=700.8, used=1 << 30))


def test_g5_far_below_twice_with_memory_figures_unreadable_never_blames_the_hardware_when_busy_at_rest():
    import bench_fakes as fk

    blind = window(None)  # a GB10: no device memory figure while it ran
    slow = fk.gb10_bandwidth(scale=0.5)
    reading = BandwidthReading(attempted=True, result=slow, window=blind, again=slow, again_window=blind)
    gb10_rest = at_rest(DeviceUse(utilization_pct=97.0, power_w=96.0))
    v = g05.judge_bandwidth(reading, fk.gb10_inventory(), GB10, gb10_rest)
    assert v.status is Status.WARN and v.line.endswith("a process outside this container busy at rest (see G6)")
    assert v.fix.startswith(OUTSIDE_FIX) and blames_nothing(v.line, v.fix)
    assert g05.judge_bandwidth(reading, fk.gb10_inventory(), GB10, GpuProcesses(scanned=3, own_on_gpu=0)).status \
        is Status.FAIL  # the same figures with a GPU quiet at rest: the hardware's


def test_g4_throttling_alone_is_still_the_coolings():
    spot = typed("h100-gemm-behind-the-wall.json", "thermal.spot_check", SpotCheck)
    spot.window = window(0)
    v = g04.judge_spot_check(spot, H100, at_rest(use(util=0.0)))
    assert v.line == "G4 WARN: throttling under load: thermal (NVML policy) +11 ms, SW thermal slowdown +737 ms"
    assert v.fix == g04.FIX_COOLING


def test_g4_at_rest_names_who_keeps_the_gpu_busy_and_throttling_then_is_not_the_coolings():
    snap = typed("h100-gemm-behind-the-wall.json", "thermal.snapshot", ThermalSnapshot)
    snap.sample.reasons_mask = 0x20  # SW thermal slowdown active
    v = g04.judge_snapshot(snap, H100, processes=BUSY_AT_REST)
    assert v.line == "G4 WARN: throttling at rest, the GPU in use by a process outside this container"
    assert v.fix == f"{OUTSIDE_FIX}, then re-run spark-gotchas -m fast -k g04"
    assert g04.judge_snapshot(snap, H100).fix == g04.FIX_COOLING  # no process list: as before
    trainer = GpuProcess(pid=7001, cmdline=["python3", "train.py"], gpu_memory_bytes=9 << 30, gpu_devices=[0],
                         nvml_lists=["compute"])
    visible = at_rest(use(util=100.0, used=9 << 30, listed=[(9 << 30, True)]), [trainer])
    named = g04.judge_snapshot(snap, H100, processes=visible)
    assert named.fix == "stop or pause pid 7001 python3 (G6 says how), then re-run spark-gotchas -m fast -k g04"


def test_g7_names_the_process_outside_unless_it_was_idle_at_rest():
    gemm = typed("h100-gemm-behind-the-wall.json", "bench.gemm", GemmReading)
    assert g07.judge_gemm_rates(gemm, H100, Plan(), BUSY_AT_REST).line == \
        "G7 INFO: BF16 264, FP8 497 TFLOP/s, shared with a process outside this container"
    idle = at_rest(use(util=0.0, used=22 << 30))
    quiet = g07.judge_gemm_rates(gemm, H100, Plan(), idle)
    assert quiet.line == "G7 INFO: NVIDIA H100 80GB HBM3 (cc 9.0) runs BF16 264, FP8 497 TFLOP/s; NVFP4 not supported"
    assert "0% busy, 70.0 W of 700 W at rest; 0.9 GB held by no listed process while it ran" in quiet.detail


def test_a_pid_hidden_at_rest_is_never_discounted_as_this_runs_own_worker():
    job = WindowProcess(pid=2093311, visible=False, phases=["during"], sm_util_max_pct=97)
    ours = WindowProcess(pid=2093502, visible=False, phases=["during"], sm_util_max_pct=99)
    w = replace(window(0, [job, ours]), own_hidden=1)  # in pid order, as the sampler keeps them
    assert sharing(w).pids == (2093502,)  # without the at-rest list: the first hidden one is taken as this run's
    rest = at_rest(use(used=1 << 30, listed=[(1 << 30, False)]), [host_pid()])
    assert sharing(w, rest).pids == (2093311,)


# -- the reader: NVML's lists and the device's own figures, read together --------------------------------
def fake_query(procs, device, v2=True):
    def query(func, *args):
        if func == "nvmlDeviceGetUUID":
            return "GPU-1"
        if func == "nvmlDeviceGetComputeRunningProcesses":
            return [SimpleNamespace(pid=p, usedGpuMemory=m) for p, m in procs]
        if func == "nvmlDeviceGetGraphicsRunningProcesses":
            return []
        if func == "nvmlDeviceGetMemoryInfo":
            if len(args) > 1 and not v2:
                return nvml.NotAvailable("function not in this driver's NVML")
            return SimpleNamespace(total=H100_TOTAL, used=device["used"], free=H100_TOTAL - device["used"],
                                   **({"reserved": RESERVE} if len(args) > 1 else {}))
        return {"nvmlDeviceGetUtilizationRates": SimpleNamespace(gpu=100, memory=40),
                "nvmlDeviceGetPowerUsage": 700_800, "nvmlDeviceGetEnforcedPowerLimit": 700_000,
                "nvmlDeviceGetClockInfo": 1395}[func]
    return query


class OnlyMe:
    """psutil in a pid namespace: this run's pytest (pid 1) and its worker (pid 7), nothing else."""

    class Error(Exception):
        pass

    class NoSuchProcess(Error):
        pass

    AccessDenied = ZombieProcess = NoSuchProcess
    ROWS = {1: ("pytest", 0, ["python3", "-m", "pytest"]), 7: ("python3", 1, ["python3", "-m", "spark_gotchas.runtime.worker_main"])}

    def Process(self, pid=None):  # noqa: N802 (psutil's name)
        pid = 1 if pid is None else pid
        if pid not in self.ROWS:
            raise self.NoSuchProcess(pid)
        name, ppid, argv = self.ROWS[pid]
        me = self
        return SimpleNamespace(pid=pid, name=lambda: name, ppid=lambda: ppid, cmdline=lambda: argv,
                               username=lambda: "root", memory_info=lambda: SimpleNamespace(rss=1 << 20),
                               children=lambda recursive=False: [me.Process(7)] if pid == 1 else [],
                               parents=lambda: [])

    def process_iter(self, attrs):
        return [SimpleNamespace(pid=p, info={"pid": p, "name": r[0], "cmdline": r[2]}) for p, r in self.ROWS.items()]


def test_the_reader_counts_what_nvml_lists_against_the_devices_figures():
    reading = collect(OnlyMe(), fake_query([(7, 1 << 30), (2093311, 1 << 30)], {"used": 3 << 30}),
                      lambda: ["h0"], init=lambda: None, self_pid=1, own_on_gpu=1)
    u = reading.devices[0].use
    assert (u.listed, u.own_listed, u.not_visible, u.listed_bytes) == (2, 1, 1, 2 << 30)
    assert (u.utilization_pct, u.power_w, u.power_limit_w, u.sm_clock_mhz) == (100.0, 700.8, 700.0, 1395.0)
    assert u.memory_reserved_bytes == RESERVE and u.unlisted_bytes == 1 << 30
    assert [p.visible for p in reading.processes] == [False] and reading.own_on_gpu == 1 and reading.scanned == 0
    assert reading.outside().hidden == 1 and reading.outside().unlisted_bytes == 1 << 30


def test_a_driver_without_the_v2_memory_call_gives_used_with_its_reserve_inside():
    u = device_use("h0", fake_query([], {"used": 600 << 20}, v2=False))
    assert u.memory_used_bytes == 600 << 20 and u.memory_reserved_bytes is None
    assert "memory_reserved_bytes" in u.unavailable


@pytest.mark.parametrize("mountinfo, hides", [
    ("22 27 0:21 / /proc rw,relatime - proc proc rw\n", False),
    ("22 27 0:21 / /proc rw,nosuid - proc proc rw,hidepid=2\n", True),
    ("22 27 0:21 / /proc rw,nosuid - proc proc rw,hidepid=invisible,subset=pid\n", True),
    ("22 27 0:21 / /proc rw - proc proc rw,hidepid=0\n", False),
    ("22 27 0:21 / /proc rw - proc proc rw,hidepid=2\n40 22 0:50 / /proc rw - proc proc rw\n", False),  # mounted over
    ("31 27 0:33 / /mnt/proc rw - proc proc rw,hidepid=2\n", False),  # not this /proc
])
def test_a_proc_that_hides_other_users_processes_is_told_from_its_mount_options(mountinfo, hides):
    from spark_gotchas.machine.readers.gpu import hidepid

    assert hidepid(mountinfo) is hides


@pytest.mark.parametrize("n", [1, 2, 9, 10, 120])
def test_the_line_for_any_number_of_hidden_pids_fits_100_columns(n):
    procs = [host_pid(3_000_000 + i, 1 << 28) for i in range(n)]
    v = h100(use(used=n << 28, listed=[(1 << 28, False)] * n), procs)
    assert v.status is Status.WARN and len(v.line) <= 100 and "outside this container" in v.line, v.line


def test_a_process_list_nvml_cannot_give_leaves_the_memory_unexplained_not_someone_elses():
    def query(func, *args):
        if func == "nvmlDeviceGetGraphicsRunningProcesses":
            return nvml.NotAvailable("Not Supported")
        return fake_query([], {"used": 3 << 30})(func, *args)

    reading = collect(OnlyMe(), query, lambda: ["h0"], init=lambda: None, self_pid=1, own_on_gpu=0)
    assert reading.devices[0].errors == {"graphics": "Not Supported"}
    assert reading.devices[0].use.listed_bytes is None and reading.outside() is not None  # 100 % busy: still someone
    quiet = replace(reading.devices[0].use, utilization_pct=0.0)
    assert rest_outside(quiet, 0) is None
