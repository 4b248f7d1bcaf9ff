"""G4 test doubles: a fake NVML module, a fake GEMM load for the worker, a soak child to kill.

The fake NVML stands in for ``pynvml`` behind :func:`spark_gotchas.machine.nvml.query`, so the real
sampling code runs. Values may be numbers or callables (read at each call), and any function
can be made to raise ``NotSupported`` like GB10's power-limit and memory calls do.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

from spark_gotchas.machine import nvml
from spark_gotchas.runtime import worker_main


class NVMLError(Exception):
    pass


class NVMLError_NotSupported(NVMLError):
    def __init__(self) -> None:
        super().__init__("Not Supported")


def _value(v: Any) -> Any:
    return v() if callable(v) else v


class FakeGpu:
    """One fake device. Power in mW and violation times in ns, as NVML gives them."""

    def __init__(self, name: str = "NVIDIA GB10", temperature_c: Any = 60, power_mw: Any = 98_000,
                 sm_clock_mhz: Any = 2450, mem_clock_mhz: Any = None, max_sm_clock_mhz: Any = 3003,
                 utilization_pct: Any = 97, reasons: Any = 0, power_cap_ns: Any = 0, thermal_ns: Any = 0,
                 power_limit_mw: Any = None, slowdown_c: Any = -2, shutdown_c: Any = -5,
                 unsupported: tuple[str, ...] = ()):
        self.name = name
        self.values = dict(temperature_c=temperature_c, power_mw=power_mw, sm_clock_mhz=sm_clock_mhz,
                           mem_clock_mhz=mem_clock_mhz, max_sm_clock_mhz=max_sm_clock_mhz,
                           utilization_pct=utilization_pct, reasons=reasons, power_cap_ns=power_cap_ns,
                           thermal_ns=thermal_ns, power_limit_mw=power_limit_mw, slowdown_c=slowdown_c,
                           shutdown_c=shutdown_c)
        self.unsupported = set(unsupported)
        self.calls = 0

    def get(self, key: str) -> Any:
        value = _value(self.values[key])
        if value is None:
            raise NVMLError_NotSupported()
        return value


class FakeNvml:
    """The subset of ``pynvml`` the suite's thermal readers call."""

    NVML_TEMPERATURE_GPU = 0
    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2
    NVML_PERF_POLICY_POWER = 0
    NVML_PERF_POLICY_THERMAL = 1
    NVML_TEMPERATURE_THRESHOLD_SHUTDOWN = 0
    NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1

    def __init__(self, *gpus: FakeGpu):
        self.gpus = list(gpus) or [FakeGpu()]

    def _check(self, func: str, handle: FakeGpu) -> None:
        handle.calls += 1
        if func in handle.unsupported:
            raise NVMLError_NotSupported()

    def nvmlInit(self) -> None:
        pass

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeGpu:
        return self.gpus[index]

    def nvmlDeviceGetIndex(self, handle: FakeGpu) -> int:
        return self.gpus.index(handle)

    def nvmlDeviceGetName(self, handle: FakeGpu) -> str:
        return handle.name

    def nvmlDeviceGetTemperature(self, handle, kind):
        self._check("nvmlDeviceGetTemperature", handle)
        return handle.get("temperature_c")

    def nvmlDeviceGetPowerUsage(self, handle):
        self._check("nvmlDeviceGetPowerUsage", handle)
        return handle.get("power_mw")

    def nvmlDeviceGetEnforcedPowerLimit(self, handle):
        self._check("nvmlDeviceGetEnforcedPowerLimit", handle)
        return handle.get("power_limit_mw")

    def nvmlDeviceGetClockInfo(self, handle, kind):
        self._check("nvmlDeviceGetClockInfo", handle)
        return handle.get("sm_clock_mhz" if kind == self.NVML_CLOCK_SM else "mem_clock_mhz")

    def nvmlDeviceGetMaxClockInfo(self, handle, kind):
        self._check("nvmlDeviceGetMaxClockInfo", handle)
        if kind != self.NVML_CLOCK_SM:
            raise NVMLError_NotSupported()
        return handle.get("max_sm_clock_mhz")

    def nvmlDeviceGetUtilizationRates(self, handle):
        self._check("nvmlDeviceGetUtilizationRates", handle)
        return SimpleNamespace(gpu=handle.get("utilization_pct"), memory=0)

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        self._check("nvmlDeviceGetCurrentClocksEventReasons", handle)
        return handle.get("reasons")

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle):
        self._check("nvmlDeviceGetCurrentClocksThrottleReasons", handle)
        return handle.get("reasons")

    def nvmlDeviceGetViolationStatus(self, handle, policy):
        self._check("nvmlDeviceGetViolationStatus", handle)
        key = "power_cap_ns" if policy == self.NVML_PERF_POLICY_POWER else "thermal_ns"
        return SimpleNamespace(referenceTime=int(time.time() * 1e6), violationTime=handle.get(key))

    def nvmlDeviceGetTemperatureThreshold(self, handle, kind):
        self._check("nvmlDeviceGetTemperatureThreshold", handle)
        return handle.get("slowdown_c" if kind == self.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN else "shutdown_c")


def install(fake: Any) -> dict:
    """Make :mod:`spark_gotchas.machine.nvml` use ``fake``; returns the previous state to restore."""
    previous = dict(nvml._STATE)
    nvml._STATE.update({"tried": True, "error": None, "module": fake})
    return previous


