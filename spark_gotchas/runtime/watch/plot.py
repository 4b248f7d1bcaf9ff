"""The watch's picture: the job's rate, SM clock, power, temperature and MemAvailable over the run, the
states shaded, the G-lines on top.

Five panels share the time axis, so a fall of the rate lines up with what came with it: G4's states
(throttling, a stuck clock) shaded red, G3's (memory) orange, G6's (another process on the GPU)
violet, in every panel. Drawn from ``watch.csv`` read back, at most 3000 points a series (a long run is
averaged into buckets), so a day's run draws as fast as a minute's. matplotlib is optional
(``pip install 'spark-gotchas[plot]'``); without it the watch says so in one line and keeps the CSV.
"""

from __future__ import annotations

import textwrap
import warnings
from pathlib import Path

from ...base import outward, scrub
from ...base.units import hms
from ...knowledge.readings.watch import WatchReading
from .record import number, read_rows

NO_MATPLOTLIB = "matplotlib not installed (pip install 'spark-gotchas[plot]'): no watch.png; watch.csv has every sample"
POINTS = 3000
SHADES = {3: ("#ffcc80", "G3 memory"), 4: ("#ef9a9a", "G4 throttling"), 6: ("#ce93d8", "G6 another GPU process"),
          0: ("#b0bec5", "the rate fell")}
SERIES = (("rate", "rate", "#2e7d32", 1.0), ("sm_clock_mhz", "SM clock (MHz)", "#1565c0", 1.0),
          ("power_w", "power (W)", "#6a1b9a", 1.0), ("temperature_c", "temperature (°C)", "#d84315", 1.0),
          ("mem_available_mb", "MemAvailable (GB)", "#455a64", 1e-3))


def plot_watch(reading: WatchReading, lines: list[str], png_path: Path) -> tuple[str, str]:
    """Draw the PNG; (path, "") when drawn, ("", why not) otherwise. Never raises."""
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        if isinstance(exc, ModuleNotFoundError) and (exc.name or "").split(".")[0] == "matplotlib":
            return "", NO_MATPLOTLIB
        return "", f"matplotlib does not import ({type(exc).__name__}: {exc}): no watch.png"
    try:
        with warnings.catch_warnings():  # matplotlib's own (a glyph a font lacks) would reach the terminal raw
            warnings.simplefilter("ignore")
            return _draw(Figure, reading, lines, Path(png_path)), ""
    except Exception as exc:  # a picture must never cost the run its lines
        return "", f"plot failed ({type(exc).__name__}: {exc}); watch.csv has every sample"


def _series(reading: WatchReading) -> dict[str, tuple[list[float], list[float]]]:
    span = max(reading.elapsed_s, 1.0)
    width = span / POINTS
    sums: dict[str, dict[int, list[float]]] = {name: {} for name, *_ in SERIES}
    extra: dict[str, dict[int, list[float]]] = {"job_rss_mb": {}, "cgroup_limit_mb": {}, "cgroup_used_mb": {}}
    for row in read_rows(Path(reading.csv_path)):
        if row["event"] != "sample":
            continue
        t = number(row["t_s"])
        if t is None:
            continue
        bucket = int(t / width)
        for name, store in list(sums.items()) + list(extra.items()):
            value = number(row[name])
            if value is not None:
                acc = store.setdefault(bucket, [0.0, 0.0])
                acc[0] += value
                acc[1] += 1
    out = {}
    for name, store in list(sums.items()) + list(extra.items()):
        keys = sorted(store)
        out[name] = ([(k + 0.5) * width for k in keys], [store[k][0] / store[k][1] for k in keys])
    return out


