"""Which machine this is: its host name and this boot's id, so reports of many nodes can be told
apart (``spark-gotchas fleet``), and what it is: its CPU architecture and kernel, recorded so a replay
judges the machine that was read, not the one replaying. Masked like every other string of a report
or snapshot.

Keys: ``host.identity``, ``host.platform``; their types are in :mod:`spark_gotchas.knowledge.readings.host`.
"""

from __future__ import annotations

import os
import platform
import socket
import sysconfig
from typing import Optional

from ...knowledge.profiles import arch_name
from ...knowledge.readings.host import HostIdentity, HostPlatform
from . import ReadContext, reader
from .gpu import SYS_ROOT_ENV
from .thermal.reboot import boot_id


@reader("host.identity")
def read_host_identity(ctx: ReadContext) -> HostIdentity:
    """This machine's host name and boot id."""
    try:
        name = socket.gethostname() or None
    except OSError:
        name = None
    return HostIdentity(hostname=name, boot_id=boot_id())


def _kernel_says(name: str) -> Optional[str]:
    """``/proc/sys/kernel/<name>`` (``arch``, ``osrelease``: what ``uname -m``/``-r`` print, from the
    kernel itself, so an emulated interpreter does not hide the machine), read under
    ``$SPARK_GOTCHAS_SYS_ROOT`` where that is set; None when absent."""
    root = os.environ.get(SYS_ROOT_ENV) or "/"
    try:
        with open(os.path.join(root, "proc", "sys", "kernel", name), encoding="ascii", errors="replace") as fh:
            return fh.read(256).strip() or None
    except OSError:
        return None


@reader("host.platform")
def read_host_platform(ctx: ReadContext) -> HostPlatform:
    """This machine's CPU architecture and kernel (as uname -m and -r print them), and what the
    interpreter was built for."""
    try:
        uname: Optional[os.uname_result] = os.uname()
    except OSError:
        uname = None
    machine = _kernel_says("arch") or (uname.machine if uname is not None else None)
    kernel = _kernel_says("osrelease") or (uname.release if uname is not None else None)
    return HostPlatform(machine=arch_name(machine), kernel=kernel or None,
                        system=(uname.sysname if uname is not None else None) or None,
                        python=platform.python_version(), python_platform=sysconfig.get_platform())
