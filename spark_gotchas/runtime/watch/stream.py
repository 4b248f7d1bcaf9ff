"""The job's stdout and stderr: passed to it untouched, and read for its rate without changing a byte.

Without ``--rate-regex`` the job gets the watch's own descriptors and nothing is read. With it, each
of stdout and stderr is given a stream of the same kind as the one the watch was given, so the job
behaves as it would without the watch (a progress bar redraws on a terminal, Python buffers by
blocks into a pipe or a file, colours stay on or off):

- a terminal: a pseudo-terminal of the terminal's size and modes, its output processing turned off
  (the job's ``\\n`` reaches the terminal as ``\\n``, and the terminal does with it what it always
  does); its size follows the terminal's within a quarter of a second;
- a regular file (``> train.log``): the file itself; the watch reads what the job appends to it;
- anything else (a pipe, ``/dev/null``, a socket): a pipe;
- a closed descriptor: closed for the job too.

stdout and stderr that are one file (``2>&1``, one terminal) share one stream, so the order of their
lines is kept. What the job writes is copied as read: bytes, binary and lines of any length included
(it is the job's own output, not the suite's, so :mod:`spark_gotchas.base.outward` does not touch it).
:class:`RateScanner` reads a copy of it, line by line (``\\r`` ends a line too: tqdm redraws with it).
"""

from __future__ import annotations

import collections
import errno
import fcntl
import os
import re
import select
import stat
import struct
import termios
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

CHUNK = 1 << 16
LINE_LIMIT = 1 << 16  # a line longer than this is read for its first 64 KiB only
TAIL_LIMIT = 4 << 20  # the most of a log file read in one poll (a burst beyond it is skipped)
POLL_S = 0.25  # how often a terminal's size and a log file are looked at
DRAIN_S = 2.0  # after the job exits: how long what its leftovers still write is copied
BATCH_S = 0.05  # a chatty log is copied at most 20 times a second (its lines wait 50 ms at most) ...
BATCH_BELOW = 4096  # ... while it writes less than this between two copies; more flows at once
PIPE_BYTES = 1 << 20  # the job's pipe holds this much while the watch waits (Linux's unprivileged maximum)


class RateScanner:
    """The rate a log prints, from ``pattern``'s one group, as lines go by: (monotonic time, value).

    Thread-safe: the copier feeds it, the sampler takes what arrived since its last tick."""

    def __init__(self, pattern: re.Pattern[str], keep: int = 4096):
        self.pattern = pattern
        self._carry = b""
        self._skipping = False  # inside a line longer than LINE_LIMIT: its rest is not read
        self._values: collections.deque[tuple[float, float]] = collections.deque(maxlen=keep)
        self._lock = threading.Lock()
        self.lines = 0
        self.unit = ""  # what the log writes beside the rate, from the first match

    def feed(self, data: bytes) -> None:
        parts = re.split(rb"[\r\n]", data)
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            if last:  # no line end yet: keep it for the next chunk (its start only, when it runs long)
                if not self._skipping:
                    self._carry += part
                    if len(self._carry) > LINE_LIMIT:
                        self._line(self._carry[:LINE_LIMIT])
                        self._carry, self._skipping = b"", True
                continue
            if self._skipping:
                self._skipping = False
                self._carry = b""
                continue
            line, self._carry = self._carry + part, b""
            self._line(line[:LINE_LIMIT])

    def _line(self, raw: bytes) -> None:
        if not raw:
            return
        self.lines += 1
        match = self.pattern.search(raw.decode("utf-8", "replace"))
        if match is None:
            return
        try:
            value = float(match.group(1).replace(",", ""))
        except (TypeError, ValueError, IndexError):
            return
        if not self.unit:
            self.unit = unit_of(match)
        if value == value and value not in (float("inf"), float("-inf")) and value >= 0:
            with self._lock:
                self._values.append((time.monotonic(), value))

    def take(self) -> list[float]:
        """The values read since the last call, oldest first."""
        with self._lock:
            out = [v for _, v in self._values]
            self._values.clear()
        return out


def unit_of(match: re.Match[str]) -> str:
    """The words a log writes beside its rate: after it (``412.3 it/s``), else before it (``tokens/s: 412``)."""
    after = match.string[match.end(1):match.end(0)].strip(" :=,;[]()")
    before = match.string[match.start(0):match.start(1)].strip(" :=,;[]()")
    unit = after or before
    return unit if 0 < len(unit) <= 16 and unit.isprintable() else ""


