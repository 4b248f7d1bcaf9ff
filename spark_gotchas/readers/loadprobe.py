"""The soak reading of G3: a real safetensors load to the GPU, sampled (microbench.safetensors_load)."""

from __future__ import annotations

import csv
import importlib.util
import os
from typing import Any, Optional

from ..readings.mem import LoadProbe, LoadSample
from ..serial import from_jsonable
from . import ReadContext, reader

MAX_KEPT_SAMPLES = 120
PROBE_TIMEOUT_S = 1200.0


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
