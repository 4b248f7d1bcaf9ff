"""The load double count: how much memory a safetensors load really takes, as a multiple of the file.

Writes a safetensors file of a stated size, drops that one file from the page cache (so the
load reads the disk, as a first load does; no root needed), loads it to the GPU with
``safetensors.torch.load_file`` and samples MemFree, MemAvailable, Cached, this process's RSS
and torch's reserved CUDA memory every 50 ms meanwhile.

Peak extra memory = the largest rise over the pre-load baseline of: MemFree's drop on a GPU
that shares host memory (page cache, RSS and CUDA allocations all come out of one pool), or
MemFree's drop plus CUDA's reserved memory on a discrete GPU. The file is always deleted.

Size: ``--size-gb`` (default 8), never more than 25 % of MemAvailable, half the GPU's free
memory or half the free disk space.

    spark-gotchas microbench safetensors_load --size-gb 8 [--dir reports] [--warm] [--json]

In the suite (``spark_gotchas.runtime.memtasks:load_probe``) the memory reader, the filesystem lookup and
the sampler thread are the suite's own, passed in; alone, the small ones here serve.
"""

from __future__ import annotations

import importlib.util
import math
import os
import re
import shutil
import struct
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional, Protocol

from ._cli import ArgumentParser, cut, in_span, json_text, print_json, require_torch, say

GB = 1e9
MIB = 1 << 20
DEFAULT_SIZE_BYTES = int(8 * GB)
MAX_FRACTION_OF_AVAILABLE = 0.25
MIN_SIZE_BYTES = 64 * MIB
CHUNK_BYTES = 256 * MIB
_MEMINFO = re.compile(r"^(MemFree|MemAvailable|Cached):\s+(\d+) kB$", re.MULTILINE)


class HostMemoryLike(Protocol):
    """What the probe reads of system memory (the suite's ``MemInfo`` has these fields too)."""

    mem_free_bytes: Optional[int]
    mem_available_bytes: Optional[int]
    cached_bytes: Optional[int]


class Stoppable(Protocol):
    """A sampler that runs until stopped."""

    def stop(self) -> None: ...


@dataclass
class HostMemory:
    """System memory as /proc/meminfo states it, read alone (:func:`host_memory`)."""

    mem_free_bytes: Optional[int]
    mem_available_bytes: Optional[int]
    cached_bytes: Optional[int]


def host_memory(path: str = "/proc/meminfo") -> HostMemory:
    """MemFree, MemAvailable and Cached in bytes (None where the file lacks one)."""
    with open(path, encoding="ascii", errors="replace") as fh:
        found = {name: int(kib) * 1024 for name, kib in _MEMINFO.findall(fh.read())}
    return HostMemory(found.get("MemFree"), found.get("MemAvailable"), found.get("Cached"))


def filesystem_type(path: str) -> Optional[str]:
    """The type of the filesystem holding ``path`` (its deepest mount point), None if unknown."""
    import psutil

    real = os.path.realpath(path)
    holding = [p for p in psutil.disk_partitions(all=True)
               if real == p.mountpoint or real.startswith(p.mountpoint.rstrip("/") + "/")]
    return max(holding, key=lambda p: len(p.mountpoint)).fstype if holding else None


class _Every:
    """``sink(take())`` every ``interval_s`` in a thread, from now until :meth:`stop`."""

    def __init__(self, take: Callable[[], Any], sink: Callable[[Any], None], interval_s: float):
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._loop, args=(take, sink, interval_s), name="load-probe-samples",
                                        daemon=True)
        self._thread.start()

    def _loop(self, take: Callable[[], Any], sink: Callable[[Any], None], interval_s: float) -> None:
        while True:
            try:
                sink(take())
            except (OSError, ValueError):  # one unreadable sample is a gap, not the end of sampling
                pass
            if self._halt.wait(interval_s):
                return

    def stop(self) -> None:
        self._halt.set()
        self._thread.join(10)