@dataclass
class Route:
    """Where one of the job's descriptors goes (both, when stdout and stderr are one file)."""

    fds: tuple[int, ...]  # the job's descriptors this route serves (1, 2 or both)
    kind: str  # "pass" (the watch's own descriptor, nothing read), "pty", "pipe" or "file"
    dest: int  # the watch's descriptor the job's output goes to
    child_end: Optional[int] = None  # what the job gets in place of fds (pty, pipe)
    read_end: Optional[int] = None  # what the watch reads: the pty's master, the pipe, the file
    offset: int = 0  # file: where reading goes on
    note: str = ""  # why nothing is read here, if nothing is
    open: bool = field(default=True)


def _identity(info: os.stat_result) -> tuple[int, int, int]:
    return (info.st_dev, info.st_ino, info.st_rdev)


def _stat(fd: int) -> Optional[os.stat_result]:
    try:
        return os.fstat(fd)
    except OSError:
        return None


def plan(read: bool) -> list[Route]:
    """The routes of fds 1 and 2 (:func:`open_routes` makes their streams)."""
    if not read:
        return [Route((1,), "pass", 1), Route((2,), "pass", 2)]
    infos = {fd: _stat(fd) for fd in (1, 2)}
    if infos[1] is not None and infos[2] is not None and _identity(infos[1]) == _identity(infos[2]):
        groups = [(1, 2)]
    else:
        groups = [(1,), (2,)]
    routes = []
    for fds in groups:
        info = infos[fds[0]]
        if info is None:
            routes.append(Route(fds, "pass", fds[0], note=f"fd {fds[0]} is closed"))
        elif stat.S_ISREG(info.st_mode):
            routes.append(Route(fds, "file", fds[0]))
        elif os.isatty(fds[0]):
            routes.append(Route(fds, "pty", fds[0]))
        else:
            routes.append(Route(fds, "pipe", fds[0]))
    return routes


