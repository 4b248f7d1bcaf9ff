"""Reading types of the ``thermal.*`` keys (G4): NVML samples, clock-event counters and reasons, the
at-rest snapshot, the spot check under load, the soak's windows, and the soak heartbeat a reboot leaves.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ...microbench.quantities import (
    Bytes,
    Celsius,
    Epoch,
    Fraction,
    IntEpoch,
    MHz,
    Microseconds,
    Percent,
    Seconds,
    TFlops,
    Watts,
)
from .gpu import MeasureWindow

# -- thermal.snapshot (and the samples, counters and reasons every thermal reading uses) ----------
# Clock-event reason bits (nvml.h nvmlClocksEventReason*).
REASON_NAMES = {
    0x1: "GPU idle",
    0x2: "applications clocks setting",
    0x4: "SW power cap",
    0x8: "HW slowdown",
    0x10: "sync boost",
    0x20: "SW thermal slowdown",
    0x40: "HW thermal slowdown",
    0x80: "HW power brake",
    0x100: "display clock setting",
}
SW_POWER_CAP = 0x4
THROTTLE_BITS = 0x8 | 0x20 | 0x40 | 0x80  # thermal and power-brake reasons: the G4 evidence

# Counter keys (cumulative microseconds). ``thermal`` is NVML's thermal policy total; the
# ``sw_thermal``/``hw_thermal``/``hw_power_brake`` split is nvidia-smi's.
COUNTER_NAMES = {
    "sw_power_cap": "SW power cap",
    "thermal": "thermal (NVML policy)",
    "sw_thermal": "SW thermal slowdown",
    "hw_thermal": "HW thermal slowdown",
    "hw_power_brake": "HW power brake",
    "sync_boost": "sync boost",
}
THROTTLE_COUNTERS = ("thermal", "sw_thermal", "hw_thermal", "hw_power_brake")


def reason_names(mask: Optional[int]) -> list[str]:
    """Names of the bits set in a clock-event reason mask (idle excluded: it is no throttle)."""
    if not mask:
        return []
    return [name for bit, name in REASON_NAMES.items() if mask & bit and bit != 0x1]


@dataclass
class ThermalSample:
    """One NVML reading, cheap enough for 10 Hz. None = not reported (see the snapshot's reasons).

    Command line equivalent: ``nvidia-smi --query-gpu=timestamp,temperature.gpu,power.draw,
    clocks.sm,clocks.mem,utilization.gpu,clocks_event_reasons.active --format=csv -lms 100``
    """

    t_s: Seconds  # seconds since the sampler started
    temperature_c: Optional[Celsius] = None
    power_w: Optional[Watts] = None
    sm_clock_mhz: Optional[MHz] = None
    mem_clock_mhz: Optional[MHz] = None
    utilization_pct: Optional[Percent] = None
    reasons_mask: Optional[int] = None
    sw_power_cap_us: Optional[Microseconds] = None  # NVML violation status, power policy (cumulative)
    thermal_us: Optional[Microseconds] = None  # NVML violation status, thermal policy (cumulative)


@dataclass
class ClockCounters:
    """Cumulative time in each clock-event reason since the driver loaded, microseconds.

    Command line equivalent: ``nvidia-smi -q -d PERFORMANCE`` ("Clocks Event Reasons Counters")
    or ``nvidia-smi --query-gpu=clocks_event_reasons_counters.sw_power_cap,… --format=csv``.
    """

    values_us: dict[str, Microseconds] = field(default_factory=dict)  # key in COUNTER_NAMES
    sources: dict[str, str] = field(default_factory=dict)  # key -> "nvml" | "nvidia-smi"
    unavailable: dict[str, str] = field(default_factory=dict)  # source -> why it gave nothing

    def delta(self, later: ClockCounters) -> dict[str, float]:
        """``later - self`` for every counter both have (a counter that went back is left out)."""
        out = {}
        for key, before in self.values_us.items():
            after = later.values_us.get(key)
            if after is not None and before is not None and after >= before:
                out[key] = after - before
        return out


@dataclass
class ThermalSnapshot:
    """The GPU at rest: what it reads now and what it has accumulated since the driver loaded.

    Command line equivalent: ``nvidia-smi --query-gpu=name,temperature.gpu,power.draw,power.limit,
    clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem,clocks_event_reasons.active --format=csv``
    and ``nvidia-smi -q -d PERFORMANCE,TEMPERATURE``.
    """

    nvml_error: Optional[str] = None
    index: Optional[int] = None  # NVML index of the device torch calls cuda:0
    selected_by: str = ""
    name: Optional[str] = None
    sample: Optional[ThermalSample] = None
    power_limit_w: Optional[Watts] = None
    max_sm_clock_mhz: Optional[MHz] = None
    max_mem_clock_mhz: Optional[MHz] = None
    slowdown_temp_c: Optional[Celsius] = None
    shutdown_temp_c: Optional[Celsius] = None
    counters: ClockCounters = field(default_factory=ClockCounters)
    unavailable: dict[str, str] = field(default_factory=dict)


# -- thermal.spot_check ---------------------------------------------------------------------------
@dataclass
class SpotCheck:
    """The spot check's reading. Times are seconds since sampling began."""

    attempted: bool
    reason: str = ""  # why not attempted
    load_problem: str = ""  # the load crashed, hung or raised
    device: Optional[str] = None
    size: Optional[int] = None
    dtype: str = "bf16"
    load_start_s: Optional[Seconds] = None  # measured load window (after warm-up)
    load_end_s: Optional[Seconds] = None
    tflops: Optional[TFlops] = None
    busy_fraction: Optional[Fraction] = None
    samples: list[ThermalSample] = field(default_factory=list)
    counters_before: ClockCounters = field(default_factory=ClockCounters)
    counters_after: ClockCounters = field(default_factory=ClockCounters)
    max_sm_clock_mhz: Optional[MHz] = None
    power_limit_w: Optional[Watts] = None
    sampler_errors: int = 0
    unavailable: dict[str, str] = field(default_factory=dict)
    backend: str = ""  # what ran the load: "torch", or the libcublas path (ctypes, no torch)
    backend_note: str = ""  # why the torch-free load was not used, where it was not
    window: Optional[MeasureWindow] = None  # who else was on the GPU while the load ran (None: not sampled)
    again: Optional[SpotCheck] = None  # the load run once more: the first was far below with nobody else seen

    @property
    def counter_deltas_us(self) -> dict[str, float]:
        return self.counters_before.delta(self.counters_after)

    def under_load(self, ramp_s: float = 0.3) -> list[ThermalSample]:
        """Samples inside the measured load window, the first ``ramp_s`` (clock ramp) left out."""
        if self.load_start_s is None or self.load_end_s is None:
            return []
        return [s for s in self.samples if self.load_start_s + ramp_s <= s.t_s <= self.load_end_s]


# -- thermal.reboot (the heartbeat a soak writes) -------------------------------------------------
HEARTBEAT_FORMAT = "spark-gotchas-soak-heartbeat"


@dataclass
class Heartbeat:
    """The soak's own record of itself; ``end_reason`` is None until the soak ends under control."""

    boot_id: Optional[str]
    btime_s: Optional[IntEpoch]  # boot time of the soak's boot (epoch seconds, /proc/stat btime)
    pid: int
    host: str
    started_epoch: Epoch
    planned_s: Seconds
    last_sample_epoch: Epoch
    samples: int = 0
    csv_path: str = ""
    ended_epoch: Optional[Epoch] = None
    end_reason: Optional[str] = None  # "completed", "cut short by SIGINT", "load failed: …"
    format: str = HEARTBEAT_FORMAT


@dataclass
class RebootCheck:
    """The heartbeat of the last soak (if any) next to this boot's identity."""

    heartbeat_path: str
    found: bool = False
    heartbeat: Optional[Heartbeat] = None
    error: Optional[str] = None  # the file exists but cannot be used
    boot_id: Optional[str] = None
    btime_s: Optional[IntEpoch] = None
    now_epoch: Epoch = 0.0
    soak_pid_alive: Optional[bool] = None  # the soak's process still runs (same boot only)


# -- thermal.soak ---------------------------------------------------------------------------------
# The throughput fall (last full window vs the first) that fails a soak, unless
# SPARK_GOTCHAS_SOAK_MAX_DROP says otherwise; each reading records the one it was judged with.
DEFAULT_MAX_DROP = 0.10


@dataclass
class SoakWindow:
    """One load window: the load's throughput and what the sampler saw meanwhile.

    Temperatures in °C, power in W, clocks in MHz; ``counter_deltas_us`` is the growth of each
    cumulative clock-event counter over the window (keys as in ``COUNTER_NAMES``).
    """

    index: int
    t_end_s: Seconds  # seconds since the soak started
    seconds: Seconds
    tflops: Optional[TFlops] = None
    busy_fraction: Optional[Fraction] = None
    samples: int = 0
    temperature_max_c: Optional[Celsius] = None
    temperature_mean_c: Optional[Celsius] = None
    power_mean_w: Optional[Watts] = None
    sm_clock_median_mhz: Optional[MHz] = None
    sm_clock_min_mhz: Optional[MHz] = None
    sm_clock_max_mhz: Optional[MHz] = None
    utilization_mean_pct: Optional[Percent] = None
    reasons_mask: Optional[int] = None  # OR of the active masks seen in the window
    counter_deltas_us: dict[str, Microseconds] = field(default_factory=dict)
    worker_rss_bytes: Optional[Bytes] = None
    parent_rss_bytes: Optional[Bytes] = None

    @property
    def t_start_s(self) -> float:
        return self.t_end_s - self.seconds


@dataclass
class SoakReading:
    """What one soak measured (or why it could not run)."""

    attempted: bool
    reason: str = ""  # why not attempted
    planned_s: Seconds = 0.0
    window_s: Seconds = 0.0
    sample_interval_s: Seconds = 1.0
    started_epoch: Optional[Epoch] = None
    elapsed_s: Seconds = 0.0
    end_reason: str = ""  # "completed", "cut short by SIGINT", "load failed: …", "no end marker …"
    interrupted: bool = False
    load_problem: str = ""
    nvml_error: str = ""  # NVML unavailable: throughput only, no temperature, power or clocks
    device: Optional[str] = None
    size: Optional[int] = None
    dtype: str = "bf16"
    max_sm_clock_mhz: Optional[MHz] = None
    power_limit_w: Optional[Watts] = None
    max_drop_fraction: Fraction = DEFAULT_MAX_DROP
    samples: int = 0
    sampler_busy_s: Seconds = 0.0
    sampler_errors: int = 0
    windows: list[SoakWindow] = field(default_factory=list)
    merged: int = 1  # load windows per entry of ``windows`` (long runs are downsampled)
    csv_path: str = ""
    heartbeat_path: str = ""
    png_path: str = ""
    plot_note: str = ""

    @property
    def cut_short(self) -> bool:
        """Stopped by a signal before its planned duration. A signal that arrives once the whole
        duration ran (a loaded machine finishing its last window) cuts nothing short."""
        return self.interrupted and self.elapsed_s < self.planned_s

    @property
    def completed(self) -> bool:
        return self.end_reason == "completed" or (self.interrupted and not self.cut_short)
