"""Reading types of the ``mem.*`` keys (G3, G6): /proc/meminfo, what CUDA reports free beside it, the
memory limit of this process's own cgroup (a container's), and the soak's real safetensors load.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ...microbench.quantities import Bytes, GBps, Seconds

# -- mem.meminfo ----------------------------------------------------------------------------------
MEMINFO_PATH = "/proc/meminfo"


@dataclass
class MemInfo:
    """The kernel's view of system memory (bytes; /proc/meminfo's "kB" are KiB).

    Command line equivalent: ``grep -E 'Mem|Cached|Buffers|Dirty|Shmem|Swap' /proc/meminfo``
    or ``free -b`` (its "buff/cache" is Buffers + Cached + SReclaimable, "available" is
    MemAvailable).
    """

    source: str = MEMINFO_PATH
    error: Optional[str] = None  # the file could not be read or has no MemTotal
    mem_total_bytes: Optional[Bytes] = None
    mem_free_bytes: Optional[Bytes] = None
    mem_available_bytes: Optional[Bytes] = None
    available_estimated: bool = False  # kernel < 3.14 has no MemAvailable: Free + Buffers + Cached
    buffers_bytes: Optional[Bytes] = None
    cached_bytes: Optional[Bytes] = None
    dirty_bytes: Optional[Bytes] = None
    writeback_bytes: Optional[Bytes] = None
    shmem_bytes: Optional[Bytes] = None
    mapped_bytes: Optional[Bytes] = None
    anon_bytes: Optional[Bytes] = None
    mlocked_bytes: Optional[Bytes] = None
    kreclaimable_bytes: Optional[Bytes] = None
    swap_total_bytes: Optional[Bytes] = None
    swap_free_bytes: Optional[Bytes] = None
    skipped_lines: int = 0  # lines that did not parse (a malformed file still gives what it can)
    missing: list[str] = field(default_factory=list)  # of MemFree, MemAvailable, Cached, Buffers

    @property
    def ok(self) -> bool:
        return self.error is None and self.mem_total_bytes is not None

    @property
    def page_cache_bytes(self) -> int:
        """File pages the kernel can drop: Buffers + Cached - Shmem (tmpfs pages cannot be dropped)."""
        cache = (self.buffers_bytes or 0) + (self.cached_bytes or 0) - (self.shmem_bytes or 0)
        return max(cache, 0)

    @property
    def swap_used_bytes(self) -> int:
        """SwapTotal - SwapFree: pages of running processes already pushed out of memory (0 without swap lines)."""
        if self.swap_total_bytes is None or self.swap_free_bytes is None:
            return 0
        return max(self.swap_total_bytes - self.swap_free_bytes, 0)


# -- mem.cgroup -----------------------------------------------------------------------------------
@dataclass
class MemCgroup:
    """The memory limit of this process's own cgroup: what a container (Docker ``--memory``, a
    Kubernetes limit, a Slurm job) may use. Inside a container ``/proc/meminfo`` is the host's, so
    only this says how much of it the container may take.

    ``limit_bytes`` is the tightest limit of the cgroup and the ancestors visible here (None: no
    limit, ``max``); usage and ``inactive_file`` are the cgroup's own. Check by hand:
    ``cat /proc/self/cgroup``, then for cgroup v2 ``cat /sys/fs/cgroup/<path>/memory.max
    memory.current memory.swap.max memory.swap.current; grep inactive_file memory.stat``, for the v1
    memory controller ``cat /sys/fs/cgroup/memory/<path>/memory.limit_in_bytes memory.usage_in_bytes;
    grep -E 'hierarchical_memory_limit|total_inactive_file' memory.stat``.
    """

    version: Optional[int] = None  # 2 (unified hierarchy), 1 (the v1 memory controller); None: none found
    path: Optional[str] = None  # the cgroup's path in its hierarchy, from /proc/self/cgroup ("/" in a private namespace)
    directory: Optional[str] = None  # where its files were read
    limit_bytes: Optional[Bytes] = None
    limit_file: Optional[str] = None  # the file the limit came from (an ancestor's where that one is tighter)
    usage_bytes: Optional[Bytes] = None  # memory.current / memory.usage_in_bytes (page cache included)
    inactive_file_bytes: Optional[Bytes] = None  # page cache the kernel reclaims first when the limit is reached
    swap_limit_bytes: Optional[Bytes] = None  # memory.swap.max (v2; None: max), memsw limit - limit (v1)
    swap_usage_bytes: Optional[Bytes] = None
    error: Optional[str] = None  # why the limit could not be read (no cgroup file system, permission)

    @property
    def working_set_bytes(self) -> Optional[int]:
        """Usage less the inactive page cache, as kubelet and ``docker stats`` count it."""
        if self.usage_bytes is None:
            return None
        return max(self.usage_bytes - (self.inactive_file_bytes or 0), 0)

    @property
    def room_bytes(self) -> Optional[int]:
        """What the cgroup may still take before its limit: the limit less the working set."""
        if self.limit_bytes is None:
            return None
        return max(self.limit_bytes - (self.working_set_bytes or 0), 0)


# -- mem.cuda -------------------------------------------------------------------------------------
@dataclass
class CudaDeviceMemory:
    """``torch.cuda.mem_get_info(i)`` (cudaMemGetInfo) for one device, in bytes."""

    index: int
    name: str = ""
    free_bytes: Optional[Bytes] = None
    total_bytes: Optional[Bytes] = None
    integrated: Optional[bool] = None  # cudaDeviceProp.integrated: the GPU shares host memory
    error: Optional[str] = None


@dataclass
class CudaMemory:
    """What CUDA reports free, with MemFree/MemAvailable read in the same instant.

    Command line equivalent: ``python -c 'import torch; print(torch.cuda.mem_get_info())';
    grep -E 'MemFree|MemAvailable' /proc/meminfo``
    """

    attempted: bool
    reason: str = ""  # why not attempted, or what went wrong in the worker
    devices: list[CudaDeviceMemory] = field(default_factory=list)
    mem_free_bytes: Optional[Bytes] = None
    mem_available_bytes: Optional[Bytes] = None
    cached_bytes: Optional[Bytes] = None

    @property
    def first(self) -> Optional[CudaDeviceMemory]:
        ok = [d for d in self.devices if d.free_bytes is not None]
        return ok[0] if ok else None


# -- mem.load_probe -------------------------------------------------------------------------------
@dataclass
class LoadSample:
    """One sample during the load (``grep -E 'MemFree|MemAvailable|^Cached' /proc/meminfo``)."""

    t_s: Seconds
    mem_free_bytes: Optional[Bytes] = None
    mem_available_bytes: Optional[Bytes] = None
    cached_bytes: Optional[Bytes] = None
    rss_bytes: Optional[Bytes] = None
    cuda_reserved_bytes: Optional[Bytes] = None


@dataclass
class LoadProbe:
    """Peak extra memory of one load, as a multiple of the file size.

    Reproduce by hand: ``spark-gotchas microbench safetensors_load --size-gb 8``.
    """

    attempted: bool
    ok: bool = False
    reason: str = ""
    size_bytes: Optional[Bytes] = None
    size_reason: str = ""
    directory: str = ""
    fstype: Optional[str] = None
    device: str = ""
    device_name: Optional[str] = None
    integrated: Optional[bool] = None  # the GPU shares host memory (GB10)
    cold: bool = False  # the file was dropped from the page cache before the load
    cache_dropped_bytes: Optional[Bytes] = None  # how much Cached fell when it was (0: the drop did nothing)
    write_seconds: Optional[Seconds] = None
    load_seconds: Optional[Seconds] = None
    load_gbps: Optional[GBps] = None
    baseline: Optional[LoadSample] = None
    peak_extra_bytes: Optional[Bytes] = None
    peak_extra_ratio: Optional[float] = None
    cache_ratio: Optional[float] = None
    rss_ratio: Optional[float] = None
    cuda_ratio: Optional[float] = None
    available_drop_ratio: Optional[float] = None
    after_load_ratio: Optional[float] = None
    sample_count: int = 0
    samples: list[LoadSample] = field(default_factory=list)  # at most MAX_KEPT_SAMPLES, evenly spaced
    csv_path: Optional[str] = None
