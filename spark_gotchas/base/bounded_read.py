"""The one way the suite reads a file: a regular file, within a size bound and a time bound.

Every file a command reads that the suite did not just make itself (a snapshot, a JSON report, a
baseline, a launch config, the soak's heartbeat and CSV, G8's cache, a rank's result) comes in
here, as one of the :data:`KINDS` below, each with its own size bound. ``/dev/zero`` never ends,
a FIFO with no writer blocks ``open`` for ever, a 2 GB file is no heartbeat, and a file on a
stalled network file system blocks ``read`` in the kernel. So :func:`read_bytes`:

- opens without blocking and refuses anything that is not a regular file before reading a byte
  (a link to a device or a FIFO included: the file opened is what is checked);
- reads at most the kind's bound plus one byte, so a file that grows while read is caught too;
- does all of that in a reader thread it waits for at most the kind's seconds: a read that hangs
  in the kernel is given up (its thread is left to finish on its own) and is a :class:`Refused`.

:func:`read_json` also refuses text that is not UTF-8 or JSON, nested more than :data:`MAX_DEPTH`
levels, holding a key twice in an object, or holding a number Python will not parse; NaN and
Infinity are parsed and left to the typed readings (:mod:`spark_gotchas.base.serial`) and the tools,
which name the field that holds one.
"""

from __future__ import annotations

import os
import queue
import stat
import threading
from dataclasses import dataclass
from typing import Any, Callable

from . import scrub
from .units import describe_size

MiB = 1 << 20


class Refused(ValueError):
    """A file this suite will not read; the message says what it is or how big, in a few words."""


@dataclass(frozen=True)
class Kind:
    """What a file is to the suite, and the bounds it is read within."""

    what: str  # "snapshot", "soak heartbeat": how a message names it
    limit: int  # bytes
    seconds: float = 10.0  # the whole read, open included


SNAPSHOT = Kind("snapshot", 64 * MiB)  # a snapshot of a long soak is a few MiB
REPORT = Kind("JSON report", 256 * MiB)  # a report keeps each test's output: larger than a snapshot
HEARTBEAT = Kind("soak heartbeat", 64 << 10)  # one small JSON object
SOAK_CSV = Kind("soak CSV", 128 * MiB)  # a row a second: 8 hours is about 6 MiB
LAUNCH_CONFIG = Kind("launch config", 1 * MiB)
GITHUB_CACHE = Kind("G8 cache", 4 * MiB)  # at most 5 pages of issues
RANK_RESULT = Kind("rank result", 1 * MiB)  # one rank's collective timings (G10)
JUNIT_XML = Kind("JUnit XML report", 256 * MiB)  # pytest's own report of the run, rewritten with the G-lines
APPENDED = Kind("file appended to", 64 * MiB)  # a Markdown summary (GitHub keeps 1 MiB of a step's)
SERVER_CONFIG = Kind("server config", 1 * MiB)  # a config file a GPU server's command line names (G6)
PROCESS_ENVIRONMENT = Kind("process environment", 4 * MiB)  # /proc/PID/environ of a GPU server (G6)
KINDS = (SNAPSHOT, REPORT, HEARTBEAT, SOAK_CSV, LAUNCH_CONFIG, GITHUB_CACHE, RANK_RESULT, JUNIT_XML, APPENDED,
         SERVER_CONFIG, PROCESS_ENVIRONMENT)


