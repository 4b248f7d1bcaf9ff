"""Strings from outside, made safe to show: the one place control characters are neutralised.

Process command lines, file names, YAML values, HTTP texts and every string of a replayed
snapshot come from outside the suite. Shown raw, a newline in one would print a second, forged
``G4 PASS:`` line, an ESC sequence would clear or retitle the terminal, a CR would overwrite the
line before it. :func:`printable` shows each such character escaped instead (``\\x1b``), so a
verdict line stays one line that says what it read. :mod:`spark_gotchas.verdict` applies it to
every summary and fix; the terminal, report and Markdown writers apply it to what else they show.
"""

from __future__ import annotations

import re

# C0 and C1 controls, DEL, the Unicode line and paragraph separators, the bidirectional
# overrides and isolates (which reorder what a terminal shows), and lone surrogates (bytes that
# were not UTF-8, kept by the surrogateescape error handler).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff\ufffe\uffff]")
SHOWN_CHARS = 4000  # the longest text a line shows; the rest is cut with a note of how much


def _escaped(match: re.Match) -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8: show the byte
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: object, limit: int = SHOWN_CHARS) -> str:
    """``text`` as one line of plain characters: controls escaped (``\\x1b``, ``\\x0a``), and at
    most ``limit`` characters kept (``… (N more characters)``)."""
    shown = _UNSAFE.sub(_escaped, str(text))
    if limit and len(shown) > limit:
        shown = f"{shown[:limit]}… ({len(shown) - limit} more characters)"
    return shown
