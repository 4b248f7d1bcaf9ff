"""Read the G-line block a run printed, the way tools do: only what stands under the
``spark-gotchas`` separator, up to the next separator (never the short test summary, which
repeats FAIL lines in full when ``CI`` is set)."""

from __future__ import annotations

import re

GLINE = re.compile(r"^G(10|[1-9]) (FAIL|WARN|PASS|INFO|SKIP): ")
FIX = "    fix: "
SEPARATOR = re.compile(r"=+ spark-gotchas =+")


def glines(result, gotchas: tuple[int, ...] = ()) -> list[str]:
    """G-lines and their fix lines, in order; only those of ``gotchas`` when given. A fix folded
    to the terminal's width (its continuation lines indented under its text) is joined again."""
    lines = result.stdout.lines if hasattr(result, "stdout") else str(result).splitlines()
    starts = [i for i, line in enumerate(lines) if SEPARATOR.fullmatch(line)]
    if not starts:
        return []
    out: list[str] = []
    keep = False
    for line in lines[starts[-1] + 1:]:
        if line.startswith("="):
            break
        match = GLINE.match(line)
        if match:
            keep = not gotchas or int(match.group(1)) in gotchas
            if keep:
                out.append(line)
        elif line.startswith(FIX) and keep:
            out.append(line)
        elif line.startswith(" " * len(FIX)) and keep and out and out[-1].startswith(FIX):
            out[-1] += " " + line.strip()
    return out
