"""Slurm's ``scontrol``, the one way node-health talks to Slurm: read a node, drain it, undrain it.

Every call is bounded (:func:`spark_gotchas.base.procs.run_bounded`: a timeout, then the whole process
group killed): an unreachable slurmctld makes scontrol retry for about 9 s (measured, Slurm
22.05.8), a silent one up to its MessageTimeout, and a health check must end before slurmd kills
it. The command gets an argument list, never a shell; the reason is one argument, quoted the way
scontrol strips (``Reason="…"``), so what Slurm keeps is exactly what was sent.
"""

from __future__ import annotations

import re
import shutil
from typing import Optional

from ...base import scrub
from ...base.procs import OUTPUT_LIMIT, run_bounded
from .drain import Node

TIMEOUT_S = 5.0  # one scontrol call: milliseconds with a controller that answers (a refused one: ~9 s of retries)
# the [user@time] Slurm adds to a reason when it shows it
_STAMP = re.compile(r" \[[^\[\]]*@\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\]$")


class SlurmError(Exception):
    """scontrol could not be run or said no; the message is one line (text from outside: show it
    through :func:`spark_gotchas.base.outward.line`)."""


def find(command: str) -> str:
    """The scontrol to run: a path, or a name looked up on PATH (slurmd gives a health check and a
    prolog no PATH: Python then looks in /bin and /usr/bin)."""
    found = shutil.which(command)
    if found is None:
        raise SlurmError(f"{command} not found (give its path with --scontrol, or set PATH)")
    return found


def _run(scontrol: str, args: list[str], timeout: float) -> str:
    run = run_bounded([scontrol, *args], timeout, merge_stderr=True)
    if run.timed_out:
        raise SlurmError(f"scontrol {args[0]} did not answer within {timeout:g} s (killed): is slurmctld up?")
    if not run.ok:
        words = scrub.clip(" ".join(run.stdout.split()), 300, mark="") or f"exit status {run.returncode}"
        raise SlurmError(f"scontrol {args[0]} failed: {run.error or words}")
    if run.cut:  # its start is lost: the first State= left might be a reason's text
        raise SlurmError(f"scontrol {args[0]} printed more than {OUTPUT_LIMIT >> 20} MiB: not a node's record")
    return run.stdout


def parse_node(text: str, name: str) -> Node:
    """``scontrol show node NAME``'s output as a :class:`Node`. The first ``State=`` and the line
    that starts with ``Reason=`` (a reason may hold spaces, '=' and a stamp: the line is read whole)."""
    state, reason, gres = "", "", ""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("Reason=") and not reason:
            reason = _STAMP.sub("", stripped[len("Reason="):])
            continue
        for token in stripped.split():
            if token.startswith("State=") and not state:
                state = token[len("State="):]
            elif token.startswith("Gres=") and not gres:
                gres = token[len("Gres="):]
    if not state:
        raise SlurmError(f"scontrol show node {name} gave no State= (not a node's record)")
    base, *flags = state.split("+")
    return Node(name, base, tuple(flags), reason, "" if gres == "(null)" else gres)


def show_node(scontrol: str, name: str, timeout: float = TIMEOUT_S) -> Node:
    return parse_node(_run(scontrol, ["show", "node", name], timeout), name)


def update(scontrol: str, name: str, state: str, reason: Optional[str] = None, timeout: float = TIMEOUT_S) -> None:
    """``scontrol update NodeName=NAME State=STATE [Reason="…"]``."""
    args = ["update", f"NodeName={name}", f"State={state}"]
    if reason is not None:
        args.append(f'Reason="{reason}"')
    _run(scontrol, args, timeout)
