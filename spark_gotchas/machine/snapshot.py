"""Snapshot documents: every reading a run took, versioned, for replay, bug reports and diffs.

Format (``docs/snapshot.md`` documents each field)::

    {"format": "spark-gotchas-snapshot", "version": 1, "created": "<ISO 8601 UTC>",
     "suite_version": "...", "options": {...judged options...},
     "platform": {...}, "readings": {"<key>": <reading>, ...},
     "verdicts": [{"id": "G1", "status": "PASS", "summary": "...", "fix": "..."}, ...]}
"""

from __future__ import annotations

import datetime as _dt
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base import atomic, bounded_read
from ..base.serial import dumps
from ..knowledge.profiles import arch_name

FORMAT = "spark-gotchas-snapshot"
VERSION = 1
MAX_BYTES = bounded_read.SNAPSHOT.limit
MOST = "the most this suite reads as a snapshot"  # after "larger than 64 MiB", wherever a snapshot is refused
NOT_RECORDED = "not recorded"  # the platform section's machine, kernel or python where no reading holds it


class SnapshotError(Exception):
    """A snapshot that cannot be used; the message says why in one line."""


@dataclass
class Snapshot:
    readings: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    platform: dict[str, Any] = field(default_factory=dict)
    verdicts: list[dict[str, Any]] = field(default_factory=list)
    created: str = ""
    suite_version: str = ""
    markers: str = ""  # the recorded run's -m selection ("fast", "fast or soak"); "" when not recorded
    interrupted: str = ""  # why the recorded run ended early (Ctrl-C): its readings are partial; "" when whole
    path: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": VERSION,
            "created": self.created or now_iso(),
            "suite_version": self.suite_version,
            "markers": self.markers,
            "interrupted": self.interrupted,
            "options": self.options,
            "platform": self.platform,
            "readings": self.readings,
            "verdicts": self.verdicts,
        }


def now_iso() -> str:
    return _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat()


def load(path: str | os.PathLike) -> Snapshot:
    """Read and check a snapshot; any problem raises :class:`SnapshotError` with the reason.

    Only a regular file of at most MAX_BYTES is read, within bounded_read.SNAPSHOT's seconds (``/dev/zero``, a FIFO or a directory is
    refused before a byte is read), so a wrong path can neither hang the run nor fill memory.
    """
    p = Path(path)
    try:
        data = bounded_read.read_json(p, bounded_read.SNAPSHOT)
    except FileNotFoundError:
        raise SnapshotError(f"snapshot not found: {p}") from None
    except bounded_read.Refused as exc:
        why = str(exc)
        if why.startswith("larger"):
            why += f", {MOST}"
        elif why.startswith("nested"):
            why += " (a snapshot is a few levels deep)"
        raise SnapshotError(f"snapshot {p} is {why}") from None
    except OSError as exc:
        raise SnapshotError(f"cannot read snapshot {p}: {exc.strerror or exc}") from None
    return from_data(data, p)


def from_data(data: Any, p: Path) -> Snapshot:
    """Check a snapshot document already read from ``p`` (one read: what is judged is what was
    checked); any problem raises :class:`SnapshotError`."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise SnapshotError(f"{p} is not a spark-gotchas snapshot (no \"format\": \"{FORMAT}\")")
    version = data.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version > VERSION:  # true is no version
        raise SnapshotError(f"snapshot {p} has version {version!r}; this suite reads up to {VERSION}")
    readings = data.get("readings")
    if not isinstance(readings, dict):
        raise SnapshotError(f"snapshot {p} has no readings object")
    platform = data.get("platform") or {}
    if "host.platform" not in readings and isinstance(platform, dict):
        recorded = recorded_host(platform)
        if recorded is not None:
            readings = {**readings, "host.platform": recorded}
    return Snapshot(
        readings=readings,
        options=data.get("options") or {},
        platform=platform,
        verdicts=data.get("verdicts") or [],
        created=data.get("created", ""),
        suite_version=data.get("suite_version", ""),
        markers=data.get("markers") if isinstance(data.get("markers"), str) else "",
        interrupted=data.get("interrupted") if isinstance(data.get("interrupted"), str) else "",
        path=str(p),
    )


def recorded_host(platform: dict[str, Any]) -> dict[str, Any] | None:
    """The ``host.platform`` reading an older snapshot holds only in its platform section (its
    ``machine`` and ``python``, written on the machine it recorded), else None: its kernel is not recorded."""
    machine = platform.get("machine")
    if not isinstance(machine, str) or not machine or machine == NOT_RECORDED:
        return None
    python = platform.get("python")
    return {"machine": arch_name(machine), "python": python if isinstance(python, str) and python != NOT_RECORDED
            else None, "source": "the snapshot's platform section"}


def save(snapshot: Snapshot, path: str | os.PathLike) -> Path:
    """Write atomically (a unique temp file renamed into place) so a killed run never leaves half a
    snapshot and two runs writing the same path never clobber each other's file.

    A path that exists and is no regular file (``/dev/stdout``, a FIFO) is written through, never
    replaced; a directory raises IsADirectoryError; a failed write leaves no temp file behind and
    raises the OSError, naming the path.
    """
    text = dumps(snapshot.to_json(), indent=1) + "\n"
    return atomic.write_text(path, text, parents=True)
