"""The soak reading of G3: a real safetensors load to the GPU, sampled (microbench.safetensors_load)."""

from __future__ import annotations

import csv
import importlib.util
import os
from dataclasses import dataclass, field
from typing import Any, Optional

from ..serial import from_jsonable
from . import ReadContext, reader

MAX_KEPT_SAMPLES = 120
PROBE_TIMEOUT_S = 1200.0


@dataclass
class LoadSample:
    """One sample during the load (``grep -E 'MemFree|MemAvailable|^Cached' /proc/meminfo``)."""

    t_s: float
    mem_free_bytes: Optional[int] = None
    mem_available_bytes: Optional[int] = None
    cached_bytes: Optional[int] = None
    rss_bytes: Optional[int] = None
    cuda_reserved_bytes: Optional[int] = None


@dataclass
class LoadProbe:
    """Peak extra memory of one load, as a multiple of the file size.

    Reproduce by hand: ``python -m microbench safetensors_load --size-gb 8``.
    """

    attempted: bool
    ok: bool = False
    reason: str = ""
    size_bytes: Optional[int] = None
    size_reason: str = ""
    directory: str = ""
    fstype: Optional[str] = None
    device: str = ""
    device_name: Optional[str] = None
    integrated: Optional[bool] = None  # the GPU shares host memory (GB10)
    cold: bool = False  # the file was dropped from the page cache before the load
    cache_dropped_bytes: Optional[int] = None  # how much Cached fell when it was (0: the drop did nothing)
    write_seconds: Optional[float] = None
    load_seconds: Optional[float] = None
    load_gbps: Optional[float] = None
    baseline: Optional[LoadSample] = None
    peak_extra_bytes: Optional[int] = None
    peak_extra_ratio: Optional[float] = None
    cache_ratio: Optional[float] = None
    rss_ratio: Optional[float] = None
    cuda_ratio: Optional[float] = None
    available_drop_ratio: Optional[float] = None
    after_load_ratio: Optional[float] = None
    sample_count: int = 0
    samples: list[LoadSample] = field(default_factory=list)  # at most MAX_KEPT_SAMPLES, evenly spaced
    csv_path: Optional[str] = None


def thin(samples: list[Any], keep: int = MAX_KEPT_SAMPLES) -> list[Any]:
    """Evenly spaced samples, first and last kept (the snapshot stays small)."""
    if len(samples) <= keep:
        return list(samples)
    step = (len(samples) - 1) / (keep - 1)
    return [samples[round(i * step)] for i in range(keep)]


def write_csv(samples: list[dict], path: str) -> Optional[str]:
    fields = list(LoadSample.__dataclass_fields__)
    try:
        with open(path, "w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=fields, extrasaction="ignore")
            writer.writeheader()
            writer.writerows(samples)
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

    result = ctx.worker.call("microbench.safetensors_load:probe", {"directory": directory},
                             timeout=PROBE_TIMEOUT_S, on_progress=progress)
    if not result.ok:
        return LoadProbe(attempted=True, ok=False, reason=result.problem, directory=directory)
    csv_path = None
    if result.value.get("samples"):
        csv_path = write_csv(result.value["samples"], os.path.join(directory, "g3-load-probe.csv"))
        if csv_path:
            ctx.add_artifact("g3_load_probe_csv", csv_path)
    return from_result(result.value, csv_path)
