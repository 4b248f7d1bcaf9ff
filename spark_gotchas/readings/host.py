"""Reading type of the ``host.identity`` key: which machine a run was taken on (fleet names nodes by it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass
class HostIdentity:
    """Check by hand: ``hostname; cat /proc/sys/kernel/random/boot_id``."""

    hostname: Optional[str] = None
    boot_id: Optional[str] = None  # changes at every boot: two runs of one boot share it
