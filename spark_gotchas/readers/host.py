"""Which machine this is: its host name and this boot's id, so reports of many nodes can be told
apart (``spark-gotchas fleet``). Masked like every other string of a report or snapshot.

Keys: ``host.identity``; its type is in :mod:`spark_gotchas.readings.host`.
"""

from __future__ import annotations

import socket

from ..readings.host import HostIdentity
from . import ReadContext, reader
from .thermal.reboot import boot_id


@reader("host.identity")
def read_host_identity(ctx: ReadContext) -> HostIdentity:
    """This machine's host name and boot id."""
    try:
        name = socket.gethostname() or None
    except OSError:
        name = None
    return HostIdentity(hostname=name, boot_id=boot_id())
