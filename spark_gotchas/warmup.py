"""Work the GPU worker starts in background threads while it imports torch (seconds, cold).

- :func:`cuda_context`: the CUDA driver's initialisation and device 0's primary context, through
  libcuda directly (ctypes releases the interpreter lock, so the import goes on meanwhile).
  torch's CUDA runtime later finds that context and uses it: the first GPU task skips the
  0.3-0.5 s it would otherwise spend creating it.
- :func:`page_cache`: ask the kernel to read the environment's CUDA libraries ahead
  (``posix_fadvise(WILLNEED)``), for a machine whose page cache does not hold them yet.

Both are best effort: any failure leaves the work to the import and the tasks, as without them.
"""

from __future__ import annotations

import ctypes
import glob
import importlib.util
import os
import time


def library_dirs() -> list[str]:
    """``lib`` folders of the NVIDIA wheels (nvidia-cublas …) and of torch, without importing torch."""
    dirs: list[str] = []
    for name in ("nvidia", "torch"):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            continue
        if name == "nvidia":
            for root in spec.submodule_search_locations or []:
                dirs += sorted(glob.glob(os.path.join(root, "*", "lib")))
        elif spec.origin:
            dirs.append(os.path.join(os.path.dirname(spec.origin), "lib"))
    return dirs


def cuda_context(results: dict) -> None:
    """cuInit and device 0's primary context (kept for the process's life); seconds or why not."""
    t0 = time.perf_counter()
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        device, context = ctypes.c_int(), ctypes.c_void_p()
        for name, args in (("cuInit", (0,)), ("cuDeviceGet", (ctypes.byref(device), 0)),
                           ("cuDevicePrimaryCtxRetain", (ctypes.byref(context), device))):
            rc = getattr(lib, name)(*args)
            if rc != 0:
                results["cuda_context"] = f"{name} returned {rc}"
                return
        results["cuda_context"] = round(time.perf_counter() - t0, 3)
    except (OSError, AttributeError) as exc:
        results["cuda_context"] = f"not available: {exc}"


def page_cache(results: dict, dirs: list[str] | None = None) -> None:
    """Read-ahead advice for every shared library in ``dirs`` (default :func:`library_dirs`)."""
    t0 = time.perf_counter()
    total = 0
    for folder in dirs if dirs is not None else library_dirs():
        for path in glob.glob(os.path.join(folder, "*.so*")):
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError:
                continue
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
                total += os.fstat(fd).st_size
            except OSError:
                pass
            finally:
                os.close(fd)
    results["page_cache"] = {"bytes": total, "seconds": round(time.perf_counter() - t0, 3)}
