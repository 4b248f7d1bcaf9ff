"""Readers of machine state, registered by key. Each returns a typed, JSON-ready dataclass.

A reader takes a :class:`ReadContext` and never raises for expected trouble (no driver, no
permission, Not Supported): it says so inside its reading. The provider
(:mod:`spark_gotchas.machine.provider`) calls readers once per run, records their readings for a
snapshot, and in replay returns recorded readings without calling any reader.

A reading keyed ``area.name`` is taken by ``readers/<area>.py`` (or ``readers/<area>/<name>.py``
where an area's readers are a package, as ``thermal`` is) and typed in
``spark_gotchas/knowledge/readings/<area>.py``. A reader that belongs with a package of its own is named in
:data:`ELSEWHERE` instead (``thermal.soak``: :mod:`spark_gotchas.runtime.soak.reader`, beside the soak).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from dataclasses import dataclass
from typing import Any, Callable, Optional, get_type_hints

from ..options import RunOptions


class ReadingUnavailable(Exception):
    """A reading could not be taken (or is not in the replayed snapshot)."""

    def __init__(self, key: str, reason: str, bug: bool = False):
        super().__init__(f"{key}: {reason}")
        self.key = key
        self.reason = reason
        self.bug = bug  # the reader itself raised: a defect, reported as FAIL, not SKIP


@dataclass
class ReadContext:
    """What a reader may use: the run's options and the GPU worker (started on first use)."""

    options: RunOptions
    worker_factory: Callable[[], Any]
    provider: Any = None  # readers that build on other readings call provider.read(key)
    say: Callable[[str], None] = lambda text: None  # progress lines past pytest's capture
    add_artifact: Callable[[str, str], None] = lambda name, path: None  # files for the report

    load_worker_factory: Optional[Callable[[], Any]] = None  # a worker without torch, for loads that need none
    # The head start's parts this run uses (spark_gotchas.runtime.headstart.PARTS); of them g4_load, g5_probe and
    # g7_rates run in the load worker.
    head_start: frozenset = frozenset({"g4_load"})
    # How many of this run's processes may hold a GPU context now (0: it has not used the GPU yet;
    # None: not known). Pid-free evidence of another pid namespace's work leans on it.
    own_on_gpu: Callable[[], Optional[int]] = lambda: None

    @property
    def worker(self) -> Any:
        return self.worker_factory()

    @property
    def load_worker(self) -> Any:
        """A second worker that imports nothing up front (None where the run has none)."""
        return self.load_worker_factory() if self.load_worker_factory is not None else None

    def profile(self) -> Any:
        """The profile this run judges against (the option's, or the one matching this GPU)."""
        from ..platform import profile

        return profile(self.provider, self.options.spark_profile)

    def gpu_to_itself(self) -> Any:
        """Pause the GPU worker while a measurement runs in another worker: no GPU task of its may
        start meanwhile (a context manager; a run without a GPU worker has nothing to pause)."""
        from contextlib import nullcontext

        try:
            return self.worker.paused()
        except ReadingUnavailable:
            return nullcontext()

    def torch_free_worker(self, part: str) -> Any:
        """The load worker, where the head start's ``part`` runs there (None: its work waits for torch)."""
        return self.load_worker if part in self.head_start else None


@dataclass(frozen=True)
class ReaderSpec:
    key: str
    func: Callable[[ReadContext], Any]
    returns: Any
    doc: str
    # In a replay where the command line sets ``option`` anew: ``redo(ctx, recorded) -> reading``
    # (inputs the user names, such as config files, are read again; machine state stays recorded).
    replay_input: Optional[tuple[str, Callable[[ReadContext, Any], Any]]] = None


READERS: dict[str, ReaderSpec] = {}
_LOADED = False

# Reader modules outside this package, imported by name when the readers load: as strings, so this
# package imports none of them (the soak's package sits above the readers and imports them).
ELSEWHERE = ("spark_gotchas.runtime.soak.reader",)


def reader(key: str,
           replay_input: Optional[tuple[str, Callable[[ReadContext, Any], Any]]] = None) -> Callable[[Callable], Callable]:
    """Register ``func(ctx) -> Reading`` under ``key`` (its return annotation is the type).

    ``replay_input=(option, redo)``: in a replay whose command line sets ``option``, the reading
    is ``redo(ctx, recorded_reading)`` instead of the recorded one (it may raise
    ReadingUnavailable to say the snapshot cannot answer for that option).
    """

    def register(func: Callable) -> Callable:
        known = READERS.get(key)
        if known is not None and (known.func.__module__, known.func.__qualname__) != (func.__module__, func.__qualname__):
            raise ValueError(f"reader {key!r} registered twice")  # (the same reader imported again replaces itself)
        returns = get_type_hints(func).get("return", Any)
        READERS[key] = ReaderSpec(key, func, returns, inspect.getdoc(func) or "", replay_input)
        return func

    return register


def load_all() -> dict[str, ReaderSpec]:
    """Import every reader module once, those of an area's package too (``readers/thermal/``) and
    those named in :data:`ELSEWHERE`; they are light: no torch, no NVML at import."""
    global _LOADED
    if not _LOADED:
        for info in pkgutil.walk_packages(__path__, prefix=f"{__name__}."):
            importlib.import_module(info.name)
        for name in ELSEWHERE:
            importlib.import_module(name)
        _LOADED = True
    return READERS
