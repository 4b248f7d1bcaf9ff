"""Work the GPU worker does in background threads while it imports torch (seconds, cold).

The parent names each warm-up on a pipe of its own (:meth:`spark_gotchas.worker.Worker.warm_up`),
when it is time for it; the child runs it in a thread beside the import:

- ``cuda_context``: the CUDA driver's initialisation and device 0's primary context, through
  libcuda directly (ctypes releases the interpreter lock, so the import goes on meanwhile).
  torch's CUDA runtime later finds that context and uses it: the first GPU task skips the
  0.3-0.5 s it would otherwise spend creating it. The suite asks for it once the checks of the
  machine's state at rest are done: a context changes what NVML reads at rest.

Reading the CUDA libraries ahead (``posix_fadvise(WILLNEED)``) was measured too, and made a cold
preflight slower (docs/benchmarks.md). A warm-up is best effort: a failure leaves the work to the
import and the tasks, as without it. Which ones run is :data:`DEFAULT` unless
``SPARK_GOTCHAS_WARMUPS`` names others (comma-separated; ``none`` for none).
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
from typing import Any, Callable

ENV = "SPARK_GOTCHAS_WARMUPS"
DEFAULT = ("cuda_context",)


def chosen(environ: dict[str, str] | None = None) -> tuple[str, ...]:
    """The warm-ups this run asks for: ``SPARK_GOTCHAS_WARMUPS`` or :data:`DEFAULT`."""
    value = (os.environ if environ is None else environ).get(ENV)
    if value is None:
        return DEFAULT
    names = tuple(n.strip() for n in value.split(",") if n.strip())
    return () if names in ((), ("none",)) else names


def cuda_context() -> Any:
    """cuInit and device 0's primary context (kept for the process's life): seconds, or why not."""
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


WARMUPS: dict[str, Callable[[], Any]] = {"cuda_context": cuda_context}


def serve(fd: int, send: Callable[[dict], None]) -> None:
    """Child side: run each warm-up named on ``fd`` (one name per line, each once) in a thread of
    its own, and ``send`` ``{"warmups": {name: {"result", "t_start_epoch", "t_end_epoch"}}}`` when
    it ends. Until EOF."""

    def run(name: str) -> None:
        func, began = WARMUPS.get(name), time.time()
        try:
            result = func() if func is not None else "no such warm-up"
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
                    threading.Thread(target=run, args=(name,), name=f"warmup-{name}", daemon=True).start()
