"""G4 readers with a fake NVML: units, Not Supported fields, nvidia-smi counters, the sampler, the spot check."""

import os
import time
from pathlib import Path

import pytest
from g04_fakes import FakeGpu, FakeNvml, install, ramp

from spark_gotchas.knowledge.judges import g04_thermal as g04
from spark_gotchas.knowledge.profiles import GB10, H200
from spark_gotchas.knowledge.readings.torch import TorchBuild
from spark_gotchas.machine import nvml
from spark_gotchas.machine.options import RunOptions
from spark_gotchas.machine.readers import ReadContext
from spark_gotchas.machine.readers.thermal import snapshot, spot_check
from spark_gotchas.machine.sampler import Sampler
from spark_gotchas.runtime.worker import Worker

HERE = Path(__file__).parent
FIXTURES = HERE / "fixtures" / "g04"


@pytest.fixture
def fake_nvml(monkeypatch):
    """Install a fake NVML (restored afterwards); nvidia-smi is absent unless a test says otherwise."""
    monkeypatch.setattr(nvml, "_STATE", dict(nvml._STATE))
    monkeypatch.setattr(snapshot, "smi_counters", lambda index: ({}, "nvidia-smi not found"))

    def use(*gpus):
        fake = FakeNvml(*gpus)
        install(fake)
        return fake

    return use


@pytest.fixture
def worker():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), str(HERE.parent), env.get("PYTHONPATH", "")])
    w = Worker(preload=(), env=env)
    yield w
    w.close()


class Provider:
    """Stands in for the provider: torch as the spot check needs it."""

    live = True

    def __init__(self, build):
        self.build = build

    def try_read(self, key):
        return self.build if key == "torch.build" else None


CUDA_TORCH = TorchBuild(installed=True, version="2.11.0+cu130", cuda="13.0", compiled_with_cuda=True,
                        cuda_available=True, device_count=1)


def test_a_sample_converts_units_and_reports_what_is_not_supported(fake_nvml):
    fake = fake_nvml(FakeGpu(power_mw=98_500, power_cap_ns=3_000_000_000, thermal_ns=2_000, mem_clock_mhz=None))
    missing = {}
    s = snapshot.take_sample(fake.gpus[0], time.time(), missing)
    assert (s.temperature_c, s.power_w, s.sm_clock_mhz, s.utilization_pct) == (60.0, 98.5, 2450.0, 97.0)
    assert s.sw_power_cap_us == 3_000_000.0 and s.thermal_us == 2.0  # ns -> µs
    assert s.mem_clock_mhz is None and missing == {"mem_clock_mhz": "Not Supported"}


def test_old_drivers_give_the_reasons_under_the_old_name(fake_nvml):
    fake = fake_nvml(FakeGpu(reasons=0x20, unsupported=("nvmlDeviceGetCurrentClocksEventReasons",)))
    assert snapshot.take_sample(fake.gpus[0], time.time()).reasons_mask == 0x20


def test_without_nvml_a_sample_is_empty_not_an_error(monkeypatch):
    monkeypatch.setattr(nvml, "_STATE", {"tried": True, "error": nvml.NotAvailable("NVML library not found"), "module": None})
    s = snapshot.take_sample(None, time.time())
    assert s.temperature_c is None and s.sm_clock_mhz is None
    snap = snapshot.read_snapshot(None)
    assert g04.judge_snapshot(snap, GB10).line == "G4 SKIP: NVML unavailable: NVML library not found"


def test_gb10_snapshot_power_limit_not_supported_is_a_reading_not_a_failure(fake_nvml):
    fake_nvml(FakeGpu(temperature_c=36, power_mw=3_000, sm_clock_mhz=208, power_limit_mw=None))
    snap = snapshot.read_snapshot(None)
    assert snap.power_limit_w is None and snap.unavailable["power_limit_w"] == "Not Supported"
    v = g04.judge_snapshot(snap, GB10)
    assert v.line == "G4 INFO: at rest: 36 °C, 3.0 W (no power limit reported), SM 208 MHz of 3003 max"
    assert v.detail == "since the driver loaded: SW power cap 0 s, thermal (NVML policy) 0 s"


def test_snapshot_counters_take_nvidia_smi_split_when_present(fake_nvml, monkeypatch):
    fake_nvml(FakeGpu(power_cap_ns=10_800_240_649_000, thermal_ns=None))
    text = (FIXTURES / "nvidia-smi-q-performance-gb10-ollama13552.txt").read_text()
    monkeypatch.setattr(snapshot, "smi_counters", lambda index: (snapshot.parse_smi_counters(text), None))
    snap = snapshot.read_snapshot(None)
    assert snap.counters.sources == {"sw_power_cap": "nvidia-smi", "sw_thermal": "nvidia-smi",
                                     "hw_thermal": "nvidia-smi", "hw_power_brake": "nvidia-smi",
                                     "sync_boost": "nvidia-smi"}
    assert snap.counters.unavailable == {"nvml.thermal": "Not Supported"}
    v = g04.judge_snapshot(snap, GB10)
    assert v.line.startswith("G4 INFO: at rest: ")
    assert v.detail == ("since the driver loaded: SW power cap 0 s, SW thermal slowdown 2.9 min, HW thermal slowdown "
                        "404 ms, HW power brake 0 s")


