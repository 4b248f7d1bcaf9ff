"""The head start: work begun early so a preflight waits less for the GPU worker's ``import torch``.

A cold preflight spends most of its wall time waiting for that import (3-6 s). The run order
(checks of the machine at rest, then scans, then GPU checks) puts CPU-only work under the wait;
the head start puts GPU work under it too. Its five parts, each measured against the run without
it on one H200 (docs/benchmarks.md, "The head start, part by part"):

- ``g4_load``: G4's spot-check load runs through cuBLAS in a worker without torch (the run's
  ``load_worker``), during the import; the GPU worker starts no task meanwhile;
- ``cuda_context``: the GPU worker creates device 0's CUDA context in a thread during the import,
  once the checks of the machine at rest are done (a context changes what NVML reads at rest);
- ``g5_compile``: the GPU worker compiles G5's Triton kernels in threads before G5 runs;
- ``g5_build``: a worker that never imports torch (the ``build_worker``) builds those kernels
  and their launchers into Triton's cache for the GPU's compute capability, during the import;
- ``g7_rates``: G7's BF16 and FP8 GEMM rates run through cuBLAS/cuBLASLt in the load worker,
  after G4's load and during the import, where the GPU has no FP4 tensor cores (below compute
  capability 10.0; elsewhere all three rates come from torch, so NVFP4/FP8 compares one path).

``SPARK_GOTCHAS_HEADSTART`` turns parts off (``-g5_build,-cuda_context``; ``none`` for all). The
readings a part starts early are taken once all the same: a reading started early is waited for.
Nothing here runs in a replay. The GPU worker's side is :func:`serve` and :func:`cuda_context`.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import threading
import time
from typing import Any, Callable, Optional

ENV = "SPARK_GOTCHAS_HEADSTART"
PARTS = ("g4_load", "cuda_context", "g5_compile", "g5_build", "g7_rates")
TORCH_FREE = ("g4_load", "g7_rates")  # the parts whose GPU work runs in the load worker, without torch
# The readings GPU checks take, started when the scans start: key -> the gotcha whose check reads it.
EARLY: dict[str, int] = {
    "thermal.spot_check": 4,  # its load needs no torch (g4_load); otherwise it waits in a thread
    "bench.bandwidth": 5,  # its kernels compile (g5_compile), built first without torch (g5_build)
    "bench.bandwidth_sweep": 5,
    "env.fp4_kernels": 7,  # an ELF scan, in a thread of pytest's process
    "bench.gemm": 7,  # through cuBLAS without torch (g7_rates), where NVFP4 cannot run; else not early
}
BANDWIDTH_KEYS = ("bench.bandwidth", "bench.bandwidth_sweep")
BUILD_TIMEOUT_S = 60.0
COMPILE_TASK = "spark_gotchas.microbench.bandwidth:compile_ahead"
BUILD_TASK = "spark_gotchas.microbench.bandwidth:fill_triton_cache"


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


def triton_installed() -> bool:
    return importlib.util.find_spec("triton") is not None


def _build_problem(result: Any) -> str:
    """What went wrong in the build worker, in one line ('' when every part was built or cached)."""
    if not result.ok:
        return f"building G5's kernels without torch: {result.problem}"
    errors = (result.value or {}).get("errors") or {}
    return "; ".join(f"building G5's {part} without torch: {why}" for part, why in errors.items())


class HeadStart:
    """The parent's side for one run: which readings start early, and the build worker.

    ``gpu_worker`` gives the run's GPU worker (started on first use); ``bare_worker`` makes a
    worker that imports nothing up front. ``errors`` (reading key -> why its head start failed)
    reaches the JSON report's ``timing.prepare_errors``; the reading is then taken as usual.
    """

    def __init__(self, provider: Any, gpu_worker: Callable[[], Any], bare_worker: Callable[[], Any]):
        self.provider = provider
        self.gpu_worker = gpu_worker
        self.bare_worker = bare_worker
        self.build_worker: Any = None
        self.keys: list[str] = []
        self.errors: dict[str, str] = {}
        self._asked_context = False
        self._compiled = False

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
                if key in BANDWIDTH_KEYS:
                    self.compile_g5_kernels()
                elif key == "bench.gemm":
                    self.gemm_rates()
                else:
                    self.provider.prefetch(key)
            except Exception as exc:  # a head start that fails costs only the head start
                self.errors[key] = f"{type(exc).__name__}: {exc}"[:600]

    def cuda_context(self) -> None:
        """Ask the GPU worker for device 0's CUDA context in a thread (``cuda_context`` part)."""
        if self._asked_context or not enabled("cuda_context"):
            return
        worker = self.gpu_worker()
        if worker is not None and "torch" in worker.preload and worker.head_start("cuda_context"):
            self._asked_context = True

    def gemm_rates(self) -> None:
        """G7's rates through cuBLAS in the load worker now (``g7_rates``), where they need no torch;
        elsewhere the check takes them through torch when it runs, in its place among the GPU work."""
        from .readers.bench import gemm_without_torch

        ctx = self.provider.ctx
        if ctx.torch_free_worker("g7_rates") is not None and gemm_without_torch(ctx):
            self.provider.prefetch("bench.gemm")

    def compile_g5_kernels(self) -> Optional[threading.Thread]:
        """G5's Triton kernels: built into Triton's cache by the build worker (no torch) while the
        GPU worker imports torch, then compiled and loaded by the GPU worker in the background.
        Without Triton or one known capability, the GPU worker compiles them itself at once.
        Returns the thread that waits for the build, if any."""
        if self._compiled or not enabled("g5_compile"):
            return None
        self._compiled = True
        worker = self.gpu_worker()
        from .readers.gpu import single_capability

        capability = single_capability(self.provider) if enabled("g5_build") else None
        if capability is None or not triton_installed():
            worker.submit(COMPILE_TASK)
            return None
        worker.start()  # importing torch now, if it was not already
        self.build_worker = self.bare_worker()

        def build_then_load() -> None:
            result = self.build_worker.call(BUILD_TASK, {"capability": list(capability)}, timeout=BUILD_TIMEOUT_S)
            self.build_worker.end_input()  # its one job is done; it holds no GPU context
            problem = _build_problem(result)
            if problem:
                self.errors["bench.bandwidth"] = problem[:600]
            worker.submit(COMPILE_TASK, start=False)  # not after the run closed it

        thread = threading.Thread(target=build_then_load, name="G5 kernel build", daemon=True)
        thread.start()
        return thread


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
