"""Attention backends (G2): flash-attn as installed and as it behaves, torch SDPA, Unsloth's choice.

Nothing here imports flash_attn, torch or Unsloth in the pytest process: flash_attn is imported
and called in the GPU worker (a CUDA 12 build can segfault on import), and Unsloth's choice is
read from its source files, because importing Unsloth patches half the ML stack.

Keys: ``attention.flash_attn``, ``attention.sdpa``, ``attention.unsloth``; their types are in
:mod:`spark_gotchas.knowledge.readings.attention`.
"""

from __future__ import annotations

import importlib.metadata as md
import importlib.util
import os
import re
from dataclasses import fields
from pathlib import Path
from typing import Optional

from ...knowledge.readings.attention import FlashAttn, FlashAttnProbe, Sdpa, Unsloth
from .. import elf
from . import ReadContext, reader
from .env import cuda_majors
from .torch import torch_installed

PROBE_TIMEOUT_S = 60.0


def _distribution(*names: str) -> Optional[md.Distribution]:
    for name in names:
        try:
            return md.distribution(name)
        except md.PackageNotFoundError:
            continue
    return None


def _package_dir(name: str) -> Optional[str]:
    """Where a top-level package lives, without importing it."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return str(list(spec.submodule_search_locations)[0])
    return os.path.dirname(spec.origin) if spec.origin else None


def flash_attn_install() -> FlashAttn:
    """Distribution metadata and compiled extensions of flash-attn (no import)."""
    dist = _distribution("flash-attn", "flash_attn")
    location = _package_dir("flash_attn")
    if dist is None and location is None:
        return FlashAttn(installed=False)
    extensions: dict[str, dict[str, int]] = {}
    files = list(dist.files or ()) if dist is not None else []
    for f in files:
        if f.suffix == ".so" or ".so." in f.name:
            needed = elf.needed(str(f.locate())) or []
            extensions[str(f)] = cuda_majors(needed)
    return FlashAttn(
        installed=True,
        version=dist.version if dist is not None else None,
        distribution=dist.metadata["Name"] if dist is not None else None,
        location=location,
        files=len(files),
        extensions=extensions,
    )


@reader("attention.flash_attn")
def read_flash_attn(ctx: ReadContext) -> FlashAttn:
    """flash-attn's metadata; when installed, its import and a tiny call in the GPU worker."""
    install = flash_attn_install()
    if not install.installed:
        return install
    if not torch_installed():
        install.probe = FlashAttnProbe(attempted=False, reason="torch is not installed (flash_attn imports it)")
        return install
    result = ctx.worker.call("spark_gotchas.microbench.attention:flash_attn_probe", timeout=PROBE_TIMEOUT_S)
    if not result.ok:
        install.probe = FlashAttnProbe(
            attempted=True, crashed=result.crashed, signal=result.signal, timed_out=result.timed_out,
            problem=result.problem,
        )
        return install
    known = {f.name for f in fields(FlashAttnProbe)}
    value = {k: v for k, v in dict(result.value).items() if k in known}
    if value.get("capability"):
        value["capability"] = tuple(value["capability"])
    install.probe = FlashAttnProbe(**{**value, "attempted": True})
    return install


@reader("attention.sdpa")
def read_sdpa(ctx: ReadContext) -> Sdpa:
    """``python -c 'import torch; print(torch.backends.cuda.flash_sdp_enabled())'`` and friends,
    plus one tiny call per backend on cuda:0."""
    if not torch_installed():
        return Sdpa(torch_installed=False, problem="torch is not installed")
    result = ctx.worker.call("spark_gotchas.microbench.attention:sdpa_backends",
                             {"warm_in_threads": "g2_threads" in ctx.head_start}, timeout=PROBE_TIMEOUT_S)
    if not result.ok:
        return Sdpa(torch_installed=True, problem=result.problem)
    v = result.value
    return Sdpa(torch_installed=True, torch=v.get("torch"), enabled=v.get("enabled", {}), ran=v.get("ran", {}),
                seconds=v.get("seconds", {}), device=v.get("device"), problem=v.get("gpu_reason"))


_INTERFACE = re.compile(r"from\s+flash_attn\.flash_attn_interface\s+import\s+(\w+)")
_MIN_MAJOR = re.compile(r"major_version\s*>=\s*(\d+)")


def unsloth_layout(package_dir: str) -> Unsloth:
    """How this Unsloth decides on flash-attn, read from its source (see fixes.force_sdpa)."""
    root = Path(package_dir)
    out = Unsloth(installed=True, package_dir=str(root))
    flag_file = root / "models" / "_utils.py"
    try:
        text = flag_file.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        out.error = f"cannot read {flag_file}: {exc.strerror or exc}"
        return out
    out.flag_file = str(flag_file)
    out.flag_decided_there = "HAS_FLASH_ATTENTION = True" in text and "flash_attn" in text
    out.interfaces = sorted(set(_INTERFACE.findall(text)))
    majors = [int(m) for m in _MIN_MAJOR.findall(text)]
    out.min_capability_major = min(majors) if majors else None
    users = []
    for path in sorted(root.rglob("*.py")):
        if path == flag_file:
            continue
        try:
            if "HAS_FLASH_ATTENTION" in path.read_text(encoding="utf-8", errors="replace"):
                rel = path.relative_to(root.parent).with_suffix("")
                users.append(".".join(rel.parts).removesuffix(".__init__"))
        except OSError:
            continue
    out.flag_users = users
    return out


@reader("attention.unsloth")
def read_unsloth(ctx: ReadContext) -> Unsloth:
    """Is Unsloth installed, and where does it decide between flash-attn and SDPA (no import)."""
    package_dir = _package_dir("unsloth")
    dist = _distribution("unsloth")
    if package_dir is None:
        return Unsloth(installed=False, version=dist.version if dist else None)
    out = unsloth_layout(package_dir)
    out.version = dist.version if dist else None
    zoo = _distribution("unsloth_zoo", "unsloth-zoo")
    out.zoo_version = zoo.version if zoo else None
    out.xformers_installed = _package_dir("xformers") is not None
    return out
