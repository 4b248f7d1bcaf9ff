"""What a Slurm node health pass does with a run's verdicts: drain the node, undrain it, or leave it.

Pure: the run's JSON report (its ``spark_gotchas`` section: the statuses and G-lines every other
output shows, no second judge) and Slurm's view of the node go in, one :class:`Action` comes out.
:mod:`spark_gotchas.commands.slurm.scontrol` reads the node and carries the action out; ``spark-gotchas
node-health`` (:mod:`spark_gotchas.commands.slurm.node_health`) runs the checks and ties the two together.

Rules (LBNL NHC's, whose ``node-mark-offline``/``node-mark-online`` mark their notes ``NHC:``):

- A drain reason of our own starts with ``spark-gotchas:``; any other reason (an operator's, or
  Slurm's own such as ``Not responding``) is never replaced and its node never undrained, whatever
  the checks found; nor is a node drained with no reason at all.
- A FAIL drains the node, its reason the FAIL G-lines (``spark-gotchas: G5 FAIL: read 2266 GB/s
  …``). WARN, PASS, INFO and SKIP never drain.
- Checks that could not run or judge (the deadline passed, pytest crashed, no GPU visible where
  Slurm configures one) drain with that reason under ``--on-error drain`` (the default) and leave
  the node as it is under ``--on-error ignore``: the node is never undrained on an error.
- A node drained with a reason of our own is undrained once a pass finds no FAIL and no error;
  drained again with the new reason when the finding changed; left alone when it is the same.
- A node with jobs on it (ALLOCATED, MIXED, COMPLETING) is not checked by a periodic health check:
  the checks load the GPU and would judge the job's own processes as contention. A prolog is run
  for a job on the node it was given, so it checks.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Any, Optional

from ...base import outward
from ...knowledge.verdict import Status, format_line

STATUSES = tuple(s.value for s in Status)  # as the report writes them: FAIL, WARN, PASS, INFO, SKIP

PREFIX = "spark-gotchas:"  # what marks a drain reason as ours (NHC marks its own "NHC:")
# slurmctld keeps a reason of any length (100,000 characters measured on Slurm 22.05.8), but
# slurmdbd records a node's events with the reason in a MySQL TINYTEXT column: 255 bytes.
REASON_BYTES = 255
BUSY_STATES = ("ALLOCATED", "MIXED")
BUSY_FLAGS = ("COMPLETING",)
ON_ERROR = ("drain", "ignore")
_PYTEST_EXIT = {2: "interrupted", 3: "internal error", 4: "usage error", 5: "no tests collected"}


def cut(text: str, limit: int = REASON_BYTES) -> str:
    """``text`` in at most ``limit`` bytes of UTF-8, ending in ``…`` when cut (never mid-character)."""
    data = text.encode()
    if len(data) <= limit:
        return text
    return data[:limit - len("…".encode())].decode(errors="ignore") + "…"


_G_BLOCK = re.compile(r"G(?:[1-9]|10) (?:FAIL|WARN|PASS|INFO|SKIP): |    (?:fix|\w+): |INTERRUPTED: ")

@dataclass(frozen=True)
class Node:
    """Slurm's view of one node (``scontrol show node NAME``): its base state (IDLE, ALLOCATED,
    MIXED, DOWN …), the flags after it (DRAIN, COMPLETING, NOT_RESPONDING …), its reason without
    the ``[user@time]`` Slurm adds, and its generic resources (``gpu:1``)."""

    name: str
    state: str
    flags: tuple[str, ...] = ()
    reason: str = ""
    gres: str = ""

    @property
    def drained(self) -> bool:
        return "DRAIN" in self.flags

    @property
    def ours(self) -> bool:
        return self.reason.startswith(PREFIX)

    @property
    def busy(self) -> bool:
        return self.state in BUSY_STATES or any(f in self.flags for f in BUSY_FLAGS)

    @property
    def has_gpu(self) -> bool:
        """Slurm gives the node a GPU (``Gres=gpu:…``): a pass that sees none is an error."""
        return any(part.split(":")[0] == "gpu" for part in self.gres.split(","))

    @property
    def state_text(self) -> str:
        return "+".join((self.state, *self.flags))


@dataclass(frozen=True)
class Outcome:
    """What the checks found: the FAIL G-lines, or why there is no judgement (``error``)."""

    lines: tuple[str, ...] = ()  # the G-line block, as the run printed it
    fails: tuple[str, ...] = ()  # the G-lines whose gotcha FAILs
    error: str = ""

    @property
    def healthy(self) -> bool:
        return not self.fails and not self.error


def error(why: str) -> Outcome:
    return Outcome(error=why)


def outcome(report: Any, *, require_gpu: bool = False) -> Outcome:
    """The verdicts of a JSON report (docs/report.md): each gotcha's status from ``gotchas``, its
    line from ``lines``. A report without them, or of a run pytest did not finish, is an error."""
    section = report.get("spark_gotchas") if isinstance(report, dict) else None
    if not isinstance(section, dict):
        return error("the run's report has no spark_gotchas section")
    gotchas, raw_lines = section.get("gotchas"), section.get("lines")
    if not isinstance(gotchas, dict) or not isinstance(raw_lines, list):
        return error("the run's report has no verdicts (spark_gotchas.gotchas, spark_gotchas.lines)")
    # the G-line block and its fix lines only: a report is a file, and a line of it that reads
    # "node-health: NAME: undrained" would pass for the pass's own
    lines = tuple(str(line) for line in raw_lines if _G_BLOCK.match(str(line)))
    exitcode = report.get("exitcode")
    if type(exitcode) is not int or exitcode not in (0, 1):  # true == 1 to Python, not to pytest
        what = _PYTEST_EXIT.get(exitcode, "") if isinstance(exitcode, int) else ""
        return Outcome(lines, error=f"pytest exited {outward.line(exitcode)}{f' ({what})' if what else ''}")
    if not gotchas:
        return Outcome(lines, error="the run judged no gotcha")
    unknown = sorted(gid for gid, entry in gotchas.items()
                     if not isinstance(entry, dict) or entry.get("status") not in STATUSES)
    if unknown:  # fail closed: a status this pass cannot read might be a FAIL
        gid, entry = outward.field(unknown[0], 40), gotchas[unknown[0]]
        if not isinstance(entry, dict):
            return Outcome(lines, error=f"{gid}'s entry in the report is {outward.field(repr(entry), 80)}, not an object")
        return Outcome(lines, error=f"{gid}'s status in the report is {outward.field(repr(entry.get('status')), 80)}, "
                                    f"not one of {', '.join(STATUSES)}")
    failing = [gid for gid, entry in gotchas.items() if entry["status"] == "FAIL"]
    printed: dict[str, str] = {}  # a report of an older suite has no line per gotcha: its FAIL lines, in one pass
    for x in lines:
        head, sep, _ = x.partition(" FAIL: ")
        if sep and head not in printed:
            printed[head] = x
    fails = [_line(gotchas[gid]) or printed.get(gid) or format_line(int(gid[1:]) if gid[1:].isdigit() and len(gid) <= 10 else 0,
                                                                     "FAIL", str(gotchas[gid].get("summary", "")))
             for gid in failing]
    if not fails and require_gpu:
        platform = section.get("platform") if isinstance(section.get("platform"), dict) else {}
        if platform.get("gpu") is None:
            why = platform.get("nvml_error") or "neither NVML nor torch lists one"
            return Outcome(lines, error=f"no GPU visible, where Slurm gives this node one: {why}")
    return Outcome(lines, tuple(fails))


def _line(entry: dict) -> str:
    """The gotcha's G-line as the run printed it (``gotchas.G<n>.line``), or "" where the report has none."""
    line = entry.get("line")
    return line if isinstance(line, str) else ""


