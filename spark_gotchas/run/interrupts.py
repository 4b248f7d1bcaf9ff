"""SIGTERM ends a run as Ctrl-C does, and the run remembers either signal.

A batch system ends a job past its time with SIGTERM (Slurm, then SIGKILL after KillWait): left to
its default, the process dies with nothing written and nothing marked, the outputs of the run before
still in place or half replaced. Raised as KeyboardInterrupt instead, pytest ends the run as on
Ctrl-C and the suite marks what it writes ``INTERRUPTED``. A second Ctrl-C that lands inside pytest's
own handling of the first leaves the session's exit status at 0: the signal remembered here is what
still says the run was interrupted. A signal ignored when the run began (SIG_IGN: a background job
of a script) stays ignored.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

WATCHED = (signal.SIGINT, signal.SIGTERM)


class Watch:
    """The run's signal handlers from :meth:`start` to :meth:`stop`; ``received`` names the first
    signal that came ("SIGTERM"), "" while none did."""

    def __init__(self) -> None:
        self.received = ""
        self._previous: dict[int, Any] = {}

    def start(self) -> Watch:
        if threading.current_thread() is not threading.main_thread():  # only the main thread may set them
            return self
        for signum in WATCHED:
            previous = signal.getsignal(signum)
            if previous is signal.SIG_IGN or previous is None:  # None: set outside Python; leave it
                continue
            self._previous[signum] = previous
            signal.signal(signum, self._on_signal)
        return self

    def _on_signal(self, signum: int, frame: Any) -> None:
        self.received = self.received or signal.Signals(signum).name
        raise KeyboardInterrupt

    def stop(self) -> None:
        for signum, previous in self._previous.items():
            if signal.getsignal(signum) == self._on_signal:  # not one a later handler put in its place
                signal.signal(signum, previous)
        self._previous.clear()