def choose_size(requested: Optional[int], mem_available: int, device_free: Optional[int],
                disk_free: Optional[int], integrated: bool) -> tuple[int, str]:
    """The probe's file size and why: the request (or the default), capped to stay safe."""
    size = int(requested) if requested else DEFAULT_SIZE_BYTES
    reason = f"{size / GB:.1f} GB " + ("requested" if requested else "default")
    limits = [(MAX_FRACTION_OF_AVAILABLE * mem_available, f"{MAX_FRACTION_OF_AVAILABLE:.0%} of MemAvailable")]
    if device_free is not None and not integrated:
        limits.append((0.5 * device_free, "half the GPU's free memory"))
    if disk_free is not None:
        limits.append((0.5 * disk_free, "half the free disk space"))
    for limit, label in limits:
        if size > limit:
            size, reason = int(limit), f"capped at {label}"
    return size - size % MIB, reason


def write_safetensors(path: str, size_bytes: int, should_stop: Callable[[], bool] = lambda: False,
                      on_progress: Callable[[int], None] = lambda done: None) -> int:
    """Write a valid safetensors file of ``size_bytes`` of U8 tensors (256 MiB each), fsync'd."""
    count = max(1, math.ceil(size_bytes / CHUNK_BYTES))
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    start = 0
    for i in range(count):
        length = min(CHUNK_BYTES, size_bytes - start)
        header[f"w{i:05d}"] = {"dtype": "U8", "shape": [length], "data_offsets": [start, start + length]}
        start += length
    raw = json_text(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    pattern = os.urandom(16 * MIB)
    written = 0
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(raw)))
        fh.write(raw)
        while written < size_bytes:
            if should_stop():
                raise InterruptedError("stopped while writing the probe file")
            n = min(len(pattern), size_bytes - written)
            fh.write(pattern[:n])
            written += n
            if written % (1 << 30) < n:
                on_progress(written)
        fh.flush()
        os.fsync(fh.fileno())
    return written


def drop_file_cache(path: str, follow: bool = True) -> bool:
    """Ask the kernel to forget this one file's cached pages (POSIX_FADV_DONTNEED; no root).
    ``follow=False`` leaves a symlink's target alone. False when the file cannot be opened."""
    if not hasattr(os, "posix_fadvise"):
        return False
    try:
        fd = os.open(path, os.O_RDONLY | (0 if follow else os.O_NOFOLLOW))
    except OSError:
        return False
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def _rss_bytes() -> int:
    with open("/proc/self/statm", encoding="ascii") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class MemorySamples:
    """What one sample holds, taken every ``interval_s`` by the sampler the probe was given."""

    def __init__(self, reserved: Callable[[], Optional[int]], read_memory: Callable[[], HostMemoryLike]):
        self.reserved = reserved
        self.read_memory = read_memory
        self.samples: list[dict[str, Any]] = []
        self.t0 = time.perf_counter()

    def take(self) -> dict[str, Any]:
        info = self.read_memory()
        return {"t_s": round(time.perf_counter() - self.t0, 3), "mem_free_bytes": info.mem_free_bytes,
                "mem_available_bytes": info.mem_available_bytes, "cached_bytes": info.cached_bytes,
                "rss_bytes": _rss_bytes(), "cuda_reserved_bytes": self.reserved()}


def summarize(samples: list[dict], baseline: dict, size_bytes: int, integrated: bool, load_end_s: float) -> dict:
    """Peak rises over the baseline, as bytes and as multiples of the file size."""
    def rise(sample: dict, key: str, falling: bool = False) -> int:
        now, base = sample.get(key), baseline.get(key)
        if now is None or base is None:
            return 0
        return (base - now) if falling else (now - base)

    def footprint(sample: dict) -> int:
        host = rise(sample, "mem_free_bytes", falling=True)
        return host if integrated else host + rise(sample, "cuda_reserved_bytes")

    during = [s for s in samples if s["t_s"] <= load_end_s] or samples
    after = [s for s in samples if s["t_s"] >= load_end_s] or samples[-1:]
    peak = max((footprint(s) for s in samples), default=0)
    has_cuda = baseline.get("cuda_reserved_bytes") is not None

    def ratio(value: float) -> float:
        return round(max(value, 0) / size_bytes, 3)

    return {
        "peak_extra_bytes": peak,
        "peak_extra_ratio": ratio(peak),
        "cache_ratio": ratio(max((rise(s, "cached_bytes") for s in samples), default=0)),
        "rss_ratio": ratio(max((rise(s, "rss_bytes") for s in samples), default=0)),
        "cuda_ratio": ratio(max((rise(s, "cuda_reserved_bytes") for s in samples), default=0)) if has_cuda else None,
        "available_drop_ratio": ratio(max((rise(s, "mem_available_bytes", falling=True) for s in during), default=0)),
        "after_load_ratio": ratio(footprint(after[0])) if after else None,
    }


