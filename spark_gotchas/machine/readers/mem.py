"""Memory as the pool really works: /proc/meminfo, what CUDA says is free at the same instant, and a
real load.

On a unified-memory GPU (GB10) the GPU has no memory of its own: NVML's memory call raises
NotSupported, and ``cudaMemGetInfo`` reports ``MemFree`` (page cache counts as used), not
``MemAvailable``. So the suite reads the kernel's figures and CUDA's side by side.

Keys: ``mem.meminfo``, ``mem.cuda``, ``mem.cgroup`` (the memory limit of this process's own cgroup:
inside a container /proc/meminfo shows the host's memory, not what the container may use);
``mem.load_probe``, the soak reading of G3: a real safetensors load to the GPU, sampled
(:mod:`spark_gotchas.microbench.safetensors_load`).

Their types are in :mod:`spark_gotchas.knowledge.readings.mem`.
"""

from __future__ import annotations

import csv
import importlib.util
import io
import os
from typing import Any, Optional

from ...base import atomic, outward
from ...base.serial import from_jsonable
from ...knowledge.readings.mem import (
    MEMINFO_PATH,
    CudaDeviceMemory,
    CudaMemory,
    LoadProbe,
    LoadSample,
    MemCgroup,
    MemInfo,
)
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
    result = ctx.worker.call("spark_gotchas.runtime.memtasks:cuda_memory", timeout=90)
    if not result.ok:
        return CudaMemory(attempted=True, reason=result.problem)
    value = dict(result.value)
    value["devices"] = [CudaDeviceMemory(**d) for d in value.get("devices", [])]
    return CudaMemory(attempted=True, **value)


# -- mem.cgroup -----------------------------------------------------------------------------------
PROC_CGROUP = "/proc/self/cgroup"
MOUNTINFO = "/proc/self/mountinfo"
UNLIMITED_V1 = 1 << 62  # v1 writes "no limit" as PAGE_COUNTER_MAX pages (9223372036854771712 with 4 KiB pages)


def _read_small(path: str) -> Optional[str]:
    """A cgroup file's text, or None when it is absent (every other OSError is raised)."""
    try:
        with open(path, encoding="ascii", errors="replace") as fh:
            return fh.read(1 << 16)
    except FileNotFoundError:
        return None


def _number(text: Optional[str], unlimited_from: Optional[int] = None) -> Optional[int]:
    """``memory.max``'s value: bytes, or None for ``max`` (and, in v1, the page counter's ceiling)."""
    if text is None:
        return None
    word = text.strip()
    if not word or word == "max":
        return None
    try:
        value = int(word)
    except ValueError:
        return None
    return None if unlimited_from is not None and value >= unlimited_from else value


