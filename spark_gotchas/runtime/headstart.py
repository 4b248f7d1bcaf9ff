"""The head start: work begun early so a preflight waits less for the GPU worker's ``import torch``.

A cold preflight spends most of its wall time waiting for that import (3-6 s). The run order
(checks of the machine at rest, then scans, then GPU checks) puts CPU-only work under the wait;
the head start puts GPU work under it too, and one part shortens what must wait for it. Its six
parts, each measured against the run without it on one H200 (docs/benchmarks.md, "The head start,
part by part"):

- ``g4_load``: G4's spot-check load runs through cuBLAS in a worker without torch (the run's
  ``load_worker``), during the import; the GPU worker starts no task meanwhile;
- ``cuda_context``: the GPU worker creates device 0's CUDA context in a thread during the import,
  once the checks of the machine at rest are done (a context changes what NVML reads at rest);
- ``g5_probe``: G5's bandwidth probe runs through the CUDA driver (PTX kernels, no torch, no
  Triton) in the load worker, during the import;
- ``g7_rates``: G7's BF16 and FP8 GEMM rates run through cuBLAS/cuBLASLt in the load worker,
  during the import, where the GPU has no FP4 tensor cores (below compute capability 10.0;
  elsewhere all three rates come from torch, so NVFP4/FP8 compares one path);
- ``g2_threads``: after the import, G2's four SDPA backends make their first calls (each loads its
  library and kernels) at once, a thread each, before the probe calls them one by one;
- ``early_import``: the ``spark-gotchas`` command starts the GPU worker, and so torch's import,
  before it imports pytest and the plugins; the run adopts that worker.

The load worker runs one measurement at a time, so the three never share the GPU with each other,
and each pauses the GPU worker's tasks while it runs. ``SPARK_GOTCHAS_HEADSTART`` turns parts off
(``-g5_probe,-cuda_context``; ``none`` for all): a part's work then waits for torch and runs in its
check's place. The readings a part starts early are taken once all the same: a reading started
early is waited for. Nothing here runs in a replay. The GPU worker's side is :func:`serve` and
:func:`cuda_context`.
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
from typing import Any, Callable

from ..base import scrub

ENV = "SPARK_GOTCHAS_HEADSTART"
PARTS = ("g4_load", "cuda_context", "g5_probe", "g7_rates", "g2_threads", "early_import")
TORCH_FREE = ("g4_load", "g5_probe", "g7_rates")  # the parts whose GPU work runs in the load worker, without torch
# The readings GPU checks take, started when the scans start: key -> the gotcha whose check reads it.
EARLY: dict[str, int] = {
    "thermal.spot_check": 4,  # its load needs no torch (g4_load); otherwise it waits in a thread
    "bench.bandwidth": 5,  # through the CUDA driver without torch (g5_probe); else not early
    "env.fp4_kernels": 7,  # an ELF scan, in a thread of pytest's process
    "bench.gemm": 7,  # through cuBLAS without torch (g7_rates), where NVFP4 cannot run; else not early
}
# Readings that start early only where their part runs them without torch: key -> (part, the reader's test).
TORCH_FREE_READINGS: dict[str, tuple[str, str]] = {
    "bench.bandwidth": ("g5_probe", "bandwidth_without_torch"),
    "bench.gemm": ("g7_rates", "gemm_without_torch"),
}


def enabled(part: str, environ: dict[str, str] | None = None) -> bool:
    """Whether the head start ``part`` runs in this process (all do unless the variable says)."""
    value = (os.environ if environ is None else environ).get(ENV, "")
    names = {n.strip() for n in value.split(",") if n.strip()}
    if "none" in names:
        return False
    return f"-{part}" not in names


def early_readings(gotchas: set[int]) -> list[str]:
    """The readings to start early for a run whose GPU checks are of ``gotchas``."""
    return [key for key, gotcha in EARLY.items() if gotcha in gotchas]


class HeadStart:
    """The parent's side for one run: which readings start early.

    ``gpu_worker`` gives the run's GPU worker (started on first use). ``errors`` (reading key ->
    why its head start failed) reaches the JSON report's ``timing.prepare_errors``; the reading is
    then taken as usual.
    """

    def __init__(self, provider: Any, gpu_worker: Callable[[], Any]):
        self.provider = provider
        self.gpu_worker = gpu_worker
        self.keys: list[str] = []
        self.errors: dict[str, str] = {}
        self._asked_context = False

    def plan(self, gotchas: set[int]) -> None:
        """Note the readings the collected GPU checks of ``gotchas`` will take."""
        self.keys = [key for key in early_readings(gotchas) if key not in self.keys]

    def begin(self) -> None:
        """At the first scan or GPU check (the checks of the machine at rest are done): the CUDA
        context, then each reading planned, once."""
        self.cuda_context()
        keys, self.keys = self.keys, []
        for key in keys:
            try:
                if key not in TORCH_FREE_READINGS or self.runs_without_torch(key):
                    self.provider.prefetch(key)
            except Exception as exc:  # a head start that fails costs only the head start
                self.errors[key] = scrub.clip(f"{type(exc).__name__}: {exc}", 600, mark="")

    def runs_without_torch(self, key: str) -> bool:
        """Whether reading ``key`` runs in the load worker (its part on, and its reader says it can:
        elsewhere the check takes it through torch when it runs, in its place among the GPU work)."""
        from ..machine.readers import bench

        part, test = TORCH_FREE_READINGS[key]
        ctx = self.provider.ctx
        return ctx.torch_free_worker(part) is not None and getattr(bench, test)(ctx)

    def cuda_context(self) -> None:
        """Ask the GPU worker for device 0's CUDA context in a thread (``cuda_context`` part)."""
        if self._asked_context or not enabled("cuda_context"):
            return
        worker = self.gpu_worker()
        if worker is not None and "torch" in worker.preload and worker.head_start("cuda_context"):
            self._asked_context = True


