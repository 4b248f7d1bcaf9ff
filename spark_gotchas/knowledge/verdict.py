"""The verdict model: what a judge decides, and the one place that formats a G-line."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from ..base import scrub
from ..base.outward import quoted
from ..base.text import SHOWN_CHARS, printable

GOTCHA_IDS = tuple(range(1, 11))
SUMMARY_CHARS = 500  # the longest finding a G-line shows (a judge aims at 100 columns: verdict.fitting)


class Status(str, enum.Enum):
    """A verdict's status. ``rank`` orders them for the per-gotcha summary: the worst wins."""

    FAIL = "FAIL"
    WARN = "WARN"
    PASS = "PASS"
    INFO = "INFO"
    SKIP = "SKIP"

    @property
    def rank(self) -> int:
        return _RANK[self]

    @property
    def needs_fix(self) -> bool:
        return self in (Status.FAIL, Status.WARN)


_RANK = {Status.FAIL: 4, Status.WARN: 3, Status.PASS: 2, Status.INFO: 1, Status.SKIP: 0}


class GotchaWarning(UserWarning):
    """Emitted for a WARN verdict; ``--spark-strict`` (or ``-W error::…GotchaWarning``) fails on it."""


@dataclass(frozen=True)
class Verdict:
    """One judgement of one gotcha.

    ``summary`` is the finding that decides the status, short enough that the G-line fits in
    about 100 columns; ``detail`` is what else a reader may want (shown with ``-v``, in the JSON
    report and the Markdown summary); ``fix`` is required for FAIL and WARN; ``readings`` holds
    the JSON-ready values the judgement was made from (they go to the JSON report).
    Summary and fix are shown as given, but with credentials masked and control characters
    escaped (a newline from a process name shows as ``\x0a``), white space runs folded and a
    G-line's head inside them escaped (:func:`spark_gotchas.base.outward.quoted`): a verdict is always
    one line of its own, whatever strings from outside it quotes, and no row of it, wrapped at any
    width, reads as another G-line. The summary is at most :data:`SUMMARY_CHARS` characters (the
    detail keeps more).
    """

    gotcha: int
    status: Status
    summary: str
    fix: str = ""
    readings: Mapping[str, Any] = field(default_factory=dict)
    check: str = ""  # what this check examined, in a few words ("first cuda launch"); the plugin sets it
    detail: str = ""  # more of the finding, beyond the line

    def __post_init__(self) -> None:
        if isinstance(self.gotcha, bool) or self.gotcha not in GOTCHA_IDS:
            raise ValueError(f"gotcha id must be 1..10, got {self.gotcha!r}")
        object.__setattr__(self, "status", Status(self.status))
        if self.status.needs_fix and not self.fix.strip():
            raise ValueError(f"G{self.gotcha} {self.status.value} verdict needs a fix")
        for name in ("summary", "fix", "detail"):
            object.__setattr__(self, name, quoted(getattr(self, name),
                                                  limit=SUMMARY_CHARS if name == "summary" else SHOWN_CHARS))

    @property
    def line(self) -> str:
        return format_line(self.gotcha, self.status, self.summary)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": f"G{self.gotcha}",
            "status": self.status.value,
            "summary": self.summary,
            "fix": self.fix,
            "readings": dict(self.readings),
            **({"check": self.check} if self.check else {}),
            **({"detail": self.detail} if self.detail else {}),
        }


def format_line(gotcha: int, status: Status | str, summary: str) -> str:
    """``G<n> <STATUS>: <finding>`` — the public contract tools grep for (no zero padding)."""
    return f"G{gotcha} {Status(status).value}: {printable(summary)}"


def worst(verdicts: Iterable[Verdict]) -> Verdict | None:
    """The verdict that speaks for a gotcha: highest rank, first seen on ties."""
    best: Verdict | None = None
    for verdict in verdicts:
        if best is None or verdict.status.rank > best.status.rank:
            best = verdict
    return best


def summarize(verdicts: Iterable[Verdict]) -> list[tuple[Verdict, list[Verdict]]]:
    """One entry per gotcha in G order: (the worst verdict, every verdict of that gotcha)."""
    by_id: dict[int, list[Verdict]] = {}
    for verdict in verdicts:
        by_id.setdefault(verdict.gotcha, []).append(verdict)
    out = []
    for gid in sorted(by_id):
        top = worst(by_id[gid])
        assert top is not None
        out.append((top, by_id[gid]))
    return out


LINE_COLUMNS = 100  # what a G-line aims to fit in
TAIL_ROOM = len(" (+9 more FAIL)")  # as long as "; 9 not checked": what gotcha_line may add after a summary


