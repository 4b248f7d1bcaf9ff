"""psutil's process table as this test run's own processes only: the class of fake that keeps the
suite's tests from reading the machine they run on. On a shared CI box other programs run (a GPU
server's command line, a 128 KB argument); a check under test must not see them, or its line
depends on the box. Used by tests/conftest.py (in-process runs) and as a ``sitecustomize`` of the
preflights the tests start in a fresh process."""

from __future__ import annotations

import os
from typing import Any, Callable


def own_only(every: Callable[..., Any]) -> Callable[..., Any]:
    """``psutil.process_iter`` that lists only this process and its descendants."""
    import psutil

    def process_iter(*args: Any, **kwargs: Any) -> Any:
        own = {os.getpid(), *(child.pid for child in psutil.Process().children(recursive=True))}
        return (p for p in every(*args, **kwargs) if p.pid in own)

    return process_iter


SITECUSTOMIZE = """
import sys
sys.path.insert(0, {tests!r})
import psutil
from own_processes import own_only
psutil.process_iter = own_only(psutil.process_iter)
"""
