"""The soak's picture: temperature, power, SM clock and throughput over time, verdict on top.

Four panels share the time axis so a fall in throughput lines up with what caused it; spans
where a thermal or power-brake reason was active (or its counter grew) are shaded red in all
four. Reference lines: the rated power, the clock floor, the first window's throughput and the
fail threshold below it. matplotlib is optional (``pip install 'spark-gotchas[plot]'``):
without it the soak says so and keeps the CSV, which holds every sample.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Optional

from ...base.units import hms
from ...knowledge.readings.thermal import THROTTLE_BITS, THROTTLE_COUNTERS, SoakReading, SoakWindow
from .record import read_csv

NO_MATPLOTLIB = "matplotlib not installed (pip install 'spark-gotchas[plot]'): no PNG; the CSV has every sample"
STATUS_COLOURS = {"FAIL": "#c62828", "WARN": "#ef6c00", "PASS": "#2e7d32"}


def _throttled(w: SoakWindow) -> bool:
    return bool((w.reasons_mask or 0) & THROTTLE_BITS) or any(w.counter_deltas_us.get(k, 0) > 0 for k in THROTTLE_COUNTERS)


def plot_soak(reading: SoakReading, verdict_line: str, png_path: Path | str,
              floor_mhz: Optional[float] = None, rated_w: Optional[float] = None,
              rated_label: str = "") -> tuple[str, str]:
    """Draw the PNG; (path, "") when drawn, ("", why not) otherwise. Never raises."""
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        if isinstance(exc, ModuleNotFoundError) and (exc.name or "").split(".")[0] == "matplotlib":
            return "", NO_MATPLOTLIB
        return "", f"matplotlib does not import ({type(exc).__name__}: {exc}): no PNG; the CSV has every sample"
    try:
        return _draw(Figure, reading, verdict_line, Path(png_path), floor_mhz, rated_w, rated_label), ""
    except Exception as exc:  # a plot must never cost the run its verdict
        return "", f"plot failed ({type(exc).__name__}: {exc}); the CSV has every sample"


def png_path_of(reading: SoakReading) -> Path:
    """Where a soak's PNG goes: beside its CSV, same name (``g4-soak-….png``)."""
    return Path(reading.csv_path).with_suffix(".png")


def _samples(reading: SoakReading):
    if reading.csv_path and Path(reading.csv_path).exists():
        try:
            return read_csv(reading.csv_path, keep_samples=True).samples
        except (OSError, ValueError):
            pass
    return []


def _draw(Figure, reading: SoakReading, verdict_line: str, path: Path, floor_mhz: Optional[float],
          rated_w: Optional[float], rated_label: str) -> str:
    samples = _samples(reading)
    windows = reading.windows
    span = max([reading.elapsed_s] + [w.t_end_s for w in windows] + [s.t_s for s in samples] + [1.0])
    scale, unit = (3600.0, "hours") if span >= 7200 else (60.0, "minutes")

    def series(values):
        pts = [(t / scale, v) for t, v in values if v is not None]
        return [p[0] for p in pts], [p[1] for p in pts]

    if samples:
        src = [(s.t_s, s) for s in samples]
        temp = series((t, s.temperature_c) for t, s in src)
        power = series((t, s.power_w) for t, s in src)
        clock = series((t, s.sm_clock_mhz) for t, s in src)
    else:  # replayed without the CSV: window means
        temp = series((w.t_end_s, w.temperature_mean_c) for w in windows)
        power = series((w.t_end_s, w.power_mean_w) for w in windows)
        clock = series((w.t_end_s, w.sm_clock_median_mhz) for w in windows)
    tput = series((w.t_end_s - w.seconds / 2, w.tflops) for w in windows)

    fig = Figure(figsize=(11, 9.5), dpi=100, layout="constrained")
    axes = fig.subplots(4, 1, sharex=True)
    panels = [
        (axes[0], temp, "GPU temperature (°C)", "#d84315"),
        (axes[1], power, "power draw (W)", "#6a1b9a"),
        (axes[2], clock, "SM clock (MHz)", "#1565c0"),
    ]
    for ax, (xs, ys), label, colour in panels:
        ax.plot(xs, ys, color=colour, linewidth=1.0)
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
        if not xs:
            ax.text(0.5, 0.5, "not read (NVML unavailable)", transform=ax.transAxes, ha="center", color="gray")
    if rated_w:
        top = max(power[1] + [rated_w]) * 1.08
        axes[1].axhline(rated_w, color="gray", linestyle="--", linewidth=1)
        axes[1].text(0.005, rated_w, f" {rated_label or f'rated {rated_w:.0f} W'}", transform=axes[1].get_yaxis_transform(),
                     va="bottom", fontsize=8, color="gray")
        axes[1].set_ylim(0, top)
    if floor_mhz:
        axes[2].axhline(floor_mhz, color="#c62828", linestyle="--", linewidth=1)
        axes[2].text(0.005, floor_mhz, f" floor {floor_mhz:.0f} MHz (below = stuck/throttled)",
                     transform=axes[2].get_yaxis_transform(), va="bottom", fontsize=8, color="#c62828")
        axes[2].set_ylim(0, max(clock[1] + [floor_mhz]) * 1.1)
    ax = axes[3]
    ax.step(tput[0], tput[1], where="mid", color="#2e7d32", linewidth=1.5, marker="o", markersize=2)
    ax.set_ylabel(f"throughput ({reading.dtype.upper()} TFLOP/s)")
    ax.grid(True, alpha=0.3)
    firsts = [w.tflops for w in windows if w.tflops is not None]
    if firsts:
        first = firsts[0]
        limit = first * (1 - reading.max_drop_fraction)
        ax.axhline(first, color="gray", linestyle=":", linewidth=1)
        ax.axhline(limit, color="#c62828", linestyle="--", linewidth=1)
        ax.text(0.005, limit, f" first window - {reading.max_drop_fraction:.0%}: below = throughput fell",
                transform=ax.get_yaxis_transform(), va="top", fontsize=8, color="#c62828")
        ax.set_ylim(0, max(tput[1] + [first]) * 1.1)
    ax.set_xlabel(f"time since the soak started ({unit})")
    shaded = False
    for w in windows:
        if _throttled(w):
            for a in axes:
                a.axvspan(w.t_start_s / scale, w.t_end_s / scale, color="#ef9a9a", alpha=0.35, linewidth=0,
                          label=None if shaded else "thermal / power-brake throttling")
            shaded = True
    if shaded:
        axes[0].legend(loc="upper left", fontsize=8)
    status = verdict_line.split(":", 1)[0].split()[-1] if ":" in verdict_line else ""
    fig.suptitle("\n".join(textwrap.wrap(verdict_line, 110)), fontsize=10.5, color=STATUS_COLOURS.get(status, "black"),
                 horizontalalignment="left", x=0.01)
    detail = [reading.device or "GPU", f"{reading.dtype.upper()} GEMM" + (f" {reading.size}^3" if reading.size else ""),
              f"planned {hms(reading.planned_s)}", reading.end_reason or "", Path(reading.csv_path).name]
    axes[0].set_title(" · ".join(d for d in detail if d), fontsize=8.5, color="dimgray", loc="left")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    return str(path)