# -- the GPU worker's side -------------------------------------------------------------------------
def cuda_context() -> Any:
    """cuInit and device 0's primary context (kept for the process's life): seconds, or why not.
    torch's CUDA runtime later finds that context and uses it."""
    t0 = time.perf_counter()
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        device, context = ctypes.c_int(), ctypes.c_void_p()
        for name, args in (("cuInit", (0,)), ("cuDeviceGet", (ctypes.byref(device), 0)),
                           ("cuDevicePrimaryCtxRetain", (ctypes.byref(context), device))):
            rc = getattr(lib, name)(*args)
            if rc != 0:
                return f"{name} returned {rc}"
    except (OSError, AttributeError) as exc:
        return f"not available: {exc}"
    return round(time.perf_counter() - t0, 3)


IN_WORKER: dict[str, Callable[[], Any]] = {"cuda_context": cuda_context}


def serve(fd: int, send: Callable[[dict], None]) -> None:
    """The GPU worker's side: run each part named on ``fd`` (one name per line, each once) in a
    thread of its own, beside the imports, and ``send`` ``{"warmups": {name: {"result",
    "t_start_epoch", "t_end_epoch"}}}`` when it ends (the report's ``worker.warmups``). Until EOF."""

    def run(name: str) -> None:
        func, began = IN_WORKER.get(name), time.time()
        try:
            result = func() if func is not None else "no such head start"
        except Exception as exc:  # best effort: say what went wrong, never stop the worker
            result = f"{type(exc).__name__}: {exc}"
        entry = {"result": result, "t_start_epoch": began, "t_end_epoch": time.time()}
        try:
            send({"warmups": {name: entry}})
        except (OSError, ValueError):
            pass

    started: set[str] = set()
    with os.fdopen(fd, "rb", buffering=0) as pipe:
        buffer = b""
        while chunk := pipe.read(256):
            buffer += chunk
            *names, buffer = buffer.split(b"\n")
            for raw in names:
                name = raw.decode(errors="replace").strip()
                if name and name not in started:
                    started.add(name)
                    threading.Thread(target=run, args=(name,), name=f"headstart-{name}", daemon=True).start()