def probe(size_bytes: Optional[int] = None, directory: str = "reports", device: str = "cuda:0",
          cold: bool = True, interval_s: float = 0.05, *,
          progress: Optional[Callable[[Any], None]] = None, should_stop: Optional[Callable[[], bool]] = None,
          read_memory: Callable[[], HostMemoryLike] = host_memory,
          fstype: Callable[[str], Optional[str]] = filesystem_type,
          start_sampler: Callable[[Callable[[], Any], Callable[[Any], None], float], Stoppable] = _Every,
          ) -> dict[str, Any]:
    """Write, load and sample; returns JSON (``ok``/``reason``, the figures and every sample).

    ``progress`` gets the phases and each GiB written; ``should_stop()`` ends the write early.
    ``read_memory``, ``fstype`` and ``start_sampler(take, sink, interval_s)`` (started, with a
    ``stop()``) are how memory is read, how a folder's filesystem is named and what samples it.
    """
    say = progress or (lambda value: None)
    out: dict[str, Any] = {"attempted": True, "ok": False, "device": device, "directory": os.path.abspath(directory)}
    os.makedirs(directory, exist_ok=True)
    out["fstype"] = fstype(directory)
    if out["fstype"] in ("tmpfs", "ramfs"):
        out["reason"] = f"{directory} is on {out['fstype']}: the file itself would live in memory; use a disk folder"
        return out
    import torch
    from safetensors.torch import load_file

    on_cuda = device.startswith("cuda")
    index = torch.device(device).index or 0 if on_cuda else None
    integrated, device_free = True, None
    if on_cuda:
        props = torch.cuda.get_device_properties(index)
        integrated = bool(getattr(props, "is_integrated", False))
        out["device_name"] = props.name
        torch.cuda.set_device(index)
        device_free = int(torch.cuda.mem_get_info(index)[0])
    out["integrated"] = integrated
    info = read_memory()
    size, out["size_reason"] = choose_size(size_bytes, info.mem_available_bytes or 0, device_free,
                                           shutil.disk_usage(directory).free, integrated)
    out["size_bytes"] = size
    if size < MIN_SIZE_BYTES:
        out["reason"] = f"too little room for a meaningful load ({out['size_reason']}: {size / GB:.2f} GB)"
        return out
    path = os.path.join(directory, f"g3-load-probe-{os.getpid()}.safetensors")
    tensors: Any = None
    sampler: Any = None
    try:
        t0 = time.perf_counter()
        say({"phase": "write", "size_bytes": size})
        write_safetensors(path, size, should_stop or (lambda: False),
                          lambda done: say({"phase": "write", "done_bytes": done}))
        out["write_seconds"] = round(time.perf_counter() - t0, 3)
        cached_before = read_memory().cached_bytes or 0
        out["cold"] = drop_file_cache(path) if cold else False
        out["cache_dropped_bytes"] = cached_before - (read_memory().cached_bytes or 0)
        reserved = (lambda: int(torch.cuda.memory_reserved(index))) if on_cuda else (lambda: None)
        memory = MemorySamples(reserved, read_memory)
        time.sleep(0.2)
        baseline = memory.take()
        sampler = start_sampler(memory.take, memory.samples.append, interval_s)
        say({"phase": "load", "size_bytes": size})
        t1 = time.perf_counter()
        tensors = load_file(path, device=device)
        if on_cuda:
            torch.cuda.synchronize()
        else:  # a CPU load only maps the file: touch every page, as using the weights would
            for tensor in tensors.values():
                tensor.max()
        load_seconds = time.perf_counter() - t1
        load_end_s = round(time.perf_counter() - memory.t0, 3)
        time.sleep(max(0.5, 4 * interval_s))
        sampler.stop()
        loaded = sum(t.numel() * t.element_size() for t in tensors.values())
        if loaded != size:
            out["reason"] = f"loaded {loaded} bytes, expected {size}"
            return out
        out.update(load_seconds=round(load_seconds, 3), load_gbps=round(size / load_seconds / GB, 2),
                   baseline=baseline, samples=memory.samples, sample_count=len(memory.samples),
                   **summarize(memory.samples, baseline, size, integrated, load_end_s))
        out["ok"] = True
        return out
    except Exception as exc:
        out["reason"] = cut(f"{type(exc).__name__}: {exc}", 300)
        return out
    finally:
        if sampler is not None:
            sampler.stop()
        del tensors
        if on_cuda:
            torch.cuda.empty_cache()
        try:
            os.remove(path)
        except OSError:
            pass