def kind_of(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISFIFO(mode):
        return "a FIFO or pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a plain file"


def read_bytes(path: str | os.PathLike, kind: Kind) -> bytes:
    """The file's bytes; :class:`Refused` when it is no regular file, holds more than the kind's
    bound or is not read within its seconds. Other problems (missing, no permission) raise the
    OSError ``open`` gives."""
    box: dict[str, Any] = {}

    def read() -> None:
        try:
            box["data"] = _read(path, kind.limit)
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc

    if not _in_a_reader(read, kind.seconds):
        raise Refused(f"not read within {kind.seconds:g} s (a stalled file system or device?)")
    if "error" in box:
        raise box["error"]
    return box["data"]


class _Reader(threading.Thread):
    """A daemon thread that runs reads handed to it, one at a time, and then waits for the next. A
    read that never returns keeps its thread for good (a daemon: it never holds the exit); the next
    read gets another. Reusing threads keeps a thousand reads (fleet) from starting a thousand."""

    def __init__(self) -> None:
        super().__init__(name="bounded_read", daemon=True)
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.start()

    def run(self) -> None:
        while True:
            job, done = self.jobs.get()
            try:
                job()
            finally:
                done.set()
            _IDLE.put(self)


_IDLE: queue.SimpleQueue = queue.SimpleQueue()  # readers waiting for a read


def _in_a_reader(job: Callable[[], None], seconds: float) -> bool:
    """Run ``job`` in an idle reader thread (or a new one); False when it did not finish in time."""
    try:
        reader = _IDLE.get_nowait()
    except queue.Empty:
        reader = _Reader()
    done = threading.Event()
    reader.jobs.put((job, done))
    return done.wait(seconds)


def _read(path: str | os.PathLike, limit: int) -> bytes:
    # O_NONBLOCK: opening a FIFO for reading returns at once instead of waiting for a writer.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)  # the file opened, not whatever the name points at by now
        if not stat.S_ISREG(info.st_mode):
            raise Refused(f"not a regular file ({kind_of(info.st_mode)})")
        too_large = f"larger than {describe_size(limit)}"
        if info.st_size > limit:
            raise Refused(too_large)
        chunks, got = [], 0
        while got <= limit:
            chunk = os.read(fd, min(MiB, limit + 1 - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        if got > limit:  # it grew while being read
            raise Refused(too_large)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text(path: str | os.PathLike, kind: Kind) -> str:
    """The file as UTF-8 text, read as :func:`read_bytes` reads; :class:`Refused` for other bytes."""
    return _utf8(read_bytes(path, kind))


def _utf8(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Refused(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def read_json(path: str | os.PathLike, kind: Kind) -> object:
    """The JSON document in ``path``, read as :func:`read_bytes` reads; :class:`Refused` also for
    text that is not UTF-8 or JSON (:func:`parse_json`). OSError as ``open`` gives."""
    return read_json_sized(path, kind)[0]


def read_json_sized(path: str | os.PathLike, kind: Kind) -> tuple[object, int]:
    """:func:`read_json`, and the file's size in bytes: a reader that learns the document's kind
    from its contents can hold it to that kind's bound without reading the file again."""
    data = read_bytes(path, kind)
    return parse_json(_utf8(data)), len(data)


MAX_DEPTH = 100  # levels of nesting a JSON document may have: the suite's own are 15 deep at most


class _Duplicate(ValueError):
    pass


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) < len(pairs):
        seen: set[str] = set()
        twice = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise _Duplicate(twice)
    return obj


def _shown_key(key: str) -> str:
    """A key from outside, named in a line: masked before it is cut."""
    return repr(scrub.clip(key, 60))


def parse_json(text: str) -> Any:
    """``text`` as JSON, or :class:`Refused` naming why not in a few words: not JSON; nested more
    than :data:`MAX_DEPTH` levels (a depth is a bound like a size: every walk after this one may
    then recurse, a document 990 levels deep ended in a RecursionError far from here); an object
    holding a key twice (tools disagree on which value a duplicate key has: the suite reads no such
    file rather than pick one); a number of more digits than Python parses (4300). NaN and Infinity
    are parsed and left to the typed readings (:mod:`spark_gotchas.base.serial`) and the tools, which
    name the field that holds one."""
    import json

    try:
        doc = json.loads(text, object_pairs_hook=_object)
    except json.JSONDecodeError as exc:
        raise Refused(f"not JSON: {exc}") from None
    except RecursionError:
        raise Refused("nested too deeply to read") from None
    except _Duplicate as exc:
        raise Refused(f"not JSON this suite reads: an object holds the key {_shown_key(str(exc))} twice") from None
    except ValueError as exc:  # an integer of more than sys.get_int_max_str_digits() digits
        raise Refused(f"not JSON this suite reads: {str(exc).split(';')[0]}") from None
    if _deeper_than(doc, MAX_DEPTH):
        raise Refused("nested too deeply to read")
    return doc


def _deeper_than(doc: Any, limit: int) -> bool:
    """Whether ``doc`` nests more than ``limit`` arrays and objects, level by level (no recursion)."""
    level, depth = [doc], 0
    while level:
        depth += 1
        if depth > limit:
            return True
        inner = []
        for node in level:
            if isinstance(node, dict):
                inner.extend(v for v in node.values() if isinstance(v, (dict, list)))
            elif isinstance(node, list):
                inner.extend(v for v in node if isinstance(v, (dict, list)))
        level = inner
    return False
