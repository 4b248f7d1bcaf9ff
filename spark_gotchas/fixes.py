"""Fixes a user applies in their own training script (the checks only recommend them).

``force_sdpa()`` is the G2 fix. Unsloth decides at import time whether flash-attn is usable
(``HAS_FLASH_ATTENTION`` in ``unsloth.models._utils``) and then drops the caller's
``attn_implementation="sdpa"``; no environment variable turns that off.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

FLASH_FLAGS = ("HAS_FLASH_ATTENTION", "HAS_FLASH_ATTENTION_SOFTCAPPING")
XFORMERS_FLAGS = ("HAS_XFORMERS",)


@dataclass(frozen=True)
class SdpaForced:
    """What :func:`force_sdpa` did: packages hidden from imports, flags set to False."""

    hidden: tuple[str, ...]
    patched: tuple[str, ...]  # "module.FLAG" for every copy of a flag that was True
    unsloth_already_imported: bool


def _hide(package: str) -> None:
    """Make ``import package`` (and its submodules) fail with ModuleNotFoundError from now on."""
    for name in [n for n in sys.modules if n == package or n.startswith(package + ".")]:
        sys.modules[name] = None  # type: ignore[assignment]
    sys.modules[package] = None  # type: ignore[assignment]


def force_sdpa(hide_xformers: bool = False) -> SdpaForced:
    """Make Unsloth use torch SDPA even where a working flash-attn is installed.

    Call it before ``import unsloth``::

        from spark_gotchas.fixes import force_sdpa
        force_sdpa()
        from unsloth import FastLanguageModel
        model, tok = FastLanguageModel.from_pretrained(..., attn_implementation="sdpa")
        assert model.config._attn_implementation == "sdpa"

    It hides ``flash_attn`` (``sys.modules["flash_attn"] = None``): Unsloth's check
    (``transformers``' ``_is_package_available("flash_attn")`` and an import of
    ``flash_attn.flash_attn_interface``) then fails and it sets ``HAS_FLASH_ATTENTION = False``.
    The rest of the process cannot import flash_attn either.

    Unsloth's attention dispatch prefers xformers over SDPA. Where xformers is installed, pass
    ``hide_xformers=True`` to hide it as well (and set ``HAS_XFORMERS`` False): Unsloth 2026.1.1
    treats a missing xformers as absent, but 2024.11.7 imports it unconditionally and would
    then fail to import, so it is off by default.

    If Unsloth is already imported, it also sets the flags to False in every loaded
    ``unsloth.*`` module that holds a copy (``from ._utils import *`` copies them into
    ``unsloth.models.llama`` and the other model modules, ``unsloth.models.loader`` imports
    them by name, ``unsloth.utils.attention_dispatch`` star-imports them). Code that already
    captured a flash-attn function keeps it, so calling it before the import is the reliable way.

    Layout checked against Unsloth 2026.1.1 (``unsloth/models/_utils.py``: the flag decided under
    ``DEVICE_TYPE == "cuda"`` and ``major_version >= 8`` from ``flash_attn_gpu`` or
    ``flash_attn_cuda``; ``unsloth/utils/attention_dispatch.py``: flash, then xformers, then
    SDPA) and 2024.11.7 (the same flag in the same module, decided from ``flash_attn_cuda`` alone,
    without the device-type branch).
    """
    hidden = ("flash_attn", "xformers") if hide_xformers else ("flash_attn",)
    for package in hidden:
        _hide(package)
    flags = FLASH_FLAGS + (XFORMERS_FLAGS if hide_xformers else ())
    patched: list[str] = []
    loaded = [(n, m) for n, m in list(sys.modules.items()) if m is not None and (n == "unsloth" or n.startswith("unsloth."))]
    for name, module in loaded:
        for flag in flags:
            if getattr(module, flag, None) is True:
                setattr(module, flag, False)
                patched.append(f"{name}.{flag}")
    return SdpaForced(hidden=hidden, patched=tuple(patched), unsloth_already_imported=bool(loaded))