def _draw(Figure, reading: WatchReading, lines: list[str], path: Path) -> str:
    data = _series(reading)
    span = max(reading.elapsed_s, 1.0)
    scale, unit = (3600.0, "hours") if span >= 7200 else (60.0, "minutes") if span >= 120 else (1.0, "seconds")
    heights = [1.0 if data[name][0] else 0.3 for name, *_ in SERIES]  # a series not read: a short panel saying why
    fig = Figure(figsize=(11, 3.2 + 1.6 * sum(heights)), dpi=100, layout="constrained")
    axes = fig.subplots(len(SERIES), 1, sharex=True, height_ratios=heights)
    for ax, (name, label, colour, factor) in zip(axes, SERIES, strict=True):
        xs, ys = data[name]
        ax.plot([x / scale for x in xs], [y * factor for y in ys], color=colour, linewidth=1.0)
        ax.set_ylabel(f"rate ({reading.rate_unit})" if name == "rate" and reading.rate_unit else label, fontsize=9)
        ax.grid(True, alpha=0.3)
        if not xs:
            why = "no --rate-regex" if name == "rate" and not reading.rate_regex else \
                "nothing read" if name != "rate" else "the log printed no rate"
            if name in ("sm_clock_mhz", "power_w", "temperature_c") and reading.nvml_error:
                why = scrub.clip(f"NVML unavailable: {reading.nvml_error}", 90, mark="")
            ax.text(0.5, 0.5, f"{label.split(' (')[0]}: {why}", transform=ax.transAxes, ha="center", va="center",
                    color="gray")
            ax.set_yticks([])
            ax.set_ylabel("")
        if name == "rate" and reading.rate_reference:
            limit = reading.rate_reference * (1 - reading.max_drop_fraction)
            ax.axhline(reading.rate_reference, color="gray", linestyle=":", linewidth=1)
            ax.axhline(limit, color="#c62828", linestyle="--", linewidth=1)
            ax.text(0.005, limit, f" best - {reading.max_drop_fraction:.0%}: below = the rate fell", va="top",
                    transform=ax.get_yaxis_transform(), fontsize=8, color="#c62828")
        if name == "mem_available_mb":
            if ys:
                ax.set_ylim(0, max(ys) * factor * 1.08)  # from 0: how near the host came to running out
            job = ax.twinx()  # the job's own memory, on its own scale (GB beside a 128 GB host)
            for extra, label, style in (("job_rss_mb", "the job's RSS", "--"), ("cgroup_used_mb", "its cgroup's use", "-"),
                                        ("cgroup_limit_mb", "its cgroup's limit", ":")):
                rx, ry = data[extra]
                if rx:
                    job.plot([x / scale for x in rx], [y * factor for y in ry], color="#8d6e63", linewidth=1.0,
                             linestyle=style, label=label)
            if any(data[e][0] for e in ("job_rss_mb", "cgroup_used_mb")):
                job.set_ylabel("the job (GB)", fontsize=9, color="#8d6e63")
                job.set_ylim(bottom=0)
                job.legend(loc="lower right", fontsize=8)
            else:
                job.set_yticks([])
    shaded: set[int] = set()
    for event in reading.events:
        group = 0 if event.kind == "rate_drop" else event.gotcha
        colour, label = SHADES.get(group, ("#e0e0e0", ""))
        end = event.end_s if event.end_s is not None else span
        if end - event.start_s < span / 400:  # an instant (an OOM kill): a line, not a span
            for ax in axes:
                ax.axvline(event.start_s / scale, color=colour, linewidth=2)
            continue
        for i, ax in enumerate(axes):
            ax.axvspan(event.start_s / scale, end / scale, color=colour, alpha=0.45, linewidth=0,
                       label=label if i == 0 and group not in shaded else None)
        shaded.add(group)
    if shaded:
        axes[0].legend(loc="lower left", fontsize=8)
    axes[-1].set_xlabel(f"time since the watch began ({unit})")
    glines = [line for line in lines if not line.startswith("    ")]
    title = "\n".join(textwrap.shorten(line, 130) for line in glines[:3])
    fig.suptitle(title, fontsize=9.5, horizontalalignment="left", x=0.01)
    what = outward.line(" ".join([Path(reading.command[0]).name, *reading.command[1:]]), limit=90) \
        if reading.command else f"pid {reading.job_pid}"
    detail = [what, outward.line(reading.device or "no GPU read"), f"{hms(reading.elapsed_s)}", reading.end.how]
    axes[0].set_title(" · ".join(d for d in detail if d), fontsize=8.5, color="dimgray", loc="left")
    fig.savefig(path)
    return str(path)