def _stat(text: Optional[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for line in (text or "").splitlines():
        name, _, value = line.partition(" ")
        if value.strip().isdigit():
            out[name] = int(value)
    return out


def memory_hierarchy(mountinfo: str) -> Optional[tuple[int, str, str]]:
    """(version, mount point, mount root) of the hierarchy holding the memory controller: the v1
    ``memory`` mount where there is one (the controller is then not v2's), else the cgroup2 mount."""
    v2 = None
    for line in mountinfo.splitlines():
        head, sep, tail = line.partition(" - ")
        fields, after = head.split(), tail.split()
        if not sep or len(fields) < 5 or len(after) < 1:
            continue
        root, point = fields[3].replace("\\040", " "), fields[4].replace("\\040", " ")
        if after[0] == "cgroup" and "memory" in (after[2] if len(after) > 2 else "").split(","):
            return 1, point, root
        if after[0] == "cgroup2" and v2 is None:
            v2 = (2, point, root)
    return v2


def own_cgroup(proc_cgroup: str, version: int) -> Optional[str]:
    """This process's path in the hierarchy of ``version`` (``0::/docker/…`` for v2, the ``memory``
    line for v1), from /proc/self/cgroup."""
    for line in proc_cgroup.splitlines():
        parts = line.strip().split(":", 2)
        if len(parts) != 3:
            continue
        if version == 2 and parts[0] == "0" and parts[1] == "":
            return parts[2] or "/"
        if version == 1 and "memory" in parts[1].split(","):
            return parts[2] or "/"
    return None


def read_cgroup(proc_cgroup: str = PROC_CGROUP, mountinfo: str = MOUNTINFO) -> MemCgroup:
    """The memory limit, usage and swap of this process's own cgroup (see :class:`MemCgroup`)."""
    try:
        mounts = _read_small(mountinfo)
        if mounts is None:
            return MemCgroup(error=f"{mountinfo} not found: no cgroup file system to read")
        found = memory_hierarchy(mounts)
        if found is None:
            return MemCgroup(error="no cgroup memory controller mounted (neither cgroup2 nor a v1 memory hierarchy "
                                   f"in {mountinfo})")
        version, point, root = found
        own = _read_small(proc_cgroup)
        path = own_cgroup(own or "", version)
        if path is None:
            return MemCgroup(version=version, error=f"{proc_cgroup} names no cgroup v{version} memory path")
        directory = os.path.normpath(point + "/" + _inside(path, root).lstrip("/"))
        if not os.path.isdir(directory):
            return MemCgroup(version=version, path=path, directory=directory,
                             error=f"{directory} not found: this cgroup is not visible here")
        return (_read_v2 if version == 2 else _read_v1)(MemCgroup(version=version, path=path, directory=directory),
                                                         point)
    except OSError as exc:
        return MemCgroup(error=f"cannot read the cgroup: {exc.strerror or exc}" + (f" ({exc.filename})"
                                                                                  if exc.filename else ""))


def _inside(path: str, root: str) -> str:
    """The cgroup's path below the mount's root (a container's /sys/fs/cgroup is mounted at its own
    cgroup); a path outside that root is not visible here, so the mount's own tree stands for it."""
    if root == "/":
        return path
    top = root.rstrip("/")
    if path == top or path.startswith(top + "/"):
        return path[len(top):] or "/"
    return "/"


def _ancestors(directory: str, point: str) -> list[str]:
    """``directory`` and each parent up to the mount point, the nearest first."""
    out, here = [], directory
    while True:
        out.append(here)
        if os.path.normpath(here) == os.path.normpath(point) or os.path.dirname(here) == here:
            return out
        here = os.path.dirname(here)


def _tightest(directory: str, point: str, name: str, unlimited_from: Optional[int] = None
              ) -> tuple[Optional[int], Optional[str]]:
    best: tuple[Optional[int], Optional[str]] = (None, None)
    for where in _ancestors(directory, point):
        value = _number(_read_small(os.path.join(where, name)), unlimited_from)
        if value is not None and (best[0] is None or value < best[0]):
            best = (value, os.path.join(where, name))
    return best


def _read_v2(cg: MemCgroup, point: str) -> MemCgroup:
    d = cg.directory or point
    cg.limit_bytes, cg.limit_file = _tightest(d, point, "memory.max")
    cg.usage_bytes = _number(_read_small(os.path.join(d, "memory.current")))
    cg.inactive_file_bytes = _stat(_read_small(os.path.join(d, "memory.stat"))).get("inactive_file")
    cg.swap_limit_bytes, _ = _tightest(d, point, "memory.swap.max")
    cg.swap_usage_bytes = _number(_read_small(os.path.join(d, "memory.swap.current")))
    return cg


def _read_v1(cg: MemCgroup, point: str) -> MemCgroup:
    d = cg.directory or point
    stat = _stat(_read_small(os.path.join(d, "memory.stat")))
    limit, source = _tightest(d, point, "memory.limit_in_bytes", UNLIMITED_V1)
    hierarchical = stat.get("hierarchical_memory_limit")
    if hierarchical is not None and hierarchical < UNLIMITED_V1 and (limit is None or hierarchical < limit):
        limit, source = hierarchical, os.path.join(d, "memory.stat") + " (hierarchical_memory_limit)"
    cg.limit_bytes, cg.limit_file = limit, source
    cg.usage_bytes = _number(_read_small(os.path.join(d, "memory.usage_in_bytes")))
    cg.inactive_file_bytes = stat.get("total_inactive_file", stat.get("inactive_file"))
    memsw = _number(_read_small(os.path.join(d, "memory.memsw.limit_in_bytes")), UNLIMITED_V1)
    if memsw is not None and limit is not None:
        cg.swap_limit_bytes = max(memsw - limit, 0)
    memsw_use = _number(_read_small(os.path.join(d, "memory.memsw.usage_in_bytes")))
    if memsw_use is not None and cg.usage_bytes is not None:
        cg.swap_usage_bytes = max(memsw_use - cg.usage_bytes, 0)
    return cg


@reader("mem.cgroup")
def read_mem_cgroup(ctx: ReadContext) -> MemCgroup:
    """This process's own cgroup memory limit (a container's), usage and swap, from /proc/self/cgroup
    and /sys/fs/cgroup."""
    return read_cgroup()


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

    result = ctx.worker.call("spark_gotchas.runtime.memtasks:load_probe", {"directory": directory},
                             timeout=PROBE_TIMEOUT_S, on_progress=progress)
    if not result.ok:
        return LoadProbe(attempted=True, ok=False, reason=result.problem, directory=directory)
    csv_path = None
    if result.value.get("samples"):
        csv_path = write_csv(result.value["samples"], os.path.join(directory, "g3-load-probe.csv"))
        if csv_path:
            ctx.add_artifact("g3_load_probe_csv", csv_path)
    return from_result(result.value, csv_path)
