"""The watch's GPU probe (NVML's lists and the device's figures, read each sample) against a stand-in NVML
whose lists and memory move together as a real GPU's do, its readings judged by the watch's rules: what a
user reads when another process joins the GPU and leaves it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from test_watch_judge import ctx, sample

from spark_gotchas.knowledge.readings.gpu import DeviceUse
from spark_gotchas.knowledge.watch_judge import Tracker
from spark_gotchas.machine import watch_gpu

GB = 10**9
JOB_PID = 4242  # the watched job's pid: the probe leaves it out of the others
JOB_BYTES, GEMM_BYTES = int(2.3 * GB), int(1.2 * GB)
PROGRAM = Path(sys.executable).name  # how the watch names the other process: its program's file name


@pytest.fixture
def gemm():
    """A real process for NVML to list beside the job, so that psutil describes it as the probe would."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    yield proc
    proc.kill()
    proc.wait()


def watched(monkeypatch, listed, used, seconds: int, rate=lambda t: 315.0) -> list[str]:
    """The probe, made by its own constructor, over a stand-in NVML: at second ``t`` NVML lists
    ``listed(t)`` (pid, bytes) and the device has ``used(t)`` bytes in use; one sample a second for
    ``seconds``, judged by the watch's rules. Returns the lines the watch says."""
    clock = {"t": 0}

    def query(func, handle, *args):
        if func == "nvmlDeviceGetComputeRunningProcesses":
            return [SimpleNamespace(pid=pid, usedGpuMemory=held) for pid, held in listed(clock["t"])]
        return []

    def device_use(handle):
        return DeviceUse(utilization_pct=100.0, memory_total_bytes=80 * GB, memory_used_bytes=used(clock["t"]),
                         memory_reserved_bytes=500 * 2**20)

    # the constructor opens no device (NVML "unavailable"); the stand-in handle is given afterwards
    monkeypatch.setattr(watch_gpu.nvml, "init", lambda: watch_gpu.nvml.NotAvailable("stand-in NVML"))
    monkeypatch.setattr(watch_gpu.nvml, "query", query)
    monkeypatch.setattr(watch_gpu, "device_use", device_use)
    monkeypatch.setattr(watch_gpu.time, "monotonic", lambda: float(clock["t"]))
    probe = watch_gpu.GpuProbe()
    probe.handle, probe.index = object(), 0
    tracker = Tracker(ctx())
    said: list[str] = []
    for t in range(seconds):
        clock["t"] = t
        others, _ = probe.lists({JOB_PID})
        said += tracker.add(sample(float(t), rate=rate(t)), others)
    return said


def test_a_process_that_left_the_gpu_is_not_taken_for_one_outside_this_container(monkeypatch, gemm):
    """It left between two reads of the device's figures (read every 10 s): the lists without it beside
    figures with its memory showed 1.2 GB held by no listed process, and the watch said "another process
    outside this container uses the GPU" for a process that had simply ended (seen on an H100)."""
    on = range(30, 93)

    def listed(t):
        return [(JOB_PID, JOB_BYTES)] + ([(gemm.pid, GEMM_BYTES)] if t in on else [])

    def used(t):  # what the lists hold, and a little they do not account for, as on a real GPU
        return sum(held for _, held in listed(t)) + 100 * 2**20

    said = watched(monkeypatch, listed, used, 140, rate=lambda t: 150.0 if t in on else 315.0)
    assert said == [
        f"G6 INFO 0:00:30 pid {gemm.pid} {PROGRAM} joined the GPU (no memory cap, holds 1.2 GB)",
        f"G6 WARN 0:00:30 rate 315 -> 150 it/s (-52%) since pid {gemm.pid} {PROGRAM} joined the GPU",
        f"G6 ended 0:01:34 after 0:01:03: pid {gemm.pid} {PROGRAM} left the GPU",
        # the rate's median over its window comes back later than the process left; the line says the
        # rate as it is when the state ends, not as it was when it began
        "G6 ended 0:02:17 after 0:01:18: rate back to 315 (best 315)",
    ]


def test_memory_held_by_no_listed_process_is_still_said(monkeypatch):
    """Memory that stays in use with no pid listed for it (a process in another pid namespace) is still
    said: reading the figures again when the lists change does not hide it."""
    said = watched(monkeypatch, lambda t: [(JOB_PID, JOB_BYTES)], lambda t: JOB_BYTES + GEMM_BYTES, 20)
    assert said == ["G6 WARN 0:00:00 another process outside this container uses the GPU: NVML lists no pid for it"]
