"""Reading types of the ``bench.*`` keys (G5, G7): measured bandwidth and GEMM rates.

Each wraps the result type of the microbenchmark that ``spark-gotchas microbench`` also runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ...microbench.bandwidth import BandwidthResult, BandwidthSweep
from ...microbench.gemm import GemmResult
from .gpu import MeasureWindow


# -- bench.bandwidth ------------------------------------------------------------------------------
@dataclass
class BandwidthReading:
    """``spark-gotchas microbench bandwidth --json`` (the fast probe: about 1 GiB per array).

    ``attempted`` False: ``reason`` says why (no torch, CPU build, no device). ``problem``:
    the probe ran but failed (not enough memory, a crash, a hang), in one line.
    """

    attempted: bool
    reason: str = ""
    problem: str = ""
    crashed: bool = False
    result: Optional[BandwidthResult] = None
    window: Optional[MeasureWindow] = None  # who else was on the GPU while the probe ran (None: not sampled)
    again: Optional[BandwidthResult] = None  # the probe run once more: the first was far below with nobody else seen
    again_window: Optional[MeasureWindow] = None
    backend_note: str = ""  # why the torch-free measurement was not used, where it was tried


# -- bench.bandwidth_sweep ------------------------------------------------------------------------
@dataclass
class BandwidthSweepReading:
    """``spark-gotchas microbench bandwidth --sweep --json``: array sizes from L2/2 to the budget."""

    attempted: bool
    reason: str = ""
    problem: str = ""
    crashed: bool = False
    result: Optional[BandwidthSweep] = None
    csv_path: Optional[str] = None
    window: Optional[MeasureWindow] = None  # who else was on the GPU while the sweep ran (None: not sampled)


# -- bench.gemm -----------------------------------------------------------------------------------
@dataclass
class GemmReading:
    """``spark-gotchas microbench gemm --size 8192 --json``: BF16, FP8, NVFP4 rates and errors."""

    attempted: bool
    reason: str = ""
    problem: str = ""
    crashed: bool = False
    result: Optional[GemmResult] = None
    window: Optional[MeasureWindow] = None  # who else was on the GPU while the probe ran (None: not sampled)
    backend_note: str = ""  # why the torch-free measurement was not used, where it was tried
