"""The host side of a watched job: memory, swap, pressure, its cgroup, its process tree, OOM kills.

Every file is read through :mod:`spark_gotchas.base.bounded_read` (a regular file, at most 1 MiB, within
2 s: a /proc file of a process stuck in the kernel cannot hang the watch). Check by hand:
``grep -E 'MemAvailable|MemFree|Cached|Dirty|Swap' /proc/meminfo; cat /proc/pressure/memory;
grep oom_kill /proc/vmstat; cat /proc/PID/cgroup`` and that cgroup's ``memory.max``,
``memory.current``, ``memory.events`` (v2) or ``memory.limit_in_bytes``, ``memory.usage_in_bytes``,
``memory.oom_control`` (v1); ``dmesg | grep -i 'killed process'`` for the kernel's OOM lines.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from typing import Any, Optional

from ..base import bounded_read
from ..base.procs import run_bounded
from ..knowledge.readings.mem import MemInfo
from .readers.mem import parse_meminfo

PROC = bounded_read.Kind("kernel file", 1 << 20, 2.0)
UNLIMITED = 1 << 62  # cgroup v1 writes "no limit" as a number near 2^63
PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
DMESG_TIMEOUT_S = 5.0


def read_proc(path: str) -> bytes:
    """A kernel file's bytes, bounded (OSError or :class:`bounded_read.Refused`, a ValueError)."""
    return bounded_read.read_bytes(path, PROC)


def _text(path: str) -> Optional[str]:
    try:
        return read_proc(path).decode("ascii", "replace")
    except (OSError, ValueError):
        return None


def meminfo() -> MemInfo:
    text = _text("/proc/meminfo")
    if text is None:
        return MemInfo(error="cannot read /proc/meminfo")
    return parse_meminfo(text)


def psi_memory() -> tuple[Optional[float], Optional[float]]:
    """``/proc/pressure/memory``'s avg10 of ``some`` and ``full`` (None, None where the kernel has no PSI)."""
    text = _text("/proc/pressure/memory")
    out: dict[str, float] = {}
    for line in (text or "").splitlines():
        head, _, rest = line.partition(" ")
        match = re.search(r"avg10=([0-9.]+)", rest)
        if head in ("some", "full") and match:
            out[head] = float(match.group(1))
    return out.get("some"), out.get("full")


def vmstat_oom_kills() -> Optional[int]:
    """The kernel's count of OOM kills since boot (``/proc/vmstat`` ``oom_kill``, Linux 4.13)."""
    for line in (_text("/proc/vmstat") or "").splitlines():
        if line.startswith("oom_kill "):
            try:
                return int(line.split()[1])
            except (IndexError, ValueError):
                return None
    return None


def uptime_s() -> Optional[float]:
    text = _text("/proc/uptime")
    try:
        return float(text.split()[0]) if text else None
    except (IndexError, ValueError):
        return None


# -- the job's memory cgroup ------------------------------------------------------------------------
def _mounts() -> list[tuple[str, str, str, str]]:
    """(mount point, root inside the file system, fs type, super options) of each cgroup mount."""
    out = []
    for line in (_text("/proc/self/mountinfo") or "").splitlines():
        mount, _, fs = line.partition(" - ")
        fields, fs_fields = mount.split(), fs.split()
        if len(fields) > 4 and fs_fields and fs_fields[0] in ("cgroup", "cgroup2"):
            out.append((fields[4], fields[3], fs_fields[0], fs_fields[2] if len(fs_fields) > 2 else ""))
    return out


def _join(mountpoint: str, root: str, path: str) -> str:
    rel = os.path.relpath(path, root) if path == root or path.startswith(root.rstrip("/") + "/") else path
    return os.path.normpath(os.path.join(mountpoint, rel.lstrip("/") if rel != "." else ""))


@dataclass
class CgroupMemory:
    limit_bytes: Optional[int] = None  # the lowest limit on the way up (None: none)
    used_bytes: Optional[int] = None  # usage minus inactive file pages, where the limit is
    oom_kills: Optional[int] = None  # the OOM killer's kills inside it


