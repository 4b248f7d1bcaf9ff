"""What a run reports, as pure functions of its state: the JSON report's ``spark_gotchas``
section, the snapshot, the Markdown summary and the terminal block. The plugin decides when and
where each is written; nothing here writes a file or prints.

The terminal block's lines leave through :func:`spark_gotchas.base.outward.terminal` (credentials
masked, controls escaped); the documents are masked whole (:func:`spark_gotchas.base.outward.record`,
:func:`spark_gotchas.base.outward.markdown`).
"""

from __future__ import annotations

import textwrap
from typing import Any

from .. import __version__
from ..base import outward
from ..knowledge.verdict import Status, gotcha_line, summarize, summary_lines
from ..machine import platform
from ..machine.snapshot import Snapshot, now_iso
from ..run.session import SessionState

COLOR = {Status.FAIL: {"red": True, "bold": True}, Status.WARN: {"yellow": True, "bold": True},
         Status.PASS: {"green": True}, Status.INFO: {"cyan": True}, Status.SKIP: {}}


def _replayed_from(state: SessionState) -> str | None:
    return state.replay.path if state.replay is not None else None


def report_section(state: SessionState) -> dict[str, Any]:
    """The top-level ``spark_gotchas`` object of the JSON report (see docs/report.md)."""
    return {
        "suite_version": __version__,
        "mode": "replay" if state.replay is not None else "live",
        "replayed_from": _replayed_from(state),
        "interrupted": bool(state.interrupted),
        "interruption": state.interrupted or None,
        "lines": summary_lines(state.verdicts),
        "gotchas": {f"G{top.gotcha}": {"status": top.status.value, "line": gotcha_line(top, group),
                                        "summary": top.summary, "fix": top.fix, "checks": len(group)}
                    for top, group in summarize(state.verdicts)},
        "left_out": [{"nodeid": r.nodeid, "gotcha": r.verdict.to_json()} for r in state.reported
                     if r.nodeid in state.left_out],
        "platform": platform.describe(state.provider, state.options.spark_profile),
        "options": state.options.judged(),
        "versions": platform.versions(state.provider),
        "artifacts": dict(state.artifacts),
        "timing": state.timing(),
    }


def run_snapshot(state: SessionState) -> Snapshot:
    """The run's snapshot: every reading taken (and, in a replay, every reading replayed), masked."""
    provider, opts = state.provider, state.options
    described = platform.describe(provider, opts.spark_profile)  # first: it reads host.identity too
    readings = dict(state.replay.readings) if state.replay is not None else {}
    readings.update(provider.recorded)
    doc = outward.record(Snapshot(
        readings=readings,
        options=opts.judged(),
        platform=described,
        verdicts=[{**v.to_json(), "readings": None} for v in state.verdicts],
        created=now_iso(),
        suite_version=__version__,
        markers=state.markers if state.replay is None else (state.replay.markers or state.markers),
        interrupted=state.interrupted,
    ).to_json())
    return Snapshot(**{k: doc[k] for k in ("readings", "options", "platform", "verdicts", "created", "suite_version",
                                           "markers", "interrupted")})


def markdown_summary(state: SessionState) -> str:
    """The run as a Markdown block for a job summary (:mod:`spark_gotchas.outputs.summary_md`), masked."""
    from .summary_md import render

    return outward.markdown(render(state.verdicts, platform.describe(state.provider, state.options.spark_profile),
                                   artifacts=state.artifacts, replayed_from=_replayed_from(state),
                                   interrupted=interruption_line(state)))


def interruption_line(state: SessionState) -> str:
    """What the summaries say of a run that ended early, or of a replayed snapshot whose run did;
    "" for a whole run."""
    if state.interrupted:
        return f"the run was {state.interrupted}: gotchas without a line were not judged, the others only in part"
    if state.replay is not None and state.replay.interrupted:
        return f"the replayed snapshot's run was {state.replay.interrupted}: its readings are partial"
    return ""


FIX_PREFIX = "    fix: "


def wrapped(line: str, width: int) -> list[str]:
    """A ``    fix:`` line folded to ``width`` with its indent kept on every fold (a terminal's own
    wrap would start the rest at column 0); any other line as it is: one line per gotcha."""
    if not line.startswith(FIX_PREFIX) or len(line) <= width:
        return [line]
    return textwrap.wrap(line[len(FIX_PREFIX):], width=max(width, 40), initial_indent=FIX_PREFIX,
                         subsequent_indent=" " * len(FIX_PREFIX), break_on_hyphens=False, break_long_words=False)


def terminal_block(state: SessionState, width: int = 100, verbose: bool = False) -> list[tuple[str, dict[str, bool]]]:
    """The lines under the ``spark-gotchas`` separator, each with its colour: the platform, one
    G-line per gotcha (and its fixes, folded to ``width``; with ``verbose``, each finding's
    detail), the notes, and the outputs that could not be written. Each entry is one line as
    :func:`spark_gotchas.base.outward.terminal` shows it (a verdict's texts are escaped already, so a
    fold's width is what the terminal shows)."""
    desc = platform.describe(state.provider, state.options.spark_profile)
    out = [(platform.one_line(desc, _replayed_from(state)), {})]
    if interruption_line(state):
        out.append((f"INTERRUPTED: {interruption_line(state)}", {"red": True, "bold": True}))
    for top, group in summarize(state.verdicts):
        for line in summary_lines(group):
            markup = COLOR[top.status] if not line.startswith("    ") else {}
            out += [(part, markup) for part in wrapped(line, width)]
        if verbose:
            out += [(f"    {v.status.value.lower()}: {v.summary}" + (f" ({v.detail})" if v.detail else ""), {})
                    for v in group]
    out += [(note, {}) for note in state.notes]
    out += [(f"{error} (the run fails: an output it was asked for is missing)", {"red": True, "bold": True})
            for error in state.output_errors]
    return out
