"""One run's state: its options, the provider of readings, the workers, and every verdict.

Kept under the plugin's ``STATE_KEY`` from ``pytest_configure`` to ``pytest_unconfigure``;
the report writers (:mod:`spark_gotchas.outputs.reports`) read it through its public fields only.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Any, Optional

from ..base import outward
from ..knowledge.verdict import Verdict
from ..machine.options import RunOptions
from ..machine.provider import Provider, ReadingUnavailable
from ..machine.snapshot import Snapshot


@dataclass
class Reported:
    nodeid: str
    verdict: Verdict
    order: int = 1 << 30  # the check's place in file order (not run order) for stable summaries


@dataclass
class SessionState:
    """Per-run state: options, the provider, the worker, and every verdict reported."""

    config: Any
    options: RunOptions
    replay: Optional[Snapshot] = None
    active: bool = False  # True once a gotcha check is collected
    reported: list[Reported] = field(default_factory=list)
    left_out: set[str] = field(default_factory=set)  # soak/multinode checks a replay left out, reported from the snapshot
    notes: list[str] = field(default_factory=list)
    output_errors: list[str] = field(default_factory=list)  # outputs asked for and not written
    artifacts: dict[str, str] = field(default_factory=dict)  # name -> path, for reports
    current_item: Any = None
    configured_epoch: float = field(default_factory=time.time)  # the origin of the report's timing
    check_times: list[tuple[str, float, float]] = field(default_factory=list)  # nodeid, start epoch, seconds
    markers: str = ""  # this run's -m selection, recorded in the snapshot
    interrupted: str = ""  # why the run ended early ("Ctrl-C (SIGINT) after 3 of 17 checks"); "" when it did not
    signals: Any = None  # interrupts.Watch: the run's SIGINT and SIGTERM handlers
    _worker: Any = None
    _load_worker: Any = None
    _provider: Optional[Provider] = None
    _head_start: Any = None

    @property
    def provider(self) -> Provider:
        if self._provider is None:
            from ..runtime import headstart

            parts = frozenset(p for p in headstart.PARTS if headstart.enabled(p))
            # without a torch-free part, G4's load, G5's probe and G7's rates wait for torch
            load = self.load_worker if parts & set(headstart.TORCH_FREE) else None
            self._provider = Provider(self.options, self.replay, self.worker, load)
            self._provider.ctx.head_start = parts
            self._provider.ctx.say = self.say
            self._provider.ctx.add_artifact = self.add_artifact
            self._provider.ctx.own_on_gpu = self.own_on_gpu
        return self._provider

    def own_on_gpu(self) -> int:
        """How many of this run's workers may hold a GPU context now (0 before any used the GPU)."""
        return sum(1 for w in (self._worker, self._load_worker) if w is not None and w.on_gpu)

    def say(self, text: str) -> None:
        """Print a progress line now, past pytest's output capture (soak progress, etc.)."""
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            outward.say(text, err=True)
            return
        capture = self.config.pluginmanager.get_plugin("capturemanager")
        suspended = capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext()
        with suspended:  # fd-level capture would otherwise hold the line until the check ends
            reporter.ensure_newline()
            outward.terminal(reporter, text)

    def add_artifact(self, name: str, path: str) -> None:
        """Name a file this run produced (CSV, PNG …): the JSON report and summary list it."""
        self.artifacts[name] = str(path)

    def worker(self) -> Any:
        if self.replay is not None:
            raise ReadingUnavailable("worker", "replaying a snapshot: nothing runs on this machine")
        if self._worker is None:
            from ..machine.readers.torch import torch_installed
            from ..runtime.worker import Worker, adopt

            preload = ("torch",) if torch_installed() else ()
            self._worker = adopt(preload) or Worker(preload=preload)
        return self._worker

    @property
    def head_start(self) -> Any:
        """The run's :class:`spark_gotchas.runtime.headstart.HeadStart` (None in a replay: nothing starts)."""
        if self._head_start is None and self.replay is None:
            from ..runtime.headstart import HeadStart

            self._head_start = HeadStart(self.provider, self.worker)
        return self._head_start

    def load_worker(self) -> Any:
        """A worker that imports nothing up front: the G4 spot check's load runs there while the
        GPU worker is still importing torch."""
        if self._load_worker is None:
            self._load_worker = self._bare_worker()
        return self._load_worker

    def _bare_worker(self) -> Any:
        if self.replay is not None:
            raise ReadingUnavailable("worker", "replaying a snapshot: nothing runs on this machine")
        from ..runtime.worker import Worker

        return Worker(preload=())

    def release_workers(self) -> None:
        """Every check has run: close the workers' input, so they exit (a torch process takes tenths
        of a second to) while pytest writes its reports; :meth:`close` then finds them gone."""
        for worker in (self._worker, self._load_worker):
            if worker is not None:
                worker.end_input()

    def close(self) -> None:
        workers = [w for w in (self._worker, self._load_worker) if w is not None]
        self.release_workers()  # all start leaving at once
        for worker in workers:
            worker.close()
        self._worker = self._load_worker = None

    @property
    def verdicts(self) -> list[Verdict]:
        """Every verdict in the checks' file order, whatever order they ran in."""
        return [r.verdict for r in sorted(self.reported, key=lambda r: r.order)]

    def timing(self) -> dict[str, Any]:
        """Where the run's time went, in seconds after pytest configured the run: each check's call,
        and each worker's start, imports and tasks (null when that worker did not run)."""
        origin = self.configured_epoch
        workers = {"worker": self._worker, "load_worker": self._load_worker}
        return {
            "torch": after_torch(self._worker, self.check_times, origin),
            "checks": [{"nodeid": nodeid, "start_s": round(start - origin, 3), "seconds": round(seconds, 3)}
                       for nodeid, start, seconds in self.check_times],
            "prepare_errors": dict(self._head_start.errors) if self._head_start is not None else {},
            **{name: w.timeline.to_json(origin) if w is not None else None for name, w in workers.items()},
        }


def after_torch(worker: Any, check_times: list, origin: float) -> Optional[dict[str, Any]]:
    """The figures a preflight's wall time is judged against: no check of torch can end before torch
    is imported, so the floor is that import; what the run spends after it is the suite's own.

    ``ready_s``: when the GPU worker had imported torch; ``import_s``: how long the import took;
    ``checks_end_s``: when the last check ended; ``after_ready_s``: the checks' time after torch was
    ready; ``tasks_after_ready_s``: the seconds the worker's tasks ran after it (a task that waited for
the import counts from then: the GPU work on that path).
    None when no worker imported torch (a replay, no GPU check)."""
    if worker is None or not worker.timeline.ready:
        return None
    ready = worker.timeline.ready[0]
    end = max((start + seconds for _nodeid, start, seconds in check_times), default=ready)
    busy = sum(max(0.0, t["start"] + t["seconds"] - max(t["start"], ready)) for t in worker.timeline.tasks)
    return {"ready_s": round(ready - origin, 3), "import_s": round(worker.timeline.preload_seconds.get("torch", 0.0), 3),
            "checks_end_s": round(end - origin, 3), "after_ready_s": round(max(0.0, end - ready), 3),
            "tasks_after_ready_s": round(busy, 3)}
