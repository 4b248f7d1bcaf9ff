"""Worker tasks for the memory readings (G3). torch is imported inside each task, never here."""

from __future__ import annotations

from typing import Any, Callable, Optional

from ..base import scrub
from ..machine.readers.mem import fstype_of, read_meminfo_file
from ..machine.sampler import Sampler


def cuda_memory(max_devices: int = 8) -> dict[str, Any]:
    """cudaMemGetInfo for each visible device, then /proc/meminfo, back to back."""
    import torch

    devices = []
    for index in range(min(torch.cuda.device_count(), max_devices)):
        entry: dict[str, Any] = {"index": index}
        try:
            props = torch.cuda.get_device_properties(index)
            entry["name"] = props.name
            entry["integrated"] = bool(getattr(props, "is_integrated", False))
            free, total = torch.cuda.mem_get_info(index)
            entry["free_bytes"], entry["total_bytes"] = int(free), int(total)
        except Exception as exc:  # one bad device must not hide the others
            entry["error"] = scrub.clip(f"{type(exc).__name__}: {exc}", 300, mark="")
        devices.append(entry)
    info = read_meminfo_file()
    return {
        "devices": devices,
        "mem_free_bytes": info.mem_free_bytes,
        "mem_available_bytes": info.mem_available_bytes,
        "cached_bytes": info.cached_bytes,
    }


def load_probe(progress: Optional[Callable[[Any], None]] = None, should_stop: Optional[Callable[[], bool]] = None,
               **args: Any) -> dict[str, Any]:
    """The safetensors load probe (:mod:`spark_gotchas.microbench.safetensors_load`; ``args`` are its
    own), with the suite's /proc/meminfo reader, mount lookup and sampler thread."""
    from ..microbench import safetensors_load

    def sampler(take: Callable[[], Any], sink: Callable[[Any], None], interval_s: float) -> Sampler:
        return Sampler(take, sink, interval_s, name="g3-load-probe").start()

    return safetensors_load.probe(**args, progress=progress, should_stop=should_stop, read_memory=read_meminfo_file,
                                  fstype=fstype_of, start_sampler=sampler)
