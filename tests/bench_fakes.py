"""Recorded G5/G7 readings built from tests/fixtures/g05_g07_readings.json, and a fake GPU
worker that answers the suite's tasks with them (for live-then-replay runs without a GPU)."""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import Any

import pytest

from spark_gotchas.base.serial import to_jsonable
from spark_gotchas.knowledge.readings.gpu import GpuDevice, GpuInventory
from spark_gotchas.machine.options import RunOptions
from spark_gotchas.machine.provider import Provider
from spark_gotchas.microbench._timing import Timing
from spark_gotchas.microbench.bandwidth import ACCOUNTING, ARRAYS_COUNTED, BandwidthResult, MethodResult
from spark_gotchas.microbench.gemm import GemmResult, PrecisionResult
from spark_gotchas.runtime.worker import TaskResult

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "g05_g07_readings.json").read_text())
H200 = FIXTURE["h200"]
GB10 = FIXTURE["gb10"]
GIB = 1 << 30
H200_KEYS = {"copy": "copy", "read": "read_sum", "write": "write_fill", "triad": "triad"}


def method_results(figures: dict[str, tuple[float, float]], array_bytes: int = GIB,
                   implementation: str = "torch") -> list[MethodResult]:
    """MethodResults from (median, best) GB/s per method, with the timings they imply."""
    out = []
    for method, (median, best) in figures.items():
        moved = ARRAYS_COUNTED[method] * array_bytes
        timing = Timing(median_ms=moved / median / 1e6, min_ms=moved / best / 1e6, max_ms=moved / median / 1e6 * 1.02,
                        reps=15)
        out.append(MethodResult(method, implementation, ACCOUNTING[method], array_bytes, moved, gbps=median,
                                gbps_best=best, timing=timing, check="ok"))
    return out


def h200_figures(size: str = "1GiB") -> dict[str, tuple[float, float]]:
    ops = H200["bandwidth_torch_ops"][size]
    return {m: (ops[k]["GBps_median"], ops[k]["GBps_best"]) for m, k in H200_KEYS.items()}