def ramp(start: float, per_call: float) -> Callable[[], float]:
    """A value that grows by ``per_call`` each time it is read (a cumulative counter)."""
    state = {"v": start}

    def read() -> float:
        state["v"] += per_call
        return state["v"]

    return read


# -- worker tasks (run in the worker child; PYTHONPATH holds this folder) ------------------------
def fake_load(seconds: float, window_s: float, tflops: list | None = None, crash_after: int | None = None,
              device: str = "cuda", dtype: str = "bf16", backend: str = "torch", **_: Any) -> dict:
    """Windows of fake throughput (``tflops[i]``, else 95.0) until ``seconds`` or should_stop()."""
    if backend == "cublas" and os.environ.get("FAKE_NO_CUBLAS"):
        raise RuntimeError("no usable cuBLAS: none found")  # what spark_gotchas.microbench._cublas says where it cannot run
    start = time.time()
    windows = []
    while time.time() - start < seconds and not worker_main.should_stop():
        w_start = time.time()
        while time.time() - w_start < window_s and not worker_main.should_stop():
            time.sleep(0.01)
        i = len(windows)
        if crash_after is not None and i >= crash_after:
            os.kill(os.getpid(), 11)
            time.sleep(5)
        value = (tflops[i] if tflops and i < len(tflops) else 95.0)
        window = {"window": i, "t_end_epoch": time.time(), "seconds": time.time() - w_start, "gemms": 10,
                  "tflops": value, "busy_fraction": 0.99, "rss_bytes": 1_000_000, "device": "Fake GPU",
                  "size": 8192, "dtype": dtype}
        windows.append(window)
        worker_main.progress(window)
    return {"device": "Fake GPU", "backend": backend, "size": 8192, "dtype": dtype, "t_start_epoch": start,
            "t_end_epoch": time.time(),
            "seconds": time.time() - start, "tflops": 95.0, "busy_fraction": 0.99,
            "stopped_early": worker_main.should_stop(), "windows": windows}


def crashing_load(**_: Any) -> dict:
    """A load that dies the way a GPU fault kills a process."""
    os.kill(os.getpid(), 11)
    time.sleep(5)
    return {}


# -- a soak recorder in a child process, for the kill test -----------------------------------
def recorder_child(soak_dir: str) -> None:
    """Sample a fake GPU at 50 Hz into a CSV + heartbeat, closing a window every 0.1 s, forever."""
    from spark_gotchas.machine.readers.thermal.reboot import heartbeat_path, new_heartbeat
    from spark_gotchas.machine.sampler import Sampler
    from spark_gotchas.runtime.soak.engine import SampleSource
    from spark_gotchas.runtime.soak.record import Recorder

    install(FakeNvml(FakeGpu(temperature_c=ramp(50, 0.01), power_cap_ns=ramp(0, 1e6))))
    t0 = time.time()
    directory = Path(soak_dir)
    csv_path = directory / "g4-soak-kill.csv"
    beat = new_heartbeat(3600, str(csv_path), t0)
    recorder = Recorder(csv_path, heartbeat_path(str(directory)), beat, t0,
                        {"planned_s": 3600, "window_s": 0.1, "sample_interval_s": 0.02, "device": "NVIDIA GB10"})
    source = SampleSource(nvml.query("nvmlDeviceGetHandleByIndex", 0), 0, t0, smi=None)
    Sampler(source, recorder.sample, 0.02).start()
    print("ready", flush=True)
    last = time.time()
    while True:
        time.sleep(0.1)
        now = time.time()
        recorder.window({"t_end_epoch": now, "seconds": now - last, "tflops": 95.0, "busy_fraction": 0.99,
                         "rss_bytes": 1_000_000})
        last = now



# -- synthetic soak series ----------------------------------------------------------------------
def series(n: int = 36, window_s: float = 5.0, tflops: Callable[[int], float] = lambda i: 95.0,
           clock: Callable[[int], float] = lambda i: 2450.0, power: Callable[[int], float] = lambda i: 98.0,
           temp: Callable[[int], float] = lambda i: min(70.0, 55.0 + i), busy: float = 0.99,
           mask: Callable[[int], int] = lambda i: 0, deltas: Callable[[int], dict] = lambda i: {}):
    """``n`` windows of ``window_s`` seconds; each figure a function of the window index."""
    from spark_gotchas.knowledge.readings.thermal import SoakWindow

    return [SoakWindow(index=i, t_end_s=(i + 1) * window_s, seconds=window_s, tflops=tflops(i), busy_fraction=busy,
                       samples=int(window_s), temperature_max_c=temp(i) + 0.5, temperature_mean_c=temp(i),
                       power_mean_w=power(i), sm_clock_median_mhz=clock(i), sm_clock_min_mhz=clock(i) - 15,
                       sm_clock_max_mhz=clock(i) + 15, reasons_mask=mask(i), counter_deltas_us=deltas(i),
                       worker_rss_bytes=1 << 30, parent_rss_bytes=1 << 27)
            for i in range(n)]


def soak_reading(windows, window_s: float = 5.0, **kw):
    from spark_gotchas.knowledge.readings.thermal import SoakReading

    base = dict(attempted=True, planned_s=len(windows) * window_s, window_s=window_s, started_epoch=1_780_000_000.0,
                elapsed_s=len(windows) * window_s, end_reason="completed", device="NVIDIA GB10", size=8192,
                samples=len(windows) * int(window_s), windows=windows, csv_path="reports/g4-soak-test.csv",
                max_sm_clock_mhz=3003.0)
    base.update(kw)
    return SoakReading(**base)


if __name__ == "__main__":
    recorder_child(sys.argv[1])
