"""The kernel log since boot, searched for what the NVIDIA driver said (G1, G3).

Three sources, the first that gives lines wins: ``/dev/kmsg`` (the ring buffer, read without
blocking), ``journalctl -k -b`` (this boot's kernel messages from the journal: the ring buffer may
have dropped older ones) and ``dmesg``. Each is bounded (bytes, lines, seconds; the commands run in
a child with a timeout). As a user the ring buffer is often closed to reads (``kernel.dmesg_restrict
= 1``, the default of many distributions) and the journal open only to the ``adm`` and
``systemd-journal`` groups: the reading then says which source refused and why.

Keys: ``kernel.log``; its types are in :mod:`spark_gotchas.knowledge.readings.kernel`.
"""

from __future__ import annotations

import errno
import os
import re
import time
from typing import Iterable, Optional

from ...base.procs import run_bounded
from ...knowledge.readings.kernel import KernelEvent, KernelLog, XidEvent
from . import ReadContext, reader

KMSG = "/dev/kmsg"
MAX_BYTES = 16 << 20  # of log text read from any source
MAX_LINES = 400_000
READ_S = 3.0
COMMAND_TIMEOUT_S = 8.0
KEEP_PER_XID = 8  # events kept of each Xid number (the first ones and the last ones)
KEEP_EVENTS = 8  # events kept of each kind (the first ones and the last one)

XID = re.compile(r"NVRM: Xid \((?P<bus>[^)]*)\): (?P<xid>\d+),\s*(?:pid='?(?P<pid>\d+|<unknown>)'?,\s*)?"
                 r"(?:name=(?P<name>[^,]*),\s*)?(?P<text>.*)")
OFF_BUS = re.compile(r"NVRM: .*(?:has fallen off the bus|fallen off the bus and is not responding)")
NO_MEMORY = "NV_ERR_NO_MEMORY"
OOM = re.compile(r"Out of memory: Killed process (?P<pid>\d+) \((?P<name>[^)]*)\)")
STAMP = re.compile(r"^\s*\[\s*(?P<t>\d+\.\d+)\]\s*")


