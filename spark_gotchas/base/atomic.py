"""Whole-file writes that a reader never sees half done, and two writers never clobber.

``write_text`` writes a unique temporary file in the target's own folder, fsyncs it and renames
it over the target (``os.replace``, atomic on one file system). A reader at any moment finds
the old content or the new, never an empty or torn file; two processes writing the same path
each replace it whole, and the last rename wins. A killed run leaves the old file (and at most
a stray ``.NAME.*.tmp`` beside it, never under the target's name).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from . import bounded_read

OWN_FD = re.compile(r"^/(?:proc/(self|thread-self|\d+)|dev)/fd/(\d+)$")
FIFO_WAIT_S = 10.0  # how long a FIFO may go without a reader before the write fails


def write_text(path: str | os.PathLike, text: str, *, append: bool = False, encoding: str = "utf-8",
               fsync: bool = True, parents: bool = False) -> Path:
    """Replace ``path`` with ``text`` (``append``: with its old content followed by ``text``).

    - a symlink keeps pointing where it did: its target is written, unless it is another user's
      link in a sticky world-writable folder such as ``/tmp`` (an OSError, EPERM, as the kernel's
      ``fs.protected_symlinks`` would refuse it);
    - a path that exists and is no regular file (``/dev/stdout``, a FIFO, a terminal) is written
      straight through; a FIFO nobody opens for reading within FIFO_WAIT_S is an OSError
      (ENXIO), never a hang;
    - a directory raises IsADirectoryError;
    - any failure removes the temporary file and raises the OSError, naming ``path``.

    ``append`` reads the old content and replaces the file with old + new, so a reader never sees
    a half-appended file; appends to one folder hold its lock (``flock`` on the folder) from the
    read to the rename, so two runs appending at the same moment both keep their addition.
    ``fsync=False`` skips the flush to disk (frequent small writes such as a heartbeat).
    ``parents``: create the folders on the way first (an OSError says which could not be).
    """
    p = Path(path)
    data = text.encode(encoding)
    if p.is_dir():
        raise IsADirectoryError(errno.EISDIR, "Is a directory", str(p))
    if parents and not p.parent.exists():
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise type(exc)(exc.errno, f"{exc.strerror} (cannot create the folder {p.parent})", str(p)) from None
    foreign = _foreign_link(p)
    if foreign:
        raise OSError(errno.EPERM, f"{foreign} is a link another user put in a shared folder: not followed", str(p))
    if _write_through(p):
        _write_through_to(p, data, append)
        return p
    target = Path(os.path.realpath(p))  # a symlink keeps pointing at the file it named
    if append:
        with _folder_lock(target.parent):
            _replace(target, p, data, append, fsync)
    else:
        _replace(target, p, data, append, fsync)
    if fsync:
        _fsync_dir(target.parent)
    return p


def is_stream(path: str | os.PathLike) -> bool:
    """Whether ``path`` is written through rather than replaced: it exists and is no regular file
    (a FIFO, a terminal), or it names a descriptor (``/dev/stdout``)."""
    return _write_through(Path(path))


def _replace(target: Path, p: Path, data: bytes, append: bool, fsync: bool) -> None:
    """Write a temporary file beside ``target`` and rename it over ``target`` (``p``: the name the
    caller gave, for messages)."""
    try:
        old = bounded_read.read_bytes(target, bounded_read.APPENDED) if append and target.exists() else b""
        mode = stat.S_IMODE(target.stat().st_mode) if target.exists() else 0o666 & ~_umask()
    except bounded_read.Refused as exc:  # the old content is read whole: within its kind's bounds
        raise OSError(errno.EFBIG, f"{exc}: not rewritten", str(p)) from None
    except OSError as exc:
        raise _naming(exc, p) from None
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as exc:
        raise _naming(exc, p, f"cannot create a file in {target.parent}") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(old + data)
            fh.flush()
            if fsync:
                os.fsync(fh.fileno())
        os.chmod(tmp, mode)  # mkstemp makes 0600; the file keeps the mode a plain write would give it
        os.replace(tmp, target)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise _naming(exc, p) from None
        raise


LOCK_WAIT_S = 30.0  # how long an append waits for another run's append to the same folder


@contextlib.contextmanager
def _folder_lock(folder: Path) -> Iterator[None]:
    """Hold ``flock`` on ``folder``: another appender to it waits. One that holds it past
    LOCK_WAIT_S makes this write fail, saying so (appending without the lock could lose a block
    unseen). A folder that cannot be opened or has no locks is written unlocked."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        yield
        return
    try:
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise OSError(errno.EAGAIN, f"another run held the lock of its folder for {LOCK_WAIT_S:g} s",
                                  str(folder)) from None
                time.sleep(0.01)
            except OSError:  # a file system without locks
                break
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _write_through(p: Path) -> bool:
    """No regular file there, or a path through /proc (``/dev/stdout`` -> ``/proc/self/fd/1``).
    A path the system cannot even look at (a name too long, a loop) is not: writing it says why."""
    try:
        return (p.exists() and not p.is_file()) or _own_fd(p) is not None or any(
            hop.startswith("/proc/") for hop in _hops(p))
    except OSError:
        return False