def reason(found: Outcome) -> str:
    """The drain reason for what was found: the FAIL lines, or why the checks did not judge;
    masked, escaped, cut to what slurmdbd keeps."""
    text = "; ".join(found.fails) if found.fails else f"no verdict: {found.error}"
    return cut(outward.line(f"{PREFIX} {text}"))


class Do(enum.Enum):
    DRAIN = "drain"
    UNDRAIN = "undrain"
    NOTHING = "nothing"


@dataclass(frozen=True)
class Action:
    """What to do to the node. ``says`` is the line's text after the verb (``drained: …``,
    ``would drain: …``); for NOTHING the whole line. ``reason`` is the drain reason."""

    do: Do
    says: str
    reason: str = ""
    unhealthy: bool = False  # the checks found the node unfit for jobs (a FAIL, or an error that drains)


def not_checked(node: Node) -> Optional[str]:
    """Why a periodic health check leaves ``node`` unchecked (jobs on it), or None."""
    if not node.busy:
        return None
    return (f"not checked: jobs on the node ({node.state_text}); the checks would load the GPU under them "
            "and judge their processes as contention")


def decide(found: Outcome, node: Optional[Node], on_error: str = "drain") -> Action:
    """What this pass does (the module docstring's rules). ``node`` None: Slurm could not be
    asked, so nothing can be done but say what was found."""
    if on_error not in ON_ERROR:
        raise ValueError(f"on_error is one of {ON_ERROR}, not {on_error!r}")
    if found.error and on_error == "ignore":
        return Action(Do.NOTHING, f"left as it is (--on-error ignore): no verdict: {outward.line(found.error)}")
    unhealthy = not found.healthy
    new_reason = reason(found) if unhealthy else ""
    if node is None:
        return Action(Do.NOTHING, f"unhealthy: {new_reason}" if unhealthy else "healthy: no FAIL",
                      unhealthy=unhealthy)
    if not node.ours and (node.reason or node.drained):
        whose = f"its reason is not ours: {outward.line(node.reason)}" if node.reason else "drained with no reason, not by us"
        found_text = f"; found: {new_reason}" if unhealthy else ""
        return Action(Do.NOTHING, f"left as it is ({node.state_text}): {whose}{found_text}", unhealthy=unhealthy)
    if unhealthy:
        if node.drained and node.reason == new_reason:
            return Action(Do.NOTHING, f"still drained: {new_reason}", new_reason, unhealthy=True)
        return Action(Do.DRAIN, new_reason, new_reason, unhealthy=True)
    if node.drained and node.ours:
        return Action(Do.UNDRAIN, f"no FAIL now (was: {outward.line(node.reason)})")
    return Action(Do.NOTHING, "healthy: no FAIL")
