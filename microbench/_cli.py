"""What every microbenchmark's command line shares: is there torch and a CUDA device to measure, how
its lines and a result as JSON are printed, how a duration reads, and how an error reads in a
result: one line.

Every line a microbenchmark prints goes through :func:`say` (a result as JSON through
:func:`print_json`): a device name or an error text from outside shows its control characters
escaped as :mod:`spark_gotchas.base.text` shows them (this package imports nothing of the suite; a test
keeps the two the same), so it stays on its line. ``spark-gotchas microbench`` puts the suite's
own way out (:func:`spark_gotchas.base.outward.line`, credentials masked too) in :data:`LINE`."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import re
import sys
from typing import IO, Any, Callable, NoReturn, Optional

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhd]?)")
_SECONDS_PER = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
# C0 and C1 controls, DEL, the Unicode line and paragraph separators; every format character
# (Unicode's Cf: the bidirectional overrides, embeddings, isolates and marks, U+061C, zero-width
# spaces and joiners, U+FEFF, the soft hyphen, the tag characters U+E0000-U+E007F …), which reorder
# what a terminal shows or hide text in it, as Trojan-source checks flag them; the blank-looking
# Hangul fillers and the variation selectors U+E0100-U+E01EF, which show nothing; lone surrogates
# (bytes that were not UTF-8, kept by the surrogateescape error handler) and the noncharacters U+FFFE
# and U+FFFF (which XML 1.0 cannot hold). The suite's one escaper: spark_gotchas.base.text shows strings
# with it too (tests/test_outward.py checks every Cf character of the running Python is in it).
UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u115f\u1160\u180e"
    "\u200b-\u200f\u2028-\u202e\u2060-\u206f\u3164\ud800-\udfff\ufeff\uffa0\ufff9-\ufffb\ufffe\uffff"
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0000-\U000e007f\U000e0100-\U000e01ef]")


def _escaped(match: re.Match) -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8: show the byte
        return f"\\x{code - 0xDC00:02x}"
    if code > 0xFFFF:
        return f"\\U{code:08x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def shown(text: object) -> str:
    """``text`` as one line: control characters and line breaks escaped (``\\x1b``, ``\\x0a``)."""
    return UNSAFE.sub(_escaped, str(text))


LINE: Callable[[object], str] = shown  # what makes each printed line safe (see the module's docstring)


WRITE_FAILED = 2  # the exit status of a command whose output could not be written (never 1: a finding)


def write(stream: IO[str], text: str) -> None:
    """``text`` to ``stream`` now. A pipe closed by its reader (``… | head``) ends the output
    quietly, the exit status still tells; any other failure (a full disk under ``> out.txt``) is one
    line on stderr and exit status :data:`WRITE_FAILED`, never a traceback. A character the stream's
    encoding cannot hold is written as its escape (``\\u2265``)."""
    if stream is None:  # started with that descriptor closed: there is nowhere to write
        return
    try:
        try:
            stream.write(text)
        except UnicodeEncodeError:  # a terminal or PYTHONIOENCODING that cannot show a character: escaped
            encoding = stream.encoding or "ascii"
            stream.write(text.encode(encoding, "backslashreplace").decode(encoding))
        stream.flush()
    except OSError as exc:
        _drop(stream)  # what is left in its buffer goes nowhere: the flush at exit has nothing to complain of
        if isinstance(exc, BrokenPipeError):
            return
        if stream is not sys.stderr:
            tell_write_failed(exc)
        raise SystemExit(WRITE_FAILED) from None


_told = False  # whether this process said that its output could not be written (once is enough)


def tell_write_failed(exc: OSError) -> None:
    """The one line on stderr that says stdout could not be written, said once however many writes
    fail after it (the suite's own, pytest's terminal, the flush at exit)."""
    global _told
    if not _told:
        _told = True
        try:
            write(sys.stderr, f"spark-gotchas: could not write its output: {exc.strerror or exc}\n")
        except SystemExit:  # stderr cannot be written either: the exit status is all that is left
            pass


def finish(code: int) -> int:
    """The exit status ``code`` after stdout and stderr are flushed, as the interpreter would flush
    them at exit but handled as :func:`write` handles a failed write: a reader that closed the pipe
    leaves ``code`` as it is, any other failure is one line and :data:`WRITE_FAILED`. Without it a
    buffered stdout (no ``PYTHONUNBUFFERED``, not a terminal) fails in the interpreter's own flush:
    ``Exception ignored … BrokenPipeError`` and exit status 120. Every command ends through here."""
    for stream in (sys.stdout, sys.stderr):
        if stream is None:
            continue
        try:
            stream.flush()
        except ValueError:  # closed by the code that ran: nothing of it is left to write
            continue
        except OSError as exc:
            _drop(stream)
            if isinstance(exc, BrokenPipeError):
                continue
            if stream is not sys.stderr:
                tell_write_failed(exc)
            code = WRITE_FAILED
    return code


def _drop(stream: IO[str]) -> None:
    """Point ``stream``'s descriptor at /dev/null and write out what its buffer holds there, as
    Python's documentation does for SIGPIPE: no later flush (an exit's, a caller's) fails on it,
    even where the descriptor is pointed back at the pipe (pytest's capture restores it)."""
    try:
        fd = stream.fileno()
        null = os.open(os.devnull, os.O_WRONLY)
    except (OSError, ValueError, AttributeError):  # not a file descriptor (a test's StringIO): nothing buffered to drop
        return
    try:
        os.dup2(null, fd)
    except OSError:
        return
    finally:
        os.close(null)
    try:
        stream.flush()
    except (OSError, ValueError):
        pass


def say(*lines: object, err: bool = False) -> None:
    """Each of ``lines`` as one :data:`LINE` on stdout (stderr with ``err``), written at once."""
    write(sys.stderr if err else sys.stdout, "".join(LINE(text) + "\n" for text in lines))


class ArgumentParser(argparse.ArgumentParser):
    """argparse whose usage, help and error messages are written by :func:`say`: a value argparse
    echoes stays on its line, and a full disk is one line and exit 2."""

    def _say(self, *lines: str, err: bool = False) -> None:
        say(*lines, err=err)

    def _say_block(self, text: str, file: Optional[IO[str]]) -> None:
        self._say(*text.rstrip("\n").split("\n"), err=file is sys.stderr)

    def print_usage(self, file: Optional[IO[str]] = None) -> None:
        self._say_block(self.format_usage(), file)

    def print_help(self, file: Optional[IO[str]] = None) -> None:
        self._say_block(self.format_help(), file)

    def _get_values(self, action: argparse.Action, arg_strings: list[str]):
        # ``--opt=--``: Python before 3.13 drops the "--" and hands the option an empty list (a
        # TypeError later); the value is the text "--", refused or taken like any other
        if action.nargs is None and arg_strings == ["--"] and action.option_strings:
            return self._get_value(action, "--")
        return super()._get_values(action, arg_strings)

    def exit(self, status: int = 0, message: Optional[str] = None) -> NoReturn:
        if message:  # "prog: error: …": one line, whatever the value it quotes holds
            self._say(message.rstrip("\n"), err=True)
        sys.exit(status)


def say_now(text: object) -> None:
    """One :data:`LINE` on stderr, straight to its descriptor: safe in a signal handler that
    interrupted another write."""
    try:
        os.write(2, (LINE(text) + "\n").encode(errors="replace"))
    except OSError:
        pass


def no_torch_reason() -> Optional[str]:
    """None when torch imports; else why not, in one line."""
    try:
        import torch  # noqa: F401
    except ModuleNotFoundError as exc:
        if exc.name == "torch":
            return "torch is not installed"
        return f"torch does not import: {first_line(exc)}"
    except Exception as exc:  # a broken install: a missing CUDA library, an ABI mismatch
        return f"torch does not import: {first_line(exc)}"
    return None


def no_cuda_reason() -> Optional[str]:
    """None when torch sees a CUDA device; else the one-line reason (printed by ``require_cuda``)."""
    reason = no_torch_reason()
    if reason:
        return reason
    import torch

    if not torch.cuda.is_available():
        return f"no CUDA device: torch {torch.__version__} (CUDA {torch.version.cuda}) sees none"
    return None


def require_torch() -> bool:
    """Print why to stderr and return False when torch does not import (the caller exits 2)."""
    reason = no_torch_reason()
    if reason:
        say(reason, err=True)
    return reason is None


def require_cuda() -> bool:
    """Print why to stderr and return False when there is nothing to measure (the caller exits 2)."""
    reason = no_cuda_reason()
    if reason:
        say(reason, err=True)
    return reason is None


def print_json(value: Any) -> None:
    """A result (a dataclass, or plain JSON values) as indented JSON on stdout: standard JSON
    (:func:`json_text`), each string a :data:`LINE`."""
    write(sys.stdout, json_text(_lines_in(json.loads(json_text(value))), indent=1) + "\n")


def _lines_in(value: Any) -> Any:
    if isinstance(value, str):
        return LINE(value)
    if isinstance(value, dict):
        return {_lines_in(k): _lines_in(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_lines_in(v) for v in value]
    return value


def json_text(value: Any, **kwargs: Any) -> str:
    """Standard JSON (``allow_nan=False``): a NaN or an infinity a measurement gave is ``null``,
    as the suite writes it, so every JSON parser reads what a measurement prints or leaves."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    return json.dumps(_finite(value), allow_nan=False, default=str, **kwargs)


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def parse_seconds(text: str) -> float:
    """``90``, ``90s``, ``1.5m``, ``2h`` -> seconds: the suite's duration words, for ``argparse``'s ``type=``."""
    match = _DURATION.fullmatch(text.strip().lower())
    if not match:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (use e.g. 30, 30s, 5m, 1h)")
    return float(match.group(1)) * _SECONDS_PER[match.group(2)]


def in_span(lo: float, hi: float, unit: str = "", integer: bool = False,
            parse: Optional[Callable[[str], float]] = None) -> Callable[[str], Any]:
    """An ``argparse`` ``type=`` for a number from ``lo`` to ``hi`` (``parse``: how it is written,
    e.g. :func:`parse_seconds`): NaN, an infinity or a value out of the span is refused with the
    argument's name and its span, as a usage error, before anything is measured."""
    words = f"a {'whole ' if integer else ''}number{' of ' + unit if unit else ''} from {lo:g} to {hi:g}"

    def convert(text: str) -> Any:
        try:
            value = parse(text) if parse is not None else (int(text) if integer else float(text))
        except ValueError:  # not a number at all (parse's own ArgumentTypeError says how to write one)
            value = math.nan
        if not (math.isfinite(value) and lo <= value <= hi):
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not {words}")
        return value

    return convert


_WORD_END = re.compile(r"[\s,;&|)\]}]")


def cut(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` characters, cut at a word's end, never inside a word: the suite
    masks what a measurement returns, and a token cut in two would keep its first characters in a
    shape its masker no longer knows (this package imports nothing of the suite to mask it here)."""
    if len(text) <= limit:
        return text
    ends = [m.start() for m in _WORD_END.finditer(text, 0, limit + 1)]
    return text[:ends[-1]].rstrip() if ends else ""


def first_line(exc: BaseException, limit: int = 240) -> str:
    """``Type: first line of the message``, at most ``limit`` characters, cut at a word's end (:func:`cut`):
    an error as a result shows it."""
    text = str(exc).strip().splitlines()
    return cut(f"{type(exc).__name__}: {text[0] if text else ''}", limit)
