"""CUDA-event timing in the manner of triton's ``do_bench``.

``bench(fn)`` calls ``fn`` once untimed (compilation, first-touch, cuBLAS heuristics), then
estimates one call from five, turns the warm-up and repetition budgets (milliseconds) into
counts, and times each repetition with its own pair of CUDA events. Nothing synchronises
between repetitions; one ``synchronize`` at the end collects every event. An optional
``flush`` runs before each repetition outside its event pair (e.g. to evict L2).

The events and the synchronisation come from a ``clock`` (torch.cuda by default), so the
arithmetic here is tested without a GPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

from .quantities import Count, Milliseconds

QUANTILES = (0.1, 0.2, 0.5, 0.8, 0.9)


@dataclass
class Timing:
    """Per-repetition times of one function, in milliseconds."""

    median_ms: Milliseconds
    min_ms: Milliseconds
    max_ms: Milliseconds
    quantiles_ms: dict[str, Milliseconds] = field(default_factory=dict)  # "0.2" -> ms
    reps: Count = 0
    warmup_reps: Count = 0
    estimate_ms: Milliseconds = 0.0

    def rate(self, amount: float, at: str = "median") -> float:
        """``amount`` per second at the median (or ``"min"``: the best repetition)."""
        ms = self.min_ms if at == "min" else self.median_ms
        return amount / (ms * 1e-3) if ms > 0 else 0.0


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile of already sorted values (``torch.quantile``'s default)."""
    if not sorted_values:
        raise ValueError("no values")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile {q} outside [0, 1]")
    point = q * (len(sorted_values) - 1)
    lo, hi = math.floor(point), math.ceil(point)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (point - lo)


def summarize(times_ms: Sequence[float], warmup_reps: int = 0, estimate_ms: float = 0.0,
              quantiles: Sequence[float] = QUANTILES) -> Timing:
    values = sorted(float(t) for t in times_ms)
    return Timing(
        median_ms=quantile(values, 0.5),
        min_ms=values[0],
        max_ms=values[-1],
        quantiles_ms={f"{q:g}": quantile(values, q) for q in quantiles},
        reps=len(values),
        warmup_reps=warmup_reps,
        estimate_ms=estimate_ms,
    )


class TorchClock:
    """CUDA events and synchronisation from torch (imported on first use)."""

    def __init__(self) -> None:
        import torch

        self._torch = torch

    def event(self) -> Any:
        return self._torch.cuda.Event(enable_timing=True)

    def synchronize(self) -> None:
        self._torch.cuda.synchronize()


def bench(
    fn: Callable[[], Any],
    warmup_ms: float = 25.0,
    rep_ms: float = 100.0,
    min_reps: int = 5,
    max_reps: int = 1000,
    flush: Optional[Callable[[], Any]] = None,
    quantiles: Sequence[float] = QUANTILES,
    clock: Any = None,
) -> Timing:
    """Time ``fn``: first call excluded, ``warmup_ms`` of warm-up, ``rep_ms`` of repetitions
    (at least ``min_reps``, at most ``max_reps``), one event pair each, one sync at the end."""
    clock = clock or TorchClock()
    fn()
    clock.synchronize()
    start, end = clock.event(), clock.event()
    start.record()
    for _ in range(5):
        if flush is not None:
            flush()
        fn()
    end.record()
    clock.synchronize()
    estimate_ms = max(start.elapsed_time(end) / 5, 1e-6)
    n_warmup = max(1, int(warmup_ms / estimate_ms))
    n_reps = min(max_reps, max(min_reps, int(rep_ms / estimate_ms)))
    starts = [clock.event() for _ in range(n_reps)]
    ends = [clock.event() for _ in range(n_reps)]
    for _ in range(n_warmup):
        fn()
    for i in range(n_reps):
        if flush is not None:
            flush()
        starts[i].record()
        fn()
        ends[i].record()
    clock.synchronize()
    times = [s.elapsed_time(e) for s, e in zip(starts, ends, strict=True)]
    return summarize(times, n_warmup, estimate_ms, quantiles)


def l2_flusher(l2_bytes: int, device: str = "cuda") -> Callable[[], Any]:
    """A function that evicts L2 by writing a buffer twice its size (``do_bench``'s cache.zero_())."""
    import torch

    buffer = torch.empty(max(2 * int(l2_bytes), 1 << 20) // 4, dtype=torch.int32, device=device)
    return buffer.zero_
