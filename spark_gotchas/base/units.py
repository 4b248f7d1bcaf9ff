"""Figures as a line shows them: bytes as GB, seconds as h:mm:ss, microseconds, percentages, times.

Pure functions shared by the judges, the soak and the tools, so every line writes a quantity the
same way. GB are 10^9 bytes, as ``--spark-model-gb`` is (``free -h`` prints GiB).
"""

from __future__ import annotations

import datetime as _dt
from typing import Optional

GB = 1e9


def gb(n: Optional[float]) -> str:
    """Bytes as GB: one decimal, two below 1 GB (an 18 MiB Xorg is 0.02 GB, not 0.0)."""
    if n is None:
        return "? GB"
    return f"{n / GB:.2f} GB" if 0 < abs(n) < GB else f"{n / GB:.1f} GB"


def hms(seconds: Optional[float]) -> str:
    """``0:12:34`` (hours unbounded)."""
    s = int(round(seconds or 0))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def utc(epoch: Optional[float]) -> str:
    """``2026-12-03 21:24:02 UTC``."""
    if epoch is None:
        return "an unknown time"
    return _dt.datetime.fromtimestamp(epoch, _dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def human_us(us: float) -> str:
    """Microseconds as a person reads them: 0 s, 450 µs, 12 ms, 0.4 s, 2.9 min, 3.0 h."""
    if us <= 0:
        return "0 s"
    if us < 1e3:
        return f"{us:.0f} µs"
    if us < 1e6:
        return f"{us / 1e3:.0f} ms"
    if us < 60e6:
        return f"{us / 1e6:.1f} s"
    if us < 3600e6:
        return f"{us / 60e6:.1f} min"
    return f"{us / 3600e6:.1f} h"


def pct(change: float) -> str:
    """A signed percentage that never prints "-0.0%"."""
    return f"{0.0 if abs(change) < 0.0005 else change:+.1%}"

def describe_size(n: int) -> str:
    """``1048576`` -> ``1 MiB``."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:g} {unit}"
    return f"{n} bytes"


def duration_text(seconds: float) -> str:
    """Seconds as ``--soak-duration`` takes them: ``8h``, ``30m``, ``45s``."""
    s = int(round(seconds or 0))
    if s and s % 3600 == 0:
        return f"{s // 3600}h"
    if s and s % 60 == 0:
        return f"{s // 60}m"
    return f"{s}s"
