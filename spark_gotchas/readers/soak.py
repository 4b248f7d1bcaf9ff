"""The G4 soak's reading: the per-window series a verdict is judged from, and where its files are.

The soak itself (load, sampler, CSV, heartbeat, signals, progress) lives in
:mod:`spark_gotchas.soak`; this module only declares what it returns, so a snapshot replays
the verdict without the machine. The full-resolution samples stay in the CSV, which
``python -m spark_gotchas.soak_record CSV`` can re-judge on its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from . import ReadContext, reader


@dataclass
class SoakWindow:
    """One load window: the load's throughput and what the sampler saw meanwhile.

    Temperatures in °C, power in W, clocks in MHz; ``counter_deltas_us`` is the growth of each
    cumulative clock-event counter over the window (keys as in ``readers.thermal.COUNTER_NAMES``).
    """

    index: int
    t_end_s: float  # seconds since the soak started
    seconds: float
    tflops: Optional[float] = None
    busy_fraction: Optional[float] = None
    samples: int = 0
    temperature_max_c: Optional[float] = None
    temperature_mean_c: Optional[float] = None
    power_mean_w: Optional[float] = None
    sm_clock_median_mhz: Optional[float] = None
    sm_clock_min_mhz: Optional[float] = None
    sm_clock_max_mhz: Optional[float] = None
    utilization_mean_pct: Optional[float] = None
    reasons_mask: Optional[int] = None  # OR of the active masks seen in the window
    counter_deltas_us: dict[str, float] = field(default_factory=dict)
    worker_rss_bytes: Optional[int] = None
    parent_rss_bytes: Optional[int] = None

    @property
    def t_start_s(self) -> float:
        return self.t_end_s - self.seconds


@dataclass
class SoakReading:
    """What one soak measured (or why it could not run)."""

    attempted: bool
    reason: str = ""  # why not attempted
    planned_s: float = 0.0
    window_s: float = 0.0
    sample_interval_s: float = 1.0
    started_epoch: Optional[float] = None
    elapsed_s: float = 0.0
    end_reason: str = ""  # "completed", "cut short by SIGINT", "load failed: …", "no end marker …"
    interrupted: bool = False
    load_problem: str = ""
    nvml_error: str = ""  # NVML unavailable: throughput only, no temperature, power or clocks
    device: Optional[str] = None
    size: Optional[int] = None
    dtype: str = "bf16"
    max_sm_clock_mhz: Optional[float] = None
    power_limit_w: Optional[float] = None
    max_drop_fraction: float = 0.10
    samples: int = 0
    sampler_busy_s: float = 0.0
    sampler_errors: int = 0
    windows: list[SoakWindow] = field(default_factory=list)
    merged: int = 1  # load windows per entry of ``windows`` (long runs are downsampled)
    csv_path: str = ""
    heartbeat_path: str = ""
    png_path: str = ""
    plot_note: str = ""

    @property
    def completed(self) -> bool:
        return self.end_reason == "completed"


@reader("thermal.soak")
def read_soak(ctx: ReadContext) -> SoakReading:
    """Sustained BF16 GEMM for ``--soak-duration`` with a 1 Hz sampler; CSV and PNG in ``--soak-dir``."""
    from ..soak import run_soak_check

    return run_soak_check(ctx)
