"""Memory as the pool really works: /proc/meminfo, what CUDA says is free at the same instant, and a
real load.

On a unified-memory GPU (GB10) the GPU has no memory of its own: NVML's memory call raises
NotSupported, and ``cudaMemGetInfo`` reports ``MemFree`` (page cache counts as used), not
``MemAvailable``. So the suite reads the kernel's figures and CUDA's side by side.

Keys: ``mem.meminfo``, ``mem.cuda``; ``mem.load_probe``, the soak reading of G3: a real safetensors
load to the GPU, sampled (:mod:`spark_gotchas.microbench.safetensors_load`).

Their types are in :mod:`spark_gotchas.readings.mem`.
"""

from __future__ import annotations

import csv
import importlib.util
import io
import os
from typing import Any, Optional

from .. import atomic, outward
from ..readings.mem import MEMINFO_PATH, CudaDeviceMemory, CudaMemory, LoadProbe, LoadSample, MemInfo
from ..serial import from_jsonable
from . import ReadContext, reader

# -- mem.meminfo, mem.cuda ------------------------------------------------------------------------
# /proc/meminfo name -> MemInfo field (values there are KiB, written "kB").
_FIELDS = {
    "MemTotal": "mem_total_bytes",
    "MemFree": "mem_free_bytes",
    "MemAvailable": "mem_available_bytes",
    "Buffers": "buffers_bytes",
    "Cached": "cached_bytes",
    "Dirty": "dirty_bytes",
    "Writeback": "writeback_bytes",
    "Shmem": "shmem_bytes",
    "Mapped": "mapped_bytes",
    "AnonPages": "anon_bytes",
    "Mlocked": "mlocked_bytes",
    "KReclaimable": "kreclaimable_bytes",
    "SwapTotal": "swap_total_bytes",
    "SwapFree": "swap_free_bytes",
}


def parse_meminfo(text: str, source: str = MEMINFO_PATH) -> MemInfo:
    """Parse /proc/meminfo text; bad lines are counted, never raised."""
    values: dict[str, int] = {}
    skipped = 0
    for line in text.splitlines():
        if not line.strip():
            continue
        name, sep, rest = line.partition(":")
        parts = rest.split()
        if not sep or not parts:
            skipped += 1
            continue
        try:
            number = int(parts[0])
        except ValueError:
            skipped += 1
            continue
        unit = parts[1].lower() if len(parts) > 1 else ""
        values[name.strip()] = number * 1024 if unit == "kb" else number
    info = MemInfo(source=source, skipped_lines=skipped,
                   missing=[k for k in ("MemFree", "MemAvailable", "Cached", "Buffers") if k not in values],
                   **{attr: values[key] for key, attr in _FIELDS.items() if key in values})
    if info.mem_total_bytes is None:
        info.error = f"no MemTotal line in {source}"
        return info
    if info.mem_available_bytes is None and info.mem_free_bytes is not None:
        info.mem_available_bytes = info.mem_free_bytes + (info.buffers_bytes or 0) + (info.cached_bytes or 0)
        info.available_estimated = True
    return info


def read_meminfo_file(path: str = MEMINFO_PATH) -> MemInfo:
    try:
        with open(path, encoding="ascii", errors="replace") as fh:
            text = fh.read()
    except OSError as exc:
        return MemInfo(source=path, error=f"cannot read {path}: {exc.strerror or exc}")
    return parse_meminfo(text, source=path)


@reader("mem.meminfo")
def read_meminfo(ctx: ReadContext) -> MemInfo:
    """System memory from /proc/meminfo (the only honest free-memory figure on a Spark)."""
    return read_meminfo_file()


