"""What earlier runs of ``spark-gotchas watch`` left behind: their heartbeats in the state folder.

A watch rewrites a small heartbeat while it runs and removes it when its job ends by itself; one left
behind says the watch was killed, the machine rebooted under it, or (marked) the kernel's OOM killer
ended the job. The next watch says so and removes it; the preflight reads the same files and leaves
them (``watch.earlier``, judged by G3 and G4), so a replay says what the live run said.

By hand: ``ls ~/.local/state/spark-gotchas/watch-*.json``.

Key: ``watch.earlier``; its types are in :mod:`spark_gotchas.knowledge.readings.watch`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

from ...base import bounded_read
from ...base.serial import OutOfRange, from_jsonable
from ...knowledge.readings.watch import HEARTBEAT_FORMAT, EarlierWatch, EarlierWatches, WatchHeartbeat
from . import ReadContext, reader
from .thermal.reboot import boot_id, boot_time_s, pid_alive

HEARTBEAT_KIND = bounded_read.Kind("watch heartbeat", 64 << 10)
STATE_ENV = "SPARK_GOTCHAS_STATE_DIR"
MAX_HEARTBEATS = 64  # a state folder is read for at most this many left behind


def state_dir() -> Path:
    """``$SPARK_GOTCHAS_STATE_DIR``, else ``$XDG_STATE_HOME/spark-gotchas``, else ``~/.local/state/spark-gotchas``."""
    given = os.environ.get(STATE_ENV)
    if given:
        return Path(given).expanduser()
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "spark-gotchas"


def left_behind() -> list[tuple[Path, Optional[WatchHeartbeat], str]]:
    """The heartbeats earlier watches left, newest last: (path, heartbeat, why unusable)."""
    return _left_behind(state_dir())[0]


def _left_behind(folder: Path) -> tuple[list[tuple[Path, Optional[WatchHeartbeat], str]], str]:
    try:
        names = sorted(n for n in os.listdir(folder) if n.startswith("watch-") and n.endswith(".json"))
    except FileNotFoundError:
        return [], ""
    except OSError as exc:
        return [], f"cannot list {folder}: {exc.strerror or exc}"
    out = []
    for name in names[-MAX_HEARTBEATS:]:
        path = folder / name
        try:
            data = bounded_read.read_json(path, HEARTBEAT_KIND)
        except (OSError, bounded_read.Refused) as exc:
            out.append((path, None, str(exc)))
            continue
        if not isinstance(data, dict) or data.get("format") != HEARTBEAT_FORMAT:
            out.append((path, None, "not a watch heartbeat"))
            continue
        try:
            out.append((path, from_jsonable(WatchHeartbeat, data), ""))
        except (OutOfRange, TypeError, ValueError, KeyError) as exc:
            out.append((path, None, f"lacks a heartbeat's fields ({exc})"))
    return out, ""


@reader("watch.earlier")
def read_earlier_watches(ctx: ReadContext) -> EarlierWatches:
    """The heartbeats earlier watches left in the state folder, and this boot's id and start."""
    folder = state_dir()
    found, problem = _left_behind(folder)
    reading = EarlierWatches(state_dir=str(folder), boot_id=boot_id(), btime_s=boot_time_s(), problem=problem)
    for path, beat, why in found:
        alive = (beat is not None and beat.end_reason is None and beat.boot_id is not None
                 and beat.boot_id == reading.boot_id and pid_alive(beat.watch_pid, beat.started_epoch))
        reading.watches.append(EarlierWatch(path=str(path), heartbeat=beat, problem=why, watch_alive=alive))
    return reading
