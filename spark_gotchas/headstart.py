"""The head start: work begun early so a preflight waits less for the GPU worker's ``import torch``.

Each part has a name, and ``SPARK_GOTCHAS_HEADSTART`` turns parts off (``-g5_build,-cuda_context``;
``none`` for all), so each can be measured against the run without it (devscripts/timing.sh):

- ``g4_load``: G4's spot-check load runs through cuBLAS in a worker without torch, during the import;
- ``cuda_context``: the GPU worker creates device 0's CUDA context in a thread during the import;
- ``g5_compile``: the GPU worker compiles G5's Triton kernels in threads before G5 runs;
- ``g5_build``: a worker without torch builds G5's kernels into Triton's cache during the import.
"""

from __future__ import annotations

import os

ENV = "SPARK_GOTCHAS_HEADSTART"
PARTS = ("g4_load", "cuda_context", "g5_compile", "g5_build")


def enabled(part: str, environ: dict[str, str] | None = None) -> bool:
    """Whether the head start ``part`` runs in this process (all do unless the variable says)."""
    value = (os.environ if environ is None else environ).get(ENV, "")
    names = {n.strip() for n in value.split(",") if n.strip()}
    if "none" in names:
        return False
    return f"-{part}" not in names