@reader("mem.cuda")
def read_cuda_memory(ctx: ReadContext) -> CudaMemory:
    """cudaMemGetInfo per device in the GPU worker, next to /proc/meminfo read at the same time.

    ``torch.first_launch`` also records mem_get_info, but for device 0 only and without the
    kernel's figures of that moment; comparing CUDA's free with MemFree needs both at once.
    """
    build = ctx.provider.read("torch.build")
    if build.gpu_unavailable:
        return CudaMemory(attempted=False, reason=build.gpu_unavailable)
    result = ctx.worker.call("spark_gotchas.memtasks:cuda_memory", timeout=90)
    if not result.ok:
        return CudaMemory(attempted=True, reason=result.problem)
    value = dict(result.value)
    value["devices"] = [CudaDeviceMemory(**d) for d in value.get("devices", [])]
    return CudaMemory(attempted=True, **value)


def fstype_of(path: str, mounts_path: str = "/proc/mounts") -> Optional[str]:
    """The filesystem type holding ``path`` (longest matching mount point), None if unknown."""
    try:
        real = os.path.realpath(path)
        with open(mounts_path, encoding="utf-8", errors="replace") as fh:
            mounts = [line.split() for line in fh]
    except OSError:
        return None
    best, best_type = "", None
    for parts in mounts:
        if len(parts) < 3:
            continue
        point = parts[1].replace("\\040", " ")
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, best_type = point, parts[2]
    return best_type


# -- mem.load_probe -------------------------------------------------------------------------------
MAX_KEPT_SAMPLES = 120
PROBE_TIMEOUT_S = 1200.0


def thin(samples: list[Any], keep: int = MAX_KEPT_SAMPLES) -> list[Any]:
    """Evenly spaced samples, first and last kept (the snapshot stays small)."""
    if len(samples) <= keep:
        return list(samples)
    step = (len(samples) - 1) / (keep - 1)
    return [samples[round(i * step)] for i in range(keep)]


def write_csv(samples: list[dict], path: str) -> Optional[str]:
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=list(LoadSample.__dataclass_fields__), extrasaction="ignore")
    writer.writeheader()
    writer.writerows(samples)
    try:  # whole or not at all
        atomic.write_text(path, outward.record(text.getvalue()), parents=True)
    except OSError:
        return None
    return path


def from_result(value: dict, csv_path: Optional[str] = None) -> LoadProbe:
    data = dict(value)
    data["samples"] = thin(data.get("samples") or [])
    data["csv_path"] = csv_path
    return from_jsonable(LoadProbe, data)


@reader("mem.load_probe")
def read_load_probe(ctx: ReadContext) -> LoadProbe:
    """Write a safetensors file under --soak-dir, load it to cuda:0 in the worker, sample memory."""
    build = ctx.provider.read("torch.build")
    if build.gpu_unavailable:
        return LoadProbe(attempted=False, reason=build.gpu_unavailable)
    if importlib.util.find_spec("safetensors") is None:
        return LoadProbe(attempted=False, reason="safetensors is not installed (pip install safetensors)")
    directory = os.path.abspath(ctx.options.soak_dir)
    ctx.say(f"G3 load probe: writing and loading a safetensors file in {directory} …")

    def progress(p: dict) -> None:
        if p.get("phase") == "load":
            ctx.say(f"G3 load probe: loading {p['size_bytes'] / 1e9:.1f} GB to the GPU")
        elif "done_bytes" in p:
            ctx.say(f"G3 load probe: written {p['done_bytes'] / 1e9:.1f} GB")

    result = ctx.worker.call("spark_gotchas.memtasks:load_probe", {"directory": directory},
                             timeout=PROBE_TIMEOUT_S, on_progress=progress)
    if not result.ok:
        return LoadProbe(attempted=True, ok=False, reason=result.problem, directory=directory)
    csv_path = None
    if result.value.get("samples"):
        csv_path = write_csv(result.value["samples"], os.path.join(directory, "g3-load-probe.csv"))
        if csv_path:
            ctx.add_artifact("g3_load_probe_csv", csv_path)
    return from_result(result.value, csv_path)