def _foreign_link(p: Path) -> str:
    """A symlink on the way to ``p`` that the kernel's ``fs.protected_symlinks`` would not follow:
    in a sticky world-writable folder (``/tmp``), owned neither by this user nor by the folder's
    owner. Another user's link there could aim this run's output (as root, too) at any file.
    The link's path, or "" when there is none."""
    me = os.geteuid()
    for hop in _hops(p):
        parts = Path(hop).parts
        for depth in range(2, len(parts) + 1):
            link = os.path.join(*parts[:depth])
            try:
                info = os.lstat(link)
                if not stat.S_ISLNK(info.st_mode):
                    continue
                folder = os.stat(os.path.dirname(link))
            except OSError:
                break  # not there (yet): nothing further to follow
            shared = folder.st_mode & stat.S_ISVTX and folder.st_mode & stat.S_IWOTH
            if shared and info.st_uid not in (me, folder.st_uid):
                return link
    return ""


def _hops(p: Path) -> list[str]:
    """The path and each symlink it goes through, as written (not resolved)."""
    hops = [str(p.absolute())]
    while len(hops) < 40 and os.path.islink(hops[-1]):
        hops.append(os.path.join(os.path.dirname(hops[-1]), os.readlink(hops[-1])))
    return hops


def _own_fd(p: Path) -> int | None:
    """N when the path names this process's own descriptor N (``/dev/stdout``, ``/dev/fd/2``)."""
    for hop in _hops(p):
        match = OWN_FD.match(hop)
        if match and (match.group(1) in ("self", "thread-self", None) or match.group(1) == str(os.getpid())):
            return int(match.group(2))
    return None


def _write_through_to(p: Path, data: bytes, append: bool) -> None:
    own = _own_fd(p)
    try:
        if own is not None:  # stdout redirected to a file: write at the shell's offset, on its descriptor
            fd = os.dup(own)
        else:
            fd = _open_for_writing(p, append)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise _naming(exc, p, f"a FIFO that nothing read within {FIFO_WAIT_S:g} s") from None
        raise _naming(exc, p) from None
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    except OSError as exc:
        raise _naming(exc, p) from None
    finally:
        os.close(fd)


def open_for_writing(path: str | os.PathLike, append: bool = False) -> int:
    """A descriptor for writing ``path`` (a FIFO: once it has a reader, within FIFO_WAIT_S)."""
    return _open_for_writing(Path(path), append)


def _open_for_writing(p: Path, append: bool) -> int:
    """Open without blocking: a FIFO with no reader is retried for FIFO_WAIT_S, then ENXIO."""
    deadline = time.monotonic() + FIFO_WAIT_S
    while True:
        try:
            fd = os.open(p, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC | (os.O_APPEND if append else 0))
            break
        except OSError as exc:
            if exc.errno != errno.ENXIO or time.monotonic() >= deadline:
                raise
            time.sleep(0.05)
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)  # then the reader sets the pace
    return fd


def _naming(exc: OSError, p: Path, why: str = "") -> OSError:
    """The same kind of OSError, naming the path the caller asked for (not a temporary file)."""
    reason = exc.strerror or str(exc)
    out = type(exc)(exc.errno, f"{reason} ({why})" if why else reason, str(p))
    return out


def _umask() -> int:
    """The process's umask, read without changing it (/proc/self/status; 022 where unreadable)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def _fsync_dir(folder: Path) -> None:
    """Make the rename itself durable (a power loss keeps the new name); best effort."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