def open_routes(routes: list[Route]) -> list[str]:
    """Make each route's stream; a route that cannot be made passes its descriptor through (its
    output is not read: the returned notes say why)."""
    notes = []
    for route in routes:
        try:
            if route.kind == "pty":
                _open_pty(route)
            elif route.kind == "pipe":
                route.read_end, route.child_end = os.pipe()
                try:
                    fcntl.fcntl(route.read_end, getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_BYTES)
                except OSError:
                    pass
            elif route.kind == "file":
                route.read_end = os.open(f"/proc/self/fd/{route.dest}", os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
                route.offset = os.fstat(route.read_end).st_size
        except OSError as exc:
            for fd in (route.read_end, route.child_end):
                _close(fd)
            route.read_end = route.child_end = None
            note = f"fd {route.fds[0]} ({route.kind}) not read: {exc.strerror or exc}"
            route.kind, route.note = "pass", note
            notes.append(note)
    return notes


def _open_pty(route: Route) -> None:
    master, slave = os.openpty()
    route.read_end, route.child_end = master, slave
    try:
        attrs = termios.tcgetattr(route.dest)
        attrs[1] &= ~termios.OPOST  # the job's bytes reach the terminal as written
        termios.tcsetattr(slave, termios.TCSANOW, attrs)
    except termios.error:
        pass
    copy_size(route)


def copy_size(route: Route) -> None:
    """The terminal's rows and columns onto the job's pseudo-terminal (``stty size`` reads them)."""
    if route.kind != "pty" or route.read_end is None:
        return
    empty = struct.pack("HHHH", 0, 0, 0, 0)
    try:  # the master sets the size as well as the job's end does
        size = fcntl.ioctl(route.dest, termios.TIOCGWINSZ, empty)
        if size != fcntl.ioctl(route.read_end, termios.TIOCGWINSZ, empty):
            fcntl.ioctl(route.read_end, termios.TIOCSWINSZ, size)
    except OSError:
        pass


def _close(fd: Optional[int]) -> None:
    if fd is not None:
        try:
            os.close(fd)
        except OSError:
            pass


def write_all(fd: int, data: bytes) -> bool:
    """Write every byte (waiting where the descriptor is non-blocking); False when it cannot be written
    (a pipe whose reader left, a full disk)."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view):]
        except BlockingIOError:
            select.select([], [fd], [], 1.0)
        except InterruptedError:
            continue
        except OSError:
            return False
    return True


class Copier:
    """One thread copying every pty and pipe route to its destination and reading log files, feeding
    ``scanner``; :meth:`finish` drains what is left once the job has exited."""

    def __init__(self, routes: list[Route], scanner: Optional[RateScanner], on_problem: Callable[[str], None]):
        self.routes = [r for r in routes if r.kind in ("pty", "pipe", "file") and r.read_end is not None]
        self.scanner = scanner
        self.on_problem = on_problem
        self.copied = 0
        self._done = threading.Event()
        self._exited_at: Optional[float] = None
        self._thread = threading.Thread(target=self._loop, name="watch-copier", daemon=True)

    def after_spawn(self) -> Copier:
        """Close the job's ends here (else the pipe never ends), then start copying."""
        for route in self.routes:
            if route.kind in ("pty", "pipe"):
                _close(route.child_end)
                route.child_end = None
        if self.routes:
            self._thread.start()
        return self

    def _loop(self) -> None:
        streams = [r for r in self.routes if r.kind in ("pty", "pipe")]
        files = [r for r in self.routes if r.kind == "file"]
        next_poll = 0.0
        while True:
            live = [r for r in streams if r.open]
            if not live and (not files or self._exited_at is not None):
                if files:
                    self._poll_files(files)
                break
            now = time.monotonic()
            if self._exited_at is not None and now - self._exited_at > DRAIN_S:
                break
            timeout = max(0.0, next_poll - now)
            ready: list[int] = []
            if live:
                try:
                    ready = select.select([r.read_end for r in live], [], [], timeout)[0]
                except (OSError, ValueError):
                    break
            else:
                time.sleep(timeout)
            copied = sum(self._copy(route) for route in live if route.read_end in ready)
            if 0 < copied < BATCH_BELOW and self._exited_at is None:
                time.sleep(BATCH_S)  # let a chatty log's next lines come: one copy for several
            if time.monotonic() >= next_poll:
                next_poll = time.monotonic() + POLL_S
                for route in streams:
                    copy_size(route)
                self._poll_files(files)
                if self._exited_at is not None and not ready:
                    break  # the job is gone and nothing more came within a poll
        for route in self.routes:
            _close(route.read_end)
            route.read_end = None
        self._done.set()

    def _copy(self, route: Route) -> int:
        """Copy what one stream holds now; the bytes copied."""
        try:
            data = os.read(route.read_end, CHUNK)
        except OSError as exc:
            if exc.errno not in (errno.EIO, errno.EBADF):  # EIO: every holder of the pty's other end closed it
                self.on_problem(f"reading the job's fd {route.fds[0]}: {exc.strerror or exc}")
            data = b""
        if not data:
            route.open = False
            return 0
        self.copied += len(data)
        if not write_all(route.dest, data):
            # the reader of the watch's own output left (``| head``): the job learns it as it would
            # have, on its next write (a closed pipe; a pty whose master is gone)
            route.open = False
            _close(route.read_end)
            route.read_end = None
            return len(data)
        if self.scanner is not None:
            self.scanner.feed(data)
        return len(data)

    def _poll_files(self, files: list[Route]) -> None:
        for route in files:
            if route.read_end is None:
                continue
            try:
                size = os.fstat(route.read_end).st_size
                if size < route.offset:  # truncated or rotated in place: read from its start
                    route.offset = 0
                if size - route.offset > TAIL_LIMIT:
                    route.offset = size - TAIL_LIMIT
                while route.offset < size:
                    data = os.pread(route.read_end, min(CHUNK, size - route.offset), route.offset)
                    if not data:
                        break
                    route.offset += len(data)
                    if self.scanner is not None:
                        self.scanner.feed(data)
            except OSError as exc:
                self.on_problem(f"reading the job's log file: {exc.strerror or exc}")
                _close(route.read_end)
                route.read_end = None

    def finish(self) -> None:
        """The job has exited: copy what is left (its leftovers' writes for DRAIN_S at most)."""
        self._exited_at = time.monotonic()
        if self._thread.is_alive():
            self._thread.join(DRAIN_S + 2 * POLL_S + 1.0)


def child_fds(routes: list[Route]) -> dict[int, int]:
    """The job's descriptor -> what to put there (routes that pass need nothing)."""
    out = {}
    for route in routes:
        if route.kind in ("pty", "pipe") and route.child_end is not None:
            for fd in route.fds:
                out[fd] = route.child_end
    return out
