"""A periodic sampler thread: call ``take()`` every ``interval_s`` and hand the result to ``sink``.

Used at 10 Hz for the load spot check and at 1 Hz for the soak. Ticks keep to a fixed
schedule (a slow tick is not followed by a burst), an exception in ``take``/``sink`` is
counted and kept, never raised into the thread's void, and the time spent sampling is
measured so the sampler's own cost can be reported.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Optional


class Sampler:
    def __init__(self, take: Callable[[], Any], sink: Callable[[Any], None], interval_s: float = 1.0,
                 name: str = "spark-gotchas-sampler"):
        if interval_s <= 0:
            raise ValueError("interval_s must be > 0")
        self.take = take
        self.sink = sink
        self.interval_s = interval_s
        self.ticks = 0
        self.errors = 0
        self.last_error: Optional[str] = None
        self.busy_s = 0.0  # wall time spent inside take() + sink()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def start(self) -> Sampler:
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop after the current tick (if any) and wait for the thread."""
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def __enter__(self) -> Sampler:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def _loop(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            t0 = time.perf_counter()
            try:
                self.sink(self.take())
            except Exception as exc:  # keep sampling: one bad tick must not end a soak
                self.errors += 1
                self.last_error = f"{type(exc).__name__}: {exc}"
            self.busy_s += time.perf_counter() - t0
            self.ticks += 1
            next_at += self.interval_s
            delay = next_at - time.monotonic()
            if delay < 0:  # fell behind (a slow tick): skip the missed ticks, keep the grid
                next_at += -delay // self.interval_s * self.interval_s + self.interval_s
                delay = next_at - time.monotonic()
            self._stop.wait(max(0.0, delay))