def test_nvidia_smi_counters_parse_from_real_gb10_output():
    ollama = snapshot.parse_smi_counters((FIXTURES / "nvidia-smi-q-performance-gb10-ollama13552.txt").read_text())
    assert ollama == {"sw_power_cap": 0.0, "sync_boost": 0.0, "sw_thermal": 173453251.0, "hw_thermal": 403805.0,
                      "hw_power_brake": 0.0}
    lordachoo = snapshot.parse_smi_counters((FIXTURES / "nvidia-smi-q-performance-gb10-lordachoo.txt").read_text())
    assert lordachoo["sw_power_cap"] == 50284264713.0 and len(lordachoo) == 5
    assert snapshot.parse_smi_counters("Clocks Throttle Reasons Counters\n    SW Power Capping : N/A\n") == {"sw_power_cap": None}
    assert snapshot.parse_smi_counters("no such section") == {}


def test_cuda_visible_devices_picks_the_nvml_device(fake_nvml, monkeypatch):
    fake_nvml(FakeGpu(name="NVIDIA H200"), FakeGpu(name="NVIDIA H200 #1"))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,0")
    handle, index, how = snapshot.cuda0_handle()
    assert index == 1 and handle.name == "NVIDIA H200 #1" and how == "CUDA_VISIBLE_DEVICES=1"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "7")
    handle, index, how = snapshot.cuda0_handle()
    assert handle is None and "CUDA_VISIBLE_DEVICES=7" in how


def test_the_sampler_keeps_its_schedule_counts_errors_and_stops():
    seen = []
    calls = {"n": 0}

    def take():
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("one bad tick")
        return calls["n"]

    deadline = time.monotonic() + 60  # a loaded CI box ticks late, never not at all
    with Sampler(take, seen.append, interval_s=0.02) as sampler:
        while sampler.ticks < 8 and time.monotonic() < deadline:
            time.sleep(0.02)
    assert sampler.errors == 1 and sampler.last_error == "RuntimeError: one bad tick"
    assert sampler.ticks >= 8 and 3 not in seen and len(seen) == sampler.ticks - 1
    assert not sampler.running
    with pytest.raises(ValueError):
        Sampler(take, seen.append, interval_s=0)


# -- the spot check, end to end: fake GPU in this process, fake load in a real worker ---------------
def spot(worker, build=CUDA_TORCH, light=None):
    ctx = ReadContext(options=RunOptions(), worker_factory=lambda: worker, provider=Provider(build),
                      load_worker_factory=(lambda: light) if light is not None else None)
    return spot_check.read_spot_check(ctx)


def light_worker(**env_extra):
    env = dict(os.environ, **env_extra)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), str(HERE.parent), env.get("PYTHONPATH", "")])
    return Worker(preload=(), env=env)


@pytest.fixture
def fake_load(monkeypatch):
    monkeypatch.setattr(spot_check, "LOAD_TASK", "g04_fakes:fake_load")
    monkeypatch.setattr(spot_check, "LOAD_SECONDS", 1.0)  # the real check loads 1.5 s
    monkeypatch.setattr(spot_check, "WINDOW_S", 0.25)


def test_spot_check_healthy_gb10_passes(fake_nvml, fake_load, worker):
    fake_nvml(FakeGpu(power_cap_ns=ramp(0, 5e7)))
    reading = spot(worker)
    assert reading.attempted and not reading.load_problem
    assert len(reading.under_load()) >= 5  # 10 Hz over 0.7 s of load after the ramp
    v = g04.judge_spot_check(reading, GB10)
    assert v.line == "G4 PASS: 2450 MHz under load (floor 1400), 95 TFLOP/s, no throttling"
    assert v.detail == ("1.0 s of BF16 GEMM (8192^3): SM clock 2450 MHz, 98 W, 60 °C, 95.0 TFLOP/s, "
                        "floor 1400 MHz; no thermal or power-brake event; SW power cap engaged (at its power limit)")


