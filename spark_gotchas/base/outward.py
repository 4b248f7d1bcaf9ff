"""The one way out: everything the suite prints or writes leaves through this module.

Strings from outside the suite (process command lines, file names given on the command line, the
fields of a snapshot or report, package metadata, environment and CI variables, exception texts)
reach a terminal, a JSON document or a file only after :mod:`spark_gotchas.base.scrub` masked their
credentials and :mod:`spark_gotchas.base.text` escaped their control characters and line breaks (CR,
LF, U+0085, U+2028, U+2029 …): one string stays on one line and cannot forge a ``G4 PASS:`` line.

- :func:`line`: one line of terminal text (a line break inside it shows as ``\\x0a``);
- :func:`quoted`: a :func:`line` that sits inside another (a verdict's finding): white space runs
  folded, a G-line's head in it escaped, so no row of a wrapped line reads as a G-line;
- :func:`document`: a JSON-ready copy whose every string, key and value, is a :func:`line`;
- :func:`record`: a JSON-ready copy with credentials masked and strings kept as read, for the files
  the suite reads back (the snapshot, the JSON report), whose JSON encoding escapes every control;
- :func:`say`, :func:`say_json`: the writers of every command's stdout and stderr;
- :func:`terminal`: a line in pytest's terminal (the G-line block, progress lines);
- :class:`Guarded`: the run's stdout, for what pytest itself prints there;
- :func:`finish`: the last flush of stdout and stderr, with which every command and run ends;
- :class:`ArgumentParser`: argparse whose usage, help and errors are written by :func:`say`.

``tests/test_outward.py`` reads every module and fails on a print or a write to stdout or stderr
that does not go through here.
"""

from __future__ import annotations

import os
import sys
from typing import IO, Any, Iterable, Optional

from ..microbench import _cli
from . import scrub, serial
from .text import SHOWN_CHARS, folded, printable

LINE_CHARS = 4 * SHOWN_CHARS  # the longest line a door prints: a finding cut at SHOWN_CHARS fits whole
_WORD_ENDS = (" ", "\t", "\n", ",", ";", "&", "}", "]", ")")  # where no credential shape goes on past


def line(text: object, secrets: Optional[Iterable[str]] = None, limit: int = LINE_CHARS) -> str:
    """``text`` as one line for a terminal: credentials masked, control characters escaped, at most
    ``limit`` characters kept (``… (N more characters)``; 0: all)."""
    text = str(text)
    if limit and len(text) > 2 * limit:  # what is cut is not masked first (a 24 MB reading)
        # The part masked ends before the last word that reaches past twice the limit, so no
        # credential is cut in two: what is shown holds only whole words, masked whole.
        end = max((text.rfind(sep, 0, 2 * limit) for sep in _WORD_ENDS), default=0) + 1
        shown = printable(scrub.mask_text(text[:end], secrets), limit=0)
        more = len(text) - end + max(0, len(shown) - limit)
        return f"{shown[:limit]}… ({more} more characters)"
    return printable(scrub.mask_text(text, secrets), limit=limit)


def quoted(text: object, limit: int = SHOWN_CHARS) -> str:
    """Text that quotes strings from outside, for a place inside a line (a verdict's finding, a
    field of the platform line): a :func:`line` of at most ``limit`` characters, its white space
    runs folded and any G-line head in it escaped (:func:`spark_gotchas.base.text.folded`): whatever the
    terminal's width, no row of it reads as a G-line of its own."""
    return folded(line(text, limit=limit))


def field(text: object, room: int) -> str:
    """One field from outside inside a line (a GPU's name in the platform line), bounded where it
    is printed: :func:`quoted`, then at most ``room`` characters ending in ``…`` (masked before the cut)."""
    return scrub.clip(quoted(text, limit=4 * room + 64), room)


def document(obj: Any, secrets: Optional[Iterable[str]] = None) -> Any:
    """A copy of a JSON-ready ``obj`` whose every string, dictionary keys included, is one whole
    :func:`line` (not cut short): what a command prints as JSON, a consumer may print as it is."""
    return scrub.scrub(obj, secrets, then=lambda masked: printable(masked, limit=0))


def record(obj: Any) -> Any:
    """A copy of ``obj`` with credentials masked and strings otherwise kept as read: a snapshot
    replays what was recorded (a process named ``vllm\\nG4`` stays so, escaped wherever shown)."""
    return scrub.scrub(obj)


def markdown(text: str) -> str:
    """A Markdown document with its credentials masked. Its maker writes the structure and passes
    each value from outside through :func:`spark_gotchas.outputs.summary_md.inline` (Markdown, HTML and
    control characters escaped, one line)."""
    return scrub.mask_text(text)


WRITE_FAILED = _cli.WRITE_FAILED  # the exit status of a command whose output could not be written (never 1: a finding)
_write = _cli.write
finish = _cli.finish  # the exit status after the last flush of stdout and stderr (see microbench._cli.finish)


def standard_streams() -> None:
    """stdin, stdout and stderr opened on /dev/null where the command started with one closed
    (``<&-``, ``>&-``, ``2>&-``, a service manager's start): pytest needs all three (it ends in an
    internal error on a missing one, and Python then exits 1 without a word); what is written to a
    closed one goes nowhere, as the shell asked, and the exit status still tells."""
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        try:
            os.fstat(fd)
        except OSError:  # closed: the lowest free descriptor is this one, as the three are opened in order
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
        if getattr(sys, name) is None:
            setattr(sys, name, open(fd, "r" if fd == 0 else "w", closefd=False,
                                    errors="backslashreplace" if fd == 2 else None))


def say(*lines: object, err: bool = False) -> None:
    """Each of ``lines`` as one :func:`line` on stdout (stderr with ``err``)."""
    values = scrub.secret_values()
    _write(sys.stderr if err else sys.stdout, "".join(line(text, values) + "\n" for text in lines))


def say_json(obj: Any) -> None:
    """``obj`` as indented JSON on stdout, every string a :func:`line` (the encoder escapes the rest)."""
    _write(sys.stdout, serial.dumps(document(obj), indent=1) + "\n")


def terminal(reporter: Any, text: str, **markup: bool) -> None:
    """One :func:`line` in pytest's terminal, in ``markup``'s colours."""
    reporter.write_line(line(text), **markup)


class Guarded:
    """A stream whose failed write ends its output, not the program: a pipe its reader closed
    (``… | head``) quietly, any other failure (a full disk under ``> out.txt``) with one line on
    stderr. For writers that are not the suite's own (pytest's terminal): :attr:`failed` tells the
    caller to exit with :data:`WRITE_FAILED`."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.failed = False
        self._lost = False

    def write(self, text: str) -> int:
        if not self._lost:
            try:
                return self.stream.write(text)
            except OSError as exc:
                self._lose(exc)
        return len(text)

    def flush(self) -> None:
        if not self._lost:
            try:
                self.stream.flush()
            except OSError as exc:
                self._lose(exc)

    def _lose(self, exc: OSError) -> None:
        self._lost = True
        _cli._drop(self.stream)  # what its buffer holds goes nowhere: the flush at exit has nothing to fail on
        if not isinstance(exc, BrokenPipeError):
            self.failed = True
            _cli.tell_write_failed(exc)

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding …: the stream's own
        return getattr(self.stream, name)


class ArgumentParser(_cli.ArgumentParser):
    """argparse with its usage, help and error messages written by :func:`say`: an argument that
    argparse echoes (``invalid float value: 'hf_…'``) is masked and stays on its line."""

    def _say(self, *lines: str, err: bool = False) -> None:
        say(*lines, err=err)
