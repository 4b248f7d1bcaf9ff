"""Reading types of the ``host.*`` keys: which machine a run was taken on (``host.identity``: fleet names
nodes by it) and what it is (``host.platform``: its CPU architecture and kernel, which a replay keeps)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass
class HostIdentity:
    """Check by hand: ``hostname; cat /proc/sys/kernel/random/boot_id``."""

    hostname: Optional[str] = None
    boot_id: Optional[str] = None  # changes at every boot: two runs of one boot share it


@dataclass
class HostPlatform:
    """What the machine is, as this process sees it. A replay reads it back: the recorded machine is
    judged, never the replaying one (an older snapshot without it says "not recorded").

    Check by hand: ``uname -m; uname -r; python3 -c 'import sysconfig; print(sysconfig.get_platform())'``.
    """

    machine: Optional[str] = None  # uname -m, one name per architecture: aarch64, x86_64
    kernel: Optional[str] = None  # uname -r: 6.17.0-1008-nvidia
    system: Optional[str] = None  # uname -s: Linux
    python: Optional[str] = None  # the interpreter's version: 3.12.3
    python_platform: Optional[str] = None  # what the interpreter was built for (wheels follow it): linux-aarch64
    source: str = "uname"  # "uname", or "the snapshot's platform section" (an older snapshot: machine and python only)
