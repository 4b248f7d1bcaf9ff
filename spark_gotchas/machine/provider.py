"""One provider for every reading: live (read the machine) or replayed (read a snapshot).

Judges never touch the machine: they get readings from here. A live reading is round-tripped
through JSON before a judge sees it, so a replay judges exactly the same values.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

from ..base.serial import OutOfRange, from_jsonable, to_jsonable
from . import readers as _readers
from .options import RunOptions
from .readers import ReadingUnavailable
from .snapshot import Snapshot


class Provider:
    def __init__(
        self,
        options: RunOptions,
        replay: Snapshot | None = None,
        worker_factory: Callable[[], Any] | None = None,
        load_worker_factory: Callable[[], Any] | None = None,
    ):
        self.options = options
        self.replay = replay
        self._worker_factory = worker_factory or _no_worker
        self._cache: dict[str, Any] = {}
        self._errors: dict[str, str] = {}
        self._bugs: set[str] = set()
        self.recorded: dict[str, Any] = {}
        self.seconds: dict[str, float] = {}
        self._locks: defaultdict[str, threading.Lock] = defaultdict(threading.Lock)
        self._locks_lock = threading.Lock()
        self._prefetching: dict[str, threading.Thread] = {}
        self._raised: dict[str, ReadingUnavailable] = {}
        self.ctx = _readers.ReadContext(options=options, worker_factory=self._worker_factory, provider=self,
                                        load_worker_factory=load_worker_factory)

    @property
    def live(self) -> bool:
        return self.replay is None

    def prefetch(self, key: str) -> None:
        """Start taking the reading ``key`` in a background thread (live runs only); :meth:`read`
        then waits for it. The head start (:mod:`spark_gotchas.runtime.headstart`) uses this."""
        if self.replay is not None or key in self._cache or key in self._prefetching or key not in _readers.load_all():
            return
        thread = threading.Thread(target=self.try_read, args=(key,), name=f"prefetch {key}", daemon=True)
        self._prefetching[key] = thread
        thread.start()

    def _lock(self, key: str) -> threading.Lock:
        with self._locks_lock:
            return self._locks[key]

    def read(self, key: str) -> Any:
        """The reading for ``key``, taken once per run; raises :class:`ReadingUnavailable`.

        Thread-safe: a reading being taken in another thread (:meth:`prefetch`) is waited for.
        """
        if key in self._cache:
            return self._cache[key]
        with self._lock(key):
            return self._read(key)

    def _read(self, key: str) -> Any:
        if key in self._cache:
            return self._cache[key]
        if key in self._raised:
            raise self._raised[key]
        if key in self._errors:
            raise ReadingUnavailable(key, self._errors[key], bug=key in self._bugs)
        specs = _readers.load_all()
        spec = specs.get(key)
        if spec is None:
            raise ReadingUnavailable(key, "no reader of that name")
        if self.replay is not None:
            if key not in self.replay.readings:
                self._errors[key] = f"not in the snapshot {Path(self.replay.path).name}"  # the line stays short
                raise ReadingUnavailable(key, self._errors[key])
            data = self.replay.readings[key]
        else:
            t0 = time.perf_counter()
            try:
                value = spec.func(self.ctx)
            except ReadingUnavailable as exc:
                self._raised[key] = exc  # asked again (after a prefetch, say), the answer is the same
                raise
            except OutOfRange as exc:  # a measurement that came back as no machine can measure
                self._errors[key] = str(exc)
                raise ReadingUnavailable(key, self._errors[key]) from None
            except Exception as exc:  # a reader bug must not take the run down
                self._errors[key] = f"reader failed: {type(exc).__name__}: {exc}"
                self._bugs.add(key)
                raise ReadingUnavailable(key, self._errors[key], bug=True) from exc
            finally:
                self.seconds[key] = time.perf_counter() - t0
            data = to_jsonable(value)
            self.recorded[key] = data
        if data is None:  # null fits a field, never a whole reading
            self._errors[key] = f"recorded reading is null, not a {getattr(spec.returns, '__name__', spec.returns)}"
            raise ReadingUnavailable(key, self._errors[key])
        try:
            value = from_jsonable(spec.returns, data)
        except OutOfRange as exc:  # "result.methods[0].gbps: -4600 GB/s is below 0 GB/s"
            self._errors[key] = str(exc)
            raise ReadingUnavailable(key, self._errors[key]) from None
        except (TypeError, ValueError, KeyError) as exc:
            self._errors[key] = f"recorded reading does not fit {getattr(spec.returns, '__name__', spec.returns)}: {exc}"
            raise ReadingUnavailable(key, self._errors[key]) from None
        if self.replay is not None and spec.replay_input is not None and spec.replay_input[0] in self.options.explicit:
            try:
                value = from_jsonable(spec.returns, to_jsonable(spec.replay_input[1](self.ctx, value)))
            except ReadingUnavailable as exc:
                self._raised[key] = exc
                raise
        self._cache[key] = value
        return value

    def error(self, key: str) -> str | None:
        """Why the reading ``key`` could not be had, once it was asked for (None otherwise)."""
        if key in self._raised:
            return self._raised[key].reason
        return self._errors.get(key)

    def try_read(self, key: str) -> Any:
        """The reading, or None when it is unavailable (for optional context in a judgement)."""
        try:
            return self.read(key)
        except ReadingUnavailable:
            return None

    def peek(self, key: str) -> Any:
        """A reading only if it was already taken (or is in the replayed snapshot); never reads."""
        if key in self._cache:
            return self._cache[key]
        if self.replay is not None and key in self.replay.readings:
            return self.try_read(key)
        return None


def _no_worker() -> Any:
    raise ReadingUnavailable("worker", "no GPU worker in this run")


def peek(provider: Provider, key: str) -> Any:
    """A reading only if it was already taken (or is in the replayed snapshot); never reads."""
    return provider.peek(key)