def report_lines(result: dict) -> list[str]:
    """The probe's result for people, ending with one ``peak_extra_ratio=`` line for scripts."""
    if not result.get("ok"):
        return [f"safetensors load probe did not run: {result.get('reason')}", "peak_extra_ratio=nan"]
    if not result["device"].startswith("cuda"):
        target = "cpu (host memory)"
    else:
        kind = "shares host memory" if result.get("integrated") else "discrete"
        target = f"{result['device']} ({result.get('device_name')}, {kind})"
    comps = ", ".join(f"{name} {result[key]:.2f}x" for name, key in (("page cache", "cache_ratio"),
                      ("process RSS", "rss_ratio"), ("CUDA reserved", "cuda_ratio")) if result.get(key) is not None)
    return [
        f"safetensors load probe: {result['size_bytes'] / GB:.2f} GB file ({result['size_reason']}) in "
        f"{result['directory']} ({result.get('fstype')}), {'cold' if result.get('cold') else 'warm'}, "
        f"to {target}",
        f"  write {result['write_seconds']:.1f} s, load {result['load_seconds']:.1f} s ({result['load_gbps']:.2f} GB/s), "
        f"{result['sample_count']} samples; dropping the file from the page cache freed "
        f"{result.get('cache_dropped_bytes', 0) / GB:.2f} GB",
        f"  peak extra memory {result['peak_extra_bytes'] / GB:.2f} GB = {result['peak_extra_ratio']:.2f}x the file "
        f"({comps}); after the load {result['after_load_ratio']:.2f}x; MemAvailable fell by at most "
        f"{result['available_drop_ratio']:.2f}x",
        f"peak_extra_ratio={result['peak_extra_ratio']:.3f}",
    ]


def main(argv: list[str]) -> int:
    parser = ArgumentParser(prog="spark-gotchas microbench safetensors_load",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--size-gb", type=in_span(0.001, 10_000, "GB"), help="file size in GB (default 8; capped to stay safe)")
    parser.add_argument("--dir", default="reports", help="where to write the file (a disk, not tmpfs; default reports)")
    parser.add_argument("--device", help="load target (default cuda:0, or cpu without a GPU)")
    parser.add_argument("--warm", action="store_true", help="keep the file in the page cache (a second load)")
    parser.add_argument("--interval-ms", type=in_span(1, 60_000, "ms"), default=50.0, help="sampling interval (default 50)")
    parser.add_argument("--json", action="store_true", help="print the whole result as JSON")
    args = parser.parse_args(argv)
    if not require_torch():
        return 2
    if importlib.util.find_spec("safetensors") is None:
        say("safetensors is not installed (pip install safetensors)", err=True)
        return 2
    import torch

    device = args.device or ("cuda:0" if torch.cuda.is_available() else "cpu")
    result = probe(int(args.size_gb * GB) if args.size_gb else None, args.dir, device,
                   cold=not args.warm, interval_s=args.interval_ms / 1000)
    if args.json:
        print_json(result)
    else:
        say(*report_lines(result))
    return 0 if result.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