def fitting(gotcha: int, status: Status, *summaries: str, tail: int = 0) -> str:
    """The first of ``summaries`` (the fullest first) whose G-line, as printed (escaped, masked), fits
    in LINE_COLUMNS with ``tail`` columns to spare (TAIL_ROOM: for ``; 9 not checked``, which
    gotcha_line adds where a check of the gotcha could not run), else the last. A judge that quotes
    a name of any length (a GPU's, an error's) offers a line without it: the platform line above the
    G-lines names the GPU, and the verdict's detail keeps the whole."""
    room = LINE_COLUMNS - tail
    return next((s for s in summaries if len(format_line(gotcha, status, quoted(s, limit=SUMMARY_CHARS))) <= room),
                summaries[-1])


def clipped(text: str, room: int) -> str:
    """``text`` in ``room`` characters: masked first (a credential the cut would split is masked
    whole, never left with part of itself in clear), then cut at a word's end where one is near,
    and marked ``…``."""
    text = scrub.clip(text, 4 * room + 256, mark="")  # masked; the end of a long text is never shown
    if len(text) <= room:
        return text
    cut = text[:room - 1]
    return (cut[:cut.rfind(" ")] if cut.rfind(" ") > room // 2 else cut) + "…"


def _not_checked(top: Verdict, group: list[Verdict], room: int) -> str:
    """``; not checked: first cuda launch (torch is a CPU build)`` when a PASS or INFO line stands
    for a gotcha some of whose checks were skipped: a line never hides what it did not check. The
    reasons are given while the line has room, then the checks' names, then as many names as fit
    and a count of the others, at the least a count (each skip's own line is in the report and
    in pytest's -rs summary)."""
    if top.status not in (Status.PASS, Status.INFO):
        return ""
    by_reason: dict[str, list[str]] = {}
    for v in group:
        if v.status is Status.SKIP:
            reason = v.summary.split(": ", 1)[1] if ": " in v.summary else v.summary
            by_reason.setdefault(reason, []).append(v.check or "a check")
    if not by_reason:
        return ""
    full = "; not checked: " + "; ".join(f"{', '.join(checks)} ({reason})" for reason, checks in by_reason.items())
    if len(full) <= room:
        return full
    names = [c for checks in by_reason.values() for c in checks]
    for shown in range(len(names), 0, -1):  # as many names as fit, then a count of the others
        more = f" +{len(names) - shown}" if shown < len(names) else ""
        tail = "; not checked: " + ", ".join(names[:shown]) + more
        if len(tail) <= room:
            return tail
    return f"; {len(names)} not checked"  # no room for a name: the count still says the line is not all


def gotcha_line(top: Verdict, group: list[Verdict]) -> str:
    """The one G-line of a gotcha whose worst verdict is ``top`` among its checks' ``group``."""
    extra = sum(1 for v in group if v.status == top.status) - 1
    suffix = f" (+{extra} more {top.status.value})" if extra > 0 else ""
    head = top.line + suffix
    tail = _not_checked(top, group, LINE_COLUMNS - len(head))
    if suffix and not top.status.needs_fix and (len(head + tail) > LINE_COLUMNS
                                                or (tail and not tail.startswith("; not checked:"))):
        # the line's width and the names of the checks not run matter more than the count of more
        # verdicts (a FAIL or WARN line keeps its count: each of those verdicts' fixes is listed under it)
        head = top.line
        tail = _not_checked(top, group, LINE_COLUMNS - len(head))
    return head + tail


def summary_lines(verdicts: Iterable[Verdict]) -> list[str]:
    """The G-line block: one line per gotcha, each FAIL/WARN followed by its distinct fixes."""
    lines: list[str] = []
    for top, group in summarize(verdicts):
        lines.append(gotcha_line(top, group))
        if top.status.needs_fix:
            seen: list[str] = []
            for v in group:
                if v.status == top.status and v.fix not in seen:
                    seen.append(v.fix)
            lines.extend(f"    fix: {fix}" for fix in seen)
    return lines


def recorded(judged: Verdict, speed: str) -> Verdict:
    """What a replay reports for a ``speed`` check (``soak``, ``multinode``) its selection left out
    (``-m fast``) when the snapshot's reading, judged now by that check, FAILs or WARNs: that status
    (never a PASS over it) and the check's fix, on the line ``the recorded soak FAILs: <as many of
    the finding's leading clauses as fit in 100 columns>; replay with -m soak`` (``the recorded
    soak FAILs: replay with -m soak`` when none fits); the whole finding is the detail."""
    head = f"the recorded {judged.check or 'check'} {judged.status.value}s"
    again = f"replay with -m {speed}"
    clauses = judged.summary.split(": ")
    summary = f"{head}: {again}"
    for n in range(len(clauses), 0, -1):
        fuller = f"{head}: {': '.join(clauses[:n])}; {again}"
        if len(format_line(judged.gotcha, judged.status, fuller)) <= LINE_COLUMNS:
            summary = fuller
            break
    detail = judged.summary + (f" ({judged.detail})" if judged.detail else "")
    return Verdict(judged.gotcha, judged.status, summary, fix=judged.fix, readings=judged.readings,
                   check=judged.check, detail=detail)
