"""NVML pinned away, for tests whose fake machine must be the only one seen: on a GPU machine the
real NVML would name the real GPU and change the profile, the lines and the fixes.

In process, :func:`pin` sets the suite's NVML state as a machine without a driver has it; a child
process gets :func:`folder` first on ``PYTHONPATH``: a ``pynvml`` whose ``nvmlInit`` answers as
nvidia-ml-py does where ``libnvidia-ml.so.1`` is missing.
"""

from __future__ import annotations

from pathlib import Path

from spark_gotchas.machine import nvml

REASON = "NVML library not found (no NVIDIA driver on this machine)"

PYNVML = '''"""nvidia-ml-py's answer on a machine without libnvidia-ml.so.1 (tests/no_nvml.py)."""


class NVMLError(Exception):
    pass


class NVMLError_LibraryNotFound(NVMLError):  # noqa: N801  nvidia-ml-py's own name
    pass


def nvmlInit():
    raise NVMLError_LibraryNotFound()
'''


def pin(monkeypatch) -> None:
    monkeypatch.setattr(nvml, "_STATE", {"tried": True, "error": nvml.NotAvailable(REASON), "module": None})


def folder(base: Path) -> Path:
    """A folder holding that ``pynvml``, to put first on a child's ``PYTHONPATH``."""
    where = base / "no-nvml"
    where.mkdir(parents=True, exist_ok=True)
    (where / "pynvml.py").write_text(PYNVML)
    return where