def h200_bandwidth(size: str = "1GiB") -> BandwidthResult:
    array_bytes = {"0.25GiB": GIB // 4, "1GiB": GIB, "4GiB": 4 * GIB}[size]
    return BandwidthResult(device="NVIDIA H200", capability=(9, 0), sms=132, l2_bytes=H200["torch"]["L2"],
                           unified_memory=False, array_bytes=array_bytes, sizing=f"{size} per array",
                           mode="fast", methods=method_results(h200_figures(size), array_bytes),
                           backend="torch (recorded torch ops)", seconds=0.9)


def gb10_figures(scale: float = 1.0) -> dict[str, tuple[float, float]]:
    """Public GB10 figures: read 231-234 (median) / 252.7 (best kernel), copy ceiling ~210."""
    read, best_read, copy = GB10["read_gbps"]["value"], GB10["read_best_gbps"]["value"], GB10["copy_gbps"]["value"]
    figures = {"copy": (copy * 0.95, copy), "read": (read, best_read), "write": (copy, copy * 1.05),
               "triad": (copy * 0.95, copy)}
    return {m: (a * scale, b * scale) for m, (a, b) in figures.items()}


def gb10_bandwidth(scale: float = 1.0) -> BandwidthResult:
    return BandwidthResult(device="NVIDIA GB10", capability=(12, 1), sms=48, l2_bytes=24 << 20, unified_memory=True,
                           array_bytes=GIB, sizing="1.00 GiB per array (43x the 24 MiB L2)", mode="fast",
                           methods=method_results(gb10_figures(scale)), backend="triton 3.6.0", seconds=1.1)


def h200_inventory() -> GpuInventory:
    nvml = H200["nvml"]
    return GpuInventory(driver_version=nvml["nvmlSystemGetDriverVersion"],
                        cuda_driver_version=nvml["nvmlSystemGetCudaDriverVersion"],
                        devices=[GpuDevice(0, nvml["nvmlDeviceGetName"], capability=(9, 0),
                                           bus_width_bits=nvml["nvmlDeviceGetMemoryBusWidth"],
                                           max_memory_clock_mhz=nvml["nvmlDeviceGetMaxClockInfo"])])


def gb10_inventory() -> GpuInventory:
    """GB10's NVML does not expose the memory clock: no theoretical peak."""
    return GpuInventory(driver_version="580.95.05", cuda_driver_version=13000,
                        devices=[GpuDevice(0, "NVIDIA GB10", capability=(12, 1))])


def precision(name: str, tflops: float | None = None, error: str = "", rel_error: float = 0.004) -> PrecisionResult:
    if tflops is None:
        return PrecisionResult(precision=name, supported=False, api="torch._scaled_mm", error=error, tolerance=0.01)
    flops = 2 * 8192 ** 3
    ms = flops / (tflops * 1e12) * 1e3
    return PrecisionResult(precision=name, supported=True, api="torch", tflops=tflops, tflops_best=tflops * 1.01,
                           timing=Timing(median_ms=ms, min_ms=ms / 1.01, max_ms=ms * 1.02, reps=20),
                           rel_error=rel_error, tolerance=0.01, check="ok")


def h200_gemm() -> GemmResult:
    g = H200["gemm"]
    fp4_error = g["fp4"].removeprefix("ERR ")
    return GemmResult(device="NVIDIA H200", capability=(9, 0), torch=H200["torch"]["version"],
                      torch_cuda=H200["torch"]["cuda"], m=8192, n=8192, k=8192,
                      results=[precision("bf16", g["bf16_TFLOPs"]), precision("fp8", g["fp8_TFLOPs"]),
                               precision("nvfp4", error=fp4_error)], seconds=2.5)


def gb10_gemm(nvfp4_tflops: float | None, nvfp4_error: str = "") -> GemmResult:
    g = GB10["gemm_tflops_8192"]
    return GemmResult(device="NVIDIA GB10", capability=(12, 1), torch="2.10.0+cu130", torch_cuda="13.0",
                      m=8192, n=8192, k=8192,
                      results=[precision("bf16", g["fp16"]), precision("fp8", g["fp8_cublas"]),
                               precision("nvfp4", nvfp4_tflops, nvfp4_error)], seconds=3.0)


def torch_build_value(name: str = "NVIDIA H200", capability=(9, 0)) -> dict[str, Any]:
    return {"installed": True, "version": H200["torch"]["version"], "cuda": "13.0", "compiled_with_cuda": True,
            "arch_list": H200["torch"]["arch_list"], "cuda_available": True, "device_count": 1,
            "devices": [{"index": 0, "name": name, "capability": list(capability),
                         "total_memory_bytes": H200["torch"]["total_memory"], "multiprocessors": 132,
                         "l2_bytes": H200["torch"]["L2"]}]}


class FakeWorker:
    """Answers worker tasks from recorded values; counts the calls."""

    def __init__(self, answers: dict[str, Any], progress: dict[str, list] | None = None):
        self.answers = answers
        self.progress = progress or {}
        self.calls: list[str] = []
        self.args: dict[str, Any] = {}  # task -> the arguments of its last call
        self.submitted: list[tuple[str, bool]] = []  # task, start
        self.ended = False
        self.preload: tuple[str, ...] = ("torch",)
        self.head_starts: list[str] = []  # head-start parts asked of it (spark_gotchas.runtime.headstart)
        self.pid: int | None = None  # no child process: nothing of it can be listed by NVML

    def call(self, task: str, args: dict | None = None, timeout: float = 60.0, on_progress=None) -> TaskResult:
        self.calls.append(task)
        self.args[task] = args
        for item in self.progress.get(task, []):
            if on_progress is not None:
                on_progress(item)
        answer = self.answers.get(task)
        if isinstance(answer, TaskResult):
            return answer
        if answer is None:
            return TaskResult(ok=False, error=f"no recorded answer for {task}")
        return TaskResult(ok=True, value=to_jsonable(answer))

    def paused(self):
        """As Worker.paused: no task of this worker starts meanwhile (nothing runs here anyway)."""
        self.calls.append("paused")
        return contextlib.nullcontext()

    def submit(self, task: str, args: dict | None = None, start: bool = True) -> bool:
        self.submitted.append((task, start))
        self.calls.append(f"submit {task}")
        return True

    def end_input(self) -> None:
        self.ended = True

    def head_start(self, name: str) -> bool:
        self.head_starts.append(name)
        return True

    def start(self) -> None:
        pass

    def close(self) -> None:
        pass


class WallClock:
    """CUDA-event stand-in on the CPU: the probes' timing code runs unchanged on CPU tensors."""

    def event(self):
        class Event:
            def record(self):
                self.t = time.perf_counter()

            def elapsed_time(self, other):
                return (other.t - self.t) * 1e3

        return Event()

    def synchronize(self):
        pass


def provider_with_load(gpu: Any, load: Any, inventory: GpuInventory | None, parts: frozenset) -> Provider:
    """A run's provider whose GPU worker and load worker are fakes, with NVML's ``inventory`` (None:
    NVML could not list the GPUs) and the head start's torch-free ``parts`` on."""
    p = Provider(RunOptions(), worker_factory=lambda: gpu, load_worker_factory=lambda: load)
    p.ctx.head_start = parts
    p._cache["gpu.inventory"] = inventory
    return p


@pytest.fixture
def torch_in_the_fake_worker(monkeypatch):
    """The fake GPU worker answers as a worker with torch does, so torch counts as installed in the
    test too, whether or not this environment has one: a reader asks that before it asks the worker
    (``torch.build`` is ``installed=False`` without asking it where no torch is found)."""
    monkeypatch.setattr("spark_gotchas.machine.readers.torch.torch_installed", lambda: True)
