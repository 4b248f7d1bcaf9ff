"""The one place that talks to NVML and turns its errors into "not available".

Every NVML call in the suite goes through :func:`query`. A failure never raises: it returns a
:class:`NotAvailable` that carries the reason (``Not Supported`` on GB10's memory call is a
normal platform state, not an error). Judges must test ``is_na(value)`` before any threshold.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

_LOCK = threading.Lock()
_STATE: dict[str, Any] = {"tried": False, "error": None, "module": None}


@dataclass(frozen=True)
class NotAvailable:
    """An NVML value that could not be read, with the reason (e.g. ``Not Supported``)."""

    reason: str

    def __bool__(self) -> bool:
        return False

    def __str__(self) -> str:
        return f"N/A ({self.reason})"


def is_na(value: Any) -> bool:
    return value is None or isinstance(value, NotAvailable)


def describe_error(exc: BaseException) -> str:
    """A short human reason for an NVML error or an import failure."""
    name = type(exc).__name__
    text = str(exc).strip() or name
    if name == "NVMLError_LibraryNotFound":
        return "NVML library not found (no NVIDIA driver on this machine)"
    if name == "NVMLError_DriverNotLoaded":
        return "NVIDIA driver not loaded"
    if name == "NVMLError_NoPermission":
        return "no permission"
    if name == "NVMLError_FunctionNotFound":
        return "function not in this driver's NVML"
    if isinstance(exc, ImportError):
        return "pynvml not importable (install nvidia-ml-py)"
    if isinstance(exc, AttributeError):
        return "function not in this nvidia-ml-py"
    return text


def init() -> NotAvailable | None:
    """Initialise NVML once per process; return why it is unavailable, or None when it works."""
    with _LOCK:
        if not _STATE["tried"]:
            _STATE["tried"] = True
            try:
                import pynvml

                pynvml.nvmlInit()
                _STATE["module"] = pynvml
            except Exception as exc:  # ImportError, NVMLError_*, OSError from ctypes
                _STATE["error"] = NotAvailable(describe_error(exc))
        return _STATE["error"]


def module() -> Any:
    """The pynvml module after a successful :func:`init` (None otherwise)."""
    init()
    return _STATE["module"]


def query(func: str, *args: Any, ignore_errors: bool = True) -> Any:
    """Call ``pynvml.<func>(*args)``; NVML failure -> :class:`NotAvailable` (or raise if asked).

    Command line equivalent: most values have an ``nvidia-smi --query-gpu=…`` field; readers
    name it in their docstrings so an operator can re-check a value by hand.
    """
    reason = init()
    if reason is not None:
        if ignore_errors:
            return reason
        raise RuntimeError(reason.reason)
    try:
        value = getattr(_STATE["module"], func)(*args)
    except Exception as exc:
        if not ignore_errors:
            raise
        return NotAvailable(describe_error(exc))
    if isinstance(value, bytes):
        value = value.decode(errors="replace")
    return value


def device_handles() -> list[Any]:
    """Handles of every GPU NVML sees (empty when NVML is unavailable)."""
    count = query("nvmlDeviceGetCount")
    if is_na(count):
        return []
    handles = []
    for index in range(count):
        handle = query("nvmlDeviceGetHandleByIndex", index)
        if not is_na(handle):
            handles.append(handle)
    return handles


def split(values: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """Turn ``{field: value-or-NotAvailable}`` into JSON-ready values (None) plus reasons."""
    clean: dict[str, Any] = {}
    reasons: dict[str, str] = {}
    for key, value in values.items():
        if isinstance(value, NotAvailable):
            clean[key] = None
            reasons[key] = value.reason
        else:
            clean[key] = value
    return clean, reasons
