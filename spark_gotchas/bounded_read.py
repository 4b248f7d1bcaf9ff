"""Reading a file someone named on the command line, without trusting it to end.

``/dev/zero`` never ends, a FIFO with no writer blocks ``open`` for ever, a 200 MB file is not a
config. :func:`read_bytes` opens without blocking, refuses anything that is not a regular file
before reading a byte, and reads at most ``limit + 1`` bytes, so none of these can hang a run or
fill its memory.
"""

from __future__ import annotations

import os
import stat

from .units import describe_size


class Refused(ValueError):
    """A file this suite will not read; the message says what it is or how big, in a few words."""




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


def read_bytes(path: str | os.PathLike, limit: int) -> bytes:
    """The file's bytes; :class:`Refused` when it is no regular file or holds more than ``limit``.

    Other problems (missing, no permission) raise the OSError ``open`` gives.
    """
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
            chunk = os.read(fd, min(1 << 20, limit + 1 - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        if got > limit:  # it grew while being read
            raise Refused(too_large)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_json(path: str | os.PathLike, limit: int) -> object:
    """The JSON document in ``path``, read as :func:`read_bytes` reads; :class:`Refused` also for
    text that is not UTF-8 or JSON, or is nested too deeply to parse. OSError as ``open`` gives."""
    import json

    data = read_bytes(path, limit)
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise Refused(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise Refused(f"not JSON: {exc}") from None
    except RecursionError:
        raise Refused("nested too deeply to read") from None
