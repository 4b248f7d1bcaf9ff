"""Did the last soak end, or did the machine reboot under it? The soak's heartbeat vs this boot.

A soak rewrites a small heartbeat file at every sample (boot id, start, last sample time) and
marks its end when it stops. A reboot or power loss leaves a heartbeat without an end marker,
written during an earlier boot: only the next run can see that, so the fast preflight looks.

Check by hand: ``cat reports/g4-soak.heartbeat.json; cat /proc/sys/kernel/random/boot_id;
grep btime /proc/stat; uptime -s``.

Key: ``thermal.reboot``; its types are in :mod:`spark_gotchas.knowledge.readings.thermal`.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Any, Optional

from ....base import bounded_read, outward
from ....base.serial import OutOfRange, dumps, from_jsonable, to_jsonable
from ....knowledge.readings.thermal import HEARTBEAT_FORMAT, Heartbeat, RebootCheck
from .. import ReadContext, reader

HEARTBEAT_NAME = "g4-soak.heartbeat.json"


def boot_id() -> Optional[str]:
    """This boot's random id (``cat /proc/sys/kernel/random/boot_id``); None where unreadable."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


def boot_time_s() -> Optional[int]:
    """When this boot began, epoch seconds (``grep btime /proc/stat``)."""
    try:
        for line in Path("/proc/stat").read_text().splitlines():
            if line.startswith("btime "):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def heartbeat_path(soak_dir: str) -> Path:
    """The heartbeat's path under ``soak_dir``, made absolute without following links (a link loop
    there is the read's problem, said in its line, not an error of the reader)."""
    return Path(os.path.abspath(os.path.expanduser(soak_dir))) / HEARTBEAT_NAME


def new_heartbeat(planned_s: float, csv_path: str, started_epoch: Optional[float] = None) -> Heartbeat:
    now = time.time() if started_epoch is None else started_epoch
    return Heartbeat(boot_id=boot_id(), btime_s=boot_time_s(), pid=os.getpid(), host=socket.gethostname(),
                     started_epoch=now, planned_s=planned_s, last_sample_epoch=now, csv_path=str(csv_path))


def write_heartbeat(path: Path, beat: Heartbeat, fsync: bool = False) -> None:
    """Replace the file atomically (:func:`spark_gotchas.base.atomic.write_text`): a crash leaves the
    old or the new one, whole; credentials in it (a command line, say) masked."""
    from ....base import atomic

    atomic.write_text(path, dumps(outward.record(to_jsonable(beat))), fsync=fsync)


def load_heartbeat(path: Path) -> tuple[Optional[Heartbeat], Optional[str]]:
    """(heartbeat, None), or (None, why it cannot be used). Read as :data:`bounded_read.HEARTBEAT`:
    a link to ``/dev/zero``, a FIFO or a 2 GB file is refused in a line, never read."""
    try:
        data: Any = bounded_read.read_json(path, bounded_read.HEARTBEAT)
    except bounded_read.Refused as exc:
        return None, f"{path} is {exc}"
    except OSError as exc:
        return None, f"cannot read {path}: {exc.strerror or exc}"
    if not isinstance(data, dict) or data.get("format") != HEARTBEAT_FORMAT:
        return None, f"{path} is not a soak heartbeat"
    try:
        return from_jsonable(Heartbeat, data), None
    except OutOfRange as exc:
        return None, f"{path}: {exc}"
    except (TypeError, ValueError, KeyError) as exc:
        return None, f"{path} lacks fields of a soak heartbeat ({exc})"


def pid_alive(pid: int, started_epoch: float) -> bool:
    """The process ``pid`` exists and started no later than the soak did (not a reused pid)."""
    try:
        import psutil

        return psutil.Process(pid).create_time() <= started_epoch + 5
    except Exception:  # NoSuchProcess, AccessDenied, psutil missing
        return False


@reader("thermal.reboot")
def read_reboot(ctx: ReadContext) -> RebootCheck:
    """The last soak's heartbeat in ``--soak-dir`` and this boot's id and boot time."""
    path = heartbeat_path(ctx.options.soak_dir)
    return check_heartbeat(path)


def check_heartbeat(path: Path) -> RebootCheck:
    check = RebootCheck(heartbeat_path=str(path), boot_id=boot_id(), btime_s=boot_time_s(), now_epoch=time.time())
    try:
        os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return check
    except OSError:  # there, but not readable as a file (a link loop): load_heartbeat says why
        pass
    check.found = True
    check.heartbeat, check.error = load_heartbeat(path)
    beat = check.heartbeat
    if beat is not None and beat.end_reason is None and beat.boot_id == check.boot_id:
        check.soak_pid_alive = pid_alive(beat.pid, beat.started_epoch)
    return check