def test_spot_check_stuck_gb10_fails(fake_nvml, fake_load, worker):
    fake_nvml(FakeGpu(sm_clock_mhz=695, utilization_pct=96))  # hasso5703/dgx-spark-qwen38 #8: "695 MHz, 96 %"
    v = g04.judge_spot_check(spot(worker), GB10)
    assert v.line == "G4 FAIL: SM clock 695 MHz under load, below the 1400 MHz floor: GPU stuck in its low-power state"
    assert v.detail == "SM clock 695 MHz under 1.0 s of BF16 GEMM (8192^3), below the 1400 MHz floor (gb10 profile)"


def test_spot_check_thermal_counter_growing_while_the_mask_reads_zero_warns(fake_nvml, fake_load, worker):
    fake_nvml(FakeGpu(reasons=0, thermal_ns=ramp(0, 2e7)))
    v = g04.judge_spot_check(spot(worker), GB10)
    assert v.status.value == "WARN"
    assert v.line.startswith("G4 WARN: throttling under load: thermal (NVML policy) +")
    assert v.detail.startswith("1.0 s of BF16 GEMM (8192^3): SM clock ")
    assert v.fix.startswith("improve cooling")


def test_spot_check_on_a_cpu_build_is_not_attempted(fake_nvml, worker):
    fake_nvml(FakeGpu())
    cpu = TorchBuild(installed=True, version="2.13.0+cpu", compiled_with_cuda=False)
    assert g04.judge_spot_check(spot(worker, cpu), GB10).line == \
        "G4 SKIP: no load spot check: torch 2.13.0+cpu is a CPU build"


def test_spot_check_load_crash_is_a_fail_line(fake_nvml, monkeypatch, worker):
    fake_nvml(FakeGpu())
    monkeypatch.setattr(spot_check, "LOAD_TASK", "g04_fakes:crashing_load")
    v = g04.judge_spot_check(spot(worker), H200)
    assert v.line == "G4 FAIL: the BF16 GEMM load failed under test: child process killed by SIGSEGV"


def test_spot_check_runs_its_load_without_torch_first_and_pauses_the_gpu_worker(fake_nvml, fake_load, worker):
    fake_nvml(FakeGpu())
    light = light_worker()
    try:
        reading = spot(worker, light=light)
    finally:
        light.close()
    assert reading.attempted and reading.backend == "cublas" and reading.backend_note == ""
    assert [t["task"] for t in light.timeline.tasks] == ["g04_fakes:fake_load"]
    assert worker.timeline.tasks == []  # the GPU worker ran nothing: no torch needed
    assert g04.judge_spot_check(reading, GB10).status.value == "PASS"


def test_spot_check_falls_back_to_torch_where_cublas_cannot_run(fake_nvml, fake_load, worker):
    fake_nvml(FakeGpu())
    light = light_worker(FAKE_NO_CUBLAS="1")
    try:
        reading = spot(worker, light=light)
    finally:
        light.close()
    assert reading.backend == "torch" and not reading.load_problem
    assert reading.backend_note == "cuBLAS without torch: RuntimeError: no usable cuBLAS: none found"
    verdict = g04.judge_spot_check(reading, GB10)
    assert verdict.status.value == "PASS" and verdict.readings["load_backend"] == "torch"
    assert verdict.readings["load_backend_note"] == reading.backend_note


def test_spot_check_torch_free_load_crash_falls_back_but_a_torch_load_crash_fails(fake_nvml, monkeypatch, worker):
    fake_nvml(FakeGpu())
    monkeypatch.setattr(spot_check, "LOAD_TASK", "g04_fakes:crashing_load")
    light = light_worker()
    try:
        reading = spot(worker, light=light)
    finally:
        light.close()
    assert reading.backend_note == "cuBLAS without torch: child process killed by SIGSEGV"
    assert g04.judge_spot_check(reading, H200).line == \
        "G4 FAIL: the BF16 GEMM load failed under test: child process killed by SIGSEGV"


def test_a_paused_worker_starts_no_task_until_the_pause_ends(worker):
    import threading

    started = []
    with worker.paused():
        caller = threading.Thread(target=lambda: started.append(worker.call("g04_fakes:fake_load",
                                                                            {"seconds": 0.01, "window_s": 0.01})))
        caller.start()
        time.sleep(0.3)
        assert started == [] and worker.timeline.tasks == []
    caller.join(10)
    assert started and started[0].ok


def test_spot_check_with_neither_load_says_why_of_both(fake_nvml, fake_load, worker):
    fake_nvml(FakeGpu())
    cpu = TorchBuild(installed=True, version="2.13.0+cpu", compiled_with_cuda=False)
    light = light_worker(FAKE_NO_CUBLAS="1")
    try:
        verdict = g04.judge_spot_check(spot(worker, cpu, light=light), GB10)
    finally:
        light.close()
    assert verdict.line == ("G4 SKIP: no load spot check: torch 2.13.0+cpu is a CPU build; cuBLAS without torch: "
                            "RuntimeError: no usable cuBLAS: none found")