class Cgroup:
    """The memory cgroup a process is in (v2, or v1's memory controller), found once."""

    def __init__(self, pid: int):
        self.version = 0
        self.dir = ""
        self.top = ""  # the mount point: the limit is looked for up to here
        self.why = ""
        text = _text(f"/proc/{pid}/cgroup")
        if text is None:
            self.why = f"cannot read /proc/{pid}/cgroup"
            return
        v2 = v1 = None
        for line in text.splitlines():
            parts = line.split(":", 2)
            if len(parts) != 3:
                continue
            if parts[0] == "0" and parts[1] == "":
                v2 = parts[2]
            elif "memory" in parts[1].split(","):
                v1 = parts[2]
        for mountpoint, root, fstype, options in _mounts():
            if v1 is not None and fstype == "cgroup" and "memory" in options.split(","):
                self.version, self.dir, self.top = 1, _join(mountpoint, root, v1), mountpoint
                return
            if v2 is not None and fstype == "cgroup2" and os.path.exists(os.path.join(mountpoint, "cgroup.controllers")) \
                    and "memory" in (_text(os.path.join(mountpoint, "cgroup.controllers")) or "").split():
                self.version, self.dir, self.top = 2, _join(mountpoint, root, v2), mountpoint
        if not self.version:
            self.why = "no memory cgroup controller mounted"

    def _chain(self) -> list[str]:
        """This cgroup's folder and its ancestors' up to the mount point."""
        out, here = [], self.dir
        while here and here.startswith(self.top):
            out.append(here)
            if here == self.top:
                break
            here = os.path.dirname(here)
        return out

    def read(self) -> CgroupMemory:
        if self.version == 2:
            return self._read_v2()
        if self.version == 1:
            return self._read_v1()
        return CgroupMemory()

    def _read_v2(self) -> CgroupMemory:
        best: Optional[tuple[int, str]] = None
        for folder in self._chain():
            raw = (_text(os.path.join(folder, "memory.max")) or "").strip()
            if raw.isdigit() and (best is None or int(raw) < best[0]):
                best = (int(raw), folder)
        out = CgroupMemory(oom_kills=_keyed(os.path.join(self.dir, "memory.events"), "oom_kill"))
        if best is None:
            return out
        out.limit_bytes = best[0]
        current = _number(os.path.join(best[1], "memory.current"))
        inactive = _keyed(os.path.join(best[1], "memory.stat"), "inactive_file") or 0
        out.used_bytes = None if current is None else max(0, current - inactive)
        if best[1] != self.dir:
            out.oom_kills = _keyed(os.path.join(best[1], "memory.events"), "oom_kill")
        return out

    def _read_v1(self) -> CgroupMemory:
        stat_path = os.path.join(self.dir, "memory.stat")
        limit = _keyed(stat_path, "hierarchical_memory_limit") or _number(os.path.join(self.dir, "memory.limit_in_bytes"))
        out = CgroupMemory(oom_kills=_keyed(os.path.join(self.dir, "memory.oom_control"), "oom_kill"))
        if limit is None or limit >= UNLIMITED:
            return out
        usage = _number(os.path.join(self.dir, "memory.usage_in_bytes"))
        inactive = _keyed(stat_path, "total_inactive_file") or 0
        out.limit_bytes = limit
        out.used_bytes = None if usage is None else max(0, usage - inactive)
        return out


def _number(path: str) -> Optional[int]:
    raw = (_text(path) or "").strip()
    return int(raw) if raw.isdigit() else None


def _keyed(path: str, key: str) -> Optional[int]:
    for line in (_text(path) or "").splitlines():
        name, _, value = line.partition(" ")
        if name == key and value.strip().isdigit():
            return int(value.strip())
    return None


# -- the job's process tree -------------------------------------------------------------------------
class Tree:
    """The job and every process it started, refound every ``refresh_s`` (psutil walks all of /proc
    for it); each tick reads only the members' RSS (``/proc/PID/statm``)."""

    def __init__(self, pid: int, refresh_s: float = 10.0):
        self.pid = pid
        self.refresh_s = refresh_s
        self.members: set[int] = {pid}
        self._next = 0.0
        try:
            import psutil

            self._psutil: Any = psutil
        except ImportError:
            self._psutil = None

    def refresh(self, force: bool = False) -> set[int]:
        now = time.monotonic()
        if (force or now >= self._next) and self._psutil is not None:
            self._next = now + self.refresh_s
            try:
                root = self._psutil.Process(self.pid)
                self.members = {self.pid} | {p.pid for p in root.children(recursive=True)}
            except (self._psutil.Error, OSError):
                self.members = {p for p in self.members if os.path.exists(f"/proc/{p}")}
        return self.members

    def rss(self) -> tuple[Optional[int], int]:
        """(RSS summed over the members, how many were read)."""
        total, read = 0, 0
        for pid in sorted(self.members):
            text = _text(f"/proc/{pid}/statm")
            try:
                total += int(text.split()[1]) * PAGE if text else 0
                read += text is not None
            except (IndexError, ValueError):
                continue
        return (total if read else None), read


def own_rss() -> Optional[int]:
    text = _text("/proc/self/statm")
    try:
        return int(text.split()[1]) * PAGE if text else None
    except (IndexError, ValueError):
        return None


# -- the kernel's OOM lines --------------------------------------------------------------------------
KILLED = re.compile(r"^\[\s*([0-9.]+)\]\s.*?(?:Killed process|oom-kill:.*?,pid=)\s?(\d+)(?:\s\(([^)]*)\))?")


@dataclass
class OomLine:
    pid: int
    name: str
    boot_s: float  # when, in seconds since boot
    text: str


def kernel_oom_lines(since_boot_s: float) -> tuple[list[OomLine], str]:
    """The kernel log's OOM kills since ``since_boot_s`` (``dmesg``; root or ``kernel.dmesg_restrict=0``):
    (lines, why none could be read)."""
    run = run_bounded(["dmesg"], DMESG_TIMEOUT_S)
    if not run.ok:
        return [], run.problem or "dmesg gave nothing"
    found: dict[int, OomLine] = {}
    for line in run.stdout.splitlines():
        match = KILLED.match(line)
        if match is None or float(match.group(1)) < since_boot_s:
            continue
        pid = int(match.group(2))
        old = found.get(pid)
        name = match.group(3) or (old.name if old else "")
        found[pid] = OomLine(pid, name, float(match.group(1)), line.strip()[:300])
    return sorted(found.values(), key=lambda x: x.boot_s), ""