def _uptime() -> Optional[float]:
    try:
        with open("/proc/uptime", encoding="ascii") as fh:
            return float(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _restrict() -> Optional[int]:
    try:
        with open("/proc/sys/kernel/dmesg_restrict", encoding="ascii") as fh:
            return int(fh.read().strip())
    except (OSError, ValueError):
        return None


def read_kmsg(path: str = KMSG, budget_s: float = READ_S) -> tuple[list[tuple[Optional[float], str]], str, bool]:
    """(lines with their time since boot, why nothing was read, whether the read stopped at its bound).
    Each read of /dev/kmsg returns one record, ``prio,seq,usec,flags;text``; EAGAIN ends the buffer."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        why = {errno.EPERM: "permission denied (kernel.dmesg_restrict)", errno.EACCES: "permission denied",
               errno.ENOENT: "not present"}.get(exc.errno, f"{type(exc).__name__}: {exc.strerror}")
        return [], why, False
    out: list[tuple[Optional[float], str]] = []
    size, t0, cut = 0, time.monotonic(), False
    try:
        while True:
            try:
                record = os.read(fd, 8192)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # records overwritten while reading: go on from the next one
                    continue
                if exc.errno == errno.EINVAL:
                    continue
                return out, f"{type(exc).__name__}: {exc.strerror}", cut
            if not record:
                break
            head, _, text = record.decode("utf-8", errors="replace").partition(";")
            fields = head.split(",")
            when = int(fields[2]) / 1e6 if len(fields) > 2 and fields[2].isdigit() else None
            out.append((when, text.split("\n", 1)[0]))
            size += len(record)
            if size > MAX_BYTES or len(out) >= MAX_LINES or time.monotonic() - t0 > budget_s:
                cut = True
                break
    finally:
        os.close(fd)
    return out, "" if out else "empty", cut


def read_command(cmd: list[str]) -> tuple[list[tuple[Optional[float], str]], str, bool]:
    """A command's lines (``[ 12.345] text``), bounded; why it gave none."""
    run = run_bounded(cmd, COMMAND_TIMEOUT_S, merge_stderr=False)
    if run.error:
        return [], "not installed" if "No such file" in run.error else run.error, False
    if run.timed_out:
        return [], f"did not finish within {COMMAND_TIMEOUT_S:g} s", False
    lines = run.stdout.splitlines()
    if run.returncode == 0 and not lines and cmd[0] == "journalctl":
        return [], ("no kernel lines for this boot (the journal shows them to root and to the adm and "
                    "systemd-journal groups; journald may not run here)"), False
    if run.returncode != 0 or not lines:
        why = (run.stderr.strip().splitlines() or run.stdout.strip().splitlines() or [f"exit {run.returncode}"])[-1]
        return [], why[:200], False
    out = []
    for line in lines[:MAX_LINES]:
        stamp = STAMP.match(line)
        if stamp:
            out.append((float(stamp.group("t")), line[stamp.end():]))
        else:
            out.append((None, line))
    return out, "", run.cut or len(lines) > MAX_LINES


SOURCES = (
    ("/dev/kmsg", None),
    ("journalctl -k -b", ["journalctl", "-k", "-b", "--no-pager", "-q", "-o", "short-monotonic"]),
    ("dmesg", ["dmesg"]),
)


def parse(lines: Iterable[tuple[Optional[float], str]]) -> KernelLog:
    """The driver's lines of a log: every Xid counted (a few of each kept); NV_ERR_NO_MEMORY, the OOM killer's
    kills and a GPU fallen off the bus said without an Xid (NVIDIA/NVSentinel#155), counted and a few kept."""
    log = KernelLog()
    by_xid: dict[int, list[XidEvent]] = {}
    by_kind: dict[str, list[KernelEvent]] = {}
    for when, line in lines:
        log.lines += 1
        if "NVRM" in line:
            log.nvrm_lines += 1
        found = XID.search(line)
        if found:
            xid = int(found.group("xid"))
            pid = found.group("pid")
            event = XidEvent(xid=xid, bus=found.group("bus"), text=found.group("text").strip()[:300],
                             pid=int(pid.strip("'")) if pid and pid.strip("'").isdigit() else None,
                             process=(found.group("name") or "").strip().strip("'") or None, uptime_s=when)
            if event.process == "<unknown>":
                event.process = None
            log.xid_counts[str(xid)] = log.xid_counts.get(str(xid), 0) + 1
            kept = by_xid.setdefault(xid, [])
            if len(kept) < KEEP_PER_XID:
                kept.append(event)
            else:
                kept[-1] = event  # the first ones and the latest
            continue
        kind, pid, name = None, None, None
        if NO_MEMORY in line:
            kind = "nv_err_no_memory"
        elif OFF_BUS.search(line):
            kind = "fallen_off_bus"
        elif oom := OOM.search(line):
            kind, pid, name = "oom_kill", int(oom.group("pid")), oom.group("name")
        if kind:
            log.event_counts[kind] = log.event_counts.get(kind, 0) + 1
            event = KernelEvent(kind=kind, text=line.strip()[:300], uptime_s=when, pid=pid, process=name)
            kept = by_kind.setdefault(kind, [])
            if len(kept) < KEEP_EVENTS:
                kept.append(event)
            else:
                kept[-1] = event
    log.xids = [e for xid in sorted(by_xid) for e in by_xid[xid]]
    log.events = [e for kind in sorted(by_kind) for e in by_kind[kind]]
    return log


@reader("kernel.log")
def read_kernel_log(ctx: ReadContext) -> KernelLog:
    """This boot's kernel log (/dev/kmsg, else journalctl -k -b, else dmesg), bounded: the NVIDIA
    driver's Xid lines, NV_ERR_NO_MEMORY and the OOM killer's kills."""
    tried: dict[str, str] = {}
    for name, cmd in SOURCES:
        lines, why, cut = read_kmsg() if cmd is None else read_command(cmd)
        if lines:
            log = parse(lines)
            log.read, log.source, log.tried, log.truncated = True, name, tried, cut
            log.dmesg_restrict, log.uptime_s = _restrict(), _uptime()
            return log
        tried[name] = why
    return KernelLog(read=False, tried=tried, dmesg_restrict=_restrict(), uptime_s=_uptime())
