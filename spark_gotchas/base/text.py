"""Strings from outside, made safe to show: the one place control characters are neutralised.

Process command lines, file names, YAML values, HTTP texts and every string of a replayed
snapshot come from outside the suite. Shown raw, a newline in one would print a second, forged
``G4 PASS:`` line, an ESC sequence would clear or retitle the terminal, a CR would overwrite the
line before it. :func:`printable` shows each such character escaped instead (``\\x1b``), so a
verdict line stays one line that says what it read. :mod:`spark_gotchas.knowledge.verdict` applies it to
every summary and fix; the terminal, report and Markdown writers apply it to what else they show.
"""

from __future__ import annotations

import re

from ..microbench._cli import shown as _escaped

SHOWN_CHARS = 4000  # the longest text a line shows; the rest is cut with a note of how much
# White space a terminal shows as blank: the space, the no-break space and Unicode's other spaces
# (a tab or a line break is shown escaped already).
_BLANKS = re.compile("[ \u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]++")
# A G-line's head (``G4 PASS:``): inside a line it could start a row of its own where the terminal wraps.
_HEAD = re.compile(r"(G[0-9]++ (?:FAIL|WARN|PASS|INFO|SKIP)):")


def printable(text: object, limit: int = SHOWN_CHARS) -> str:
    """``text`` as one line of plain characters: controls escaped (``\\x1b``, ``\\x0a``), and at
    most ``limit`` characters kept (``… (N more characters)``)."""
    shown = _escaped(text)  # the one escaper: microbench, which imports nothing of the suite, prints with it too
    if limit and len(shown) > limit:
        shown = f"{shown[:limit]}… ({len(shown) - limit} more characters)"
    return shown


def folded(text: str) -> str:
    """``text`` (shown already: one line) with every run of white space as one space, and a G-line's
    head inside it shown with its colon escaped (``G4 PASS\\x3a``). A string from outside inside a
    line (a method's name, a GPU's name) then cannot push text of its own to the start of a row where
    the terminal wraps (``write`` and 141 spaces before ``G4 PASS: planted``), nor read as a G-line
    on any row: only a G-line's own start is one."""
    return _HEAD.sub(r"\1\\x3a", _BLANKS.sub(" ", text))
