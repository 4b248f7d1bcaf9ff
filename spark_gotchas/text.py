"""Strings from outside, made safe to show: the one place control characters are neutralised.

Process command lines, file names, YAML values, HTTP texts and every string of a replayed
snapshot come from outside the suite. Shown raw, a newline in one would print a second, forged
``G4 PASS:`` line, an ESC sequence would clear or retitle the terminal, a CR would overwrite the
line before it. :func:`printable` shows each such character escaped instead (``\\x1b``), so a
verdict line stays one line that says what it read. :mod:`spark_gotchas.verdict` applies it to
every summary and fix; the terminal, report and Markdown writers apply it to what else they show.
"""

from __future__ import annotations

from .microbench._cli import shown as _escaped

SHOWN_CHARS = 4000  # the longest text a line shows; the rest is cut with a note of how much


def printable(text: object, limit: int = SHOWN_CHARS) -> str:
    """``text`` as one line of plain characters: controls escaped (``\\x1b``, ``\\x0a``), and at
    most ``limit`` characters kept (``… (N more characters)``)."""
    shown = _escaped(text)  # the one escaper: microbench, which imports nothing of the suite, prints with it too
    if limit and len(shown) > limit:
        shown = f"{shown[:limit]}… ({len(shown) - limit} more characters)"
    return shown
