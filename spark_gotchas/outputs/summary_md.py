"""The G-line summary as Markdown, for ``$GITHUB_STEP_SUMMARY`` or any page that renders Markdown.

Written by ``--spark-summary-md PATH`` (appended, so several runs can share one job summary).
A reader on a CI page wants, in this order: did it pass, what needs fixing and how, then the
rest. So: a title with the overall status and the counts, the platform line, the FAILs and
WARNs (worst first, then in G order) each with its fixes, a table of every other gotcha in G
order, every individual check folded away, and the files the run produced.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping, Optional

from ..base import outward
from ..base.text import printable
from ..knowledge.titles import title as gotcha_title
from ..knowledge.verdict import Status, Verdict, summarize
from ..machine.platform import one_line

ICON = {Status.FAIL: "❌", Status.WARN: "⚠️", Status.PASS: "✅", Status.INFO: "ℹ️", Status.SKIP: "⏭️"}
_ORDER = (Status.FAIL, Status.WARN, Status.PASS, Status.INFO, Status.SKIP)
_SPECIAL = re.compile(r"([\\`*_\[\]|])")
_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def inline(text: str) -> str:
    """Text as one Markdown line: credentials masked (before the escapes hide a token's shape:
    ``ghp\\_…``), whitespace runs and line breaks folded to a space, other control characters escaped
    (``\\x1b``), Markdown characters escaped, HTML ones as entities."""
    text = "".join(_HTML.get(c, c) for c in outward.line(" ".join(str(text).split()), limit=0))
    return _SPECIAL.sub(r"\\\1", text)


def _fence_safe(line: str) -> str:
    """A line that cannot close the code fence it sits in."""
    return line.replace("```", "'''")


def _name(gotcha: int) -> str:
    name = gotcha_title(gotcha)
    return f" ({inline(name)})" if name else ""


def counts(verdicts: Iterable[Verdict]) -> dict[str, int]:
    """Gotchas per summary status (the worst verdict of each gotcha), FAIL first."""
    tally = {s.value: 0 for s in _ORDER}
    for top, _ in summarize(list(verdicts)):
        tally[top.status.value] += 1
    return {k: n for k, n in tally.items() if n}


def render(
    verdicts: Iterable[Verdict],
    platform: Mapping[str, Any],
    title: str = "spark-gotchas",
    *,
    artifacts: Optional[Mapping[str, str]] = None,
    replayed_from: Optional[str] = None,
    interrupted: str = "",
) -> str:
    """The Markdown block for one run (ends with a blank line, so blocks can be appended);
    ``interrupted``: why the run's verdicts are partial, said under the title."""
    verdicts = list(verdicts)
    groups = summarize(verdicts)
    tally = counts(verdicts)
    overall = max((top.status for top, _ in groups), key=lambda s: s.rank, default=None)
    head = f"{ICON[overall]} {title}: {overall.value}" if overall is not None else f"{title}: no verdict"
    if interrupted:  # what it judged before it ended is not the run's outcome
        head = f"⏹️ {title}: INTERRUPTED" + (f" ({overall.value} so far)" if overall is not None else "")
    out = [f"## {inline(head)}", ""]
    if interrupted:
        out += [f"**Interrupted**: {inline(interrupted)}", ""]
    out.append(" · ".join(f"**{n}** {s}" for s, n in tally.items()) + f" — {len(groups)} gotchas, {len(verdicts)} checks"
               if groups else "No gotcha check reported a verdict.")
    out += ["", f"Platform: `{printable(one_line(dict(platform), replayed_from)).replace('`', chr(39))}`", ""]

    attention = sorted((g for g in groups if g[0].status.needs_fix), key=lambda g: (-g[0].status.rank, g[0].gotcha))
    if attention:
        out += ["### Needs attention", ""]
        for top, group in attention:
            for v in group:
                if v.status == top.status:
                    out.append(f"- {ICON[v.status]} **G{v.gotcha} {v.status.value}**{_name(v.gotcha)}: {inline(v.summary)}")
                    out.append(f"    - **fix:** {inline(v.fix)}")
        out.append("")

    rest = [g for g in groups if not g[0].status.needs_fix]
    if rest:
        out += ["### Other gotchas" if attention else "### Gotchas", "", "| | gotcha | finding |", "|---|---|---|"]
        for top, _group in rest:
            name = gotcha_title(top.gotcha)
            cell = f"**G{top.gotcha} {top.status.value}**" + (f"<br>{inline(name)}" if name else "")
            out.append(f"| {ICON[top.status]} | {cell} | {inline(top.summary)} |")
        out.append("")

    if verdicts:
        out += [f"<details><summary>Every check ({len(verdicts)})</summary>", "", "```text"]
        for v in sorted(verdicts, key=lambda v: v.gotcha):  # stable: checks keep their run order
            out.append(_fence_safe(v.line))
            if v.status.needs_fix and v.fix:
                out.append(_fence_safe(f"    fix: {' '.join(v.fix.split())}"))
        out += ["```", "", "</details>", ""]

    if artifacts:
        out += ["### Files this run produced", ""]
        out.extend(f"- {inline(name)}: `{printable(path).replace('`', chr(39))}`" for name, path in sorted(artifacts.items()))
        out.append("")
    return "\n".join(out) + "\n"
