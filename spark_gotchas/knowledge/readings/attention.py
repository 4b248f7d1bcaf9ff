"""Reading types of the ``attention.*`` keys (G2): flash-attn as installed and as it behaves, torch
SDPA's backends, Unsloth's choice between them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ...microbench.quantities import Seconds


# -- attention.flash_attn -------------------------------------------------------------------------
@dataclass
class FlashAttnProbe:
    """``spark-gotchas microbench attention``: the import, Unsloth's interface check, one causal call."""

    attempted: bool
    reason: str = ""  # why not attempted
    imported: bool = False
    import_error: Optional[str] = None
    crashed: bool = False  # the worker died importing or calling it
    signal: str = ""
    timed_out: bool = False
    problem: Optional[str] = None  # one line for a crash or hang
    version: Optional[str] = None
    interface: Optional[str] = None  # flash_attn_gpu / flash_attn_cuda, as Unsloth imports it
    interface_error: Optional[str] = None
    gpu_tried: bool = False
    gpu_reason: Optional[str] = None  # why no call was tried (no CUDA device)
    gpu_error: Optional[str] = None  # the call raised
    device: Optional[str] = None
    capability: Optional[tuple[int, int]] = None
    dtype: Optional[str] = None
    shape: list[int] = field(default_factory=list)
    finite: Optional[bool] = None
    max_abs_err_flash: Optional[float] = None  # vs an fp32 SDPA reference
    max_abs_err_sdpa: Optional[float] = None  # torch SDPA in the same dtype, vs the same reference
    tolerance: Optional[float] = None
    import_seconds: Optional[Seconds] = None
    call_seconds: Optional[Seconds] = None

    @property
    def agrees(self) -> Optional[bool]:
        if self.max_abs_err_flash is None or self.tolerance is None:
            return None
        return bool(self.finite) and self.max_abs_err_flash <= self.tolerance


@dataclass
class FlashAttn:
    """``pip show -f flash-attn; python -c 'import flash_attn'`` (import and call in the worker)."""

    installed: bool
    version: Optional[str] = None
    distribution: Optional[str] = None  # None: importable but no installed metadata
    location: Optional[str] = None
    files: int = 0
    extensions: dict[str, dict[str, int]] = field(default_factory=dict)  # .so -> CUDA sonames it links
    probe: Optional[FlashAttnProbe] = None


# -- attention.sdpa -------------------------------------------------------------------------------
@dataclass
class Sdpa:
    """torch's SDPA backends: enabled flags and which ran a tiny call (in the worker)."""

    torch_installed: bool
    torch: Optional[str] = None
    enabled: dict[str, bool] = field(default_factory=dict)
    ran: dict[str, str] = field(default_factory=dict)  # backend -> "ok" or the error
    seconds: dict[str, Seconds] = field(default_factory=dict)  # backend -> its tiny call, first use included
    device: Optional[str] = None
    problem: Optional[str] = None  # no device, or the worker failed

    @property
    def working(self) -> list[str]:
        return [name for name, outcome in self.ran.items() if outcome == "ok"]


# -- attention.unsloth ----------------------------------------------------------------------------
@dataclass
class Unsloth:
    """Unsloth as installed, read from its files: ``grep -rn HAS_FLASH_ATTENTION $(python -c
    'import importlib.util as u; print(u.find_spec("unsloth").submodule_search_locations[0])')``"""

    installed: bool
    version: Optional[str] = None
    zoo_version: Optional[str] = None
    package_dir: Optional[str] = None
    flag_file: Optional[str] = None  # unsloth/models/_utils.py
    flag_decided_there: bool = False  # HAS_FLASH_ATTENTION = True after a flash_attn import
    interfaces: list[str] = field(default_factory=list)  # what that import looks for
    min_capability_major: Optional[int] = None  # "if major_version >= 8"
    flag_users: list[str] = field(default_factory=list)  # modules that read the flag
    xformers_installed: bool = False
    error: Optional[str] = None
