"""Tasks that run inside the GPU worker (:mod:`spark_gotchas.runtime.worker_main`), and what each rank of
the collective probe records of its node.

Each imports torch inside the function, never at module level, and returns plain JSON.
"""

from __future__ import annotations

import time
from typing import Any, Optional


def torch_build() -> dict[str, Any]:
    """What the environment's torch is and sees: version, CUDA build, arch list, devices."""
    from . import worker_main

    out: dict[str, Any] = {
        "installed": True,
        "import_seconds": worker_main.PRELOAD_SECONDS.get("torch"),
    }
    if "torch" in worker_main.PRELOAD_ERRORS:
        out["import_error"] = worker_main.PRELOAD_ERRORS["torch"]
        out["import_error_file"] = worker_main.PRELOAD_ERROR_FILES.get("torch") or None
        return out
    try:
        t0 = time.perf_counter()
        import torch
    except Exception as exc:
        if isinstance(exc, ModuleNotFoundError) and exc.name == "torch":
            return {"installed": False}
        out["import_error"] = f"{type(exc).__name__}: {exc}"
        out["import_error_file"] = worker_main.failing_file(exc) or None
        return out
    if out["import_seconds"] is None:
        out["import_seconds"] = time.perf_counter() - t0
    out["version"] = torch.__version__
    out["cuda"] = torch.version.cuda
    out["git_version"] = getattr(torch.version, "git_version", None)
    out["compiled_with_cuda"] = torch.version.cuda is not None
    try:
        out["arch_list"] = list(torch.cuda.get_arch_list())
    except Exception:
        out["arch_list"] = []
    if not out["compiled_with_cuda"]:
        out["cuda_available"] = False
        out["device_count"] = 0
        out["devices"] = []
        return out
    t0 = time.perf_counter()
    try:
        out["cuda_available"] = bool(torch.cuda.is_available())
        out["device_count"] = int(torch.cuda.device_count())
    except Exception as exc:
        out["cuda_available"] = False
        out["device_count"] = 0
        out["cuda_error"] = f"{type(exc).__name__}: {exc}"
    devices = []
    for index in range(out.get("device_count", 0)):
        props = torch.cuda.get_device_properties(index)
        devices.append({
            "index": index,
            "name": props.name,
            "capability": [props.major, props.minor],
            "total_memory_bytes": int(props.total_memory),
            "multiprocessors": int(props.multi_processor_count),
            "l2_bytes": int(getattr(props, "L2_cache_size", 0)) or None,
        })
    out["devices"] = devices
    out["cuda_query_seconds"] = time.perf_counter() - t0
    return out


def first_launch() -> dict[str, Any]:
    """Create the CUDA context and run one tiny kernel, checking its result."""
    import torch

    t0 = time.perf_counter()
    x = torch.arange(1024, device="cuda", dtype=torch.float32)
    total = float(x.sum().item())
    torch.cuda.synchronize()
    expected = 1023 * 1024 / 2
    free, total_mem = torch.cuda.mem_get_info()
    return {
        "ok": total == expected,
        "result": total,
        "expected": expected,
        "seconds": time.perf_counter() - t0,
        "mem_get_info": [int(free), int(total_mem)],
    }


def net_setup(master_addr: Optional[str]) -> dict[str, Any]:
    """This node's network as NCCL would use it, as JSON: each rank of ``spark-gotchas microbench
    collective --net-setup spark_gotchas.runtime.tasks:net_setup`` records it beside its timings (G10)."""
    from ..base.serial import to_jsonable
    from ..machine.netsetup import read_net_setup

    return to_jsonable(read_net_setup(master_addr))
