"""Which platform this run judges: the profile, and a short description for reports."""

from __future__ import annotations

import importlib.metadata
import platform as _py_platform
import sys
from typing import Any, Optional

from . import __version__
from .profiles import NONE, PROFILES, Profile, resolve
from .provider import Provider, peek


def profile(provider: Provider, requested: str = "auto") -> Profile:
    """The profile asked for, or (auto) the one matching the first GPU NVML or torch sees."""
    if requested and requested != "auto":
        return PROFILES[requested]
    inventory = provider.try_read("gpu.inventory")
    if inventory is not None and inventory.first is not None:
        dev = inventory.first
        return resolve("auto", dev.name, dev.capability)
    if inventory is not None and inventory.nvml_error and "not found" in inventory.nvml_error:
        return NONE  # no driver at all: do not pay for a torch import to learn that
    build = provider.try_read("torch.build")
    if build is not None and build.devices:
        return resolve("auto", build.devices[0].name, build.devices[0].capability)
    return NONE


def describe(provider: Provider, requested: str = "auto") -> dict[str, Any]:
    """JSON-ready platform facts for the summary, the report and the snapshot."""
    prof = profile(provider, requested)
    inventory = peek(provider, "gpu.inventory")
    dev = inventory.first if inventory is not None else None
    build = peek(provider, "torch.build")
    return {
        "profile": prof.key,
        "profile_title": prof.title,
        "profile_requested": requested or "auto",
        "gpu": dev.name if dev else None,
        "gpu_count": len(inventory.devices) if inventory is not None else None,
        "capability": list(dev.capability) if dev and dev.capability else None,
        "driver": inventory.driver_version if inventory is not None else None,
        "cuda_driver": inventory.cuda_driver_text if inventory is not None else None,
        "nvml_error": inventory.nvml_error if inventory is not None else provider.error("gpu.inventory"),
        "torch": build.version if build is not None else None,
        "torch_cuda": build.cuda if build is not None else None,
        "machine": _py_platform.machine(),
        "python": _py_platform.python_version(),
    }


def one_line(desc: dict[str, Any], replayed_from: Optional[str] = None) -> str:
    gpu = desc.get("gpu") or f"no GPU ({desc.get('nvml_error') or 'none found'})"
    cap = desc.get("capability")
    parts = [gpu + (f" (cc {cap[0]}.{cap[1]})" if cap else "")]
    if desc.get("driver"):
        parts.append(f"driver {desc['driver']} / CUDA {desc.get('cuda_driver') or '?'}")
    if desc.get("torch"):
        parts.append(f"torch {desc['torch']}")
    parts.append(f"profile {desc['profile']}")
    head = "replayed " + replayed_from + ": " if replayed_from else ""
    return head + ", ".join(parts)


def _dist_version(name: str) -> Optional[str]:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def versions(provider: Provider) -> dict[str, Any]:
    build = peek(provider, "torch.build")
    inventory = peek(provider, "gpu.inventory")
    return {
        "suite": __version__,
        "python": sys.version.split()[0],
        "torch": build.version if build is not None else _dist_version("torch"),
        "torch_cuda": build.cuda if build is not None else None,
        "driver": inventory.driver_version if inventory is not None else None,
        "cuda_driver": inventory.cuda_driver_text if inventory is not None else None,
        "pytest": _dist_version("pytest"),
    }
