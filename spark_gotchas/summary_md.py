"""The G-line summary as Markdown (for ``$GITHUB_STEP_SUMMARY`` or any CI page).

FAILs and WARNs come first, each with its fix; then the rest in G order.
"""

from __future__ import annotations

from typing import Any, Iterable

from .platform import one_line
from .verdict import Status, Verdict, summarize

_ICON = {Status.FAIL: "❌", Status.WARN: "⚠️", Status.PASS: "✅", Status.INFO: "ℹ️", Status.SKIP: "⏭️"}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render(verdicts: Iterable[Verdict], platform: dict[str, Any], title: str = "spark-gotchas") -> str:
    groups = summarize(list(verdicts))
    counts: dict[str, int] = {}
    for top, _ in groups:
        counts[top.status.value] = counts.get(top.status.value, 0) + 1
    ordered = sorted(groups, key=lambda g: (not g[0].status.needs_fix, -g[0].status.rank if g[0].status.needs_fix else 0, g[0].gotcha))
    out = [f"## {title}", "", f"`{_cell(one_line(platform))}`", ""]
    out.append(" · ".join(f"**{n}** {s}" for s, n in sorted(counts.items(), key=lambda kv: -Status(kv[0]).rank)))
    out += ["", "| | gotcha | finding | fix |", "|---|---|---|---|"]
    for top, group in ordered:
        fixes = []
        for v in group:
            if v.status == top.status and v.fix and v.fix not in fixes:
                fixes.append(v.fix)
        out.append(
            f"| {_ICON[top.status]} | **G{top.gotcha} {top.status.value}** | {_cell(top.summary)} | "
            f"{_cell('; '.join(fixes)) if top.status.needs_fix else ''} |"
        )
    out.append("")
    return "\n".join(out) + "\n"
