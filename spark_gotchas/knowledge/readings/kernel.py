"""Reading types of the ``kernel.*`` keys (G1, G3): what the NVIDIA driver and the kernel logged since
boot about the GPU and its memory.

Why: the driver reports a GPU that fell off the bus, a program's faulting kernel or an allocation the
unified memory could not satisfy in the kernel log only (``NVRM: Xid (PCI:000f:01:00): 79, GPU has
fallen off the bus.``, ``NV_ERR_NO_MEMORY``); ``nvidia-smi`` may look healthy meanwhile.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ...microbench.quantities import Count, Seconds


@dataclass
class XidEvent:
    """One ``NVRM: Xid (PCI:…): N, pid=…, name=…, text`` line."""

    xid: int
    bus: str = ""  # "PCI:000f:01:00"
    pid: Optional[int] = None
    process: Optional[str] = None
    text: str = ""  # what follows the Xid number (and pid, name)
    uptime_s: Optional[Seconds] = None  # when: seconds since boot


@dataclass
class KernelEvent:
    """A kernel log line the suite looks for beside the Xids: the driver's ``NV_ERR_NO_MEMORY``, the OOM
    killer's kill, the driver's "has fallen off the bus" said without an Xid."""

    kind: str  # "nv_err_no_memory" | "oom_kill" | "fallen_off_bus"
    text: str
    uptime_s: Optional[Seconds] = None
    pid: Optional[int] = None
    process: Optional[str] = None


@dataclass
class KernelLog:
    """The kernel log since boot, searched for the NVIDIA driver's lines. Check by hand: ``sudo dmesg
    | grep -E 'NVRM|Xid|NV_ERR_|Out of memory'`` (or ``journalctl -k -b | grep …``);
    ``sysctl kernel.dmesg_restrict`` says whether a user may read it."""

    read: bool = False
    source: Optional[str] = None  # "/dev/kmsg" | "journalctl -k -b" | "dmesg"
    tried: dict[str, str] = field(default_factory=dict)  # source -> why it gave nothing
    dmesg_restrict: Optional[int] = None  # /proc/sys/kernel/dmesg_restrict: 1 keeps it from users
    lines: Count = 0  # lines read
    nvrm_lines: Count = 0  # lines of the NVIDIA driver (NVRM:)
    xids: list[XidEvent] = field(default_factory=list)  # the first and last ones of each Xid, at most MAX kept
    xid_counts: dict[str, int] = field(default_factory=dict)  # "79" -> how many
    events: list[KernelEvent] = field(default_factory=list)  # the first and last ones of each kind
    event_counts: dict[str, int] = field(default_factory=dict)  # kind -> how many
    uptime_s: Optional[Seconds] = None  # /proc/uptime when it was read
    truncated: bool = False  # the read stopped at its bound: older lines may be missing
